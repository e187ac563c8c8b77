//! The life of one API request: faults before the commit, Stripe's idempotency layer,
//! the operation itself, faults after the commit, and the request log.
//!
//! Every `/v1` handler calls [`execute`]. Before the commit a fault may delay the
//! request, close or reset its connection, hold it, or answer a 5xx or a 429: nothing is
//! charged and nothing is stored. A write's idempotency key is claimed on arrival, so a
//! request held that way is in flight for its key (409 to a concurrent one); then the
//! operation runs, its response is stored and later replayed (400/422 on a mismatch).
//! After the commit the money has moved and the response is stored; a fault may still
//! keep it from the client (dropped, reset, held), dribble it, or replace it with a 5xx —
//! which is then what the key replays, as Stripe stores its 500s.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::attempt::Attempt;
use super::error::{ApiError, ErrorType};
use super::extract::ApiRequest;
use super::fault_injection::{retry_after_secs, Outcome, Plan, PlanInput, RequestRecord};
use super::headers;
use super::idempotency::{Begin, Claim, Fingerprint, Mode, StoredBody, StoredResponse};
use super::ids::ObjectId;
use super::ledger::now_ms;
use super::metrics::Metrics;
use super::payments::{Payments, Reply};
use super::server::{Abort, Hold};
use super::Provider;
use crate::faults::Fault;

/// Whether an endpoint changes state (and so honours idempotency keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Counts a request in `fauxpay_api_requests_in_flight` until dropped (owned, so that a
/// held request's hold can keep it).
struct Executing(Arc<Provider>);

impl Executing {
    fn start(app: &Arc<Provider>) -> Self {
        app.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
        Self(app.clone())
    }
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.0.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `op` for `req` with fault injection and idempotency, and answers.
pub async fn execute(
    app: &Arc<Provider>,
    mut req: ApiRequest,
    access: Access,
    op: impl FnOnce(&Payments, &ApiRequest, &Attempt) -> Result<Reply, ApiError>,
) -> Response {
    let in_flight = Executing::start(app);
    let correlation_id = app.payments.correlate.of(&req.params);
    let plan = match app.faults.plan(&PlanInput {
        method: req.method.as_str(),
        path: &req.path,
        params: &req.params,
        idempotency_key: req.idempotency_key.as_ref(),
        correlation_id: correlation_id.as_ref(),
        forced: req.forced_fault.as_deref(),
    }) {
        Ok(plan) => plan,
        Err(e) => return error_response(&e),
    };
    // The key is claimed on arrival, so a request held by latency or a fault is "in
    // flight": a concurrent request with the same key gets 409, as at Stripe.
    let admission = admit(app, &req, access);
    let mut record = RequestRecord {
        seq: 0,
        request_id: req.request_id,
        time_ms: now_ms(),
        method: req.method.clone(),
        path: std::mem::take(&mut req.path).into_boxed_str(),
        identity: plan.identity.clone(),
        attempt: plan.attempt,
        idempotency_key: req.idempotency_key.clone(),
        correlation_id,
        fault: plan.label.clone(),
        outcome: Outcome::Pending,
        committed_status: None,
        replayed: false,
        object: None,
    };
    sleep(plan.decision.latency_before).await;

    if let Some(fault) = plan.before_commit() {
        // Returning drops any claim: nothing was charged, nothing is stored.
        return match fault {
            Fault::Error { status, .. } => finish(app, record, error_response(&injected_error(*status, &plan))),
            Fault::RateLimit { retry_after } => finish(app, record, rate_limited(*retry_after)),
            // A held request keeps its claim on the key, and counts as in flight.
            _ => break_connection(app, record, req, fault, Box::new((in_flight, admission))).await,
        };
    }

    let attempt = Attempt {
        request_id: req.request_id,
        idempotency_key: req.idempotency_key.clone(),
        correlation_id: record.correlation_id.clone(),
        fault: plan.label.clone(),
        decline: plan.decline(),
    };
    let fresh = match admission {
        Admission::Refused(resp) => {
            record.committed_status = Some(resp.status().as_u16());
            resp
        }
        Admission::Replay(stored) => {
            record.replayed = true;
            record.committed_status = Some(stored.status);
            record.object = stored.object();
            Metrics::bump(&app.metrics.replays);
            stored_response(&stored, key_echo(&req), true)
        }
        Admission::Fresh(claim) => match op(&app.payments, &req, &attempt) {
            // Validation failures are not stored: dropping the claim frees the key.
            Err(e) if !e.executed => {
                record.committed_status = Some(e.status.as_u16());
                error_response(&e)
            }
            result => {
                record.committed_status = Some(result.as_ref().map_or_else(|e| e.status.as_u16(), |_| 200));
                // An error after the commit is what the key stores, as Stripe stores its 500s.
                let result = match plan.after_commit() {
                    Some(Fault::Error { status, .. }) => Err(injected_error(*status, &plan)),
                    _ => result,
                };
                let stored = to_stored(result, &req);
                record.object = stored.object();
                let echo = claim.and_then(|c| {
                    c.complete(stored.clone());
                    key_echo(&req)
                });
                stored_response(&stored, echo, false)
            }
        },
    };

    sleep(plan.decision.latency_after).await;
    match plan.after_commit() {
        None => finish(app, record, fresh),
        Some(Fault::Error { status, .. }) => finish(app, record, error_response(&injected_error(*status, &plan))),
        Some(Fault::SlowBody { duration }) => finish(app, record, dribble(fresh, *duration).await),
        Some(fault) => break_connection(app, record, req, fault, Box::new(in_flight)).await,
    }
}

/// What the idempotency layer says about a request on its arrival.
enum Admission {
    /// Run the operation (holding the key's claim, if the request has a key).
    Fresh(Option<Claim>),
    /// A stored response to replay.
    Replay(StoredResponse),
    /// Refused: the key is in flight (409) or was used with other parameters.
    Refused(Response),
}

fn admit(app: &Provider, req: &ApiRequest, access: Access) -> Admission {
    let key = match (&req.idempotency_key, access) {
        (Some(key), Access::Write) => key,
        _ => return Admission::Fresh(None),
    };
    let fingerprint = Fingerprint::of(req.method.as_str(), &req.path, &req.params);
    match app.idempotency.begin(&req.api_key, key, fingerprint, Instant::now()) {
        Begin::Proceed(claim) => Admission::Fresh(Some(claim)),
        Begin::Replay(stored) => Admission::Replay(stored),
        Begin::InUse => {
            Metrics::bump(&app.metrics.in_flight_conflicts);
            let e = ApiError::new(
                StatusCode::CONFLICT,
                ErrorType::IdempotencyError,
                "There is currently another in-progress request using this Idempotency Key (probably means you sent two requests at once). Try again later.",
            )
            .with_code("idempotency_key_in_use")
            .retry_hint(true);
            Admission::Refused(error_response(&e))
        }
        Begin::Mismatch => {
            Metrics::bump(&app.metrics.key_mismatches);
            let status = match app.config.idempotency {
                Mode::Stripe => StatusCode::BAD_REQUEST,
                Mode::Ietf => StatusCode::UNPROCESSABLE_ENTITY,
            };
            let e = ApiError::new(
                status,
                ErrorType::IdempotencyError,
                format!(
                    "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{}' if you meant to execute a different request.",
                    key.as_str()
                ),
            )
            .retry_hint(false);
            Admission::Refused(error_response(&e))
        }
    }
}

fn to_stored(result: Result<Reply, ApiError>, req: &ApiRequest) -> StoredResponse {
    match result {
        Ok(Reply::Json(v)) => {
            let bytes = Bytes::from(serde_json::to_vec(&*v).unwrap_or_default());
            StoredResponse::new(200, None, req.request_id, StoredBody::Bytes(Arc::new((bytes, None))))
        }
        Ok(reply) => StoredResponse::new(200, None, req.request_id, StoredBody::Object(reply)),
        Err(e) => {
            let object = error_object(&e);
            let bytes = Bytes::from(serde_json::to_vec(&e.body()).unwrap_or_default());
            StoredResponse::new(
                e.status.as_u16(),
                e.should_retry,
                req.request_id,
                StoredBody::Bytes(Arc::new((bytes, object))),
            )
        }
    }
}

/// The object an error names: its payment intent, else its charge.
fn error_object(e: &ApiError) -> Option<ObjectId> {
    let field = |name: &str| e.extra.iter().find(|(k, _)| *k == name).map(|(_, v)| v);
    let id = field("payment_intent")
        .and_then(|pi| pi.get("id"))
        .or_else(|| field("charge"))
        .and_then(Value::as_str)?;
    ObjectId::parse(id)
}

/// The `Idempotency-Key` header echoed back: the request's own header when it is the key.
fn key_echo(req: &ApiRequest) -> Option<HeaderValue> {
    req.key_header
        .clone()
        .or_else(|| HeaderValue::from_str(req.idempotency_key.as_ref()?.as_str()).ok())
}

fn stored_response(stored: &StoredResponse, key: Option<HeaderValue>, replayed: bool) -> Response {
    let mut resp = Response::new(Body::from(stored.bytes()));
    *resp.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(k) = key {
        h.insert(headers::IDEMPOTENCY_KEY.clone(), k);
    }
    if let Some(retry) = stored.should_retry {
        h.insert(
            headers::STRIPE_SHOULD_RETRY.clone(),
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    if replayed {
        h.insert(headers::IDEMPOTENT_REPLAYED.clone(), HeaderValue::from_static("true"));
        if let Ok(v) = HeaderValue::from_str(&stored.request_id.as_str()) {
            h.insert(headers::ORIGINAL_REQUEST.clone(), v);
        }
    }
    resp
}

/// A Stripe-shaped error response (with `Stripe-Should-Retry` when the error has a hint).
pub fn error_response(e: &ApiError) -> Response {
    let mut resp = (e.status, axum::Json(e.body())).into_response();
    if let Some(retry) = e.should_retry {
        resp.headers_mut().insert(
            headers::STRIPE_SHOULD_RETRY.clone(),
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    resp
}

/// An injected 5xx: Stripe's `api_error`, as ambiguous as the real thing.
fn injected_error(status: u16, plan: &Plan) -> ApiError {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ApiError::new(
        status,
        ErrorType::ApiError,
        format!(
            "An unknown error occurred while processing this request (fauxpay: {}).",
            plan.label.as_deref().unwrap_or("injected error")
        ),
    )
    .executed()
}

fn rate_limited(retry_after: Duration) -> Response {
    let e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorType::InvalidRequestError,
        "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.",
    )
    .with_code("rate_limit")
    .retry_hint(true);
    let mut resp = error_response(&e);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs(retry_after)));
    resp
}

/// Closes, resets or holds the connection; the response is never sent. `keep` lives as
/// long as the request does (until the connection closes).
async fn break_connection(
    app: &Provider,
    mut record: RequestRecord,
    req: ApiRequest,
    fault: &Fault,
    keep: Box<dyn std::any::Any + Send>,
) -> Response {
    let (how, outcome, hold) = match fault {
        Fault::Reset { .. } => (Abort::Reset, "reset", None),
        Fault::Hang { hang, .. } => (Abort::Close, "hung", Some(*hang)),
        _ => (Abort::Close, "dropped", None),
    };
    record.outcome = Outcome::Broken(outcome);
    app.faults.record(record);
    let Some(connection) = req.connection.clone() else {
        return error_response(&ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorType::ApiError,
            "This fault needs fauxpay's own server to act on the connection.",
        ));
    };
    drop(req);
    match hold {
        // The connection's task keeps the socket, and `keep`, until the hold ends (a
        // timer, no CPU), the client goes away or the server stops; this future, the
        // request's state and the HTTP buffers are dropped now: 10,000 held requests
        // stay cheap.
        Some(duration) => connection.hold(Hold { duration, keep }),
        None => connection.abort(how),
    }
    std::future::pending::<Response>().await
}

/// Sends `resp`'s body in pieces spread over `duration`.
async fn dribble(resp: Response, duration: Duration) -> Response {
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let pieces = bytes.len().clamp(1, 20);
    let step = duration / pieces as u32;
    let size = bytes.len().div_ceil(pieces).max(1);
    let chunks: Vec<Bytes> = (0..bytes.len())
        .step_by(size)
        .map(|i| bytes.slice(i..(i + size).min(bytes.len())))
        .collect();
    let stream = futures_util::stream::unfold((chunks.into_iter(), true), move |(mut it, first)| async move {
        let chunk = it.next()?;
        if !first {
            tokio::time::sleep(step).await;
        }
        Some((Ok::<_, Infallible>(chunk), (it, false)))
    });
    let mut resp = Response::from_parts(parts, Body::from_stream(stream));
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp
}

fn finish(app: &Provider, mut record: RequestRecord, resp: Response) -> Response {
    record.outcome = Outcome::Status(resp.status().as_u16());
    app.faults.record(record);
    resp
}

async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}
