//! The ledger: the ground truth of every money movement.
//!
//! Every captured charge and every refund is appended as a [`LedgerRecord`] with its
//! correlation id (which logical payment it belongs to), idempotency key, request id and
//! the fault that acted on the request. Records are sharded by correlation id, and a
//! caller that moves money holds its correlation id's shard ([`LedgerEntry`]) across the
//! duplicate check and the append, so two concurrent charges for one order are both
//! recorded and flagged (or, under the `reject` policy, the second is refused) without a
//! global lock. A correlation id with more than one captured charge is a duplicate group.
//! Refund attempts beyond what was captured are kept as over-refunds.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::HashTable;
use parking_lot::MutexGuard;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use crate::fault_injection::attempt::{Attempt, KeyKind};
use crate::idempotency::key::IdempotencyKey;
use crate::resources::charges::object::Charge;
use crate::state::clock::now_ms;
use crate::state::index;
use crate::state::shard::{Hasher, Sharded};
use crate::state::trace::{self, Touch};
use crate::stripe::ids::{ChargeId, CheckoutSessionId, CorrelationId, PaymentIntentId, RefundId, RequestId, Token};
use crate::stripe::money::Currency;

/// Version of the record and summary JSON: the contract `fauxpay load` reads.
pub const LEDGER_SCHEMA_VERSION: u32 = 1;

/// The id of the object behind a movement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MovementId {
    Charge(ChargeId),
    Refund(RefundId),
}

impl Serialize for MovementId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MovementId::Charge(id) => id.serialize(s),
            MovementId::Refund(id) => id.serialize(s),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MovementKind {
    Charge,
    Refund,
}

/// What a caller knows about a movement; the ledger adds sequence, time and flags.
#[derive(Debug, Clone)]
pub struct Movement {
    pub moved: Moved,
    /// The Checkout Session the payment was made for.
    pub checkout_session: Option<CheckoutSessionId>,
    pub attempt: Attempt,
}

/// The money a movement moved.
#[derive(Debug, Clone)]
pub enum Moved {
    /// A charge, as captured: the snapshot its table and its event hold, which the record
    /// points at instead of copying its id, amount, currency and payment intent.
    Charge(Arc<Charge>),
    Refund(RefundMoved),
}

/// A refund's part of its movement.
#[derive(Debug, Clone)]
pub struct RefundMoved {
    pub id: RefundId,
    pub amount: u64,
    pub currency: Currency,
    pub payment_intent: Option<PaymentIntentId>,
    /// The charge it refunds.
    pub charge: ChargeId,
}

/// One money movement, as served by `GET /__fauxpay/ledger` (with `schema_version` and
/// `status: "succeeded"`, constants written when serialised).
#[derive(Debug, Clone)]
pub struct LedgerRecord {
    pub seq: u64,
    /// The money moved, and what most movements do not have (a Checkout Session, a
    /// fault): one word and a tag for a plain charge.
    source: Source,
    pub idempotency_key: Option<IdempotencyKey>,
    pub correlation_id: Option<CorrelationId>,
    pub request_id: RequestId,
    /// True on the second and later captured charges of one correlation id.
    pub duplicate: bool,
    /// Unix time in milliseconds.
    pub created_ms: u64,
    /// The kind of key the request that moved the money presented.
    pub key: KeyKind,
    /// For a captured charge with a correlation id: how many its group holds, this one
    /// included, and where (in its shard) the group's previous charge is.
    group: Option<GroupLink>,
}

/// A record's money: a charge as captured (its id, captured amount, currency and payment
/// intent are the movement's), or a refund's facts; with its [`Rare`] fields, boxed, when
/// it has any.
#[derive(Debug, Clone)]
enum Source {
    Charge(Arc<Charge>),
    ChargeWith(Box<(Arc<Charge>, Rare)>),
    Refund(Box<(RefundMoved, Rare)>),
}

/// A record's fields that most movements leave empty.
#[derive(Debug, Clone, Default, PartialEq)]
struct Rare {
    checkout_session: Option<CheckoutSessionId>,
    fault: Option<Arc<str>>,
}

impl Source {
    fn new(moved: Moved, rare: Rare) -> Self {
        match moved {
            Moved::Charge(c) if rare == Rare::default() => Source::Charge(c),
            Moved::Charge(c) => Source::ChargeWith(Box::new((c, rare))),
            Moved::Refund(r) => Source::Refund(Box::new((r, rare))),
        }
    }
}

/// A captured charge's place in its correlation id's group (8 bytes).
#[derive(Debug, Clone, Copy)]
struct GroupLink {
    /// How many charges the group holds, this one included.
    count: NonZeroU32,
    /// The index (in its shard) of the group's previous charge; [`GroupLink::FIRST`]
    /// when this is the group's first.
    prev: u32,
}

impl GroupLink {
    const FIRST: u32 = u32::MAX;

    fn new(count: u32, prev: Option<u32>) -> Option<Self> {
        Some(Self {
            count: NonZeroU32::new(count)?,
            prev: prev.unwrap_or(Self::FIRST),
        })
    }

    fn prev(self) -> Option<u32> {
        (self.prev != Self::FIRST).then_some(self.prev)
    }
}

/// What a record moved, borrowed from its [`Source`].
enum MovedRef<'a> {
    Charge(&'a Charge),
    Refund(&'a RefundMoved),
}

impl LedgerRecord {
    fn moved(&self) -> MovedRef<'_> {
        match &self.source {
            Source::Charge(c) => MovedRef::Charge(c),
            Source::ChargeWith(b) => MovedRef::Charge(&b.0),
            Source::Refund(b) => MovedRef::Refund(&b.0),
        }
    }

    fn rare(&self) -> Option<&Rare> {
        match &self.source {
            Source::Charge(_) => None,
            Source::ChargeWith(b) => Some(&b.1),
            Source::Refund(b) => Some(&b.1),
        }
    }

    /// Charge or refund.
    pub fn kind(&self) -> MovementKind {
        match self.moved() {
            MovedRef::Charge(_) => MovementKind::Charge,
            MovedRef::Refund(_) => MovementKind::Refund,
        }
    }

    /// The amount moved: a charge's captured amount, or a refund's.
    pub fn amount(&self) -> u64 {
        match self.moved() {
            MovedRef::Charge(c) => c.amount_captured.get(),
            MovedRef::Refund(r) => r.amount,
        }
    }

    pub fn currency(&self) -> Currency {
        match self.moved() {
            MovedRef::Charge(c) => c.currency,
            MovedRef::Refund(r) => r.currency,
        }
    }

    pub fn payment_intent(&self) -> Option<PaymentIntentId> {
        match self.moved() {
            MovedRef::Charge(c) => c.payment_intent,
            MovedRef::Refund(r) => r.payment_intent,
        }
    }

    /// For a refund: the charge it refunds.
    pub fn charge(&self) -> Option<ChargeId> {
        match self.moved() {
            MovedRef::Refund(r) => Some(r.charge),
            MovedRef::Charge(_) => None,
        }
    }

    /// The Checkout Session the payment was made for.
    pub fn checkout_session(&self) -> Option<CheckoutSessionId> {
        self.rare().and_then(|r| r.checkout_session)
    }

    /// The fault that acted on the request that moved the money.
    pub fn fault(&self) -> Option<&Arc<str>> {
        self.rare().and_then(|r| r.fault.as_ref())
    }

    /// The charge (`ch_…`) or refund (`re_…`).
    pub fn id(&self) -> MovementId {
        match self.moved() {
            MovedRef::Charge(c) => MovementId::Charge(c.id),
            MovedRef::Refund(r) => MovementId::Refund(r.id),
        }
    }

    /// The random part of its id: the record's own key in a write's touches.
    fn token(&self) -> Token {
        match self.moved() {
            MovedRef::Charge(c) => c.id.token(),
            MovedRef::Refund(r) => r.id.token(),
        }
    }
}

impl Serialize for LedgerRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("LedgerRecord", 17)?;
        o.serialize_field("schema_version", &LEDGER_SCHEMA_VERSION)?;
        o.serialize_field("seq", &self.seq)?;
        o.serialize_field("id", &self.id())?;
        o.serialize_field("kind", &self.kind())?;
        o.serialize_field("amount", &self.amount())?;
        o.serialize_field("currency", &self.currency())?;
        o.serialize_field("status", "succeeded")?;
        o.serialize_field("payment_intent", &self.payment_intent())?;
        o.serialize_field("charge", &self.charge())?;
        o.serialize_field("idempotency_key", &self.idempotency_key)?;
        o.serialize_field("correlation_id", &self.correlation_id)?;
        o.serialize_field("request_id", &self.request_id)?;
        o.serialize_field("fault", &self.fault())?;
        o.serialize_field("duplicate", &self.duplicate)?;
        o.serialize_field("created_ms", &self.created_ms)?;
        o.serialize_field("checkout_session", &self.checkout_session())?;
        o.serialize_field("key_type", &self.key)?;
        o.end()
    }
}

/// A refund that asked for more than was left to refund (refused with a 400).
#[derive(Debug, Clone, Serialize)]
pub struct OverRefund {
    pub charge: ChargeId,
    pub payment_intent: Option<PaymentIntentId>,
    pub correlation_id: Option<CorrelationId>,
    pub captured: u64,
    pub already_refunded: u64,
    pub requested: u64,
    pub idempotency_key: Option<IdempotencyKey>,
    pub request_id: RequestId,
    pub created_ms: u64,
}

#[derive(Default)]
struct Shard {
    records: Vec<Arc<LedgerRecord>>,
    /// One entry per correlation id with captured charges: the index (in `records`) of
    /// its latest; the earlier ones are linked from it (4 bytes per correlation id).
    groups: HashTable<u32>,
    over_refunds: Vec<OverRefund>,
    /// Every movement ever appended here, counted and summed as it came (the summary
    /// reads these instead of walking the records: a dashboard polls it).
    totals: Totals,
    /// The correlation ids whose group holds two or more charges, in the order they
    /// became duplicates.
    duplicates: Vec<CorrelationId>,
}

/// The hash of the correlation id of the record a group slot points at (every record in
/// `groups` has one): what the groups' table needs when it grows.
fn group_rehash<'a>(hasher: &'a Hasher, records: &'a [Arc<LedgerRecord>]) -> impl Fn(&u32) -> u64 + 'a {
    move |&j| {
        records[j as usize]
            .correlation_id
            .as_ref()
            .map_or(0, |c| hasher.hash_one(c))
    }
}

/// Counts and amounts by currency of the movements a shard has seen.
#[derive(Default)]
struct Totals {
    charges: u64,
    refunds: u64,
    captured: Vec<(&'static str, u64)>,
    refunded: Vec<(&'static str, u64)>,
}

impl Totals {
    fn add(&mut self, kind: MovementKind, currency: &'static str, amount: u64) {
        let (count, sums) = match kind {
            MovementKind::Charge => (&mut self.charges, &mut self.captured),
            MovementKind::Refund => (&mut self.refunds, &mut self.refunded),
        };
        *count += 1;
        match sums.iter_mut().find(|(c, _)| *c == currency) {
            Some((_, sum)) => *sum += amount,
            None => sums.push((currency, amount)),
        }
    }
}

impl Shard {
    /// The index of the latest captured charge of `correlation_id`.
    fn latest(&self, hash: u64, correlation_id: &CorrelationId) -> Option<u32> {
        let records = &self.records;
        self.groups
            .find(hash, |&i| {
                records[i as usize].correlation_id.as_ref() == Some(correlation_id)
            })
            .copied()
    }

    /// A group's records, oldest first, from the index of its latest.
    fn group(&self, latest: u32) -> Vec<&LedgerRecord> {
        let mut out = Vec::new();
        let mut next = Some(latest);
        while let Some(i) = next {
            let r = &*self.records[i as usize];
            out.push(r);
            next = r.group.and_then(GroupLink::prev);
        }
        out.reverse();
        out
    }

    fn group_count(&self, latest: u32) -> usize {
        self.records[latest as usize]
            .group
            .map_or(0, |g| g.count.get() as usize)
    }
}

/// Filters for [`Ledger::records`].
#[derive(Debug, Clone, Default)]
pub struct RecordFilter {
    pub correlation_prefix: Option<String>,
    /// Only records created at or after this Unix time (ms).
    pub since_ms: Option<u64>,
}

impl RecordFilter {
    fn keeps(&self, r: &LedgerRecord) -> bool {
        if let Some(p) = &self.correlation_prefix {
            if !r
                .correlation_id
                .as_ref()
                .is_some_and(|c| c.as_str().starts_with(p.as_str()))
            {
                return false;
            }
        }
        self.since_ms.is_none_or(|s| r.created_ms >= s)
    }
}

/// The ledger of all money movements.
pub struct Ledger {
    shards: Sharded<Shard>,
    /// Hashes correlation ids for the groups' tables.
    hasher: Hasher,
    /// On a cache line of its own: every insert writes it, and its neighbours are read.
    next_seq: crossbeam_utils::CachePadded<AtomicU64>,
    blocked_duplicates: AtomicU64,
    /// Correlation ids whose only charge left memory (`--retain`): the summary still
    /// counts them (its other counts and amounts are each shard's [`Totals`]).
    retired_correlation_ids: AtomicU64,
    /// This ledger's tag in the keys a write touched ([`trace`]).
    tag: u16,
}

impl Default for Ledger {
    fn default() -> Self {
        Self {
            shards: Sharded::default(),
            hasher: Hasher::default(),
            next_seq: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
            blocked_duplicates: AtomicU64::new(0),
            retired_correlation_ids: AtomicU64::new(0),
            tag: trace::new_tag(),
        }
    }
}

/// The key a write that records an over-refund touches (over-refunds are kept until a
/// reset, whatever `--retain` says).
const OVER_REFUNDS: u64 = u64::MAX;

/// Everything the ledger has counted since the start (or the last reset), beyond the
/// records it holds: what the data dir's compaction writes down (`Record::Totals`) for
/// the writes it leaves out of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerTotals {
    pub charges: u64,
    pub refunds: u64,
    /// Amounts captured, by currency code.
    pub captured: Vec<(String, u64)>,
    pub refunded: Vec<(String, u64)>,
    pub blocked_duplicates: u64,
    pub retired_correlation_ids: u64,
    /// The last sequence number given to a movement.
    #[serde(default)]
    pub seq: u64,
}

/// How many movements of each kind the ledger holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub charges: u64,
    pub refunds: u64,
}

/// A locked view of one correlation id's shard: check and append atomically.
pub struct LedgerEntry<'a> {
    ledger: &'a Ledger,
    shard: MutexGuard<'a, Shard>,
    correlation_id: Option<CorrelationId>,
    /// The correlation id's hash, and the index of its latest captured charge.
    group: Option<(u64, Option<u32>)>,
}

impl Ledger {
    /// Makes room for about `n` more movements and correlation ids (recovery, from the
    /// log's length).
    pub fn reserve(&self, n: usize) {
        for (s, share) in self.shards.shares(n) {
            let mut shard = s.lock();
            let Shard { records, groups, .. } = &mut *shard;
            // Best effort (see `Provider::reserve`).
            let _ = records.try_reserve(share);
            let _ = groups.try_reserve(share, group_rehash(&self.hasher, records));
        }
    }

    /// Locks the shard of `correlation_id` (or, when the movement has none, of
    /// `fallback`, e.g. the payment intent's id) for a check-then-append.
    pub fn entry(&self, correlation_id: Option<&CorrelationId>, fallback: &str) -> LedgerEntry<'_> {
        let shard = match correlation_id {
            // Hashed as its text is (`ThinStr`), with no check of the text.
            Some(c) => self.shards.lock(c),
            None => self.shards.lock(fallback),
        };
        let group = correlation_id.map(|c| {
            let hash = self.hasher.hash_one(c);
            trace::write(self.tag, hash);
            (hash, shard.latest(hash, c))
        });
        LedgerEntry {
            ledger: self,
            shard,
            correlation_id: correlation_id.cloned(),
            group,
        }
    }

    /// Counts a charge refused by the `reject` duplicate policy.
    pub fn note_blocked_duplicate(&self) {
        self.blocked_duplicates.fetch_add(1, Ordering::Relaxed);
    }

    pub fn blocked_duplicates(&self) -> u64 {
        self.blocked_duplicates.load(Ordering::Relaxed)
    }

    /// Every movement appended since the start (or the last reset), from each shard's
    /// [`Totals`].
    pub fn counts(&self) -> Counts {
        let mut counts = Counts { charges: 0, refunds: 0 };
        for shard in self.shards.iter() {
            let shard = shard.lock();
            counts.charges += shard.totals.charges;
            counts.refunds += shard.totals.refunds;
        }
        counts
    }

    /// Number of correlation ids with more than one captured charge.
    pub fn duplicate_group_count(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().duplicates.len() as u64).sum()
    }

    /// The records matching `filter`, in the order they were appended.
    pub fn records(&self, filter: &RecordFilter) -> Vec<Arc<LedgerRecord>> {
        let mut out: Vec<Arc<LedgerRecord>> = Vec::new();
        for shard in self.shards.iter() {
            out.extend(shard.lock().records.iter().filter(|r| filter.keeps(r)).cloned());
        }
        out.sort_unstable_by_key(|r| r.seq);
        out
    }

    /// Counts, totals, duplicate groups and over-refunds.
    pub fn summary(&self) -> Value {
        let mut charges = 0u64;
        let mut refunds = 0u64;
        let mut captured: HashMap<&'static str, u64> = HashMap::new();
        let mut refunded: HashMap<&'static str, u64> = HashMap::new();
        let mut correlation_ids = 0usize;
        let mut groups: Vec<Value> = Vec::new();
        let mut extra_charges = 0usize;
        let mut over_refunds: Vec<OverRefund> = Vec::new();
        correlation_ids += self.retired_correlation_ids.load(Ordering::Relaxed) as usize;
        for shard in self.shards.iter() {
            let shard = shard.lock();
            let t = &shard.totals;
            charges += t.charges;
            refunds += t.refunds;
            for (currency, sum) in &t.captured {
                *captured.entry(currency).or_default() += sum;
            }
            for (currency, sum) in &t.refunded {
                *refunded.entry(currency).or_default() += sum;
            }
            correlation_ids += shard.groups.len();
            for latest in shard
                .duplicates
                .iter()
                .filter_map(|c| shard.latest(self.hasher.hash_one(c), c))
            {
                let recs = shard.group(latest);
                let id = recs[0].correlation_id.as_ref();
                let first = recs[0].amount();
                let total: u64 = recs.iter().map(|r| r.amount()).sum();
                extra_charges += recs.len() - 1;
                groups.push(json!({
                    "correlation_id": id,
                    "charge_count": recs.len(),
                    "captured_amount": total,
                    "extra_amount": total - first,
                    "currency": recs[0].currency().code(),
                    "charges": recs,
                }));
            }
            over_refunds.extend(shard.over_refunds.iter().cloned());
        }
        groups.sort_by(|a, b| a["correlation_id"].as_str().cmp(&b["correlation_id"].as_str()));
        over_refunds.sort_by_key(|o| o.created_ms);
        json!({
            "schema_version": LEDGER_SCHEMA_VERSION,
            "charges": charges,
            "refunds": refunds,
            "captured": captured,
            "refunded": refunded,
            "correlation_ids": correlation_ids,
            "duplicate_group_count": groups.len(),
            "duplicate_charges": extra_charges,
            "duplicate_groups": groups,
            "blocked_duplicates": self.blocked_duplicates(),
            "over_refunds": over_refunds,
        })
    }

    /// Forgets the records created before `cutoff_ms` (`--retain`), except duplicate
    /// groups, which stay whole; their counts and totals stay in the summary. A
    /// correlation id whose only charge left is forgotten too, so a later charge for it
    /// is not a duplicate: detection covers the window. Returns how many records left.
    pub fn retire_before(&self, cutoff_ms: u64) -> usize {
        let mut gone = 0;
        for s in self.shards.iter() {
            let mut shard = s.lock();
            if shard.records.iter().all(|r| r.created_ms >= cutoff_ms) {
                continue;
            }
            let mut keep = vec![false; shard.records.len()];
            for &latest in shard.groups.iter() {
                if shard.group_count(latest) > 1 {
                    let mut next = Some(latest);
                    while let Some(i) = next {
                        keep[i as usize] = true;
                        next = shard.records[i as usize].group.and_then(GroupLink::prev);
                    }
                }
            }
            let mut remap = vec![u32::MAX; shard.records.len()];
            let mut kept: Vec<Arc<LedgerRecord>> = Vec::with_capacity(shard.records.len());
            for (i, r) in std::mem::take(&mut shard.records).into_iter().enumerate() {
                if keep[i] || r.created_ms >= cutoff_ms {
                    remap[i] = kept.len() as u32;
                    kept.push(r);
                    continue;
                }
                gone += 1;
                // A group of one charge leaves with it.
                if r.group.is_some() {
                    self.retired_correlation_ids.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Groups are kept whole, so every link points at a kept record.
            for r in kept.iter_mut() {
                if let Some((link, prev)) = r.group.and_then(|l| Some((l, l.prev()?))) {
                    let moved = remap.get(prev as usize).copied().unwrap_or(prev);
                    if moved != prev {
                        *r = Arc::new(LedgerRecord {
                            group: Some(GroupLink { prev: moved, ..link }),
                            ..(**r).clone()
                        });
                    }
                }
            }
            shard.records = kept;
            let Shard { records, groups, .. } = &mut *shard;
            groups.clear();
            for (i, r) in records.iter().enumerate() {
                let (Some(_), Some(c)) = (r.group, &r.correlation_id) else {
                    continue;
                };
                let hash = self.hasher.hash_one(c);
                match groups.find_mut(hash, |&j| records[j as usize].correlation_id.as_ref() == Some(c)) {
                    Some(latest) => *latest = i as u32,
                    None => {
                        groups.insert_unique(hash, i as u32, group_rehash(&self.hasher, records));
                    }
                }
            }
        }
        gone
    }

    /// Adds the touch of every record here now, of every correlation id with records (and
    /// of the over-refunds, when there are any) to `live` (compaction's liveness).
    pub fn live_keys(&self, live: &mut impl Extend<Touch>) {
        for s in self.shards.iter() {
            let shard = s.lock();
            for r in &shard.records {
                live.extend([Touch::key(self.tag, self.hasher.hash_one(r.token()))]);
                if let Some(c) = &r.correlation_id {
                    live.extend([Touch::key(self.tag, self.hasher.hash_one(c))]);
                }
            }
            if !shard.over_refunds.is_empty() {
                live.extend([Touch::key(self.tag, OVER_REFUNDS)]);
            }
        }
    }

    /// What the ledger has counted so far (see [`LedgerTotals`]).
    pub fn totals(&self) -> LedgerTotals {
        let mut all = LedgerTotals {
            blocked_duplicates: self.blocked_duplicates.load(Ordering::Relaxed),
            retired_correlation_ids: self.retired_correlation_ids.load(Ordering::Relaxed),
            seq: self.last_seq(),
            ..LedgerTotals::default()
        };
        let add = |into: &mut Vec<(String, u64)>, from: &[(&'static str, u64)]| {
            for (currency, sum) in from {
                match into.iter_mut().find(|(c, _)| c == currency) {
                    Some((_, s)) => *s += sum,
                    None => into.push(((*currency).to_owned(), *sum)),
                }
            }
        };
        for s in self.shards.iter() {
            let shard = s.lock();
            all.charges += shard.totals.charges;
            all.refunds += shard.totals.refunds;
            add(&mut all.captured, &shard.totals.captured);
            add(&mut all.refunded, &shard.totals.refunded);
        }
        all
    }

    /// Makes [`Ledger::totals`] answer `totals` from now on (recovery of a compacted log,
    /// whose left-out writes counted them). A currency fauxpay does not know is skipped.
    pub fn set_totals(&self, totals: &LedgerTotals) {
        let known = |sums: &[(String, u64)]| -> Vec<(&'static str, u64)> {
            sums.iter()
                .filter_map(|(c, n)| Currency::parse(c).ok().map(|c| (c.code(), *n)))
                .collect()
        };
        for (i, s) in self.shards.iter().enumerate() {
            s.lock().totals = match i {
                0 => Totals {
                    charges: totals.charges,
                    refunds: totals.refunds,
                    captured: known(&totals.captured),
                    refunded: known(&totals.refunded),
                },
                _ => Totals::default(),
            };
        }
        self.blocked_duplicates
            .store(totals.blocked_duplicates, Ordering::Relaxed);
        self.retired_correlation_ids
            .store(totals.retired_correlation_ids, Ordering::Relaxed);
        self.set_last_seq(totals.seq);
    }

    /// The last sequence number given to a movement (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Relaxed)
    }

    /// Makes the next movement's sequence number `seq + 1` (recovery of a compacted log,
    /// where left-out writes had taken the numbers between).
    pub fn set_last_seq(&self, seq: u64) {
        self.next_seq.store(seq, Ordering::Relaxed);
    }

    /// Forgets everything (`POST /__fauxpay/reset`).
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            *shard.lock() = Shard::default();
        }
        self.blocked_duplicates.store(0, Ordering::Relaxed);
        self.retired_correlation_ids.store(0, Ordering::Relaxed);
    }
}

impl LedgerEntry<'_> {
    /// Captured charges already recorded for this correlation id.
    pub fn captured_charges(&self) -> usize {
        match self.group {
            Some((_, Some(latest))) => self.shard.group_count(latest),
            _ => 0,
        }
    }

    /// Appends a movement; a charge is flagged `duplicate` if its correlation id
    /// already had a captured charge.
    pub fn append(&mut self, m: Movement) -> Arc<LedgerRecord> {
        let seq = self.ledger.next_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let index = self.shard.records.len();
        let mut duplicate = false;
        let mut link = None;
        let charge = matches!(m.moved, Moved::Charge(_));
        if let (true, Some((hash, latest))) = (charge, self.group) {
            let index = index as u32;
            let count = latest.map_or(0, |l| self.shard.group_count(l)) as u32 + 1;
            link = GroupLink::new(count, latest);
            let shard = &mut *self.shard;
            match latest {
                Some(l) => {
                    if let Some(slot) = shard.groups.find_mut(hash, |&i| i == l) {
                        *slot = index;
                    }
                }
                None => {
                    let Shard { records, groups, .. } = shard;
                    index::make_room(groups, group_rehash(&self.ledger.hasher, records));
                    groups.insert_unique(hash, index, group_rehash(&self.ledger.hasher, records));
                }
            }
            self.group = Some((hash, Some(index)));
            duplicate = count > 1;
            if count == 2 {
                if let Some(c) = &self.correlation_id {
                    self.shard.duplicates.push(c.clone());
                }
            }
        }
        let rare = Rare {
            checkout_session: m.checkout_session,
            fault: m.attempt.fault,
        };
        let record = Arc::new(LedgerRecord {
            seq,
            source: Source::new(m.moved, rare),
            idempotency_key: m.attempt.idempotency_key,
            correlation_id: self.correlation_id.clone(),
            request_id: m.attempt.request_id,
            duplicate,
            created_ms: now_ms(),
            key: m.attempt.key,
            group: link,
        });
        // The record's own key: a movement with no correlation id stays live by it.
        trace::write(self.ledger.tag, self.ledger.hasher.hash_one(record.token()));
        self.shard
            .totals
            .add(record.kind(), record.currency().code(), record.amount());
        self.shard.records.push(record.clone());
        record
    }

    pub fn append_over_refund(&mut self, o: OverRefund) {
        trace::write(self.ledger.tag, OVER_REFUNDS);
        self.shard.over_refunds.push(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain charge's record is the charge it points at and the request's facts: with its
    /// `Arc`'s two counts, one 96-byte block (the allocator's classes go 80, 96, 112).
    #[test]
    fn a_record_is_compact_and_reads_its_movement_from_its_source() {
        let n = std::mem::size_of::<LedgerRecord>();
        assert!(n <= 80, "LedgerRecord is {n} bytes");
        assert_eq!(std::mem::size_of::<Option<GroupLink>>(), 8);

        let l = Ledger::default();
        let captured = Arc::new(Charge::example(1500));
        let fault: Arc<str> = Arc::from("drop_response");
        let mut attempt = Attempt::plain(RequestId::generate(), None);
        attempt.fault = Some(fault.clone());
        let record = l.entry(None, "x").append(Movement {
            moved: Moved::Charge(captured.clone()),
            checkout_session: None,
            attempt,
        });
        assert!(matches!(&record.source, Source::ChargeWith(b) if Arc::ptr_eq(&b.0, &captured)));
        assert_eq!(
            (
                record.kind(),
                record.id(),
                record.amount(),
                record.currency(),
                record.charge()
            ),
            (
                MovementKind::Charge,
                MovementId::Charge(captured.id),
                1500,
                captured.currency,
                None
            )
        );
        assert_eq!(record.fault(), Some(&fault));
        let plain = charge(&l, None, 700);
        assert!(matches!(plain.source, Source::Charge(_)), "no box for a plain charge");
        assert_eq!((plain.fault(), plain.checkout_session()), (None, None));

        let refund = RefundMoved {
            id: RefundId::generate(),
            amount: 400,
            currency: captured.currency,
            payment_intent: Some(PaymentIntentId::generate()),
            charge: captured.id,
        };
        let r = l.entry(None, "x").append(Movement {
            moved: Moved::Refund(refund.clone()),
            checkout_session: None,
            attempt: Attempt::plain(RequestId::generate(), None),
        });
        assert_eq!(
            (r.kind(), r.id(), r.amount(), r.payment_intent(), r.charge()),
            (
                MovementKind::Refund,
                MovementId::Refund(refund.id),
                400,
                refund.payment_intent,
                Some(captured.id)
            )
        );
        let json = serde_json::to_value(&*r).unwrap();
        assert_eq!(
            (&json["kind"], &json["amount"], &json["charge"], &json["currency"]),
            (&json!("refund"), &json!(400), &json!(captured.id), &json!("usd"))
        );
        let counts = l.counts();
        assert_eq!((counts.charges, counts.refunds), (2, 1));
    }

    fn charge(ledger: &Ledger, corr: Option<&str>, amount: u64) -> Arc<LedgerRecord> {
        let c = corr.map(CorrelationId::new);
        let captured = Arc::new(Charge::example(amount));
        let mut e = ledger.entry(c.as_ref(), &captured.id.as_str());
        e.append(Movement {
            moved: Moved::Charge(captured),
            checkout_session: None,
            attempt: Attempt::plain(RequestId::generate(), None),
        })
    }

    #[test]
    fn retiring_old_records_keeps_duplicate_groups_whole_and_the_summary_exact() {
        let l = Ledger::default();
        charge(&l, Some("dup"), 1000);
        charge(&l, Some("single"), 500);
        charge(&l, None, 200);
        charge(&l, Some("dup"), 1000);
        let before = l.summary();
        let cutoff = now_ms() + 1;
        assert_eq!(
            l.retire_before(cutoff),
            2,
            "the single charge and the uncorrelated one leave"
        );
        assert_eq!(l.retire_before(cutoff), 0, "nothing more");
        let after = l.summary();
        for field in [
            "charges",
            "captured",
            "correlation_ids",
            "duplicate_group_count",
            "duplicate_charges",
        ] {
            assert_eq!(after[field], before[field], "{field}");
        }
        assert_eq!(after["duplicate_groups"][0]["charges"].as_array().unwrap().len(), 2);
        assert_eq!(l.records(&RecordFilter::default()).len(), 2);
        // The group still finds its latest charge: a third is a duplicate too.
        assert!(charge(&l, Some("dup"), 1000).duplicate);
        assert_eq!(l.summary()["duplicate_groups"][0]["charge_count"], 3);
        // Outside the window, a correlation id is new again.
        assert!(!charge(&l, Some("single"), 500).duplicate);
    }

    #[test]
    fn second_capture_for_one_correlation_id_is_a_duplicate_group() {
        let l = Ledger::default();
        assert!(!charge(&l, Some("o-1"), 1000).duplicate);
        assert!(!charge(&l, Some("o-2"), 500).duplicate);
        assert!(charge(&l, Some("o-1"), 1000).duplicate);
        assert!(!charge(&l, None, 700).duplicate);
        assert!(!charge(&l, None, 700).duplicate);
        let s = l.summary();
        assert_eq!(s["charges"], 5);
        assert_eq!(s["duplicate_group_count"], 1);
        assert_eq!(s["duplicate_groups"][0]["correlation_id"], "o-1");
        assert_eq!(s["duplicate_groups"][0]["extra_amount"], 1000);
        assert_eq!(s["captured"]["usd"], 3900);
        assert_eq!(l.duplicate_group_count(), 1);
    }

    #[test]
    fn records_filter_by_prefix_and_keep_append_order() {
        let l = Ledger::default();
        for i in 0..50 {
            charge(&l, Some(&format!("run-a-{i}")), 100);
            charge(&l, Some(&format!("run-b-{i}")), 100);
        }
        let f = RecordFilter {
            correlation_prefix: Some("run-a-".into()),
            since_ms: None,
        };
        let recs = l.records(&f);
        assert_eq!(recs.len(), 50);
        assert!(recs.windows(2).all(|w| w[0].seq < w[1].seq));
        let future = RecordFilter {
            correlation_prefix: None,
            since_ms: Some(now_ms() + 60_000),
        };
        assert!(l.records(&future).is_empty());
        l.clear();
        assert!(l.records(&RecordFilter::default()).is_empty());
    }

    #[test]
    fn concurrent_charges_for_one_order_are_all_recorded() {
        let l = Arc::new(Ledger::default());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        charge(&l, Some("hot"), 100);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let recs = l.records(&RecordFilter::default());
        assert_eq!(recs.len(), 800);
        assert_eq!(recs.iter().filter(|r| !r.duplicate).count(), 1);
        assert_eq!(l.summary()["duplicate_groups"][0]["charge_count"], 800);
    }
}
