//! An `https://` webhook endpoint: the provider's deliveries go through its TLS client
//! (reqwest and rustls, built on the first https endpoint) to a real TLS receiver. The
//! receiver's certificate is signed by a CA made for this test, and the provider trusts
//! that CA the way a user points it at a local https merchant (mkcert, a staging CA):
//! `SSL_CERT_FILE` names the CA's PEM file.
//!
//! Its own test binary, because `SSL_CERT_FILE` is process-wide: it is set before the
//! runtime and the provider start, and no other test shares the process.

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

/// Serves HTTP/1 over TLS on `listener`: every POST is checked and answered 200.
fn serve_tls(listener: TcpListener, acceptor: TlsAcceptor, got: Arc<Mutex<Got>>) {
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
                        Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from_static(b"{}"))))
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
fn signed_events_reach_an_https_receiver_once_each() {
    let (ca_pem, chain, key) = certificates();
    let ca_file = std::env::temp_dir().join(format!("fauxpay-webhooks-tls-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_file, ca_pem).unwrap();
    // Before any thread or TLS client exists: the provider's TLS client reads it when
    // the first https delivery builds it.
    std::env::set_var("SSL_CERT_FILE", &ca_file);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Got::default()));
        serve_tls(listener, TlsAcceptor::from(Arc::new(server)), got.clone());

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

        for i in 0..5 {
            let r = h
                .form(
                    "/v1/payment_intents",
                    &common::charge_body(&format!("tls-{i}"), "pm_card_visa"),
                    Some(&format!("tls-key-{i}")),
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
        assert_eq!(status, 200);
        let (_, events) = common::json(h.get("/v1/events?limit=100").send().await.unwrap()).await;
        let listed = events["data"].as_array().unwrap();
        let got = got.lock().unwrap();
        assert_eq!(listed.len(), 15, "5 confirmed payments make 3 events each: {events}");
        assert_eq!(
            got.times.len(),
            listed.len(),
            "every event reached the https receiver (drain said {drained}; got {:?})",
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
    });
    let _ = std::fs::remove_file(&ca_file);
}
