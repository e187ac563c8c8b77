//! [`Provider`]: everything a running provider shares between requests (its settings,
//! the payment state, the idempotency store, fault injection, metrics, webhook delivery) and the
//! operations on the whole of it (reset, profile swap, shutdown signal).

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use crate::config::Config;
use crate::durable::{DataLog, Record};
use crate::fault_injection::FaultInjector;
use crate::idempotency::IdempotencyStore;
use crate::journal::Journal;
use crate::metrics::Metrics;
use crate::resources::webhook_endpoints::object::WebhookEndpoint;
use crate::state::clock::Clock;
use crate::state::payments::Payments;
use crate::stripe::spec::schema;
use crate::webhooks::Webhooks;
use fauxpay_faults::Profile;

/// Everything a running provider shares between requests.
// Aligned to a cache line pair: in an `Arc<Provider>` the counts every request's clone
// writes sit alone on the first line, not beside the fields every request reads.
#[repr(align(128))]
pub struct Provider {
    pub config: Config,
    pub payments: Payments,
    pub idempotency: Arc<IdempotencyStore>,
    pub faults: Arc<FaultInjector>,
    /// The recent requests and how each ended (`GET /__fauxpay/requests`).
    pub journal: Journal,
    pub metrics: Metrics,
    /// The provider's time: idempotency keys are claimed and expire by it.
    pub clock: Clock,
    /// Webhook delivery: every event, to every endpoint that wants it.
    pub webhooks: Arc<Webhooks>,
    /// The endpoints of `--webhook`, registered again after a reset.
    cli_endpoints: Vec<Arc<WebhookEndpoint>>,
    /// Set once shutdown begins: held (`hang`) requests end at once.
    stopping: watch::Sender<bool>,
    /// The data dir's log, with `--data-dir` (set once the state is recovered).
    durable: OnceLock<Arc<DataLog>>,
    /// The data dir's compaction (`--retain` with `--data-dir`).
    pub compaction: crate::durable::compact::State,
}

impl Provider {
    pub fn new(config: Config) -> Arc<Self> {
        Self::build(config, false)
    }

    /// A provider whose state is about to be recovered from its data dir: events are
    /// kept back from delivery until recovery says which were delivered.
    pub fn recovering(config: Config) -> Arc<Self> {
        Self::build(config, true)
    }

    /// Makes room for about `payments` confirmed payments: their intents, charges, three
    /// events each (one row: drawn in one group, see `Events::open`), ledger records,
    /// idempotency keys and attempt counters. Recovery sizes the tables from the log's
    /// length, instead of growing them a rehash at a time. Best effort: room is a
    /// speed-up, never a need, so an allocation refused here is left to the inserts.
    pub fn reserve(&self, payments: usize) {
        self.payments.intents.reserve(payments);
        self.payments.charges.reserve(payments);
        self.payments
            .events
            .table
            .reserve_rows(payments, payments.saturating_mul(3));
        self.payments.ledger.reserve(payments);
        self.idempotency.reserve(payments);
        self.faults.reserve_attempts(payments);
    }

    fn build(config: Config, recovering: bool) -> Arc<Self> {
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
        match recovering {
            true => payments.events.defer_publishing(),
            false => payments.events.set_publisher(webhooks.clone()),
        }
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
            journal: Journal::default(),
            metrics,
            clock: Clock::default(),
            webhooks,
            cli_endpoints,
            stopping: watch::channel(false).0,
            durable: OnceLock::new(),
            compaction: Default::default(),
            config,
        })
    }

    /// Forgets all payments, keys, ledger records, events and webhook endpoints but those
    /// of `--webhook` (`POST /__fauxpay/reset`); deliveries already queued go on.
    pub fn reset(&self) {
        let _order = self.durable().map(|log| {
            let guard = log.commit_lock();
            log.append(&Record::Reset);
            guard
        });
        self.idempotency.clear();
        self.payments.reset();
        self.payments.restore_webhook_endpoints(&self.cli_endpoints);
        self.webhooks.reset();
        self.faults.reset();
        self.journal.reset();
    }

    /// The data dir's log, when the state is durable (`--data-dir`).
    pub fn durable(&self) -> Option<&Arc<DataLog>> {
        self.durable.get()
    }

    /// From now on every change is logged to `log` (once recovered from it).
    pub fn attach_data_log(&self, log: Arc<DataLog>) {
        self.webhooks.attach_data_log(log.clone());
        let _ = self.durable.set(log);
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
        if let Some(log) = self.durable() {
            log.append(&Record::Profile { source: source.clone() });
        }
        self.faults.swap(profile, source);
        tracing::info!(profile = %name, "fault profile swapped");
    }
}
