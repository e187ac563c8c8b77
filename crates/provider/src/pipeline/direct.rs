//! The request path without sockets, for measurement: a `/v1` write run through the
//! pipeline as a request is (the replay lane, faults, idempotency, the operation, the
//! request log), from
//! any thread of a runtime, with no connection, parser or response writer around it. The
//! benchmark's in-process scaling row drives it from one thread, then from two, to measure
//! contention inside the provider alone.

use std::sync::Arc;

use bytes::Bytes;

use super::{form_body, run_body, Delivery, Request};
use crate::app::Provider;
use crate::idempotency::key::IdempotencyKey;
use crate::resources::endpoint::{PathIds, Verb};
use crate::resources::endpoints;
use crate::stripe::ids::{ApiKey, RequestId};

/// Runs `POST path` (a `/v1` endpoint without ids in its path, e.g.
/// `/v1/payment_intents`) with the form `body` and `idempotency_key`, as `api_key`: the
/// status answered (0 when the connection would have been broken by a fault; 400 for a
/// body that does not parse, 404 for a path not served).
pub async fn post(app: &Arc<Provider>, api_key: &ApiKey, path: &str, idempotency_key: Option<&str>, body: &str) -> u16 {
    let Some(endpoint) = endpoints().find(|e| e.verb == Verb::Post && e.path == path) else {
        return 404;
    };
    let keyed = idempotency_key.is_some();
    let Ok((params, body)) = form_body(app, path, keyed, Bytes::copy_from_slice(body.as_bytes())) else {
        return 400;
    };
    let request = Request {
        request_id: RequestId::generate(),
        api_key: api_key.clone(),
        verb: Verb::Post,
        path: path.to_string(),
        idempotency_key: idempotency_key.and_then(|k| IdempotencyKey::parse(k).ok()),
        params,
        forced_fault: None,
        origin: None,
    };
    match run_body(app, request, body, endpoint, PathIds::default()).await {
        Delivery::Send(answer) | Delivery::Dribble(answer, _) => answer.status,
        Delivery::Abort(_) | Delivery::Hold(_) => 0,
    }
}
