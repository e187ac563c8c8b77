//! Sharded state: N independently locked parts chosen by a key's hash.
//!
//! The provider keeps no global lock on its hot path: every table (objects, idempotency
//! records, the ledger) is split into [`SHARDS`] parts, each behind its own mutex on its
//! own cache line (two cores locking neighbouring shards do not take each other's line),
//! and a request locks only the part its key hashes to.
//!
//! The parts are of unequal sizes, on purpose. A shard's hash table grows when it is 7/8
//! full, and the growth stalls the shard (every key read again, ~1-2 ms for a shard of
//! a million-payment table); 64 equal shards filled alike all reach each size within a few
//! hundred keys of each other, and their stalls came as one: tens of milliseconds in
//! which the provider answered nothing, five tables at once (intents, charges, keys,
//! ledger, attempts: one entry each a payment). Here shard `i` takes a share of the keys
//! that grows geometrically with `i` (the largest twice the smallest), so the shards reach
//! each size at moments spread evenly over a doubling, and each table turns its shares by
//! its own amount, so that two tables filled alike do not stall together either.

use std::hash::{BuildHasher, Hash};
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};

/// Number of shards per table; a power of two well above the core count.
pub const SHARDS: usize = 64;

/// Equal slices of the hashes' range, each given to one shard ([`slices`]).
const SLICES: usize = 1024;

/// A fast seeded hasher (foldhash), for the shards and the maps inside them: keys are
/// client-chosen strings and ids, hashed several times per request.
pub type Hasher = foldhash::fast::RandomState;

/// The shard (before a table's turn) of each slice of the hashes' range: slice `u` of
/// [`SLICES`] goes to `⌊64 · log2(1 + (u + ½) / SLICES)⌋`, so that shard `i` holds a
/// share `2^((i+1)/64) − 2^(i/64)` of the keys: from 11 to 22 slices of 1,024.
fn slices() -> &'static [u8; SLICES] {
    static SLICES_OF: OnceLock<[u8; SLICES]> = OnceLock::new();
    SLICES_OF.get_or_init(|| {
        let mut out = [0u8; SLICES];
        for (u, shard) in out.iter_mut().enumerate() {
            let x = (u as f64 + 0.5) / SLICES as f64;
            *shard = ((SHARDS as f64 * (1.0 + x).log2()) as usize).min(SHARDS - 1) as u8;
        }
        out
    })
}

/// A random group (a shard for [`Sharded::lock_index`]) drawn with the shares
/// [`Sharded::lock`] gives its keys' hashes: for ids that name their own shard (a
/// request's events), so that those shards too grow at moments of their own.
pub fn weighted_group() -> usize {
    usize::from(slices()[rand::random::<u16>() as usize % SLICES])
}

/// How many of the [`SLICES`] go to each shard (before a table's turn).
fn slice_counts() -> &'static [usize; SHARDS] {
    static COUNTS: OnceLock<[usize; SHARDS]> = OnceLock::new();
    COUNTS.get_or_init(|| {
        let mut counts = [0; SHARDS];
        for &shard in slices() {
            counts[shard as usize] += 1;
        }
        counts
    })
}

/// A `HashMap` with the fast hasher.
pub type FastMap<K, V> = std::collections::HashMap<K, V, Hasher>;

/// `SHARDS` values of `T`, each behind its own lock.
pub struct Sharded<T> {
    parts: Box<[CachePadded<Mutex<T>>]>,
    hasher: Hasher,
    /// How far this table turns the shares of [`slices`] (drawn from its hasher's seed).
    turn: usize,
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        let hasher = Hasher::default();
        Self {
            parts: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(T::default())))
                .collect(),
            turn: hasher.hash_one(SHARDS) as usize % SHARDS,
            hasher,
        }
    }
}

impl<T> Sharded<T> {
    /// Locks the shard that `key` belongs to.
    pub fn lock<K: Hash + ?Sized>(&self, key: &K) -> MutexGuard<'_, T> {
        self.parts[self.shard_of(self.hasher.hash_one(key))].lock()
    }

    /// The shard a key with this hash belongs to: its slice's (the hash's top bits), turned.
    fn shard_of(&self, hash: u64) -> usize {
        (usize::from(slices()[(hash >> (64 - SLICES.trailing_zeros())) as usize]) + self.turn) % SHARDS
    }

    /// Each shard with its share of `n` keys chosen with [`Sharded::lock`] (or, `grouped`,
    /// with [`Sharded::lock_index`] of a [`weighted_group`]), with room for the hash's
    /// uneven spread: what each reserves when a caller knows about how many are coming
    /// (recovery).
    pub fn shares(&self, n: usize, grouped: bool) -> impl Iterator<Item = (&Mutex<T>, usize)> {
        let counts = slice_counts();
        let turn = if grouped { 0 } else { self.turn };
        self.iter().enumerate().map(move |(i, shard)| {
            let count = counts[(i + SHARDS - turn) % SHARDS];
            (shard, (n * count).div_ceil(SLICES) + n.div_ceil(SHARDS * 8))
        })
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
    fn shards_take_shares_that_double_from_the_smallest_to_the_largest() {
        let counts = slice_counts();
        assert_eq!(counts.iter().sum::<usize>(), SLICES);
        assert_eq!((counts[0], counts[SHARDS - 1]), (11, 22));
        assert!(counts.windows(2).all(|w| w[0] <= w[1] + 1), "{counts:?}");
        // Keys land as the shares say, turned by the table's own amount.
        let s: Sharded<u32> = Sharded::default();
        let n = 200_000;
        for k in 0..n {
            *s.lock(&k) += 1;
        }
        for (i, (shard, share)) in s.shares(n, false).enumerate() {
            let got = *shard.lock() as usize;
            let want = n * counts[(i + SHARDS - s.turn) % SHARDS] / SLICES;
            assert!(got.abs_diff(want) < want / 10, "shard {i}: {got} keys against {want}");
            assert!(share >= got, "shard {i}: share {share} under its {got} keys");
        }
    }

    #[test]
    fn two_tables_turn_their_shares_apart() {
        let turns: std::collections::HashSet<usize> = (0..20).map(|_| Sharded::<u32>::default().turn).collect();
        assert!(turns.len() > 10, "{turns:?}");
    }

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
