//! How the provider's hash indexes grow.
//!
//! Every table keeps an index from key to a 4-byte slot that does not store its entries'
//! hashes (a million stored objects cost little beyond the objects): to grow, an index
//! reads each entry's key again, through the slot into a vector and often a pointer into an
//! object, a cache miss each in a table of millions. hashbrown's own growth reads one key,
//! then inserts it, then reads the next, so the misses come one after another (~57 ns an
//! entry: 1.5-2 ms for one shard of the events' index at 600,000 payments, under the
//! shard's lock). [`make_room`] grows an index in chunks of two passes instead: a chunk's
//! hashes first, in a loop whose iterations do not depend on each other, so that the
//! processor has many keys' misses in flight at once, then the chunk's inserts into the new
//! table.
//!
//! When shards grow matters as much as how: see [`crate::state::shard`], whose shards are
//! of unequal sizes so that a table's shards do not all grow within a few thousand
//! payments of each other (on one worker; with several, each worker's own part).

use hashbrown::HashTable;

/// Makes room in `index` for one more entry, as hashbrown's own growth would
/// (`RawTable::reserve_rehash`): a full index is rebuilt at its buckets when at most half
/// of them hold entries (the rest tombstones), else at the buckets for `len + 1` entries
/// or twice its own, whichever is more. `hash` gives an entry's hash, the one it was
/// inserted with. (hashbrown grows only when an insert lands on an empty bucket, not on a
/// tombstone; this rebuilds a full index before the insert, so an index with removals may
/// be rebuilt at its size a little sooner.) The old index stays whole until the new one
/// replaces it.
pub fn make_room<T: Copy>(index: &mut HashTable<T>, hash: impl Fn(&T) -> u64) {
    if index.len() < index.capacity() {
        return;
    }
    let len = index.len();
    let full = full_capacity(index.num_buckets());
    let capacity = if len < full / 2 { full } else { (len + 1).max(full + 1) };
    let mut grown = HashTable::with_capacity(capacity);
    let mut entries = index.iter();
    loop {
        // A chunk's hashes, on the stack.
        let mut chunk = [None; CHUNK];
        let mut k = 0;
        for &entry in entries.by_ref().take(CHUNK) {
            chunk[k] = Some((hash(&entry), entry));
            k += 1;
        }
        for &(h, entry) in chunk[..k].iter().flatten() {
            grown.insert_unique(h, entry, &hash);
        }
        if k < CHUNK {
            break;
        }
    }
    *index = grown;
}

/// The entries a table of `buckets` holds before it grows (hashbrown's
/// `bucket_mask_to_capacity`: 7/8 of them, all but one below 8).
fn full_capacity(buckets: usize) -> usize {
    if buckets < 8 {
        buckets - 1
    } else {
        buckets / 8 * 7
    }
}

/// Entries whose hashes [`make_room`] computes before it inserts them.
const CHUNK: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(n: &u64) -> u64 {
        n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn no_growth(_: &u64) -> u64 {
        panic!("an insert after make_room grew the table")
    }

    #[test]
    fn a_full_index_doubles_as_hashbrown_would_and_keeps_every_entry() {
        let mut index: HashTable<u64> = HashTable::new();
        let mut ours = Vec::new();
        for k in 0..100_000u64 {
            let before = index.capacity();
            make_room(&mut index, hash);
            if index.capacity() != before {
                ours.push(index.capacity());
            }
            index.insert_unique(hash(&k), k, no_growth);
        }
        // hashbrown's own growth, for the same inserts.
        let mut theirs_index: HashTable<u64> = HashTable::new();
        let mut theirs = Vec::new();
        for k in 0..100_000u64 {
            let before = theirs_index.capacity();
            theirs_index.insert_unique(hash(&k), k, hash);
            if theirs_index.capacity() != before {
                theirs.push(theirs_index.capacity());
            }
        }
        assert_eq!(ours, theirs, "capacities after each growth");
        for k in 0..100_000u64 {
            assert_eq!(index.find(hash(&k), |&m| m == k), Some(&k));
        }
        assert_eq!(index.len(), 100_000);
    }

    #[test]
    fn an_index_full_of_tombstones_is_rebuilt_without_doubling() {
        let mut index: HashTable<u64> = HashTable::new();
        // A window of 100 live keys: every removal leaves a tombstone or an empty bucket.
        for k in 0..200_000u64 {
            make_room(&mut index, hash);
            index.insert_unique(hash(&k), k, no_growth);
            if k >= 100 {
                let gone = k - 100;
                let found = index.find_entry(hash(&gone), |&m| m == gone).expect("a live key");
                found.remove();
            }
        }
        assert!(index.capacity() < 1_000, "{} for 100 keys", index.capacity());
        for k in 199_900..200_000u64 {
            assert_eq!(index.find(hash(&k), |&m| m == k), Some(&k));
        }
        assert_eq!(index.len(), 100);
    }
}
