//! `fauxpay serve --data-dir`, through the real binary: concurrent clients with
//! idempotency keys, `kill -9` at seeded moments three times in a row, a restart each
//! time, then every answered payment exists, every retry with its key replays (no new
//! charge) and the ledger has no duplicate; a torn last write recovers to the last whole
//! record and says so; a damaged record (a flipped bit in its length) is repaired and a
//! repeated one skipped, both said; a data dir from a newer fauxpay is refused, and so is
//! a second fauxpay on a data dir in use; products, prices and paid, expired and open
//! Checkout Sessions survive a crash.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fauxpay_provider::durable::Record;
use serde_json::Value;

/// A `fauxpay serve` process on a data dir.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
    /// What it printed up to and including the start-up line.
    pub(crate) startup: String,
}

pub(crate) fn data_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fauxpay-durable-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(dir: &Path) -> Server {
    start_with(dir, &[])
}

fn start_with(dir: &Path, extra: &[&str]) -> Server {
    let args = ["serve", "--addr", "127.0.0.1:0", "--data-dir"].map(std::ffi::OsStr::new);
    let (child, url, mut stderr, startup) = crate::support::spawn_listening(
        args.into_iter()
            .chain([dir.as_os_str()])
            .chain(extra.iter().map(std::ffi::OsStr::new)),
    );
    // Keep the pipe drained, so the server never blocks on its own logging.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Server { child, url, startup }
}

/// [`start_with`] from async code (the start blocks until the start-up line).
pub(crate) async fn start_async(dir: &Path, extra: &[&str]) -> Server {
    let dir = dir.to_path_buf();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || start_with(&dir, &extra.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .unwrap()
}

impl Server {
    pub(crate) fn kill_9(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }

    pub(crate) fn terminate(mut self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        assert!(self.child.wait().unwrap().success());
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// Pays order `order` with its key: the intent's id and whether the answer was a replay.
pub(crate) async fn pay(client: &reqwest::Client, url: &str, order: &str) -> Result<(String, bool), String> {
    let resp = client
        .post(format!("{url}/v1/payment_intents"))
        .bearer_auth("sk_test_durable")
        .header("Idempotency-Key", order)
        .form(&[
            ("amount", "1500"),
            ("currency", "usd"),
            ("confirm", "true"),
            ("payment_method", "pm_card_visa"),
            ("metadata[order_id]", order),
        ])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let replayed = resp.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.map_err(|e| e.to_string())?;
    match (status, body["id"].as_str()) {
        (200, Some(id)) if body["status"] == "succeeded" => Ok((id.to_string(), replayed)),
        _ => Err(format!("{status} {body}")),
    }
}

pub(crate) async fn get(client: &reqwest::Client, url: &str, path: &str) -> (u16, Value) {
    let resp = client
        .get(format!("{url}{path}"))
        .bearer_auth("sk_test_durable")
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

/// The ledger's JSON lines of the orders whose ids start with `prefix`.
pub(crate) async fn ledger_lines(client: &reqwest::Client, url: &str, prefix: &str) -> String {
    client
        .get(format!("{url}/__fauxpay/ledger?correlation_prefix={prefix}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A small deterministic generator: the moments of the kills come from the seed.
pub(crate) struct XorShift(pub(crate) u64);
impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_three_times_under_load_loses_and_doubles_nothing() {
    const CLIENTS: usize = 8;
    let dir = data_dir("kill9");
    let mut rng = XorShift(0x5EED_F00D);
    let client = client();
    // Every order a client was told succeeded, with its intent.
    let acked: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let next_order = Arc::new(AtomicUsize::new(0));
    for round in 1..=3 {
        let server = start_async(&dir, &[]).await;
        let url = server.url.clone();
        if round > 1 {
            assert!(server.startup.contains("recovered"), "{}", server.startup);
            assert!(!server.startup.contains("ended otherwise"), "{}", server.startup);
        }
        let before = acked.lock().unwrap().len();
        let kill_after = before + 40 + (rng.next() % 160) as usize;
        let progress = Arc::new(tokio::sync::Notify::new());
        let unanswered: Arc<Mutex<Vec<String>>> = Arc::default();
        let workers: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let (client, url, acked, next, progress, unanswered) = (
                    client.clone(),
                    url.clone(),
                    acked.clone(),
                    next_order.clone(),
                    progress.clone(),
                    unanswered.clone(),
                );
                tokio::spawn(async move {
                    loop {
                        let order = format!("order-{}", next.fetch_add(1, Ordering::SeqCst));
                        match pay(&client, &url, &order).await {
                            Ok((id, replayed)) => {
                                assert!(!replayed, "{order} was new");
                                acked.lock().unwrap().insert(order, id);
                                progress.notify_one();
                            }
                            // The kill: this one's outcome is unknown to its client.
                            Err(_) => {
                                unanswered.lock().unwrap().push(order);
                                progress.notify_one();
                                return;
                            }
                        }
                    }
                })
            })
            .collect();
        // The seeded moment: once this many payments have been answered.
        tokio::time::timeout(Duration::from_secs(60), async {
            while acked.lock().unwrap().len() < kill_after {
                progress.notified().await;
            }
        })
        .await
        .expect("payments progress");
        tokio::task::spawn_blocking(move || server.kill_9()).await.unwrap();
        for w in workers {
            tokio::time::timeout(Duration::from_secs(30), w)
                .await
                .expect("clients stop once the server is gone")
                .unwrap();
        }

        let server = start_async(&dir, &[]).await;
        let url = server.url.clone();
        assert!(server.startup.contains("recovered"), "{}", server.startup);
        // Every write ends as it ended the first time.
        assert!(!server.startup.contains("ended otherwise"), "{}", server.startup);
        let snapshot = acked.lock().unwrap().clone();
        assert!(snapshot.len() >= kill_after, "round {round}");
        for (order, id) in &snapshot {
            // Every payment a client was told succeeded exists…
            let (status, body) = get(&client, &url, &format!("/v1/payment_intents/{id}")).await;
            assert_eq!(
                (status, body["status"].as_str()),
                (200, Some("succeeded")),
                "round {round}: {order} {id}"
            );
            assert_eq!(body["metadata"]["order_id"], order.as_str());
            // …and its retry replays: no new charge.
            let (again, replayed) = pay(&client, &url, order).await.unwrap();
            assert_eq!(&again, id, "round {round}: {order} charged again after the restart");
            assert!(replayed, "round {round}: {order} was not replayed");
        }
        // The payments in flight at the kill: the retry settles each (a replay when the
        // first attempt was logged, a first charge when it never was).
        let unanswered = unanswered.lock().unwrap().clone();
        for order in &unanswered {
            let (id, _) = pay(&client, &url, order).await.unwrap();
            acked.lock().unwrap().insert(order.clone(), id);
        }
        let (_, summary) = get(&client, &url, "/__fauxpay/summary").await;
        let expected = acked.lock().unwrap().len();
        assert_eq!(summary["duplicate_group_count"], 0, "round {round}: {summary}");
        assert_eq!(
            summary["charges"].as_u64(),
            Some(expected as u64),
            "round {round}: ledger ≠ journal"
        );
        assert_eq!(summary["correlation_ids"].as_u64(), Some(expected as u64));
        tokio::task::spawn_blocking(move || server.kill_9()).await.unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_torn_last_write_recovers_to_the_last_whole_record_and_says_so() {
    let dir = data_dir("torn");
    let client = client();
    let server = start(&dir);
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(pay(&client, &server.url, &format!("torn-{n}")).await.unwrap().0);
    }
    server.terminate();
    // A crash in the middle of the last write: its last 3 bytes never reached the disk.
    let log = dir.join("fauxpay.log");
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 3)
        .unwrap();

    let server = start(&dir);
    assert!(
        server.startup.contains("the last write was torn") && server.startup.contains("discarded"),
        "{}",
        server.startup
    );
    for id in &ids[..4] {
        assert_eq!(
            get(&client, &server.url, &format!("/v1/payment_intents/{id}")).await.0,
            200
        );
    }
    // The torn record was the last payment's: it is gone, and its key with it.
    assert_eq!(
        get(&client, &server.url, &format!("/v1/payment_intents/{}", ids[4]))
            .await
            .0,
        404
    );
    let (id, replayed) = pay(&client, &server.url, "torn-4").await.unwrap();
    assert!(!replayed && id != ids[4]);
    let (_, summary) = get(&client, &server.url, "/__fauxpay/summary").await;
    assert_eq!(summary["charges"], 5);
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Polls `GET /__fauxpay/health` until its `data_log` satisfies `done` (at most 60 s).
async fn data_log_until(client: &reqwest::Client, url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, health) = get(client, url, "/__fauxpay/health").await;
        if done(&health["data_log"]) {
            return health["data_log"].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the data log never got there: {health}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `--retain` with a data dir: once what the log holds has left the window, the log is
/// compacted (the writes whose effects all left are dropped), and a restart after
/// `kill -9` replays the live window, not the history, and loses nothing that was live:
/// the customer and its saved card, the duplicate group, the ledger's totals and sequence
/// numbers, the payment made just before the kill and its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_retain_the_log_is_compacted_and_a_restart_replays_only_the_live_window() {
    let dir = data_dir("compact");
    let client = client();
    let flags = ["--retain", "4s", "--key-ttl", "3s", "--compact-after", "16KiB"];
    let server = start_async(&dir, &flags).await;
    let url = server.url.clone();
    let post = |url: &str, path: &'static str, key: String, form: Vec<(&'static str, String)>| {
        let (client, url) = (client.clone(), url.to_string());
        async move {
            let resp = client
                .post(format!("{url}{path}"))
                .bearer_auth("sk_test_durable")
                .header("Idempotency-Key", key)
                .form(&form)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            resp.json::<Value>().await.unwrap()
        }
    };
    // Kept for good: a customer with a saved card, and an order charged twice.
    let customer = post(
        &url,
        "/v1/customers",
        "customer".into(),
        vec![("email", "a@b.co".into()), ("payment_method", "pm_card_visa".into())],
    )
    .await;
    let cus = customer["id"].as_str().unwrap().to_string();
    for key in ["twice-a", "twice-b"] {
        let form = [
            "amount=900",
            "currency=usd",
            "confirm=true",
            "payment_method=pm_card_visa",
        ]
        .map(|p| p.split_once('=').unwrap())
        .map(|(k, v)| (k, v.to_string()))
        .into_iter()
        .chain([("metadata[order_id]", "twice".to_string())])
        .collect();
        post(&url, "/v1/payment_intents", key.into(), form).await;
    }
    let bytes = |d: Value| d["bytes"].as_u64().unwrap();
    let start = bytes(data_log_until(&client, &url, |_| true).await);
    let mut old = Vec::new();
    for n in 0..200 {
        old.push(pay(&client, &url, &format!("old-{n}")).await.unwrap().0);
    }
    let old_bytes = bytes(data_log_until(&client, &url, |_| true).await) - start;
    // The old payments leave memory with the window, and their keys with the TTL.
    let last_old = old.last().unwrap().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while get(&client, &url, &format!("/v1/payment_intents/{last_old}")).await.0 != 404 {
        assert!(std::time::Instant::now() < deadline, "the old payments never left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = data_log_until(&client, &url, |_| true).await;
    // New writes grow the log past --compact-after (and past a third of its compacted size):
    // the next sweep compacts it.
    for n in 0..200 {
        pay(&client, &url, &format!("new-{n}")).await.unwrap();
    }
    let grown = bytes(data_log_until(&client, &url, |_| true).await);
    let after = data_log_until(&client, &url, |d| {
        d["compactions"].as_u64() > before["compactions"].as_u64()
    })
    .await;
    let compacted = std::fs::metadata(dir.join("fauxpay.log")).unwrap().len();
    // The old payments' records are gone (all but a few retire records).
    assert!(
        compacted + old_bytes * 9 / 10 < grown,
        "{compacted} bytes of {grown} after compaction, {old_bytes} of them old ({after})"
    );
    // Paid just before the kill, with the saved card.
    let card = get(&client, &url, &format!("/v1/customers/{cus}/payment_methods"))
        .await
        .1["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // One payment with the saved card, keyed: made before the kill, replayed after it.
    let pay_last = |url: String| {
        let form = vec![
            ("amount", "700".to_string()),
            ("currency", "usd".into()),
            ("confirm", "true".into()),
            ("customer", cus.clone()),
            ("payment_method", card.clone()),
            ("metadata[order_id]", "last".into()),
        ];
        let post = &post;
        async move { post(&url, "/v1/payment_intents", "last".into(), form).await }
    };
    let last = pay_last(url.clone()).await;
    let (_, summary) = get(&client, &url, "/__fauxpay/summary").await;
    let twice = ledger_lines(&client, &url, "twice").await;
    assert_eq!(twice.lines().count(), 2, "{twice}");
    tokio::task::spawn_blocking(move || server.kill_9()).await.unwrap();

    let server = start_async(&dir, &flags).await;
    let url = server.url.clone();
    assert!(!server.startup.contains("ended otherwise"), "{}", server.startup);
    let writes: u64 = server
        .startup
        .split(" writes)")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of writes in: {}", server.startup));
    assert!(
        writes < 300,
        "{writes} writes replayed of the 404 made: {}",
        server.startup
    );
    let (status, again) = get(
        &client,
        &url,
        &format!("/v1/payment_intents/{}", last["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!((status, &again["status"]), (200, &Value::from("succeeded")));
    let replay = pay_last(url.clone()).await;
    assert_eq!(replay["id"], last["id"], "its key replays");
    assert_eq!(get(&client, &url, &format!("/v1/customers/{cus}")).await.0, 200);
    let (_, summary_again) = get(&client, &url, "/__fauxpay/summary").await;
    for field in ["charges", "duplicate_group_count", "captured", "correlation_ids"] {
        assert_eq!(
            summary_again[field], summary[field],
            "{field}: {summary_again} vs {summary}"
        );
    }
    assert_eq!(summary["duplicate_group_count"], 1);
    assert_eq!(summary["charges"], 403);
    assert_eq!(
        ledger_lines(&client, &url, "twice").await,
        twice,
        "the duplicate group, sequence numbers included"
    );
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes whose path names two ids (a refund updated under its charge) and the charge
/// and refund updates come back after `kill -9`: the log keeps both ids.
#[tokio::test]
async fn updates_under_a_charges_path_survive_a_crash() {
    let dir = data_dir("two-ids");
    let client = client();
    let server = start_async(&dir, &[]).await;
    let url = server.url.clone();
    let (pi, _) = pay(&client, &url, "two-ids-1").await.unwrap();
    let (_, intent) = get(&client, &url, &format!("/v1/payment_intents/{pi}")).await;
    let ch = intent["latest_charge"].as_str().unwrap().to_string();
    let post = |path: String, form: &'static [(&'static str, &'static str)]| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let resp = client
                .post(format!("{url}{path}"))
                .bearer_auth("sk_test_durable")
                .form(form)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            resp.json::<Value>().await.unwrap()
        }
    };
    let refund = post(format!("/v1/charges/{ch}/refunds"), &[("amount", "400")]).await;
    let re = refund["id"].as_str().unwrap().to_string();
    post(format!("/v1/charges/{ch}/refunds/{re}"), &[("metadata[ticket]", "T-9")]).await;
    post(format!("/v1/charges/{ch}"), &[("description", "kept")]).await;
    // Writes that ended in an error are recorded too (a decline, an over-refund).
    for (path, form) in [
        (
            "/v1/payment_intents".to_string(),
            [
                ("amount", "900"),
                ("currency", "usd"),
                ("confirm", "true"),
                ("payment_method", "pm_card_chargeDeclined"),
            ],
        ),
        (
            format!("/v1/charges/{ch}/refunds"),
            [
                ("amount", "99999"),
                ("reason", "duplicate"),
                ("metadata[k]", "v"),
                ("expand[]", "charge"),
            ],
        ),
    ] {
        let resp = client
            .post(format!("{url}{path}"))
            .bearer_auth("sk_test_durable")
            .form(&form)
            .send()
            .await
            .unwrap();
        assert!(matches!(resp.status().as_u16(), 400 | 402), "{path}: {}", resp.status());
    }
    server.kill_9();

    let server = start_async(&dir, &[]).await;
    assert!(!server.startup.contains("ended otherwise"), "{}", server.startup);
    let (status, refund) = get(&client, &server.url, &format!("/v1/charges/{ch}/refunds/{re}")).await;
    assert_eq!(
        (status, &refund["metadata"]["ticket"]),
        (200, &Value::from("T-9")),
        "{refund}"
    );
    let (_, charge) = get(&client, &server.url, &format!("/v1/charges/{ch}")).await;
    assert_eq!(
        (&charge["description"], &charge["amount_refunded"]),
        (&Value::from("kept"), &Value::from(400))
    );
    let recovered = state(&client, &server.url).await;
    server.terminate();

    // The same log as a fauxpay of schema 3 wrote it (every record JSON, commits too)
    // recovers to the same state.
    let log = dir.join("fauxpay.log");
    let binary = std::fs::read(&log).unwrap();
    assert_eq!(binary[8..12], 5u32.to_le_bytes(), "this fauxpay writes schema 5");
    let mut old = rewrite_frames(&binary, |record| Some(record.to_json()));
    old[8..12].copy_from_slice(&3u32.to_le_bytes());
    assert!(old.len() > binary.len(), "JSON commits take more room than binary ones");
    std::fs::write(&log, &old).unwrap();
    let server = start_async(&dir, &[]).await;
    assert!(
        server.startup.contains("recovered") && !server.startup.contains("WARN"),
        "{}",
        server.startup
    );
    assert_eq!(state(&client, &server.url).await, recovered);
    // Opened by this fauxpay, the old log is schema 5 and goes on in binary: JSON writes
    // then binary ones, read back together.
    let (later, server) = goes_on_after_old_records(&client, &dir, server, &old, "two-ids-2").await;
    let (_, intent) = get(&client, &server.url, &format!("/v1/payment_intents/{later}")).await;
    assert_eq!(intent["status"], "succeeded");
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log a fauxpay of schema 4 wrote (`tests/fixtures/schema4`: two keyed payments, a
/// decline, a manual capture and a refund, each event id drawn on its own) recovers to
/// the state that fauxpay served before it stopped, event ids included; this fauxpay
/// then goes on writing schema 5 (a request's event ids derived from its first) after
/// the old records, and the mixed log recovers too.
#[tokio::test]
async fn a_schema_4_log_recovers_to_the_state_its_fauxpay_served() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema4");
    let old = std::fs::read(fixtures.join("fauxpay.log")).unwrap();
    assert_eq!(old[8..12], 4u32.to_le_bytes(), "the fixture is schema 4");
    let served: Vec<Value> = serde_json::from_slice(&std::fs::read(fixtures.join("state.json")).unwrap()).unwrap();
    let dir = data_dir("schema4");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fauxpay.log"), &old).unwrap();
    let client = client();
    let server = start_async(&dir, &[]).await;
    assert!(
        server.startup.contains("recovered 6 records") && !server.startup.contains("WARN"),
        "{}",
        server.startup
    );
    assert_eq!(state(&client, &server.url).await, served);
    let (later, server) = goes_on_after_old_records(&client, &dir, server, &old, "schema5-1").await;
    let (_, events) = get(&client, &server.url, "/v1/events?limit=3").await;
    let ours: Vec<_> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["data"]["object"]["id"] == later.as_str() || e["data"]["object"]["payment_intent"] == later.as_str()
        })
        .collect();
    assert_eq!(ours.len(), 3, "the new payment's three events: {events}");
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pays once for `order` on `server`, started on `old` (an older fauxpay's log) in `dir`,
/// stops it, and checks that the log went on in this schema after the old records, kept
/// as they were, and that a restart recovers what was served. The new payment's intent
/// id, and the restarted server.
async fn goes_on_after_old_records(
    client: &reqwest::Client,
    dir: &Path,
    server: Server,
    old: &[u8],
    order: &str,
) -> (String, Server) {
    let (later, _) = pay(client, &server.url, order).await.unwrap();
    let mixed = state(client, &server.url).await;
    server.terminate();
    let log = std::fs::read(dir.join("fauxpay.log")).unwrap();
    assert_eq!(log[8..12], 5u32.to_le_bytes());
    assert!(
        log[12..].starts_with(&old[12..]) && log.len() > old.len(),
        "the old records kept as they were, new ones after them"
    );
    let server = start_async(dir, &[]).await;
    assert!(!server.startup.contains("WARN"), "{}", server.startup);
    assert_eq!(state(client, &server.url).await, mixed);
    (later, server)
}

/// Every object the tests' writes make, listed, and the ledger's summary: what two
/// recoveries of one history must agree on.
async fn state(client: &reqwest::Client, url: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for path in [
        "/v1/payment_intents?limit=100",
        "/v1/charges?limit=100",
        "/v1/refunds?limit=100",
        "/v1/events?limit=100",
        "/__fauxpay/summary",
    ] {
        let (status, body) = get(client, url, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        out.push(body);
    }
    out
}

/// `log` (a whole data-dir log) with each record replaced by what `each` makes of it
/// (`None`: left as it is), the header kept.
fn rewrite_frames(log: &[u8], mut each: impl FnMut(Record) -> Option<Vec<u8>>) -> Vec<u8> {
    let (mut out, mut at) = (log[..12].to_vec(), 12);
    while at + 8 <= log.len() {
        let len = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        let payload = &log[at + 8..at + 8 + len];
        let record = Record::from_bytes(payload).unwrap();
        let payload = each(record).unwrap_or_else(|| payload.to_vec());
        fauxpay_provider::durable::file::encode_frame(&payload, &mut out);
        at += 8 + len;
    }
    out
}

/// Products, prices and Checkout Sessions survive `kill -9`: a paid session (paid by
/// the customer's pay, through 3-D Secure too), an expired one, an open one; the restart
/// says nothing ended otherwise, and an open session can still be paid, once.
#[tokio::test]
async fn checkout_sessions_products_and_prices_survive_a_crash() {
    let dir = data_dir("checkout");
    let client = client();
    let server = start_async(&dir, &[]).await;
    let url = server.url.clone();
    let post = |path: String, form: Vec<(&'static str, String)>, key: bool| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let mut rb = client.post(format!("{url}{path}")).form(&form);
            if key {
                rb = rb.bearer_auth("sk_test_durable");
            }
            let resp = rb.send().await.unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            resp.json::<Value>().await.unwrap()
        }
    };
    let product = post(
        "/v1/products".into(),
        vec![
            ("name", "Mug".into()),
            ("default_price_data[currency]", "usd".into()),
            ("default_price_data[unit_amount]", "1200".into()),
        ],
        true,
    )
    .await;
    let price = product["default_price"].as_str().unwrap().to_string();
    let session = |order: &'static str| {
        post(
            "/v1/checkout/sessions".into(),
            vec![
                ("mode", "payment".into()),
                ("line_items[0][price]", price.clone()),
                ("line_items[0][quantity]", "3".into()),
                ("success_url", "https://shop.example/done".into()),
                ("metadata[order_id]", order.into()),
            ],
            true,
        )
    };
    let paid = session("cs-paid").await["id"].as_str().unwrap().to_string();
    let challenged = session("cs-3ds").await["id"].as_str().unwrap().to_string();
    let expired = session("cs-expired").await["id"].as_str().unwrap().to_string();
    let open = session("cs-open").await["id"].as_str().unwrap().to_string();
    let pay = |sid: &str, card: &str| {
        post(
            format!("/__fauxpay/checkout/sessions/{sid}/pay"),
            vec![("payment_method", card.to_string()), ("email", "a@b.co".into())],
            false,
        )
    };
    assert_eq!(pay(&paid, "pm_card_visa").await["status"], "complete");
    let waiting = pay(&challenged, "pm_card_authenticationRequired").await;
    let pi = waiting["payment_intent"]["id"].as_str().unwrap().to_string();
    post(
        format!("/__fauxpay/payment_intents/{pi}/authenticate"),
        vec![("outcome", "succeed".into())],
        false,
    )
    .await;
    post(format!("/v1/checkout/sessions/{expired}/expire"), Vec::new(), true).await;
    server.kill_9();

    let server = start_async(&dir, &[]).await;
    assert!(!server.startup.contains("ended otherwise"), "{}", server.startup);
    let status_of = |sid: String| {
        let client = client.clone();
        let url = server.url.clone();
        async move { get(&client, &url, &format!("/v1/checkout/sessions/{sid}")).await.1["status"].clone() }
    };
    assert_eq!(status_of(paid.clone()).await, "complete");
    assert_eq!(status_of(challenged.clone()).await, "complete");
    assert_eq!(status_of(expired.clone()).await, "expired");
    assert_eq!(status_of(open.clone()).await, "open");
    let (status, kept) = get(&client, &server.url, &format!("/v1/prices/{price}?expand[]=product")).await;
    assert_eq!((status, &kept["product"]["name"]), (200, &Value::from("Mug")), "{kept}");
    let resp = client
        .post(format!("{}/__fauxpay/checkout/sessions/{open}/pay", server.url))
        .form(&[("payment_method", "pm_card_visa"), ("email", "a@b.co")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let again = client
        .post(format!("{}/__fauxpay/checkout/sessions/{paid}/pay", server.url))
        .form(&[("payment_method", "pm_card_visa"), ("email", "a@b.co")])
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 400, "paid before the crash: still paid");
    let ledger: Vec<Value> = client
        .get(format!("{}/__fauxpay/ledger", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sessions: Vec<&str> = ledger.iter().map(|r| r["checkout_session"].as_str().unwrap()).collect();
    assert_eq!(sessions, [paid.as_str(), challenged.as_str(), open.as_str()]);
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write that ends otherwise when run again (here: its record says it was declined,
/// and the code now charges it) is said at start-up, with the first such write: the
/// state no longer matches what clients were told.
#[tokio::test]
async fn a_write_that_ends_otherwise_on_recovery_is_said_at_start_up() {
    let dir = data_dir("diverged");
    let client = client();
    let server = start_async(&dir, &[]).await;
    pay(&client, &server.url, "div-1").await.unwrap();
    pay(&client, &server.url, "div-2").await.unwrap();
    server.terminate();
    let startup = start_async(&dir, &[]).await;
    assert!(!startup.startup.contains("ended otherwise"), "{}", startup.startup);
    startup.terminate();

    // Rewrite the first payment's record as if it had answered 402.
    let log = dir.join("fauxpay.log");
    let mut changed = 0;
    let out = rewrite_frames(&std::fs::read(&log).unwrap(), |record| match record {
        Record::Commit(mut c) if c.status == Some(200) && changed == 0 => {
            c.status = Some(402);
            changed += 1;
            Some(Record::Commit(c).to_bytes())
        }
        _ => None,
    });
    assert_eq!(changed, 1, "a commit record with its status");
    std::fs::write(&log, out).unwrap();

    let server = start_async(&dir, &[]).await;
    assert!(
        server.startup.contains("1 write ended otherwise than when made")
            && server.startup.contains("POST /v1/payment_intents")
            && server.startup.contains("answered 402, now 200")
            && server.startup.contains("WARN"),
        "{}",
        server.startup
    );
    let (_, summary) = get(&client, &server.url, "/__fauxpay/summary").await;
    assert_eq!(summary["charges"], 2, "recovery runs the code as it is now");
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where each frame of a log starts (after the 12-byte header).
fn frame_starts(bytes: &[u8]) -> Vec<usize> {
    let (mut out, mut at) = (Vec::new(), 12);
    while at + 8 <= bytes.len() {
        out.push(at);
        at += 8 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    out
}

/// The reproducer: 300 keyed payments, then bit 0 of byte 3 of record 150's
/// frame (its length's high byte) flipped while the provider is down. The restart used
/// to call the rest of the log a torn write and cut it (150 payments gone, in silence);
/// now it repairs the record, says so, and every payment and key is there. A record
/// written twice is skipped, not run twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_or_repeated_record_loses_and_doubles_nothing_and_is_said() {
    let dir = data_dir("damaged");
    let client = client();
    let server = start_async(&dir, &[]).await;
    let mut ids = Vec::new();
    for n in 0..300 {
        ids.push(pay(&client, &server.url, &format!("dmg-{n}")).await.unwrap().0);
    }
    server.terminate();
    let log = dir.join("fauxpay.log");
    let mut bytes = std::fs::read(&log).unwrap();
    let starts = frame_starts(&bytes);
    assert!(starts.len() >= 300, "{} records", starts.len());
    bytes[starts[150] + 3] ^= 1;
    // And the last payment's record once more, as a retried append could leave it.
    let frame = |i: usize| &bytes[starts[i]..starts.get(i + 1).copied().unwrap_or(bytes.len())];
    let last = (0..starts.len())
        .rev()
        .find(|&i| matches!(Record::from_bytes(&frame(i)[8..]), Ok(Record::Commit(_))))
        .map(|i| frame(i).to_vec())
        .expect("a commit record");
    bytes.extend_from_slice(&last);
    std::fs::write(&log, &bytes).unwrap();

    let server = start_async(&dir, &[]).await;
    assert!(
        server.startup.contains("WARN")
            && server.startup.contains("repaired 1 damaged record (first: record 150")
            && server
                .startup
                .contains("skipped 1 record that repeated an earlier write"),
        "{}",
        server.startup
    );
    let (_, summary) = get(&client, &server.url, "/__fauxpay/summary").await;
    assert_eq!(summary["charges"], 300, "{summary}");
    assert_eq!(
        summary["duplicate_groups"].as_array().map(Vec::len),
        Some(0),
        "{summary}"
    );
    for (n, id) in ids.iter().enumerate().step_by(37) {
        let (again, replayed) = pay(&client, &server.url, &format!("dmg-{n}")).await.unwrap();
        assert!(replayed && &again == id, "dmg-{n}");
    }
    server.terminate();
    // Nothing was cut: the repaired record stays as it is on disk, and reads again.
    assert!(std::fs::metadata(&log).unwrap().len() >= bytes.len() as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs mounted for one test (as root), unmounted when dropped.
pub(crate) struct SmallDisk(pub(crate) PathBuf);

impl SmallDisk {
    /// `None` (after saying so) when this machine cannot mount one.
    pub(crate) fn mount(name: &str, size: &str) -> Option<Self> {
        let dir = data_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self(dir)),
            Ok(o) => {
                fauxpay_testkit::provider::missing_tool(
                    "the disk-full test",
                    &format!(
                        "cannot mount a tmpfs (it needs root): {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                );
                None
            }
            Err(e) => {
                fauxpay_testkit::provider::missing_tool("the disk-full test", &format!("no mount command: {e}"));
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A full disk under `--data-dir`: nothing acknowledged is lost, a write that cannot be
/// made durable answers 503 (not 200, not a closed connection), reads still answer,
/// health says degraded and why, a metric counts the refusals, and once space is freed
/// writes resume without a restart: the held changes are written and a retry with its
/// key replays. It used to close every `/v1` connection, reads included, and report
/// health ok, until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_keeps_reads_says_degraded_and_recovers_when_freed() {
    let Some(disk) = SmallDisk::mount("full", "1m") else {
        return;
    };
    let dir = disk.0.join("data");
    let client = client();
    let server = start_async(&dir, &["--fsync", "always"]).await;
    // Fill what is left, with one file to free later.
    let filler = disk.0.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[7u8; 4096]).is_ok() {}
    }
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for n in 0..300 {
        let order = format!("full-{n}");
        let resp = client
            .post(format!("{}/v1/payment_intents", server.url))
            .bearer_auth("sk_test_durable")
            .header("Idempotency-Key", &order)
            .form(&[
                ("amount", "1500"),
                ("currency", "usd"),
                ("confirm", "true"),
                ("payment_method", "pm_card_visa"),
                ("metadata[order_id]", &order),
            ])
            .send()
            .await
            .expect("an answer, never a closed connection");
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        match status {
            200 => acked.push((order, body["id"].as_str().unwrap().to_string())),
            503 => {
                assert_eq!(body["error"]["type"], "api_error", "{body}");
                refused.push(order);
                if refused.len() == 3 {
                    break;
                }
            }
            other => panic!("{other} {body}"),
        }
    }
    assert_eq!(
        refused.len(),
        3,
        "the disk never filled: {} payments acknowledged",
        acked.len()
    );
    let (status, health) = get(&client, &server.url, "/__fauxpay/health").await;
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["status"], "degraded");
    assert!(health["reason"].as_str().unwrap().contains("No space left"), "{health}");
    // Reads answer.
    if let Some((_, id)) = acked.first() {
        assert_eq!(
            get(&client, &server.url, &format!("/v1/payment_intents/{id}")).await.0,
            200
        );
    }
    let metrics = client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("fauxpay_data_log_refused_writes_total 3"), "{metrics}");

    // Space comes back: health says ok again, without a restart.
    std::fs::remove_file(&filler).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while get(&client, &server.url, "/__fauxpay/health").await.0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "writes did not resume within 10 s"
        );
        tokio::task::yield_now().await;
    }
    for order in &refused {
        let (id, replayed) = pay(&client, &server.url, order).await.unwrap();
        assert!(replayed, "{order}: its change was held, and its key replays it ({id})");
    }
    let (fresh, _) = pay(&client, &server.url, "full-after").await.unwrap();
    server.terminate();

    // Everything acknowledged, the held changes and the new payment survive a restart.
    let server = start_async(&dir, &[]).await;
    for (_, id) in &acked {
        assert_eq!(
            get(&client, &server.url, &format!("/v1/payment_intents/{id}")).await.0,
            200,
            "{id}"
        );
    }
    assert_eq!(
        get(&client, &server.url, &format!("/v1/payment_intents/{fresh}"))
            .await
            .0,
        200
    );
    let (_, summary) = get(&client, &server.url, "/__fauxpay/summary").await;
    assert_eq!(summary["charges"].as_u64(), Some(acked.len() as u64 + 4), "{summary}");
    assert_eq!(
        summary["duplicate_groups"].as_array().map(Vec::len),
        Some(0),
        "{summary}"
    );
    server.terminate();
    drop(disk);
}

/// The file size limit (`ulimit -f`) reached by the log: SIGXFSZ used to kill the process
/// with no line said; now the write fails, writes answer 503, health says degraded, a line
/// says why, and the provider keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_size_limit_is_said_and_survived() {
    use std::io::BufRead;
    let dir = data_dir("xfsz");
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new("bash")
        .args([
            "-c",
            "ulimit -f 64 && exec \"$0\" serve --addr 127.0.0.1:0 --fsync always --data-dir \"$1\"",
        ])
        .arg(env!("CARGO_BIN_EXE_fauxpay"))
        .arg(&dir)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let said = Arc::new(Mutex::new(String::new()));
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    {
        let said = said.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = url_tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                said.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
    }
    let url = url_rx.recv_timeout(Duration::from_secs(30)).expect("it listens");
    let client = client();
    let mut refused = false;
    for n in 0..2000 {
        let resp = client
            .post(format!("{url}/v1/payment_intents"))
            .bearer_auth("sk_test_durable")
            .form(&[
                ("amount", "1500"),
                ("currency", "usd"),
                ("confirm", "true"),
                ("payment_method", "pm_card_visa"),
            ])
            .header("Idempotency-Key", format!("xfsz-{n}"))
            .send()
            .await
            .expect("an answer: the process is alive");
        if resp.status() == 503 {
            refused = true;
            break;
        }
        assert_eq!(resp.status(), 200);
    }
    assert!(refused, "64 KiB of log never filled");
    let (status, health) = get(&client, &url, "/__fauxpay/health").await;
    assert_eq!((status, health["status"].as_str()), (503, Some("degraded")), "{health}");
    assert!(child.try_wait().unwrap().is_none(), "SIGXFSZ did not kill it");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !said.lock().unwrap().contains("file size limit") {
        assert!(
            std::time::Instant::now() < deadline,
            "no line says why:\n{}",
            said.lock().unwrap()
        );
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `fauxpay serve --data-dir DIR` printed and whether it succeeded, when it exits
/// without serving.
fn refused(dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fauxpay"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_second_fauxpay_on_a_data_dir_in_use_is_refused_and_the_first_keeps_it() {
    let dir = data_dir("in-use");
    let first = start(&dir);
    let (ok, stderr) = refused(&dir);
    assert!(!ok);
    assert!(
        stderr.contains("another fauxpay is using it") && stderr.contains("refusing to start a second writer"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    // The directory is locked, not the log file: moving the log away does not let a
    // second fauxpay start there (it used to, on a new log beside the moved one).
    std::fs::rename(dir.join("fauxpay.log"), dir.join("moved-away.log")).unwrap();
    let (ok, stderr) = refused(&dir);
    assert!(!ok && stderr.contains("another fauxpay is using it"), "{stderr}");
    std::fs::rename(dir.join("moved-away.log"), dir.join("fauxpay.log")).unwrap();
    // The lock goes with the process, however it ends: after kill -9 the dir opens again.
    first.kill_9();
    let second = start(&dir);
    second.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_data_dir_of_a_newer_fauxpay_or_of_something_else_is_refused() {
    let dir = data_dir("newer");
    std::fs::create_dir_all(&dir).unwrap();
    let mut header = b"FAUXPAYL".to_vec();
    header.extend_from_slice(&99u32.to_le_bytes());
    std::fs::write(dir.join("fauxpay.log"), &header).unwrap();
    for (contents, expected) in [
        (header.clone(), "newer fauxpay (schema 99"),
        (b"name,amount\n".to_vec(), "not a fauxpay data file"),
    ] {
        std::fs::write(dir.join("fauxpay.log"), &contents).unwrap();
        let (ok, stderr) = refused(&dir);
        assert!(!ok);
        assert!(stderr.contains(expected), "{stderr}");
        // Refused, never reset.
        assert_eq!(std::fs::read(dir.join("fauxpay.log")).unwrap(), contents);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A webhook receiver that answers 200 while `accepting`, else 503, and counts every
/// delivery of each event id it answered 200.
#[derive(Clone, Default)]
struct Receiver {
    accepting: Arc<std::sync::atomic::AtomicBool>,
    acknowledged: Arc<Mutex<BTreeMap<String, usize>>>,
    refused: Arc<AtomicUsize>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Receiver {
    async fn start(&self) -> String {
        let me = self.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |body: axum::body::Bytes| {
                let me = me.clone();
                async move {
                    let event: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let status = if me.accepting.load(Ordering::SeqCst) {
                        let id = event["id"].as_str().unwrap_or_default().to_string();
                        *me.acknowledged.lock().unwrap().entry(id).or_default() += 1;
                        axum::http::StatusCode::OK
                    } else {
                        me.refused.fetch_add(1, Ordering::SeqCst);
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    };
                    me.arrived.notify_one();
                    status
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }
}

async fn drained(client: &reqwest::Client, url: &str) -> Value {
    let (status, body) = get(client, url, "/__fauxpay/webhooks/drain?timeout=30s").await;
    assert_eq!((status, body["drained"].as_bool()), (200, Some(true)), "{body}");
    body
}

/// Starts the provider on `dir` and checks its start-up line says `resumed` webhook
/// deliveries were resumed.
async fn start_resuming(dir: &Path, flags: &[&str], resumed: u32) -> Server {
    let server = start_async(dir, flags).await;
    let noun = if resumed == 1 { "delivery" } else { "deliveries" };
    let line = format!("{resumed} webhook {noun} resumed");
    assert!(server.startup.contains(&line), "{}", server.startup);
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_deliveries_pending_at_a_crash_resume_and_acknowledged_ones_are_not_sent_again() {
    let dir = data_dir("hooks");
    let client = client();
    let receiver = Receiver::default();
    receiver.accepting.store(true, Ordering::SeqCst);
    let hook = receiver.start().await;
    // Retries an hour apart: a refused delivery stays pending until the restart.
    let flags = [
        "--webhook",
        &hook,
        "--webhook-secret",
        "whsec_durable",
        "--webhook-retries",
        "1h",
    ];
    let server = start_async(&dir, &flags).await;
    // Order A: its three events are acknowledged before the crash.
    pay(&client, &server.url, "hook-a").await.unwrap();
    drained(&client, &server.url).await;
    let before: BTreeMap<String, usize> = receiver.acknowledged.lock().unwrap().clone();
    assert_eq!(before.len(), 3, "{before:?}");
    // Order B: the receiver is down; its three events wait for a retry an hour away.
    receiver.accepting.store(false, Ordering::SeqCst);
    pay(&client, &server.url, "hook-b").await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while receiver.refused.load(Ordering::SeqCst) < 3 {
            receiver.arrived.notified().await;
        }
    })
    .await
    .expect("B's deliveries were tried");
    tokio::task::spawn_blocking(move || server.kill_9()).await.unwrap();

    // Back up, with the receiver too: B's deliveries resume at once; A's are not repeated.
    receiver.accepting.store(true, Ordering::SeqCst);
    let server = start_resuming(&dir, &flags, 3).await;
    drained(&client, &server.url).await;
    let after = receiver.acknowledged.lock().unwrap().clone();
    assert_eq!(after.len(), 6, "{after:?}");
    assert!(
        after.values().all(|&n| n == 1),
        "every event acknowledged once: {after:?}"
    );
    // Every event says so.
    let (_, events) = get(&client, &server.url, "/v1/events?limit=100").await;
    let events = events["data"].as_array().unwrap();
    assert_eq!(events.len(), 6);
    assert!(events.iter().all(|e| e["pending_webhooks"] == 0), "{events:?}");
    tokio::task::spawn_blocking(move || server.kill_9()).await.unwrap();

    // Down and up once more: the deliveries resumed and acknowledged last time are
    // recorded as ended too, so none is sent again.
    let server = start_resuming(&dir, &flags, 0).await;
    drained(&client, &server.url).await;
    assert_eq!(*receiver.acknowledged.lock().unwrap(), after);
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}
