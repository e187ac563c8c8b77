//! A sharded table of Stripe objects with Stripe's list pagination.
//!
//! Objects are kept by id in [`Sharded`] hash maps; each also gets a creation sequence
//! number so lists come back newest first and `starting_after` / `ending_before`
//! cursors work across shards: every shard yields its best `limit + 1` candidates and
//! those are merged, so a page costs `O(shards × limit)` whatever the table's size.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};

use super::shard::Sharded;

struct Shard<K, V> {
    by_id: HashMap<K, (u64, V)>,
    order: BTreeMap<u64, K>,
}

impl<K, V> Default for Shard<K, V> {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
            order: BTreeMap::new(),
        }
    }
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

/// A sharded, ordered table from ids to objects.
pub struct Table<K, V> {
    shards: Sharded<Shard<K, V>>,
    next_seq: AtomicU64,
}

impl<K, V> Default for Table<K, V> {
    fn default() -> Self {
        Self {
            shards: Sharded::default(),
            next_seq: AtomicU64::new(1),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Table<K, V> {
    pub fn insert(&self, id: K, value: V) {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shards.lock(&id);
        shard.order.insert(seq, id.clone());
        shard.by_id.insert(id, (seq, value));
    }

    pub fn get(&self, id: &K) -> Option<V> {
        self.shards.lock(id).by_id.get(id).map(|(_, v)| v.clone())
    }

    pub fn seq_of(&self, id: &K) -> Option<u64> {
        self.shards.lock(id).by_id.get(id).map(|(s, _)| *s)
    }

    /// Runs `f` on the object under its shard's lock: a conditional update is atomic.
    pub fn update<R>(&self, id: &K, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        self.shards.lock(id).by_id.get_mut(id).map(|(_, v)| f(v))
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().by_id.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.lock();
            s.by_id.clear();
            s.order.clear();
        }
    }

    /// A page of at most `limit` objects matching `keep`, newest first.
    pub fn page(&self, cursor: Cursor, limit: usize, keep: impl Fn(&V) -> bool) -> Page<V> {
        let mut found: Vec<(u64, V)> = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let matching = |seq: &u64| {
                let id = &shard.order[seq];
                shard
                    .by_id
                    .get(id)
                    .filter(|(_, v)| keep(v))
                    .map(|(_, v)| (*seq, v.clone()))
            };
            match cursor {
                Cursor::Start => found.extend(shard.order.keys().rev().filter_map(matching).take(limit + 1)),
                Cursor::StartingAfter(s) => found.extend(
                    shard
                        .order
                        .range(..s)
                        .rev()
                        .map(|(k, _)| k)
                        .filter_map(matching)
                        .take(limit + 1),
                ),
                Cursor::EndingBefore(s) => found.extend(
                    shard
                        .order
                        .range(s + 1..)
                        .map(|(k, _)| k)
                        .filter_map(matching)
                        .take(limit + 1),
                ),
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

    fn table(n: u32) -> Table<u32, u32> {
        let t = Table::default();
        for i in 1..=n {
            t.insert(i, i * 10);
        }
        t
    }

    #[test]
    fn pages_are_newest_first_and_cursors_walk_both_ways() {
        let t = table(25);
        let p = t.page(Cursor::Start, 10, |_| true);
        assert_eq!(p.items, (16..=25).rev().map(|i| i * 10).collect::<Vec<_>>());
        assert!(p.has_more);
        let after = t.seq_of(&16).unwrap();
        let p2 = t.page(Cursor::StartingAfter(after), 10, |_| true);
        assert_eq!(p2.items.first(), Some(&150));
        assert_eq!(p2.items.len(), 10);
        let p3 = t.page(Cursor::StartingAfter(t.seq_of(&6).unwrap()), 10, |_| true);
        assert_eq!(p3.items, (1..=5).rev().map(|i| i * 10).collect::<Vec<_>>());
        assert!(!p3.has_more);
        let back = t.page(Cursor::EndingBefore(t.seq_of(&15).unwrap()), 3, |_| true);
        assert_eq!(back.items, vec![180, 170, 160]);
        assert!(back.has_more);
    }

    #[test]
    fn filters_and_updates() {
        let t = table(30);
        let p = t.page(Cursor::Start, 100, |v| v % 20 == 0);
        assert_eq!(p.items.len(), 15);
        assert_eq!(
            t.update(&3, |v| {
                *v += 1;
                *v
            }),
            Some(31)
        );
        assert_eq!(t.get(&3), Some(31));
        assert_eq!(t.update(&99, |_| ()), None);
        t.clear();
        assert!(t.is_empty());
    }
}
