//! The validated shape of a fault profile: [`Profile`], its default [`Latency`], its
//! [`Rule`]s with their [`Match`] and [`Window`]. These are plain data, already checked by
//! the parser; they serialize back to the schema's own spelling (TOML or JSON), so the
//! active profile can be shown and swapped in again.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::fault::{Fault, When};

/// A fault profile: what the provider does to the requests it gets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// Every decision derives from this seed.
    pub seed: u64,
    /// Overrides the provider's idempotency key TTL.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_opt_duration")]
    pub key_ttl: Option<Duration>,
    /// Added before the commit to every request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// Evaluated in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// Webhook delivery faults (`[[webhooks]]`), evaluated in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookRule>,
}

/// A latency distribution and its optional cap.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    pub distribution: Distribution,
    pub cap: Option<Duration>,
}

/// How latency samples are drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    Fixed {
        value: Duration,
    },
    Uniform {
        min: Duration,
        max: Duration,
    },
    /// Negative samples count as zero.
    Normal {
        mean: Duration,
        stddev: Duration,
    },
    /// `median * exp(sigma * z)` with `z` standard normal.
    LogNormal {
        median: Duration,
        sigma: f64,
    },
}

impl Distribution {
    /// The schema's name: `fixed`, `uniform`, `normal`, `lognormal`.
    pub fn name(&self) -> &'static str {
        match self {
            Distribution::Fixed { .. } => "fixed",
            Distribution::Uniform { .. } => "uniform",
            Distribution::Normal { .. } => "normal",
            Distribution::LogNormal { .. } => "lognormal",
        }
    }
}

/// One fault rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub action: Action,
    /// In `0..=1`.
    pub probability: f64,
    /// Only attempts `1..=N` of a request identity.
    pub first_attempts: Option<u32>,
    /// Empty: every request.
    pub matches: Match,
    pub window: Option<Window>,
}

/// What a rule does when it fires.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Adds a latency sample before or after the commit.
    Latency { when: When, latency: Latency },
    /// The request's fault, if this is the first rule to fire.
    Fault(Fault),
}

impl Action {
    /// The schema's kind name.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Latency { .. } => "latency",
            Action::Fault(f) => f.kind(),
        }
    }
}

/// Which requests a rule applies to; every given field must match.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Match {
    /// Upper case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Exact, or a prefix when it ends with `*`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<AmountRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payment_method: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl Match {
    /// True when no field is given.
    pub fn is_empty(&self) -> bool {
        *self == Match::default()
    }
}

/// An inclusive amount range, in the currency's smallest unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AmountRange {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// Active from `start` after the profile became active, for `duration` (forever when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    #[serde(serialize_with = "ser_duration")]
    pub start: Duration,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_opt_duration")]
    pub duration: Option<Duration>,
}

/// A duration in the schema's spelling.
struct Dur(Duration);

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        super::fault::ser_duration(&self.0, s)
    }
}

fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    Dur(*d).serialize(s)
}

fn ser_opt_duration<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    d.map(Dur).serialize(s)
}

/// Writes a latency's fields (`distribution`, its parameters, `cap`) into a map.
fn latency_entries<M: SerializeMap>(map: &mut M, latency: &Latency) -> Result<(), M::Error> {
    let d = &latency.distribution;
    map.serialize_entry("distribution", d.name())?;
    match d {
        Distribution::Fixed { value } => map.serialize_entry("value", &Dur(*value))?,
        Distribution::Uniform { min, max } => {
            map.serialize_entry("min", &Dur(*min))?;
            map.serialize_entry("max", &Dur(*max))?;
        }
        Distribution::Normal { mean, stddev } => {
            map.serialize_entry("mean", &Dur(*mean))?;
            map.serialize_entry("stddev", &Dur(*stddev))?;
        }
        Distribution::LogNormal { median, sigma } => {
            map.serialize_entry("median", &Dur(*median))?;
            map.serialize_entry("sigma", sigma)?;
        }
    }
    if let Some(cap) = latency.cap {
        map.serialize_entry("cap", &Dur(cap))?;
    }
    Ok(())
}

impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        latency_entries(&mut map, self)?;
        map.end()
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("kind", self.action.kind())?;
        map.serialize_entry("probability", &self.probability)?;
        match &self.action {
            Action::Latency { when, latency } => {
                map.serialize_entry("when", when)?;
                latency_entries(&mut map, latency)?;
            }
            Action::Fault(fault) => fault_entries(&mut map, fault)?,
        }
        if let Some(n) = self.first_attempts {
            map.serialize_entry("first_attempts", &n)?;
        }
        if !self.matches.is_empty() {
            map.serialize_entry("match", &self.matches)?;
        }
        if let Some(window) = &self.window {
            map.serialize_entry("window", window)?;
        }
        map.end()
    }
}

/// Writes a fault's own fields (`when`, `hang`, `status`, …) into a rule's map.
fn fault_entries<M: SerializeMap>(map: &mut M, fault: &Fault) -> Result<(), M::Error> {
    match fault {
        Fault::DropResponse { when } | Fault::Reset { when } => map.serialize_entry("when", when),
        Fault::Hang { when, hang } => {
            map.serialize_entry("when", when)?;
            map.serialize_entry("hang", &Dur(*hang))
        }
        Fault::Error { when, status } => {
            map.serialize_entry("when", when)?;
            map.serialize_entry("status", status)
        }
        Fault::RateLimit { retry_after } => map.serialize_entry("retry_after", &Dur(*retry_after)),
        Fault::Decline {
            code,
            decline_code,
            message,
        } => {
            map.serialize_entry("code", code)?;
            map.serialize_entry("decline_code", decline_code)?;
            map.serialize_entry("message", message)
        }
        Fault::SlowBody { duration } => map.serialize_entry("duration", &Dur(*duration)),
    }
}

/// The most copies a `duplicate` rule may ask for.
pub const MAX_COPIES: u32 = 10;

/// The kinds of delivery faults, as the schema spells them.
pub const WEBHOOK_KINDS: &[&str] = &["duplicate", "delay", "lose_ack", "drop", "bad_signature"];

/// How a `bad_signature` delivery is forged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgery {
    /// Signed with another secret.
    WrongSecret,
    /// Signed correctly, ten minutes ago (past the libraries' 5-minute tolerance).
    StaleTimestamp,
}

impl Forgery {
    pub fn as_str(self) -> &'static str {
        match self {
            Forgery::WrongSecret => "wrong_secret",
            Forgery::StaleTimestamp => "stale_timestamp",
        }
    }
}

/// What a webhook rule does to a delivery attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryFault {
    Duplicate { copies: u32, gap: Duration },
    Delay { latency: Latency },
    LoseAck,
    Drop,
    BadSignature { how: Forgery, retry: bool },
}

impl DeliveryFault {
    pub fn kind(&self) -> &'static str {
        match self {
            DeliveryFault::Duplicate { .. } => "duplicate",
            DeliveryFault::Delay { .. } => "delay",
            DeliveryFault::LoseAck => "lose_ack",
            DeliveryFault::Drop => "drop",
            DeliveryFault::BadSignature { .. } => "bad_signature",
        }
    }
}

/// One `[[webhooks]]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookRule {
    pub fault: DeliveryFault,
    /// In `0..=1`.
    pub probability: f64,
    /// Only delivery attempts `1..=N`.
    pub first_attempts: Option<u32>,
    /// `[webhooks.match] event`: an event type, or a prefix ending in `.*`.
    pub event: Option<String>,
}

/// Typed construction of webhook rules, for [`ProfileBuilder::webhook`](super::ProfileBuilder::webhook)
/// (which checks them with the parser): `WebhookRule::duplicate(2).event("payment_intent.succeeded")`.
impl WebhookRule {
    fn new(fault: DeliveryFault) -> Self {
        Self {
            fault,
            probability: 1.0,
            first_attempts: None,
            event: None,
        }
    }

    /// `copies` sends at once.
    pub fn duplicate(copies: u32) -> Self {
        Self::new(DeliveryFault::Duplicate {
            copies,
            gap: Duration::ZERO,
        })
    }

    pub fn delay(latency: impl Into<Latency>) -> Self {
        Self::new(DeliveryFault::Delay {
            latency: latency.into(),
        })
    }

    pub fn lose_ack() -> Self {
        Self::new(DeliveryFault::LoseAck)
    }

    pub fn drop_delivery() -> Self {
        Self::new(DeliveryFault::Drop)
    }

    /// Forged as `how` says, retried correctly signed.
    pub fn bad_signature(how: Forgery) -> Self {
        Self::new(DeliveryFault::BadSignature { how, retry: true })
    }

    /// A `bad_signature` rule whose rejected delivery is not retried.
    pub fn no_retry(mut self) -> Self {
        if let DeliveryFault::BadSignature { retry, .. } = &mut self.fault {
            *retry = false;
        }
        self
    }

    pub fn probability(mut self, p: f64) -> Self {
        self.probability = p;
        self
    }

    pub fn first_attempts(mut self, n: u32) -> Self {
        self.first_attempts = Some(n);
        self
    }

    /// Only events of this type, or of a prefix ending in `.*`.
    pub fn event(mut self, pattern: impl Into<String>) -> Self {
        self.event = Some(pattern.into());
        self
    }
}

impl Serialize for WebhookRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("kind", self.fault.kind())?;
        map.serialize_entry("probability", &self.probability)?;
        match &self.fault {
            DeliveryFault::Duplicate { copies, gap } => {
                map.serialize_entry("copies", copies)?;
                map.serialize_entry("gap", &humantime::format_duration(*gap).to_string())?;
            }
            DeliveryFault::Delay { latency } => {
                // A latency serialises as a map of its fields: inline them.
                let v = serde_json::to_value(latency).map_err(serde::ser::Error::custom)?;
                if let serde_json::Value::Object(fields) = v {
                    for (k, v) in fields {
                        map.serialize_entry(&k, &v)?;
                    }
                }
            }
            DeliveryFault::BadSignature { how, retry } => {
                map.serialize_entry("how", how.as_str())?;
                map.serialize_entry("retry", retry)?;
            }
            DeliveryFault::LoseAck | DeliveryFault::Drop => {}
        }
        if let Some(n) = self.first_attempts {
            map.serialize_entry("first_attempts", &n)?;
        }
        if let Some(e) = &self.event {
            map.serialize_entry("match", &serde_json::json!({ "event": e }))?;
        }
        map.end()
    }
}
