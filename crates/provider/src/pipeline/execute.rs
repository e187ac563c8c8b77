//! The operation itself, as every path runs it (a request, recovery's replay of the
//! log): Stripe's request validation, the endpoint's rules, and the expansion of the
//! reply. Nothing here knows faults, keys or the data dir.

use crate::app::Provider;
use crate::error::ApiError;
use crate::reply::Reply;
use crate::resources::endpoint::{Call, Endpoint};
use crate::stripe::expand::Expansion;
use crate::stripe::spec::validate::validate;

/// Stripe's request validation (a parameter the spec refuses, or an expansion Stripe
/// would refuse, is a validation failure like the operation's own), the operation, and
/// the expansion of its reply (expanded before it is stored, so a replay answers what
/// was sent). An error with `executed` unset means nothing ran.
pub fn execute(app: &Provider, endpoint: &Endpoint, call: &Call<'_>) -> Result<Reply, ApiError> {
    validate(endpoint, call.params).and_then(|()| execute_validated(app, endpoint, call))
}

/// [`execute`] for a request that passed validation before (recovery runs again only
/// requests that did).
pub fn execute_validated(app: &Provider, endpoint: &Endpoint, call: &Call<'_>) -> Result<Reply, ApiError> {
    Expansion::plan(endpoint.verb, endpoint.path, call.params).and_then(|expansion| {
        let reply = (endpoint.operation)(&app.payments, call)?;
        Ok(expansion.apply(&app.payments, reply))
    })
}

/// The HTTP status an operation's result answers (before any fault replaces it).
pub fn status_of(result: &Result<Reply, ApiError>) -> u16 {
    match result {
        Ok(_) => 200,
        Err(e) => e.status.code(),
    }
}
