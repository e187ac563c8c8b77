//! An event: what changed (its [`EventType`]), the object as it was at that moment (a
//! shared snapshot: the same `Arc` the table held then, so an event costs a pointer, not
//! a copy; `payment_intent.created` of an intent confirmed by the request that created
//! it shares the confirmed intent and writes it as created, [`View`]), the object before
//! an update (its changed top-level fields become
//! `data.previous_attributes`, computed when the event is written), the request that
//! caused it, and how many webhook endpoints have yet to acknowledge it.
//!
//! The JSON is Stripe's `event` object (API version 2023-08-16), written on demand.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::stripe::ids::{EventId, RequestId};

use crate::idempotency::key::IdempotencyKey;
use crate::reply::Reply;
use crate::state::table::{Row, MAX_ROW};
use crate::stripe::json::write;
use triomphe::ThinArc;

/// The API version events are rendered in (the spec's).
pub const API_VERSION: &str = "2023-08-16";

macro_rules! event_types {
    ($($variant:ident = $name:literal),* $(,)?) => {
        /// The kinds of events fauxpay emits (Stripe's names).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventType {
            $($variant),*
        }

        impl EventType {
            /// Every kind, in declaration order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name),*
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($name => Some(EventType::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

event_types! {
    PaymentIntentCreated = "payment_intent.created",
    PaymentIntentRequiresAction = "payment_intent.requires_action",
    PaymentIntentSucceeded = "payment_intent.succeeded",
    PaymentIntentPaymentFailed = "payment_intent.payment_failed",
    PaymentIntentCanceled = "payment_intent.canceled",
    PaymentIntentAmountCapturableUpdated = "payment_intent.amount_capturable_updated",
    ChargeSucceeded = "charge.succeeded",
    ChargeFailed = "charge.failed",
    ChargeCaptured = "charge.captured",
    ChargeRefunded = "charge.refunded",
    ChargeUpdated = "charge.updated",
    ChargeRefundUpdated = "charge.refund.updated",
    CustomerCreated = "customer.created",
    CustomerUpdated = "customer.updated",
    CustomerDeleted = "customer.deleted",
    PaymentMethodAttached = "payment_method.attached",
    PaymentMethodDetached = "payment_method.detached",
    SetupIntentCreated = "setup_intent.created",
    SetupIntentSucceeded = "setup_intent.succeeded",
    SetupIntentSetupFailed = "setup_intent.setup_failed",
    SetupIntentRequiresAction = "setup_intent.requires_action",
    SetupIntentCanceled = "setup_intent.canceled",
    ProductCreated = "product.created",
    ProductUpdated = "product.updated",
    ProductDeleted = "product.deleted",
    PriceCreated = "price.created",
    PriceUpdated = "price.updated",
    CheckoutSessionCompleted = "checkout.session.completed",
    CheckoutSessionExpired = "checkout.session.expired",
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether an event type name matches a pattern: `*`, an exact name, or a prefix
/// ending in `.*` (`payment_intent.*`).
pub fn type_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some("") => true,
        Some(prefix) if prefix.ends_with('.') => name.starts_with(prefix),
        _ => pattern == name,
    }
}

/// How an event's object is written from the snapshot it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The snapshot as it is.
    AsIs,
    /// A payment intent created and confirmed by one request: the snapshot is the intent
    /// after its confirmation, written as it was created, before it
    /// ([`PaymentIntent::as_created`](crate::resources::payment_intents::object::PaymentIntent::as_created)),
    /// so `payment_intent.created` shares the intent's snapshot instead of holding a copy.
    IntentAsCreated,
}

/// What one event holds of its own: 24 bytes (its id is its batch's first, [`EventId::nth`]),
/// so that a request's three events and what they share fill one 128-byte block.
#[derive(Debug)]
struct Entry {
    /// The object as it was when the event happened (see `view`).
    object: Snapshot,
    /// Unix seconds (as `u32`, good until 2106; see [`Event::created`]).
    created: u32,
    /// Webhook endpoints that have not acknowledged it yet (the low 15 bits), and whether
    /// a delivery ran out of retries (`FAILED`).
    deliveries: AtomicU16,
    kind: EventType,
    view: View,
}

/// An event's object as it was, and on an update the object just before (its changed
/// fields are `previous_attributes`): both boxed, since most events are no update, so
/// that a snapshot is as wide as one [`Reply`].
#[derive(Debug)]
enum Snapshot {
    Now(Reply),
    Updated(Box<[Reply; 2]>),
}

impl Snapshot {
    fn now(&self) -> &Reply {
        match self {
            Snapshot::Now(now) => now,
            Snapshot::Updated(both) => &both[1],
        }
    }

    fn before(&self) -> Option<&Reply> {
        match self {
            Snapshot::Now(_) => None,
            Snapshot::Updated(both) => Some(&both[0]),
        }
    }
}

/// The bit of `Entry::deliveries` that says a delivery ran out of retries.
const FAILED: u16 = 1 << 15;

/// What the events of one batch share: the request that caused them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    request_id: Option<RequestId>,
    idempotency_key: Option<IdempotencyKey>,
}

/// What a batch's events share: their cause, and the first one's id, from which each
/// other's is derived ([`EventId::nth`] of its place).
#[derive(Debug)]
struct Shared {
    head: Head,
    first: EventId,
}

/// An event's id as a scope made it: the id of the scope's first event, and the event's
/// place among the scope's events (its id is `first.nth(place)`). An id drawn on its own
/// is the first of its own run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    pub first: EventId,
    pub place: u32,
}

impl Drawn {
    pub fn id(&self) -> EventId {
        self.first.nth(self.place)
    }
}

impl From<EventId> for Drawn {
    fn from(id: EventId) -> Self {
        Self { first: id, place: 0 }
    }
}

/// An event made and not stored yet ([`Batch::take_run`] stores it with the events its
/// request made beside it).
#[derive(Debug)]
pub struct Draft {
    entry: Entry,
    head: Head,
    drawn: Drawn,
}

/// The events one request stored together (1 to [`MAX_ROW`]), in one allocation behind a
/// one-word pointer, each found by its own id ([`Row`]): the events of one scope, in the
/// order their ids were made, the first's id stored and the others' derived from it; one
/// row of the events table (a scope's ids are in one group).
#[derive(Clone)]
pub struct Batch(ThinArc<Shared, Entry>);

/// One stored event: its batch and its place in it.
#[derive(Clone)]
pub struct Event {
    batch: Batch,
    at: usize,
}

/// Who caused an event, and when.
#[derive(Debug, Clone)]
pub struct Cause {
    pub request_id: Option<RequestId>,
    pub idempotency_key: Option<IdempotencyKey>,
    /// Unix seconds.
    pub created: i64,
}

impl Draft {
    /// An event `id` (an [`EventId`], or its place in a scope) of `kind` about `object`
    /// (written through `view`), with `previous`, the object before an update, and
    /// `pending` webhook endpoints to acknowledge it.
    pub fn new(
        id: impl Into<Drawn>,
        kind: EventType,
        (object, view): (Reply, View),
        previous: Option<Reply>,
        cause: Cause,
        pending: u32,
    ) -> Self {
        let Cause {
            request_id,
            idempotency_key,
            created,
        } = cause;
        Self {
            entry: Entry {
                kind,
                created: u32::try_from(created.max(0)).unwrap_or(u32::MAX),
                object: match previous {
                    None => Snapshot::Now(object),
                    Some(before) => Snapshot::Updated(Box::new([before, object])),
                },
                view,
                deliveries: AtomicU16::new(u16::try_from(pending).unwrap_or(u16::MAX).min(FAILED - 1)),
            },
            head: Head {
                request_id,
                idempotency_key,
            },
            drawn: id.into(),
        }
    }

    /// The event, alone in a batch of its own.
    pub fn single(self) -> Event {
        Batch::one(self).event(0)
    }
}

impl Batch {
    /// `draft` alone.
    pub fn one(draft: Draft) -> Self {
        let shared = Shared {
            first: draft.drawn.id(),
            head: draft.head,
        };
        Batch(ThinArc::from_header_and_iter(shared, std::iter::once(draft.entry)))
    }

    /// Takes the first events of `drafts` that one request made (at most [`MAX_ROW`]) out
    /// as one batch, in order, handing what goes with each (`W`) to `with`: the events of
    /// one scope from its first on, in the order of their places ([`Drawn`]); an event
    /// that does not follow (a scope closed early, ids each drawn) is a batch alone.
    pub fn take_run<W>(drafts: &mut Vec<(Draft, W)>, mut with: impl FnMut(W)) -> Option<Self> {
        let (head, drawn) = drafts.first().map(|(d, _)| (d.head.clone(), d.drawn))?;
        let n = match drawn.place {
            0 => drafts
                .iter()
                .take(MAX_ROW)
                .enumerate()
                .take_while(|(i, (d, _))| {
                    d.head == head && d.drawn.first == drawn.first && d.drawn.place as usize == *i
                })
                .count(),
            _ => 1,
        };
        let entries = drafts.drain(..n).map(|(draft, w)| {
            with(w);
            draft.entry
        });
        let shared = Shared {
            head,
            first: drawn.id(),
        };
        Some(Batch(ThinArc::from_header_and_iter(shared, entries)))
    }

    /// Its events.
    pub fn event_count(&self) -> usize {
        self.0.slice.len()
    }

    /// Event `at` (below [`Batch::event_count`]).
    pub fn event(&self, at: usize) -> Event {
        debug_assert!(at < self.event_count());
        Event {
            batch: self.clone(),
            at,
        }
    }

    fn head(&self) -> &Head {
        &self.0.header.header.head
    }

    /// The id of its event `at`.
    fn id_at(&self, at: usize) -> EventId {
        self.0.header.header.first.nth(at as u32)
    }

    /// Whether `self` and `other` are one allocation.
    pub fn same(&self, other: &Batch) -> bool {
        self.0.ptr() == other.0.ptr()
    }

    fn entries(&self) -> &[Entry] {
        &self.0.slice
    }
}

impl Row for Batch {
    type Key = EventId;
    type Item = Event;
    fn count(&self) -> usize {
        self.event_count()
    }
    fn key_at(&self, i: usize) -> EventId {
        self.id_at(i)
    }
    fn item(&self, i: usize) -> Event {
        self.event(i)
    }
    /// An event is kept in the shard its id's group names: a request's events, their ids
    /// the first's and derived from it in its group ([`EventId::nth`]), are one row.
    fn shard_of(id: &EventId) -> Option<usize> {
        Some(id.token().group())
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("id", &self.id())
            .field("entry", self.entry())
            .field("head", self.batch.head())
            .finish()
    }
}

impl Event {
    /// The batch it was stored in.
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    fn entry(&self) -> &Entry {
        &self.batch.entries()[self.at]
    }

    pub fn id(&self) -> EventId {
        self.batch.id_at(self.at)
    }

    pub fn kind(&self) -> EventType {
        self.entry().kind
    }

    pub fn request_id(&self) -> Option<RequestId> {
        self.batch.head().request_id
    }

    pub fn idempotency_key(&self) -> Option<&IdempotencyKey> {
        self.batch.head().idempotency_key.as_ref()
    }

    /// Unix seconds.
    pub fn created(&self) -> i64 {
        i64::from(self.entry().created)
    }

    /// The object as the event shows it.
    pub fn object(&self) -> Reply {
        let entry = self.entry();
        match (entry.view, entry.object.now()) {
            (View::IntentAsCreated, Reply::Intent(pi)) => Reply::Intent(Arc::new(pi.as_created())),
            (_, object) => object.clone(),
        }
    }

    /// `pending_webhooks`.
    pub fn pending_webhooks(&self) -> u32 {
        u32::from(self.entry().deliveries.load(Ordering::Relaxed) & !FAILED)
    }

    /// One endpoint acknowledged it (a resend's success of an already acknowledged
    /// event changes nothing).
    pub fn acknowledged(&self) {
        let _ = self
            .entry()
            .deliveries
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n & !FAILED).checked_sub(1).map(|pending| pending | (n & FAILED))
            });
    }

    /// One endpoint's delivery is to be attempted again (a resend of an acknowledged event).
    pub fn pending_again(&self) {
        let _ = self
            .entry()
            .deliveries
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                let pending = (n & !FAILED) + 1;
                (pending < FAILED).then_some(pending | (n & FAILED))
            });
    }

    /// One endpoint's delivery ran out of retries.
    pub fn mark_failed(&self) {
        self.entry().deliveries.fetch_or(FAILED, Ordering::Relaxed);
    }

    pub fn failed(&self) -> bool {
        self.entry().deliveries.load(Ordering::Relaxed) & FAILED != 0
    }

    /// Stripe's `delivery_success`: every webhook acknowledged it.
    pub fn delivered(&self) -> bool {
        self.pending_webhooks() == 0
    }

    /// `data.previous_attributes`: the fields an update changed, with their values before
    /// it ([`changed`]).
    pub fn previous_attributes(&self) -> Option<Map<String, Value>> {
        let before = self.entry().object.before()?.json();
        let after = self.object().json();
        let (Value::Object(before), Value::Object(after)) = (before, after) else {
            return None;
        };
        Some(changed(before, &after))
    }

    /// The event's Stripe JSON, written to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        write::raw(out, "{\"id\":");
        write::plain(out, &self.id().as_str());
        write::raw(out, ",\"object\":\"event\",\"api_version\":");
        write::plain(out, API_VERSION);
        write::raw(out, ",\"created\":");
        write::int(out, self.created());
        write::raw(out, ",\"data\":{\"object\":");
        self.object().write_json(out);
        if let Some(previous) = self.previous_attributes() {
            write::raw(out, ",\"previous_attributes\":");
            let _ = serde_json::to_writer(&mut *out, &previous);
        }
        write::raw(out, "},\"livemode\":false,\"pending_webhooks\":");
        write::int(out, self.pending_webhooks());
        write::raw(out, ",\"request\":{\"id\":");
        write::opt_plain(out, self.request_id().map(|r| r.as_str()).as_deref());
        write::raw(out, ",\"idempotency_key\":");
        write::opt_text(out, self.idempotency_key().map(|k| k.as_str()));
        write::raw(out, "},\"type\":");
        write::plain(out, self.kind().as_str());
        out.push(b'}');
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2048);
        self.write_json(&mut out);
        out
    }

    pub fn to_json(&self) -> Value {
        serde_json::from_slice(&self.to_bytes()).unwrap_or(Value::Null)
    }
}

/// What changed from `before` to `after`, as Stripe's `previous_attributes` shows it:
/// each changed field with its value before; inside a hash (`metadata`,
/// `billing_details`) only the keys that changed, a key the update added as `null`
/// (`{"metadata": {"shipped": null}}`); a list whole.
fn changed(before: Map<String, Value>, after: &Map<String, Value>) -> Map<String, Value> {
    let added: Vec<String> = after.keys().filter(|k| !before.contains_key(*k)).cloned().collect();
    let mut out = Map::new();
    for (k, was) in before {
        match (was, after.get(&k)) {
            (was, Some(now)) if was == *now => {}
            (Value::Object(was), Some(Value::Object(now))) => {
                out.insert(k, Value::Object(changed(was, now)));
            }
            (was, _) => {
                out.insert(k, was);
            }
        }
    }
    out.extend(added.into_iter().map(|k| (k, Value::Null)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::customers::object::{Customer, CustomerText};
    use crate::stripe::ids::CustomerId;
    use crate::stripe::json::Metadata;

    /// The cause of an event no request made, at `created`.
    pub(super) fn anonymous(created: i64) -> Cause {
        Cause {
            request_id: None,
            idempotency_key: None,
            created,
        }
    }

    fn customer(name: Option<&str>) -> Arc<Customer> {
        static ID: std::sync::OnceLock<CustomerId> = std::sync::OnceLock::new();
        Arc::new(Customer {
            id: *ID.get_or_init(CustomerId::generate),
            created: 1_700_000_000,
            text: CustomerText {
                name: name.map(Box::from),
                ..CustomerText::default()
            },
            metadata: Metadata::new(),
            default_payment_method: None,
            deleted: false,
        })
    }

    #[test]
    fn names_round_trip_and_patterns_match() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(*t));
        }
        assert!(type_matches("*", "charge.succeeded"));
        assert!(type_matches("charge.*", "charge.refund.updated"));
        assert!(type_matches("charge.succeeded", "charge.succeeded"));
        assert!(!type_matches("charge.succeeded", "charge.failed"));
        assert!(!type_matches("charge*", "charge.failed"), "a prefix ends with '.*'");
        assert!(!type_matches("payment_intent.*", "charge.succeeded"));
    }

    #[test]
    fn previous_attributes_name_the_changed_keys_inside_a_hash() {
        let obj = |v: serde_json::Value| match v {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let before = obj(serde_json::json!({
            "description": "a", "amount": 5, "tags": [1, 2],
            "metadata": {"order_id": "o-1", "gone": "x", "same": "s"},
            "billing_details": {"address": {"city": "Paris", "line1": "1"}},
        }));
        let after = obj(serde_json::json!({
            "description": "b", "amount": 5, "tags": [1, 3],
            "metadata": {"order_id": "o-1", "shipped": "no", "same": "s"},
            "billing_details": {"address": {"city": "Lyon", "line1": "1"}},
        }));
        assert_eq!(
            serde_json::Value::Object(changed(before, &after)),
            serde_json::json!({
                "description": "a",
                "tags": [1, 2],
                "metadata": {"gone": "x", "shipped": null},
                "billing_details": {"address": {"city": "Paris"}},
            })
        );
    }

    #[test]
    fn json_has_stripes_shape_and_previous_attributes_name_only_changes() {
        let req = RequestId::generate();
        let e = Draft::new(
            EventId::generate(),
            EventType::CustomerUpdated,
            (Reply::Customer(customer(Some("new"))), View::AsIs),
            Some(Reply::Customer(customer(Some("old")))),
            Cause {
                request_id: Some(req),
                idempotency_key: Some(IdempotencyKey::parse("k1").unwrap()),
                created: 1_700_000_001,
            },
            2,
        )
        .single();
        let v = e.to_json();
        assert_eq!(v["object"], "event");
        assert_eq!(v["type"], "customer.updated");
        assert_eq!(v["api_version"], API_VERSION);
        assert_eq!(v["livemode"], false);
        assert_eq!(v["pending_webhooks"], 2);
        assert_eq!(v["request"]["id"], req.to_string());
        assert_eq!(v["request"]["idempotency_key"], "k1");
        assert_eq!(v["data"]["object"]["name"], "new");
        assert_eq!(v["data"]["previous_attributes"], serde_json::json!({"name": "old"}));
        e.acknowledged();
        e.acknowledged();
        e.acknowledged();
        assert_eq!(e.pending_webhooks(), 0, "never below zero");
        assert!(e.delivered());
        let created = Draft::new(
            EventId::generate(),
            EventType::CustomerCreated,
            (Reply::Customer(customer(None)), View::AsIs),
            None,
            anonymous(1),
            0,
        )
        .single()
        .to_json();
        assert!(created["data"].get("previous_attributes").is_none());
        assert_eq!(
            created["request"],
            serde_json::json!({"id": null, "idempotency_key": null})
        );
    }
}

#[cfg(test)]
mod deliveries {
    use super::tests::anonymous;
    use super::*;

    #[test]
    fn pending_counts_and_the_failed_mark_do_not_touch_each_other() {
        let e = Draft::new(
            EventId::generate(),
            EventType::ChargeSucceeded,
            (Reply::Json(Box::new(serde_json::json!({}))), View::AsIs),
            None,
            anonymous(-5),
            2,
        )
        .single();
        assert_eq!(e.created(), 0, "a time before 1970 is written as 0");
        assert_eq!((e.pending_webhooks(), e.failed()), (2, false));
        e.mark_failed();
        e.acknowledged();
        assert_eq!((e.pending_webhooks(), e.failed()), (1, true));
        e.acknowledged();
        e.acknowledged();
        assert_eq!((e.pending_webhooks(), e.failed()), (0, true), "never below zero");
        e.pending_again();
        assert_eq!((e.pending_webhooks(), e.failed(), e.delivered()), (1, true, false));
        let many = Draft::new(
            EventId::generate(),
            EventType::ChargeSucceeded,
            (Reply::Json(Box::default()), View::AsIs),
            None,
            anonymous(1),
            u32::MAX,
        )
        .single();
        many.pending_again();
        assert!(!many.failed(), "a count at its ceiling stays there");
    }
}

#[cfg(test)]
mod batches {
    use super::tests::anonymous;
    use super::*;

    /// Event `n` of `request`, the `place`th of a scope whose first id is `first`.
    fn draft((request, first): (Option<RequestId>, EventId), place: u32, n: u32) -> (Draft, u32) {
        let cause = Cause {
            request_id: request,
            ..anonymous(1)
        };
        let object = Reply::Json(Box::default());
        let draft = Draft::new(
            Drawn { first, place },
            EventType::ChargeSucceeded,
            (object, View::AsIs),
            None,
            cause,
            0,
        );
        (draft, n)
    }

    /// A run is one scope's consecutive events from its first, at most `MAX_ROW`, each
    /// with what goes with it, in order; an event that does not follow its run's last is
    /// a batch alone.
    #[test]
    fn runs_are_one_scopes_consecutive_events() {
        let scope = |request| (Some(request), EventId::generate());
        let (a, b, c) = (
            scope(RequestId::generate()),
            scope(RequestId::generate()),
            scope(RequestId::generate()),
        );
        let mut drafts = vec![draft(a, 0, 1), draft(a, 1, 2), draft(b, 0, 3), draft(a, 2, 4)];
        drafts.extend((5..=14).map(|n| draft(c, n - 5, n)));
        let ids: Vec<EventId> = drafts.iter().map(|(d, _)| d.drawn.id()).collect();
        let (mut runs, mut withs) = (Vec::new(), Vec::new());
        while let Some(batch) = Batch::take_run(&mut drafts, |n| withs.push(n)) {
            runs.push(batch);
        }
        assert_eq!(
            runs.iter().map(Batch::event_count).collect::<Vec<_>>(),
            [2, 1, 1, MAX_ROW, 1, 1],
            "a scope past MAX_ROW goes on in batches of one"
        );
        assert_eq!(withs, (1..=14).collect::<Vec<_>>());
        let stored: Vec<EventId> = runs
            .iter()
            .flat_map(|b| (0..b.event_count()).map(|i| b.event(i).id()))
            .collect();
        assert_eq!(stored, ids, "in order");
        assert_eq!(runs[0].event(1).request_id(), a.0);
        assert_eq!(runs[1].event(0).request_id(), b.0);
        assert_eq!(ids[1], a.1.nth(1), "derived from the scope's first");
        assert_ne!(ids[1], ids[0]);
        assert!(ids.iter().all(|id| EventId::parse(&id.as_str()) == Some(*id)));
        assert_eq!(ids[4].token().group(), c.1.token().group(), "in the first's group");
        assert!(runs[0].event(0).batch().same(runs[0].event(1).batch()));
        assert!(!runs[0].same(&runs[1]));
    }
}

#[cfg(test)]
mod size {
    use super::*;

    /// An event is a small fixed record (its object a shared pointer, never a copy), and
    /// a request's three events with what they share fill one 128-byte block: the
    /// allocator's size classes go 112, 128, 160.
    #[test]
    fn a_requests_events_share_one_block() {
        assert_eq!(std::mem::size_of::<Snapshot>(), std::mem::size_of::<Reply>());
        let entry = std::mem::size_of::<Entry>();
        let shared = std::mem::size_of::<Shared>();
        assert!(entry <= 24, "Entry is {entry} bytes");
        // The count, what they share, the length, then the events.
        let three = 8 + shared + 8 + 3 * entry;
        assert!(three <= 128, "three events take {three} bytes");
        assert_eq!(std::mem::size_of::<Batch>(), 8, "a row points with one word");
        assert_eq!(std::mem::size_of::<Event>(), 16);
    }
}
