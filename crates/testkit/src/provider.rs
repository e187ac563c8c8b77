//! Helpers shared by the end-to-end tests: a provider on a free port and a client for it.

use fauxpay_faults::Profile;
use fauxpay_provider::{Config, RunningProvider};
use reqwest::{Client, RequestBuilder, Response};
use serde_json::Value;

pub const KEY: &str = "sk_test_fauxpay";

/// The default configuration under `profile` (its JSON is the source the admin API shows).
pub fn with_profile(profile: Profile) -> Config {
    Config {
        profile_source: profile.to_json(),
        profile,
        ..Config::default()
    }
}

pub struct Harness {
    pub provider: RunningProvider,
    pub client: Client,
}

impl Harness {
    pub async fn start(config: Config) -> Self {
        Self::start_on(config, "127.0.0.1:0".parse().unwrap()).await
    }

    /// [`Harness::start`] on a given address.
    pub async fn start_on(config: Config, addr: std::net::SocketAddr) -> Self {
        let provider = RunningProvider::start(config, addr).await.expect("provider starts");
        Self {
            provider,
            client: Client::new(),
        }
    }

    pub async fn default() -> Self {
        Self::start(Config::default()).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.provider.url(), path)
    }

    pub fn post(&self, path: &str) -> RequestBuilder {
        self.client.post(self.url(path)).bearer_auth(KEY)
    }

    pub fn get(&self, path: &str) -> RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(KEY)
    }

    pub fn delete(&self, path: &str) -> RequestBuilder {
        self.client.delete(self.url(path)).bearer_auth(KEY)
    }

    /// POSTs a form body, optionally with an idempotency key.
    pub async fn form(&self, path: &str, body: &str, key: Option<&str>) -> Response {
        let mut rb = self
            .post(path)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_string());
        if let Some(k) = key {
            rb = rb.header("Idempotency-Key", k);
        }
        rb.send().await.expect("request sent")
    }

    pub async fn ledger(&self, query: &str) -> Vec<Value> {
        let text = self
            .client
            .get(self.url(&format!("/__fauxpay/ledger?{query}")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("ledger line is JSON"))
            .collect()
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Polls the in-flight gauge until it reads `n`: the signal that requests are held.
    /// Fails the test, naming what it waited for, if that takes over 10 s.
    pub async fn wait_in_flight(&self, n: u64) {
        let needle = format!("fauxpay_api_requests_in_flight {n}\n");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.metrics().await.contains(&needle) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} requests in flight: not within 10 s",
                n
            );
            tokio::task::yield_now().await;
        }
    }

    pub async fn summary(&self) -> Value {
        self.admin_json("/__fauxpay/summary").await
    }

    /// The JSON answer of an admin route (`/__fauxpay/…`, no API key).
    pub async fn admin_json(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// A form POSTed with the API key and no idempotency key: its status and JSON body.
pub async fn post_json(h: &Harness, path: &str, body: &str) -> (u16, Value) {
    json(h.form(path, body, None).await).await
}

/// A GET with the API key: its status and JSON body.
pub async fn get_json(h: &Harness, path: &str) -> (u16, Value) {
    json(h.get(path).send().await.expect("request sent")).await
}

pub async fn json(resp: Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let body = resp.json().await.expect("JSON body");
    (status, body)
}

pub fn charge_body(order: &str, pm: &str) -> String {
    format!("amount=2000&currency=usd&confirm=true&payment_method={pm}&metadata[order_id]={order}")
}

/// A test that needs a tool this machine lacks: under `CI` it fails; otherwise it says
/// so on the terminal (past libtest's capture of `eprintln!`, which would hide it in a
/// passing test) and the caller returns.
pub fn missing_tool(tests: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{tests}: {why}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {tests}: {why} ***\n");
}
