//! The operation itself, as every path runs it (a request, recovery's replay of the
//! log): Stripe's request validation, the endpoint's rules, and the expansion of the
//! reply; for a publishable key, its `client_secret` check before and what it may see
//! after. Nothing here knows faults, idempotency keys or the data dir.

use crate::app::Provider;
use crate::error::ApiError;
use crate::fault_injection::attempt::KeyKind;
use crate::reply::Reply;
use crate::resources::client_secret::as_seen_by_publishable_key;
use crate::resources::endpoint::{Call, Endpoint, Publishable};
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
    let browser = call.attempt.key == KeyKind::Publishable;
    if let (true, Publishable::WithClientSecret(secured)) = (browser, endpoint.publishable) {
        app.payments.check_client_secret(secured, call.id, call.params)?;
    }
    let result = Expansion::plan(endpoint.verb, endpoint.path, call.params).and_then(|expansion| {
        let reply = (endpoint.operation)(&app.payments, call)?;
        Ok(expansion.apply(&app.payments, reply))
    });
    if !browser {
        return result;
    }
    // What a publishable key sees of the intents it reaches (answered or in an error).
    match result {
        Ok(reply) => {
            let mut json = reply.json();
            as_seen_by_publishable_key(&mut json);
            Ok(Reply::Json(Box::new(json)))
        }
        Err(mut e) => {
            for (_, v) in &mut e.extra {
                as_seen_by_publishable_key(v);
            }
            Err(e)
        }
    }
}

/// The HTTP status an operation's result answers (before any fault replaces it).
pub fn status_of(result: &Result<Reply, ApiError>) -> u16 {
    match result {
        Ok(_) => 200,
        Err(e) => e.status.code(),
    }
}
