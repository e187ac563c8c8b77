//! A sharded table of Stripe objects with Stripe's list pagination.
//!
//! Each shard keeps its objects in creation order (`rows`: a number holding the sequence
//! number, and the object) and an index from id to row that stores only the row's
//! position and the object's place in it (4 bytes; the id is read from the object
//! itself, [`Keyed`]), so a million stored objects cost little beyond the objects.
//! Objects made together can share one allocation ([`Row`]: one request's events). Their
//! keys can name one shard ([`Row::shard_of`]): then they are one row, each with a
//! sequence number of its own and found through its own slot in the index. Otherwise
//! each is a row of its own, in its own key's shard, the row holding the shared value and
//! the object's place in it. Sequence numbers are drawn
//! under the shard's lock, so each shard's rows are sorted by them: lists come back
//! newest first and `starting_after` / `ending_before` cursors work across shards, every
//! shard yielding its best `limit + 1` candidates to a merge, so a page costs
//! `O(shards × limit)` whatever the table's size.

use std::hash::{BuildHasher, Hash};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use parking_lot::MutexGuard;

use crate::state::index;
use crate::state::shard::{Hasher, Sharded};
use crate::state::trace::{self, Touch};

/// A value that knows its own key (an object knows its id).
pub trait Keyed {
    type Key: Hash + Eq + Clone;
    fn key(&self) -> Self::Key;
    /// The shard `key` is kept in, when its key says ([`Row::shard_of`]).
    fn shard_of(_key: &Self::Key) -> Option<usize> {
        None
    }
}

/// What a table's rows hold: one object (every [`Keyed`] value), or up to [`MAX_ROW`]
/// objects made together in one allocation, each found by its own key.
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
    /// The shard `key` is kept in, when its key says (objects made together whose keys
    /// name one shard are one row; a group drawn with [`crate::state::shard::weighted_group`]
    /// gives shards the shares that keys' hashes give them, in the drawing thread's part);
    /// else the key's hash picks it.
    fn shard_of(_key: &Self::Key) -> Option<usize> {
        None
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
    fn shard_of(key: &V::Key) -> Option<usize> {
        V::shard_of(key)
    }
}

/// The low bits of an index slot and of a row's number: an object's place in its value.
const PLACE_BITS: u32 = 3;
/// The most objects one value holds.
pub const MAX_ROW: usize = 1 << PLACE_BITS;
/// The bit of a row's number that says the row holds every object of its value.
const WHOLE: u64 = 1 << PLACE_BITS;

/// A row's number: the sequence number of its (first) object, whether it holds every
/// object of its value (each then numbered on from the first), and else its object's
/// place in the value.
fn number(seq: u64, whole: bool, place: usize) -> u64 {
    debug_assert!(place < MAX_ROW);
    (seq << (PLACE_BITS + 1)) | if whole { WHOLE } else { place as u64 }
}

/// A row's objects: their places in its value, and the sequence number of the first.
fn places<V: Row>((number, value): &(u64, V)) -> (Range<usize>, u64) {
    let seq = number >> (PLACE_BITS + 1);
    match number & WHOLE {
        0 => {
            let place = (number & (MAX_ROW as u64 - 1)) as usize;
            (place..place + 1, seq)
        }
        _ => (0..value.count().min(MAX_ROW), seq),
    }
}

/// The sequence number of object `place` of a row.
fn seq_at<V: Row>(row: &(u64, V), place: usize) -> u64 {
    let (places, first) = places(row);
    first + (place - places.start) as u64
}

/// An index slot: a row's position and an object's place in the row's value.
fn slot(position: usize, place: usize) -> u32 {
    debug_assert!(position < (u32::MAX >> PLACE_BITS) as usize);
    ((position as u32) << PLACE_BITS) | place as u32
}

fn unslot(slot: u32) -> (usize, usize) {
    ((slot >> PLACE_BITS) as usize, (slot as usize) & (MAX_ROW - 1))
}

/// The key of the object an index slot points at.
fn key_of<V: Row>(rows: &[(u64, V)], at: u32) -> V::Key {
    let (position, place) = unslot(at);
    rows[position].1.key_at(place)
}

struct Shard<V> {
    /// [`slot`]s, hashed by their object's key.
    index: HashTable<u32>,
    /// `(number, value)`: the row's [`number`], in creation order.
    rows: Vec<(u64, V)>,
    /// Objects in `rows`.
    items: usize,
}

impl<V> Default for Shard<V> {
    fn default() -> Self {
        Self {
            index: HashTable::new(),
            rows: Vec::new(),
            items: 0,
        }
    }
}

impl<V: Row> Shard<V> {
    /// The position of `key`'s row and its object's place in the row's value.
    fn find(&self, hash: u64, key: &V::Key) -> Option<(usize, usize)> {
        let rows = &self.rows;
        self.index
            .find(hash, |&at| key_of(rows, at) == *key)
            .map(|&at| unslot(at))
    }

    /// Indexes every object of every row again (after rows left).
    fn reindex(&mut self, hasher: &Hasher) {
        let Shard { index, rows, items } = self;
        index.clear();
        *items = 0;
        for position in 0..rows.len() {
            for place in places(&rows[position]).0 {
                let hash = hasher.hash_one(rows[position].1.key_at(place));
                index.insert_unique(hash, slot(position, place), rehash(hasher, rows));
                *items += 1;
            }
        }
    }
}

/// The hash of the object an index slot points at: what the index needs when it grows.
fn rehash<'a, V: Row>(hasher: &'a Hasher, rows: &'a [(u64, V)]) -> impl Fn(&u32) -> u64 + 'a {
    move |&at| hasher.hash_one(key_of(rows, at))
}

/// The objects of a row that `keep` accepts and `within` (their sequence numbers) places
/// on a page, with their sequence numbers: newest first, or oldest first.
fn items_of<'r, V: Row, K: Fn(&V::Item) -> bool>(
    row: &'r (u64, V),
    keep: &'r K,
    within: impl Fn(u64) -> bool + 'r,
    newest_first: bool,
) -> impl Iterator<Item = (u64, V::Item)> + 'r {
    let (places, first) = places(row);
    let (start, n) = (places.start, places.len());
    (0..n)
        .map(move |i| if newest_first { n - 1 - i } else { i })
        .map(move |i| (first + i as u64, start + i))
        .filter(move |&(seq, _)| within(seq))
        .filter_map(move |(seq, place)| row.1.item_if(place, keep).map(|item| (seq, item)))
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
        let mut shard = self.lock(key);
        let (position, _) = shard.find(hash, key)?;
        Some(f(&mut shard.rows[position].1))
    }
}

impl<V: Row> Table<V> {
    fn hash(&self, key: &V::Key) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard `key` is kept in.
    fn lock(&self, key: &V::Key) -> MutexGuard<'_, Shard<V>> {
        match V::shard_of(key) {
            Some(i) => self.shards.lock_index(i),
            None => self.shards.lock(key),
        }
    }

    /// Stores every object of `value` (made together: one allocation; at most
    /// [`MAX_ROW`] are kept), in order: one row when their keys name one shard, else a
    /// row each in its key's shard. Keys are new (ids drawn at random): one already there
    /// is replaced when it is a row of its own, and kept when it is part of a row of
    /// several; as part of a row of several, the new object is then listed beside it.
    pub fn insert_all(&self, value: V) {
        debug_assert!(value.count() <= MAX_ROW, "{} objects in one value", value.count());
        let count = value.count().min(MAX_ROW);
        let shard = V::shard_of(&value.key_at(0));
        if count == 1 || shard.is_none() || (1..count).any(|i| V::shard_of(&value.key_at(i)) != shard) {
            for place in 0..count {
                self.put(value.clone(), place, true);
            }
            return;
        }
        let mut hashes = [0; MAX_ROW];
        for (place, hash) in hashes.iter_mut().enumerate().take(count) {
            *hash = self.hash(&value.key_at(place));
            trace::write(self.tag, *hash);
        }
        let mut shard = self.lock(&value.key_at(0));
        let Shard { index, rows, items } = &mut *shard;
        let position = rows.len();
        let seq = self.next_seq.fetch_add(count as u64, Ordering::Relaxed);
        rows.push((number(seq, true, 0), value));
        *items += count;
        for (place, &hash) in hashes.iter().enumerate().take(count) {
            let key = rows[position].1.key_at(place);
            index::make_room(index, rehash(&self.hasher, rows));
            match index.entry(hash, |&at| key_of(rows, at) == key, rehash(&self.hasher, rows)) {
                // Keys are new (ids drawn at random): one already there is found here
                // from now on.
                Entry::Occupied(mut at) => {
                    debug_assert!(false, "a key stored twice");
                    *at.get_mut() = slot(position, place);
                }
                Entry::Vacant(free) => {
                    free.insert(slot(position, place));
                }
            }
        }
    }

    /// Stores object `place` of `value` as a new row, or over the row with its key when
    /// `replace` says so; whether it was stored. One probe of the index finds the key or
    /// the slot for it.
    fn put(&self, value: V, place: usize, replace: bool) -> bool {
        let key = value.key_at(place);
        let hash = self.hash(&key);
        trace::write(self.tag, hash);
        let mut shard = self.lock(&key);
        let Shard { index, rows, items } = &mut *shard;
        let position = rows.len();
        index::make_room(index, rehash(&self.hasher, rows));
        let found = index.entry(hash, |&at| key_of(rows, at) == key, rehash(&self.hasher, rows));
        match found {
            Entry::Occupied(mut at) => {
                let (old, old_place) = unslot(*at.get());
                // An object of a row of several stays (its row lists it).
                let replace = replace && places(&rows[old]).0.len() == 1;
                if replace {
                    rows[old] = (number(seq_at(&rows[old], old_place), false, place), value);
                    *at.get_mut() = slot(old, place);
                }
                replace
            }
            Entry::Vacant(free) => {
                free.insert(slot(position, place));
                let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
                rows.push((number(seq, false, place), value));
                *items += 1;
                true
            }
        }
    }

    /// Makes room for about `rows` more rows holding `keys` objects, so that inserting
    /// them never grows the shards' rows or indexes when they land with the shards' shares
    /// ([`Sharded::shares`]; rows placed otherwise may grow some shards): recovery sizes
    /// its tables from the log's length.
    pub fn reserve_rows(&self, rows: usize, keys: usize) {
        let shares = self.shards.shares(rows).zip(self.shards.shares(keys));
        for ((s, rows), (_, keys)) in shares {
            let mut shard = s.lock();
            let Shard { index, rows: r, .. } = &mut *shard;
            // Best effort (see `Provider::reserve`).
            let _ = r.try_reserve(rows);
            let _ = index.try_reserve(keys, rehash(&self.hasher, r));
        }
    }

    /// Makes room for about `n` more objects, a row each.
    pub fn reserve(&self, n: usize) {
        self.reserve_rows(n, n);
    }

    pub fn get(&self, key: &V::Key) -> Option<V::Item> {
        let hash = self.hash(key);
        trace::read(self.tag, hash);
        let shard = self.lock(key);
        shard
            .find(hash, key)
            .map(|(position, place)| shard.rows[position].1.item(place))
    }

    pub fn seq_of(&self, key: &V::Key) -> Option<u64> {
        let hash = self.hash(key);
        trace::read(self.tag, hash);
        let shard = self.lock(key);
        shard
            .find(hash, key)
            .map(|(position, place)| seq_at(&shard.rows[position], place))
    }

    /// Rows stored (objects stored together are one).
    #[cfg(test)]
    pub fn rows(&self) -> usize {
        self.shards.iter().map(|s| s.lock().rows.len()).sum()
    }

    /// Objects stored.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().items).sum()
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
            live.extend(shard.rows.iter().flat_map(|row| {
                places(row)
                    .0
                    .map(|place| Touch::key(self.tag, self.hasher.hash_one(row.1.key_at(place))))
            }));
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

    /// Keeps only the objects `keep` accepts (their order and sequence numbers kept: the
    /// objects kept of a row of several become rows of their own); says how many were
    /// removed. A shard that loses rows has its index rebuilt, so this is for rare sweeps
    /// (expired events, a deleted endpoint), not the hot path.
    pub fn retain(&self, keep: impl Fn(&V::Item) -> bool) -> usize {
        let mut removed = 0;
        for s in self.shards.iter() {
            let mut shard = s.lock();
            let (rows_before, items_before) = (shard.rows.len(), shard.items);
            // The objects kept of rows of several that lose some, as rows of their own.
            let mut split = Vec::new();
            shard.rows.retain(|row| {
                let (all, first) = places(row);
                let kept = all.clone().filter(|&p| row.1.item_if(p, &keep).is_some());
                let kept: u8 = kept.fold(0, |mask, p| mask | 1 << p);
                if kept.count_ones() as usize == all.len() {
                    return true;
                }
                let start = all.start;
                split.extend(all.filter(|p| kept & 1 << p != 0).map(|p| {
                    let seq = first + (p - start) as u64;
                    (number(seq, false, p), row.1.clone())
                }));
                false
            });
            if shard.rows.len() == rows_before {
                continue;
            }
            for row in split {
                let at = shard.rows.partition_point(|r| places(r).1 < places(&row).1);
                shard.rows.insert(at, row);
            }
            shard.reindex(&self.hasher);
            removed += items_before - shard.items;
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
            match cursor {
                Cursor::Start => found.extend(
                    rows.iter()
                        .rev()
                        .flat_map(|r| items_of(r, &keep, |_| true, true))
                        .take(limit + 1),
                ),
                Cursor::StartingAfter(s) => {
                    // Rows whose first object is older than the cursor.
                    let end = rows.partition_point(|r| places(r).1 < s);
                    found.extend(
                        rows[..end]
                            .iter()
                            .rev()
                            .flat_map(|r| items_of(r, &keep, move |seq| seq < s, true))
                            .take(limit + 1),
                    );
                }
                Cursor::EndingBefore(s) => {
                    // Rows whose last object is newer than the cursor.
                    let start = rows.partition_point(|r| {
                        let (places, first) = places(r);
                        first + places.len() as u64 - 1 <= s
                    });
                    found.extend(
                        rows[start..]
                            .iter()
                            .flat_map(|r| items_of(r, &keep, move |seq| seq > s, false))
                            .take(limit + 1),
                    );
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
        let shares: usize = t.shards.shares(10_000).map(|(_, share)| share).sum();
        assert!(shares >= 10_000 + 10_000 / 8, "the shares have headroom: {shares}");
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

    /// Test objects made together, in one value; keys of 100 and more name shard 7.
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
        fn shard_of(key: &u32) -> Option<usize> {
            (*key >= 100).then_some(7)
        }
    }

    /// Values of 1, 3, 1, 8 and 2 objects with keys `base + 1` to `base + 15`, each
    /// object's value ten times its key.
    fn grouped(base: u32) -> Table<Several> {
        let t = Table::default();
        let mut next = base + 1;
        for n in [1, 3, 1, MAX_ROW as u32, 2] {
            t.insert_all(Several((next..next + n).map(|k| Obj(k, k * 10)).collect()));
            next += n;
        }
        t
    }

    /// Whether `t`'s objects with keys `base + 1` to `base + 15` are found, listed and
    /// paged one by one, in order, and each leaves on its own.
    fn objects_one_by_one(t: &Table<Several>, base: u32) {
        let k = |i: u32| base + i;
        assert_eq!(t.len(), 15);
        assert!((1..=15).all(|i| t.get(&k(i)) == Some(Obj(k(i), k(i) * 10))));
        assert_eq!(t.get(&k(16)), None);
        let seqs: Vec<u64> = (1..=15).map(|i| t.seq_of(&k(i)).unwrap()).collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "one sequence number an object: {seqs:?}"
        );
        let all = t.page(Cursor::Start, 100, |_| true);
        assert_eq!(values(&all), (1..=15).rev().map(|i| k(i) * 10).collect::<Vec<_>>());
        // Pages of 4, newest first, all the way down: cursors fall inside rows.
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
        let back = t.page(Cursor::EndingBefore(t.seq_of(&k(6)).unwrap()), 4, |_| true);
        assert_eq!(
            values(&back),
            [10, 9, 8, 7].map(|i| k(i) * 10),
            "the four just newer, newest first"
        );
        assert!(back.has_more);
        let odd = t.page(Cursor::StartingAfter(t.seq_of(&k(12)).unwrap()), 3, |o| o.0 % 2 == 1);
        assert_eq!(values(&odd), [11, 9, 7].map(|i| k(i) * 10));
        // Each object leaves on its own; the others of its value stay, in order.
        assert_eq!(t.retain(|o| o.0 % 5 != 0), 3);
        assert_eq!(
            (t.len(), t.get(&k(10)), t.get(&k(9))),
            (12, None, Some(Obj(k(9), k(9) * 10)))
        );
        let kept: Vec<u32> = [1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14]
            .map(|i| k(i) * 10)
            .into_iter()
            .rev()
            .collect();
        assert_eq!(values(&t.page(Cursor::Start, 100, |_| true)), kept);
        let back = t.page(Cursor::EndingBefore(t.seq_of(&k(6)).unwrap()), 2, |_| true);
        assert_eq!(values(&back), [8, 7].map(|i| k(i) * 10));
        let mut live = Vec::new();
        t.live_keys(&mut live);
        assert_eq!(live.len(), 12);
        assert!(live.contains(&t.touch_of(&k(11))) && !live.contains(&t.touch_of(&k(15))));
    }

    #[test]
    fn objects_made_together_are_found_listed_and_paged_one_by_one() {
        // Keys that name no shard: a row each, in their keys' shards.
        let t = grouped(0);
        assert_eq!(t.rows(), 15);
        objects_one_by_one(&t, 0);
        // Keys that name one shard: a row a value, all in shard 7.
        let t = grouped(100);
        let rows: Vec<usize> = t.shards.iter().map(|s| s.lock().rows.len()).collect();
        assert_eq!((rows.iter().sum::<usize>(), rows[7]), (5, 5));
        objects_one_by_one(&t, 100);
    }

    #[test]
    fn many_objects_stay_findable() {
        let t = table(20_000);
        assert_eq!(t.len(), 20_000);
        assert!((1..=20_000).all(|i| t.get(&i) == Some(Obj(i, i * 10))));
        assert_eq!(t.get(&20_001), None);
    }
}
