//! Idempotency keys, exactly as Stripe honours them, in one home: the key and how its
//! header is read (`key`), the store of claimed keys and their stored responses
//! (`store`), and admission (`admission`: what a request's key says when it arrives, and
//! what it stores once the request has run). The pipeline calls admission; the HTTP
//! edge only reads the header through [`key::IdempotencyKey::from_header`].

pub mod admission;
pub mod key;
pub mod store;

pub use key::{IdempotencyKey, Mode};
pub use store::{Claim, Fingerprint, IdempotencyStore, StoredResponse};
