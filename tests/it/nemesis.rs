//! A Jepsen-style nemesis run, bounded to about half a minute: keyed clients pay through
//! `fauxpay serve --data-dir` (on a small tmpfs) with a webhook endpoint, while a seeded
//! schedule of faults hits the provider: `kill -9` and a restart, a full disk for a
//! moment, `SIGSTOP`/`SIGCONT` pauses, and jumps of its clock (shorter than the keys'
//! TTL). Then the history is checked: every payment a client was told succeeded exists
//! exactly once, every key replays it, every event the provider lists was delivered at
//! least once, and no order was charged twice. The counts are printed: ok, fail and info
//! operations, faults injected, anomalies.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::durable::{client, get, ledger_lines, start_async, SmallDisk, XorShift};

/// One client operation's outcome, in Jepsen's terms.
#[derive(Default)]
struct History {
    ok: BTreeMap<String, String>,
    fail: u64,
    info: BTreeSet<String>,
}

/// Pays `order` with its key, retrying what may be retried (connection errors, 5xx) a few
/// times: `Some(id)` when told it succeeded, `None` when it never knew.
async fn pay_with_retries(
    client: &reqwest::Client,
    url: &Arc<Mutex<String>>,
    order: &str,
) -> Result<Option<String>, u16> {
    for attempt in 0..6 {
        let base = url.lock().unwrap().clone();
        let resp = client
            .post(format!("{base}/v1/payment_intents"))
            .bearer_auth("sk_test_nemesis")
            .header("Idempotency-Key", order)
            .timeout(Duration::from_secs(2))
            .form(&[
                ("amount", "1500"),
                ("currency", "usd"),
                ("confirm", "true"),
                ("payment_method", "pm_card_visa"),
                ("metadata[order_id]", order),
            ])
            .send()
            .await;
        match resp {
            Ok(r) if r.status() == 200 => {
                let body: Value = r.json().await.unwrap_or(Value::Null);
                return Ok(body["id"].as_str().map(str::to_string));
            }
            Ok(r) if r.status().is_client_error() && r.status() != 409 && r.status() != 429 => {
                return Err(r.status().as_u16())
            }
            _ => tokio::time::sleep(Duration::from_millis(50 << attempt.min(4))).await,
        }
    }
    Ok(None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_nemesis_loses_and_doubles_nothing() {
    let Some(disk) = SmallDisk::mount("nemesis", "32m") else {
        return;
    };
    let dir = disk.0.join("data");
    let filler = disk.0.join("filler");
    // A webhook receiver that acknowledges every delivery and remembers each event id.
    let delivered: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", receiver.local_addr().unwrap());
    {
        let delivered = delivered.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |body: axum::body::Bytes| {
                let delivered = delivered.clone();
                async move {
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        if let Some(id) = v["id"].as_str() {
                            delivered.lock().unwrap().insert(id.to_string());
                        }
                    }
                    axum::http::StatusCode::OK
                }
            }),
        );
        tokio::spawn(async move { axum::serve(receiver, app).await });
    }
    let args = [
        "--webhook",
        &hook,
        "--webhook-secret",
        "whsec_nemesis",
        "--webhook-retries",
        "200ms,500ms,1s,2s,4s",
    ];
    let server = start_async(&dir, &args).await;
    let url = Arc::new(Mutex::new(server.url.clone()));
    let server = Arc::new(Mutex::new(Some(server)));
    let history: Arc<Mutex<History>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let http = client();

    // The clients: each pays its own orders, one after another.
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (http, url, history, stop) = (http.clone(), url.clone(), history.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let order = format!("nemesis-{c}-{n}");
                    n += 1;
                    match pay_with_retries(&http, &url, &order).await {
                        Ok(Some(id)) => drop(history.lock().unwrap().ok.insert(order, id)),
                        Ok(None) => drop(history.lock().unwrap().info.insert(order)),
                        Err(_) => history.lock().unwrap().fail += 1,
                    }
                    // A customer's think time: the run stays a few thousand payments.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();

    // The nemesis: a seeded schedule of faults for ~25 s.
    let mut rng = XorShift(0x4E4D_3515);
    let mut faults: BTreeMap<&str, u32> = BTreeMap::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(300 + rng.next() % 700)).await;
        let pid = server.lock().unwrap().as_ref().map(|s| s.child.id()).unwrap();
        match rng.next() % 4 {
            0 => {
                let old = server.lock().unwrap().take().unwrap();
                tokio::task::spawn_blocking(move || old.kill_9()).await.unwrap();
                let restarted = start_async(&dir, &args).await;
                *url.lock().unwrap() = restarted.url.clone();
                *server.lock().unwrap() = Some(restarted);
                *faults.entry("kill -9").or_default() += 1;
            }
            1 => {
                Command::new("kill").args(["-STOP", &pid.to_string()]).status().unwrap();
                tokio::time::sleep(Duration::from_millis(100 + rng.next() % 400)).await;
                Command::new("kill").args(["-CONT", &pid.to_string()]).status().unwrap();
                *faults.entry("pause").or_default() += 1;
            }
            2 => {
                use std::io::Write;
                let mut f = std::fs::File::create(&filler).unwrap();
                while f.write_all(&[1u8; 1 << 16]).is_ok() {}
                drop(f);
                tokio::time::sleep(Duration::from_millis(100 + rng.next() % 400)).await;
                std::fs::remove_file(&filler).unwrap();
                *faults.entry("disk full").or_default() += 1;
            }
            _ => {
                let base = url.lock().unwrap().clone();
                let by = format!("{}m", 1 + rng.next() % 60);
                let _ = http
                    .post(format!("{base}/__fauxpay/clock"))
                    .form(&[("advance", by.as_str())])
                    .send()
                    .await;
                *faults.entry("clock jump").or_default() += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        tokio::time::timeout(Duration::from_secs(60), c)
            .await
            .expect("clients stop")
            .unwrap();
    }

    // Settle: what the clients never learned is retried with its key, deliveries drain.
    let base = url.lock().unwrap().clone();
    let info: Vec<String> = history.lock().unwrap().info.iter().cloned().collect();
    for order in info {
        if let Ok(Some(id)) = pay_with_retries(&http, &url, &order).await {
            history.lock().unwrap().ok.insert(order, id);
        }
    }
    let (status, drained) = get(&http, &base, "/__fauxpay/webhooks/drain?timeout=60s").await;
    assert_eq!(status, 200, "{drained}");

    let history = std::mem::take(&mut *history.lock().unwrap());
    let mut anomalies = Vec::new();
    // Every acknowledged payment is in the ledger exactly once, under its order.
    let ledger = ledger_lines(&http, &base, "nemesis-").await;
    let mut charged: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in ledger.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        if r["kind"] == "charge" {
            charged
                .entry(r["correlation_id"].as_str().unwrap_or("").to_string())
                .or_default()
                .push(r["payment_intent"].as_str().unwrap_or("").to_string());
        }
    }
    for (order, id) in &history.ok {
        match charged.get(order).map(Vec::as_slice) {
            Some([one]) if one == id => {}
            other => anomalies.push(format!("{order} {id}: charged {other:?}")),
        }
        match pay_with_retries(&http, &url, order).await {
            Ok(Some(again)) if &again == id => {}
            other => anomalies.push(format!("no replay: {order} {id}: {other:?}")),
        }
    }
    let (_, summary) = get(&http, &base, "/__fauxpay/summary").await;
    let doubled = summary["duplicate_group_count"].as_u64().unwrap_or(u64::MAX);
    if doubled != 0 {
        anomalies.push(format!(
            "{doubled} orders charged twice: {}",
            summary["duplicate_groups"]
        ));
    }
    let mut listed = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(a) => format!("/v1/events?limit=100&starting_after={a}"),
            None => "/v1/events?limit=100".to_string(),
        };
        let resp = http
            .get(format!("{base}{path}"))
            .bearer_auth("sk_test_nemesis")
            .send()
            .await
            .unwrap();
        let page: Value = resp.json().await.unwrap();
        let data = page["data"].as_array().cloned().unwrap_or_default();
        listed.extend(data.iter().filter_map(|e| e["id"].as_str().map(str::to_string)));
        after = data.last().and_then(|e| e["id"].as_str().map(str::to_string));
        if page["has_more"] != true || after.is_none() {
            break;
        }
    }
    let delivered = delivered.lock().unwrap().clone();
    let undelivered: Vec<&String> = listed.iter().filter(|e| !delivered.contains(*e)).collect();
    if !undelivered.is_empty() {
        anomalies.push(format!(
            "{} events never delivered, e.g. {:?}",
            undelivered.len(),
            &undelivered[..undelivered.len().min(3)]
        ));
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\nnemesis history: {} ok, {} fail, {} info; faults {faults:?}; {} events listed, {} delivered; {} anomalies\n",
        history.ok.len(),
        history.fail,
        history.info.len(),
        listed.len(),
        delivered.len(),
        anomalies.len()
    );
    assert!(
        history.ok.len() > 50,
        "too little happened: {} payments",
        history.ok.len()
    );
    assert!(faults.values().sum::<u32>() >= 10, "{faults:?}");
    assert!(anomalies.is_empty(), "{}", anomalies.join("\n"));
    if let Some(s) = server.lock().unwrap().take() {
        s.terminate();
    }
    drop(disk);
}
