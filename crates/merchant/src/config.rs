//! The merchant's settings: strategy, provider, backing services and timings.
//!
//! [`MerchantConfig::new`] gives the embedded defaults (in-memory store and lock, a 2 s
//! provider timeout); setting `redis_url` puts the order lock in Redis and `postgres_url`
//! the key records and orders in PostgreSQL (in `pg_schema`, so parallel merchants or
//! tests can share a database). Derived timings — the lock and lease TTL, the settling
//! delay before a search that found nothing is trusted — follow the provider timeout
//! unless set explicitly. [`MerchantConfig::validate`] refuses inconsistent settings.
//! `clock` is the system clock unless a test sets a manual one. `webhook_secret` turns on
//! `POST /webhooks/stripe` (deliveries signed with it are verified, within
//! `webhook_tolerance`).

use std::time::Duration;

use super::checkout_flow::CheckoutFlow;
use super::clock::{SharedClock, SystemClock};
use super::error::MerchantError;
use super::strategy::Strategy;
use super::webhook::{WebhookSecret, DEFAULT_TOLERANCE};

#[derive(Debug, Clone)]
pub struct MerchantConfig {
    pub strategy: Strategy,
    /// How customers pay, so what fulfils an order (`payment_intent.succeeded`, or a
    /// completed Checkout Session and the success page).
    pub flow: CheckoutFlow,
    /// The provider's base URL (`http://127.0.0.1:12111`).
    pub provider_url: String,
    /// The provider API key (`sk_test_…`), sent as `Authorization: Bearer`.
    pub api_key: String,
    /// The publishable key (`pk_test_…`) the storefront's browser uses at the provider.
    pub publishable_key: String,
    /// The provider's URL as a browser reaches it, for the storefront (default: the
    /// merchant's own `provider_url`; differs behind docker-compose's service names).
    pub public_provider_url: Option<String>,
    /// Redis for the order lock (lock-only and idempotent); in memory when `None`.
    pub redis_url: Option<String>,
    /// PostgreSQL for key records and orders (idempotent); in memory when `None`.
    pub postgres_url: Option<String>,
    /// Bound on every provider call (charge or search).
    pub provider_timeout: Duration,
    /// How often the background reconciler looks for unresolved orders.
    pub reconcile_interval: Duration,
    /// How long after an attempt a search finding no charge is trusted
    /// (default: the provider timeout).
    pub reconcile_settle: Option<Duration>,
    /// The order lock's TTL, and a claim's lease (default: 3 × provider timeout + 2 s).
    pub lock_ttl: Option<Duration>,
    /// How long idempotency-key records are kept before they are pruned.
    pub key_ttl: Duration,
    /// The PostgreSQL schema holding the merchant's tables.
    pub pg_schema: String,
    /// Connections in the PostgreSQL pool.
    pub pg_pool_size: usize,
    /// Prefix of the merchant's Redis keys.
    pub redis_prefix: String,
    /// Bound on every Redis or PostgreSQL call.
    pub store_timeout: Duration,
    /// What leases, key expiry, the in-memory lock and the reconciler read the time from.
    pub clock: SharedClock,
    /// The webhook endpoint's signing secret (`whsec_…`); `POST /webhooks/stripe` is
    /// served only when it is set.
    pub webhook_secret: Option<WebhookSecret>,
    /// How old a delivery's signature timestamp may be (default 300 s, as Stripe's libraries).
    pub webhook_tolerance: Duration,
}

impl MerchantConfig {
    pub const DEFAULT_API_KEY: &'static str = "sk_test_fauxpay_merchant";
    pub const DEFAULT_PUBLISHABLE_KEY: &'static str = "pk_test_fauxpay_merchant";

    /// The embedded defaults for `strategy` against the provider at `provider_url`.
    pub fn new(strategy: Strategy, provider_url: impl Into<String>) -> Self {
        Self {
            strategy,
            flow: CheckoutFlow::default(),
            provider_url: provider_url.into(),
            api_key: Self::DEFAULT_API_KEY.to_string(),
            publishable_key: Self::DEFAULT_PUBLISHABLE_KEY.to_string(),
            public_provider_url: None,
            redis_url: None,
            postgres_url: None,
            provider_timeout: Duration::from_secs(2),
            reconcile_interval: Duration::from_millis(500),
            reconcile_settle: None,
            lock_ttl: None,
            key_ttl: Duration::from_secs(24 * 3600),
            pg_schema: "fauxpay_merchant".to_string(),
            pg_pool_size: 8,
            redis_prefix: "fauxpay:merchant:".to_string(),
            store_timeout: Duration::from_secs(2),
            clock: SystemClock::shared(),
            webhook_secret: None,
            webhook_tolerance: DEFAULT_TOLERANCE,
        }
    }

    /// The lock TTL and claim lease in force.
    pub fn effective_lock_ttl(&self) -> Duration {
        self.lock_ttl
            .unwrap_or(self.provider_timeout * 3 + Duration::from_secs(2))
    }

    /// The settling delay in force.
    pub fn effective_settle(&self) -> Duration {
        self.reconcile_settle.unwrap_or(self.provider_timeout)
    }

    /// How often expired key records are pruned.
    pub fn prune_every(&self) -> Duration {
        (self.key_ttl / 2).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }

    pub fn validate(&self) -> Result<(), MerchantError> {
        let bad = |m: String| Err(MerchantError::Config(m));
        if !(self.provider_url.starts_with("http://") || self.provider_url.starts_with("https://")) {
            return bad(format!(
                "provider URL `{}` must start with http:// or https://",
                self.provider_url
            ));
        }
        if !self.api_key.starts_with("sk_") {
            return bad("the provider API key must be a secret key (`sk_test_…`)".into());
        }
        for (name, d) in [
            ("provider timeout", self.provider_timeout),
            ("reconcile interval", self.reconcile_interval),
            ("key TTL", self.key_ttl),
            ("store timeout", self.store_timeout),
            ("webhook tolerance", self.webhook_tolerance),
        ] {
            if d.is_zero() {
                return bad(format!("the {name} must be positive"));
            }
        }
        if self.effective_lock_ttl() <= self.provider_timeout {
            return bad(format!(
                "the lock TTL ({:?}) must be longer than the provider timeout ({:?})",
                self.effective_lock_ttl(),
                self.provider_timeout
            ));
        }
        if self.pg_pool_size == 0 {
            return bad("the PostgreSQL pool needs at least one connection".into());
        }
        Ok(())
    }

    /// One line describing the settings in force (logged at start-up).
    pub fn describe(&self) -> String {
        format!(
            "strategy={} flow={} provider={} store={} lock={} provider_timeout={:?} lock_ttl={:?} settle={:?} reconcile_interval={:?} key_ttl={:?} webhooks={}",
            self.strategy,
            self.flow,
            self.provider_url,
            if self.postgres_url.is_some() { "postgres" } else { "memory" },
            if self.redis_url.is_some() { "redis" } else { "memory" },
            self.provider_timeout,
            self.effective_lock_ttl(),
            self.effective_settle(),
            self.reconcile_interval,
            self.key_ttl,
            if self.webhook_secret.is_some() {
                "POST /webhooks/stripe"
            } else {
                "off"
            },
        )
    }
}

impl Default for MerchantConfig {
    fn default() -> Self {
        Self::new(Strategy::Idempotent, "http://127.0.0.1:12111")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_timings_follow_the_provider_timeout() {
        let c = MerchantConfig {
            provider_timeout: Duration::from_secs(1),
            ..MerchantConfig::default()
        };
        assert_eq!(c.effective_lock_ttl(), Duration::from_secs(5));
        assert_eq!(c.effective_settle(), Duration::from_secs(1));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn inconsistent_settings_are_refused() {
        for c in [
            MerchantConfig {
                lock_ttl: Some(Duration::from_secs(1)),
                ..MerchantConfig::default()
            },
            MerchantConfig {
                provider_url: "127.0.0.1:1".into(),
                ..MerchantConfig::default()
            },
            MerchantConfig {
                api_key: "pk_test_x".into(),
                ..MerchantConfig::default()
            },
            MerchantConfig {
                pg_pool_size: 0,
                ..MerchantConfig::default()
            },
        ] {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
