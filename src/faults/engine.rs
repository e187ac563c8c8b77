//! The deterministic fault engine: given a request's facts, which latency and which fault
//! act on it. Rules are tried in order; each rule's roll and latency samples come from a
//! [`Stream`] of (seed, identity, attempt, rule index) alone, so a decision never depends
//! on call order, time of arrival (beyond the profile's own windows) or concurrency.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::fault::{ser_duration, short_duration, Fault, When};
use super::profile::{Action, Match, Profile, Rule, Window};
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

#[cfg(test)]
mod tests;
