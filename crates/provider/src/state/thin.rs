//! [`ThinStr`]: shared, immutable text behind a one-word pointer (its length lives in the
//! allocation). For text that many stored records point at: an idempotency key is held
//! by its events, its ledger record, its idempotency entry and its attempt counter, where
//! `Arc<str>`'s two-word pointer costs each holder 8 bytes more.

use std::fmt;
use std::hash::{Hash, Hasher};

use triomphe::ThinArc;

/// Shared text, one word wide. Compared and hashed as the `str` it holds.
#[derive(Clone)]
pub struct ThinStr(ThinArc<(), u8>);

impl ThinStr {
    pub fn new(text: &str) -> Self {
        Self(ThinArc::from_header_and_slice((), text.as_bytes()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0.slice
    }

    /// Its allocation, for a holder that keeps text and other bytes in one pointer (an
    /// object's metadata shares its correlation id's).
    pub fn arc(&self) -> &ThinArc<(), u8> {
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
        self.0.ptr() == other.0.ptr() || self.as_bytes() == other.as_bytes()
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
}
