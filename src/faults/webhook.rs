//! Webhook delivery faults: the `[[webhooks]]` tables of a fault profile, and their
//! deterministic decision.
//!
//! A [`WebhookRule`] acts on one delivery attempt of one event to one endpoint: it
//! duplicates it (`copies` sends, `gap` apart), delays it (a latency distribution, so that
//! later events overtake it), loses its acknowledgement (sent, then treated as timed out
//! and retried), drops it (never sent; retried), or signs it badly (`wrong_secret` or
//! `stale_timestamp`; retried correctly signed unless `retry = false`). Each rule has a
//! `probability`, `first_attempts` and `[webhooks.match] event` (exact, or a
//! `prefix.*`). [`FaultEngine::decide_delivery`] is a pure function of the profile seed,
//! the event id, the endpoint and the attempt: delays add up; of the other kinds, the
//! first rule that fires acts.

use std::time::Duration;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::checker::{closest, Checker};
use super::engine::FaultEngine;
use super::fault::short_duration;
use super::parse::{latency, optional, LATENCY_FIELDS};
use super::profile::Latency;
use super::sample::Stream;
use super::tree::Node;

/// Salts webhook rules' streams apart from request rules'.
const WEBHOOK_SALT: u64 = 0x7765_6268_6f6f_6b00;
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

    /// `copies` sends, `gap` apart.
    pub fn duplicate_spaced(copies: u32, gap: Duration) -> Self {
        Self::new(DeliveryFault::Duplicate { copies, gap })
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

    fn applies(&self, facts: &DeliveryFacts) -> bool {
        self.first_attempts.is_none_or(|n| facts.attempt <= n)
            && self.event.as_deref().is_none_or(|p| match p.strip_suffix('*') {
                Some(prefix) => facts.event_type.starts_with(prefix),
                None => facts.event_type == p,
            })
    }
}

/// What the engine knows about a delivery attempt.
#[derive(Debug, Clone, Copy)]
pub struct DeliveryFacts<'a> {
    pub event_id: &'a str,
    pub event_type: &'a str,
    /// The endpoint's id.
    pub endpoint: &'a str,
    /// 1 for the first delivery of this event to this endpoint.
    pub attempt: u32,
}

/// What happens to one delivery attempt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeliveryDecision {
    /// Held this long before sending (the `delay` rules that fired, added up).
    pub delay: Duration,
    /// At most one other fault, and the index of its rule.
    pub fault: Option<(DeliveryFault, usize)>,
}

impl DeliveryDecision {
    /// `duplicate ×2 (webhook rule 0), delay 1.2s`, or `None` when nothing acted.
    pub fn label(&self) -> Option<String> {
        let fault = self.fault.as_ref().map(|(f, i)| {
            let what = match f {
                DeliveryFault::Duplicate { copies, gap } if gap.is_zero() => format!("duplicate ×{copies}"),
                DeliveryFault::Duplicate { copies, gap } => {
                    format!("duplicate ×{copies} gap {}", short_duration(*gap))
                }
                DeliveryFault::BadSignature { how, .. } => format!("bad_signature {}", how.as_str()),
                other => other.kind().to_string(),
            };
            format!("{what} (webhook rule {i})")
        });
        let delay = (!self.delay.is_zero()).then(|| format!("delay {}", short_duration(self.delay)));
        match (fault, delay) {
            (Some(f), Some(d)) => Some(format!("{f}, {d}")),
            (f, d) => f.or(d),
        }
    }
}

impl FaultEngine {
    /// The decision for one delivery attempt: a pure function of the profile and `facts`.
    pub fn decide_delivery(&self, facts: &DeliveryFacts) -> DeliveryDecision {
        let mut decision = DeliveryDecision::default();
        let identity = format!("{}/{}", facts.endpoint, facts.event_id);
        for (index, rule) in self.profile().webhooks.iter().enumerate() {
            let is_delay = matches!(rule.fault, DeliveryFault::Delay { .. });
            if (!is_delay && decision.fault.is_some()) || !rule.applies(facts) {
                continue;
            }
            let salt = WEBHOOK_SALT ^ index as u64;
            let mut stream = Stream::new(self.profile().seed, &identity, facts.attempt, salt);
            if stream.next_f64() >= rule.probability {
                continue;
            }
            match &rule.fault {
                DeliveryFault::Delay { latency } => decision.delay += latency.sample(&mut stream),
                other => decision.fault = Some((other.clone(), index)),
            }
        }
        decision
    }
}

const WEBHOOK_FIELDS: &[&str] = &["kind", "probability", "first_attempts", "match"];

fn kind_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "duplicate" => &["copies", "gap"],
        "delay" => LATENCY_FIELDS,
        "bad_signature" => &["how", "retry"],
        _ => &[],
    }
}

/// Reads one `[[webhooks]]` table (`path` is `webhooks[i]`).
pub(crate) fn webhook_rule(c: &mut Checker, node: &Node, path: &str) -> Option<WebhookRule> {
    let t = c.table(node, path)?;
    let kinds = WEBHOOK_KINDS.join(", ");
    let kind_node = c.require(&t, "kind", &format!("a delivery fault kind, one of {kinds}"))?;
    let kind = c.string(kind_node, &t.field("kind"))?;
    if !WEBHOOK_KINDS.contains(&kind) {
        let hint = closest(kind, WEBHOOK_KINDS)
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        c.error(
            kind_node.line,
            &t.field("kind"),
            format!("unknown delivery fault kind {kind:?}, expected one of {kinds}{hint}"),
        );
        return None;
    }
    let allowed: Vec<&str> = WEBHOOK_FIELDS.iter().chain(kind_fields(kind)).copied().collect();
    c.only(&t, &allowed);
    let probability = optional(
        t.get("probability")
            .map(|n| c.number_in(n, &t.field("probability"), 0.0, 1.0)),
    );
    let first_attempts = optional(t.get("first_attempts").map(|n| {
        let expected = "a whole number of attempts, at least 1";
        c.integer_in(n, &t.field("first_attempts"), 1, i64::from(u32::MAX), expected)
            .map(|i| i as u32)
    }));
    let event = optional(t.get("match").map(|n| {
        let m = c.table(n, &t.field("match"))?;
        c.only(&m, &["event"]);
        let Some(e) = m.get("event") else {
            return Some(None);
        };
        let field = m.field("event");
        let pattern = c.nonempty_string(e, &field)?;
        let star = pattern.find('*');
        let valid = match star {
            None => true,
            Some(i) => i == pattern.len() - 1 && (pattern == "*" || pattern.ends_with(".*")),
        };
        if !valid {
            c.error(
                e.line,
                &field,
                format!("expected an event type such as \"payment_intent.succeeded\" or a prefix such as \"payment_intent.*\", got {pattern:?}"),
            );
            return None;
        }
        Some(Some(pattern.to_string()))
    }));
    let fault = match kind {
        "duplicate" => {
            let copies = optional(t.get("copies").map(|n| {
                let expected = format!("a number of copies between 2 and {MAX_COPIES}");
                c.integer_in(n, &t.field("copies"), 2, i64::from(MAX_COPIES), &expected)
                    .map(|i| i as u32)
            }));
            let gap = optional(t.get("gap").map(|n| c.duration(n, &t.field("gap"))));
            Some(DeliveryFault::Duplicate {
                copies: copies?.unwrap_or(2),
                gap: gap?.unwrap_or(Duration::ZERO),
            })
        }
        "delay" => latency(c, &t).map(|latency| DeliveryFault::Delay { latency }),
        "lose_ack" => Some(DeliveryFault::LoseAck),
        "drop" => Some(DeliveryFault::Drop),
        _ => {
            let how_node = c.require(&t, "how", "wrong_secret or stale_timestamp");
            let how = how_node.and_then(|n| {
                let field = t.field("how");
                match c.string(n, &field)? {
                    "wrong_secret" => Some(Forgery::WrongSecret),
                    "stale_timestamp" => Some(Forgery::StaleTimestamp),
                    other => {
                        c.error(
                            n.line,
                            &field,
                            format!("expected wrong_secret or stale_timestamp, got {other:?}"),
                        );
                        None
                    }
                }
            });
            let retry = optional(t.get("retry").map(|n| match &n.value {
                super::tree::Value::Bool(b) => Some(*b),
                _ => {
                    c.error(
                        n.line,
                        &t.field("retry"),
                        format!("expected true or false, got {}", n.describe()),
                    );
                    None
                }
            }));
            let (how, retry) = (how, retry);
            Some(DeliveryFault::BadSignature {
                how: how?,
                retry: retry?.unwrap_or(true),
            })
        }
    };
    Some(WebhookRule {
        fault: fault?,
        probability: probability?.unwrap_or(1.0),
        first_attempts: first_attempts?,
        event: event?.flatten(),
    })
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

#[cfg(test)]
mod tests;
