//! The embedded [`Store`]: key records and orders in process memory.
//!
//! The default store of the idempotent merchant (and of the demo): no service to run,
//! the same semantics as PostgreSQL within one process. Each map sits behind its own
//! mutex and every operation is one short critical section, so "insert if absent" and
//! "compare-and-set on version" are atomic exactly as the SQL statements are. Nothing
//! survives a restart.

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::idempotency_record::{Fingerprint, IdempotencyKey, KeyBegin, KeyRecord, StoredReply};
use super::order::{Order, OrderId, OrderStatus};
use super::store::{FencedWrite, Store, StoreError};
use super::webhook::{EventId, EventRecord};

#[derive(Default)]
pub struct MemoryStore {
    keys: Mutex<HashMap<IdempotencyKey, KeyRecord>>,
    orders: Mutex<HashMap<OrderId, Order>>,
    /// Processed webhook events: id → when the record expires (Unix ms).
    events: Mutex<HashMap<EventId, i64>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn key(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, StoreError> {
        Ok(self.keys.lock().get(key).cloned())
    }

    async fn begin_key(&self, record: &KeyRecord, now_ms: i64) -> Result<KeyBegin, StoreError> {
        let mut keys = self.keys.lock();
        match keys.get(&record.key) {
            Some(existing) if !existing.is_expired(now_ms) => Ok(KeyBegin::Existing(existing.clone())),
            _ => {
                keys.insert(record.key.clone(), record.clone());
                Ok(KeyBegin::Fresh)
            }
        }
    }

    async fn complete_key(
        &self,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        reply: &StoredReply,
    ) -> Result<(), StoreError> {
        if let Some(rec) = self.keys.lock().get_mut(key) {
            if rec.fingerprint == *fingerprint && rec.reply.is_none() {
                rec.reply = Some(reply.clone());
            }
        }
        Ok(())
    }

    async fn prune_keys(&self, now_ms: i64) -> Result<u64, StoreError> {
        let mut keys = self.keys.lock();
        let before = keys.len();
        keys.retain(|_, rec| !rec.is_expired(now_ms));
        let pruned = before - keys.len();
        drop(keys);
        let mut events = self.events.lock();
        let before = events.len();
        events.retain(|_, expires_ms| *expires_ms > now_ms);
        Ok((pruned + before - events.len()) as u64)
    }

    async fn record_event(&self, event: &EventRecord) -> Result<bool, StoreError> {
        let mut events = self.events.lock();
        match events.get(&event.id) {
            Some(_) => Ok(false),
            None => {
                events.insert(event.id.clone(), event.expires_ms);
                Ok(true)
            }
        }
    }

    async fn create_order(&self, order: &Order) -> Result<Order, StoreError> {
        Ok(self
            .orders
            .lock()
            .entry(order.id.clone())
            .or_insert_with(|| order.clone())
            .clone())
    }

    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        Ok(self.orders.lock().get(id).cloned())
    }

    async fn write_order(&self, expected: &Order, next: &Order) -> Result<FencedWrite, StoreError> {
        let mut orders = self.orders.lock();
        match orders.get_mut(&expected.id) {
            Some(current) if current.version == expected.version && current.status == expected.status => {
                *current = next.clone();
                Ok(FencedWrite::Applied)
            }
            _ => Ok(FencedWrite::Fenced),
        }
    }

    async fn orders_to_reconcile(&self, now_ms: i64, limit: usize) -> Result<Vec<Order>, StoreError> {
        let orders = self.orders.lock();
        let mut due: Vec<Order> = orders
            .values()
            .filter(|o| o.status == OrderStatus::Reconciling || o.lease_expired(now_ms))
            .cloned()
            .collect();
        due.sort_by_key(|o| o.updated_ms);
        due.truncate(limit);
        Ok(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::{Amount, Currency, PaymentIntentId, PaymentMethod, Transition};

    fn order(id: &str) -> Order {
        Order::new(
            OrderId::parse(id).unwrap(),
            Amount::new(100).unwrap(),
            Currency::parse("usd").unwrap(),
            PaymentMethod::parse("pm_card_visa").unwrap(),
            0,
        )
    }

    fn record(key: &str, expires_ms: i64) -> KeyRecord {
        KeyRecord {
            key: IdempotencyKey::parse(key).unwrap(),
            order_id: OrderId::parse("o").unwrap(),
            fingerprint: Fingerprint::from_hex("ab".into()),
            reply: None,
            created_ms: 0,
            expires_ms,
        }
    }

    #[tokio::test]
    async fn a_key_is_recorded_once_until_it_expires() {
        let store = MemoryStore::new();
        assert_eq!(store.begin_key(&record("k", 10), 0).await.unwrap(), KeyBegin::Fresh);
        assert!(
            matches!(store.begin_key(&record("k", 20), 5).await.unwrap(), KeyBegin::Existing(r) if r.expires_ms == 10)
        );
        assert_eq!(store.begin_key(&record("k", 30), 10).await.unwrap(), KeyBegin::Fresh);
        store.begin_key(&record("old", 3), 0).await.unwrap();
        assert_eq!(store.prune_keys(11).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn a_stale_version_writes_nothing() {
        let store = MemoryStore::new();
        let o = store.create_order(&order("o1")).await.unwrap();
        let claim = Transition::Claim {
            payment_method: o.payment_method.clone(),
            lease_until_ms: 50,
        };
        let claimed = o.apply(claim.clone(), 1).unwrap();
        assert_eq!(store.write_order(&o, &claimed).await.unwrap(), FencedWrite::Applied);
        // A second worker that read the same version loses.
        let rival = o.apply(claim, 2).unwrap();
        assert_eq!(store.write_order(&o, &rival).await.unwrap(), FencedWrite::Fenced);
        let paid = claimed
            .apply(
                Transition::Pay {
                    payment_intent: PaymentIntentId::new("pi"),
                },
                3,
            )
            .unwrap();
        assert_eq!(store.write_order(&claimed, &paid).await.unwrap(), FencedWrite::Applied);
        assert_eq!(store.order(&o.id).await.unwrap().unwrap(), paid);
        // create_order never overwrites.
        assert_eq!(store.create_order(&order("o1")).await.unwrap(), paid);
    }

    #[tokio::test]
    async fn an_event_id_is_recorded_once_until_it_expires() {
        let store = MemoryStore::new();
        let rec = EventRecord {
            id: EventId::parse("evt_1").unwrap(),
            kind: "payment_intent.succeeded".into(),
            order_id: OrderId::parse("o").unwrap(),
            received_ms: 0,
            expires_ms: 10,
        };
        assert!(store.record_event(&rec).await.unwrap());
        assert!(!store.record_event(&rec).await.unwrap());
        assert_eq!(store.prune_keys(9).await.unwrap(), 0);
        assert_eq!(store.prune_keys(10).await.unwrap(), 1);
        assert!(store.record_event(&rec).await.unwrap());
    }

    #[tokio::test]
    async fn reconciling_and_lapsed_orders_are_due() {
        let store = MemoryStore::new();
        let a = store.create_order(&order("a")).await.unwrap();
        let claimed = a
            .apply(
                Transition::Claim {
                    payment_method: a.payment_method.clone(),
                    lease_until_ms: 100,
                },
                1,
            )
            .unwrap();
        store.write_order(&a, &claimed).await.unwrap();
        store.create_order(&order("b")).await.unwrap();
        assert!(store.orders_to_reconcile(99, 10).await.unwrap().is_empty());
        assert_eq!(store.orders_to_reconcile(100, 10).await.unwrap().len(), 1);
    }
}
