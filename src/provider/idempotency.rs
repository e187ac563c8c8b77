//! The idempotency store: Stripe's semantics for `Idempotency-Key`, exactly.
//!
//! A key is scoped to the API key that sent it. The first request with a key claims it
//! ([`Begin::Proceed`]); once the endpoint has executed, its status and body are stored
//! and every later request with the same key and the same parameters gets them back
//! ([`Begin::Replay`]) — declines and 500s included. While the first is still running a
//! second gets [`Begin::InUse`] (409); the same key with other parameters gets
//! [`Begin::Mismatch`]. A claim dropped without a stored response (a validation failure,
//! a 429, a cancelled request) frees the key again. Keys expire after the TTL, after
//! which the same key starts a new request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::ids::{ApiKey, IdempotencyKey, RequestId};
use super::params::Params;
use super::shard::Sharded;

/// How strictly keys are treated: Stripe's behaviour, or the IETF
/// `Idempotency-Key` header draft's (422 on a mismatch, RFC 8941 string keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Stripe,
    Ietf,
}

/// A hash of what a request asks for: method, path and canonical parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    pub fn of(method: &str, path: &str, params: &Params) -> Self {
        let mut h = Sha256::new();
        h.update(method.as_bytes());
        h.update([0]);
        h.update(path.as_bytes());
        h.update([0]);
        h.update(params.canonical());
        Self(h.finalize().into())
    }
}

/// A response kept under a key, replayed as it was first sent.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Bytes,
    /// The request that produced it (sent back as `Original-Request`).
    pub request_id: RequestId,
    pub should_retry: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ScopedKey {
    api_key: ApiKey,
    key: IdempotencyKey,
}

enum State {
    InFlight,
    Done(Arc<StoredResponse>),
}

struct Record {
    fingerprint: Fingerprint,
    state: State,
    created: Instant,
    token: u64,
}

/// What the store says about a request carrying a key.
pub enum Begin {
    /// The key is new (or expired): run the endpoint, then complete the claim.
    Proceed(Claim),
    /// The key has a stored response for these parameters.
    Replay(Arc<StoredResponse>),
    /// A request with this key is still executing.
    InUse,
    /// The key was used with other parameters.
    Mismatch,
}

/// The store of idempotency keys.
pub struct IdempotencyStore {
    shards: Sharded<HashMap<ScopedKey, Record>>,
    /// The TTL in milliseconds (a fault profile may change it at run time).
    ttl_ms: AtomicU64,
    next_token: AtomicU64,
}

impl IdempotencyStore {
    pub fn new(ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            shards: Sharded::default(),
            ttl_ms: AtomicU64::new(ttl.as_millis() as u64),
            next_token: AtomicU64::new(1),
        })
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
    }

    pub fn set_ttl(&self, ttl: Duration) {
        self.ttl_ms.store(ttl.as_millis() as u64, Ordering::Relaxed);
    }

    fn expired(&self, r: &Record, now: Instant) -> bool {
        matches!(r.state, State::Done(_)) && now.saturating_duration_since(r.created) >= self.ttl()
    }

    /// Looks `key` up for a request with `fingerprint`, claiming it if it is free.
    pub fn begin(
        self: &Arc<Self>,
        api_key: &ApiKey,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
        now: Instant,
    ) -> Begin {
        let scoped = ScopedKey {
            api_key: api_key.clone(),
            key: key.clone(),
        };
        let mut shard = self.shards.lock(&scoped);
        if let Some(existing) = shard.get(&scoped) {
            if !self.expired(existing, now) {
                if existing.fingerprint != fingerprint {
                    return Begin::Mismatch;
                }
                return match &existing.state {
                    State::InFlight => Begin::InUse,
                    State::Done(resp) => Begin::Replay(resp.clone()),
                };
            }
        }
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        shard.insert(
            scoped.clone(),
            Record {
                fingerprint,
                state: State::InFlight,
                created: now,
                token,
            },
        );
        Begin::Proceed(Claim {
            store: self.clone(),
            key: scoped,
            token,
            done: false,
        })
    }

    /// Drops responses older than the TTL; returns how many went.
    pub fn purge_expired(&self, now: Instant) -> usize {
        let mut purged = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let before = shard.len();
            shard.retain(|_, r| !self.expired(r, now));
            purged += before - shard.len();
        }
        purged
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.lock().clear();
        }
    }

    fn finish(&self, key: &ScopedKey, token: u64, response: Option<Arc<StoredResponse>>) {
        let mut shard = self.shards.lock(key);
        match (shard.get_mut(key), response) {
            (Some(r), Some(resp)) if r.token == token => r.state = State::Done(resp),
            (Some(r), None) if r.token == token => {
                shard.remove(key);
            }
            _ => {}
        }
    }
}

/// A claim on a key by the request now executing. Completing it stores the response;
/// dropping it uncompleted frees the key (nothing is stored).
pub struct Claim {
    store: Arc<IdempotencyStore>,
    key: ScopedKey,
    token: u64,
    done: bool,
}

impl Claim {
    pub fn complete(mut self, response: Arc<StoredResponse>) {
        self.done = true;
        self.store.finish(&self.key, self.token, Some(response));
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            self.store.finish(&self.key, self.token, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(amount: &str) -> Fingerprint {
        Fingerprint::of(
            "POST",
            "/v1/payment_intents",
            &Params::from_form(format!("amount={amount}").as_bytes()).unwrap(),
        )
    }

    fn resp(status: u16) -> Arc<StoredResponse> {
        Arc::new(StoredResponse {
            status,
            body: Bytes::from_static(b"{}"),
            request_id: RequestId::generate(),
            should_retry: None,
        })
    }

    fn keys() -> (ApiKey, IdempotencyKey) {
        (ApiKey::new("sk_test_a"), IdempotencyKey::parse("k1").unwrap())
    }

    #[test]
    fn first_claims_second_is_in_use_then_replays() {
        let s = IdempotencyStore::new(Duration::from_secs(60));
        let (a, k) = keys();
        let now = Instant::now();
        let Begin::Proceed(claim) = s.begin(&a, &k, fp("100"), now) else {
            panic!("expected proceed")
        };
        assert!(matches!(s.begin(&a, &k, fp("100"), now), Begin::InUse));
        assert!(matches!(s.begin(&a, &k, fp("200"), now), Begin::Mismatch));
        claim.complete(resp(500));
        match s.begin(&a, &k, fp("100"), now) {
            Begin::Replay(r) => assert_eq!(r.status, 500),
            _ => panic!("expected replay"),
        }
        assert!(matches!(s.begin(&a, &k, fp("200"), now), Begin::Mismatch));
    }

    #[test]
    fn dropped_claim_frees_the_key() {
        let s = IdempotencyStore::new(Duration::from_secs(60));
        let (a, k) = keys();
        let now = Instant::now();
        let Begin::Proceed(claim) = s.begin(&a, &k, fp("100"), now) else {
            panic!()
        };
        drop(claim);
        assert!(s.is_empty());
        // A different body is fine after a validation failure: nothing was stored.
        assert!(matches!(s.begin(&a, &k, fp("200"), now), Begin::Proceed(_)));
    }

    #[test]
    fn keys_are_scoped_per_api_key() {
        let s = IdempotencyStore::new(Duration::from_secs(60));
        let (a, k) = keys();
        let now = Instant::now();
        let Begin::Proceed(c) = s.begin(&a, &k, fp("100"), now) else {
            panic!()
        };
        c.complete(resp(200));
        assert!(matches!(
            s.begin(&ApiKey::new("sk_test_b"), &k, fp("200"), now),
            Begin::Proceed(_)
        ));
    }

    #[test]
    fn keys_expire_after_the_ttl() {
        let s = IdempotencyStore::new(Duration::from_secs(60));
        let (a, k) = keys();
        let t0 = Instant::now();
        let Begin::Proceed(c) = s.begin(&a, &k, fp("100"), t0) else {
            panic!()
        };
        c.complete(resp(200));
        assert!(matches!(
            s.begin(&a, &k, fp("100"), t0 + Duration::from_secs(59)),
            Begin::Replay(_)
        ));
        assert_eq!(s.purge_expired(t0 + Duration::from_secs(59)), 0);
        let later = t0 + Duration::from_secs(61);
        assert_eq!(s.purge_expired(later), 1);
        let Begin::Proceed(c) = s.begin(&a, &k, fp("100"), later) else {
            panic!("expired key must start anew")
        };
        c.complete(resp(200));
        // A stale claim token can neither store nor free the new record.
        assert!(matches!(s.begin(&a, &k, fp("100"), later), Begin::Replay(_)));
    }
}
