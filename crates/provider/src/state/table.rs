//! A sharded table of Stripe objects with Stripe's list pagination.
//!
//! Each shard keeps its objects in creation order (`rows`: a sequence number and the
//! object) and an index from id to row that stores only the row's position (4 bytes;
//! the id is read from the object itself, [`Keyed`]), so a million stored objects cost
//! little beyond the objects. Objects made together can share one allocation ([`Row`]:
//! one request's events): each is still a row of its own, in its own key's shard, the
//! row holding the shared value and the object's place in it. Sequence numbers are drawn under the shard's lock, so each
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

/// What a table's rows hold: one object (every [`Keyed`] value), or up to [`MAX_ROW`]
/// objects made together in one allocation, each stored as a row of its own (the value
/// and the object's place in it) and found by its own key.
pub trait Row: Clone {
    type Key: Hash + Eq + Clone;
    /// What the table gives out for one of the value's keys.
    type Item;
    /// How many objects the value holds (1 to [`MAX_ROW`]).
    fn count(&self) -> usize;
    /// The key of object `i`.
    fn key_at(&self, i: usize) -> Self::Key;
    /// Object `i`.
    fn item(&self, i: usize) -> Self::Item;
    /// Object `i` if `keep` accepts it (a value of one tests itself before it is cloned).
    fn item_if(&self, i: usize, keep: &impl Fn(&Self::Item) -> bool) -> Option<Self::Item> {
        let item = self.item(i);
        keep(&item).then_some(item)
    }
}

impl<V: Keyed + Clone> Row for V {
    type Key = V::Key;
    type Item = V;
    fn count(&self) -> usize {
        1
    }
    fn key_at(&self, _: usize) -> V::Key {
        self.key()
    }
    fn item(&self, _: usize) -> V {
        self.clone()
    }
    fn item_if(&self, _: usize, keep: &impl Fn(&V) -> bool) -> Option<V> {
        keep(self).then(|| self.clone())
    }
}

/// The low bits of a row's number: the object's place in the row's value.
const PLACE_BITS: u32 = 3;
/// The most objects one value holds.
pub const MAX_ROW: usize = 1 << PLACE_BITS;

/// A row's number: its sequence number, and its object's place in the row's value.
fn number(seq: u64, place: usize) -> u64 {
    debug_assert!(place < MAX_ROW);
    (seq << PLACE_BITS) | place as u64
}

/// The sequence number in a row's number.
fn seq(number: u64) -> u64 {
    number >> PLACE_BITS
}

/// The object's place in a row's number.
fn place(number: u64) -> usize {
    (number as usize) & (MAX_ROW - 1)
}

/// The key of a row's object.
fn key_of<V: Row>((number, value): &(u64, V)) -> V::Key {
    value.key_at(place(*number))
}

/// A row's object.
fn item_of<V: Row>((number, value): &(u64, V)) -> V::Item {
    value.item(place(*number))
}

struct Shard<V> {
    /// Positions in `rows`, hashed by their row's key.
    index: HashTable<u32>,
    /// `(number, value)`: the row's [`number`] (its sequence number and its object's
    /// place in the value), in creation order.
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

impl<V: Row> Shard<V> {
    fn position(&self, hash: u64, key: &V::Key) -> Option<usize> {
        let rows = &self.rows;
        self.index
            .find(hash, |&i| key_of(&rows[i as usize]) == *key)
            .map(|&i| i as usize)
    }
}

/// The hash of the row an index slot points at: what the index needs when it grows.
fn rehash<'a, V: Row>(hasher: &'a Hasher, rows: &'a [(u64, V)]) -> impl Fn(&u32) -> u64 + 'a {
    move |&i| hasher.hash_one(key_of(&rows[i as usize]))
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
    /// Stores `value` under its key (replacing an object with the same key in place).
    pub fn insert(&self, value: V) {
        self.put(value, 0, true);
    }

    /// Stores `value` unless an object with its key is there: whether it was stored (an
    /// insert-if-absent under the shard's lock, for ids a client chooses).
    pub fn insert_new(&self, value: V) -> bool {
        self.put(value, 0, false)
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
}

impl<V: Row> Table<V> {
    fn hash(&self, key: &V::Key) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Stores every object of `value` (made together: one allocation), each as a row of
    /// its own in its key's shard, in order (an object whose key is there replaces it).
    pub fn insert_all(&self, value: V) {
        let count = value.count();
        debug_assert!((1..=MAX_ROW).contains(&count));
        for place in 0..count.min(MAX_ROW) {
            self.put(value.clone(), place, true);
        }
    }

    /// Stores object `place` of `value` as a new row, or over the row with its key when
    /// `replace` says so; whether it was stored. One probe of the index finds the key or
    /// the slot for it.
    fn put(&self, value: V, place: usize, replace: bool) -> bool {
        let key = value.key_at(place);
        let hash = self.hash(&key);
        trace::write(self.tag, hash);
        let mut shard = self.shards.lock(&key);
        let Shard { index, rows } = &mut *shard;
        let position = rows.len() as u32;
        let found = index.entry(hash, |&i| key_of(&rows[i as usize]) == key, rehash(&self.hasher, rows));
        match found {
            Entry::Occupied(at) => {
                if replace {
                    let row = &mut rows[*at.get() as usize];
                    *row = (number(seq(row.0), place), value);
                }
                replace
            }
            Entry::Vacant(slot) => {
                slot.insert(position);
                let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
                rows.push((number(seq, place), value));
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

    pub fn get(&self, key: &V::Key) -> Option<V::Item> {
        let hash = self.hash(key);
        trace::read(self.tag, hash);
        let shard = self.shards.lock(key);
        shard.position(hash, key).map(|i| item_of(&shard.rows[i]))
    }

    pub fn seq_of(&self, key: &V::Key) -> Option<u64> {
        let hash = self.hash(key);
        trace::read(self.tag, hash);
        let shard = self.shards.lock(key);
        shard.position(hash, key).map(|i| seq(shard.rows[i].0))
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
                    .map(|row| Touch::key(self.tag, self.hasher.hash_one(key_of(row)))),
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
    pub fn retain(&self, keep: impl Fn(&V::Item) -> bool) -> usize {
        let mut removed = 0;
        for s in self.shards.iter() {
            let mut shard = s.lock();
            let before = shard.rows.len();
            shard
                .rows
                .retain(|(number, v)| v.item_if(place(*number), &keep).is_some());
            if shard.rows.len() == before {
                continue;
            }
            removed += before - shard.rows.len();
            let Shard { index, rows } = &mut *shard;
            index.clear();
            for (i, row) in rows.iter().enumerate() {
                let hash = self.hasher.hash_one(key_of(row));
                index.insert_unique(hash, i as u32, rehash(&self.hasher, rows));
            }
        }
        removed
    }

    /// A page of at most `limit` objects matching `keep`, newest first.
    pub fn page(&self, cursor: Cursor, limit: usize, keep: impl Fn(&V::Item) -> bool) -> Page<V::Item> {
        trace::scan(self.tag);
        let mut found: Vec<(u64, V::Item)> = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let rows = &shard.rows;
            let matching = |(number, v): &(u64, V)| v.item_if(place(*number), &keep).map(|item| (seq(*number), item));
            match cursor {
                Cursor::Start => found.extend(rows.iter().rev().filter_map(matching).take(limit + 1)),
                Cursor::StartingAfter(s) => {
                    let end = rows.partition_point(|(number, _)| seq(*number) < s);
                    found.extend(rows[..end].iter().rev().filter_map(matching).take(limit + 1));
                }
                Cursor::EndingBefore(s) => {
                    let start = rows.partition_point(|(number, _)| seq(*number) <= s);
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

    /// Test objects made together, in one value.
    #[derive(Debug, Clone)]
    struct Several(std::sync::Arc<[Obj]>);

    impl Row for Several {
        type Key = u32;
        type Item = Obj;
        fn count(&self) -> usize {
            self.0.len()
        }
        fn key_at(&self, i: usize) -> u32 {
            self.0[i].0
        }
        fn item(&self, i: usize) -> Obj {
            self.0[i]
        }
    }

    /// Values of 1, 3, 1, 8 and 2 objects (keys 1 to 15, each object's value ten times its key).
    fn grouped() -> Table<Several> {
        let t = Table::default();
        let mut next = 1;
        for n in [1, 3, 1, MAX_ROW as u32, 2] {
            t.insert_all(Several((next..next + n).map(|k| Obj(k, k * 10)).collect()));
            next += n;
        }
        t
    }

    #[test]
    fn objects_made_together_are_found_listed_and_paged_one_by_one() {
        let t = grouped();
        assert_eq!(t.len(), 15);
        assert!((1..=15).all(|k| t.get(&k) == Some(Obj(k, k * 10))));
        assert_eq!(t.get(&16), None);
        let seqs: Vec<u64> = (1..=15).map(|k| t.seq_of(&k).unwrap()).collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "one sequence number an object: {seqs:?}"
        );
        let all = t.page(Cursor::Start, 100, |_| true);
        assert_eq!(values(&all), (1..=15).rev().map(|k| k * 10).collect::<Vec<_>>());
        // Pages of 4, newest first, all the way down.
        let (mut cursor, mut seen) = (Cursor::Start, Vec::new());
        loop {
            let p = t.page(cursor, 4, |_| true);
            seen.extend(values(&p));
            if !p.has_more {
                break;
            }
            cursor = Cursor::StartingAfter(p.last_seq.unwrap());
        }
        assert_eq!(seen, values(&all));
        let back = t.page(Cursor::EndingBefore(t.seq_of(&6).unwrap()), 4, |_| true);
        assert_eq!(
            values(&back),
            vec![100, 90, 80, 70],
            "the four just newer, newest first"
        );
        assert!(back.has_more);
        let odd = t.page(Cursor::StartingAfter(t.seq_of(&12).unwrap()), 3, |o| o.0 % 2 == 1);
        assert_eq!(values(&odd), vec![110, 90, 70]);
        // Each object leaves on its own; the others of its value stay findable.
        assert_eq!(t.retain(|o| o.0 % 5 != 0), 3);
        assert_eq!((t.len(), t.get(&10), t.get(&9)), (12, None, Some(Obj(9, 90))));
        let mut live = Vec::new();
        t.live_keys(&mut live);
        assert_eq!(live.len(), 12);
        assert!(live.contains(&t.touch_of(&11)) && !live.contains(&t.touch_of(&15)));
    }

    #[test]
    fn many_objects_stay_findable() {
        let t = table(20_000);
        assert_eq!(t.len(), 20_000);
        assert!((1..=20_000).all(|i| t.get(&i) == Some(Obj(i, i * 10))));
        assert_eq!(t.get(&20_001), None);
    }
}
