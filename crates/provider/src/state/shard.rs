//! Sharded state: N independently locked parts, chosen by a key's hash or named by an id.
//!
//! The provider keeps no global lock on its hot path: every table (objects, idempotency
//! records, the ledger) is split into [`SHARDS`] parts, each behind its own mutex on its
//! own cache line (two cores locking neighbouring shards do not take each other's line),
//! and a request locks only the part its key hashes to, or the one its id names (ids drawn
//! in a group, [`weighted_group`]: events, payment intents, charges).
//!
//! The parts are of unequal sizes, on purpose. A shard's hash index is rebuilt when 7/8
//! full, and the rebuild stalls the shard (every key read again: ~1-2 ms for a shard of
//! a million-payment table). 64 equal shards filled alike reach each size within a few
//! thousand payments of each other, and five tables hold one entry a payment (intents,
//! charges, keys, ledger groups, attempts): their stalls came as one, tens of milliseconds
//! in which the provider answered nothing. Here shard `i` takes a share of the keys
//! proportional to `2^(i / 64)` (the largest about twice the smallest), so the shards of a
//! table reach each size at 64 moments spread evenly over a doubling. (Tables filled alike
//! still grow their `i`th shards together: five shards at once, not 320.)
//!
//! Events, payment intents and charges are placed by the thread that makes them: in a
//! runtime of `n` worker threads (at most [`MAX_PARTS`] parts), a worker draws its ids'
//! groups in a part of its own, every `n`th shard ([`weighted_group`]), so two cores making
//! payments do not write each other's shard locks and row tails (a cache line last
//! written by the other core must move before it is written; `bench/notes.md` has what
//! that cost two threads). An id names its shard wherever it is read, by any thread: the
//! part decides only where new rows go, and a part shared by two threads, or a thread's
//! stale part, costs speed, never a lookup. What it changes, with `n` workers:
//! - Busy alike, each worker fills its part's shards in the unequal shares above, so `n`
//!   shards (one a part) reach each size together: each worker then rebuilds its own, in
//!   parallel, no longer than one shard's rebuild on one worker.
//! - One worker busy alone fills only its part, `64 / n` shards `n` times larger, whose
//!   rebuilds take `n` times as long: [`MAX_PARTS`] bounds that.
//! - Recovery reserves the shares of [`Sharded::shares`]; rows placed otherwise (a log of
//!   unequally busy workers, or written before ids named these shards) fit them less well
//!   and grow during recovery, which costs time only.

use std::hash::{BuildHasher, Hash};
use std::sync::OnceLock;

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};

/// Number of shards per table; a power of two well above the core count.
pub const SHARDS: usize = 64;

/// A fast seeded hasher (foldhash), for the shards and the maps inside them: keys are
/// client-chosen strings and ids, hashed several times per request.
pub type Hasher = foldhash::fast::RandomState;

/// Where each shard's keys end in the range of a hash's top 32 bits: shard `i` takes the
/// hashes from `ends[i - 1]` (0 for the first) up to `ends[i]` (the range's end for the
/// last), a share proportional to `2^(i / 64)`.
type Ends = [u32; SHARDS - 1];

fn ends() -> &'static Ends {
    static ENDS: OnceLock<Ends> = OnceLock::new();
    ENDS.get_or_init(|| {
        let at = |i: usize| (i as f64 / SHARDS as f64).exp2();
        std::array::from_fn(|i| ((at(i + 1) - 1.0) * 4_294_967_296.0) as u32)
    })
}

/// The shard of a hash's top 32 bits `u`.
fn shard_at(u: u32) -> usize {
    ends().partition_point(|&end| end <= u)
}

/// Each shard's share of `n` keys, with room for the hash's uneven spread.
fn shares_of(n: usize) -> impl Iterator<Item = usize> {
    let ends = ends();
    (0..SHARDS).map(move |i| {
        let start = if i == 0 { 0 } else { u64::from(ends[i - 1]) };
        let end = ends.get(i).map_or(1 << 32, |&e| u64::from(e));
        ((n as u64 * (end - start)).div_ceil(1 << 32) as usize) + n.div_ceil(SHARDS * 8)
    })
}

/// A random group (a shard for [`Sharded::lock_index`]) for ids that name their own shard
/// (a request's events, payment intents, charges): drawn with the shares that
/// [`Sharded::lock`] gives keys, then moved to the nearest shard of the calling thread's
/// part. With one part (one worker) the shards get exactly those shares; with `n` parts,
/// each part's shard gets its run of `n` shards' share from its own thread.
pub fn weighted_group() -> usize {
    Part::mine().nearest(shard_at(rand::random()))
}

/// The calling thread's turn: 0 for the first thread of the process to ask, 1 for the next,
/// and so on, kept for the thread's life. What each thread writes apart from the others
/// by a thread of its own (the metrics' parts, where the request log's runs start) is
/// spread by it; unlike [`weighted_group`]'s parts, threads outside a runtime take turns
/// too, so two workers may share a place, which costs a shared line, never a result.
pub fn thread_turn() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Set on first use: a `const` thread local reads as one load, a lazy one checks its state.
    thread_local!(static TURN: Cell<usize> = const { Cell::new(usize::MAX) });
    TURN.with(|turn| match turn.get() {
        usize::MAX => {
            let mine = NEXT.fetch_add(1, Ordering::Relaxed);
            turn.set(mine);
            mine
        }
        mine => mine,
    })
}

/// The most parts the shards are split into, however many workers a runtime has: a part
/// keeps at least 8 shards, so that one worker busy alone rebuilds indexes at most 8 times
/// the size of a shard's share.
pub const MAX_PARTS: usize = 8;

/// A thread's part of the shards: every `parts`th shard, from `place`. Threads take places
/// in turn (one counter for the process), as they first draw, and keep them: the workers of
/// a runtime that start drawing one after another get parts of their own, but a thread of
/// another runtime of several workers drawing in between can give two workers one part. A
/// thread outside any runtime, or in one of a single worker, has every shard and takes no
/// turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Part {
    place: usize,
    parts: usize,
}

impl Part {
    fn mine() -> Part {
        use std::cell::Cell;
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local!(static MINE: Cell<Option<Part>> = const { Cell::new(None) });
        MINE.with(|mine| {
            mine.get().unwrap_or_else(|| {
                let parts = tokio::runtime::Handle::try_current().map_or(1, |h| h.metrics().num_workers());
                // One part takes no turn: threads outside a runtime or in one of a single
                // worker do not move the turns of the workers that need them.
                let turn = if parts > 1 {
                    NEXT.fetch_add(1, Ordering::Relaxed)
                } else {
                    0
                };
                let part = Part::take(turn, parts);
                mine.set(Some(part));
                part
            })
        })
    }

    /// The part of the `turn`th thread to draw, among `parts`: threads that take turns one
    /// after another get parts of their own.
    fn take(turn: usize, parts: usize) -> Part {
        let parts = parts.clamp(1, MAX_PARTS);
        Part {
            place: turn % parts,
            parts,
        }
    }

    /// The part's shard in `group`'s run of `parts` shards (the one before it at the end).
    fn nearest(self, group: usize) -> usize {
        let g = group - group % self.parts + self.place;
        if g < SHARDS {
            g
        } else {
            g - self.parts
        }
    }
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
            hasher: Hasher::default(),
        }
    }
}

impl<T> Sharded<T> {
    /// Locks the shard that `key` belongs to.
    pub fn lock<K: Hash + ?Sized>(&self, key: &K) -> MutexGuard<'_, T> {
        self.parts[shard_at((self.hasher.hash_one(key) >> 32) as u32)].lock()
    }

    /// Each shard with its share of `n` keys placed by [`Sharded::lock`] (or by
    /// [`Sharded::lock_index`] with [`weighted_group`]s drawn on one worker, or on workers
    /// busy alike), with room for the hash's uneven spread: what each reserves when a
    /// caller knows about how many are coming (recovery).
    pub fn shares(&self, n: usize) -> impl Iterator<Item = (&Mutex<T>, usize)> {
        self.iter().zip(shares_of(n))
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

    /// The shares of `n` keys without the room for the spread.
    fn exact(n: usize) -> Vec<usize> {
        shares_of(n).map(|s| s - n.div_ceil(SHARDS * 8)).collect()
    }

    #[test]
    fn shards_take_shares_that_double_from_the_smallest_to_the_largest() {
        let shares = exact(1 << 20);
        assert!(shares.windows(2).all(|w| w[0] < w[1]), "{shares:?}");
        let ratio = shares[SHARDS - 1] as f64 / shares[0] as f64;
        assert!((1.95..2.0).contains(&ratio), "largest ÷ smallest {ratio}");
        assert!(shares.iter().sum::<usize>().abs_diff(1 << 20) <= SHARDS);
        // Keys land as the shares say. The keys are strings, as the provider's are
        // (idempotency keys, ids): foldhash's top bits for small consecutive integers
        // are uneven under some seeds (shard 0 took 2,498 keys against 2,178 once in
        // 200 runs); the provider's tables are keyed by strings and drawn ids.
        let s: Sharded<u32> = Sharded::default();
        let n = 200_000;
        for k in 0..n {
            *s.lock(&format!("key-{k}")) += 1;
        }
        for ((i, (shard, share)), want) in s.shares(n).enumerate().zip(exact(n)) {
            let got = *shard.lock() as usize;
            assert!(got.abs_diff(want) < want / 10, "shard {i}: {got} keys against {want}");
            assert!(share >= got, "shard {i}: share {share} under its {got} keys");
        }
    }

    #[test]
    fn weighted_groups_land_as_the_shares_say() {
        let n = 200_000;
        let mut got = [0usize; SHARDS];
        for _ in 0..n {
            got[weighted_group()] += 1;
        }
        for (i, want) in exact(n).into_iter().enumerate() {
            assert!(
                got[i].abs_diff(want) < want / 10,
                "group {i}: {} against {want}",
                got[i]
            );
        }
    }

    #[test]
    fn a_part_is_every_nth_shard_and_its_draws_stay_in_it() {
        for parts in [1, 2, 3, 5, 8, 16, 64] {
            let mut seen = [0usize; SHARDS];
            for place in 0..parts {
                let part = Part { place, parts };
                for g in 0..SHARDS {
                    let n = part.nearest(g);
                    assert!(
                        n % parts == place && n < SHARDS && n.abs_diff(g) < parts,
                        "{part:?}: {g} → {n}"
                    );
                    seen[n] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n > 0), "{parts} parts reach every shard: {seen:?}");
        }
    }

    #[test]
    fn threads_taking_turns_get_parts_of_their_own_up_to_the_most() {
        for parts in [1, 2, 3, 8, 16, 100] {
            let taken: Vec<Part> = (7..7 + parts).map(|turn| Part::take(turn, parts)).collect();
            let places: std::collections::BTreeSet<usize> = taken.iter().map(|p| p.place).collect();
            assert_eq!(places.len(), parts.min(MAX_PARTS), "{parts} threads in turn: {taken:?}");
            assert!(taken.iter().all(|p| p.parts == parts.min(MAX_PARTS)));
        }
    }

    #[test]
    fn a_worker_draws_in_its_runtime_part_and_a_plain_thread_anywhere() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let drawn = runtime.block_on(async {
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    // No await in the task: one worker draws, and its part is read.
                    tokio::spawn(async { (Part::mine(), (0..2_000).map(|_| weighted_group()).collect::<Vec<_>>()) })
                })
                .collect();
            let mut drawn = Vec::new();
            for t in tasks {
                drawn.push(t.await.unwrap());
            }
            drawn
        });
        for (part, groups) in &drawn {
            assert_eq!(part.parts, 2, "a part of the two");
            assert!(groups.iter().all(|g| g % 2 == part.place), "{part:?}");
            let distinct: std::collections::BTreeSet<_> = groups.iter().collect();
            assert!(
                distinct.len() > SHARDS / 2 - 4,
                "the part's shards all drawn: {distinct:?}"
            );
        }
        // Outside a runtime: every shard.
        let plain = std::thread::spawn(|| (Part::mine(), (0..5_000).map(|_| weighted_group()).collect::<Vec<_>>()));
        let (part, groups) = plain.join().unwrap();
        assert_eq!(part, Part { place: 0, parts: 1 });
        let distinct: std::collections::BTreeSet<_> = groups.iter().collect();
        assert!(distinct.len() > SHARDS - 4, "every shard drawn: {distinct:?}");
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
