//! [`Gateway`] over a Stripe-compatible HTTP API (the fauxpay provider, or Stripe itself).
//!
//! A charge is `POST {base}/v1/payment_intents` form-encoded with `amount`, `currency`,
//! `confirm=true`, the payment method forwarded unchanged and `metadata[order_id]`, an
//! `Authorization: Bearer sk_…` header and, when given, an `Idempotency-Key`. Every call is
//! bounded by the provider timeout. [`classify`] maps the provider's answer to a
//! [`ChargeOutcome`] without HTTP; the search is `GET
//! {base}/v1/payment_intents/search?query=metadata['order_id']:'<id>'`, following pages.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;

use super::gateway::{
    ChargeOutcome, ChargeRequest, Completion, FoundPayment, Gateway, GatewayError, OpenPayment, OpenedPayment,
    SessionState,
};
use super::order::{OrderId, PaymentIntentId};
use super::webhook::expandable_id;
use fauxpay_error_chain::error_chain;

/// At most this many search pages are read for one order (100 intents each).
const MAX_SEARCH_PAGES: usize = 10;

/// The most of one provider answer that is read (a search page of 100 intents is ~300 KB).
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Why an answer's body could not be had.
enum Unread {
    /// Longer than [`MAX_ANSWER_BYTES`]: the rest was not read.
    TooLong,
    Failed {
        reason: String,
        timed_out: bool,
    },
}

/// `resp`'s body, read with a cap (http-body-util's `Limited`): a provider that answers an
/// endless body costs at most the cap.
async fn read_capped(resp: reqwest::Response) -> Result<bytes::Bytes, Unread> {
    use http_body_util::BodyExt;
    let body = http::Response::<reqwest::Body>::from(resp).into_body();
    match http_body_util::Limited::new(body, MAX_ANSWER_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Unread::TooLong),
        Err(e) => Err(Unread::Failed {
            timed_out: e
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout),
            reason: error_chain(&*e),
        }),
    }
}

pub struct StripeGateway {
    http: reqwest::Client,
    base: String,
    api_key: String,
}

impl StripeGateway {
    pub fn new(base_url: &str, api_key: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
        })
    }
}

#[async_trait]
impl Gateway for StripeGateway {
    async fn charge(&self, req: &ChargeRequest) -> ChargeOutcome {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("amount", &req.amount.to_string())
            .append_pair("currency", req.currency.as_str())
            .append_pair("confirm", "true")
            .append_pair("payment_method", req.payment_method.as_str())
            .append_pair("metadata[order_id]", req.order_id.as_str())
            .finish();
        let mut rb = self
            .http
            .post(format!("{}/v1/payment_intents", self.base))
            .bearer_auth(&self.api_key)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body);
        if let Some(key) = &req.idempotency_key {
            rb = rb.header("Idempotency-Key", key);
        }
        let resp = match rb.send().await {
            Ok(resp) => resp,
            Err(e) if e.is_connect() => {
                return ChargeOutcome::NotCharged {
                    reason: format!("cannot connect to the provider: {e}"),
                }
            }
            Err(e) => {
                return ChargeOutcome::Unknown {
                    reason: format!("the provider's answer was lost: {}", error_chain(&e)),
                    timed_out: e.is_timeout(),
                }
            }
        };
        let status = resp.status().as_u16();
        match read_capped(resp).await {
            Ok(body) => classify(status, &body),
            Err(Unread::TooLong) => ChargeOutcome::Unknown {
                reason: format!("the provider's {status} answer is longer than {MAX_ANSWER_BYTES} bytes; not read"),
                timed_out: false,
            },
            Err(Unread::Failed { reason, timed_out }) => ChargeOutcome::Unknown {
                reason: format!("reading the provider's {status} answer failed: {reason}"),
                timed_out,
            },
        }
    }

    async fn open_payment(&self, open: &OpenPayment) -> Result<OpenedPayment, GatewayError> {
        let (path, body, key) = open_request(open);
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.api_key)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("Idempotency-Key", key)
            .body(body)
            .send()
            .await;
        let body = success_json(resp, "opening").await?;
        let text = |field: &str| body[field].as_str().map(str::to_string);
        Ok(OpenedPayment {
            id: text("id").ok_or_else(|| GatewayError("the answer has no id".into()))?,
            client_secret: text("client_secret"),
            url: text("url"),
        })
    }

    async fn checkout_session(&self, id: &str) -> Result<Option<SessionState>, GatewayError> {
        // A session id is `cs_` and letters, digits or underscores (checked by the caller,
        // so it is safe in the path).
        let resp = self
            .http
            .get(format!("{}/v1/checkout/sessions/{id}", self.base))
            .bearer_auth(&self.api_key)
            .send()
            .await;
        if resp
            .as_ref()
            .is_ok_and(|r| r.status() == reqwest::StatusCode::NOT_FOUND)
        {
            return Ok(None);
        }
        let body = success_json(resp, "session").await?;
        let pi = expandable_id(&body["payment_intent"]);
        Ok(Some(SessionState {
            order_id: body["metadata"]["order_id"]
                .as_str()
                .and_then(|o| OrderId::parse(o).ok()),
            payment_intent: pi.map(PaymentIntentId::new),
            paid: body["payment_status"] == "paid",
        }))
    }

    async fn find_payments(&self, order: &OrderId) -> Result<Vec<FoundPayment>, GatewayError> {
        // Order ids are restricted to `A-Z a-z 0-9 _ . : -`, so quoting them is safe.
        let query = format!("metadata['order_id']:'{order}'");
        let mut found = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_SEARCH_PAGES {
            let mut params = vec![("query", query.as_str()), ("limit", "100")];
            if let Some(p) = &page {
                params.push(("page", p.as_str()));
            }
            let resp = self
                .http
                .get(format!("{}/v1/payment_intents/search", self.base))
                .bearer_auth(&self.api_key)
                .query(&params)
                .send()
                .await;
            let body = success_json(resp, "search").await?;
            let data = body["data"]
                .as_array()
                .ok_or_else(|| GatewayError("the search result has no `data` list".into()))?;
            found.extend(data.iter().filter_map(found_payment));
            match body["next_page"].as_str() {
                Some(next) if body["has_more"].as_bool() == Some(true) => page = Some(next.to_string()),
                _ => return Ok(found),
            }
        }
        Err(GatewayError(format!(
            "more than {} payment intents for order {order}",
            MAX_SEARCH_PAGES * 100
        )))
    }
}

/// The JSON of a successful answer to a read or an opening (`what`: `search`,
/// `opening`), read with the cap; anything else is the call's failure.
async fn success_json(resp: reqwest::Result<reqwest::Response>, what: &str) -> Result<Value, GatewayError> {
    let resp = resp.map_err(|e| GatewayError(error_chain(&e)))?;
    let status = resp.status();
    let body = match read_capped(resp).await {
        Ok(body) => body,
        Err(Unread::TooLong) => {
            return Err(GatewayError(format!(
                "the {what} answer is longer than {MAX_ANSWER_BYTES} bytes; not read"
            )))
        }
        Err(Unread::Failed { reason, .. }) => return Err(GatewayError(reason)),
    };
    let body: Value = serde_json::from_slice(&body).map_err(|e| GatewayError(error_chain(&e)))?;
    if !status.is_success() {
        return Err(GatewayError(format!("{status}: {}", error_message(&body))));
    }
    Ok(body)
}

/// The call that opens `open`: its path, its form body, and its idempotency key (one
/// order opens one payment: a retried opening gets the same one back).
fn open_request(open: &OpenPayment) -> (&'static str, String, String) {
    let mut form = form_urlencoded::Serializer::new(String::new());
    let order = open.order_id.as_str();
    let amount = open.amount.to_string();
    let path = match &open.completion {
        Completion::Intent => {
            form.append_pair("amount", &amount)
                .append_pair("currency", open.currency.as_str())
                .append_pair("metadata[order_id]", order);
            "/v1/payment_intents"
        }
        Completion::Session {
            name,
            success_url,
            cancel_url,
        } => {
            form.append_pair("mode", "payment")
                .append_pair("line_items[0][price_data][currency]", open.currency.as_str())
                .append_pair("line_items[0][price_data][unit_amount]", &amount)
                .append_pair("line_items[0][price_data][product_data][name]", name)
                .append_pair("line_items[0][quantity]", "1")
                .append_pair("success_url", success_url)
                .append_pair("cancel_url", cancel_url)
                .append_pair("metadata[order_id]", order)
                .append_pair("payment_intent_data[metadata][order_id]", order);
            "/v1/checkout/sessions"
        }
    };
    let key = match open.completion {
        Completion::Intent => format!("open-intent-{order}"),
        Completion::Session { .. } => format!("open-session-{order}"),
    };
    (path, form.finish(), key)
}

fn found_payment(pi: &Value) -> Option<FoundPayment> {
    Some(FoundPayment {
        payment_intent: PaymentIntentId::new(pi["id"].as_str()?),
        status: pi["status"].as_str()?.to_string(),
        amount: pi["amount"].as_u64().unwrap_or(0),
        currency: pi["currency"].as_str().unwrap_or_default().to_string(),
        created: pi["created"].as_i64().unwrap_or(0),
    })
}

fn error_message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or("no error message")
        .to_string()
}

/// Classifies the provider's answer to a charge.
pub fn classify(status: u16, body: &[u8]) -> ChargeOutcome {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = &json["error"];
    let text = |v: &Value| v.as_str().map(str::to_string);
    let message = text(&error["message"]).unwrap_or_else(|| format!("the provider answered {status}"));
    match status {
        200 => match (json["id"].as_str(), json["status"].as_str()) {
            (Some(id), Some("succeeded")) => ChargeOutcome::Succeeded {
                payment_intent: PaymentIntentId::new(id),
            },
            (Some(id), Some(other)) => ChargeOutcome::Unknown {
                reason: format!("payment intent {id} is `{other}`, not succeeded"),
                timed_out: false,
            },
            _ => ChargeOutcome::Unknown {
                reason: "the provider's 200 is not a payment intent".into(),
                timed_out: false,
            },
        },
        402 => ChargeOutcome::Declined {
            decline_code: text(&error["decline_code"])
                .or_else(|| text(&error["code"]))
                .unwrap_or_else(|| "card_declined".into()),
            message,
        },
        // A key stored with other parameters: something exists under our key.
        400 if error["type"] == "idempotency_error" => ChargeOutcome::Unknown {
            reason: format!("idempotency conflict at the provider: {message}"),
            timed_out: false,
        },
        400 => ChargeOutcome::Rejected {
            param: text(&error["param"]),
            message,
        },
        401 | 403 | 404 | 429 => ChargeOutcome::NotCharged {
            reason: format!("the provider answered {status}: {message}"),
        },
        // 409: a request with our key is still running; 422 (ietf): key conflict; 5xx: ambiguous.
        _ => ChargeOutcome::Unknown {
            reason: format!("the provider answered {status}: {message}"),
            timed_out: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: u16, body: &str) -> ChargeOutcome {
        classify(status, body.as_bytes())
    }

    #[test]
    fn definite_outcomes() {
        assert_eq!(
            outcome(200, r#"{"id":"pi_1","object":"payment_intent","status":"succeeded"}"#),
            ChargeOutcome::Succeeded {
                payment_intent: PaymentIntentId::new("pi_1")
            }
        );
        assert_eq!(
            outcome(
                402,
                r#"{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}}"#
            ),
            ChargeOutcome::Declined {
                decline_code: "insufficient_funds".into(),
                message: "Your card has insufficient funds.".into()
            }
        );
        assert!(matches!(
            outcome(400, r#"{"error":{"type":"invalid_request_error","param":"amount","message":"too small"}}"#),
            ChargeOutcome::Rejected { param: Some(p), .. } if p == "amount"
        ));
        assert!(matches!(
            outcome(429, r#"{"error":{"type":"rate_limit"}}"#),
            ChargeOutcome::NotCharged { .. }
        ));
    }

    #[test]
    fn ambiguous_outcomes_are_unknown() {
        for (status, body) in [
            (500, r#"{"error":{"type":"api_error","message":"boom"}}"#),
            (502, ""),
            (503, "not json"),
            (504, "{}"),
            (
                409,
                r#"{"error":{"type":"idempotency_error","code":"idempotency_key_in_use"}}"#,
            ),
            (
                400,
                r#"{"error":{"type":"idempotency_error","message":"other params"}}"#,
            ),
            (200, r#"{"id":"pi_1","status":"requires_action"}"#),
            (200, "garbage"),
        ] {
            assert!(
                matches!(outcome(status, body), ChargeOutcome::Unknown { .. }),
                "{status} {body}"
            );
        }
    }
}
