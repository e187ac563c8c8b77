//! The provider's life cycle: serve a listener until told to stop (sweeping expired
//! idempotency keys and events meanwhile; saying at the end how many webhook deliveries
//! were left pending), and [`RunningProvider`], a provider in a background task
//! for tests, the demo and embedding.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{routes, server};
use crate::app::Provider;
use crate::config::Config;

/// Serves `provider` on `listener` until `shutdown` resolves; in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    provider: Arc<Provider>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(sweep_expired_keys(provider.clone(), stop_rx));
    let app = routes::router(provider.clone());
    let stats = server::ConnectionStats::new(
        provider.metrics.connections.clone(),
        provider.metrics.connections_refused.clone(),
    );
    let limits = provider.config.limits;
    let stopping = provider.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.begin_stopping();
    };
    let result = server::serve_connections(listener, app, shutdown, limits, stats).await;
    let _ = stop_tx.send(true);
    if let Some(log) = provider.durable() {
        log.close();
    }
    let pending = provider.webhooks.counts();
    if pending.pending() > 0 {
        tracing::warn!(
            queued = pending.queued,
            in_flight = pending.in_flight,
            retrying = pending.retrying,
            "stopping with {} webhook deliveries pending (not delivered)",
            pending.pending()
        );
    } else {
        tracing::info!(
            delivered = pending.delivered,
            failed = pending.failed,
            "no webhook delivery pending"
        );
    }
    result
}

/// Purges expired idempotency keys and attempt counts so memory stays bounded by the TTL,
/// events past their TTL, and (`--retain`) what is older than the window; and expires
/// the Checkout Sessions whose `expires_at` has passed.
async fn sweep_expired_keys(provider: Arc<Provider>, mut stop: watch::Receiver<bool>) {
    let store = &provider.idempotency;
    let retain = provider.config.retain;
    let every = retain
        .map_or(store.ttl(), |r| r.min(store.ttl()))
        .checked_div(2)
        .unwrap_or_default()
        .clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = provider.clock.now();
                let purged = store.purge_expired(now);
                if purged > 0 {
                    tracing::debug!(purged, "expired idempotency keys purged");
                }
                // The fault engine's attempt counts expire with their keys.
                let purged = provider.faults.purge_attempts(now, store.ttl());
                if purged > 0 {
                    tracing::debug!(purged, "expired attempt counts purged");
                }
                let events = provider.payments.events.purge_expired(crate::state::clock::now_unix());
                if events > 0 {
                    tracing::debug!(events, "events past --event-ttl purged");
                }
                let sessions = crate::pipeline::own::expire_due_sessions(&provider);
                if sessions > 0 {
                    tracing::debug!(sessions, "Checkout Sessions past expires_at expired");
                }
                if let Some(retain) = retain {
                    let cutoff = crate::state::clock::now_ms().saturating_sub(retain.as_millis() as u64);
                    let retired = crate::durable::commit::retire_logged(&provider, cutoff);
                    if retired > 0 {
                        tracing::debug!(retired, "objects and ledger records older than --retain left memory");
                    }
                    // With a data dir, the log then drops what left memory (in the background).
                    crate::durable::compaction::maybe_start(&provider);
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
