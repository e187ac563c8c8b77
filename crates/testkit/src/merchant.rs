//! Helpers for the reference merchant's end-to-end tests: a provider and a merchant on free
//! ports, a retrying checkout client, the provider's ledger grouped by order, the local
//! Redis and PostgreSQL, and a Redis server of a test's own. A test that needs a service
//! which is not there fails, naming the service and how to start it, with or without `CI`:
//! it never passes without having run.

pub mod scenarios;

use std::collections::HashMap;
use std::net::TcpListener as StdListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fauxpay_merchant::{MerchantConfig, RunningMerchant, Strategy};
use fauxpay_provider::{Config, RunningProvider};
use reqwest::Client;
use serde_json::Value;

pub const LOCAL_REDIS: &str = "redis://127.0.0.1:6379";
pub const LOCAL_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn any_port() -> std::net::SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A provider's config with a bundled fault profile (the rest default).
pub fn provider_config(profile: &str) -> Config {
    Config {
        profile: fauxpay_faults::bundled::load(profile).expect("bundled profile"),
        profile_source: fauxpay_faults::bundled::text(profile).unwrap_or_default().to_string(),
        ..Config::default()
    }
}

/// A provider on a free port with a bundled fault profile.
pub async fn provider(profile: &str) -> RunningProvider {
    RunningProvider::start(provider_config(profile), any_port())
        .await
        .expect("provider starts")
}

/// Where the idempotent merchant keeps its state.
#[derive(Debug, Clone)]
pub enum Backend {
    Memory,
    /// Redis for the lock, PostgreSQL (in its own schema) for key records and orders.
    Durable {
        redis_url: String,
        postgres_url: String,
        schema: String,
    },
}

impl Backend {
    /// The local Redis and PostgreSQL with a fresh schema; fails the test when either is
    /// missing.
    pub async fn durable() -> Backend {
        require_redis().await;
        require_postgres().await;
        Backend::Durable {
            redis_url: LOCAL_REDIS.to_string(),
            postgres_url: LOCAL_POSTGRES.to_string(),
            schema: unique_schema(),
        }
    }

    pub fn apply(&self, config: &mut MerchantConfig) {
        if let Backend::Durable {
            redis_url,
            postgres_url,
            schema,
        } = self
        {
            config.redis_url = Some(redis_url.clone());
            config.postgres_url = Some(postgres_url.clone());
            config.pg_schema = schema.clone();
            config.redis_prefix = format!("{schema}:");
        }
    }

    /// Drops the test's schema (best effort).
    pub async fn cleanup(&self) {
        if let Backend::Durable {
            postgres_url, schema, ..
        } = self
        {
            if let Ok((client, conn)) = tokio_postgres::connect(postgres_url, tokio_postgres::NoTls).await {
                tokio::spawn(conn);
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await;
            }
        }
    }
}

/// Fails the test, naming `service` and how to provide it, unless it is `available`. The
/// same with or without `CI`: a skip that libtest reports as a pass would hide the tests
/// that matter most.
pub fn require(service: &str, available: bool, how: &str) {
    assert!(available, "{service} is needed by this test and is not there: {how}");
}

/// Fails the test unless the local Redis answers.
pub async fn require_redis() {
    require(
        "Redis at 127.0.0.1:6379",
        redis_answers(LOCAL_REDIS).await,
        "start it with `redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" \
         --appendonly no`, or `docker compose up -d redis` (.ci/run starts it if it is down)",
    );
}

/// Fails the test unless the local PostgreSQL answers.
pub async fn require_postgres() {
    require(
        "PostgreSQL at 127.0.0.1:5432 (trust auth, user postgres, database test)",
        postgres_answers().await,
        "start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
         or `docker compose up -d postgres` (.ci/run starts it if it is down)",
    );
}

pub async fn redis_answers(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut conn).await.ok()
    };
    matches!(tokio::time::timeout(Duration::from_secs(2), ping).await, Ok(Some(_)))
}

pub async fn postgres_answers() -> bool {
    let connect = tokio_postgres::connect(LOCAL_POSTGRES, tokio_postgres::NoTls);
    match tokio::time::timeout(Duration::from_secs(3), connect).await {
        Ok(Ok((client, conn))) => {
            tokio::spawn(conn);
            client.simple_query("SELECT 1").await.is_ok()
        }
        _ => false,
    }
}

pub fn unique_schema() -> String {
    format!("t_merchant_{}_{:08x}", std::process::id(), rand::random::<u32>())
}

/// The prefix of one test's order ids. Deterministic, so the provider's fault decisions
/// (a function of the profile's seed and the request's idempotency key) repeat from run
/// to run; every test has a provider, and a schema and Redis prefix, of its own.
pub fn run_id(name: &str) -> String {
    format!("{name}-o")
}

/// The config of a merchant of `strategy` against `provider_url` on `backend`, with
/// short timings.
pub fn merchant_config(
    strategy: Strategy,
    provider_url: &str,
    backend: &Backend,
    tweak: impl FnOnce(&mut MerchantConfig),
) -> MerchantConfig {
    let mut config = MerchantConfig::new(strategy, provider_url);
    config.provider_timeout = Duration::from_millis(800);
    config.reconcile_interval = Duration::from_millis(100);
    backend.apply(&mut config);
    tweak(&mut config);
    config
}

/// A merchant of `strategy` against `provider_url` on `backend`, with short timings.
pub async fn merchant(
    strategy: Strategy,
    provider_url: &str,
    backend: &Backend,
    tweak: impl FnOnce(&mut MerchantConfig),
) -> RunningMerchant {
    RunningMerchant::start(merchant_config(strategy, provider_url, backend, tweak), any_port())
        .await
        .expect("merchant starts")
}

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub replayed: bool,
    pub retry_after: Option<String>,
}

pub fn body(order: &str, amount: u64, pm: &str) -> Value {
    serde_json::json!({"order_id": order, "amount": amount, "currency": "usd", "payment_method": pm})
}

/// One checkout attempt; `None` on a transport error or timeout.
pub async fn checkout(client: &Client, url: &str, body: &Value, key: Option<&str>) -> Option<Resp> {
    let mut rb = client
        .post(format!("{url}/checkout"))
        .json(body)
        .timeout(Duration::from_secs(8));
    if let Some(k) = key {
        rb = rb.header("Idempotency-Key", k);
    }
    let resp = rb.send().await.ok()?;
    let status = resp.status().as_u16();
    let replayed = resp.headers().get("idempotent-replayed").is_some();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp.json().await.unwrap_or(Value::Null);
    Some(Resp {
        status,
        body,
        replayed,
        retry_after,
    })
}

/// A correct client's final outcome for one checkout.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// 200 with this payment intent.
    Paid(String),
    /// A definite failure (402, 400, 422).
    Failed(u16),
    /// Retries exhausted.
    Unresolved,
}

/// Retries one checkout with the same key (409, 5xx, transport errors), with a short
/// backoff, until a definite answer or `deadline`. Returns the outcome and every status seen.
pub async fn checkout_until_final(
    client: &Client,
    url: &str,
    body: &Value,
    key: Option<&str>,
    deadline: Instant,
) -> (Outcome, Vec<u16>) {
    checkout_until_final_reporting(client, url, body, key, deadline, |_| {}).await
}

/// [`checkout_until_final`], calling `report` with each status as it is seen (0 for a
/// transport error), so a test can wake on what the client met.
pub async fn checkout_until_final_reporting(
    client: &Client,
    url: &str,
    body: &Value,
    key: Option<&str>,
    deadline: Instant,
    mut report: impl FnMut(u16),
) -> (Outcome, Vec<u16>) {
    let mut seen = Vec::new();
    let mut backoff = Duration::from_millis(40);
    loop {
        let status = match checkout(client, url, body, key).await {
            Some(r) if r.status == 200 => {
                seen.push(200);
                report(200);
                let pi = r.body["payment_intent"].as_str().unwrap_or_default().to_string();
                return (Outcome::Paid(pi), seen);
            }
            Some(r) if matches!(r.status, 400 | 402 | 422) => {
                seen.push(r.status);
                report(r.status);
                return (Outcome::Failed(r.status), seen);
            }
            Some(r) => r.status,
            None => 0,
        };
        seen.push(status);
        report(status);
        if Instant::now() + backoff >= deadline {
            return (Outcome::Unresolved, seen);
        }
        // The client's retry backoff (with jitter), as a real client waits before retrying:
        // behaviour under test, not synchronisation.
        let jitter = Duration::from_millis(rand::random::<u64>() % 40);
        tokio::time::sleep(backoff + jitter).await;
        backoff = (backoff * 2).min(Duration::from_millis(300));
    }
}

/// The provider's captured charges, grouped by correlation id (order id).
pub async fn charges_by_order(client: &Client, provider_url: &str, prefix: &str) -> HashMap<String, Vec<Value>> {
    let text = client
        .get(format!("{provider_url}/__fauxpay/ledger?correlation_prefix={prefix}"))
        .send()
        .await
        .expect("ledger")
        .text()
        .await
        .expect("ledger body");
    let mut by_order: HashMap<String, Vec<Value>> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let rec: Value = serde_json::from_str(line).expect("ledger line is JSON");
        if rec["kind"] == "charge" {
            let order = rec["correlation_id"].as_str().unwrap_or_default().to_string();
            by_order.entry(order).or_default().push(rec);
        }
    }
    by_order
}

pub async fn summary(client: &Client, provider_url: &str) -> Value {
    client
        .get(format!("{provider_url}/__fauxpay/summary"))
        .send()
        .await
        .expect("summary")
        .json()
        .await
        .expect("summary JSON")
}

/// The duplicate groups of the provider's summary whose correlation id starts with `prefix`.
pub async fn duplicate_orders(client: &Client, provider_url: &str, prefix: &str) -> Vec<String> {
    let s = summary(client, provider_url).await;
    s["duplicate_groups"]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .filter_map(|g| g["correlation_id"].as_str())
                .filter(|c| c.starts_with(prefix))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub async fn order(client: &Client, merchant_url: &str, id: &str) -> (u16, Value) {
    let resp = client
        .get(format!("{merchant_url}/orders/{id}"))
        .send()
        .await
        .expect("GET /orders");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Waits until none of `orders` is `processing` or `reconciling`; returns those still so
/// after `within`. Only the merchant's background reconciler moves such orders on once
/// the clients are done, so the orders are looked at again after each of its rounds.
pub async fn wait_settled(client: &Client, m: &RunningMerchant, orders: &[String], within: Duration) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut rounds = m
        .reconciler_rounds()
        .expect("only a merchant with a reconciler settles its orders");
    loop {
        let mut open = Vec::new();
        for id in orders {
            let (status, body) = order(client, &m.url(), id).await;
            if status == 200 && matches!(body["status"].as_str(), Some("processing" | "reconciling")) {
                open.push(id.clone());
            }
        }
        if open.is_empty() {
            return open;
        }
        match tokio::time::timeout_at(deadline, rounds.changed()).await {
            Ok(Ok(())) => {}
            // Out of time, or the reconciler stopped.
            Ok(Err(_)) | Err(_) => return open,
        }
    }
}

/// Waits for `n` more completed rounds of the merchant's background reconciler (a sweep,
/// then pruning when due), counting from the call.
pub async fn reconciler_rounds(m: &RunningMerchant, n: u64) {
    let mut rounds = m.reconciler_rounds().expect("the merchant has a reconciler");
    let target = *rounds.borrow() + n;
    tokio::time::timeout(Duration::from_secs(10), rounds.wait_for(|done| *done >= target))
        .await
        .expect("timed out waiting for the reconciler")
        .expect("the reconciler stopped");
}

/// Polls the state of a server reached over a socket (the provider's ledger, a Redis
/// coming up) until `cond` holds, failing after `within`. Only for state that announces
/// itself no other way: what the merchant itself does is waited for on its signals.
pub async fn poll_until<F, Fut>(what: &str, within: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !cond().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `redis-server` of a test's own, on a free port, keeping nothing on disk.
pub struct OwnRedis {
    pub port: u16,
    child: Option<Child>,
}

impl OwnRedis {
    /// Starts one; fails the test if `redis-server` is not on the `PATH`.
    pub async fn start() -> OwnRedis {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok();
        require(
            "the redis-server binary",
            found,
            "install Redis (e.g. `apt-get install redis-server`) so that `redis-server` is on the PATH",
        );
        let port = StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut redis = OwnRedis { port, child: None };
        redis.restart().await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// (Re)starts the server on the same port and waits until it answers.
    pub async fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        // Another process: nothing tells us when it accepts connections but asking it.
        let url = self.url();
        poll_until(
            &format!("the own redis-server on port {}", self.port),
            Duration::from_secs(5),
            || redis_answers(&url),
        )
        .await;
    }

    /// Kills the server (as a crash would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
