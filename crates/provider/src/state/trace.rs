//! Which stored objects a write touched: while [`touched`] runs a write, every table and
//! the ledger note the keys it reads and writes (as [`Touch`]es: the store's tag and the
//! key's hash in that store), so that compaction of the data dir's log
//! (`crate::durable::compact`) can tell which old writes the live state still depends on.
//! Outside [`touched`] nothing is noted (one thread-local check per table access).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU16, Ordering};

thread_local! {
    static TOUCHED: RefCell<Option<Touched>> = const { RefCell::new(None) };
}

/// What a write touched: the keys, and the events it made that owe deliveries (each
/// with how many endpoints wanted it when it was made).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Touched {
    pub keys: Vec<Touch>,
    pub owed: Vec<(Touch, u32)>,
}

/// One store's tag (each table and the ledger draws its own when made; tags are only
/// compared within one process, never written down).
pub fn new_tag() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed) & TAG_MASK
}

const TAG_MASK: u16 = 0x7FFF;
const WRITE: u64 = 1 << 63;
const KEY_BITS: u64 = (1 << 48) - 1;

/// A key of a store that a write read or wrote: the store's tag, 48 bits of the key's
/// hash (never 0), and whether it was written. Two keys that share a touch only make
/// compaction keep more than it needs, never less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Touch(u64);

impl Touch {
    /// The key hashed to `hash` in the store tagged `tag`.
    pub fn key(tag: u16, hash: u64) -> Self {
        Self((u64::from(tag & TAG_MASK) << 48) | ((hash >> 16) & KEY_BITS).max(1))
    }

    /// Every key of the store tagged `tag` (a scan of it).
    pub fn all(tag: u16) -> Self {
        Self(u64::from(tag & TAG_MASK) << 48)
    }

    fn written(self) -> Self {
        Self(self.0 | WRITE)
    }

    pub fn is_write(self) -> bool {
        self.0 & WRITE != 0
    }

    /// The touch without whether it was a write: what a set of live keys holds.
    pub fn plain(self) -> Self {
        Self(self.0 & !WRITE)
    }

    pub fn tag(self) -> u16 {
        ((self.0 >> 48) as u16) & TAG_MASK
    }

    /// The scan of this touch's store.
    pub fn store(self) -> Self {
        Self::all(self.tag())
    }
}

/// Runs `f`, noting every key it touches; returns them with its result (sorted, each
/// once). A panic in `f` leaves the thread as it was (nothing noted from then on).
pub fn touched<R>(f: impl FnOnce() -> R) -> (R, Touched) {
    let (result, seen) = crate::state::scoped::scoped(&TOUCHED, Some(Touched::default()), f);
    let mut seen = seen.unwrap_or_default();
    // A key read then written counts as written (sorted by value, the write bit last).
    seen.keys
        .sort_unstable_by_key(|t| (t.plain(), std::cmp::Reverse(t.is_write())));
    seen.keys.dedup_by_key(|t| t.plain());
    (result, seen)
}

/// Notes that the event keyed `event` is owed to `endpoints` webhook endpoints.
pub fn owed(event: Touch, endpoints: u32) {
    TOUCHED.with(|t| {
        if let Some(seen) = t.borrow_mut().as_mut() {
            seen.owed.push((event, endpoints));
        }
    });
}

/// Notes a read of the key hashed to `hash` in the store tagged `tag`.
#[inline]
pub fn read(tag: u16, hash: u64) {
    note(Touch::key(tag, hash));
}

/// Notes a write of the key hashed to `hash` in the store tagged `tag`.
#[inline]
pub fn write(tag: u16, hash: u64) {
    note(Touch::key(tag, hash).written());
}

/// Notes a scan of the whole store tagged `tag`.
#[inline]
pub fn scan(tag: u16) {
    note(Touch::all(tag));
}

#[inline]
fn note(touch: Touch) {
    TOUCHED.with(|t| {
        if let Some(seen) = t.borrow_mut().as_mut() {
            seen.keys.push(touch);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_runs_inside_is_noted_and_a_write_wins_over_a_read() {
        read(1, 5 << 16);
        let ((), seen) = touched(|| {
            read(1, 7 << 16);
            write(1, 7 << 16);
            read(2, 7 << 16);
            scan(3);
        });
        let seen = seen.keys;
        assert_eq!(seen.len(), 3);
        assert!(seen.contains(&Touch::key(1, 7 << 16).written()));
        assert!(seen.contains(&Touch::key(2, 7 << 16)));
        assert!(seen.contains(&Touch::all(3)));
        assert_eq!(Touch::key(2, 7 << 16).store(), Touch::all(2));
        // A key whose hash bits are all zero is still a key, not the scan of its store.
        assert_ne!(Touch::key(4, 0), Touch::all(4));
        let ((), none) = touched(|| ());
        assert_eq!(none, Touched::default());
        // A panic inside leaves nothing being noted.
        let _ = std::panic::catch_unwind(|| touched(|| panic!("inside")));
        read(1, 9 << 16);
        assert!(TOUCHED.with(|t| t.borrow().is_none()));
    }
}
