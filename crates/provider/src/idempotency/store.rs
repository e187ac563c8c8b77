//! The idempotency store: Stripe's semantics for `Idempotency-Key`, exactly.
//!
//! A key is scoped to the API key that sent it. The first request with a key claims it
//! ([`Begin::Proceed`]); once the endpoint has executed, its status and body are stored
//! and every later request with the same key and the same parameters gets them back
//! ([`Begin::Replay`]) — declines and 500s included. While the first is still running a
//! second gets [`Begin::InUse`] (409); the same key with other parameters gets
//! [`Begin::Mismatch`], on another endpoint [`Begin::OtherEndpoint`]. A claim dropped without a stored response (a validation failure,
//! a 429, a cancelled request) frees the key again. Keys expire after the TTL, after
//! which the same key starts a new request.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hashbrown::HashTable;
use sha2::{Digest, Sha256};

use crate::stripe::ids::{ApiKey, ObjectId, RequestId};

use crate::idempotency::key::IdempotencyKey;
use crate::reply::Reply;
use crate::state::index;
use crate::state::shard::{Hasher, Sharded};
use crate::stripe::params::Params;

/// What a request asks for: the endpoint it was sent to (its path pattern, e.g.
/// `/v1/payment_intents/{id}/confirm`, as an [`EndpointTag`]), and a hash of its method,
/// path and canonical parameters (the first 128 bits of their SHA-256, streamed: the
/// canonical form is never built). A key reused on another endpoint, or with other
/// parameters, is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    endpoint: EndpointTag,
    digest: [u8; 16],
}

/// An endpoint's path pattern in two bytes (a million stored keys would otherwise each
/// hold a 16-byte `&str` to one of a few dozen patterns): the pattern's FNV-1a hash,
/// folded to 16 bits. Every endpoint fauxpay serves has its own (a test checks);
/// [`EndpointTag::is`] finds the pattern again for an error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndpointTag(u16);

impl EndpointTag {
    pub fn of(pattern: &str) -> Self {
        let mut h: u32 = 0x811c_9dc5;
        for &b in pattern.as_bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        Self((h ^ (h >> 16)) as u16)
    }

    /// Whether `pattern` is this tag's.
    pub fn is(self, pattern: &str) -> bool {
        Self::of(pattern) == self
    }
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Fingerprint {
    pub fn of(endpoint: &str, method: &str, path: &str, params: &Params) -> Self {
        let mut h = Sha256::new();
        h.update(method.as_bytes());
        h.update([0]);
        h.update(path.as_bytes());
        h.update([0]);
        params.write_canonical(HashWriter(&mut h));
        let digest = h.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        Self {
            endpoint: EndpointTag::of(endpoint),
            digest: out,
        }
    }

    /// The digest as two numbers (the data dir keeps it, so recovery need not hash again).
    pub fn digest(&self) -> [u64; 2] {
        let (a, b) = self.digest.split_at(8);
        [
            u64::from_le_bytes(a.try_into().unwrap_or_default()),
            u64::from_le_bytes(b.try_into().unwrap_or_default()),
        ]
    }

    /// The fingerprint of [`Fingerprint::digest`] on `endpoint`.
    pub fn from_digest(endpoint: &str, [a, b]: [u64; 2]) -> Self {
        let mut digest = [0u8; 16];
        digest[..8].copy_from_slice(&a.to_le_bytes());
        digest[8..].copy_from_slice(&b.to_le_bytes());
        Self {
            endpoint: EndpointTag::of(endpoint),
            digest,
        }
    }
}

/// A response kept under a key, replayed as it was first sent.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub status: u16,
    pub should_retry: Option<bool>,
    /// The request that produced it (sent back as `Original-Request`).
    pub request_id: RequestId,
    pub body: StoredBody,
}

/// A stored body: the object answered, or the exact bytes sent.
#[derive(Debug, Clone)]
pub enum StoredBody {
    /// The object itself, shared with the tables (an immutable snapshot: updates
    /// replace a table's `Arc`): its JSON is written when sent, the same bytes each time,
    /// so a million stored keys do not keep a million JSON copies.
    Object(Reply),
    /// The bytes, and the object they name (errors; an object's JSON once replayed).
    Bytes(Arc<(Bytes, Option<ObjectId>)>),
}

impl StoredResponse {
    pub fn new(status: u16, should_retry: Option<bool>, request_id: RequestId, body: StoredBody) -> Self {
        Self {
            status,
            should_retry,
            request_id,
            body,
        }
    }

    /// The response as a record keeps it.
    fn kept(self) -> (Outcome, Kept) {
        (
            Outcome::of(self.status, self.should_retry),
            Kept {
                request_id: self.request_id,
                body: self.body,
            },
        )
    }

    /// The response a record kept.
    fn from_kept(outcome: Outcome, kept: Kept) -> Self {
        Self::new(outcome.status(), outcome.should_retry(), kept.request_id, kept.body)
    }

    /// The body as sent.
    pub fn bytes(&self) -> Bytes {
        match &self.body {
            StoredBody::Object(reply) => reply.to_bytes(),
            StoredBody::Bytes(b) => b.0.clone(),
        }
    }

    /// The object the response names, if any.
    pub fn object(&self) -> Option<ObjectId> {
        match &self.body {
            StoredBody::Object(reply) => reply.object(),
            StoredBody::Bytes(b) => b.1,
        }
    }
}

impl Kept {
    /// The same with its body as bytes, when it is still an object: a key that is
    /// replayed once is often replayed again, so its JSON is kept from then on.
    fn materialized(&self) -> Option<Self> {
        match &self.body {
            StoredBody::Object(reply) => Some(Self {
                request_id: self.request_id,
                body: StoredBody::Bytes(Arc::new((reply.to_bytes(), reply.object()))),
            }),
            StoredBody::Bytes(_) => None,
        }
    }
}

/// A stored response's status and `Stripe-Should-Retry`, in two bytes beside the
/// fingerprint (a [`StoredResponse`] of its own would take eight with its padding): the
/// status in the low 12 bits, the flag above them (0 none, 1 false, 2 true).
#[derive(Debug, Clone, Copy, Default)]
struct Outcome(u16);

impl Outcome {
    const STATUS: u16 = (1 << 12) - 1;

    fn of(status: u16, should_retry: Option<bool>) -> Self {
        // An HTTP status is three digits.
        debug_assert!(status <= Self::STATUS);
        let flag = match should_retry {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        Self((status & Self::STATUS) | flag << 12)
    }

    fn status(self) -> u16 {
        self.0 & Self::STATUS
    }

    fn should_retry(self) -> Option<bool> {
        match self.0 >> 12 {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }
}

/// What a completed key keeps of its response besides its [`Outcome`].
#[derive(Debug, Clone)]
struct Kept {
    request_id: RequestId,
    body: StoredBody,
}

/// A key's record: 64 bytes.
struct Record {
    fingerprint: Fingerprint,
    /// The stored response's status and flag (meaningless while `kept` is `None`).
    outcome: Outcome,
    /// `None` while the first request is in flight.
    kept: Option<Kept>,
    /// When the key was claimed, in nanoseconds since the store was made.
    /// (Negative for a key restored from the data dir that is older than the store.)
    created: i64,
    token: u32,
}

/// A key, scoped to its API key, and its record.
struct Entry {
    api_key: ApiKey,
    key: IdempotencyKey,
    record: Record,
}

/// One shard: the entries in a slab (freed slots are reused) and an index of positions
/// (4 bytes a key), so a million keys cost little beyond their records.
#[derive(Default)]
struct Shard {
    index: HashTable<u32>,
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
}

impl Shard {
    fn position(&self, hash: u64, api_key: &ApiKey, key: &IdempotencyKey) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash, |&i| {
                entries[i as usize]
                    .as_ref()
                    .is_some_and(|e| e.key == *key && e.api_key == *api_key)
            })
            .map(|&i| i as usize)
    }

    fn insert(&mut self, hash: u64, entry: Entry, hasher: &Hasher) {
        let position = match self.free.pop() {
            Some(p) => {
                self.entries[p as usize] = Some(entry);
                p
            }
            None => {
                self.entries.push(Some(entry));
                (self.entries.len() - 1) as u32
            }
        };
        index::make_room(&mut self.index, rehash(hasher, &self.entries));
        self.index.insert_unique(hash, position, rehash(hasher, &self.entries));
    }

    fn reserve(&mut self, n: usize, hasher: &Hasher) {
        // Best effort (see `Provider::reserve`).
        let _ = self.entries.try_reserve(n);
        let _ = self.index.try_reserve(n, rehash(hasher, &self.entries));
    }

    fn remove(&mut self, hash: u64, position: usize) {
        if let Ok(found) = self.index.find_entry(hash, |&i| i as usize == position) {
            found.remove();
        }
        self.entries[position] = None;
        self.free.push(position as u32);
    }
}

/// The hash of the entry an index slot points at: what the index needs when it grows.
fn rehash<'a>(hasher: &'a Hasher, entries: &'a [Option<Entry>]) -> impl Fn(&u32) -> u64 + 'a {
    move |&i| {
        entries[i as usize]
            .as_ref()
            .map_or(0, |e| scoped_hash(hasher, &e.api_key, &e.key))
    }
}

fn scoped_hash(hasher: &Hasher, api_key: &ApiKey, key: &IdempotencyKey) -> u64 {
    hasher.hash_one((api_key, key))
}

/// What the store says about a request carrying a key.
pub enum Begin {
    /// The key is new (or expired): run the endpoint, then complete the claim.
    Proceed(Claim),
    /// The key has a stored response for these parameters.
    Replay(StoredResponse),
    /// A request with this key is still executing.
    InUse,
    /// The key was used with other parameters.
    Mismatch,
    /// The key was first used on another endpoint (its path pattern's tag).
    OtherEndpoint(EndpointTag),
}

/// The store of idempotency keys, sharded by (API key, key).
pub struct IdempotencyStore {
    shards: Sharded<Shard>,
    hasher: Hasher,
    /// The TTL in milliseconds (a fault profile may change it at run time).
    ttl_ms: AtomicU64,
    /// On a cache line of its own: every insert writes it, and its neighbours are read.
    next_token: crossbeam_utils::CachePadded<AtomicU32>,
    /// Records keep their creation time relative to this.
    epoch: Instant,
}

impl IdempotencyStore {
    pub fn new(ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            shards: Sharded::default(),
            hasher: Hasher::default(),
            ttl_ms: AtomicU64::new(ttl.as_millis() as u64),
            next_token: crossbeam_utils::CachePadded::new(AtomicU32::new(1)),
            epoch: Instant::now(),
        })
    }

    /// Makes room for about `n` more keys (recovery, from the log's length).
    pub fn reserve(&self, n: usize) {
        for (s, share) in self.shards.shares(n) {
            s.lock().reserve(share, &self.hasher);
        }
    }

    fn since_epoch(&self, now: Instant) -> i64 {
        i64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(i64::MAX)
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.load(Ordering::Relaxed))
    }

    pub fn set_ttl(&self, ttl: Duration) {
        self.ttl_ms.store(ttl.as_millis() as u64, Ordering::Relaxed);
    }

    fn expired(&self, r: &Record, now: i64) -> bool {
        r.kept.is_some() && now.saturating_sub(r.created) >= i64::try_from(self.ttl().as_nanos()).unwrap_or(i64::MAX)
    }

    /// Looks `key` up for a request with `fingerprint`, claiming it if it is free.
    pub fn begin(
        self: &Arc<Self>,
        api_key: &ApiKey,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
        now: Instant,
    ) -> Begin {
        let now = self.since_epoch(now);
        let hash = scoped_hash(&self.hasher, api_key, key);
        let mut shard = self.shards.lock(&hash);
        if let Some(position) = shard.position(hash, api_key, key) {
            if let Some(existing) = shard.entries[position].as_mut().map(|e| &mut e.record) {
                if !self.expired(existing, now) {
                    if existing.fingerprint.endpoint != fingerprint.endpoint {
                        return Begin::OtherEndpoint(existing.fingerprint.endpoint);
                    }
                    if existing.fingerprint != fingerprint {
                        return Begin::Mismatch;
                    }
                    let outcome = existing.outcome;
                    return match &existing.kept {
                        None => Begin::InUse,
                        Some(kept) => match kept.materialized() {
                            Some(bytes) => {
                                existing.kept = Some(bytes.clone());
                                Begin::Replay(StoredResponse::from_kept(outcome, bytes))
                            }
                            None => Begin::Replay(StoredResponse::from_kept(outcome, kept.clone())),
                        },
                    };
                }
            }
            shard.remove(hash, position);
        }
        let token = self.store_new(&mut shard, hash, (api_key, key), fingerprint, None, now);
        Begin::Proceed(Claim {
            store: self.clone(),
            api_key: api_key.clone(),
            key: key.clone(),
            fingerprint,
            token,
            done: false,
        })
    }

    /// Stores `response` for `key` as if its request had run `age` ago (recovery from
    /// the data dir); a key already past the TTL is not stored.
    pub fn restore(
        self: &Arc<Self>,
        api_key: &ApiKey,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
        response: StoredResponse,
        now: Instant,
        age: Duration,
    ) {
        if age >= self.ttl() {
            return;
        }
        // What a claim completed at once would store, under one lock and one lookup: a
        // key stored and not expired keeps its response (as `begin` would refuse a
        // second claim); an expired one is replaced.
        let now = self.since_epoch(now);
        let created = now.saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX));
        let hash = scoped_hash(&self.hasher, api_key, key);
        let mut shard = self.shards.lock(&hash);
        if let Some(position) = shard.position(hash, api_key, key) {
            if shard.entries[position]
                .as_ref()
                .is_some_and(|e| !self.expired(&e.record, now))
            {
                return;
            }
            shard.remove(hash, position);
        }
        self.store_new(&mut shard, hash, (api_key, key), fingerprint, Some(response), created);
    }

    /// Stores a new entry for `(api_key, key)` in `shard` (locked, the key absent): in
    /// flight while `state` is `None`. Returns its token.
    fn store_new(
        &self,
        shard: &mut Shard,
        hash: u64,
        (api_key, key): (&ApiKey, &IdempotencyKey),
        fingerprint: Fingerprint,
        state: Option<StoredResponse>,
        created: i64,
    ) -> u32 {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (outcome, kept) = match state.map(StoredResponse::kept) {
            Some((outcome, kept)) => (outcome, Some(kept)),
            None => (Outcome::default(), None),
        };
        let entry = Entry {
            api_key: api_key.clone(),
            key: key.clone(),
            record: Record {
                fingerprint,
                outcome,
                kept,
                created,
                token,
            },
        };
        shard.insert(hash, entry, &self.hasher);
        token
    }

    /// Drops responses older than the TTL; returns how many went.
    pub fn purge_expired(&self, now: Instant) -> usize {
        let now = self.since_epoch(now);
        let mut purged = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for position in 0..shard.entries.len() {
                let hash = match &shard.entries[position] {
                    Some(e) if self.expired(&e.record, now) => scoped_hash(&self.hasher, &e.api_key, &e.key),
                    _ => continue,
                };
                shard.remove(hash, position);
                purged += 1;
            }
        }
        purged
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().index.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            *s.lock() = Shard::default();
        }
    }

    fn finish(&self, api_key: &ApiKey, key: &IdempotencyKey, token: u32, response: Option<StoredResponse>) {
        let hash = scoped_hash(&self.hasher, api_key, key);
        let mut shard = self.shards.lock(&hash);
        let Some(position) = shard.position(hash, api_key, key) else {
            return;
        };
        let Some(record) = shard.entries[position].as_mut().map(|e| &mut e.record) else {
            return;
        };
        if record.token != token {
            return;
        }
        match response {
            Some(resp) => {
                let (outcome, kept) = resp.kept();
                (record.outcome, record.kept) = (outcome, Some(kept));
            }
            None => shard.remove(hash, position),
        }
    }
}

/// A claim on a key by the request now executing. Completing it stores the response;
/// dropping it uncompleted frees the key (nothing is stored).
pub struct Claim {
    store: Arc<IdempotencyStore>,
    api_key: ApiKey,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    token: u32,
    done: bool,
}

impl Claim {
    /// The fingerprint of the request holding the claim.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    pub fn complete(mut self, response: StoredResponse) {
        self.done = true;
        self.store.finish(&self.api_key, &self.key, self.token, Some(response));
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            self.store.finish(&self.api_key, &self.key, self.token, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(amount: &str) -> Fingerprint {
        Fingerprint::of(
            "/v1/payment_intents",
            "POST",
            "/v1/payment_intents",
            &Params::from_form(format!("amount={amount}").as_bytes()).unwrap(),
        )
    }

    #[test]
    fn fingerprint_is_the_hash_of_the_canonical_form_whatever_its_length() {
        for n in [1, 10, 40, 200] {
            let body: String = (0..n)
                .map(|i| format!("metadata[k{i}]={}&", "v".repeat(i % 7)))
                .collect();
            let params = Params::from_form(body.as_bytes()).unwrap();
            let mut h = Sha256::new();
            h.update(b"POST\0/v1/charges\0");
            h.update(params.canonical());
            let digest = h.finalize();
            assert_eq!(
                Fingerprint::of("/v1/charges", "POST", "/v1/charges", &params).digest,
                digest[..16],
                "{n} params"
            );
        }
    }

    fn resp(status: u16) -> StoredResponse {
        StoredResponse::new(
            status,
            None,
            RequestId::generate(),
            StoredBody::Bytes(Arc::new((Bytes::from_static(b"{}"), None))),
        )
    }

    fn keys() -> (ApiKey, IdempotencyKey) {
        (ApiKey::new("sk_test_a"), IdempotencyKey::parse("k1").unwrap())
    }

    fn replayed_status(s: &Arc<IdempotencyStore>, now: Instant) -> Option<u16> {
        let (a, k) = keys();
        match s.begin(&a, &k, fp("1"), now) {
            Begin::Replay(r) => Some(r.status),
            _ => None,
        }
    }

    #[test]
    fn a_restored_key_replays_its_response_until_its_age_reaches_the_ttl() {
        let s = IdempotencyStore::new(Duration::from_secs(60));
        let (a, k) = keys();
        let now = Instant::now();
        s.restore(&a, &k, fp("1"), resp(402), now, Duration::from_secs(70));
        assert_eq!(s.len(), 0, "older than the TTL: not stored");
        s.restore(&a, &k, fp("1"), resp(402), now, Duration::from_secs(50));
        s.restore(&a, &k, fp("1"), resp(200), now, Duration::from_secs(1));
        assert_eq!(s.len(), 1);
        assert_eq!(
            replayed_status(&s, now),
            Some(402),
            "a live key keeps its first response"
        );
        let later = now + Duration::from_secs(11);
        assert!(
            replayed_status(&s, later).is_none(),
            "50 s old + 11 s: expired, claimed anew"
        );
        let s = IdempotencyStore::new(Duration::from_secs(60));
        s.restore(&a, &k, fp("1"), resp(402), now, Duration::from_secs(59));
        s.restore(&a, &k, fp("1"), resp(200), later, Duration::ZERO);
        assert_eq!(replayed_status(&s, later), Some(200), "an expired key is replaced");
    }

    /// A stored key is its entry in a shard's slab: 80 bytes, its endpoint two of them,
    /// its response's status and flag two more.
    #[test]
    fn an_entry_is_compact() {
        assert_eq!(std::mem::size_of::<Fingerprint>(), 18);
        let n = std::mem::size_of::<Option<Entry>>();
        assert!(n <= 80, "an entry is {n} bytes");
        for status in [200, 402, 409, 429, 500, 999] {
            for retry in [None, Some(false), Some(true)] {
                let outcome = Outcome::of(status, retry);
                assert_eq!((outcome.status(), outcome.should_retry()), (status, retry));
            }
        }
        assert!(EndpointTag::of("/v1/charges").is("/v1/charges"));
        assert!(!EndpointTag::of("/v1/charges").is("/v1/customers"));
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
        let elsewhere = Fingerprint::of("/v1/customers", "POST", "/v1/customers", &Params::default());
        assert!(matches!(
            s.begin(&a, &k, elsewhere, now),
            Begin::OtherEndpoint(first) if first.is("/v1/payment_intents")
        ));
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
