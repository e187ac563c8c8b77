//! [`Provider`]: everything a running provider shares between requests (its settings,
//! the payment state, the idempotency store, fault injection, metrics) and the
//! operations on the whole of it (reset, profile swap, shutdown signal).

use std::sync::Arc;

use tokio::sync::watch;

use crate::faults::Profile;
use crate::provider::clock::Clock;
use crate::provider::config::Config;
use crate::provider::fault_injection::FaultInjector;
use crate::provider::idempotency::IdempotencyStore;
use crate::provider::metrics::Metrics;
use crate::provider::payments::Payments;
use crate::provider::spec::schema;

/// Everything a running provider shares between requests.
pub struct Provider {
    pub config: Config,
    pub payments: Payments,
    pub idempotency: Arc<IdempotencyStore>,
    pub faults: FaultInjector,
    pub metrics: Metrics,
    /// The provider's time: idempotency keys are claimed and expire by it.
    pub clock: Clock,
    /// Set once shutdown begins: held (`hang`) requests end at once.
    stopping: watch::Sender<bool>,
}

impl Provider {
    pub fn new(config: Config) -> Arc<Self> {
        // Compile Stripe's spec now, so that no request pays for it.
        schema::spec();
        Arc::new(Self {
            payments: Payments::new(config.duplicates, config.correlate.clone()),
            idempotency: IdempotencyStore::new(config.profile.key_ttl.unwrap_or(config.key_ttl)),
            faults: FaultInjector::new(config.profile.clone(), config.profile_source.clone()),
            metrics: Metrics::default(),
            clock: Clock::default(),
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

    /// Begins shutdown: held requests end at once.
    pub fn begin_stopping(&self) {
        self.stopping.send_replace(true);
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
