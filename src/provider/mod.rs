//! The fake provider (`fauxpay serve`): a stateful, Stripe-compatible payment API.
//!
//! This module owns the provider's settings ([`Config`]), its shared state
//! ([`Provider`]: payments, idempotency store, metrics) and the server's life cycle
//! (bind, serve, sweep expired keys, shut down gracefully). The HTTP surface lives in
//! `http` (Stripe's `/v1` routes) and `admin` (`/__fauxpay/`, `/metrics`); the rules in
//! `payments`, `idempotency` and `ledger` know nothing of HTTP.

// `ApiError` carries Stripe's whole error object; it is built on the slow path and
// returned through a few frames, so boxing it would buy nothing measurable.
#![allow(clippy::result_large_err)]

pub mod admin;
pub mod attempt;
pub mod cards;
pub mod error;
pub mod execute;
pub mod extract;
pub mod fault_injection;
pub mod headers;
pub mod http;
pub mod idempotency;
pub mod ids;
pub mod ledger;
pub mod metrics;
pub mod money;
pub mod objects;
pub mod params;
pub mod payments;
pub mod search;
pub mod server;
pub mod shard;
pub mod table;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;

pub use idempotency::Mode as IdempotencyMode;
pub use payments::{CorrelationSource, DuplicatePolicy};

use crate::faults::{self, Profile};
use fault_injection::FaultInjector;
use idempotency::IdempotencyStore;
use metrics::Metrics;
use payments::Payments;

/// The provider's settings (the flags of `fauxpay serve`).
#[derive(Debug, Clone)]
pub struct Config {
    pub idempotency: IdempotencyMode,
    pub key_ttl: Duration,
    /// In ietf mode: refuse POSTs that carry no `Idempotency-Key` (400).
    pub require_idempotency_key: bool,
    pub correlate: CorrelationSource,
    pub duplicates: DuplicatePolicy,
    /// When set, the one API key accepted; otherwise any `sk_test_…` key.
    pub api_key: Option<String>,
    /// When set, `/__fauxpay/*` (but `health`) requires `Authorization: Bearer TOKEN`.
    pub admin_token: Option<String>,
    /// The fault profile active at start-up, and its source text.
    pub profile: Profile,
    pub profile_source: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            idempotency: IdempotencyMode::Stripe,
            key_ttl: Duration::from_secs(24 * 3600),
            require_idempotency_key: false,
            correlate: CorrelationSource::parse("metadata.order_id").expect("valid default"),
            duplicates: DuplicatePolicy::Allow,
            api_key: None,
            admin_token: None,
            profile: faults::bundled::load("happy").expect("the bundled happy profile is valid"),
            profile_source: faults::bundled::text("happy").unwrap_or_default().to_string(),
        }
    }
}

impl Config {
    /// One line describing the settings in force (logged at start-up).
    pub fn describe(&self) -> String {
        format!(
            "profile={} idempotency={:?} key_ttl={} require_key={} correlate={} duplicates={:?} api_key={} admin_token={}",
            self.profile.name,
            self.idempotency,
            humantime::format_duration(self.profile.key_ttl.unwrap_or(self.key_ttl)),
            self.require_idempotency_key,
            self.correlate,
            self.duplicates,
            if self.api_key.is_some() {
                "fixed"
            } else {
                "any sk_test_"
            },
            if self.admin_token.is_some() { "on" } else { "off" },
        )
        .to_lowercase()
    }
}

/// Everything a running provider shares between requests.
pub struct Provider {
    pub config: Config,
    pub payments: Payments,
    pub idempotency: Arc<IdempotencyStore>,
    pub faults: FaultInjector,
    pub metrics: Metrics,
    /// Set once shutdown begins: held (`hang`) requests end at once.
    stopping: watch::Sender<bool>,
}

impl Provider {
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new(Self {
            payments: Payments::new(config.duplicates, config.correlate.clone()),
            idempotency: IdempotencyStore::new(config.profile.key_ttl.unwrap_or(config.key_ttl)),
            faults: FaultInjector::new(config.profile.clone(), config.profile_source.clone()),
            metrics: Metrics::default(),
            stopping: watch::channel(false).0,
            config,
        })
    }

    /// Forgets all payments, keys and ledger records (`POST /__fauxpay/reset`).
    pub fn reset(&self) {
        self.idempotency.clear();
        self.payments.reset();
        self.faults.reset();
    }

    /// Resolves once shutdown has begun.
    pub async fn stopping(&self) {
        let mut rx = self.stopping.subscribe();
        let _ = rx.wait_for(|stopping| *stopping).await;
    }

    /// Makes `profile` the active fault profile; its key TTL (or the configured one) applies.
    pub fn swap_profile(&self, profile: Profile, source: String) {
        self.idempotency.set_ttl(profile.key_ttl.unwrap_or(self.config.key_ttl));
        let name = profile.name.clone();
        self.faults.swap(profile, source);
        tracing::info!(profile = %name, "fault profile swapped");
    }
}

/// Serves `provider` on `listener` until `shutdown` resolves; in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    provider: Arc<Provider>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(sweep_expired_keys(provider.idempotency.clone(), stop_rx));
    let app = http::router(provider.clone());
    let shutdown = async move {
        shutdown.await;
        provider.stopping.send_replace(true);
    };
    let result = server::serve_connections(listener, app, shutdown).await;
    let _ = stop_tx.send(true);
    result
}

/// Purges expired idempotency keys so memory stays bounded by the TTL.
async fn sweep_expired_keys(store: Arc<IdempotencyStore>, mut stop: watch::Receiver<bool>) {
    let every = (store.ttl() / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let purged = store.purge_expired(Instant::now());
                if purged > 0 {
                    tracing::debug!(purged, "expired idempotency keys purged");
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// A provider running in the background (for tests, the demo and embedding).
pub struct RunningProvider {
    pub addr: SocketAddr,
    pub provider: Arc<Provider>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RunningProvider {
    /// Binds `addr` (port 0 picks a free port) and serves in a background task.
    pub async fn start(config: Config, addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let provider = Provider::new(config);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, provider.clone(), async move {
            let _ = rx.await;
        }));
        Ok(Self {
            addr,
            provider,
            stop: Some(tx),
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets in-flight requests finish, and waits for the server.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}
