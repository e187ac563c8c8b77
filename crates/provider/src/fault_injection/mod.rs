//! Fault injection at run time: the active fault profile, attempt numbers and forced
//! faults (the request log is `journal`).
//!
//! [`FaultInjector`] holds the active profile (swapped atomically by
//! `PUT /__fauxpay/profile`), counts attempts per request identity (the idempotency key,
//! else the correlation id, else a fresh request number), and turns each request into a
//! [`Plan`]: the engine's deterministic [`Decision`], or a decision the request forced
//! through a `Fauxpay-Fault` header or a `pm_fault_…` payment method. It also keeps
//! fault counters for `/metrics`.

pub mod attempt;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

use crate::error::ApiError;
use crate::idempotency::key::IdempotencyKey;
use crate::state::clock::now_ms;
use crate::state::shard::{FastMap, Hasher, Sharded};
use crate::state::thin::ThinStr;
use crate::stripe::cards::Decline;
use crate::stripe::ids::CorrelationId;
use crate::stripe::params::Params;
use fauxpay_faults::{self as faults, Decision, Fault, FaultEngine, FaultKind, Profile, RequestFacts, When};

/// The profile in force and when it became active.
pub struct ActiveProfile {
    pub engine: FaultEngine,
    /// Whether a rule matches on metadata (otherwise requests' metadata is not copied).
    needs_metadata: bool,
    /// Whether a rule matches on a parameter (amount, payment method or metadata): if
    /// none does, a request's plan is the same whatever its parameters, unless its
    /// payment method forces a fault.
    reads_params: bool,
    /// The profile's text as given (TOML or JSON), served back by `GET /__fauxpay/profile`.
    pub source: String,
    pub activated_at: Instant,
    pub activated_ms: u64,
}

impl ActiveProfile {
    /// Whether a rule matches on a request's parameters (the replay lane is closed while
    /// one does: [`crate::idempotency::lane`]).
    pub fn reads_params(&self) -> bool {
        self.reads_params
    }
}

/// The payment method `params` name, as the plan reads it.
fn payment_method_of(params: &Params) -> Option<&str> {
    params.opt_str("payment_method").ok().flatten()
}

/// Whether `params` name a payment method that forces a fault (the plan then decides
/// from the parameters, whatever the profile).
pub fn forced_by_params(params: &Params) -> bool {
    payment_method_of(params)
        .and_then(faults::forced_by_payment_method)
        .is_some()
}

/// What fault injection will do to one request.
#[derive(Debug, Clone)]
pub struct Plan {
    pub identity: ThinStr,
    pub attempt: u32,
    /// Whether the identity's attempts are counted (it can come back: a key or a
    /// correlation id), so the data dir keeps the count.
    pub counted: bool,
    pub decision: Decision,
    /// The decision's label (`drop_response after_commit (rule 0)`), for the ledger and log.
    pub label: Option<Arc<str>>,
}

impl Plan {
    /// The fault acting on the request at `when` ([`Fault::when`] says which): before
    /// the commit nothing is charged and nothing stored; after it the response is kept
    /// from the client, replaced or dribbled. A decline is not among them: it acts
    /// inside the operation, through [`Plan::decline`].
    pub fn acting(&self, when: When) -> Option<&Fault> {
        self.decision
            .fault
            .as_ref()
            .filter(|f| f.when() == when && !matches!(f, Fault::Decline { .. }))
    }

    /// A decline the fault forces in place of the card's outcome.
    pub fn decline(&self) -> Option<Decline> {
        match &self.decision.fault {
            Some(Fault::Decline {
                code,
                decline_code,
                message,
            }) => Some(Decline {
                code: code.clone().into(),
                decline_code: decline_code.clone().into(),
                message: message.clone().into(),
            }),
            _ => None,
        }
    }
}

/// What the caller knows about a request when planning its faults.
pub struct PlanInput<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub params: &'a Params,
    pub idempotency_key: Option<&'a IdempotencyKey>,
    pub correlation_id: Option<&'a CorrelationId>,
    /// The `Fauxpay-Fault` header, if sent.
    pub forced: Option<&'a str>,
    /// The provider's time now (its [`Clock`](crate::state::clock::Clock)).
    pub now: Instant,
    /// The system's monotonic clock now, which `now` is moved forward from: a profile's
    /// windows count real time since it became active.
    pub real: Instant,
}

/// One identity's attempts: how many, and when the last one came (nanoseconds since
/// the injector's epoch), so that it can expire with the identity's key.
struct Counted {
    identity: ThinStr,
    /// The identity's [`identity_hash`], kept (in what was the entry's padding) so that the
    /// table grows without reading any identity.
    hash: u32,
    count: u32,
    /// (Negative for an attempt restored from the data dir that is older than the injector.)
    last_ns: i64,
}

/// Attempt numbers by identity. Only identities that can come back are kept (an
/// idempotency key, a correlation id); each leaves when its last attempt is older than
/// the key TTL ([`FaultInjector::purge_attempts`]), so the table is bounded like the
/// idempotency store.
#[derive(Default)]
struct Attempts {
    table: HashTable<Counted>,
}

const _: () = assert!(std::mem::size_of::<Counted>() == 24, "a counted identity grew");

impl Attempts {
    /// Counts one more attempt of `identity` at `now_ns`; returns its number (1 for the first).
    fn next(&mut self, hash: u32, identity: &ThinStr, now_ns: i64) -> u32 {
        // One probe finds the identity or the slot for it.
        match self.table.entry(widen(hash), |c| c.identity == *identity, counted_hash) {
            Entry::Occupied(mut found) => {
                let c = found.get_mut();
                c.count = c.count.saturating_add(1);
                c.last_ns = now_ns;
                c.count
            }
            Entry::Vacant(slot) => {
                slot.insert(Counted {
                    identity: identity.clone(),
                    hash,
                    count: 1,
                    last_ns: now_ns,
                });
                1
            }
        }
    }
}

/// An identity's hash in the attempts' table: 32 bits, which its entry keeps.
fn identity_hash(hasher: &Hasher, identity: &ThinStr) -> u32 {
    hasher.hash_one(identity) as u32
}

/// 32 bits of hash as hashbrown reads 64: it places an entry by the low bits and tags it
/// with the top seven, here bits 25 to 31 of the 32.
fn widen(hash: u32) -> u64 {
    u64::from(hash) | (u64::from(hash) << 32)
}

/// A counted identity's hash, from its entry alone: what the attempts' table needs when
/// it grows (a growth reads no identity, so it takes no cache miss an entry).
fn counted_hash(c: &Counted) -> u64 {
    widen(c.hash)
}

pub struct FaultInjector {
    /// Read by every request without a write to memory other cores read (no lock word, no
    /// count).
    active: ArcSwap<ActiveProfile>,
    attempts: Sharded<Attempts>,
    hasher: Hasher,
    /// Attempts' times are kept relative to this.
    epoch: Instant,
    anonymous: AtomicU64,
    counts: Sharded<FastMap<(FaultKind, When), u64>>,
}

impl FaultInjector {
    pub fn new(profile: Profile, source: String) -> Self {
        Self {
            active: ArcSwap::from_pointee(activate(profile, source)),
            attempts: Sharded::default(),
            hasher: Hasher::default(),
            epoch: Instant::now(),
            anonymous: AtomicU64::new(0),
            counts: Sharded::default(),
        }
    }

    /// Makes room for about `n` more counted identities (recovery, from the log's length).
    pub fn reserve_attempts(&self, n: usize) {
        for (s, share) in self.attempts.shares(n) {
            // Best effort (see `Provider::reserve`).
            let _ = s.lock().table.try_reserve(share, counted_hash);
        }
    }

    pub fn active(&self) -> Arc<ActiveProfile> {
        self.active.load_full()
    }

    /// The active profile for a moment (a decision), without touching its `Arc`'s count.
    pub fn current(&self) -> arc_swap::Guard<Arc<ActiveProfile>> {
        self.active.load()
    }

    /// Makes `profile` the active one, atomically; its windows start now.
    pub fn swap(&self, profile: Profile, source: String) -> Arc<ActiveProfile> {
        let next = Arc::new(activate(profile, source));
        self.active.store(next.clone());
        next
    }

    /// Decides what happens to a request, counting it as its identity's next attempt.
    pub fn plan(&self, input: &PlanInput<'_>) -> Result<Plan, ApiError> {
        self.plan_under(&self.current(), input)
    }

    /// [`Self::plan`] under `active`, the profile the caller read (the pipeline reads it
    /// once, for the replay lane's check and the plan).
    pub fn plan_under(&self, active: &ActiveProfile, input: &PlanInput<'_>) -> Result<Plan, ApiError> {
        let (identity, returns): (ThinStr, bool) = match counted_identity(input.idempotency_key, input.correlation_id) {
            Some(identity) => (identity, true),
            None => (
                format!("request:{}", self.anonymous.fetch_add(1, Ordering::Relaxed) + 1).into(),
                false,
            ),
        };
        // An anonymous request is its identity's only attempt: nothing to remember.
        let attempt = if returns {
            let hash = identity_hash(&self.hasher, &identity);
            let now_ns = self.nanos(input.now);
            let mut shard = self.attempts.lock(&hash);
            shard.next(hash, &identity, now_ns)
        } else {
            1
        };
        let payment_method = payment_method_of(input.params);
        let decision = if let Some(header) = input.forced {
            faults::parse_forced(header).map_err(|e| {
                ApiError::invalid_request(
                    format!("Invalid Fauxpay-Fault header: {e}"),
                    Some("Fauxpay-Fault".into()),
                )
            })?
        } else if let Some((decision, _card)) = payment_method.and_then(faults::forced_by_payment_method) {
            decision
        } else {
            let metadata = if active.needs_metadata {
                metadata_of(input.params)
            } else {
                std::collections::BTreeMap::new()
            };
            active.engine.decide(&RequestFacts {
                identity: identity.as_str(),
                attempt,
                method: input.method,
                path: input.path,
                amount: input.params.opt_u64("amount").ok().flatten(),
                payment_method,
                metadata: &metadata,
                since_active: input.real.saturating_duration_since(active.activated_at),
            })
        };
        if let Some(f) = &decision.fault {
            let key = (f.fault_kind(), f.when());
            *self.counts.lock(&key).entry(key).or_default() += 1;
        }
        let label = decision.label().map(Arc::from);
        Ok(Plan {
            identity,
            attempt,
            counted: returns,
            decision,
            label,
        })
    }

    fn nanos(&self, at: Instant) -> i64 {
        i64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(i64::MAX)
    }

    /// Forgets the attempts of identities not seen for `ttl` (their keys have expired
    /// too: a retry after that is a new request); returns how many went.
    pub fn purge_attempts(&self, now: Instant, ttl: Duration) -> usize {
        let now = self.nanos(now);
        let ttl = i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX);
        let mut purged = 0;
        for shard in self.attempts.iter() {
            let mut shard = shard.lock();
            let before = shard.table.len();
            shard.table.retain(|c| now.saturating_sub(c.last_ns) < ttl);
            purged += before - shard.table.len();
        }
        purged
    }

    /// Sets `identity`'s attempt count to at least `n`, its last attempt `age` ago
    /// (recovery from the data dir; an idempotency key's identity shares its key's
    /// allocation, as a live request's does).
    pub fn restore_attempt(&self, identity: ThinStr, n: u32, now: Instant, age: Duration) {
        let hash = identity_hash(&self.hasher, &identity);
        let at = self
            .nanos(now)
            .saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX));
        let mut shard = self.attempts.lock(&hash);
        match shard.table.find_mut(widen(hash), |c| c.identity == identity) {
            Some(c) => {
                c.count = c.count.max(n);
                c.last_ns = c.last_ns.max(at);
            }
            None => {
                shard.table.insert_unique(
                    widen(hash),
                    Counted {
                        identity,
                        hash,
                        count: n,
                        last_ns: at,
                    },
                    counted_hash,
                );
            }
        }
    }

    /// Identities whose attempts are being counted.
    pub fn counted_identities(&self) -> usize {
        self.attempts.iter().map(|s| s.lock().table.len()).sum()
    }

    /// Faults applied so far, by kind and `when`.
    pub fn counts(&self) -> Vec<((FaultKind, When), u64)> {
        let mut out: Vec<_> = self
            .counts
            .iter()
            .flat_map(|s| s.lock().iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>())
            .collect();
        out.sort();
        out
    }

    /// Forgets attempt numbers (`POST /__fauxpay/reset`).
    pub fn reset(&self) {
        for s in self.attempts.iter() {
            *s.lock() = Attempts::default();
        }
        self.anonymous.store(0, Ordering::Relaxed);
    }
}

/// The identity whose attempts are counted for a request: its idempotency key, else its
/// correlation id; `None` for an anonymous request (its only attempt is its first).
pub fn counted_identity(key: Option<&IdempotencyKey>, correlation_id: Option<&CorrelationId>) -> Option<ThinStr> {
    match (key, correlation_id) {
        (Some(k), _) => Some(k.shared().clone()),
        (None, Some(c)) => Some(format!("correlation:{}", c.as_str()).into()),
        (None, None) => None,
    }
}

fn activate(profile: Profile, source: String) -> ActiveProfile {
    ActiveProfile {
        needs_metadata: profile.rules.iter().any(|r| !r.matches.metadata.is_empty()),
        reads_params: profile.rules.iter().any(|r| {
            r.matches.amount.is_some() || r.matches.payment_method.is_some() || !r.matches.metadata.is_empty()
        }),
        engine: FaultEngine::new(profile),
        source,
        activated_at: Instant::now(),
        activated_ms: now_ms(),
    }
}

fn metadata_of(params: &Params) -> std::collections::BTreeMap<String, String> {
    params
        .opt_object("metadata")
        .ok()
        .flatten()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.to_string(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Seconds for a `Retry-After` header: whole seconds, at least 1.
pub fn retry_after_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0).max(u64::from(d.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn injector(toml: &str) -> FaultInjector {
        let profile = faults::parse_profile("test.toml", toml).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")));
        FaultInjector::new(profile, toml.to_string())
    }

    const DROP_ALL: &str = "name = \"t\"\ndescription = \"t\"\nseed = 1\n[[rules]]\nkind = \"drop_response\"\nprobability = 1.0\nwhen = \"after_commit\"\nfirst_attempts = 1\n";

    fn input<'a>(params: &'a Params, key: Option<&'a IdempotencyKey>) -> PlanInput<'a> {
        PlanInput {
            method: "POST",
            path: "/v1/payment_intents",
            params,
            idempotency_key: key,
            correlation_id: None,
            forced: None,
            now: Instant::now(),
            real: Instant::now(),
        }
    }

    #[test]
    fn a_restored_attempt_count_goes_on_and_keeps_its_age() {
        let inj = injector(DROP_ALL);
        let params = Params::default();
        let key = IdempotencyKey::parse("restored").unwrap();
        let now = Instant::now();
        inj.restore_attempt("restored".into(), 3, now, Duration::from_secs(50));
        inj.restore_attempt("restored".into(), 2, now, Duration::from_secs(60));
        assert_eq!(inj.plan(&input(&params, Some(&key))).unwrap().attempt, 4);
        // Its last attempt was just now: it outlives a 30 s TTL from here.
        assert_eq!(inj.purge_attempts(Instant::now(), Duration::from_secs(30)), 0);
        inj.restore_attempt("old".into(), 1, now, Duration::from_secs(60));
        assert_eq!(inj.purge_attempts(now, Duration::from_secs(30)), 1, "restored 60 s old");
    }

    #[test]
    fn anonymous_requests_leave_no_attempt_behind_and_keys_expire() {
        let inj = injector(DROP_ALL);
        let params = Params::default();
        for _ in 0..100_000 {
            let plan = inj.plan(&input(&params, None)).unwrap();
            assert_eq!(plan.attempt, 1);
        }
        assert_eq!(inj.counted_identities(), 0, "100k anonymous requests");
        let keys: Vec<_> = (0..100)
            .map(|i| IdempotencyKey::parse(&format!("k{i}")).unwrap())
            .collect();
        for key in &keys {
            inj.plan(&input(&params, Some(key))).unwrap();
        }
        let correlation = CorrelationId::new("order-1");
        let mut by_order = input(&params, None);
        by_order.correlation_id = Some(&correlation);
        assert_eq!(inj.plan(&by_order).unwrap().attempt, 1);
        assert_eq!(inj.plan(&by_order).unwrap().attempt, 2);
        assert_eq!(inj.counted_identities(), 101);
        let ttl = Duration::from_secs(60);
        assert_eq!(inj.purge_attempts(Instant::now(), ttl), 0, "within the TTL");
        assert_eq!(inj.purge_attempts(Instant::now() + ttl, ttl), 101);
        assert_eq!(inj.counted_identities(), 0);
        assert_eq!(inj.plan(&input(&params, Some(&keys[0]))).unwrap().attempt, 1);
    }

    #[test]
    fn attempts_count_per_identity_and_rules_see_them() {
        let inj = injector(DROP_ALL);
        let params = Params::default();
        let key = IdempotencyKey::parse("k").unwrap();
        let first = inj.plan(&input(&params, Some(&key))).unwrap();
        assert_eq!(first.attempt, 1);
        assert!(first.acting(When::AfterCommit).is_some());
        assert!(first.acting(When::BeforeCommit).is_none());
        let second = inj.plan(&input(&params, Some(&key))).unwrap();
        assert_eq!(second.attempt, 2);
        assert!(second.decision.fault.is_none(), "first_attempts = 1");
        let anon = inj.plan(&input(&params, None)).unwrap();
        assert_eq!(anon.attempt, 1);
        assert_eq!(
            inj.counts(),
            vec![((FaultKind::DropResponse, When::AfterCommit), 2)],
            "the key's first attempt and the anonymous request"
        );
        inj.reset();
        assert_eq!(inj.plan(&input(&params, Some(&key))).unwrap().attempt, 1);
    }

    #[test]
    fn forced_faults_override_the_profile() {
        let inj = injector("name = \"t\"\ndescription = \"t\"\nseed = 1\n");
        let params = Params::from_form(b"payment_method=pm_fault_reset_before_commit").unwrap();
        let plan = inj.plan(&input(&params, None)).unwrap();
        assert!(matches!(plan.acting(When::BeforeCommit), Some(Fault::Reset { .. })));
        let mut i = input(&params, None);
        i.forced = Some("rate_limit; retry_after=2s");
        assert!(matches!(
            inj.plan(&i).unwrap().acting(When::BeforeCommit),
            Some(Fault::RateLimit { .. })
        ));
        i.forced = Some("bogus");
        assert_eq!(inj.plan(&i).unwrap_err().param.as_deref(), Some("Fauxpay-Fault"));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
