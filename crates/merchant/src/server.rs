//! A merchant assembled from its configuration, and served: the one place that wires the
//! strategies to their backing services and to the HTTP surface.
//!
//! [`Merchant::build`] connects what [`MerchantConfig`] names (PostgreSQL, migrated; Redis;
//! the provider client) and builds the chosen strategy; [`serve`] and [`RunningMerchant`]
//! run it, with the idempotent strategy's background reconciler beside the server and,
//! when a webhook secret is configured, the webhook receiver in front of the strategy.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::config::MerchantConfig;
use super::error::MerchantError;
use super::gateway::Gateway;
use super::http;
use super::idempotent::{Idempotent, IdempotentSettings};
use super::lock::{MemoryLock, OrderLock};
use super::lock_only::LockOnly;
use super::memory_store::MemoryStore;
use super::naive::Naive;
use super::postgres_store::PostgresStore;
use super::reconciler::Reconciler;
use super::redis_lock::RedisLock;
use super::store::Store;
use super::storefront::Storefront;
use super::strategy::{CheckoutService, Strategy};
use super::stripe_gateway::StripeGateway;
use super::webhook_receiver::WebhookReceiver;

/// A merchant built from its configuration, ready to serve.
pub struct Merchant {
    pub service: Arc<dyn CheckoutService>,
    /// The idempotent strategy's background reconciler.
    reconciler: Option<Reconciler>,
    /// The provider, for the storefront's browser payments.
    gateway: Arc<dyn Gateway>,
    config: MerchantConfig,
}

impl Merchant {
    /// Connects to the configured services (migrating PostgreSQL) and assembles the strategy.
    pub async fn build(config: MerchantConfig) -> Result<Self, MerchantError> {
        config.validate()?;
        let gateway: Arc<dyn Gateway> = Arc::new(
            StripeGateway::new(&config.provider_url, &config.api_key, config.provider_timeout)
                .map_err(|e| MerchantError::Client(e.to_string()))?,
        );
        let lock_ttl = config.effective_lock_ttl();
        let (service, reconciler): (Arc<dyn CheckoutService>, _) = match config.strategy {
            Strategy::Naive => {
                if config.redis_url.is_some() || config.postgres_url.is_some() {
                    tracing::warn!("the naive merchant uses neither Redis nor PostgreSQL; ignoring their URLs");
                }
                (Arc::new(Naive::new(gateway.clone(), config.clock.clone())), None)
            }
            Strategy::LockOnly => {
                if config.postgres_url.is_some() {
                    tracing::warn!("the lock-only merchant keeps nothing durable; ignoring the PostgreSQL URL");
                }
                let lock = Self::lock(&config).await?;
                (
                    Arc::new(LockOnly::new(gateway.clone(), lock, lock_ttl, config.clock.clone())),
                    None,
                )
            }
            Strategy::Idempotent => {
                let store: Arc<dyn Store> = match &config.postgres_url {
                    Some(url) => Arc::new(
                        PostgresStore::connect(url, &config.pg_schema, config.pg_pool_size, config.store_timeout)
                            .await?,
                    ),
                    None => Arc::new(MemoryStore::new()),
                };
                let lock = Self::lock(&config).await?;
                let settings = IdempotentSettings {
                    lock_ttl,
                    key_ttl: config.key_ttl,
                    settle: config.effective_settle(),
                };
                let merchant = Idempotent::new(store, lock, gateway.clone(), config.clock.clone(), settings);
                let reconciler = merchant.reconciler();
                (Arc::new(merchant), Some(reconciler))
            }
        };
        Ok(Self {
            service,
            reconciler,
            gateway,
            config,
        })
    }

    /// The background reconciler's completed rounds (see [`Reconciler::rounds`]); `None`
    /// for the strategies without one.
    pub fn reconciler_rounds(&self) -> Option<watch::Receiver<u64>> {
        self.reconciler.as_ref().map(Reconciler::rounds)
    }

    async fn lock(config: &MerchantConfig) -> Result<Arc<dyn OrderLock>, MerchantError> {
        Ok(match &config.redis_url {
            Some(url) => Arc::new(RedisLock::connect(url, &config.redis_prefix, config.store_timeout).await?),
            None => Arc::new(MemoryLock::with_clock(config.clock.clone())),
        })
    }

    /// Serves on `listener` until `shutdown` resolves; in-flight requests finish, then the
    /// reconciler stops.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), MerchantError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let reconciler = self
            .reconciler
            .map(|r| tokio::spawn(r.run(self.config.reconcile_interval, self.config.prune_every(), stop_rx)));
        let webhooks = self.config.webhook_secret.clone().map(|secret| {
            Arc::new(WebhookReceiver::new(
                secret,
                self.config.webhook_tolerance,
                self.config.clock.clone(),
                self.service.clone(),
                self.config.flow,
            ))
        });
        let storefront = Arc::new(Storefront::new(
            self.service.clone(),
            self.gateway,
            self.config
                .public_provider_url
                .as_deref()
                .unwrap_or(&self.config.provider_url),
            &self.config.publishable_key,
            self.config.flow,
        ));
        let app = http::router(self.service, webhooks, Some(storefront));
        let result = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
        let _ = stop_tx.send(true);
        if let Some(task) = reconciler {
            let _ = task.await;
        }
        result.map_err(MerchantError::Io)
    }
}

/// Builds the merchant `config` describes and serves it on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    config: MerchantConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), MerchantError> {
    let addr = listener.local_addr()?;
    let description = config.describe();
    let merchant = Merchant::build(config).await?;
    tracing::info!(%addr, "merchant listening: {description}; storefront (pay in a browser): http://{addr}/");
    merchant.serve(listener, shutdown).await
}

/// A merchant running in the background (tests, the demo, embedding).
pub struct RunningMerchant {
    pub addr: SocketAddr,
    pub strategy: Strategy,
    rounds: Option<watch::Receiver<u64>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), MerchantError>>,
}

impl RunningMerchant {
    /// Builds the merchant (connecting to and migrating its services), binds `addr`
    /// (port 0 picks a free port) and serves in a background task.
    pub async fn start(config: MerchantConfig, addr: SocketAddr) -> Result<Self, MerchantError> {
        let listener = TcpListener::bind(addr).await?;
        Self::start_on(config, listener).await
    }

    /// [`RunningMerchant::start`] on a listener bound beforehand (so that its URL can be
    /// given out — to a provider's webhook endpoints — before the merchant is built).
    pub async fn start_on(config: MerchantConfig, listener: TcpListener) -> Result<Self, MerchantError> {
        let strategy = config.strategy;
        let merchant = Merchant::build(config).await?;
        let rounds = merchant.reconciler_rounds();
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(merchant.serve(listener, async move {
            let _ = rx.await;
        }));
        Ok(Self {
            addr,
            strategy,
            rounds,
            stop: Some(tx),
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The number of rounds the background reconciler has completed, with the current
    /// count marked seen: `changed()` wakes after the next round (`None` for the
    /// strategies without a reconciler).
    pub fn reconciler_rounds(&self) -> Option<watch::Receiver<u64>> {
        self.rounds.clone().map(|mut rx| {
            rx.borrow_and_update();
            rx
        })
    }

    /// Stops accepting, lets in-flight requests finish, stops the reconciler and waits.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "merchant stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "merchant task failed"),
        }
    }
}
