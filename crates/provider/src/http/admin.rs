//! The admin API under `/__fauxpay/` and the Prometheus endpoint `/metrics`.
//!
//! `GET /__fauxpay/ledger` streams the ledger as JSON lines (the versioned contract the
//! load generator reads; filters `correlation_prefix=` and `since=` in Unix seconds),
//! `GET /__fauxpay/summary` gives counts, totals, duplicate groups and over-refunds,
//! `POST /__fauxpay/reset` forgets everything, `GET /__fauxpay/health` answers probes,
//! `GET`/`PUT /__fauxpay/profile` show and swap the fault profile (TOML or JSON; an
//! invalid one is refused with its errors and the old one stays), and
//! `GET /__fauxpay/requests` lists recent requests with their identity, attempt, fault
//! and outcome.
//! `GET /__fauxpay/webhooks` is the webhook delivery log (each attempt: event, endpoint,
//! attempt, status or error, latency, fault) with the delivery counts;
//! `POST /__fauxpay/webhooks/resend` (`event=evt_…`) delivers an event again;
//! `GET /__fauxpay/webhooks/drain?timeout=30s` waits until no delivery is queued, in
//! flight or waiting to retry (or the timeout passes) and answers the counts.
//! With `--admin-token`, every admin route but `health` requires that bearer token.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request as RawRequest, State};
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use bytes::Bytes;
use serde_json::json;

use super::extract::{read_body, ApiRequest, MAX_BODY_BYTES};
use super::guard;
use crate::app::Provider;
use crate::error::{ApiError, ErrorType, Status};
use crate::journal::REQUEST_LOG_CAPACITY;
use crate::metrics::CONTENT_TYPE as METRICS_CONTENT_TYPE;
use crate::state::ledger::{RecordFilter, LEDGER_SCHEMA_VERSION};
use crate::stripe::ids::EventId;
use crate::webhooks::log::LOG_CAPACITY as WEBHOOK_LOG_CAPACITY;
use fauxpay_faults as faults;

type AppState = Arc<Provider>;

/// Records serialised per chunk of the streamed ledger.
const CHUNK_RECORDS: usize = 1_000;

/// The admin routes: all but `health` behind the admin token, when there is one.
pub fn routes(provider: AppState) -> Vec<(&'static str, MethodRouter<AppState>)> {
    let guard =
        |route: MethodRouter<AppState>| route.route_layer(middleware::from_fn_with_state(provider.clone(), admin_auth));
    vec![
        ("/__fauxpay/health", get(health)),
        ("/__fauxpay/ledger", guard(get(ledger))),
        ("/__fauxpay/summary", guard(get(summary))),
        ("/__fauxpay/reset", guard(post(reset))),
        ("/__fauxpay/profile", guard(get(profile).put(swap_profile))),
        ("/__fauxpay/requests", guard(get(requests))),
        ("/__fauxpay/webhooks", guard(get(webhooks))),
        ("/__fauxpay/webhooks/resend", guard(post(resend_webhook))),
        ("/__fauxpay/clock", guard(get(clock).post(advance_clock))),
        ("/__fauxpay/webhooks/drain", guard(get(drain_webhooks))),
        ("/metrics", guard(get(metrics))),
    ]
}

async fn admin_auth(State(app): State<AppState>, req: Request<axum::body::Body>, next: Next) -> Response {
    if let Some(token) = &app.config.admin_token {
        if !guard::presents_token(req.headers(), token) {
            return ApiError::unauthorized(
                "The fauxpay admin API requires 'Authorization: Bearer <admin token>' (fauxpay serve --admin-token).",
            )
            .into_response();
        }
    }
    if guard::cross_site(req.method(), req.headers()) {
        return ApiError::new(
            Status::Forbidden,
            ErrorType::InvalidRequestError,
            "The fauxpay admin API refuses requests that change state from another site (their Origin or Sec-Fetch-Site says so): a page on the web must not reset or reconfigure a local fauxpay.",
        )
        .into_response();
    }
    next.run(req).await
}

async fn health(State(app): State<AppState>) -> Response {
    // A data dir whose log cannot be written (a full disk): degraded, and why, as a 503 so
    // that orchestrators and `fauxpay load` notice; it says ok again once writes resume.
    if let Some(why) = app.durable().and_then(|log| log.degraded()) {
        let body = json!({
            "status": "degraded",
            "reason": format!("the data dir's log cannot be written: {why}; writes answer 503 and their changes are held in memory until it can"),
            "data_log_write_failures": app.durable().map_or(0, |log| log.write_failures()),
            "version": env!("CARGO_PKG_VERSION"),
        });
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "ledger_schema_version": LEDGER_SCHEMA_VERSION,
        "payment_intents": app.payments.intents.len(),
        "idempotency_keys": app.idempotency.len(),
        "data_log": app.durable().map(|log| json!({
            "bytes": log.end(),
            "compactions": app.compaction.runs.load(std::sync::atomic::Ordering::Relaxed),
        })),
    }))
    .into_response()
}

async fn ledger(State(app): State<AppState>, req: ApiRequest) -> Response {
    let filter = match ledger_filter(&req) {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    let records = app.payments.ledger.records(&filter);
    // Serialise lazily, a chunk at a time: the response never holds the ledger twice.
    let chunks = (0..records.len().div_ceil(CHUNK_RECORDS)).map(move |i| {
        let mut buf = Vec::with_capacity(CHUNK_RECORDS * 400);
        for r in &records[i * CHUNK_RECORDS..((i + 1) * CHUNK_RECORDS).min(records.len())] {
            let _ = serde_json::to_writer(&mut buf, &**r);
            buf.push(b'\n');
        }
        Ok::<_, Infallible>(Bytes::from(buf))
    });
    let mut resp = Response::new(Body::from_stream(futures_util::stream::iter(chunks)));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    resp
}

fn ledger_filter(req: &ApiRequest) -> Result<RecordFilter, ApiError> {
    Ok(RecordFilter {
        correlation_prefix: req.request.params.opt_str("correlation_prefix")?.map(str::to_string),
        since_ms: req.request.params.opt_u64("since")?.map(|s| s.saturating_mul(1000)),
    })
}

async fn summary(State(app): State<AppState>) -> Response {
    Json(app.payments.ledger.summary()).into_response()
}

async fn reset(State(app): State<AppState>) -> Response {
    app.reset();
    tracing::info!("state reset: payments, idempotency keys and ledger cleared");
    (StatusCode::OK, Json(json!({"reset": true}))).into_response()
}

async fn metrics(State(app): State<AppState>) -> Response {
    let body = app.metrics.render(&app.payments.ledger, &app.faults.counts());
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], body).into_response()
}

async fn profile(State(app): State<AppState>) -> Response {
    let active = app.faults.active();
    Json(json!({
        "profile": active.engine.profile(),
        "source": active.source,
        "activated_ms": active.activated_ms,
        "key_ttl_ms": app.idempotency.ttl().as_millis() as u64,
    }))
    .into_response()
}

async fn swap_profile(State(app): State<AppState>, req: RawRequest) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match read_body(&parts, body, app.config.limits.body_timeout).await {
        Ok(b) => b,
        Err(e) if e.status == Status::PayloadTooLarge => {
            return ApiError::new(
                Status::PayloadTooLarge,
                ErrorType::InvalidRequestError,
                format!("A profile may be at most {MAX_BODY_BYTES} bytes."),
            )
            .into_response()
        }
        Err(e) => return e.into_response(),
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return ApiError::invalid_request("The profile must be UTF-8 text (TOML or JSON).", None).into_response();
    };
    match faults::parse_profile_text("request body", text) {
        Ok(profile) => {
            app.swap_profile(profile, text.to_string());
            profile_response(&app)
        }
        Err(e) => {
            let lines = e.lines();
            let mut err = ApiError::invalid_request(lines.join("; "), Some("profile".into()));
            err = err.with_extra("errors", json!(lines));
            err.into_response()
        }
    }
}

fn profile_response(app: &Provider) -> Response {
    let active = app.faults.active();
    Json(json!({"profile": active.engine.profile(), "activated_ms": active.activated_ms})).into_response()
}

async fn requests(State(app): State<AppState>, req: ApiRequest) -> Response {
    let params = &req.request.params;
    let (limit, identity, prefix) = match (
        params.opt_u64("limit"),
        params.opt_str("identity"),
        params.opt_str("correlation_prefix"),
    ) {
        (Ok(l), Ok(i), Ok(p)) => (l.unwrap_or(100).min(REQUEST_LOG_CAPACITY as u64) as usize, i, p),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e.into_response(),
    };
    let records = app.journal.recent(limit, |r| {
        identity.is_none_or(|i| r.identity.as_str() == i)
            && prefix.is_none_or(|p| r.correlation_id.as_ref().is_some_and(|c| c.as_str().starts_with(p)))
    });
    Json(json!({"object": "list", "data": records})).into_response()
}

/// The longest a drain may wait.
const MAX_DRAIN: std::time::Duration = std::time::Duration::from_secs(600);

async fn webhooks(State(app): State<AppState>, req: ApiRequest) -> Response {
    let params = &req.request.params;
    let (limit, event, endpoint) = match (
        params.opt_u64("limit"),
        params.opt_str("event"),
        params.opt_str("endpoint"),
    ) {
        (Ok(l), Ok(e), Ok(p)) => (l.unwrap_or(100).min(WEBHOOK_LOG_CAPACITY as u64) as usize, e, p),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e.into_response(),
    };
    let records = app.webhooks.log.recent(limit, |r| {
        event.is_none_or(|e| *r.event.as_str() == *e) && endpoint.is_none_or(|p| *r.endpoint.as_str() == *p)
    });
    Json(json!({"object": "list", "counts": app.webhooks.counts(), "data": records})).into_response()
}

/// `GET /__fauxpay/clock`: how far the provider's time was moved forward.
async fn clock(State(app): State<AppState>) -> Response {
    Json(json!({"offset": humantime::format_duration(app.clock.offset()).to_string()})).into_response()
}

/// `POST /__fauxpay/clock` with `advance=DURATION`: moves the provider's time forward (it
/// never goes back): idempotency keys and fault attempts age as if that time had passed,
/// so a key's TTL can be crossed without waiting, and Checkout Sessions whose
/// `expires_at` it crosses expire at once. Not kept across a restart.
async fn advance_clock(State(app): State<AppState>, req: ApiRequest) -> Response {
    let raw = match req.request.params.req_str("advance") {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let by = match humantime::parse_duration(raw.trim()) {
        Ok(d) if d <= std::time::Duration::from_secs(10 * 365 * 24 * 3600) => d,
        _ => {
            return ApiError::invalid_param(
                "advance",
                format!("Invalid advance: expected a duration such as 90s or 25h (at most 10 years), got '{raw}'."),
            )
            .into_response()
        }
    };
    app.clock.advance(by);
    tracing::info!(by = %humantime::format_duration(by), "the provider's clock moved forward");
    // What the new time makes due happens before the answer: a test that crosses a
    // Checkout Session's `expires_at` sees it expired at once.
    crate::pipeline::own::expire_due_sessions(&app);
    // …and durable before the answer, as any write's.
    if let Some(log) = app.durable() {
        let _ = log.durable(log.appended()).await;
    }
    Json(json!({"offset": humantime::format_duration(app.clock.offset()).to_string()})).into_response()
}

async fn resend_webhook(State(app): State<AppState>, req: ApiRequest) -> Response {
    let raw = match req.request.params.req_str("event") {
        Ok(e) => e,
        Err(e) => return e.into_response(),
    };
    let Some(event) = EventId::parse(raw).and_then(|id| app.payments.events.table.get(&id)) else {
        return ApiError::unknown_object("event", raw, "event").into_response();
    };
    let endpoints: Vec<_> = app
        .payments
        .events
        .endpoints()
        .iter()
        .filter(|e| e.wants(event.kind()))
        .cloned()
        .collect();
    app.webhooks.resend(&event, &endpoints);
    Json(json!({"event": event.id(), "endpoints": endpoints.iter().map(|e| e.id).collect::<Vec<_>>()})).into_response()
}

async fn drain_webhooks(State(app): State<AppState>, req: ApiRequest) -> Response {
    let timeout = match req.request.params.opt_str("timeout") {
        Ok(None) => std::time::Duration::from_secs(30),
        Ok(Some(t)) => {
            match humantime::parse_duration(t).or_else(|_| t.parse::<u64>().map(std::time::Duration::from_secs)) {
                Ok(d) => d.min(MAX_DRAIN),
                Err(_) => {
                    return ApiError::invalid_param(
                        "timeout",
                        format!("Invalid timeout: '{t}' is not a duration such as 30s."),
                    )
                    .into_response()
                }
            }
        }
        Err(e) => return e.into_response(),
    };
    let (drained, c) = app.webhooks.drain(timeout).await;
    Json(json!({
        "drained": drained,
        "queued": c.queued,
        "in_flight": c.in_flight,
        "retrying": c.retrying,
        "delivered": c.delivered,
        "failed": c.failed,
    }))
    .into_response()
}
