//! Idempotency keys, exactly as Stripe honours them, in one home: the key and how its
//! header is read (`key`), the store of claimed keys and their stored responses
//! (`store`), admission (`admission`: what a request's key says when it arrives, and
//! what it stores once the request has run), and the replay lane (`lane`: what a retry's
//! bytes told the pipeline before, so a byte-identical one is not parsed again). The
//! pipeline calls admission; the HTTP edge reads the header through
//! [`key::IdempotencyKey::from_header`] and asks the lane before it parses a body.

pub mod admission;
pub mod key;
pub mod lane;
pub mod store;

pub use key::{IdempotencyKey, Mode};
pub use store::{Claim, Fingerprint, IdempotencyStore, StoredResponse};
