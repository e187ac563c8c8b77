//! Admission: what the idempotency layer says about a request on its arrival (run it
//! holding its key's claim, replay the stored response, or refuse it: 409 while the key
//! is in flight, 400/422 when it was used for another request), and what a key stores
//! for a request that ran. A function of plain values, unit-tested without sockets in
//! the pipeline's tests.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::app::Provider;
use crate::error::{ApiError, ErrorType, Status};
use crate::idempotency::key::{IdempotencyKey, Mode};
use crate::idempotency::store::{Begin, Claim, Fingerprint, StoredBody, StoredResponse};
use crate::reply::Reply;
use crate::resources::endpoint::Endpoint;
use crate::stripe::ids::{ApiKey, ObjectId, RequestId};
use crate::stripe::params::Params;

/// A request as admission sees it: who sent it, its key, where, and what.
pub struct Arrival<'a> {
    pub api_key: &'a ApiKey,
    pub key: Option<&'a IdempotencyKey>,
    /// The request's path, as sent (`/v1/payment_intents/pi_…/confirm`).
    pub path: &'a str,
    pub params: &'a Params,
    /// The request's fingerprint, when the pipeline already has it (from the replay
    /// lane, or to remember it there); else admission computes it from `params`.
    pub fingerprint: Option<Fingerprint>,
    /// The provider's time on arrival (its [`Clock`](crate::state::clock::Clock)).
    pub now: std::time::Instant,
}

/// The fingerprint a request to `endpoint` at `path` (as sent) with `params` is judged by
/// when its key comes back.
pub fn fingerprint(endpoint: &Endpoint, path: &str, params: &Params) -> Fingerprint {
    Fingerprint::of(endpoint.path, endpoint.verb.as_str(), path, params)
}

/// What a key stores for a request that ran: its result, or the 5xx a fault put in
/// its place after the commit (Stripe stores its 500s too).
pub fn stored_result(
    result: Result<Reply, ApiError>,
    injected_status: Option<u16>,
    label: Option<&str>,
    request_id: RequestId,
) -> StoredResponse {
    let result = match injected_status {
        Some(status) => Err(ApiError::injected(status, label)),
        None => result,
    };
    to_stored(result, request_id)
}

/// What the idempotency layer says about a request on its arrival.
pub enum Admission {
    /// Run the operation (holding the key's claim, if the request has a key).
    Fresh(Option<Claim>),
    /// A stored response to replay.
    Replay(StoredResponse),
    /// Refused: the key is in flight (409) or was used with other parameters.
    Refused(ApiError),
}

pub fn admit(app: &Provider, req: &Arrival<'_>, endpoint: &Endpoint) -> Admission {
    let key = match req.key {
        Some(key) if endpoint.verb.is_write() => key,
        _ => return Admission::Fresh(None),
    };
    let fingerprint = req
        .fingerprint
        .unwrap_or_else(|| fingerprint(endpoint, req.path, req.params));
    match app.idempotency.begin(req.api_key, key, fingerprint, req.now) {
        Begin::Proceed(claim) => Admission::Fresh(Some(claim)),
        Begin::Replay(stored) => Admission::Replay(stored),
        Begin::InUse => {
            app.metrics.in_flight_conflicts.inc();
            Admission::Refused(
                ApiError::new(
                    Status::Conflict,
                    ErrorType::IdempotencyError,
                    "There is currently another in-progress request using this Idempotency Key (probably means you sent two requests at once). Try again later.",
                )
                .with_code("idempotency_key_in_use")
                .retry_hint(true),
            )
        }
        Begin::Mismatch => {
            app.metrics.key_mismatches.inc();
            Admission::Refused(key_misused(
                app,
                format!(
                    "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{}' if you meant to execute a different request.",
                    key.as_str()
                ),
            ))
        }
        Begin::OtherEndpoint(tag) => {
            app.metrics.key_mismatches.inc();
            // The endpoints whose tags a test holds distinct (`resources`): the two lists
            // must stay the ones every idempotent route is declared in.
            let first = crate::resources::endpoints()
                .chain(crate::resources::fauxpay_endpoints())
                .map(|e| e.path)
                .find(|path| tag.is(path))
                .unwrap_or("another endpoint");
            Admission::Refused(key_misused(
                app,
                format!(
                    "Keys for idempotent requests can only be used for the same endpoint they were first used for ('{first}' vs '{}'). Try using a key other than '{}' if you meant to execute a different request.",
                    endpoint.path,
                    key.as_str()
                ),
            ))
        }
    }
}

/// A key reused for another request: 400 (Stripe) or 422 (the IETF draft).
fn key_misused(app: &Provider, message: String) -> ApiError {
    let status = match app.config.idempotency {
        Mode::Stripe => Status::BadRequest,
        Mode::Ietf => Status::UnprocessableEntity,
    };
    ApiError::new(status, ErrorType::IdempotencyError, message).retry_hint(false)
}

fn to_stored(result: Result<Reply, ApiError>, request_id: RequestId) -> StoredResponse {
    match result {
        Ok(Reply::Json(v)) => {
            // A list names no object; an expanded object names itself.
            let object = v.get("id").and_then(Value::as_str).and_then(ObjectId::parse);
            let bytes = Bytes::from(serde_json::to_vec(&*v).unwrap_or_default());
            StoredResponse::new(200, None, request_id, StoredBody::Bytes(Arc::new((bytes, object))))
        }
        Ok(reply) => StoredResponse::new(200, None, request_id, StoredBody::Object(reply)),
        Err(e) => {
            let object = error_object(&e);
            let bytes = Bytes::from(serde_json::to_vec(&e.body()).unwrap_or_default());
            StoredResponse::new(
                e.status.code(),
                e.should_retry,
                request_id,
                StoredBody::Bytes(Arc::new((bytes, object))),
            )
        }
    }
}

/// The object an error names: its payment intent or setup intent, else its charge.
fn error_object(e: &ApiError) -> Option<ObjectId> {
    let field = |name: &str| e.extra.iter().find(|(k, _)| *k == name).map(|(_, v)| v);
    let id = field("payment_intent")
        .or_else(|| field("setup_intent"))
        .and_then(|pi| pi.get("id"))
        .or_else(|| field("charge"))
        .and_then(Value::as_str)?;
    ObjectId::parse(id)
}
