//! The validated shape of a fault profile: [`Profile`], its default [`Latency`], its
//! [`Rule`]s with their [`Match`] and [`Window`]. These are plain data, already checked by
//! the parser; they serialize back to the schema's own spelling (TOML or JSON), so the
//! active profile can be shown and swapped in again.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::fault::{Fault, When};
use super::webhook::WebhookRule;

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
