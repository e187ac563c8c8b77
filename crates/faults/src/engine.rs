//! The deterministic fault engine: given a request's facts, which latency and which fault
//! act on it. Rules are tried in order; each rule's roll and latency samples come from a
//! [`Stream`] of (seed, identity, attempt, rule index) alone, so a decision never depends
//! on call order, time of arrival (beyond the profile's own windows) or concurrency.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::fault::{ser_duration, short_duration, Fault, When};
use super::profile::{Action, DeliveryFault, Match, Profile, Rule, WebhookRule, Window};
use super::sample::Stream;

/// The salt of the profile's default `[latency]` (rules use their index).
const DEFAULT_LATENCY_SALT: u64 = u64::MAX;

/// What the engine knows about a request.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// Idempotency key, else correlation id, else a request counter.
    pub identity: &'a str,
    /// 1 for the first attempt of this identity.
    pub attempt: u32,
    pub method: &'a str,
    pub path: &'a str,
    pub amount: Option<u64>,
    pub payment_method: Option<&'a str>,
    pub metadata: &'a BTreeMap<String, String>,
    /// Time since the profile became active.
    pub since_active: Duration,
}

/// What happens to one request: latency before and after the commit, and at most one fault.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Decision {
    #[serde(serialize_with = "ser_duration")]
    pub latency_before: Duration,
    #[serde(serialize_with = "ser_duration")]
    pub latency_after: Duration,
    pub fault: Option<Fault>,
    /// Index of the rule that produced `fault`; `None` for a forced fault.
    pub rule: Option<usize>,
}

impl Decision {
    /// A short description for the ledger and the request log, `None` when nothing acted:
    /// `drop_response after_commit (rule 2)`, `error 503 after_commit (forced)`,
    /// `latency 120ms`, `hang 10s before_commit (rule 1), latency 40ms`.
    pub fn label(&self) -> Option<String> {
        let latency = match (self.latency_before.is_zero(), self.latency_after.is_zero()) {
            (true, true) => None,
            (false, true) => Some(format!("latency {}", short_duration(self.latency_before))),
            (true, false) => Some(format!("latency {} after_commit", short_duration(self.latency_after))),
            (false, false) => Some(format!(
                "latency {} + {} after_commit",
                short_duration(self.latency_before),
                short_duration(self.latency_after)
            )),
        };
        let fault = self.fault.as_ref().map(|f| match self.rule {
            Some(i) => format!("{f} (rule {i})"),
            None => format!("{f} (forced)"),
        });
        match (fault, latency) {
            (Some(f), Some(l)) => Some(format!("{f}, {l}")),
            (f, l) => f.or(l),
        }
    }
}

/// Decides faults for requests, from a [`Profile`].
#[derive(Debug, Clone)]
pub struct FaultEngine {
    profile: Profile,
}

impl FaultEngine {
    pub fn new(profile: Profile) -> Self {
        FaultEngine { profile }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The decision for one request: a pure function of the profile and `facts`.
    pub fn decide(&self, facts: &RequestFacts) -> Decision {
        let seed = self.profile.seed;
        let mut decision = Decision::default();
        if let Some(latency) = &self.profile.latency {
            let mut stream = Stream::new(seed, facts.identity, facts.attempt, DEFAULT_LATENCY_SALT);
            decision.latency_before += latency.sample(&mut stream);
        }
        for (index, rule) in self.profile.rules.iter().enumerate() {
            let is_fault = matches!(rule.action, Action::Fault(_));
            if (is_fault && decision.fault.is_some()) || !rule.applies(facts) {
                continue;
            }
            let mut stream = Stream::new(seed, facts.identity, facts.attempt, index as u64);
            if stream.next_f64() >= rule.probability {
                continue;
            }
            match &rule.action {
                Action::Latency {
                    when: When::BeforeCommit,
                    latency,
                } => {
                    decision.latency_before += latency.sample(&mut stream);
                }
                Action::Latency {
                    when: When::AfterCommit,
                    latency,
                } => {
                    decision.latency_after += latency.sample(&mut stream);
                }
                Action::Fault(fault) => {
                    decision.fault = Some(fault.clone());
                    decision.rule = Some(index);
                }
            }
        }
        decision
    }
}

impl Rule {
    /// Whether the rule may act on this request (before its roll): attempt, window, match.
    pub fn applies(&self, facts: &RequestFacts) -> bool {
        self.first_attempts.is_none_or(|n| facts.attempt <= n)
            && self.window.is_none_or(|w| w.contains(facts.since_active))
            && self.matches.matches(facts)
    }
}

impl Window {
    /// `start <= since_active < start + duration`.
    pub fn contains(&self, since_active: Duration) -> bool {
        since_active >= self.start
            && self
                .duration
                .is_none_or(|d| since_active < self.start.saturating_add(d))
    }
}

impl Match {
    /// Every given field matches (methods case-insensitively; a path ending in `*` as a
    /// prefix; a request without an amount or payment method fails those fields).
    pub fn matches(&self, facts: &RequestFacts) -> bool {
        let method = self
            .method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(facts.method));
        let path = self.path.as_deref().is_none_or(|p| match p.strip_suffix('*') {
            Some(prefix) => facts.path.starts_with(prefix),
            None => facts.path == p,
        });
        let amount = self.amount.is_none_or(|r| {
            facts
                .amount
                .is_some_and(|a| r.min.is_none_or(|min| a >= min) && r.max.is_none_or(|max| a <= max))
        });
        let pm = self
            .payment_method
            .as_deref()
            .is_none_or(|pm| facts.payment_method == Some(pm));
        let metadata = self.metadata.iter().all(|(k, v)| facts.metadata.get(k) == Some(v));
        method && path && amount && pm && metadata
    }
}

/// Salts webhook rules' streams apart from request rules'.
const WEBHOOK_SALT: u64 = 0x7765_6268_6f6f_6b00;

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

impl WebhookRule {
    /// Whether the rule may act on this delivery attempt (before its roll).
    pub fn applies(&self, facts: &DeliveryFacts) -> bool {
        self.first_attempts.is_none_or(|n| facts.attempt <= n)
            && self.event.as_deref().is_none_or(|p| match p.strip_suffix('*') {
                Some(prefix) => facts.event_type.starts_with(prefix),
                None => facts.event_type == p,
            })
    }
}

#[cfg(test)]
mod tests;
