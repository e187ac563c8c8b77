//! The provider's settings: what `fauxpay serve`'s flags decide (idempotency mode and key
//! lifetime, how payments are correlated, the duplicate policy, keys and tokens, the
//! fault profile at start-up, the webhook endpoints and how events are delivered to them).

use std::time::Duration;

use crate::idempotency::Mode as IdempotencyMode;
use crate::resources::events::store::DEFAULT_TTL as DEFAULT_EVENT_TTL;
use crate::state::payments::{CorrelationSource, DuplicatePolicy};
use crate::webhooks::Settings as DeliverySettings;
use fauxpay_faults::{self as faults, Profile};

/// A webhook endpoint set at start-up (`fauxpay serve --webhook URL`): it receives every
/// event, signed with `secret` (`whsec_…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTarget {
    pub url: String,
    pub secret: String,
}

/// `--compact-after`'s default: 64 MiB of log (about 90,000 payments).
pub const DEFAULT_COMPACT_AFTER: u64 = 64 << 20;

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
    /// When set, the one publishable key accepted; otherwise any `pk_test_…` key.
    pub publishable_key: Option<String>,
    /// When set, `/__fauxpay/*` (but `health`) requires `Authorization: Bearer TOKEN`.
    pub admin_token: Option<String>,
    /// The fault profile active at start-up, and its source text.
    pub profile: Profile,
    pub profile_source: String,
    /// Endpoints receiving every event (`--webhook`), besides those created through the API.
    pub webhooks: Vec<WebhookTarget>,
    /// Retry schedule, timeout and concurrency of webhook deliveries.
    pub delivery: DeliverySettings,
    /// How long events are kept (`--event-ttl`).
    pub event_ttl: Duration,
    /// `--retain`: objects, events and ledger records older than this leave memory
    /// (duplicate groups stay); `None` keeps everything.
    pub retain: Option<Duration>,
    /// With `--retain` and a data dir: the log is compacted each time it has grown by
    /// this many bytes (or by a third of its compacted size, when that is more) since the last
    /// compaction (`--compact-after`).
    pub compact_after: u64,
    /// What one client may cost the server: timeouts, connections, the shutdown deadline.
    pub limits: Limits,
    /// The `Host` names served (`localhost`, `127.0.0.1`, `[::1]` and `--allowed-host`
    /// when listening on loopback, which keeps DNS rebinding out); empty: any.
    pub allowed_hosts: Vec<String>,
}

/// The HTTP edge's limits (`fauxpay serve --header-timeout …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From when the server waits for a request (a new connection, or an idle
    /// keep-alive one) until its whole header has arrived; then the connection is closed.
    pub header_timeout: Duration,
    /// To receive a request's whole body once its header is in (408 beyond it).
    pub body_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// On shutdown, how long in-flight requests may take before every connection is cut.
    pub shutdown_deadline: Duration,
}

impl Limits {
    /// The default `--max-connections`: 10,000, or less when the open-file limit (after
    /// raising the soft limit to the hard one) leaves less room: 3/4 of it, so files,
    /// the listener and outgoing connections still fit.
    pub fn default_max_connections(open_file_limit: Option<u64>) -> usize {
        let room = open_file_limit.map_or(u64::MAX, |n| n / 4 * 3);
        usize::try_from(room.clamp(16, 10_000)).unwrap_or(10_000)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 10_000,
            shutdown_deadline: Duration::from_secs(5),
        }
    }
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
            publishable_key: None,
            admin_token: None,
            profile: faults::bundled::load("happy").expect("the bundled happy profile is valid"),
            profile_source: faults::bundled::text("happy").unwrap_or_default().to_string(),
            limits: Limits::default(),
            webhooks: Vec::new(),
            delivery: DeliverySettings::default(),
            event_ttl: DEFAULT_EVENT_TTL,
            retain: None,
            compact_after: DEFAULT_COMPACT_AFTER,
            allowed_hosts: Vec::new(),
        }
    }
}

impl Config {
    /// One line describing the settings in force (logged at start-up).
    pub fn describe(&self) -> String {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        let retries = match self.delivery.retries.as_slice() {
            [] => "none".to_string(),
            r => r.iter().map(|r| d(*r)).collect::<Vec<_>>().join(","),
        };
        format!(
            "profile={} idempotency={:?} key_ttl={} require_key={} correlate={} duplicates={:?} api_key={} publishable_key={} admin_token={} \
             header_timeout={} body_timeout={} max_connections={} shutdown_deadline={} event_ttl={} retain={} \
             webhook_retries={retries} webhook_timeout={} allowed_hosts={}",
            self.profile.name,
            self.idempotency,
            d(self.profile.key_ttl.unwrap_or(self.key_ttl)),
            self.require_idempotency_key,
            self.correlate,
            self.duplicates,
            if self.api_key.is_some() {
                "fixed"
            } else {
                "any sk_test_"
            },
            if self.publishable_key.is_some() {
                "fixed"
            } else {
                "any pk_test_"
            },
            if self.admin_token.is_some() { "on" } else { "off" },
            d(self.limits.header_timeout),
            d(self.limits.body_timeout),
            self.limits.max_connections,
            d(self.limits.shutdown_deadline),
            d(self.event_ttl),
            self.retain.map_or("off".to_string(), d),
            d(self.delivery.timeout),
            match self.allowed_hosts.as_slice() {
                [] => "any".to_string(),
                hosts => hosts.join(","),
            },
        )
        .to_lowercase()
    }
}
