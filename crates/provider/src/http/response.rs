//! Writing responses: Stripe-shaped errors (`impl IntoResponse for ApiError`), the
//! pipeline's [`Answer`]s with the headers Stripe adds, and [`deliver`], which carries
//! out a [`Delivery`]: send, dribble, or end the connection through its
//! [`ConnControl`] without a response byte.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::headers;
use super::server::ConnControl;
use crate::error::{ApiError, ErrorType, Status};
use crate::pipeline::{Answer, Delivery};

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        answer_response(Answer::error(&self), None)
    }
}

/// `answer` as an HTTP response; `key_header` is the request's `Idempotency-Key` header
/// as sent, echoed when the answer echoes the key and the header is exactly it.
pub fn answer_response(answer: Answer, key_header: Option<&HeaderValue>) -> Response {
    let mut resp = Response::new(Body::from(answer.body));
    *resp.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(key) = &answer.echo_key {
        let echoed = match key_header {
            Some(raw) if raw.as_bytes() == key.as_bytes() => Some(raw.clone()),
            _ => HeaderValue::from_str(key.as_str()).ok(),
        };
        if let Some(v) = echoed {
            h.insert(headers::IDEMPOTENCY_KEY.clone(), v);
        }
    }
    if let Some(retry) = answer.should_retry {
        h.insert(
            headers::STRIPE_SHOULD_RETRY.clone(),
            HeaderValue::from_static(if retry { "true" } else { "false" }),
        );
    }
    if let Some(secs) = answer.retry_after {
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let Some(original) = answer.replay_of {
        h.insert(headers::IDEMPOTENT_REPLAYED.clone(), HeaderValue::from_static("true"));
        if let Ok(v) = HeaderValue::from_str(&original.as_str()) {
            h.insert(headers::ORIGINAL_REQUEST.clone(), v);
        }
    }
    resp
}

/// Carries out `delivery` on the request's connection.
pub async fn deliver(
    delivery: Delivery,
    key_header: Option<&HeaderValue>,
    connection: Option<Arc<ConnControl>>,
) -> Response {
    let connection = match delivery {
        Delivery::Send(answer) => return answer_response(answer, key_header),
        Delivery::Dribble(answer, over) => return dribble(answer_response(answer, key_header), over).await,
        Delivery::Abort(how) => connection.map(|c| c.abort(how)),
        Delivery::Hold(hold) => connection.map(|c| c.hold(hold)),
    };
    if connection.is_none() {
        return ApiError::new(
            Status::InternalServerError,
            ErrorType::ApiError,
            "This fault needs fauxpay's own server to act on the connection.",
        )
        .into_response();
    }
    // The connection task ends the connection (or keeps only its socket, for a hold);
    // this future is dropped with it and never answers, so no response byte is sent.
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
