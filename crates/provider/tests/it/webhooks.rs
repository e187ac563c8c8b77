//! Events and signed webhook deliveries over real sockets: a small axum receiver in the
//! test checks every delivery's `Stripe-Signature` with an HMAC-SHA256 written here from
//! its definition (not the provider's) and with async-stripe's `Webhook::construct_event`;
//! retries after a 500 and after a timeout; every delivery fault kind, decided the same
//! under two concurrencies; no event for an idempotent replay; two `succeeded` events for
//! a double charge; nothing lost while the receiver is down; each event once to a
//! receiver that closes every connection after one answer.

use fauxpay_testkit::provider as common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::Harness;
use fauxpay_faults::{parse_profile, DeliveryFacts, DeliveryFault, FaultEngine};
use fauxpay_provider::config::WebhookTarget;
use fauxpay_provider::webhooks::Settings;
use fauxpay_provider::Config;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

const SECRET: &str = "whsec_test_fauxpay_webhooks";

/// HMAC-SHA256 from RFC 2104, on `sha2` alone: independent of the provider's signer.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Whether `header` signs `body` with `secret`, within 300 s of now.
fn independently_valid(header: &str, body: &[u8], secret: &str) -> bool {
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", x)) => t = x.parse::<i64>().ok(),
            Some(("v1", x)) => v1.push(x.to_string()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    let expected: String = hmac_sha256(secret.as_bytes(), &message)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    (now - t).abs() <= 300 && v1.contains(&expected)
}

/// One delivery as the receiver saw it.
#[derive(Debug, Clone)]
struct Received {
    event_id: String,
    event_type: String,
    body: Value,
    valid: bool,
    /// async-stripe's verdict.
    sdk_valid: bool,
    content_type: String,
}

/// What the receiver answers to the `n`th delivery (1-based) of an event.
type Behaviour = Arc<dyn Fn(u32) -> Answer + Send + Sync>;

#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    /// Never answer within the provider's timeout.
    Hang,
}

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    behaviour: Behaviour,
    /// The secret signatures are checked with.
    secret: Arc<Mutex<String>>,
}

impl Receiver {
    fn new(behaviour: impl Fn(u32) -> Answer + Send + Sync + 'static) -> Self {
        Self {
            got: Arc::default(),
            behaviour: Arc::new(behaviour),
            secret: Arc::new(Mutex::new(SECRET.into())),
        }
    }

    /// Serves on `listener` in the background; answers 400 to a forged signature.
    fn serve(&self, listener: TcpListener) {
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
    }

    fn deliveries(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let sig = headers
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let json: Value = serde_json::from_slice(&body).expect("a delivery is JSON");
    let text = std::str::from_utf8(&body).expect("UTF-8");
    let secret = r.secret.lock().unwrap().clone();
    let sdk_valid = match stripe_webhook::Webhook::construct_event(text, &sig, &secret) {
        Ok(event) => {
            assert_eq!(event.id.as_str(), json["id"].as_str().unwrap());
            true
        }
        Err(stripe_webhook::WebhookError::BadSignature | stripe_webhook::WebhookError::BadTimestamp(_)) => false,
        Err(e) => panic!("async-stripe could not read a fauxpay event: {e:?}\n{text}"),
    };
    let received = Received {
        event_id: json["id"].as_str().unwrap().to_string(),
        event_type: json["type"].as_str().unwrap().to_string(),
        valid: independently_valid(&sig, &body, &secret),
        sdk_valid,
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        body: json,
    };
    let valid = received.valid;
    let n = {
        let mut got = r.got.lock().unwrap();
        got.push(received.clone());
        got.iter()
            .filter(|g| g.event_id == received.event_id && g.valid)
            .count() as u32
    };
    if !valid {
        return StatusCode::BAD_REQUEST;
    }
    match (r.behaviour)(n) {
        Answer::Status(s) => StatusCode::from_u16(s).unwrap(),
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK
        }
    }
}

async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

fn config(url: &str, retries: &[u64], concurrency: usize) -> Config {
    Config {
        webhooks: vec![WebhookTarget {
            url: url.into(),
            secret: SECRET.into(),
        }],
        delivery: Settings {
            retries: retries.iter().map(|ms| Duration::from_millis(*ms)).collect(),
            timeout: Duration::from_millis(500),
            concurrency,
        },
        ..Config::default()
    }
}

async fn drain(h: &Harness, timeout: &str) -> Value {
    let r = h
        .client
        .get(h.url(&format!("/__fauxpay/webhooks/drain?timeout={timeout}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn json(r: reqwest::Response) -> Value {
    r.json().await.unwrap()
}

async fn pay(h: &Harness, order: &str, key: &str) -> Value {
    let r = h
        .form(
            "/v1/payment_intents",
            &format!("amount=1000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}"),
            Some(key),
        )
        .await;
    assert_eq!(r.status(), 200);
    json(r).await
}

async fn events(h: &Harness, query: &str) -> Vec<Value> {
    let v = json(h.get(&format!("/v1/events?limit=100&{query}")).send().await.unwrap()).await;
    v["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn signed_events_reach_the_receiver_and_a_replay_makes_none() {
    let l = listener().await;
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let receiver = Receiver::new(|_| Answer::Status(200));
    receiver.serve(l);
    let h = Harness::start(config(&url, &[50, 50], 8)).await;

    let pi = pay(&h, "order-1", "key-1").await;
    let replay = h
        .form(
            "/v1/payment_intents",
            "amount=1000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=order-1",
            Some("key-1"),
        )
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let drained = drain(&h, "10s").await;
    assert_eq!(drained["drained"], true, "{drained}");
    assert_eq!(
        (drained["delivered"].as_u64(), drained["failed"].as_u64()),
        (Some(3), Some(0))
    );

    // Newest first; the replay made none.
    let listed = events(&h, "").await;
    let types: Vec<&str> = listed.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["payment_intent.succeeded", "charge.succeeded", "payment_intent.created"]
    );
    for e in &listed {
        assert_eq!(e["request"]["idempotency_key"], "key-1");
        assert_eq!(e["livemode"], false);
        assert_eq!(e["api_version"], "2023-08-16");
        assert_eq!(e["pending_webhooks"], 0, "acknowledged: {e}");
    }
    assert_eq!(listed[0]["data"]["object"]["id"], pi["id"]);
    assert_eq!(listed[0]["data"]["object"]["status"], "succeeded");
    assert_eq!(
        listed[2]["data"]["object"]["status"], "requires_confirmation",
        "as created"
    );
    let one = json(
        h.get(&format!("/v1/events/{}", listed[1]["id"].as_str().unwrap()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(one["data"]["object"]["object"], "charge");
    assert_eq!(events(&h, "delivery_success=false").await.len(), 0);
    assert_eq!(events(&h, "type=payment_intent.*").await.len(), 2);
    assert_eq!(
        events(&h, "types[]=charge.succeeded&types[]=charge.failed").await.len(),
        1
    );
    assert_eq!(events(&h, "created[lt]=1000").await.len(), 0);

    let got = receiver.deliveries();
    assert_eq!(got.len(), 3, "{got:?}");
    for d in &got {
        assert!(d.valid, "independent HMAC: {d:?}");
        assert!(d.sdk_valid, "async-stripe: {d:?}");
        assert_eq!(d.content_type, "application/json; charset=utf-8");
        assert_eq!(d.body["object"], "event");
    }
    let mut delivered: Vec<&str> = got.iter().map(|d| d.event_type.as_str()).collect();
    delivered.sort();
    assert_eq!(
        delivered,
        ["charge.succeeded", "payment_intent.created", "payment_intent.succeeded"]
    );

    // The log, then a resend.
    let log = json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    assert_eq!(log["data"].as_array().unwrap().len(), 3);
    assert!(log["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["result"] == "delivered" && r["status"] == 200));
    let evt = listed[0]["id"].as_str().unwrap();
    let r = h
        .client
        .post(h.url("/__fauxpay/webhooks/resend"))
        .form(&[("event", evt)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(drain(&h, "10s").await["delivered"], 4);
    assert_eq!(receiver.deliveries().iter().filter(|d| d.event_id == evt).count(), 2);
    h.provider.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_double_charge_makes_two_succeeded_events() {
    let h = Harness::start(Config::default()).await;
    let a = pay(&h, "order-dup", "k-a").await;
    let b = pay(&h, "order-dup", "k-b").await;
    let succeeded = events(&h, "type=payment_intent.succeeded").await;
    let ids: Vec<&Value> = succeeded.iter().map(|e| &e["data"]["object"]["id"]).collect();
    assert_eq!(ids, [&b["id"], &a["id"]]);
    assert!(succeeded
        .iter()
        .all(|e| e["data"]["object"]["metadata"]["order_id"] == "order-dup"));
    assert_eq!(events(&h, "type=charge.succeeded").await.len(), 2);
}

#[tokio::test]
async fn deliveries_are_retried_after_a_500_and_after_a_timeout() {
    let l = listener().await;
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    // First delivery of each event: 500; second: no answer in time; third: 200.
    let receiver = Receiver::new(|n| match n {
        1 => Answer::Status(500),
        2 => Answer::Hang,
        _ => Answer::Status(204),
    });
    receiver.serve(l);
    let h = Harness::start(config(&url, &[20, 20, 20], 8)).await;
    let r = h.form("/v1/customers", "email=a@example.com", None).await;
    assert_eq!(r.status(), 200);
    let drained = drain(&h, "20s").await;
    assert_eq!(drained["drained"], true, "{drained}");
    assert_eq!(
        (drained["delivered"].as_u64(), drained["failed"].as_u64()),
        (Some(1), Some(0))
    );
    let got = receiver.deliveries();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|d| d.event_type == "customer.created" && d.valid));
    let log = json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    let results: Vec<(&str, u64)> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|r| (r["result"].as_str().unwrap(), r["attempt"].as_u64().unwrap()))
        .collect();
    assert_eq!(results, [("rejected", 1), ("timeout", 2), ("delivered", 3)]);
    assert_eq!(events(&h, "delivery_success=true").await.len(), 1);
}

#[tokio::test]
async fn an_event_that_runs_out_of_retries_is_listed_as_failed() {
    let l = listener().await;
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let receiver = Receiver::new(|_| Answer::Status(503));
    receiver.serve(l);
    let h = Harness::start(config(&url, &[10], 8)).await;
    h.form("/v1/customers", "name=x", None).await;
    let drained = drain(&h, "10s").await;
    assert_eq!(
        (drained["delivered"].as_u64(), drained["failed"].as_u64()),
        (Some(0), Some(1))
    );
    let pending = events(&h, "delivery_success=false").await;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["pending_webhooks"], 1);
    let log = json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    assert_eq!(log["data"][0]["gave_up"], true);
    assert_eq!(receiver.deliveries().len(), 2);
}

#[tokio::test]
async fn nothing_is_lost_while_the_receiver_is_down() {
    // A port with nobody listening yet.
    let l = listener().await;
    let addr = l.local_addr().unwrap();
    drop(l);
    let url = format!("http://{addr}/hook");
    let h = Harness::start(config(&url, &[100; 100], 4)).await;
    for i in 0..5 {
        pay(&h, &format!("down-{i}"), &format!("down-key-{i}")).await;
    }
    // Every delivery has failed at least once: the receiver is down.
    let early = drain(&h, "300ms").await;
    assert_eq!(early["drained"], false, "{early}");
    assert_eq!(early["delivered"], 0);
    let receiver = Receiver::new(|_| Answer::Status(200));
    receiver.serve(TcpListener::bind(addr).await.unwrap());
    let drained = drain(&h, "30s").await;
    assert_eq!(drained["drained"], true, "{drained}");
    assert_eq!(
        (drained["delivered"].as_u64(), drained["failed"].as_u64()),
        (Some(15), Some(0))
    );
    let mut ids: Vec<String> = receiver.deliveries().into_iter().map(|d| d.event_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 15, "every event arrived");
    assert_eq!(events(&h, "delivery_success=false").await.len(), 0);
}

/// A receiver written on raw TCP that answers one request per connection and closes it
/// without saying so (no `Connection: close`), as a server with a short keep-alive does:
/// the provider's pooled connections go stale under it. Counts each event id it got.
async fn one_request_per_connection(listener: TcpListener, got: Arc<Mutex<HashMap<String, u32>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let got = got.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body = loop {
                let n = socket.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&chunk[..n]);
                let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("a delivery has a Content-Length");
                if buf.len() >= end + 4 + length {
                    break buf[end + 4..end + 4 + length].to_vec();
                }
            };
            let event: Value = serde_json::from_slice(&body).expect("a delivery is JSON");
            *got.lock()
                .unwrap()
                .entry(event["id"].as_str().unwrap().to_string())
                .or_default() += 1;
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
            // Dropped: closed without a word.
        });
    }
}

#[tokio::test]
async fn a_receiver_that_closes_every_connection_gets_each_event_once() {
    let l = listener().await;
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let got = Arc::new(Mutex::new(HashMap::new()));
    tokio::spawn(one_request_per_connection(l, got.clone()));
    // No retries: a stale pooled connection must not cost a delivery its attempt.
    let h = Harness::start(config(&url, &[], 4)).await;
    for i in 0..20 {
        pay(&h, &format!("close-{i}"), &format!("close-key-{i}")).await;
        // Some payments' deliveries meet connections the receiver has closed by now.
        if i % 2 == 1 {
            assert_eq!(drain(&h, "10s").await["drained"], true);
        }
    }
    let drained = drain(&h, "10s").await;
    assert_eq!(
        (
            drained["drained"].as_bool(),
            drained["delivered"].as_u64(),
            drained["failed"].as_u64()
        ),
        (Some(true), Some(60), Some(0)),
        "{drained}"
    );
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 60, "every event arrived");
    assert!(got.values().all(|n| *n == 1), "each exactly once: {got:?}");
}

const FAULTS: &str = r#"name = "webhook-faults"
description = "one of each delivery fault"
seed = 42

[[webhooks]]
kind = "delay"
probability = 0.3
distribution = "uniform"
min = "10ms"
max = "60ms"

[[webhooks]]
kind = "duplicate"
copies = 2
[webhooks.match]
event = "payment_intent.succeeded"

[[webhooks]]
kind = "lose_ack"
probability = 0.5
first_attempts = 1
[webhooks.match]
event = "charge.*"

[[webhooks]]
kind = "drop"
probability = 0.5
first_attempts = 1
[webhooks.match]
event = "payment_intent.created"

[[webhooks]]
kind = "bad_signature"
how = "wrong_secret"
probability = 0.5
first_attempts = 1

[[webhooks]]
kind = "bad_signature"
how = "stale_timestamp"
first_attempts = 2
"#;

/// What the receiver should see of one event, from the decisions alone: (validly signed
/// deliveries, forged ones).
fn predicted(engine: &FaultEngine, event_id: &str, event_type: &str, endpoint: &str) -> (usize, usize) {
    let (mut valid, mut forged) = (0, 0);
    for attempt in 1.. {
        let d = engine.decide_delivery(&DeliveryFacts {
            event_id,
            event_type,
            endpoint,
            attempt,
        });
        match d.fault.map(|(f, _)| f) {
            Some(DeliveryFault::Drop) => continue,
            Some(DeliveryFault::LoseAck) => valid += 1,
            Some(DeliveryFault::BadSignature { retry, .. }) => {
                forged += 1;
                assert!(retry);
            }
            Some(DeliveryFault::Duplicate { copies, .. }) => return (valid + copies as usize, forged),
            _ => return (valid + 1, forged),
        }
    }
    unreachable!()
}

async fn fault_run(concurrency: usize) -> usize {
    let l = listener().await;
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let receiver = Receiver::new(|_| Answer::Status(200));
    receiver.serve(l);
    let profile = parse_profile("webhook-faults.toml", FAULTS).unwrap();
    let engine = FaultEngine::new(profile.clone());
    let mut cfg = config(&url, &[10, 10, 10, 10], concurrency);
    cfg.profile_source = FAULTS.into();
    cfg.profile = profile;
    let h = Harness::start(cfg).await;
    for i in 0..12 {
        pay(&h, &format!("f-{i}"), &format!("f-key-{concurrency}-{i}")).await;
    }
    let drained = drain(&h, "30s").await;
    assert_eq!(drained["drained"], true, "{drained}");
    assert_eq!(drained["failed"], 0);
    let endpoint = json(h.get("/v1/webhook_endpoints").send().await.unwrap()).await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let got = receiver.deliveries();
    let mut seen: HashMap<&str, (usize, usize)> = HashMap::new();
    for d in &got {
        let e = seen.entry(&d.event_id).or_default();
        if d.valid {
            assert!(d.sdk_valid);
            e.0 += 1;
        } else {
            assert!(!d.sdk_valid, "async-stripe refuses a forgery too");
            e.1 += 1;
        }
    }
    let all = events(&h, "").await;
    assert_eq!(all.len(), 36);
    let mut kinds = HashMap::new();
    for e in &all {
        let (id, kind) = (e["id"].as_str().unwrap(), e["type"].as_str().unwrap());
        assert_eq!(
            seen.get(id).copied().unwrap_or_default(),
            predicted(&engine, id, kind, &endpoint),
            "{kind} {id}"
        );
        assert_eq!(e["pending_webhooks"], 0);
    }
    // The log names, for each attempt, the fault the engine decides for it.
    let log = json(
        h.client
            .get(h.url("/__fauxpay/webhooks?limit=1000"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    for r in log["data"].as_array().unwrap() {
        let d = engine.decide_delivery(&DeliveryFacts {
            event_id: r["event"].as_str().unwrap(),
            event_type: r["type"].as_str().unwrap(),
            endpoint: &endpoint,
            attempt: r["attempt"].as_u64().unwrap() as u32,
        });
        assert_eq!(r["fault"].as_str().map(str::to_string), d.label(), "{r}");
        if let Some(f) = d.fault.as_ref().map(|(f, _)| f.kind()) {
            *kinds.entry(f).or_insert(0) += 1;
        }
    }
    for kind in ["duplicate", "lose_ack", "drop", "bad_signature"] {
        assert!(
            kinds.get(kind).copied().unwrap_or(0) > 0,
            "{kind} never acted: {kinds:?}"
        );
    }
    assert!(log["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["fault"].as_str().is_some_and(|f| f.contains("delay"))));
    got.len()
}

#[tokio::test]
async fn every_delivery_fault_is_decided_the_same_at_any_concurrency() {
    let one = fault_run(1).await;
    let many = fault_run(16).await;
    assert!(one > 36 && many > 36, "faults add deliveries: {one} {many}");
}

#[tokio::test]
async fn webhook_endpoints_created_through_the_api_receive_what_they_enable() {
    let l = listener().await;
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let receiver = Receiver::new(|_| Answer::Status(200));
    receiver.serve(l);
    let h = Harness::start(Config::default()).await;
    let r = h
        .form(
            "/v1/webhook_endpoints",
            &format!("url={url}&enabled_events[]=payment_intent.succeeded"),
            None,
        )
        .await;
    assert_eq!(r.status(), 200);
    let created = json(r).await;
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    let listed = json(h.get("/v1/webhook_endpoints").send().await.unwrap()).await;
    assert!(
        listed["data"][0].get("secret").is_none(),
        "the secret only in the create answer"
    );
    // Events are signed with this endpoint's own secret; only what it enables is sent.
    *receiver.secret.lock().unwrap() = secret.to_string();
    let pi = pay(&h, "api-1", "api-key-1").await;
    h.form("/v1/customers", "name=not-enabled", None).await;
    let drained = drain(&h, "10s").await;
    assert_eq!(
        (drained["delivered"].as_u64(), drained["failed"].as_u64()),
        (Some(1), Some(0))
    );
    let got = receiver.deliveries();
    assert_eq!(got.len(), 1);
    assert!(got[0].valid && got[0].sdk_valid);
    assert_eq!(got[0].event_type, "payment_intent.succeeded");
    assert_eq!(got[0].body["data"]["object"]["id"], pi["id"]);
    // Disabled, it gets nothing; deleted, it is gone.
    let id = created["id"].as_str().unwrap();
    let off = json(
        h.form(&format!("/v1/webhook_endpoints/{id}"), "disabled=true", None)
            .await,
    )
    .await;
    assert_eq!(off["status"], "disabled");
    pay(&h, "api-2", "api-key-2").await;
    assert_eq!(drain(&h, "10s").await["delivered"], 1);
    let del = json(h.delete(&format!("/v1/webhook_endpoints/{id}")).send().await.unwrap()).await;
    assert_eq!(del["deleted"], true);
    assert_eq!(
        h.get(&format!("/v1/webhook_endpoints/{id}"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

/// A plain-http receiver that answers 200 with an endless body: the delivery counts (a
/// 2xx), 64 KiB of the answer is read and the connection dropped, and the provider stays
/// small. (The https path is held to the same in webhooks_tls.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_webhook_answer_is_read_only_in_part() {
    let url = fauxpay_testkit::fakes::endless_server().await;
    let h = Harness::start(fauxpay_provider::Config {
        webhooks: vec![WebhookTarget {
            url: format!("{url}/hook"),
            secret: "whsec_endless".into(),
        }],
        delivery: Settings {
            retries: Vec::new(),
            timeout: Duration::from_secs(5),
            concurrency: 4,
        },
        ..fauxpay_provider::Config::default()
    })
    .await;
    let before = fauxpay_testkit::fakes::resident();
    for i in 0..3 {
        let r = h
            .form(
                "/v1/payment_intents",
                &common::charge_body(&format!("endless-{i}"), "pm_card_visa"),
                None,
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
    let grew = fauxpay_testkit::fakes::resident().saturating_sub(before);
    assert!(grew < 128 << 20, "endless answers grew the provider by {grew} bytes");
    let (_, log) = common::json(h.client.get(h.url("/__fauxpay/webhooks")).send().await.unwrap()).await;
    let attempts = log["data"].as_array().unwrap();
    assert_eq!(attempts.len(), 9, "{log}");
    assert!(attempts.iter().all(|a| a["result"] == "delivered"), "{log}");
}
