//! Why a merchant could not start or keep serving.
//!
//! Request-time failures never surface here: they become HTTP answers (a 503 for a store
//! or lock outage, a 502/504 for the provider). [`MerchantError`] is for the life cycle:
//! a bad configuration, a database or Redis unreachable at start-up (the schema cannot be
//! migrated, the lock cannot be checked), a port that cannot be bound.

use super::lock::LockError;
use super::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum MerchantError {
    #[error("invalid merchant configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("cannot build the provider client: {0}")]
    Client(String),
    #[error("merchant server: {0}")]
    Io(#[from] std::io::Error),
}
