//! An `https://` webhook endpoint: the provider's deliveries go through its TLS client
//! (reqwest and rustls, built on the first https endpoint) to a real TLS receiver. The
//! receiver's certificate is signed by a CA made for this test, and the provider trusts
//! that CA the way a user points it at a local https merchant (mkcert, a staging CA):
//! `SSL_CERT_FILE` names the CA's PEM file.
//!
//! Its own process, because `SSL_CERT_FILE` is process-wide: the test runs this test
//! binary again for one ignored test (`in_its_own_process`), with the variable set for
//! that child only, so no other test shares its environment.
//!
//! Three receivers: one that answers 200 (each event once, signed), one that answers 200
//! with an endless body (the provider reads 64 KiB of it and stays small), and one that
//! answers 302 (a failed delivery, as on the plain-http path: the redirect is not
//! followed).

use fauxpay_testkit::provider as common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::Harness;
use fauxpay_provider::config::WebhookTarget;
use fauxpay_provider::webhooks::Settings;
use fauxpay_provider::Config;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

const SECRET: &str = "whsec_tls_test";

type BoxBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// A CA, and a certificate for `localhost` and 127.0.0.1 that it signed: (the CA's PEM,
/// the server's certificate chain and key).
fn certificates() -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "fauxpay test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();

    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &ca).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    (ca.pem(), vec![leaf_cert.der().clone()], key)
}

/// What the receiver got: each event's id, how many times, and whether every copy's
/// signature verified with async-stripe's own verifier.
#[derive(Default)]
struct Got {
    times: HashMap<String, u32>,
    types: Vec<String>,
    all_signed: bool,
    requests: u32,
}

/// What a receiver answers.
#[derive(Clone, Copy)]
enum Answer {
    Ok,
    /// 200, then a body that never ends (1 MiB chunks).
    Endless,
    /// 302 to a plain-http address.
    Redirect(u16),
}

/// Serves HTTP/1 over TLS on `listener`: every POST is checked and answered as `answer`.
fn serve_tls(listener: TcpListener, acceptor: TlsAcceptor, got: Arc<Mutex<Got>>, answer: Answer) {
    got.lock().unwrap().all_signed = true;
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            let got = got.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let got = got.clone();
                    async move {
                        let sig = req
                            .headers()
                            .get("stripe-signature")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string();
                        let body = req.into_body().collect().await?.to_bytes();
                        let text = std::str::from_utf8(&body).unwrap_or_default().to_string();
                        let signed = stripe_webhook::Webhook::construct_event(&text, &sig, SECRET).is_ok();
                        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                        let mut g = got.lock().unwrap();
                        g.requests += 1;
                        g.all_signed &= signed;
                        *g.times
                            .entry(json["id"].as_str().unwrap_or("?").to_string())
                            .or_default() += 1;
                        g.types.push(json["type"].as_str().unwrap_or("?").to_string());
                        drop(g);
                        let body: BoxBody = match answer {
                            Answer::Ok | Answer::Redirect(_) => {
                                Full::new(Bytes::from_static(b"{}")).map_err(|e| match e {}).boxed()
                            }
                            Answer::Endless => {
                                let chunk = Bytes::from(vec![b' '; 1 << 20]);
                                let frames = futures_util::stream::repeat_with(move || {
                                    Ok::<_, hyper::Error>(hyper::body::Frame::data(chunk.clone()))
                                });
                                http_body_util::StreamBody::new(frames).boxed()
                            }
                        };
                        let mut resp = hyper::Response::new(body);
                        if let Answer::Redirect(port) = answer {
                            *resp.status_mut() = hyper::StatusCode::FOUND;
                            resp.headers_mut().insert(
                                "location",
                                format!("http://127.0.0.1:{port}/elsewhere").parse().unwrap(),
                            );
                        }
                        Ok::<_, hyper::Error>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
}

#[test]
fn https_deliveries_are_signed_bounded_and_never_redirected() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "webhooks_tls::in_its_own_process",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("FAUXPAY_TLS_CHILD", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

/// The TLS receivers, a CA file in `SSL_CERT_FILE`, and a provider per receiver; only in
/// the child process the test above starts.
#[test]
#[ignore = "run by https_deliveries_are_signed_bounded_and_never_redirected, in a process of its own"]
fn in_its_own_process() {
    assert!(
        std::env::var_os("FAUXPAY_TLS_CHILD").is_some(),
        "run through its parent test"
    );
    let (ca_pem, chain, key) = certificates();
    let ca_file = std::env::temp_dir().join(format!("fauxpay-webhooks-tls-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca_pem).unwrap();
    // Before any TLS client exists: the provider's TLS client reads it when the first
    // https delivery builds it. This process runs no other test.
    std::env::set_var("SSL_CERT_FILE", &ca_file);
    let tls = Arc::new(
        ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        signed_events_reach_an_https_receiver_once_each(tls.clone()).await;
        an_endless_answer_is_read_only_in_part(tls.clone()).await;
        a_redirect_is_a_failed_delivery(tls).await;
    });
    let _ = std::fs::remove_file(&ca_file);
}

/// A receiver answering `answer`, and a provider delivering to it with no retry.
async fn receiver_and_provider(tls: Arc<ServerConfig>, answer: Answer) -> (Arc<Mutex<Got>>, Harness) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Got::default()));
    serve_tls(listener, TlsAcceptor::from(tls), got.clone(), answer);
    let h = Harness::start(Config {
        webhooks: vec![WebhookTarget {
            url: format!("https://localhost:{port}/hook"),
            secret: SECRET.into(),
        }],
        delivery: Settings {
            // No retry: each event must arrive on its first send.
            retries: Vec::new(),
            timeout: Duration::from_secs(5),
            concurrency: 4,
        },
        ..Config::default()
    })
    .await;
    (got, h)
}

async fn pay_and_drain(h: &Harness, n: usize, prefix: &str) -> Value {
    for i in 0..n {
        let r = h
            .form(
                "/v1/payment_intents",
                &common::charge_body(&format!("{prefix}-{i}"), "pm_card_visa"),
                Some(&format!("{prefix}-key-{i}")),
            )
            .await;
        assert_eq!(r.status(), 200);
    }
    let (status, drained) = common::json(
        h.client
            .get(h.url("/__fauxpay/webhooks/drain?timeout=20s"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{drained}");
    drained
}

async fn an_endless_answer_is_read_only_in_part(tls: Arc<ServerConfig>) {
    let (got, h) = receiver_and_provider(tls, Answer::Endless).await;
    let before = fauxpay_testkit::fakes::resident();
    pay_and_drain(&h, 3, "endless").await;
    let grew = fauxpay_testkit::fakes::resident().saturating_sub(before);
    assert_eq!(
        got.lock().unwrap().requests,
        9,
        "3 payments, 3 events each, each sent once"
    );
    assert!(
        grew < 64 << 20,
        "reading endless answers grew the process by {grew} bytes"
    );
    let (_, log) = common::json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    let attempts = log["data"].as_array().expect("the delivery log");
    assert!(
        attempts
            .iter()
            .all(|a| a["result"] == "delivered" && a["status"] == 200),
        "a 200 is a delivery, however long its body: {log}"
    );
}

async fn a_redirect_is_a_failed_delivery(tls: Arc<ServerConfig>) {
    // Where the redirect points: a plain-http listener that must never be reached.
    let elsewhere = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = elsewhere.local_addr().unwrap().port();
    let (got, h) = receiver_and_provider(tls, Answer::Redirect(port)).await;
    pay_and_drain(&h, 1, "redirect").await;
    assert_eq!(got.lock().unwrap().requests, 3);
    let (_, log) = common::json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    let attempts = log["data"].as_array().expect("the delivery log");
    assert_eq!(attempts.len(), 3, "{log}");
    assert!(
        attempts.iter().all(|a| a["result"] == "rejected" && a["status"] == 302),
        "a redirect is not followed, and is not a delivery: {log}"
    );
    let reached = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
    assert!(reached.is_err(), "the redirect's target was reached");
}

async fn signed_events_reach_an_https_receiver_once_each(tls: Arc<ServerConfig>) {
    let (got, h) = receiver_and_provider(tls, Answer::Ok).await;
    let drained = pay_and_drain(&h, 5, "tls").await;
    let (_, log) = common::json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    let first_error = log["data"][0]["error"].clone();
    let (_, events) = common::json(h.get("/v1/events?limit=100").send().await.unwrap()).await;
    let listed = events["data"].as_array().unwrap();
    let got = got.lock().unwrap();
    assert_eq!(listed.len(), 15, "5 confirmed payments make 3 events each: {events}");
    assert_eq!(
        got.times.len(),
        listed.len(),
        "every event reached the https receiver (drain said {drained}; got {:?}; first error {first_error})",
        got.times
    );
    assert!(got.times.values().all(|&n| n == 1), "each event once: {:?}", got.times);
    assert!(got.all_signed, "every delivery verified with the endpoint's secret");
    for e in listed {
        assert_eq!(e["pending_webhooks"], 0, "acknowledged: {e}");
    }
    assert!(
        got.types.iter().any(|t| t == "payment_intent.succeeded"),
        "{:?}",
        got.types
    );
}
