//! A sharded table of Stripe objects with Stripe's list pagination.
//!
//! Each shard keeps its objects in creation order (`rows`: a sequence number and the
//! object) and an index from id to row that stores only the row's position (4 bytes;
//! the id is read from the object itself, [`Keyed`]), so a million stored objects cost
//! little beyond the objects. Sequence numbers are drawn under the shard's lock, so each
//! shard's rows are sorted by them: lists come back newest first and `starting_after` /
//! `ending_before` cursors work across shards, every shard yielding its best
//! `limit + 1` candidates to a merge, so a page costs `O(shards × limit)` whatever the
//! table's size.

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

use crate::state::shard::{self, Hasher, Sharded};
use crate::state::trace::{self, Touch};

/// A value that knows its own key (an object knows its id).
pub trait Keyed {
    type Key: Hash + Eq + Clone;
    fn key(&self) -> Self::Key;
}

struct Shard<V> {
    /// Positions in `rows`, hashed by their row's key.
    index: HashTable<u32>,
    /// `(sequence number, object)`, in creation order.
    rows: Vec<(u64, V)>,
}

impl<V> Default for Shard<V> {
    fn default() -> Self {
        Self {
            index: HashTable::new(),
            rows: Vec::new(),
        }
    }
}

impl<V: Keyed> Shard<V> {
    fn position(&self, hash: u64, key: &V::Key) -> Option<usize> {
        let rows = &self.rows;
        self.index
            .find(hash, |&i| rows[i as usize].1.key() == *key)
            .map(|&i| i as usize)
    }
}

/// The hash of the row an index slot points at: what the index needs when it grows.
fn rehash<'a, V: Keyed>(hasher: &'a Hasher, rows: &'a [(u64, V)]) -> impl Fn(&u32) -> u64 + 'a {
    move |&i| hasher.hash_one(rows[i as usize].1.key())
}

/// Where a list page starts, in Stripe's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// The newest objects.
    Start,
    /// Objects older than the one with this sequence number.
    StartingAfter(u64),
    /// Objects newer than the one with this sequence number (the page just before it).
    EndingBefore(u64),
}

/// One page of a list, newest first.
#[derive(Debug)]
pub struct Page<V> {
    pub items: Vec<V>,
    pub has_more: bool,
    /// Sequence number of the last item (a cursor for the next page).
    pub last_seq: Option<u64>,
}

/// A sharded, ordered table of objects by id.
pub struct Table<V> {
    shards: Sharded<Shard<V>>,
    hasher: Hasher,
    /// On a cache line of its own: every insert writes it, and its neighbours are read.
    next_seq: crossbeam_utils::CachePadded<AtomicU64>,
    /// This table's tag in the keys a write touched ([`trace`]).
    tag: u16,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Self {
            shards: Sharded::default(),
            hasher: Hasher::default(),
            next_seq: crossbeam_utils::CachePadded::new(AtomicU64::new(1)),
            tag: trace::new_tag(),
        }
    }
}

impl<V: Keyed + Clone> Table<V> {
    fn hash(&self, key: &V::Key) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Stores `value` under its key (replacing an object with the same key in place).
    pub fn insert(&self, value: V) {
        self.put(value, true);
    }

    /// Stores `value` unless an object with its key is there: whether it was stored (an
    /// insert-if-absent under the shard's lock, for ids a client chooses).
    pub fn insert_new(&self, value: V) -> bool {
        self.put(value, false)
    }

    /// Stores `value` as a new row, or over the row with its key when `replace` says so;
    /// whether it was stored. One probe of the index finds the key or the slot for it.
    fn put(&self, value: V, replace: bool) -> bool {
        let key = value.key();
        let hash = self.hash(&key);
        trace::write(self.tag, hash);
        let mut shard = self.shards.lock(&key);
        let Shard { index, rows } = &mut *shard;
        let position = rows.len() as u32;
        let found = index.entry(hash, |&i| rows[i as usize].1.key() == key, rehash(&self.hasher, rows));
        match found {
            Entry::Occupied(at) => {
                if replace {
                    rows[*at.get() as usize].1 = value;
                }
                replace
            }
            Entry::Vacant(slot) => {
                slot.insert(position);
                let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
                rows.push((seq, value));
                true
            }
        }
    }

    /// Makes room for about `n` more objects, so that inserting them never grows the
    /// shards' rows or indexes (recovery sizes its tables from the log's length).
    pub fn reserve(&self, n: usize) {
        let share = shard::per_shard(n);
        for s in self.shards.iter() {
            let mut shard = s.lock();
            let Shard { index, rows } = &mut *shard;
            // Best effort (see `Provider::reserve`).
            let _ = rows.try_reserve(share);
            let _ = index.try_reserve(share, rehash(&self.hasher, rows));
        }
    }

    pub fn get(&self, key: &V::Key) -> Option<V> {
        let hash = self.hash(key);
        trace::read(self.tag, hash);
        let shard = self.shards.lock(key);
        shard.position(hash, key).map(|i| shard.rows[i].1.clone())
    }

    pub fn seq_of(&self, key: &V::Key) -> Option<u64> {
        let hash = self.hash(key);
        trace::read(self.tag, hash);
        let shard = self.shards.lock(key);
        shard.position(hash, key).map(|i| shard.rows[i].0)
    }

    /// Runs `f` on the object under its shard's lock: a conditional update is atomic.
    /// `f` must not change the object's key.
    pub fn update<R>(&self, key: &V::Key, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        let hash = self.hash(key);
        trace::write(self.tag, hash);
        let mut shard = self.shards.lock(key);
        let i = shard.position(hash, key)?;
        Some(f(&mut shard.rows[i].1))
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().rows.len()).sum()
    }

    /// The touch of `key` in this table, as a write noted it (compaction's liveness).
    pub fn touch_of(&self, key: &V::Key) -> Touch {
        Touch::key(self.tag, self.hash(key))
    }

    /// This table's tag in touches.
    pub fn tag(&self) -> u16 {
        self.tag
    }

    /// Adds the touch of every key stored now to `live` (compaction's liveness).
    pub fn live_keys(&self, live: &mut impl Extend<Touch>) {
        for s in self.shards.iter() {
            let shard = s.lock();
            live.extend(
                shard
                    .rows
                    .iter()
                    .map(|(_, v)| Touch::key(self.tag, self.hasher.hash_one(v.key()))),
            );
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            *s.lock() = Shard::default();
        }
    }

    /// Keeps only the objects `keep` accepts (their order and sequence numbers kept);
    /// says how many were removed. A shard that loses rows has its index rebuilt, so
    /// this is for rare sweeps (expired events, a deleted endpoint), not the hot path.
    pub fn retain(&self, keep: impl Fn(&V) -> bool) -> usize {
        let mut removed = 0;
        for s in self.shards.iter() {
            let mut shard = s.lock();
            let before = shard.rows.len();
            shard.rows.retain(|(_, v)| keep(v));
            if shard.rows.len() == before {
                continue;
            }
            removed += before - shard.rows.len();
            let Shard { index, rows } = &mut *shard;
            index.clear();
            for (i, (_, v)) in rows.iter().enumerate() {
                let hash = self.hasher.hash_one(v.key());
                index.insert_unique(hash, i as u32, rehash(&self.hasher, rows));
            }
        }
        removed
    }

    /// A page of at most `limit` objects matching `keep`, newest first.
    pub fn page(&self, cursor: Cursor, limit: usize, keep: impl Fn(&V) -> bool) -> Page<V> {
        trace::scan(self.tag);
        let mut found: Vec<(u64, V)> = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let rows = &shard.rows;
            let matching = |(seq, v): &(u64, V)| keep(v).then(|| (*seq, v.clone()));
            match cursor {
                Cursor::Start => found.extend(rows.iter().rev().filter_map(matching).take(limit + 1)),
                Cursor::StartingAfter(s) => {
                    let end = rows.partition_point(|(seq, _)| *seq < s);
                    found.extend(rows[..end].iter().rev().filter_map(matching).take(limit + 1));
                }
                Cursor::EndingBefore(s) => {
                    let start = rows.partition_point(|(seq, _)| *seq <= s);
                    found.extend(rows[start..].iter().filter_map(matching).take(limit + 1));
                }
            }
        }
        let has_more = found.len() > limit;
        let items = if let Cursor::EndingBefore(_) = cursor {
            // The objects just newer than the cursor, shown newest first.
            found.sort_by_key(|(s, _)| *s);
            found.truncate(limit);
            found.reverse();
            found
        } else {
            found.sort_by_key(|(s, _)| std::cmp::Reverse(*s));
            found.truncate(limit);
            found
        };
        let last_seq = items.last().map(|(s, _)| *s);
        Page {
            items: items.into_iter().map(|(_, v)| v).collect(),
            has_more,
            last_seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test object: its key and a value.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Obj(u32, u32);

    impl Keyed for Obj {
        type Key = u32;
        fn key(&self) -> u32 {
            self.0
        }
    }

    fn table(n: u32) -> Table<Obj> {
        let t = Table::default();
        for i in 1..=n {
            t.insert(Obj(i, i * 10));
        }
        t
    }

    fn values(p: &Page<Obj>) -> Vec<u32> {
        p.items.iter().map(|o| o.1).collect()
    }

    #[test]
    fn room_made_ahead_keeps_what_is_there_and_takes_what_comes() {
        let t = table(100);
        t.reserve(10_000);
        for i in 101..=5_000 {
            t.insert(Obj(i, i * 10));
        }
        assert_eq!(t.len(), 5_000);
        assert!((1..=5_000).all(|i| t.get(&i) == Some(Obj(i, i * 10))));
        let p = t.page(Cursor::Start, 3, |_| true);
        assert_eq!(values(&p), vec![50_000, 49_990, 49_980], "still newest first");
        let shares = super::shard::per_shard(10_000);
        assert!(
            shares * super::shard::SHARDS >= 10_000 + 10_000 / 8,
            "each shard's share has headroom"
        );
    }

    #[test]
    fn pages_are_newest_first_and_cursors_walk_both_ways() {
        let t = table(25);
        let p = t.page(Cursor::Start, 10, |_| true);
        assert_eq!(values(&p), (16..=25).rev().map(|i| i * 10).collect::<Vec<_>>());
        assert!(p.has_more);
        let after = t.seq_of(&16).unwrap();
        let p2 = t.page(Cursor::StartingAfter(after), 10, |_| true);
        assert_eq!(values(&p2).first(), Some(&150));
        assert_eq!(p2.items.len(), 10);
        let p3 = t.page(Cursor::StartingAfter(t.seq_of(&6).unwrap()), 10, |_| true);
        assert_eq!(values(&p3), (1..=5).rev().map(|i| i * 10).collect::<Vec<_>>());
        assert!(!p3.has_more);
        let back = t.page(Cursor::EndingBefore(t.seq_of(&15).unwrap()), 3, |_| true);
        assert_eq!(values(&back), vec![180, 170, 160]);
        assert!(back.has_more);
    }

    #[test]
    fn filters_and_updates() {
        let t = table(30);
        let p = t.page(Cursor::Start, 100, |o| o.1 % 20 == 0);
        assert_eq!(p.items.len(), 15);
        assert_eq!(
            t.update(&3, |o| {
                o.1 += 1;
                o.1
            }),
            Some(31)
        );
        assert_eq!(t.get(&3), Some(Obj(3, 31)));
        assert_eq!(t.update(&99, |_| ()), None);
        t.insert(Obj(3, 7));
        assert_eq!(
            (t.get(&3), t.len()),
            (Some(Obj(3, 7)), 30),
            "same key: replaced in place"
        );
        assert_eq!(t.retain(|o| o.0 % 3 != 0), 10);
        assert_eq!((t.len(), t.get(&3), t.get(&4)), (20, None, Some(Obj(4, 40))));
        let p = t.page(Cursor::Start, 3, |_| true);
        assert_eq!(values(&p), vec![290, 280, 260], "order kept after a retain");
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn many_objects_stay_findable() {
        let t = table(20_000);
        assert_eq!(t.len(), 20_000);
        assert!((1..=20_000).all(|i| t.get(&i) == Some(Obj(i, i * 10))));
        assert_eq!(t.get(&20_001), None);
    }
}
