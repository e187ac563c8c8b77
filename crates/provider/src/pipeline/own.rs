//! The provider's own writes: changes no client asks for, run through the pipeline as
//! a request without a key would be (logged with a data dir, so that recovery runs them
//! again; journaled; their events published). Today: the expiry of Checkout Sessions
//! whose `expires_at` has passed.

use std::sync::Arc;

use super::{run, Delivery, Request};
use crate::app::Provider;
use crate::resources::checkout_sessions::routes::LAPSE;
use crate::resources::endpoint::PathIds;
use crate::state::clock::now_unix;
use crate::stripe::ids::{ApiKey, RequestId};
use crate::stripe::params::Params;

/// The provider's time in Unix seconds: the wall clock, plus how far the provider's
/// clock was moved forward (`POST /__fauxpay/clock`), so a test can cross an
/// `expires_at` without waiting.
pub fn provider_now(app: &Provider) -> i64 {
    now_unix().saturating_add(app.clock.offset().as_secs() as i64)
}

/// Expires every open Checkout Session whose `expires_at` has passed
/// (`checkout.session.expired` for each); says how many.
pub async fn expire_due_sessions(app: &Arc<Provider>) -> usize {
    let now = provider_now(app);
    let due = app.payments.sessions_due(now);
    let mut expired = 0;
    for id in due {
        let id = id.to_string();
        let params = match Params::from_form(format!("now={now}").as_bytes()) {
            Ok(p) => p,
            Err(_) => continue,
        };
        let request = Request {
            request_id: RequestId::generate(),
            api_key: ApiKey::none(),
            verb: LAPSE.verb,
            path: LAPSE.path.replace("{id}", &id),
            idempotency_key: None,
            params,
            forced_fault: None,
            origin: None,
        };
        if let Delivery::Send(answer) = run(app, request, &LAPSE, PathIds { id: &id, sub: "" }).await {
            if answer.status == 200 {
                expired += 1;
            }
        }
    }
    expired
}
