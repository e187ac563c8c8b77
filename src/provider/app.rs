//! [`Provider`]: everything a running provider shares between requests (its settings,
//! the payment state, the idempotency store, fault injection, metrics, webhook delivery) and the
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
use crate::provider::webhook_endpoints::object::WebhookEndpoint;
use crate::provider::webhooks::Webhooks;

/// Everything a running provider shares between requests.
pub struct Provider {
    pub config: Config,
    pub payments: Payments,
    pub idempotency: Arc<IdempotencyStore>,
    pub faults: Arc<FaultInjector>,
    pub metrics: Metrics,
    /// The provider's time: idempotency keys are claimed and expire by it.
    pub clock: Clock,
    /// Webhook delivery: every event, to every endpoint that wants it.
    pub webhooks: Arc<Webhooks>,
    /// The endpoints of `--webhook`, registered again after a reset.
    cli_endpoints: Vec<Arc<WebhookEndpoint>>,
    /// Set once shutdown begins: held (`hang`) requests end at once.
    stopping: watch::Sender<bool>,
}

impl Provider {
    pub fn new(config: Config) -> Arc<Self> {
        // Compile Stripe's spec now, so that no request pays for it.
        schema::spec();
        let payments = Payments::new(config.duplicates, config.correlate.clone());
        let faults = Arc::new(FaultInjector::new(
            config.profile.clone(),
            config.profile_source.clone(),
        ));
        let metrics = Metrics::default();
        let webhooks = Webhooks::new(config.delivery.clone(), faults.clone(), metrics.webhooks.clone());
        payments.events.set_ttl(config.event_ttl);
        payments.events.set_publisher(webhooks.clone());
        let cli_endpoints = config
            .webhooks
            .iter()
            .filter_map(|t| match payments.register_webhook(&t.url, &t.secret) {
                Ok(e) => Some(e),
                Err(e) => {
                    tracing::error!(url = %t.url, error = %e.message, "webhook endpoint refused");
                    None
                }
            })
            .collect();
        Arc::new(Self {
            payments,
            idempotency: IdempotencyStore::new(config.profile.key_ttl.unwrap_or(config.key_ttl)),
            faults,
            metrics,
            clock: Clock::default(),
            webhooks,
            cli_endpoints,
            stopping: watch::channel(false).0,
            config,
        })
    }

    /// Forgets all payments, keys, ledger records, events and webhook endpoints but those
    /// of `--webhook` (`POST /__fauxpay/reset`); deliveries already queued go on.
    pub fn reset(&self) {
        self.idempotency.clear();
        self.payments.reset();
        self.payments.restore_webhook_endpoints(&self.cli_endpoints);
        self.webhooks.reset();
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
