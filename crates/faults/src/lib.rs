//! Fault injection, pure: the fault-profile schema, its validation with one clear line per
//! mistake, and the deterministic engine that decides which fault acts on a request.
//!
//! Nothing here knows HTTP or tokio. A [`Profile`] is parsed from TOML (or JSON) by
//! [`parse_profile`], which reports every mistake as `file:line: field: what was expected`;
//! a [`FaultEngine`] built from it turns [`RequestFacts`] (identity, attempt, endpoint,
//! amount, …) into a [`Decision`]: latency before and after the commit plus at most one
//! [`Fault`]; [`FaultEngine::decide_delivery`] does the same for a webhook delivery attempt
//! (the `[[webhooks]]` tables: [`WebhookRule`]). Each decision is a pure function of the profile's seed, the request's
//! identity, its attempt number and the rule, so the same seed gives the same faults under
//! any concurrency. Requests may also force a fault ([`parse_forced`] for the
//! `Fauxpay-Fault` header, [`forced_by_payment_method`] for `pm_fault_…` payment methods),
//! and [`bundled`] holds the ready profiles of `fault-profiles/`. Code that would write
//! profiles or headers as text uses the typed builders instead: [`Profile::builder`] with
//! [`Rule::drop_response`] and friends (checked by the parser itself), [`ForcedFault`] and
//! [`Fault::header_value`]; [`Profile::to_json`] gives the text back.

mod builder;
pub mod bundled;
mod checker;
mod engine;
mod error;
mod fault;
mod forced;
mod parse;
mod profile;
mod sample;
mod tree;
mod webhook;

pub use builder::{ms, secs, ForcedFault, ProfileBuilder, RuleBuilder, Timed, Untimed};
pub use engine::{Decision, DeliveryDecision, DeliveryFacts, FaultEngine, RequestFacts};
pub use error::{Diagnostic, ProfileError};
pub use fault::{Fault, FaultKind, When};
pub use forced::{
    forced_by_payment_method, parse_forced, FORCED_PAYMENT_METHODS, MAX_FORCED_HEADER_BYTES, MAX_FORCED_ITEMS,
};
pub use parse::{parse_profile, parse_profile_json, parse_profile_text};
pub use profile::{
    Action, AmountRange, DeliveryFault, Distribution, Forgery, Latency, Match, Profile, Rule, WebhookRule, Window,
    MAX_COPIES as MAX_WEBHOOK_COPIES, WEBHOOK_KINDS,
};
