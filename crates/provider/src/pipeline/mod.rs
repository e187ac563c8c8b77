//! The life of one API request, as a value: faults before the commit, Stripe's
//! idempotency layer, the operation itself, faults after the commit, and the request
//! log; the result is a [`Delivery`] (what to do with the connection) that the HTTP edge
//! carries out. Nothing here knows HTTP.
//!
//! Before the commit a fault may delay the request, close or reset its connection, hold
//! it, or answer a 5xx or a 429: nothing is charged and nothing is stored. A write's
//! idempotency key is claimed on arrival, so a request held that way is in flight for
//! its key (409 to a concurrent one); then the operation runs, its response is stored
//! and later replayed (400/422 on a mismatch). After the commit the money has moved and
//! the response is stored; a fault may still keep it from the client (dropped, reset,
//! held), dribble it, or replace it with a 5xx, which is then what the key replays, as
//! Stripe stores its 500s.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fauxpay_faults::{Fault, When};

use crate::app::Provider;
use crate::durable::commit::{execute_logged, CountedAttempt, Logged, Written};
use crate::error::{ApiError, ErrorType, Status};
use crate::fault_injection::attempt::{Attempt, KeyKind};
use crate::fault_injection::{forced_by_params, retry_after_secs, PlanInput};
use crate::idempotency::admission::{admit, fingerprint as fingerprint_of, stored_result, Admission, Arrival};
use crate::idempotency::lane::{self, Known, RawKey};
use crate::idempotency::{Claim, IdempotencyKey, StoredResponse};
use crate::journal::{Outcome, RequestRecord};
use crate::resources::endpoint::{Call, Endpoint, PathIds, Verb};
use crate::state::clock::now_ms;
use crate::stripe::ids::{ApiKey, RequestId};
use crate::stripe::params::Params;

pub mod direct;
pub mod execute;
pub mod own;

use execute::execute;

/// A `/v1` request as the pipeline sees it: parsed, authenticated, HTTP-free.
pub struct Request {
    pub request_id: RequestId,
    /// The API key the request authenticated with.
    pub api_key: ApiKey,
    pub verb: Verb,
    pub path: String,
    pub idempotency_key: Option<IdempotencyKey>,
    pub params: crate::stripe::params::Params,
    /// The `Fauxpay-Fault` header: a fault this request forces on itself.
    pub forced_fault: Option<String>,
    /// `http://{Host}`: where the client reached fauxpay (see [`Attempt::origin`]).
    pub origin: Option<Arc<str>>,
}

/// A response to send: status, JSON body and the headers Stripe adds.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// `Stripe-Should-Retry`, when Stripe sends one.
    pub should_retry: Option<bool>,
    /// `Retry-After`, in whole seconds (429s).
    pub retry_after: Option<u64>,
    /// The idempotency key echoed in `Idempotency-Key`.
    pub echo_key: Option<IdempotencyKey>,
    /// When replayed, the request whose response this is (`Idempotent-Replayed: true`,
    /// `Original-Request`).
    pub replay_of: Option<RequestId>,
}

impl Answer {
    /// A Stripe-shaped error.
    pub fn error(e: &ApiError) -> Self {
        Self {
            status: e.status.code(),
            body: Bytes::from(serde_json::to_vec(&e.body()).unwrap_or_default()),
            should_retry: e.should_retry,
            retry_after: None,
            echo_key: None,
            replay_of: None,
        }
    }

    /// A stored response, as first sent or as replayed.
    fn stored(stored: &StoredResponse, echo_key: Option<IdempotencyKey>, replayed: bool) -> Self {
        Self {
            status: stored.status,
            body: stored.bytes(),
            should_retry: stored.should_retry,
            retry_after: None,
            echo_key,
            replay_of: replayed.then_some(stored.request_id),
        }
    }
}

/// How a connection ends without a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// Close the connection (FIN) without sending a response byte.
    Close,
    /// Reset the connection (RST): the client sees ECONNRESET.
    Reset,
}

/// A request held by a `hang`: what it keeps alive, and for how long.
pub struct Hold {
    pub duration: Duration,
    /// Dropped when the hold ends (an idempotency claim, an in-flight count…).
    pub keep: Box<dyn Any + Send>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
}

/// What to do with the connection once the pipeline has run.
#[derive(Debug)]
pub enum Delivery {
    /// Send the answer.
    Send(Answer),
    /// Send the answer, its body in pieces spread over the duration (`slow_body`).
    Dribble(Answer, Duration),
    /// End the connection without a response byte.
    Abort(Abort),
    /// Hold the connection without a response byte (`hang`), then close it.
    Hold(Hold),
}

/// Counts a request in `fauxpay_api_requests_in_flight` until dropped (owned, so that a
/// held request's hold can keep it), in the gauge's part it was counted in.
struct Executing {
    app: Arc<Provider>,
    part: usize,
}

impl Executing {
    fn start(app: &Arc<Provider>) -> Self {
        let part = app.metrics.in_flight.inc();
        Self { app: app.clone(), part }
    }
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.app.metrics.in_flight.dec_at(self.part);
    }
}

/// How a request's body reached the pipeline.
#[derive(Debug)]
pub enum Body {
    /// Parsed into the request's `params`; with its bytes' key when a replay of it may
    /// be remembered in the replay lane.
    Parsed(Option<RawKey>),
    /// Not parsed: a byte-identical request was replayed before and the replay lane knew
    /// what its bytes say. `bytes` are parsed only if the request must run (its key is
    /// free: new, expired or reset since), or if the profile in force when it is planned
    /// matches on parameters.
    Known { known: Known, bytes: Bytes },
}

/// A keyed form `POST` to `path` as the pipeline takes it: known from the replay lane and
/// not parsed, when a byte-identical request was replayed before on this thread, no
/// `Fauxpay-Fault` header asks for a fault and the fault profile matches on no parameter
/// (whose plan then needs none); else parsed, with its bytes' key so that a replay of it
/// can be remembered. `keyed`: it has an `Idempotency-Key` and no `Fauxpay-Fault`.
pub fn form_body(app: &Provider, path: &str, keyed: bool, bytes: Bytes) -> Result<(Params, Body), ApiError> {
    let raw = keyed
        .then(|| RawKey::of(&app.payments.correlate, path, &bytes))
        .flatten();
    // (The profile is looked at only for a body the lane knows: remembering is harmless.)
    if let Some(known) = raw
        .and_then(lane::recall)
        .filter(|_| !app.faults.current().reads_params())
    {
        return Ok((Params::default(), Body::Known { known, bytes }));
    }
    Ok((Params::from_form(&bytes)?, Body::Parsed(raw)))
}

/// Runs `endpoint` for `req` (with `ids` from its path) through fault injection and
/// idempotency; says what to do with the connection.
pub async fn run(app: &Arc<Provider>, req: Request, endpoint: &Endpoint, ids: PathIds<'_>) -> Delivery {
    run_body(app, req, Body::Parsed(None), endpoint, ids).await
}

/// [`run`], for a request whose body came as `body` ([`form_body`]).
pub async fn run_body(
    app: &Arc<Provider>,
    req: Request,
    body: Body,
    endpoint: &Endpoint,
    ids: PathIds<'_>,
) -> Delivery {
    let delivery = run_request(app, req, body, endpoint, ids).await;
    // With a data dir, nothing the answer shows may be lost in a crash: it waits until
    // every record appended so far (its own, and those of the changes it read) is durable.
    // While the log cannot be written (a full disk), a write answers 503 (its change is
    // held in memory and written once the disk allows: a retry with its key replays it);
    // a read answers as usual.
    if let Some(log) = app.durable() {
        if log.durable(log.appended()).await.is_err() && endpoint.verb.is_write() {
            app.metrics.data_log_refusals.inc();
            let why = log.degraded().unwrap_or_else(|| "it cannot be written".into());
            return match delivery {
                Delivery::Send(_) | Delivery::Dribble(..) => Delivery::Send(Answer::error(
                    &ApiError::new(
                        Status::ServiceUnavailable,
                        ErrorType::ApiError,
                        format!(
                            "fauxpay could not make this change durable: its data dir's log cannot be written ({why}). The change is held in memory and written once the disk allows; retry with the same idempotency key."
                        ),
                    )
                    .retry_hint(true),
                )),
                other => other,
            };
        }
    }
    delivery
}

async fn run_request(
    app: &Arc<Provider>,
    mut req: Request,
    body: Body,
    endpoint: &Endpoint,
    ids: PathIds<'_>,
) -> Delivery {
    let in_flight = Executing::start(app);
    let (raw, mut known) = match body {
        Body::Parsed(raw) => (raw, None),
        Body::Known { known, bytes } => (None, Some((known, bytes))),
    };
    // The profile, read once for the lane's check and the plan: one that matches on
    // parameters (swapped in since the lane was asked) has the body parsed first.
    let active = app.faults.current();
    if let Some((_, bytes)) = known.take_if(|_| active.reads_params()) {
        match parse_known(&bytes) {
            Ok(params) => req.params = params,
            Err(refused) => return refused,
        }
    }
    // One read of the clock for the plan and admission.
    let real = std::time::Instant::now();
    let now = app.clock.at(real);
    let mut correlation_id = match &known {
        Some((k, _)) => k.correlation_id.clone(),
        None => app.payments.correlate.of(&req.params),
    };
    let plan = match app.faults.plan_under(
        &active,
        &PlanInput {
            method: req.verb.as_str(),
            path: &req.path,
            params: &req.params,
            idempotency_key: req.idempotency_key.as_ref(),
            correlation_id: correlation_id.as_ref(),
            forced: req.forced_fault.as_deref(),
            now,
            real,
        },
    ) {
        Ok(plan) => plan,
        Err(e) => return Delivery::Send(Answer::error(&e)),
    };
    drop(active);
    let mut counted = match (app.durable(), plan.counted) {
        (Some(log), true) => Some(CountedAttempt {
            log,
            identity: plan.identity.clone(),
            n: plan.attempt,
            in_commit: false,
        }),
        _ => None,
    };
    // The fingerprint, when the replay lane knows it or may remember it.
    let keyed = req.idempotency_key.is_some() && endpoint.verb.is_write();
    let fingerprint = match (&known, raw) {
        (Some((k, _)), _) => Some(k.fingerprint),
        (None, Some(_)) if keyed => Some(fingerprint_of(endpoint, &req.path, &req.params)),
        _ => None,
    };
    // The key is claimed on arrival, so a request held by latency or a fault is "in
    // flight": a concurrent request with the same key gets 409, as at Stripe.
    let admission = admit(
        app,
        &Arrival {
            api_key: &req.api_key,
            key: req.idempotency_key.as_ref(),
            path: &req.path,
            params: &req.params,
            fingerprint,
            now,
        },
        endpoint,
    );
    match (&admission, raw, fingerprint, &known) {
        // Replayed after a parse: the next byte-identical retry need not parse (unless
        // its payment method forces a fault, which the plan reads from the parameters).
        (Admission::Replay(_), Some(raw), Some(fingerprint), None) if !forced_by_params(&req.params) => {
            lane::remember(
                raw,
                Known {
                    fingerprint,
                    correlation_id: correlation_id.clone(),
                },
            );
        }
        // Known to the lane, but its key was free: the request runs, with its parameters
        // (and the correlation id they give, which the lane's agrees with).
        (Admission::Fresh(_), _, _, Some((_, bytes))) => match parse_known(bytes) {
            Ok(params) => {
                req.params = params;
                correlation_id = app.payments.correlate.of(&req.params);
                debug_assert_eq!(
                    fingerprint,
                    Some(fingerprint_of(endpoint, &req.path, &req.params)),
                    "the lane's fingerprint is the body's"
                );
            }
            Err(refused) => return refused,
        },
        _ => {}
    }
    let mut record = RequestRecord {
        seq: 0,
        request_id: req.request_id,
        time_ms: now_ms(),
        method: req.verb,
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

    if let Some(fault) = plan.acting(When::BeforeCommit) {
        // Nothing was charged, nothing is stored: dropping the claim frees the key.
        return match fault {
            Fault::Error { status, .. } => send(
                app,
                record,
                Answer::error(&ApiError::injected(*status, plan.label.as_deref())),
            ),
            Fault::RateLimit { retry_after } => send(app, record, rate_limited(*retry_after)),
            // A held request keeps its claim on the key, and counts as in flight.
            _ => break_connection(app, record, fault, Box::new((in_flight, admission))),
        };
    }

    let attempt = Attempt {
        request_id: req.request_id,
        idempotency_key: req.idempotency_key.clone(),
        correlation_id: record.correlation_id.clone(),
        fault: plan.label.clone(),
        decline: plan.decline(),
        origin: req.origin.take(),
        key: KeyKind::of(&req.api_key),
        checkout_session: None,
        clock_offset: app.clock.offset().as_secs(),
    };
    let fresh = match admission {
        Admission::Refused(e) => {
            record.committed_status = Some(e.status.code());
            Answer::error(&e)
        }
        Admission::Replay(stored) => {
            record.replayed = true;
            record.committed_status = Some(stored.status);
            record.object = stored.object();
            app.metrics.replays.inc();
            Answer::stored(&stored, req.idempotency_key.clone(), true)
        }
        Admission::Fresh(claim) => {
            let call = Call {
                id: ids.id,
                sub: ids.sub,
                params: &req.params,
                attempt: &attempt,
            };
            // Stripe's request validation first: a parameter the spec refuses, or an
            // expansion Stripe would refuse, is a validation failure like the
            // operation's own. The reply is expanded before it is stored, so a replay
            // answers what was sent.
            let injected = match plan.acting(When::AfterCommit) {
                Some(Fault::Error { status, .. }) => Some(*status),
                _ => None,
            };
            let result = match endpoint.verb {
                Verb::Get => execute(app, endpoint, &call),
                _ => execute_logged(
                    app,
                    &Written {
                        request_id: req.request_id,
                        api_key: &req.api_key,
                        params: &req.params,
                    },
                    &record.path,
                    endpoint,
                    &call,
                    Logged {
                        injected_status: injected,
                        counted: counted.as_mut(),
                        fingerprint: claim.as_ref().map(Claim::fingerprint),
                    },
                ),
            };
            match result {
                // Validation failures are not stored: dropping the claim frees the key.
                Err(e) if !e.executed => {
                    record.committed_status = Some(e.status.code());
                    Answer::error(&e)
                }
                result => {
                    record.committed_status = Some(result.as_ref().map_or_else(|e| e.status.code(), |_| 200));
                    let stored = stored_result(result, injected, plan.label.as_deref(), req.request_id);
                    record.object = stored.object();
                    let echo = claim.map(|c| {
                        c.complete(stored.clone());
                        req.idempotency_key.clone()
                    });
                    Answer::stored(&stored, echo.flatten(), false)
                }
            }
        }
    };

    sleep(plan.decision.latency_after).await;
    match plan.acting(When::AfterCommit) {
        None => send(app, record, fresh),
        Some(Fault::Error { status, .. }) => send(
            app,
            record,
            Answer::error(&ApiError::injected(*status, plan.label.as_deref())),
        ),
        Some(Fault::SlowBody { duration }) => {
            record.outcome = Outcome::Status(fresh.status);
            app.journal.record(record);
            Delivery::Dribble(fresh, *duration)
        }
        Some(fault) => break_connection(app, record, fault, Box::new(in_flight)),
    }
}

/// The parameters of a body the replay lane knew, parsed once the request needs them.
/// The same bytes parsed before the lane remembered them, so the error is unreachable
/// short of a parser that changed under a running process; it is answered, not panicked.
fn parse_known(bytes: &[u8]) -> Result<Params, Delivery> {
    Params::from_form(bytes).map_err(|e| Delivery::Send(Answer::error(&e)))
}

fn rate_limited(retry_after: Duration) -> Answer {
    let e = ApiError::new(
        Status::TooManyRequests,
        ErrorType::InvalidRequestError,
        "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.",
    )
    .with_code("rate_limit")
    .retry_hint(true);
    Answer {
        retry_after: Some(retry_after_secs(retry_after)),
        ..Answer::error(&e)
    }
}

/// Closes, resets or holds the connection; the response is never sent. `keep` lives as
/// long as the hold (an abort drops it now: before the connection closes, so a retry
/// finds the key free).
fn break_connection(app: &Provider, mut record: RequestRecord, fault: &Fault, keep: Box<dyn Any + Send>) -> Delivery {
    let (delivery, outcome) = match fault {
        Fault::Reset { .. } => (Delivery::Abort(Abort::Reset), Outcome::Reset),
        Fault::Hang { hang, .. } => (Delivery::Hold(Hold { duration: *hang, keep }), Outcome::Hung),
        _ => (Delivery::Abort(Abort::Close), Outcome::Dropped),
    };
    record.outcome = outcome;
    app.journal.record(record);
    delivery
}

fn send(app: &Provider, mut record: RequestRecord, answer: Answer) -> Delivery {
    record.outcome = Outcome::Status(answer.status);
    app.journal.record(record);
    Delivery::Send(answer)
}

async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

#[cfg(test)]
mod tests;
