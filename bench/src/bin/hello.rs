//! The baseline server: a minimal axum 0.8 hello-world on hyper's HTTP/1, the same
//! runtime as the provider. It answers `POST /v1/payment_intents` (and anything else)
//! with a small fixed JSON after reading the body, so a load generator can send it the
//! provider's exact request.
//!
//! With an answer file it is the provider's ceiling instead: it answers that file's bytes
//! (a payment intent the provider sent) with the headers the provider adds to a 200
//! (`Request-Id`, the `Idempotency-Key` echoed), and does nothing else, so the benchmark
//! can tell what the HTTP stack and the larger answer cost from what the provider's own
//! work costs. It then serves on the provider's own HTTP edge
//! (`fauxpay_provider::serve_connections`: its connection limits, its I/O, its answers
//! written in rounds), so that the ceiling is the provider with no work of its own, and
//! a change to the edge moves the provider and its ceiling alike.
//!
//! Usage: `hello 127.0.0.1:PORT [ANSWER_FILE]`

#![deny(unsafe_code)]

use std::sync::OnceLock;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use axum::Router;

/// The answer file's bytes, when one was given.
static ANSWER: OnceLock<Bytes> = OnceLock::new();

const REQUEST_ID: HeaderName = HeaderName::from_static("request-id");
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

async fn answer(headers: HeaderMap, body: Bytes) -> Response {
    // Touch the body so it is read like the provider reads it.
    let _ = body.len();
    let json = HeaderValue::from_static("application/json");
    let Some(answer) = ANSWER.get() else {
        return (
            [(header::CONTENT_TYPE, json)],
            r#"{"id":"pi_hello","object":"payment_intent","status":"succeeded"}"#,
        )
            .into_response();
    };
    let mut response = (
        [
            (header::CONTENT_TYPE, json),
            // As long as the provider's request ids.
            (REQUEST_ID, HeaderValue::from_static("req_HelloHelloHelloHelloHell")),
        ],
        answer.clone(),
    )
        .into_response();
    if let Some(key) = headers.get(&IDEMPOTENCY_KEY) {
        response.headers_mut().insert(IDEMPOTENCY_KEY, key.clone());
    }
    response
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:12199".into());
    if let Some(path) = args.next() {
        match std::fs::read(&path) {
            Ok(bytes) => {
                let _ = ANSWER.set(Bytes::from(bytes));
            }
            Err(e) => {
                eprintln!("hello: {path}: {e}");
                std::process::exit(2);
            }
        }
    }
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("hello listening on http://{}", listener.local_addr().expect("addr"));
    let app = Router::new().fallback(answer);
    if ANSWER.get().is_some() {
        // The provider's edge sets TCP_NODELAY on each connection itself.
        let stats = fauxpay_provider::ConnectionStats::new(Default::default(), Default::default());
        let limits = fauxpay_provider::Limits::default();
        fauxpay_provider::serve_connections(listener, app, std::future::pending::<()>(), limits, stats)
            .await
            .expect("serve");
        return;
    }
    // Like the provider: no Nagle delay on small answers.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.expect("serve");
}
