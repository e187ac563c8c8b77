//! Turning an HTTP request into an [`ApiRequest`]: who sent it (the API key, checked
//! first by [`Authenticated`]), its idempotency key, its parameters.
//!
//! The body is read with a hard limit ([`MAX_BODY_BYTES`], 413 beyond it) and parsed by
//! content type (form with bracket notation, or JSON; anything else is a 415); GET and
//! DELETE take their parameters from the query string and ignore idempotency keys. The
//! `Idempotency-Key` header is validated here (length, and in ietf mode an RFC 8941
//! quoted string), so handlers receive typed values only.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, Method, Request};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use super::headers;
use super::server::ConnControl;
use crate::app::Provider;
use crate::config::Config;
use crate::error::{ApiError, ErrorType, Status};
use crate::idempotency::key::IdempotencyKey;
use crate::idempotency::Mode;
use crate::pipeline::{self, Body as PipelineBody, Request as PipelineRequest};
use crate::resources::endpoint::Verb;
use crate::stripe::ids::{ApiKey, RequestId};
use crate::stripe::params::Params;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A parsed Stripe API request: what the pipeline needs, and what only the edge does.
pub struct ApiRequest {
    pub request: PipelineRequest,
    /// How its body reached the pipeline (always parsed, but for [`LaneRequest`]).
    pub body: PipelineBody,
    /// The `Idempotency-Key` header as sent (echoed back when it is exactly the key).
    pub key_header: Option<HeaderValue>,
    /// The connection the request came on, for faults that break it.
    pub connection: Option<Arc<ConnControl>>,
}

/// The rejection of [`ApiRequest`]: a Stripe-shaped error response.
pub struct Rejection(pub ApiError);

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

/// The API key of an authenticated request: extracted first by every `/v1` handler, so
/// a request without a valid key gets its 401 before anything else is looked at.
pub struct Authenticated(pub ApiKey);

impl FromRequestParts<Arc<Provider>> for Authenticated {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Provider>) -> Result<Self, Self::Rejection> {
        api_key(parts.headers.get(header::AUTHORIZATION), &state.config)
            .map(Self)
            .map_err(Rejection)
    }
}

impl FromRequest<Arc<Provider>> for ApiRequest {
    type Rejection = Rejection;

    async fn from_request(req: Request<Body>, state: &Arc<Provider>) -> Result<Self, Self::Rejection> {
        extract(req, state, false, None).await
    }
}

/// An [`ApiRequest`] whose keyed form body may come from the replay lane unparsed
/// ([`crate::pipeline::form_body`]): for handlers that read no parameter themselves
/// and hand the request and its body to [`crate::pipeline::run_body`].
pub struct LaneRequest(pub ApiRequest);

impl FromRequest<Arc<Provider>> for LaneRequest {
    type Rejection = Rejection;

    async fn from_request(req: Request<Body>, state: &Arc<Provider>) -> Result<Self, Self::Rejection> {
        extract(req, state, true, None).await.map(Self)
    }
}

impl LaneRequest {
    /// The request whose `Request-Id` is `request_id`; `connection` is the control of the
    /// connection it came on (none outside the server). Both are given, not read from its
    /// extensions: a request [`super::observe::Observe`] serves directly has none.
    pub async fn with_id(
        req: Request<Body>,
        state: &Arc<Provider>,
        request_id: RequestId,
        connection: Option<Arc<ConnControl>>,
    ) -> Result<Self, Rejection> {
        extract(req, state, true, Some((request_id, connection)))
            .await
            .map(Self)
    }
}

async fn extract(
    req: Request<Body>,
    state: &Arc<Provider>,
    lane: bool,
    given: Option<(RequestId, Option<Arc<ConnControl>>)>,
) -> Result<ApiRequest, Rejection> {
    let (parts, body) = req.into_parts();
    let (request_id, connection) = match given {
        Some(given) => given,
        None => (
            parts
                .extensions
                .get::<RequestId>()
                .copied()
                .unwrap_or_else(RequestId::generate),
            parts.extensions.get::<Arc<ConnControl>>().cloned(),
        ),
    };
    // Set by the handler from `Authenticated` (admin routes have none).
    let api_key = ApiKey::none();
    let reads_query = parts.method == Method::GET || parts.method == Method::DELETE;
    let mut key_headers = parts.headers.get_all(&headers::IDEMPOTENCY_KEY).iter();
    let key_header = key_headers.next().cloned();
    let several_keys = key_headers.next().is_some();
    let forced_fault = parts
        .headers
        .get(&headers::FAUXPAY_FAULT)
        .map(|v| v.to_str().unwrap_or("\u{fffd}").to_string());
    let (params, body) = if reads_query {
        let params = Params::from_form(parts.uri.query().unwrap_or("").as_bytes()).map_err(Rejection)?;
        (params, PipelineBody::Parsed(None))
    } else {
        let bytes = read_body(&parts, body, state.config.limits.body_timeout)
            .await
            .map_err(Rejection)?;
        let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        if lane && key_header.is_some() && forced_fault.is_none() && is_form(content_type) {
            pipeline::form_body(state, parts.uri.path(), true, bytes).map_err(Rejection)?
        } else {
            (
                parse_body(content_type, &bytes).map_err(Rejection)?,
                PipelineBody::Parsed(None),
            )
        }
    };
    let idempotency_key = if reads_query {
        None
    } else if several_keys {
        // Which one would be the key? Taking the first would silently ignore the other.
        return Err(Rejection(ApiError::invalid_request(
            "A request may carry one Idempotency-Key header; this one has several.",
            Some("Idempotency-Key".into()),
        )));
    } else {
        let raw = key_header.as_ref().map(|v| v.to_str().unwrap_or("\u{fffd}"));
        match raw {
            Some(raw) => Some(IdempotencyKey::from_header(raw, state.config.idempotency).map_err(Rejection)?),
            None if state.config.idempotency == Mode::Ietf && state.config.require_idempotency_key => {
                return Err(Rejection(
                    ApiError::invalid_request(
                        "This endpoint requires an Idempotency-Key header (fauxpay serve --idempotency ietf --require-idempotency-key).",
                        Some("Idempotency-Key".into()),
                    )
                    .with_code("idempotency_key_missing"),
                ))
            }
            None => None,
        }
    };
    let origin = origin(parts.headers.get(header::HOST));
    let verb = match parts.method {
        Method::GET => Verb::Get,
        Method::DELETE => Verb::Delete,
        _ => Verb::Post,
    };
    Ok(ApiRequest {
        request: PipelineRequest {
            request_id,
            api_key,
            verb,
            path: parts.uri.path().to_string(),
            idempotency_key,
            params,
            forced_fault,
            origin,
        },
        body,
        key_header,
        connection,
    })
}

/// `read` within `timeout`, armed only if `read` is still pending once the task has run
/// again. A body that came with its head is handed over by hyper in that same run (its
/// connection task reads it right after the handler first asks), so most requests never
/// arm a timer: arming one and clearing it cost ~500 instructions a request, a clock read
/// and the timer wheel's lock (bench/callgrind.sh replay). The yield wakes the task
/// itself, so a body that has not come yet still gets its timer on the next run.
async fn within<F: Future>(timeout: Duration, read: F) -> Result<F::Output, ()> {
    let mut read = std::pin::pin!(read);
    let mut yielded = false;
    let early = std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
        Poll::Ready(out) => Poll::Ready(Some(out)),
        Poll::Pending if !yielded => {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Poll::Pending => Poll::Ready(None),
    })
    .await;
    match early {
        Some(out) => Ok(out),
        None => tokio::time::timeout(timeout, read).await.map_err(|_| ()),
    }
}

/// Reads a request body of at most [`MAX_BODY_BYTES`] within `timeout`: a declared
/// `Content-Length` beyond the cap is a 413 at once (nothing is read), a body that grows
/// beyond it (chunked) a 413 as soon as it does, a malformed one (a bad chunk size) a
/// 400, and one that does not end in time a 408.
pub async fn read_body(parts: &Parts, body: Body, timeout: Duration) -> Result<bytes::Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            Status::PayloadTooLarge,
            ErrorType::InvalidRequestError,
            format!("Request body is too large: at most {MAX_BODY_BYTES} bytes are accepted."),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    match within(timeout, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        // Over the cap is a 413; anything else (a malformed chunk size, a body cut short)
        // is the client's malformed request, a 400.
        Ok(Err(e)) => {
            let inner = e.into_inner();
            if std::error::Error::source(&*inner)
                .into_iter()
                .chain(std::iter::once(&*inner as &(dyn std::error::Error + 'static)))
                .any(|e| e.is::<http_body_util::LengthLimitError>())
            {
                Err(too_large())
            } else {
                Err(ApiError::new(
                    Status::BadRequest,
                    ErrorType::InvalidRequestError,
                    format!("The request body could not be read: {inner}."),
                ))
            }
        }
        Err(_) => Err(ApiError::new(
            Status::RequestTimeout,
            ErrorType::InvalidRequestError,
            format!(
                "The request body did not arrive within {} (fauxpay serve --body-timeout).",
                humantime::format_duration(timeout)
            ),
        )),
    }
}

/// `http://{Host}`, when the `Host` header is a plain host name or address with an
/// optional port (anything else is ignored: it ends up in URLs fauxpay hands out). The
/// last origin each thread saw is reused, so a request costs no allocation for it.
pub fn origin(host: Option<&HeaderValue>) -> Option<Arc<str>> {
    let host = host?.as_bytes();
    let plain = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']' | b'_');
    if host.is_empty() || host.len() > 255 || !host.iter().all(plain) {
        return None;
    }
    thread_local! {
        static LAST: std::cell::RefCell<Option<Arc<str>>> = const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some(o) if o.as_bytes().get(7..) == Some(host) => Some(o.clone()),
            _ => {
                // Checked above: ASCII.
                let o: Arc<str> = format!("http://{}", std::str::from_utf8(host).ok()?).into();
                *last = Some(o.clone());
                Some(o)
            }
        }
    })
}

/// The API key a request presents: a secret key checked against `--api-key` (or any
/// `sk_test_`/`rk_test_` key), a publishable key against `--publishable-key` (or any
/// `pk_test_` key).
pub fn api_key(header: Option<&HeaderValue>, config: &Config) -> Result<ApiKey, ApiError> {
    let publishable = |k: &str| k.starts_with("pk_");
    let required = |k: &str| {
        if publishable(k) {
            config.publishable_key.as_deref()
        } else {
            config.api_key.as_deref()
        }
    };
    let missing = || {
        ApiError::unauthorized("You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer sk_test_…').")
    };
    let value = header.and_then(|h| h.to_str().ok()).ok_or_else(missing)?;
    let decoded: String;
    let key: &str = if let Some(token) = value.strip_prefix("Bearer ") {
        token.trim()
    } else if let Some(b64) = value.strip_prefix("Basic ") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| missing())?;
        decoded = String::from_utf8(bytes).map_err(|_| missing())?;
        decoded.split(':').next().unwrap_or("")
    } else {
        return Err(missing());
    };
    if key.is_empty() {
        return Err(missing());
    }
    // Only for the error messages: the first 8 characters, an ellipsis, the last 4.
    let masked = || {
        let count = key.chars().count();
        key.chars()
            .take(8)
            .chain(['…'])
            .chain(key.chars().skip(count.saturating_sub(4)))
            .collect::<String>()
    };
    match required(key) {
        Some(r) if r == key => Ok(ApiKey::interned(key)),
        Some(_) => Err(ApiError::unauthorized(format!(
            "Invalid API Key provided: {}",
            masked()
        ))),
        None if ["sk_test_", "rk_test_", "pk_test_"].iter().any(|p| key.starts_with(p)) => Ok(ApiKey::interned(key)),
        None if ["sk_live_", "rk_live_", "pk_live_"].iter().any(|p| key.starts_with(p)) => Err(ApiError::unauthorized(
            "fauxpay is a test-mode provider: live keys are refused. Use an sk_test_ (or pk_test_) key.",
        )),
        None => Err(ApiError::unauthorized(format!(
            "Invalid API Key provided: {}. Use an sk_test_ key.",
            masked()
        ))),
    }
}

/// The media type of a `Content-Type` header (none: the empty string).
fn mime(content_type: Option<&str>) -> &str {
    content_type.map_or("", |c| c.split(';').next().unwrap_or("").trim())
}

/// Whether a body of `content_type` is parsed as a form (none given counts as one).
fn is_form(content_type: Option<&str>) -> bool {
    const FORM: &str = "application/x-www-form-urlencoded";
    // As the SDKs send it: one comparison (the case-blind one below costs ~300
    // instructions a request, bench/callgrind.sh replay).
    if content_type == Some(FORM) {
        return true;
    }
    let mime = mime(content_type);
    mime.is_empty() || mime.eq_ignore_ascii_case(FORM)
}

fn parse_body(content_type: Option<&str>, bytes: &[u8]) -> Result<Params, ApiError> {
    let mime = mime(content_type);
    if is_form(content_type) {
        Params::from_form(bytes)
    } else if mime.eq_ignore_ascii_case("application/json") {
        Params::from_json(bytes)
    } else {
        Err(ApiError::new(
            Status::UnsupportedMediaType,
            ErrorType::InvalidRequestError,
            format!(
                "Unsupported Content-Type '{}': send application/x-www-form-urlencoded or application/json.",
                mime.to_ascii_lowercase()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_by_bearer_or_basic() {
        let bearer = HeaderValue::from_static("Bearer sk_test_abc");
        let any = Config::default();
        let fixed = |secret: &str, publishable: &str| Config {
            api_key: Some(secret.into()),
            publishable_key: Some(publishable.into()),
            ..Config::default()
        };
        assert_eq!(api_key(Some(&bearer), &any).unwrap().as_str(), "sk_test_abc");
        let basic = HeaderValue::from_str(&format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("sk_test_abc:")
        ))
        .unwrap();
        assert_eq!(api_key(Some(&basic), &any).unwrap().as_str(), "sk_test_abc");
        assert_eq!(api_key(None, &any).unwrap_err().status, Status::Unauthorized);
        assert!(api_key(Some(&HeaderValue::from_static("Bearer sk_live_x")), &any).is_err());
        assert!(api_key(Some(&bearer), &fixed("sk_test_other", "pk_test_p")).is_err());
        assert!(api_key(Some(&bearer), &fixed("sk_test_abc", "pk_test_p")).is_ok());
        let pk = HeaderValue::from_static("Bearer pk_test_p");
        assert!(api_key(Some(&pk), &any).is_ok());
        assert!(api_key(Some(&pk), &fixed("sk_test_abc", "pk_test_p")).is_ok());
        assert!(api_key(Some(&pk), &fixed("sk_test_abc", "pk_test_other")).is_err());
        assert!(api_key(Some(&HeaderValue::from_static("Bearer pk_live_x")), &any).is_err());
    }

    #[test]
    fn origins_come_from_plain_hosts_only() {
        let of = |h: &'static str| origin(Some(&HeaderValue::from_static(h))).map(|o| o.to_string());
        assert_eq!(of("127.0.0.1:12111").as_deref(), Some("http://127.0.0.1:12111"));
        assert_eq!(of("fauxpay:12111").as_deref(), Some("http://fauxpay:12111"));
        assert_eq!(
            of("127.0.0.1:12111").as_deref(),
            Some("http://127.0.0.1:12111"),
            "reused"
        );
        assert_eq!(of("[::1]:80").as_deref(), Some("http://[::1]:80"));
        for hostile in ["a\"b", "x/y", "a b", "evil.com/<script>", "u@h", ""] {
            assert_eq!(of(hostile), None, "{hostile}");
        }
        assert_eq!(origin(None), None);
    }

    #[test]
    fn bodies_parse_by_content_type() {
        assert!(parse_body(None, b"amount=1").unwrap().contains("amount"));
        assert!(parse_body(Some("application/json; charset=utf-8"), br#"{"amount":1}"#)
            .unwrap()
            .contains("amount"));
        assert_eq!(
            parse_body(Some("text/plain"), b"x").unwrap_err().status,
            Status::UnsupportedMediaType
        );
    }
}
