//! The durable state of the idempotent merchant behind one trait: key records and orders.
//!
//! [`Store`] has two implementations: `memory_store` (the embedded default, used by the
//! demo and most tests) and `postgres_store` (tables created by idempotent migrations at
//! start-up). Both give the same guarantees: a key record is created at most once per key
//! (a unique constraint), a processed webhook event at most once per event id, an order
//! row at most once per order id, and an order is only
//! ever replaced by a compare-and-set on its version and status — the store holds no
//! business rules beyond that; the state machine lives in `order`.

use async_trait::async_trait;

use super::idempotency_record::{Fingerprint, IdempotencyKey, KeyBegin, KeyRecord, StoredReply};
use super::order::{Order, OrderId};
use super::webhook::EventRecord;

/// A storage failure. Every one is retryable from the client's point of view (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("the store holds a row it cannot read: {0}")]
    Corrupt(String),
}

/// What a store did with a conditional write ([`Store::write_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedWrite {
    /// The row still had the expected version: the new row is stored.
    Applied,
    /// The row had moved on (or is gone): nothing was written.
    Fenced,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `memory` or `postgres`.
    fn kind(&self) -> &'static str;

    /// Succeeds when the store can serve requests.
    async fn ping(&self) -> Result<(), StoreError>;

    /// The key's record, expired or not.
    async fn key(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, StoreError>;

    /// Stores `record` unless a live record exists for its key; an expired one is replaced.
    async fn begin_key(&self, record: &KeyRecord, now_ms: i64) -> Result<KeyBegin, StoreError>;

    /// Stores the final reply of the key's request (only into a record with that
    /// fingerprint and no reply yet).
    async fn complete_key(
        &self,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        reply: &StoredReply,
    ) -> Result<(), StoreError>;

    /// Deletes key records and processed-event records expired at `now_ms`; returns how many.
    async fn prune_keys(&self, now_ms: i64) -> Result<u64, StoreError>;

    /// Records a processed webhook event under a unique constraint on its id: `true` the
    /// first time, `false` when the id is already recorded (a redelivery).
    async fn record_event(&self, event: &EventRecord) -> Result<bool, StoreError>;

    /// Stores `order` unless an order with its id exists; returns the stored order.
    async fn create_order(&self, order: &Order) -> Result<Order, StoreError>;

    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError>;

    /// Replaces the stored order with `next` only if it still has `expected`'s version
    /// and status.
    async fn write_order(&self, expected: &Order, next: &Order) -> Result<FencedWrite, StoreError>;

    /// Orders needing the reconciler: `reconciling` ones, and `processing` ones whose
    /// lease lapsed at `now_ms`; at most `limit`, oldest change first.
    async fn orders_to_reconcile(&self, now_ms: i64, limit: usize) -> Result<Vec<Order>, StoreError>;
}
