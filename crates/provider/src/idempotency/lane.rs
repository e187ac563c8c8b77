//! The replay lane: what a keyed write's bytes told the pipeline (its idempotency
//! fingerprint and its correlation id, both functions of the bytes alone), remembered by
//! a hash of those bytes once the request was answered from the idempotency store, so
//! that a byte-identical retry is replayed without its parameters parsed again.
//!
//! Only facts that follow from the bytes (and, for the correlation id, the provider's
//! correlation path, which is hashed with them) are kept, never a key's state: a retry found here
//! still goes through admission with the fingerprint kept, so an expired, reset or
//! reused key is judged exactly as if the body had been parsed (and the pipeline then
//! parses it, if the request is to run). Each worker thread keeps its own small table
//! (a recall shares only the correlation id's one allocation, by its count); a slot that
//! two bodies share keeps the later.

use std::cell::RefCell;
use std::hash::{BuildHasher, Hash};
use std::sync::LazyLock;

use crate::idempotency::store::Fingerprint;
use crate::stripe::ids::CorrelationId;

/// A request's path and body and what reads them (the provider's correlation path),
/// hashed (64 bits, seeded per process), with the body's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawKey {
    hash: u64,
    len: u32,
}

impl RawKey {
    /// The key of a `POST` to `path` with the form body `body`, read by a provider
    /// whose correlation path is `scope`; `None` for a body too long to be a retry worth
    /// remembering.
    pub fn of(scope: &impl Hash, path: &str, body: &[u8]) -> Option<Self> {
        static SEED: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
        let len = u32::try_from(body.len()).ok().filter(|n| *n as usize <= MAX_BODY)?;
        let hash = SEED.hash_one((scope, path, body));
        Some(Self { hash, len })
    }

    fn slot(self) -> usize {
        (self.hash as usize) % SLOTS
    }
}

/// What a request's bytes told the pipeline.
#[derive(Debug, Clone)]
pub struct Known {
    pub fingerprint: Fingerprint,
    pub correlation_id: Option<CorrelationId>,
}

/// Slots of each thread's table (~56 bytes each).
const SLOTS: usize = 4096;

/// The longest body remembered (a payment's form is ~150 bytes).
const MAX_BODY: usize = 4096;

thread_local! {
    static TABLE: RefCell<Vec<Option<(RawKey, Known)>>> = const { RefCell::new(Vec::new()) };
}

/// What a byte-identical request answered before on this thread told the pipeline.
pub fn recall(raw: RawKey) -> Option<Known> {
    TABLE.with(|t| match t.borrow().get(raw.slot()) {
        Some(Some((k, known))) if *k == raw => Some(known.clone()),
        _ => None,
    })
}

/// Remembers what `raw`'s bytes told the pipeline (called once they were replayed).
pub fn remember(raw: RawKey, known: Known) {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        if t.is_empty() {
            t.resize_with(SLOTS, || None);
        }
        t[raw.slot()] = Some((raw, known));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stripe::params::Params;

    fn known(body: &str) -> Known {
        Known {
            fingerprint: Fingerprint::of(
                "/v1/charges",
                "POST",
                "/v1/charges",
                &Params::from_form(body.as_bytes()).unwrap(),
            ),
            correlation_id: Some(CorrelationId::new(body)),
        }
    }

    #[test]
    fn bytes_remembered_are_recalled_and_only_those_bytes_at_that_path() {
        let a = RawKey::of(&"metadata.order_id", "/v1/charges", b"amount=1").unwrap();
        assert!(recall(a).is_none(), "nothing remembered yet");
        remember(a, known("amount=1"));
        let got = recall(a).expect("remembered");
        assert_eq!(got.correlation_id, Some(CorrelationId::new("amount=1")));
        assert_eq!(got.fingerprint, known("amount=1").fingerprint);
        assert_eq!(
            RawKey::of(&"metadata.order_id", "/v1/charges", b"amount=1"),
            Some(a),
            "the same bytes, the same key"
        );
        for other in [
            RawKey::of(&"metadata.order_id", "/v1/charges", b"amount=2").unwrap(),
            RawKey::of(&"metadata.order_id", "/v1/charges", b"amount=1 ").unwrap(),
            RawKey::of(&"metadata.order_id", "/v1/refunds", b"amount=1").unwrap(),
            RawKey::of(&"description", "/v1/charges", b"amount=1").unwrap(),
        ] {
            assert!(other != a && recall(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn a_slot_keeps_the_later_of_two_bodies_and_each_thread_has_its_own() {
        let bodies: Vec<String> = (0..SLOTS * 4).map(|i| format!("amount={i}")).collect();
        let keys: Vec<RawKey> = bodies
            .iter()
            .map(|b| RawKey::of(&"metadata.order_id", "/v1/charges", b.as_bytes()).unwrap())
            .collect();
        let (first, later) = (0..keys.len())
            .flat_map(|i| (i + 1..keys.len()).map(move |j| (i, j)))
            .find(|&(i, j)| keys[i].slot() == keys[j].slot())
            .expect("two bodies in one slot");
        remember(keys[first], known(&bodies[first]));
        remember(keys[later], known(&bodies[later]));
        assert!(recall(keys[first]).is_none(), "pushed out");
        assert!(recall(keys[later]).is_some());
        let elsewhere = keys[later];
        assert!(std::thread::spawn(move || recall(elsewhere).is_none()).join().unwrap());
    }

    #[test]
    fn a_long_body_is_not_remembered() {
        assert!(RawKey::of(&"metadata.order_id", "/v1/charges", &vec![b'a'; MAX_BODY + 1]).is_none());
        assert!(RawKey::of(&"metadata.order_id", "/v1/charges", &vec![b'a'; MAX_BODY]).is_some());
    }
}
