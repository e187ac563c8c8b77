//! Sharded state: N independently locked parts chosen by a key's hash.
//!
//! The provider keeps no global lock on its hot path: every table (objects, idempotency
//! records, the ledger) is split into [`SHARDS`] parts, each behind its own mutex on its
//! own cache line (two cores locking neighbouring shards do not take each other's line),
//! and a request locks only the part its key hashes to.

use std::hash::{BuildHasher, Hash};

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};

/// Number of shards per table; a power of two well above the core count.
pub const SHARDS: usize = 64;

/// A fast seeded hasher (foldhash), for the shards and the maps inside them: keys are
/// client-chosen strings and ids, hashed several times per request.
pub type Hasher = foldhash::fast::RandomState;

/// Each shard's share of `n` items, with room for the hash's uneven spread: what each
/// shard reserves when a caller knows about how many are coming (recovery).
pub fn per_shard(n: usize) -> usize {
    n.div_ceil(SHARDS) + n.div_ceil(SHARDS * 8)
}

/// A `HashMap` with the fast hasher.
pub type FastMap<K, V> = std::collections::HashMap<K, V, Hasher>;

/// `SHARDS` values of `T`, each behind its own lock.
pub struct Sharded<T> {
    parts: Box<[CachePadded<Mutex<T>>]>,
    hasher: Hasher,
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        Self {
            parts: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(T::default())))
                .collect(),
            hasher: Default::default(),
        }
    }
}

impl<T> Sharded<T> {
    /// Locks the shard that `key` belongs to.
    pub fn lock<K: Hash + ?Sized>(&self, key: &K) -> MutexGuard<'_, T> {
        let i = (self.hasher.hash_one(key) as usize) % self.parts.len();
        self.parts[i].lock()
    }

    /// Locks shard `i % SHARDS` (for round-robin use, such as a ring split across shards).
    pub fn lock_index(&self, i: usize) -> MutexGuard<'_, T> {
        self.parts[i % self.parts.len()].lock()
    }

    /// Every shard in turn (for scans, summaries and resets; never on the hot path).
    pub fn iter(&self) -> impl Iterator<Item = &Mutex<T>> {
        self.parts.iter().map(|p| &**p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_always_maps_to_one_shard() {
        let s: Sharded<Vec<u32>> = Sharded::default();
        for i in 0..100 {
            s.lock("order-1").push(i);
        }
        assert_eq!(s.lock("order-1").len(), 100);
        assert_eq!(s.iter().map(|m| m.lock().len()).sum::<usize>(), 100);
    }
}
