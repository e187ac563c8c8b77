//! The merchant's answers as HTTP responses, for both of its HTTP modules (`http`, and
//! the storefront's API): a checkout [`Answer`] (its status, JSON body, `Retry-After` and
//! `Idempotent-Replayed`), and a bare JSON error (`{"error": code, "message": …}`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::checkout::{Answer, Reply};

/// A JSON error with `status`.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": code, "message": message.into()}))).into_response()
}

/// A checkout answer.
pub fn answer(a: Answer) -> Response {
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, Json(a.body)).into_response();
    if let Some(secs) = a.retry_after {
        resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if a.replayed {
        resp.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    resp
}

/// A checkout reply (not a replay).
pub fn reply(r: Reply) -> Response {
    answer(r.into())
}
