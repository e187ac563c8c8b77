//! The admin API under `/__fauxpay/` and the Prometheus endpoint `/metrics`.
//!
//! `GET /__fauxpay/ledger` streams the ledger as JSON lines (the versioned contract the
//! load generator reads; filters `correlation_prefix=` and `since=` in Unix seconds),
//! `GET /__fauxpay/summary` gives counts, totals, duplicate groups and over-refunds,
//! `POST /__fauxpay/reset` forgets everything, `GET /__fauxpay/health` answers probes.
//! With `--admin-token`, every admin route but `health` requires that bearer token.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde_json::json;

use super::error::ApiError;
use super::extract::ApiRequest;
use super::http::error_response;
use super::ledger::{RecordFilter, LEDGER_SCHEMA_VERSION};
use super::Provider;

type AppState = Arc<Provider>;

/// Records serialised per chunk of the streamed ledger.
const CHUNK_RECORDS: usize = 1_000;

pub fn router(provider: AppState) -> Router<AppState> {
    let guarded = Router::new()
        .route("/__fauxpay/ledger", get(ledger))
        .route("/__fauxpay/summary", get(summary))
        .route("/__fauxpay/reset", post(reset))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(provider, admin_auth));
    Router::new().route("/__fauxpay/health", get(health)).merge(guarded)
}

async fn admin_auth(State(app): State<AppState>, req: Request<axum::body::Body>, next: Next) -> Response {
    if let Some(token) = &app.config.admin_token {
        let presented = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if presented != Some(token.as_str()) {
            return error_response(&ApiError::unauthorized(
                "The fauxpay admin API requires 'Authorization: Bearer <admin token>' (fauxpay serve --admin-token).",
            ));
        }
    }
    next.run(req).await
}

async fn health(State(app): State<AppState>) -> Response {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "ledger_schema_version": LEDGER_SCHEMA_VERSION,
        "payment_intents": app.payments.intents.len(),
        "idempotency_keys": app.idempotency.len(),
    }))
    .into_response()
}

async fn ledger(State(app): State<AppState>, req: ApiRequest) -> Response {
    let filter = match ledger_filter(&req) {
        Ok(f) => f,
        Err(e) => return error_response(&e),
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
        correlation_prefix: req.params.opt_str("correlation_prefix")?.map(str::to_string),
        since_ms: req.params.opt_u64("since")?.map(|s| s.saturating_mul(1000)),
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
    let body = app.metrics.render(&app.payments.ledger);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}
