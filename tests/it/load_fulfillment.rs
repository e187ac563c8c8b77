//! `fauxpay load`'s fulfilment probe through the built binary, against real merchants
//! over real sockets. The webhook deliveries are driven by this test (a relay in front of
//! the provider's admin API, so that the probe does not depend on the provider's own
//! delivery): when the load generator asks `/__fauxpay/webhooks/drain` after the run, the
//! relay signs a `payment_intent.succeeded` for every captured charge of the ledger and
//! POSTs it to the merchant — twice, or not at all for some orders — then says the queue
//! is drained. The double and missed fulfilment counts must equal the merchants' own
//! truth (`GET /orders/{id}` of every order), gates and exit codes must follow, and the
//! report files and `report merge` must carry them. One test drops the relay: the
//! provider's own deliveries under the `duplicate-webhooks` profile.

use fauxpay_testkit::merchant as merchant_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use fauxpay_merchant::checkout_flow::CheckoutFlow;
use fauxpay_merchant::webhook::WebhookSecret;
use fauxpay_merchant::{MerchantConfig, RunningMerchant, Strategy};
use fauxpay_provider::config::WebhookTarget;
use fauxpay_provider::webhooks::Settings;
use fauxpay_provider::{Config, RunningProvider};
use merchant_common::*;
use parking_lot::Mutex;
use reqwest::Client;
use serde_json::{json, Value};

const SECRET: &str = "whsec_load_fulfilment";

/// How the relay delivers.
#[derive(Clone, Copy)]
struct Plan {
    /// Copies of each event.
    copies: u32,
    /// Every n-th charge (in ledger order) is never delivered (0: none skipped).
    skip_every: usize,
    /// Answer 404 on the drain endpoint, as a provider without webhooks does.
    no_webhooks: bool,
}

struct Relay {
    /// The run's order id prefix: only its charges are delivered.
    prefix: String,
    provider: String,
    merchant: String,
    plan: Plan,
    http: Client,
    delivered: AtomicU64,
    done: AtomicBool,
    log: Mutex<Vec<Value>>,
}

async fn forward(relay: &Relay, path: &str, query: &BTreeMap<String, String>) -> Response {
    let resp = relay
        .http
        .get(format!("{}{path}", relay.provider))
        .query(query)
        .send()
        .await
        .unwrap();
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
    (status, resp.bytes().await.unwrap()).into_response()
}

/// Delivers the events of every captured charge once (the first time it is asked).
async fn deliver_all(relay: &Relay) {
    if relay.done.swap(true, Ordering::SeqCst) {
        return;
    }
    let text = relay
        .http
        .get(format!("{}/__fauxpay/ledger", relay.provider))
        .query(&[("correlation_prefix", relay.prefix.as_str())])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let secret = WebhookSecret::parse(SECRET).unwrap();
    let charges = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "charge");
    for (i, charge) in charges.enumerate() {
        if relay.plan.skip_every > 0 && i % relay.plan.skip_every == 0 {
            continue;
        }
        let pi = charge["payment_intent"].as_str().unwrap();
        let order = charge["correlation_id"].as_str().unwrap();
        let event_id = format!("evt_{}", charge["id"].as_str().unwrap());
        let body = json!({
            "id": event_id, "object": "event", "type": "payment_intent.succeeded", "livemode": false,
            "data": {"object": {"id": pi, "object": "payment_intent", "status": "succeeded", "metadata": {"order_id": order}}},
        })
        .to_string();
        for copy in 1..=relay.plan.copies {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            let status = relay
                .http
                .post(format!("{}/webhooks/stripe", relay.merchant))
                .header("content-type", "application/json; charset=utf-8")
                .header("Stripe-Signature", secret.sign(t, body.as_bytes()))
                .body(body.clone())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(status, 200);
            relay.delivered.fetch_add(1, Ordering::SeqCst);
            relay.log.lock().push(json!({
                "event": event_id, "event_type": "payment_intent.succeeded", "attempt": 1, "status": status,
                "fault": (copy > 1).then(|| format!("duplicate copy {copy}")), "object_id": pi,
            }));
        }
    }
}

async fn drain(State(relay): State<Arc<Relay>>, Query(q): Query<BTreeMap<String, String>>) -> Response {
    if relay.plan.no_webhooks {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": {"message": "no such route"}})),
        )
            .into_response();
    }
    // The load generator asks with timeout=0ms before the run (a snapshot), then waits.
    if q.get("timeout").map(String::as_str) != Some("0ms") {
        deliver_all(&relay).await;
    }
    Json(json!({"drained": true, "queued": 0, "in_flight": 0, "retrying": 0,
                "delivered": relay.delivered.load(Ordering::SeqCst), "failed": 0}))
    .into_response()
}

async fn start_relay(provider: String, merchant: String, run_id: &str, plan: Plan) -> String {
    let relay = Arc::new(Relay {
        prefix: format!("{run_id}-"),
        provider,
        merchant,
        plan,
        http: Client::new(),
        delivered: AtomicU64::new(0),
        done: AtomicBool::new(false),
        log: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route(
            "/__fauxpay/health",
            get(|State(r): State<Arc<Relay>>, Query(q)| async move { forward(&r, "/__fauxpay/health", &q).await }),
        )
        .route(
            "/__fauxpay/ledger",
            get(|State(r): State<Arc<Relay>>, Query(q)| async move { forward(&r, "/__fauxpay/ledger", &q).await }),
        )
        .route(
            "/__fauxpay/requests",
            get(|State(r): State<Arc<Relay>>, Query(q)| async move { forward(&r, "/__fauxpay/requests", &q).await }),
        )
        .route("/__fauxpay/webhooks/drain", get(drain))
        .route(
            "/__fauxpay/webhooks",
            get(|State(r): State<Arc<Relay>>| async move { Json(json!({"data": *r.log.lock()})) }),
        )
        .with_state(relay);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

struct Run {
    code: i32,
    stdout: String,
    out: PathBuf,
}

impl Run {
    fn report(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.out.join("report.json")).unwrap()).unwrap()
    }
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fauxpay-fulfil-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs the binary off the async runtime's threads, so the servers in this process keep serving.
async fn load(name: &str, target: &str, provider: &str, extra: &[&str]) -> Run {
    let out = out_dir(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
    cmd.arg("load")
        .args([
            "--target",
            target,
            "--provider",
            provider,
            "--run-id",
            name,
            "--seed",
            "3",
        ])
        .args(["--users", "3", "--iterations", "6", "--increase-rate", "1000"])
        .args(["--client-timeout", "2s", "--backoff", "10ms..50ms", "--out"])
        .arg(&out)
        .args(extra);
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr),
        out,
    }
}

/// A provider under `profile` delivering its own webhooks to a merchant of each of
/// `strategies` in `flow`, every one serving before the first run (the provider delivers
/// each event to all; each ignores the others' orders).
async fn delivering_to(
    profile: &str,
    strategies: &[Strategy],
    flow: CheckoutFlow,
) -> (RunningProvider, Vec<RunningMerchant>) {
    let mut listeners = Vec::new();
    for _ in strategies {
        listeners.push(tokio::net::TcpListener::bind(any_port()).await.unwrap());
    }
    let provider = RunningProvider::start(
        Config {
            webhooks: listeners
                .iter()
                .map(|l| WebhookTarget {
                    url: format!("http://{}/webhooks/stripe", l.local_addr().unwrap()),
                    secret: SECRET.into(),
                })
                .collect(),
            delivery: Settings {
                retries: vec![Duration::from_millis(100), Duration::from_millis(300)],
                ..Settings::default()
            },
            ..provider_config(profile)
        },
        any_port(),
    )
    .await
    .unwrap();
    let mut merchants = Vec::new();
    for (strategy, listener) in strategies.iter().zip(listeners) {
        let mut config = merchant_config(*strategy, &provider.url(), &Backend::Memory, with_secret);
        config.flow = flow;
        merchants.push(RunningMerchant::start_on(config, listener).await.unwrap());
    }
    (provider, merchants)
}

/// The merchants' side of the webhook secret the deliveries are signed with.
fn with_secret(c: &mut MerchantConfig) {
    c.webhook_secret = Some(WebhookSecret::parse(SECRET).unwrap());
}

async fn webhook_merchant(strategy: Strategy, provider_url: &str) -> RunningMerchant {
    merchant(strategy, provider_url, &Backend::Memory, with_secret).await
}

/// The merchant's truth over the run's orders (from its journal): (orders fulfilled more
/// than once, orders paid but never fulfilled).
async fn truth(m: &RunningMerchant, run: &Run) -> (u64, u64) {
    let client = Client::new();
    let (mut double, mut missed) = (0, 0);
    let journal = std::fs::read_to_string(run.out.join("journal.jsonl")).unwrap();
    let orders: Vec<String> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "outcome")
        .map(|l| l["order_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(orders.len(), 18);
    for id in orders {
        let (status, order) = merchant_common::order(&client, &m.url(), &id).await;
        assert_eq!(status, 200, "{order}");
        let n = order["fulfillments"].as_u64().unwrap();
        double += u64::from(n > 1);
        missed += u64::from(n == 0 && order["status"] == "paid");
    }
    (double, missed)
}

fn check_files(out: &Path, gate: &str, failed: bool) {
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(&format!("| {gate} |")), "{md}");
    assert!(md.contains("Fulfilment: "), "{md}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    let case = junit
        .lines()
        .find(|l| l.contains(&format!("name=\"{gate} ")))
        .unwrap_or_else(|| panic!("no {gate} test case:\n{junit}"));
    assert_eq!(!case.trim_end().ends_with("/>"), failed, "{case}");
}

#[tokio::test]
async fn double_and_missed_fulfillments_equal_the_merchants_truth() {
    let provider = provider("happy").await;
    let mut reports = Vec::new();
    for (strategy, plan) in [
        (
            Strategy::Naive,
            Plan {
                copies: 2,
                skip_every: 0,
                no_webhooks: false,
            },
        ),
        (
            Strategy::Idempotent,
            Plan {
                copies: 2,
                skip_every: 0,
                no_webhooks: false,
            },
        ),
        (
            Strategy::Idempotent,
            Plan {
                copies: 1,
                skip_every: 4,
                no_webhooks: false,
            },
        ),
    ] {
        let m = webhook_merchant(strategy, &provider.url()).await;
        let run_id = format!("ful-{}-{}-{}", strategy.as_str(), plan.copies, plan.skip_every);
        let relay = start_relay(provider.url(), m.url(), &run_id, plan).await;
        let run = load(&run_id, &m.url(), &relay, &[]).await;
        let report = run.report();
        assert_eq!(report["payments"], 18, "{}", run.stdout);
        assert_eq!(report["anomalies"]["double_charges"]["count"], 0, "{}", run.stdout);
        let (double, missed) = truth(&m, &run).await;
        let a = &report["anomalies"];
        assert_eq!(a["double_fulfillments"]["count"], double, "{}", run.stdout);
        assert_eq!(a["missed_fulfillments"]["count"], missed, "{}", run.stdout);
        let f = &report["fulfillment"];
        assert_eq!(
            (
                f["checked"].as_bool(),
                f["probed"].as_u64(),
                f["probe_failures"].as_u64()
            ),
            (Some(true), Some(18), Some(0)),
            "{f}"
        );
        assert_eq!(f["probe"], "GET /orders/{{order_id}} → /fulfillments");
        match (strategy, plan.skip_every) {
            (Strategy::Naive, _) => {
                assert_eq!(double, 18, "every order shipped twice");
                assert_eq!(a["extra_fulfillments"], 18);
                assert_eq!(run.code, 1, "{}", run.stdout);
                assert!(
                    run.stdout.contains("FAIL double fulfillments = 18 (≤ 0)"),
                    "{}",
                    run.stdout
                );
                let story = a["double_fulfillments"]["examples"][0]["story"].as_str().unwrap();
                assert!(story.starts_with("fulfilled 2 times | deliveries: evt_"), "{story}");
                assert!(
                    story.contains("payment_intent.succeeded attempt 1 → 200 (duplicate copy 2)"),
                    "{story}"
                );
                assert!(story.contains("| ledger: 1 captured charge"), "{story}");
                check_files(&run.out, "double fulfillments", true);
            }
            (_, 0) => {
                assert_eq!((double, missed), (0, 0));
                assert_eq!(run.code, 0, "{}", run.stdout);
                assert!(
                    run.stdout.contains("PASS double fulfillments = 0 (≤ 0)"),
                    "{}",
                    run.stdout
                );
                assert!(run.stdout.contains("fulfilment  18 orders probed"), "{}", run.stdout);
                check_files(&run.out, "double fulfillments", false);
            }
            (_, _) => {
                // Charges 0, 4, 8, 12 and 16 of the ledger were never delivered.
                assert_eq!((double, missed), (0, 5));
                assert_eq!(run.code, 1, "{}", run.stdout);
                assert!(
                    run.stdout.contains("FAIL missed fulfillments = 5 (≤ 0)"),
                    "{}",
                    run.stdout
                );
                let story = a["missed_fulfillments"]["examples"][0]["story"].as_str().unwrap();
                assert!(
                    story.starts_with("fulfilled 0 times | deliveries: none logged | order "),
                    "{story}"
                );
                check_files(&run.out, "missed fulfillments", true);
            }
        }
        reports.push(run);
        m.shutdown().await;
    }

    // report merge sums them.
    let merged = out_dir("merged");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fauxpay"));
    cmd.args(["report", "merge", "--out"]).arg(&merged);
    for r in &reports {
        cmd.arg(r.out.join("report.json"));
    }
    let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let m: Value = serde_json::from_str(&std::fs::read_to_string(merged.join("report.json")).unwrap()).unwrap();
    assert_eq!(m["anomalies"]["double_fulfillments"]["count"], 18);
    assert_eq!(m["anomalies"]["missed_fulfillments"]["count"], 5);
    assert_eq!(m["fulfillment"]["probed"], 54);
    let gates: Vec<(&str, bool)> = m["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["name"].as_str().unwrap(), g["passed"].as_bool().unwrap()))
        .filter(|(n, _)| n.contains("fulfillments"))
        .collect();
    assert_eq!(gates, [("double fulfillments", false), ("missed fulfillments", false)]);
    let _ = provider.shutdown().await;
}

/// The provider's own deliveries, no relay: `fauxpay serve --profile duplicate-webhooks`
/// (every `payment_intent.succeeded` twice at once, 30% of events delayed past later ones,
/// 20% of first acknowledgements lost and retried) delivering to a naive and an idempotent
/// merchant. The load generator's double and missed fulfilment counts equal each
/// merchant's own truth: naive ships every order at least twice, idempotent each once.
#[tokio::test]
async fn under_duplicate_webhooks_the_providers_own_deliveries_are_counted_as_the_merchants_saw_them() {
    let (provider, merchants) = delivering_to(
        "duplicate-webhooks",
        &[Strategy::Naive, Strategy::Idempotent],
        CheckoutFlow::default(),
    )
    .await;
    for m in &merchants {
        let run_id = format!("dup-hooks-{}", m.strategy.as_str());
        let run = load(&run_id, &m.url(), &provider.url(), &[]).await;
        let report = run.report();
        assert_eq!(report["payments"], 18, "{}", run.stdout);
        assert_eq!(report["fulfillment"]["checked"], true, "{}", run.stdout);
        assert_eq!(report["fulfillment"]["probed"], 18, "{}", run.stdout);
        let (double, missed) = truth(m, &run).await;
        let a = &report["anomalies"];
        assert_eq!(a["double_fulfillments"]["count"], double, "{}", run.stdout);
        assert_eq!(a["missed_fulfillments"]["count"], missed, "{}", run.stdout);
        match m.strategy {
            Strategy::Naive => {
                assert_eq!((double, missed), (18, 0), "{}", run.stdout);
                assert_eq!(run.code, 1, "{}", run.stdout);
                let story = a["double_fulfillments"]["examples"][0]["story"].as_str().unwrap();
                assert!(story.contains("duplicate"), "the story names the fault: {story}");
            }
            _ => {
                assert_eq!((double, missed), (0, 0), "{}", run.stdout);
                assert_eq!(run.code, 0, "{}", run.stdout);
            }
        }
    }
    for m in merchants {
        m.shutdown().await;
    }
    let _ = provider.shutdown().await;
}

#[tokio::test]
async fn without_webhooks_fulfillment_is_not_checked_and_explicit_gates_fail() {
    let provider = provider("happy").await;
    let m = webhook_merchant(Strategy::Idempotent, &provider.url()).await;
    let plan = Plan {
        copies: 1,
        skip_every: 0,
        no_webhooks: true,
    };
    let relay = start_relay(provider.url(), m.url(), "ful-off", plan).await;
    // Not gated by default: the run passes, and says why fulfilment was not checked.
    let run = load("ful-off", &m.url(), &relay, &[]).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    let report = run.report();
    assert_eq!(report["fulfillment"]["checked"], false);
    assert!(
        report["fulfillment"]["note"].as_str().unwrap().contains("--webhook"),
        "{report}"
    );
    assert!(run.stdout.contains("fulfilment  not checked"), "{}", run.stdout);
    assert!(!report["gates"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "double fulfillments"));
    // Asked for explicitly, a gate that could not be judged fails.
    let run = load("ful-off-gated", &m.url(), &relay, &["--max-double-fulfillments", "0"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("FAIL double fulfillments = not checked (≤ 0)"),
        "{}",
        run.stdout
    );
    m.shutdown().await;
    let _ = provider.shutdown().await;
}

#[tokio::test]
async fn fulfillment_gates_need_a_probe() {
    let provider = provider("happy").await;
    let run = load(
        "ful-stripe",
        &provider.url(),
        &provider.url(),
        &["--template", "stripe", "--max-missed-fulfillments", "0"],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("--max-missed-fulfillments: fulfillment: expected a template with a [fulfillment] probe"),
        "{}",
        run.stdout
    );
    let _ = provider.shutdown().await;
}

/// The bundled browser flows against each reference merchant in the matching `--flow`,
/// with the provider's own webhook deliveries and Stripe's test cards (paid, declined,
/// 3-D Secure then paid or declined): no double charge anywhere (the browser confirms
/// once), no false lost or phantom charge, and double and missed fulfilments equal to each
/// merchant's own truth. `payment-element` under `duplicate-webhooks`: naive and lock-only
/// ship twice what the provider delivered twice. `checkout-session`: naive and lock-only
/// ship every paid order twice (its `checkout.session.completed` and the success page);
/// idempotent ships each once and passes.
#[tokio::test]
async fn browser_flows_against_each_merchant_count_what_each_merchant_shipped() {
    for (flow, profile) in [
        (CheckoutFlow::PaymentElement, "duplicate-webhooks"),
        (CheckoutFlow::CheckoutSession, "happy"),
    ] {
        let strategies = [Strategy::Naive, Strategy::LockOnly, Strategy::Idempotent];
        let (provider, merchants) = delivering_to(profile, &strategies, flow).await;
        for m in merchants {
            let strategy = m.strategy;
            let run_id = format!("{}-{}", flow.as_str(), strategy.as_str());
            let run = load(
                &run_id,
                &m.url(),
                &provider.url(),
                &["--template", flow.as_str(), "--data", "stripe-cards"],
            )
            .await;
            let report = run.report();
            let a = &report["anomalies"];
            assert_eq!(report["payments"], 18, "{}", run.stdout);
            for clean in ["double_charges", "lost", "phantom", "unexpected_charges"] {
                assert_eq!(a[clean]["count"], 0, "{run_id}: {clean}\n{}", run.stdout);
            }
            // Stripe's test cards: the paid ones ok, the declined ones fail, none unresolved.
            let o = &report["outcomes"];
            assert_eq!(o["info"], 0, "{run_id}: {o}\n{}", run.stdout);
            assert!(
                o["ok"].as_u64().unwrap() >= 6 && o["fail"].as_u64().unwrap() >= 6,
                "{run_id}: {o}"
            );
            assert_eq!(report["fulfillment"]["checked"], true, "{}", run.stdout);
            let (double, missed) = truth(&m, &run).await;
            assert_eq!(a["double_fulfillments"]["count"], double, "{run_id}\n{}", run.stdout);
            assert_eq!(a["missed_fulfillments"]["count"], missed, "{run_id}\n{}", run.stdout);
            assert_eq!(missed, 0, "{run_id}");
            let paid = o["ok"].as_u64().unwrap();
            eprintln!("{run_id}: {o}, double fulfilments {double}, exit {}", run.code);
            match (strategy, flow) {
                (Strategy::Idempotent, _) => {
                    assert_eq!(double, 0, "{run_id}");
                    assert_eq!(run.code, 0, "{run_id}\n{}", run.stdout);
                }
                (_, CheckoutFlow::CheckoutSession) => {
                    assert_eq!(double, paid, "{run_id}: the webhook and the success page");
                    assert_eq!(run.code, 1, "{run_id}\n{}", run.stdout);
                }
                _ => {
                    assert!(double > 0, "{run_id}: duplicated deliveries shipped twice");
                    assert_eq!(run.code, 1, "{run_id}\n{}", run.stdout);
                }
            }
            m.shutdown().await;
        }
        let _ = provider.shutdown().await;
    }
}
