//! [`ThinStr`] and [`ThinBytes`]: shared, immutable text and bytes behind a one-word
//! pointer, their holder count and length in an 8-byte header of the allocation. For
//! text that many stored records point at: an idempotency key is held by its events, its
//! ledger record, its idempotency entry and its attempt counter, where `Arc<str>`'s
//! two-word pointer costs each holder 8 bytes more and its two-word header the text 16.

use std::fmt;
use std::hash::{Hash, Hasher};

pub use raw::ThinBytes;

/// The allocation behind [`ThinBytes`]: an 8-byte header (a `u32` count of holders and a
/// `u32` length) and then the bytes. The one place in the provider with `unsafe` code:
/// `triomphe::ThinArc` (the crate's other thin pointer) keeps a `usize` count and a
/// `usize` length, 16 bytes, and its allocation for a 20-character key is a 48-byte block
/// where this one's is 32 (mimalloc rounds small blocks to 16 bytes): two such texts a
/// stored payment (its idempotency key and its order id) are 32 bytes.
#[allow(unsafe_code)]
mod raw {
    use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
    use std::ptr::NonNull;
    use std::sync::atomic::{fence, AtomicU32, Ordering};

    #[repr(C)]
    struct Header {
        count: AtomicU32,
        len: u32,
    }

    const HEADER: usize = std::mem::size_of::<Header>();

    /// A holder count past which cloning aborts, as `Arc`'s does past `isize::MAX`: far
    /// below `u32::MAX`, so that the count cannot wrap however many threads clone at once.
    const MAX_COUNT: u32 = i32::MAX as u32;

    /// Shared, immutable bytes behind one pointer.
    pub struct ThinBytes(NonNull<Header>);

    // SAFETY: the bytes are never written after `new` and the count is atomic: shared
    // like `Arc<[u8]>`, which is `Send` and `Sync`.
    unsafe impl Send for ThinBytes {}
    // SAFETY: as above.
    unsafe impl Sync for ThinBytes {}

    fn layout(len: usize) -> Layout {
        // Cannot fail: `len` came from a slice (at most `isize::MAX` bytes) and fits a `u32`.
        Layout::from_size_align(HEADER + len, std::mem::align_of::<Header>()).expect("a small layout")
    }

    impl ThinBytes {
        /// A copy of `bytes` (shorter than 4 GiB: every body fauxpay reads is capped far
        /// below that).
        pub fn new(bytes: &[u8]) -> Self {
            let len = u32::try_from(bytes.len()).expect("shared bytes shorter than 4 GiB");
            let layout = layout(bytes.len());
            // SAFETY: the layout is at least `HEADER` (8) bytes, never zero-sized.
            let Some(ptr) = NonNull::new(unsafe { alloc(layout) }.cast::<Header>()) else {
                handle_alloc_error(layout)
            };
            // SAFETY: `ptr` is a fresh allocation of `HEADER + len` bytes aligned for
            // `Header`: the header is written at its start and the bytes after it.
            unsafe {
                ptr.as_ptr().write(Header {
                    count: AtomicU32::new(1),
                    len,
                });
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().cast::<u8>().add(HEADER), bytes.len());
            }
            Self(ptr)
        }

        fn header(&self) -> &Header {
            // SAFETY: the allocation lives while any holder (`self`) does.
            unsafe { self.0.as_ref() }
        }

        pub fn as_bytes(&self) -> &[u8] {
            let len = self.header().len as usize;
            // SAFETY: `new` wrote `len` bytes after the header, never written again, and
            // they live as long as `self`.
            unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>().add(HEADER), len) }
        }

        /// Whether `self` and `other` are one allocation.
        pub fn same(&self, other: &Self) -> bool {
            self.0 == other.0
        }

        /// How many hold it (tests).
        #[cfg(test)]
        pub fn holders(&self) -> u32 {
            self.header().count.load(Ordering::Acquire)
        }
    }

    impl Clone for ThinBytes {
        fn clone(&self) -> Self {
            // Relaxed, as `Arc::clone`: a new holder is made from one that keeps it alive.
            if self.header().count.fetch_add(1, Ordering::Relaxed) > MAX_COUNT {
                std::process::abort();
            }
            Self(self.0)
        }
    }

    impl Drop for ThinBytes {
        fn drop(&mut self) {
            // As `Arc::drop`: release this holder's use of the bytes, and the last holder
            // acquires every other's before it frees them.
            if self.header().count.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
            let len = self.header().len as usize;
            // SAFETY: the last holder frees the allocation `new` made with this layout.
            unsafe { dealloc(self.0.as_ptr().cast::<u8>(), layout(len)) }
        }
    }
}

/// Shared text, one word wide. Compared and hashed as the `str` it holds.
#[derive(Clone)]
pub struct ThinStr(ThinBytes);

impl ThinStr {
    pub fn new(text: &str) -> Self {
        Self(ThinBytes::new(text.as_bytes()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Its allocation, for a holder that keeps text and other bytes in one pointer (an
    /// object's metadata shares its correlation id's).
    pub fn bytes(&self) -> &ThinBytes {
        &self.0
    }

    /// The text (always whole: it was made from a `str`). It is checked again on each
    /// call: compare and hash with [`ThinStr::as_bytes`] (as `Eq` and `Hash` do) on hot
    /// paths.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

impl From<&str> for ThinStr {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for ThinStr {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl PartialEq for ThinStr {
    /// One allocation is equal to itself without a look at its bytes (a key shared by the
    /// records that hold it).
    fn eq(&self, other: &Self) -> bool {
        self.0.same(&other.0) || self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ThinStr {}

impl PartialOrd for ThinStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ThinStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for ThinStr {
    /// As `str` hashes: its bytes, then `0xff` (what `Hasher::write_str` does by default,
    /// and foldhash without its `nightly` feature), so that a `ThinStr` and its text find
    /// the same shard.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
        state.write_u8(0xff);
    }
}

impl serde::Serialize for ThinStr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Debug for ThinStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ThinStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn one_word_that_reads_compares_and_hashes_as_its_text() {
        assert_eq!(std::mem::size_of::<ThinStr>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinStr>>(), 8);
        let (a, b) = (ThinStr::new("key-1é"), ThinStr::from(String::from("key-1é")));
        assert_eq!(a.as_str(), "key-1é");
        assert_eq!(
            (a == b, a.to_string(), format!("{a:?}")),
            (true, "key-1é".into(), "\"key-1é\"".into())
        );
        assert_ne!(a, ThinStr::new("key-2"));
        assert!(ThinStr::new("a") < ThinStr::new("b"));
        let hasher = std::hash::RandomState::new();
        assert_eq!(hasher.hash_one(&a), hasher.hash_one("key-1é"), "hashed as the str");
        assert_eq!(ThinStr::new("").as_str(), "");
    }

    #[test]
    fn bytes_are_freed_by_their_last_holder_on_any_thread() {
        let long: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let bytes = ThinBytes::new(&long);
        assert_eq!(bytes.as_bytes(), &long[..]);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let mine = bytes.clone();
                std::thread::spawn(move || {
                    let held: Vec<_> = (0..10_000).map(|_| mine.clone()).collect();
                    assert!(held.iter().all(|h| h.same(&mine) && h.as_bytes().len() == 100_000));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(bytes.holders(), 1, "every clone on every thread dropped");
        let copy = bytes.clone();
        assert_eq!((bytes.holders(), copy.same(&bytes)), (2, true));
        assert!(!ThinBytes::new(&long).same(&bytes), "another allocation");
        assert_eq!(ThinBytes::new(b"").as_bytes(), b"");
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 8);
    }
}
