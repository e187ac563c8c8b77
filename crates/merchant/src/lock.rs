//! Per-order locks with an owner token and an expiry: coordination, not correctness.
//!
//! A lock keeps two requests for one order from working at the same time, which keeps
//! the provider and the database calm; it guarantees nothing on its own, since it expires
//! (see `fencing` for what does). Each acquisition gets a random [`LockToken`], and release
//! deletes the lock only if it still holds that token, so a worker whose lock expired can
//! never release its successor's. [`MemoryLock`] serves one process; `redis_lock` serves
//! many (`SET key token NX PX ttl`, compare-and-delete in Lua).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::clock::{ms, SharedClock, SystemClock};
use super::order::OrderId;

/// A lock owner's random token (128 bits, hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockToken(String);

impl LockToken {
    pub fn random() -> Self {
        Self(format!("{:032x}", rand::random::<u128>()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A held lock: its name and the token that proves ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockLease {
    pub name: String,
    pub token: LockToken,
}

/// The lock service cannot be reached: the request is rejected with a retryable 503.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the lock service is unavailable: {0}")]
pub struct LockError(pub String);

#[async_trait]
pub trait OrderLock: Send + Sync + 'static {
    /// `memory` or `redis`.
    fn kind(&self) -> &'static str;

    /// Takes the order's lock for `ttl`; `None` when another owner holds it.
    async fn acquire(&self, order: &OrderId, ttl: Duration) -> Result<Option<LockLease>, LockError>;

    /// Releases `lease` if it still owns the lock; returns whether it did.
    async fn release(&self, lease: &LockLease) -> Result<bool, LockError>;

    async fn ping(&self) -> Result<(), LockError>;
}

/// The lock name of an order (a Redis key suffix).
pub fn lock_name(order: &OrderId) -> String {
    format!("lock:order:{order}")
}

/// Locks in process memory, expiring by the merchant's clock (the one its claim leases
/// use).
pub struct MemoryLock {
    /// Lock name → owner and expiry (Unix ms).
    held: Mutex<HashMap<String, (LockToken, i64)>>,
    clock: SharedClock,
}

impl Default for MemoryLock {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryLock {
    /// Locks expiring by the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock::shared())
    }

    pub fn with_clock(clock: SharedClock) -> Self {
        Self {
            held: Mutex::new(HashMap::new()),
            clock,
        }
    }

    /// Above this many entries, expired ones are swept on acquire.
    const SWEEP_ABOVE: usize = 4096;
}

#[async_trait]
impl OrderLock for MemoryLock {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn acquire(&self, order: &OrderId, ttl: Duration) -> Result<Option<LockLease>, LockError> {
        let name = lock_name(order);
        let now = self.clock.now_ms();
        let mut held = self.held.lock();
        if held.len() > Self::SWEEP_ABOVE {
            held.retain(|_, (_, until)| *until > now);
        }
        if matches!(held.get(&name), Some((_, until)) if *until > now) {
            return Ok(None);
        }
        let token = LockToken::random();
        // At least 1 ms, as on Redis (`PX` refuses 0).
        held.insert(name.clone(), (token.clone(), now.saturating_add(ms(ttl).max(1))));
        Ok(Some(LockLease { name, token }))
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, LockError> {
        let mut held = self.held.lock();
        if matches!(held.get(&lease.name), Some((token, _)) if *token == lease.token) {
            held.remove(&lease.name);
            return Ok(true);
        }
        Ok(false)
    }

    async fn ping(&self) -> Result<(), LockError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;

    #[tokio::test]
    async fn one_owner_at_a_time_and_only_the_owner_releases() {
        let lock = MemoryLock::new();
        let order = OrderId::parse("o1").unwrap();
        let a = lock.acquire(&order, Duration::from_secs(10)).await.unwrap().unwrap();
        assert!(lock.acquire(&order, Duration::from_secs(10)).await.unwrap().is_none());
        let forged = LockLease {
            name: a.name.clone(),
            token: LockToken::random(),
        };
        assert!(!lock.release(&forged).await.unwrap());
        assert!(lock.release(&a).await.unwrap());
        assert!(lock.acquire(&order, Duration::from_secs(10)).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn an_expired_lock_is_taken_over_and_the_old_owner_cannot_release_it() {
        let clock = Arc::new(ManualClock::new(0));
        let lock = MemoryLock::with_clock(clock.clone());
        let order = OrderId::parse("o1").unwrap();
        let stale = lock.acquire(&order, Duration::from_millis(1)).await.unwrap().unwrap();
        assert!(lock.acquire(&order, Duration::from_secs(10)).await.unwrap().is_none());
        clock.advance(Duration::from_millis(5));
        let fresh = lock.acquire(&order, Duration::from_secs(10)).await.unwrap().unwrap();
        assert!(!lock.release(&stale).await.unwrap());
        assert!(lock.acquire(&order, Duration::from_secs(10)).await.unwrap().is_none());
        assert!(lock.release(&fresh).await.unwrap());
    }
}
