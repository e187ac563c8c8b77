//! Webhook delivery: every published event is POSTed, signed as Stripe signs it
//! (`signature`), to each webhook endpoint that wants it, off the request path, at least
//! once (`delivery`): a queue per endpoint with limited concurrency, retries on a
//! schedule after a failure or a timeout, `pending_webhooks` kept right, a delivery log
//! (`log`), resend, drain (wait until nothing is queued, in flight or waiting to retry),
//! metrics, and the delivery faults of the active fault profile (`[[webhooks]]`:
//! duplicate, delay, lose_ack, drop, bad_signature), decided per event, endpoint and
//! attempt.

pub mod delivery;
pub mod log;
pub mod signature;

pub use delivery::{Counts, Settings, Webhooks};
pub use log::DeliveryRecord;
