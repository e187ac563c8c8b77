//! Typed builders for the code that would otherwise write fault profiles and
//! `Fauxpay-Fault` headers as text (tests, tools), in the spirit of wiremock-rs:
//!
//! ```
//! use fauxpay_faults::{ms, Distribution, Fault, Profile, Rule, When};
//!
//! let profile = Profile::builder("lost-once")
//!     .seed(7)
//!     .rule(Rule::drop_response().after_commit().first_attempts(1))
//!     .rule(Rule::latency(Distribution::fixed(ms(50))).path("/v1/payment_intents").probability(0.3))
//!     .build()?;
//! assert_eq!(profile.rules.len(), 2);
//! assert_eq!(Fault::error(When::AfterCommit, 503).header_value(), "error; status=503; when=after_commit");
//! # Ok::<(), fauxpay_faults::ProfileError>(())
//! ```
//!
//! [`ProfileBuilder::build`] writes the profile as the schema's own document (the JSON that
//! [`Profile::to_json`] gives) and reads it back through the parser: a built profile is
//! exactly the one the same TOML would give, and every mistake is found by the parser's
//! own checks with its own messages (the source reads `Profile::builder("name")`). Kinds
//! that take no `when` build an [`Untimed`] rule, which has no `after_commit()`: that
//! mistake cannot be written. [`ForcedFault`] and [`Fault::header_value`] write header
//! values that [`parse_forced`](super::parse_forced) reads back.

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::time::Duration;

use super::error::ProfileError;
use super::fault::{default_decline_message, Fault, When};
use super::parse::check_tree;
use super::profile::{Action, AmountRange, Distribution, Latency, Match, Profile, Rule, WebhookRule, Window};
use super::tree;

/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `n` seconds.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

impl Profile {
    /// A profile named `name`, with an empty description, seed 0, no latency and no rules
    /// until told otherwise.
    pub fn builder(name: impl Into<String>) -> ProfileBuilder {
        ProfileBuilder {
            profile: Profile {
                name: name.into(),
                description: String::new(),
                seed: 0,
                key_ttl: None,
                latency: None,
                rules: Vec::new(),
                webhooks: Vec::new(),
            },
        }
    }

    /// The profile as JSON in the schema's spelling, which
    /// [`parse_profile_text`](super::parse_profile_text) reads back to an equal profile
    /// (e.g. for `PUT /__fauxpay/profile`).
    pub fn to_json(&self) -> String {
        // Every map key is a string and no field's serializer fails: this cannot error.
        serde_json::to_string(self).expect("a profile serializes to JSON")
    }

    /// The profile as TOML (e.g. for a file given to `fauxpay serve --profile`). Fails only
    /// for values TOML cannot hold, such as a seed above `i64::MAX`, which no valid
    /// profile has.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }
}

/// Builds a [`Profile`]; see the [module docs](self).
#[derive(Debug, Clone)]
#[must_use]
pub struct ProfileBuilder {
    /// Not validated until [`ProfileBuilder::build`].
    profile: Profile,
}

impl ProfileBuilder {
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.profile.description = description.into();
        self
    }

    /// The seed every decision derives from.
    pub fn seed(mut self, seed: u64) -> Self {
        self.profile.seed = seed;
        self
    }

    /// Overrides the provider's idempotency key TTL.
    pub fn key_ttl(mut self, ttl: Duration) -> Self {
        self.profile.key_ttl = Some(ttl);
        self
    }

    /// The default latency, added before the commit to every request.
    pub fn latency(mut self, latency: impl Into<Latency>) -> Self {
        self.profile.latency = Some(latency.into());
        self
    }

    /// Appends a rule (rules are evaluated in order).
    pub fn rule<W>(mut self, rule: RuleBuilder<W>) -> Self {
        self.profile.rules.push(rule.rule);
        self
    }

    /// Appends a webhook delivery fault (`[[webhooks]]`, evaluated in order).
    pub fn webhook(mut self, rule: WebhookRule) -> Self {
        self.profile.webhooks.push(rule);
        self
    }

    /// The validated profile, or every mistake, as the parser reports them.
    pub fn build(self) -> Result<Profile, ProfileError> {
        let source = format!("Profile::builder({:?})", self.profile.name);
        let document = serde_json::to_value(&self.profile)
            .map_err(|e| ProfileError::whole_source(&source, format!("cannot write the profile: {e}")))?;
        check_tree(&source, &tree::from_json_value(document))
    }
}

impl Distribution {
    /// Always `value`.
    pub fn fixed(value: Duration) -> Self {
        Distribution::Fixed { value }
    }

    /// Uniform in `min..=max`.
    pub fn uniform(min: Duration, max: Duration) -> Self {
        Distribution::Uniform { min, max }
    }

    /// Normal; negative samples count as zero.
    pub fn normal(mean: Duration, stddev: Duration) -> Self {
        Distribution::Normal { mean, stddev }
    }

    /// `median * exp(sigma * z)` with `z` standard normal.
    pub fn lognormal(median: Duration, sigma: f64) -> Self {
        Distribution::LogNormal { median, sigma }
    }

    /// This distribution with its samples capped at `cap`.
    pub fn cap(self, cap: Duration) -> Latency {
        Latency {
            distribution: self,
            cap: Some(cap),
        }
    }
}

impl From<Distribution> for Latency {
    /// Uncapped.
    fn from(distribution: Distribution) -> Self {
        Latency {
            distribution,
            cap: None,
        }
    }
}

/// Marks a rule whose kind takes a `when` (latency, drop_response, reset, hang, error).
#[derive(Debug, Clone, Copy)]
pub struct Timed;

/// Marks a rule whose kind has a fixed `when` (rate_limit, decline, slow_body), or whose
/// fault was given whole ([`Rule::fault`]).
#[derive(Debug, Clone, Copy)]
pub struct Untimed;

/// Builds one rule of a [`ProfileBuilder`]; made by [`Rule::drop_response`] and friends.
/// Probability 1, every request, every attempt, always, before the commit, until told
/// otherwise.
#[derive(Debug, Clone)]
#[must_use]
pub struct RuleBuilder<W = Timed> {
    rule: Rule,
    timing: PhantomData<W>,
}

fn rule<W>(action: Action) -> RuleBuilder<W> {
    RuleBuilder {
        rule: Rule {
            action,
            probability: 1.0,
            first_attempts: None,
            matches: Match::default(),
            window: None,
        },
        timing: PhantomData,
    }
}

impl Rule {
    /// Adds a latency sample.
    pub fn latency(latency: impl Into<Latency>) -> RuleBuilder<Timed> {
        rule(Action::Latency {
            when: When::BeforeCommit,
            latency: latency.into(),
        })
    }

    /// Closes the connection without a response byte.
    pub fn drop_response() -> RuleBuilder<Timed> {
        rule(Action::Fault(Fault::drop_response(When::BeforeCommit)))
    }

    /// Resets the connection.
    pub fn reset() -> RuleBuilder<Timed> {
        rule(Action::Fault(Fault::reset(When::BeforeCommit)))
    }

    /// Holds the request with no response for `hang`.
    pub fn hang(hang: Duration) -> RuleBuilder<Timed> {
        rule(Action::Fault(Fault::hang(When::BeforeCommit, hang)))
    }

    /// Answers a 5xx: 500, 502, 503 or 504.
    pub fn error(status: u16) -> RuleBuilder<Timed> {
        rule(Action::Fault(Fault::error(When::BeforeCommit, status)))
    }

    /// Answers 429 with `Retry-After` (the schema's default is 1s).
    pub fn rate_limit(retry_after: Duration) -> RuleBuilder<Untimed> {
        rule(Action::Fault(Fault::rate_limit(retry_after)))
    }

    /// A `card_declined` card error with this `decline_code` and Stripe's message for it
    /// (for another `code` or message: [`Rule::fault`] with [`Fault::decline`]).
    pub fn decline(decline_code: &str) -> RuleBuilder<Untimed> {
        rule(Action::Fault(Fault::decline("card_declined", decline_code, None)))
    }

    /// Dribbles the response over `duration`.
    pub fn slow_body(duration: Duration) -> RuleBuilder<Untimed> {
        rule(Action::Fault(Fault::slow_body(duration)))
    }

    /// Any fault, exactly as given (its `when` included).
    pub fn fault(fault: Fault) -> RuleBuilder<Untimed> {
        rule(Action::Fault(fault))
    }
}

impl RuleBuilder<Timed> {
    pub fn when(mut self, when: When) -> Self {
        match &mut self.rule.action {
            Action::Latency { when: w, .. }
            | Action::Fault(
                Fault::DropResponse { when: w }
                | Fault::Reset { when: w }
                | Fault::Hang { when: w, .. }
                | Fault::Error { when: w, .. },
            ) => *w = when,
            // Only the constructors above make a `Timed` rule, each of a kind with a `when`.
            Action::Fault(_) => {}
        }
        self
    }

    /// Acts after the charge committed: the money moved, the client is left in doubt.
    pub fn after_commit(self) -> Self {
        self.when(When::AfterCommit)
    }

    /// Acts before the charge commits (the default): nothing charged, nothing stored.
    pub fn before_commit(self) -> Self {
        self.when(When::BeforeCommit)
    }
}

impl<W> RuleBuilder<W> {
    /// In `0..=1`.
    pub fn probability(mut self, probability: f64) -> Self {
        self.rule.probability = probability;
        self
    }

    /// Only attempts `1..=n` of a request identity ("fail n times, then succeed").
    pub fn first_attempts(mut self, n: u32) -> Self {
        self.rule.first_attempts = Some(n);
        self
    }

    /// Only this HTTP method (any case).
    pub fn method(mut self, method: &str) -> Self {
        self.rule.matches.method = Some(method.to_string());
        self
    }

    /// Only this path, or the paths starting with it when it ends in `*`.
    pub fn path(mut self, path: &str) -> Self {
        self.rule.matches.path = Some(path.to_string());
        self
    }

    /// Only amounts in this range (`1000..=50_000`, `100_000..`, `..=500`), in the
    /// currency's smallest unit.
    pub fn amount(mut self, range: impl RangeBounds<u64>) -> Self {
        let mut min = match range.start_bound() {
            Bound::Included(&lo) => Some(lo),
            Bound::Excluded(&lo) => Some(lo.saturating_add(1)),
            Bound::Unbounded => None,
        };
        let max = match range.end_bound() {
            Bound::Included(&hi) => Some(hi),
            Bound::Excluded(&hi) => {
                if hi == 0 {
                    // `..0` holds nothing: min 1 and max 0, which the checks refuse.
                    min = Some(min.unwrap_or(0).max(1));
                }
                Some(hi.saturating_sub(1))
            }
            Bound::Unbounded => None,
        };
        self.rule.matches.amount = Some(AmountRange { min, max });
        self
    }

    /// Only this payment method.
    pub fn payment_method(mut self, payment_method: &str) -> Self {
        self.rule.matches.payment_method = Some(payment_method.to_string());
        self
    }

    /// Only requests whose metadata has `key` = `value` (repeat for several keys).
    pub fn metadata(mut self, key: &str, value: &str) -> Self {
        self.rule.matches.metadata.insert(key.to_string(), value.to_string());
        self
    }

    /// Only from `start` after the profile became active, for `duration` (an outage).
    pub fn window(mut self, start: Duration, duration: Duration) -> Self {
        self.rule.window = Some(Window {
            start,
            duration: Some(duration),
        });
        self
    }

    /// Only from `start` after the profile became active, for ever after.
    pub fn window_from(mut self, start: Duration) -> Self {
        self.rule.window = Some(Window { start, duration: None });
        self
    }
}

impl Fault {
    pub fn drop_response(when: When) -> Fault {
        Fault::DropResponse { when }
    }

    pub fn reset(when: When) -> Fault {
        Fault::Reset { when }
    }

    pub fn hang(when: When, hang: Duration) -> Fault {
        Fault::Hang { when, hang }
    }

    pub fn error(when: When, status: u16) -> Fault {
        Fault::Error { when, status }
    }

    pub fn rate_limit(retry_after: Duration) -> Fault {
        Fault::RateLimit { retry_after }
    }

    pub fn slow_body(duration: Duration) -> Fault {
        Fault::SlowBody { duration }
    }

    /// This fault as a `Fauxpay-Fault` header value: `error; status=503; when=after_commit`.
    ///
    /// A decline's message is written only when it is not Stripe's default for its code;
    /// a message containing `,` or `;` cannot be carried (the provider refuses the header).
    pub fn header_value(&self) -> String {
        let d = humantime::format_duration;
        match self {
            Fault::DropResponse { when } => format!("drop_response; when={when}"),
            Fault::Reset { when } => format!("reset; when={when}"),
            Fault::Hang { when, hang } => format!("hang; hang={}; when={when}", d(*hang)),
            Fault::Error { when, status } => format!("error; status={status}; when={when}"),
            Fault::RateLimit { retry_after } => format!("rate_limit; retry_after={}", d(*retry_after)),
            Fault::Decline {
                code,
                decline_code,
                message,
            } => {
                let mut s = format!("decline; code={code}; decline_code={decline_code}");
                if message != default_decline_message(code, decline_code) {
                    let _ = write!(s, "; message={message}");
                }
                s
            }
            Fault::SlowBody { duration } => format!("slow_body; duration={}", d(*duration)),
        }
    }
}

/// A `Fauxpay-Fault` header: fixed latencies (they add up) and at most one fault.
///
/// ```
/// use fauxpay_faults::{ms, Fault, ForcedFault, When};
///
/// let header = ForcedFault::from(Fault::reset(When::BeforeCommit)).latency(ms(100), When::BeforeCommit);
/// assert_eq!(header.header_value(), "latency; value=100ms; when=before_commit, reset; when=before_commit");
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct ForcedFault {
    latencies: Vec<(Duration, When)>,
    fault: Option<Fault>,
}

impl ForcedFault {
    /// Nothing forced yet (an empty header value, which the provider refuses).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a fixed latency before or after the commit.
    pub fn latency(mut self, value: Duration, when: When) -> Self {
        self.latencies.push((value, when));
        self
    }

    /// Sets the one fault (replacing any).
    pub fn fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The header value: the latencies, then the fault, separated by `, `.
    pub fn header_value(&self) -> String {
        let latencies = self
            .latencies
            .iter()
            .map(|(value, when)| format!("latency; value={}; when={when}", humantime::format_duration(*value)));
        let fault = self.fault.iter().map(Fault::header_value);
        latencies.chain(fault).collect::<Vec<_>>().join(", ")
    }
}

impl From<Fault> for ForcedFault {
    fn from(fault: Fault) -> Self {
        ForcedFault::new().fault(fault)
    }
}

#[cfg(test)]
mod tests;
