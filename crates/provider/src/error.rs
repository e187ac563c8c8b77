//! Stripe-shaped API errors.
//!
//! Every failure the provider reports is an [`ApiError`]: an HTTP status plus the fields
//! of Stripe's error object (`type`, `code`, `decline_code`, `message`, `param`), so
//! Stripe's SDKs raise their usual exception classes. An error also knows whether it
//! arose while the endpoint was *executing* (a decline, an unexpected state: stored
//! under the idempotency key and replayed) or before it (a validation failure: never
//! stored), which is the line Stripe draws. The HTTP status is a [`Status`], a closed
//! set of what the API answers with; the edge turns it into the wire status.

use std::borrow::Cow;

use serde_json::{json, Value};

/// The statuses fauxpay's errors are answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    BadRequest,
    Unauthorized,
    PaymentRequired,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    /// The request body did not arrive in time.
    RequestTimeout,
    Conflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    UnprocessableEntity,
    TooManyRequests,
    InternalServerError,
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
}

impl Status {
    /// The numeric HTTP status.
    pub fn code(self) -> u16 {
        match self {
            Status::BadRequest => 400,
            Status::Unauthorized => 401,
            Status::PaymentRequired => 402,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::Conflict => 409,
            Status::PayloadTooLarge => 413,
            Status::UnsupportedMediaType => 415,
            Status::UnprocessableEntity => 422,
            Status::TooManyRequests => 429,
            Status::InternalServerError => 500,
            Status::BadGateway => 502,
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
        }
    }

    /// The 5xx a fault injects (500, 502, 503 or 504; anything else is a 500).
    pub fn server_error(code: u16) -> Self {
        match code {
            502 => Status::BadGateway,
            503 => Status::ServiceUnavailable,
            504 => Status::GatewayTimeout,
            _ => Status::InternalServerError,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// Stripe's error `type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// The variants are Stripe's own `type` values (`api_error`, `card_error`, …).
#[allow(clippy::enum_variant_names)]
pub enum ErrorType {
    ApiError,
    CardError,
    IdempotencyError,
    InvalidRequestError,
}

impl ErrorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::ApiError => "api_error",
            ErrorType::CardError => "card_error",
            ErrorType::IdempotencyError => "idempotency_error",
            ErrorType::InvalidRequestError => "invalid_request_error",
        }
    }
}

/// One Stripe-shaped error response.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {}: {message}", kind.as_str())]
pub struct ApiError {
    pub status: Status,
    pub kind: ErrorType,
    pub code: Option<Cow<'static, str>>,
    pub decline_code: Option<Cow<'static, str>>,
    pub message: String,
    pub param: Option<String>,
    /// Extra fields of the error object (`payment_intent`, `charge`, …).
    pub extra: Vec<(&'static str, Value)>,
    /// Whether the failure happened while the endpoint executed (so it is stored under
    /// the idempotency key), as opposed to during validation.
    pub executed: bool,
    /// `Stripe-Should-Retry` hint, when Stripe sends one.
    pub should_retry: Option<bool>,
}

impl ApiError {
    /// An injected 5xx: Stripe's `api_error`, as ambiguous as the real thing.
    pub fn injected(status: u16, label: Option<&str>) -> Self {
        Self::new(
            Status::server_error(status),
            ErrorType::ApiError,
            format!(
                "An unknown error occurred while processing this request (fauxpay: {}).",
                label.unwrap_or("injected error")
            ),
        )
        .executed()
    }

    pub fn new(status: Status, kind: ErrorType, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            code: None,
            decline_code: None,
            message: message.into(),
            param: None,
            extra: Vec::new(),
            executed: false,
            should_retry: None,
        }
    }

    pub fn invalid_request(message: impl Into<String>, param: Option<String>) -> Self {
        let mut e = Self::new(Status::BadRequest, ErrorType::InvalidRequestError, message);
        e.param = param;
        e
    }

    pub fn invalid_param(param: &str, message: impl Into<String>) -> Self {
        Self::invalid_request(message, Some(param.to_string())).with_code("parameter_invalid")
    }

    pub fn missing_param(param: &str) -> Self {
        Self::invalid_request(format!("Missing required param: {param}."), Some(param.to_string()))
            .with_code("parameter_missing")
    }

    pub fn unknown_object(kind: &str, id: &str, param: &str) -> Self {
        let mut e = Self::new(
            Status::NotFound,
            ErrorType::InvalidRequestError,
            format!("No such {kind}: '{id}'"),
        )
        .with_code("resource_missing");
        e.param = Some(param.to_string());
        e
    }

    /// An id passed as a parameter that names no object: 400, as Stripe answers.
    pub fn unknown_reference(kind: &str, id: &str, param: &str) -> Self {
        let mut e = Self::unknown_object(kind, id, param);
        e.status = Status::BadRequest;
        e
    }

    pub fn unexpected_state(message: impl Into<String>) -> Self {
        Self::invalid_request(message, None)
            .with_code("payment_intent_unexpected_state")
            .executed()
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(Status::Unauthorized, ErrorType::InvalidRequestError, message)
    }

    pub fn with_code(mut self, code: impl Into<Cow<'static, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    pub fn with_param(mut self, param: &str) -> Self {
        self.param = Some(param.to_string());
        self
    }

    pub fn with_extra(mut self, name: &'static str, value: Value) -> Self {
        self.extra.push((name, value));
        self
    }

    /// Marks the error as one produced while the endpoint executed (stored and replayed).
    pub fn executed(mut self) -> Self {
        self.executed = true;
        self
    }

    pub fn retry_hint(mut self, retry: bool) -> Self {
        self.should_retry = Some(retry);
        self
    }

    /// The JSON body Stripe sends: `{"error": {...}}`.
    pub fn body(&self) -> Value {
        let mut error = json!({
            "type": self.kind.as_str(),
            "message": self.message,
        });
        if let Some(obj) = error.as_object_mut() {
            if let Some(code) = &self.code {
                obj.insert("code".into(), json!(code));
                obj.insert(
                    "doc_url".into(),
                    json!(format!(
                        "https://stripe.com/docs/error-codes/{}",
                        code.replace('_', "-")
                    )),
                );
            }
            if let Some(d) = &self.decline_code {
                obj.insert("decline_code".into(), json!(d));
            }
            if let Some(p) = &self.param {
                obj.insert("param".into(), json!(p));
            }
            for (k, v) in &self.extra {
                obj.insert((*k).into(), v.clone());
            }
        }
        json!({ "error": error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_stripe_shape() {
        let e = ApiError::missing_param("amount");
        let b = e.body();
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert_eq!(b["error"]["param"], "amount");
        assert_eq!(b["error"]["code"], "parameter_missing");
        assert!(!e.executed);
        assert!(ApiError::unexpected_state("x").executed);
    }
}
