//! The baseline server: a minimal axum 0.8 hello-world on hyper's HTTP/1, the same
//! runtime as the provider. It answers `POST /v1/payment_intents` (and anything else)
//! with a small fixed JSON after reading the body, so a load generator can send it the
//! provider's exact request.
//!
//! Usage: `hello 127.0.0.1:PORT`

#![deny(unsafe_code)]

use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use axum::serve::ListenerExt;
use axum::Router;

async fn answer(body: Bytes) -> impl IntoResponse {
    // Touch the body so it is read like the provider reads it.
    let _ = body.len();
    (
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"id":"pi_hello","object":"payment_intent","status":"succeeded"}"#,
    )
}

#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:12199".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("hello listening on http://{}", listener.local_addr().expect("addr"));
    // Like the provider: no Nagle delay on small answers.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = Router::new().fallback(answer);
    axum::serve(listener, app).await.expect("serve");
}
