//! The provider's own writes: changes no client asks for, run as the operation of an
//! endpoint of fauxpay's own, without faults (no client is there to meet them) or
//! idempotency, and logged with a data dir so that recovery runs them again. Today: the
//! expiry of Checkout Sessions whose `expires_at` has passed.

use std::sync::Arc;

use crate::app::Provider;
use crate::durable::commit::{execute_logged, Logged, Written};
use crate::fault_injection::attempt::{Attempt, KeyKind};
use crate::resources::checkout_sessions::routes::LAPSE;
use crate::resources::endpoint::Call;
use crate::state::clock::now_unix;
use crate::stripe::ids::{ApiKey, RequestId};
use crate::stripe::params::Params;

/// The provider's time in Unix seconds: the wall clock, plus how far the provider's
/// clock was moved forward (`POST /__fauxpay/clock`), so a test can cross an
/// `expires_at` without waiting.
pub fn provider_now(app: &Provider) -> i64 {
    now_unix().saturating_add(app.clock.offset().as_secs() as i64)
}

/// Expires every open Checkout Session due at the provider's time
/// (`checkout.session.expired` for each); says how many.
pub fn expire_due_sessions(app: &Arc<Provider>) -> usize {
    let now = provider_now(app);
    let Ok(params) = Params::from_form(format!("now={now}").as_bytes()) else {
        return 0;
    };
    let api_key = ApiKey::none();
    app.payments
        .sessions_due(now)
        .into_iter()
        .filter(|id| {
            let id = id.to_string();
            let request_id = RequestId::generate();
            let attempt = Attempt {
                key: KeyKind::CheckoutPage,
                ..Attempt::plain(request_id, None)
            };
            let call = Call {
                id: &id,
                sub: "",
                params: &params,
                attempt: &attempt,
            };
            let written = Written {
                request_id,
                api_key: &api_key,
                params: &params,
            };
            let path = LAPSE.path.replace("{id}", &id);
            let logged = Logged {
                injected_status: None,
                counted: None,
                fingerprint: None,
            };
            execute_logged(app, &written, &path, &LAPSE, &call, logged).is_ok()
        })
        .count()
}
