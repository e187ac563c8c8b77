//! Helpers shared by the provider's unit tests: payment state with the default
//! settings, and form bodies as `Params`.

use crate::fault_injection::attempt::Attempt;
use crate::state::payments::{CorrelationSource, DuplicatePolicy, Payments};
use crate::stripe::ids::RequestId;
use crate::stripe::params::Params;

/// Payment state correlating by `metadata.order_id`, charging duplicates as `policy` says.
pub fn payments_with(policy: DuplicatePolicy) -> Payments {
    Payments::new(
        policy,
        CorrelationSource::parse("metadata.order_id").expect("a valid correlation path"),
    )
}

/// Payment state with the default duplicate policy (`allow`).
pub fn payments() -> Payments {
    payments_with(DuplicatePolicy::Allow)
}

/// A form body (bracket notation) as parameters.
pub fn form(s: &str) -> Params {
    Params::from_form(s.as_bytes()).expect("a valid form body")
}

/// A plain attempt (a fresh request id, no key, no fault).
pub fn attempt() -> Attempt {
    Attempt::plain(RequestId::generate(), None)
}
