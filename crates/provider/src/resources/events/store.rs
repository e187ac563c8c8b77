//! [`Events`]: where every rule publishes its events, at the commit point of the change
//! they describe and under the same locks (so one object's events are stored in the
//! order its changes happened). An event is stored (listed newest first, kept for the
//! event TTL) and handed to the [`Publisher`] (webhook delivery) with the webhook
//! endpoints that want it; `pending_webhooks` starts at their number.
//!
//! An event whose object is known only later in the request (an intent created and
//! confirmed at once) is opened ([`Events::open`]): its id and time are drawn in order,
//! and it is stored before the events emitted meanwhile.
//!
//! Publishing is cheap and never waits: with no endpoint it is one allocation and one
//! table insert; delivery is queued, never performed, on the request's path.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::object::{Batch, Cause, Draft, Drawn, Event, EventType, View};
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::webhook_endpoints::object::WebhookEndpoint;
use crate::state::clock::now_unix;
use crate::state::shard;
use crate::state::table::Table;
use crate::stripe::ids::{self, EventId};

/// Receives every stored event with the endpoints it is to be delivered to.
pub trait Publisher: Send + Sync {
    fn publish(&self, event: &Event, endpoints: &[Arc<WebhookEndpoint>]);
}

/// Stripe keeps events for 30 days.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Every event, and who hears of new ones.
pub struct Events {
    /// Batches of the events one request stored together: a row each when their ids
    /// share a group (a scope's do), else a row an event.
    pub table: Table<Batch>,
    /// Events older than this many seconds are gone.
    ttl_secs: AtomicI64,
    /// The enabled webhook endpoints, as of their last change (read by every event
    /// without a write to memory other cores read).
    endpoints: ArcSwap<Vec<Arc<WebhookEndpoint>>>,
    publisher: OnceLock<Arc<dyn Publisher>>,
    /// While the state is recovered from the data dir: events are not published but kept
    /// here with their endpoints, to be delivered once it is known which were.
    deferring: AtomicBool,
    deferred: Mutex<Vec<Deferred>>,
}

/// An event kept back while recovering, with the endpoints it was for.
pub type Deferred = (Event, Vec<Arc<WebhookEndpoint>>);

/// An event made and not stored yet, with the endpoints that want it.
type Pending = (Draft, Vec<Arc<WebhookEndpoint>>);

/// The events emitted on this thread inside an [`Opened`] scope, in order, the store (its
/// address) whose scope holds them (another store's events are not held), and how their
/// ids are made: from the scope's first id, each the next place (stored together they
/// are one batch and one row, the first id alone stored).
struct Held {
    store: usize,
    first: EventId,
    next: u32,
    events: Vec<Pending>,
}

impl Held {
    /// The next event's id: its place after the scope's first (drawn on its own in the
    /// first's group, one draw, while replaying a log written before schema 5).
    fn draw(&mut self) -> Drawn {
        if ids::event_ids_drawn() {
            return EventId::generate_in(|| self.first.token().group()).into();
        }
        let drawn = Drawn {
            first: self.first,
            place: self.next,
        };
        self.next += 1;
        drawn
    }
}

/// A batch of events made on one thread and stored on another ([`handing_off`]), with
/// the endpoints each wanted.
pub struct HandedOff {
    store: usize,
    batch: Batch,
    owed: Vec<(usize, Vec<Arc<WebhookEndpoint>>)>,
}

thread_local! {
    /// While [`handing_off`] runs: the batches stored on this thread, in order.
    static HANDED: std::cell::RefCell<Option<Vec<HandedOff>>> = const { std::cell::RefCell::new(None) };
    static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
    /// An emptied list kept for the next scope (one allocation a thread, not one a scope).
    static SPARE: std::cell::Cell<Vec<Pending>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with every batch of events it stores appended to `into` instead, in order,
/// for another thread to store ([`Events::store_handed`]): recovery runs the writes on one
/// thread and stores their events on the other, as nothing the writes do reads them.
pub fn handing_off<R>(into: &mut Vec<HandedOff>, f: impl FnOnce() -> R) -> R {
    let (result, handed) = crate::state::scoped::scoped(&HANDED, Some(std::mem::take(into)), f);
    *into = handed.unwrap_or_default();
    result
}

/// The cause of an event `attempt` makes now.
fn cause(attempt: &Attempt) -> Cause {
    Cause {
        request_id: Some(attempt.request_id),
        idempotency_key: attempt.idempotency_key.clone(),
        created: now_unix(),
    }
}

/// An event's id, time and cause, drawn by [`Events::open`].
struct Opening {
    id: Drawn,
    kind: EventType,
    cause: Cause,
    wanted: Vec<Arc<WebhookEndpoint>>,
}

/// A scope opened by [`Events::open`]: the events this thread emits are held back until
/// [`Opened::close`] stores the scope's own event first, and the events held with it, as
/// one batch (one allocation for a create-and-confirm's three events).
/// Dropped without closing (an early return), the held events are stored all the same,
/// the opened one is not. Scopes nest: an inner scope's events join the outer one's, in
/// order.
pub struct Opened<'a> {
    events: &'a Events,
    first: Option<Opening>,
    /// The scope's own event, once closed: stored (or held by `outer`) on drop.
    closed: Option<Pending>,
    /// The events an enclosing scope holds, put back when this one ends.
    outer: Option<Held>,
}

impl Opened<'_> {
    /// Stores the opened event about `object` (written through `view`), then the events
    /// held back since it was opened, in the order they were emitted.
    pub fn close(mut self, object: Reply, view: View) {
        if let Some(o) = self.first.take() {
            let event = Draft::new(o.id, o.kind, (object, view), None, o.cause, o.wanted.len() as u32);
            self.closed = Some((event, o.wanted));
        }
    }
}

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        let mut held = HELD
            .with_borrow_mut(|held| {
                let inner = std::mem::replace(held, self.outer.take());
                // An enclosing scope's next event takes the place after this one's.
                if let (Some(outer), Some(inner)) = (held.as_mut(), &inner) {
                    if outer.first == inner.first {
                        outer.next = outer.next.max(inner.next);
                    }
                }
                inner
            })
            .map(|held| held.events)
            .unwrap_or_default();
        if let Some(closed) = self.closed.take() {
            held.insert(0, closed);
        }
        self.events.store_or_hold_all(&mut held);
        SPARE.set(held);
    }
}

impl Default for Events {
    fn default() -> Self {
        Self {
            table: Table::default(),
            ttl_secs: AtomicI64::new(DEFAULT_TTL.as_secs() as i64),
            endpoints: ArcSwap::from_pointee(Vec::new()),
            publisher: OnceLock::new(),
            deferring: AtomicBool::new(false),
            deferred: Mutex::new(Vec::new()),
        }
    }
}

impl Events {
    /// Events older than `ttl` are forgotten.
    pub fn set_ttl(&self, ttl: Duration) {
        self.ttl_secs
            .store(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// Whether `event` has outlived the TTL at `now` (Unix seconds).
    pub fn expired(&self, event: &Event, now: i64) -> bool {
        event.created().saturating_add(self.ttl_secs.load(Ordering::Relaxed)) < now
    }

    /// Installs the publisher (once; later calls are ignored).
    pub fn set_publisher(&self, publisher: Arc<dyn Publisher>) {
        let _ = self.publisher.set(publisher);
    }

    /// Keeps new events back instead of publishing them, until [`Events::take_deferred`].
    pub fn defer_publishing(&self) {
        self.deferring.store(true, Ordering::Relaxed);
    }

    /// The events kept back since [`Events::defer_publishing`], oldest first; events
    /// are published again from now on (once a publisher is set).
    pub fn take_deferred(&self) -> Vec<Deferred> {
        self.deferring.store(false, Ordering::Relaxed);
        std::mem::take(&mut *self.deferred.lock())
    }

    /// Takes out the events kept back whose event is gone (retired by `--retain` while the
    /// state is recovered): recovery keeps aside those with deliveries still pending.
    pub fn take_gone_deferred(&self) -> Vec<Deferred> {
        let mut deferred = self.deferred.lock();
        let (kept, gone): (Vec<Deferred>, Vec<Deferred>) = std::mem::take(&mut *deferred)
            .into_iter()
            .partition(|(event, _)| self.table.get(&event.id()).is_some());
        *deferred = kept;
        gone
    }

    /// The webhook endpoints events are delivered to (replaced whenever one changes).
    pub fn set_endpoints(&self, endpoints: Vec<Arc<WebhookEndpoint>>) {
        self.endpoints.store(Arc::new(endpoints));
    }

    pub fn endpoints(&self) -> Arc<Vec<Arc<WebhookEndpoint>>> {
        self.endpoints.load_full()
    }

    /// Stores an event of `kind` about `object` (with `previous`, the object before an
    /// update), caused by `attempt`, and publishes it (or, inside an [`Opened`] scope on
    /// this thread, holds it back until the scope's own event is stored).
    /// Inside a scope, the event's id is the scope's next ([`Held::draw`]).
    pub fn emit(&self, kind: EventType, object: Reply, previous: Option<Reply>, attempt: &Attempt) {
        let wanted = self.wanted(kind);
        let id = self.next_id();
        let event = Draft::new(
            id,
            kind,
            (object, View::AsIs),
            previous,
            cause(attempt),
            wanted.len() as u32,
        );
        self.store_or_hold(event, wanted);
    }

    /// Draws the id and time of an event of `kind` caused by `attempt` now, and holds
    /// back the events this thread emits until [`Opened::close`] stores it, with its
    /// object, before them. For an event whose object is only known once the request has
    /// done more (`payment_intent.created` of an intent confirmed by the same request,
    /// written from the confirmed intent as it was created), its id drawn where it always
    /// was: the data dir's log replays the ids a request drew, in order.
    pub fn open<'a>(&'a self, kind: EventType, attempt: &Attempt) -> Opened<'a> {
        let id = self.next_id();
        let cause = cause(attempt);
        let wanted = self.wanted(kind);
        let scope = Held {
            store: self.address(),
            first: id.first,
            next: id.place + 1,
            events: SPARE.take(),
        };
        let outer = HELD.with_borrow_mut(|held| held.replace(scope));
        Opened {
            events: self,
            outer,
            closed: None,
            first: Some(Opening {
                id,
                kind,
                cause,
                wanted,
            }),
        }
    }

    /// The enabled endpoints that want an event of `kind` (none while nobody publishes).
    fn wanted(&self, kind: EventType) -> Vec<Arc<WebhookEndpoint>> {
        let publishing = self.publisher.get().is_some() || self.deferring.load(Ordering::Relaxed);
        match publishing {
            true => self
                .endpoints
                .load()
                .iter()
                .filter(|e| e.wants(kind))
                .cloned()
                .collect(),
            false => Vec::new(),
        }
    }

    /// A new event's id: inside an [`Opened`] scope of this store, the scope's next
    /// ([`Held::draw`]: the scope's events are stored together, one batch and one row);
    /// else drawn.
    fn next_id(&self) -> Drawn {
        self.held(Held::draw)
            .unwrap_or_else(|| EventId::generate_in(shard::weighted_group).into())
    }

    /// This store's identity in [`HELD`].
    fn address(&self) -> usize {
        self as *const Self as usize
    }

    /// `f` of the [`Opened`] scope of this store open on this thread; `None` when there
    /// is none.
    fn held<R>(&self, f: impl FnOnce(&mut Held) -> R) -> Option<R> {
        HELD.with_borrow_mut(|held| match held {
            Some(scope) if scope.store == self.address() => Some(f(scope)),
            _ => None,
        })
    }

    /// Stores `event` alone, or holds it back while an [`Opened`] scope of this store is
    /// open on this thread.
    fn store_or_hold(&self, event: Draft, wanted: Vec<Arc<WebhookEndpoint>>) {
        let mut pending = Some((event, wanted));
        if self.held(|scope| scope.events.extend(pending.take())).is_none() {
            if let Some((event, wanted)) = pending {
                let owed = match wanted.is_empty() {
                    true => Vec::new(),
                    false => vec![(0, wanted)],
                };
                self.store(Batch::one(event), owed);
            }
        }
    }

    /// Stores `events` (emptying it) as batches of one request's consecutive events, or
    /// hands them to the enclosing [`Opened`] scope of this store on this thread.
    fn store_or_hold_all(&self, events: &mut Vec<Pending>) {
        if self.held(|scope| scope.events.append(events)).is_some() {
            return;
        }
        loop {
            let (mut at, mut owed) = (0, Vec::new());
            let Some(batch) = Batch::take_run(events, |wanted: Vec<_>| {
                if !wanted.is_empty() {
                    owed.push((at, wanted));
                }
                at += 1;
            }) else {
                break;
            };
            self.store(batch, owed);
        }
    }

    /// Stores `batch` and hands its events that endpoints want (`owed`: each event's place
    /// in the batch and its endpoints) to the publisher (or keeps them back while
    /// recovering); inside [`handing_off`], keeps it for [`Events::store_handed`].
    fn store(&self, batch: Batch, owed: Vec<(usize, Vec<Arc<WebhookEndpoint>>)>) {
        let mut item = Some((batch, owed));
        HANDED.with_borrow_mut(|handed| {
            if let Some(handed) = handed.as_mut() {
                handed.extend(item.take().map(|(batch, owed)| HandedOff {
                    store: self.address(),
                    batch,
                    owed,
                }));
            }
        });
        if let Some((batch, owed)) = item {
            self.stored(batch, owed);
        }
    }

    /// Stores a batch [`handing_off`] kept on another thread, as [`Events::store`] would
    /// have; false (nothing stored) when it was made for another store.
    pub fn store_handed(&self, handed: HandedOff) -> bool {
        if handed.store != self.address() {
            return false;
        }
        self.stored(handed.batch, handed.owed);
        true
    }

    fn stored(&self, batch: Batch, owed: Vec<(usize, Vec<Arc<WebhookEndpoint>>)>) {
        self.table.insert_all(batch.clone());
        for (at, wanted) in owed {
            let event = batch.event(at);
            crate::state::trace::owed(self.table.touch_of(&event.id()), wanted.len() as u32);
            match self.publisher.get() {
                Some(publisher) => publisher.publish(&event, &wanted),
                None => self.deferred.lock().push((event, wanted)),
            }
        }
    }

    /// Forgets events past the TTL; says how many.
    pub fn purge_expired(&self, now: i64) -> usize {
        self.table.retain(|e| !self.expired(e, now))
    }

    pub fn clear(&self) {
        self.table.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::table::Cursor;

    fn types(events: &Events) -> Vec<&'static str> {
        let page = events.table.page(Cursor::Start, 10, |_| true);
        page.items.iter().rev().map(|e| e.kind().as_str()).collect()
    }

    fn json() -> Reply {
        Reply::Json(Box::new(serde_json::json!({"id": "x"})))
    }

    /// An empty store and a request's attempt.
    fn store() -> (Events, Attempt) {
        (Events::default(), crate::test_support::attempt())
    }

    /// Opens a `payment_intent.created` scope (as a create-and-confirm does) and emits one
    /// event of each kind in it, in order.
    fn open_with<'a>(events: &'a Events, attempt: &Attempt, inside: &[EventType]) -> Opened<'a> {
        let opened = events.open(EventType::PaymentIntentCreated, attempt);
        for &kind in inside {
            events.emit(kind, json(), None, attempt);
        }
        opened
    }

    #[test]
    fn handed_off_events_are_stored_where_and_when_they_are_handed_in_order() {
        let (events, attempt) = store();
        let other = Events::default();
        let mut handed = Vec::new();
        handing_off(&mut handed, || {
            open_with(&events, &attempt, &[EventType::ChargeSucceeded]).close(json(), View::AsIs);
            events.emit(EventType::ChargeRefunded, json(), None, &attempt);
        });
        assert!(types(&events).is_empty(), "kept, not stored");
        assert_eq!(handed.len(), 2, "a scope's batch and a lone event");
        // Outside `handing_off` the thread stores again.
        events.emit(EventType::ChargeCaptured, json(), None, &attempt);
        assert_eq!(types(&events), ["charge.captured"]);
        let mut handed = handed.into_iter();
        assert!(!other.store_handed(handed.next().unwrap()), "made for another store");
        assert!(types(&other).is_empty());
        assert!(events.store_handed(handed.next().unwrap()));
        assert_eq!(types(&events), ["charge.captured", "charge.refunded"]);
    }

    #[test]
    fn an_opened_event_is_stored_before_those_emitted_while_it_was_open() {
        let (events, attempt) = store();
        let opened = open_with(
            &events,
            &attempt,
            &[EventType::ChargeSucceeded, EventType::ChargeCaptured],
        );
        assert!(types(&events).is_empty(), "held back while open");
        opened.close(json(), View::AsIs);
        assert_eq!(
            types(&events),
            ["payment_intent.created", "charge.succeeded", "charge.captured"]
        );
        events.emit(EventType::ChargeRefunded, json(), None, &attempt);
        assert_eq!(types(&events).len(), 4, "stored at once after the scope");
    }

    #[test]
    fn a_scopes_events_share_one_allocation_and_a_lone_event_has_its_own() {
        let (events, attempt) = store();
        let opened = open_with(
            &events,
            &attempt,
            &[EventType::ChargeSucceeded, EventType::PaymentIntentSucceeded],
        );
        opened.close(json(), View::AsIs);
        events.emit(EventType::ChargeRefunded, json(), None, &attempt);
        let page = events.table.page(Cursor::Start, 10, |_| true);
        let [refunded, succeeded, charged, created] = &page.items[..] else {
            panic!("four events: {:?}", page.items);
        };
        assert_eq!(created.batch().event_count(), 3);
        assert!(created.batch().same(charged.batch()) && created.batch().same(succeeded.batch()));
        assert_eq!(refunded.batch().event_count(), 1);
        let group = created.id().token().group();
        assert!(
            [charged, succeeded].iter().all(|e| e.id().token().group() == group),
            "drawn in one group"
        );
        assert_eq!(charged.request_id(), Some(attempt.request_id));
        assert_eq!(
            events.table.get(&charged.id()).map(|e| e.kind()),
            Some(EventType::ChargeSucceeded)
        );
    }

    #[test]
    fn scopes_nest_and_keep_the_order_events_happened_in() {
        let (events, attempt) = store();
        let outer = events.open(EventType::PaymentIntentCreated, &attempt);
        events.emit(EventType::ChargeSucceeded, json(), None, &attempt);
        let inner = events.open(EventType::CustomerCreated, &attempt);
        events.emit(EventType::PaymentMethodAttached, json(), None, &attempt);
        inner.close(json(), View::AsIs);
        events.emit(EventType::PaymentIntentSucceeded, json(), None, &attempt);
        assert!(types(&events).is_empty(), "the inner scope's events join the outer's");
        outer.close(json(), View::AsIs);
        assert_eq!(
            types(&events),
            [
                "payment_intent.created",
                "charge.succeeded",
                "customer.created",
                "payment_method.attached",
                "payment_intent.succeeded"
            ]
        );
        // Each stored under the id it was given: its first's, then the places after it.
        let page = events.table.page(Cursor::Start, 10, |_| true);
        let created = page.items.last().unwrap().id();
        let ids: Vec<EventId> = page.items.iter().rev().map(|e| e.id()).collect();
        assert_eq!(ids, (0..5).map(|n| created.nth(n)).collect::<Vec<_>>());
        assert!(
            page.items.iter().all(|e| e.batch().same(page.items[0].batch())),
            "one batch"
        );
    }

    #[test]
    fn another_stores_events_are_not_held_by_a_scope() {
        let (events, other) = (Events::default(), Events::default());
        let attempt = crate::test_support::attempt();
        let opened = events.open(EventType::PaymentIntentCreated, &attempt);
        other.emit(EventType::CustomerCreated, json(), None, &attempt);
        assert_eq!(types(&other), ["customer.created"], "stored at once, in its own store");
        opened.close(json(), View::AsIs);
        assert_eq!(types(&events), ["payment_intent.created"]);
    }

    #[test]
    fn an_opened_scope_dropped_unclosed_loses_none_of_the_held_events() {
        let (events, attempt) = store();
        {
            let _opened = events.open(EventType::PaymentIntentCreated, &attempt);
            events.emit(EventType::ChargeFailed, json(), None, &attempt);
        }
        assert_eq!(types(&events), ["charge.failed"]);
        // Its place follows a first that was never stored: it is a batch of its own,
        // found under the id it was given.
        let page = events.table.page(Cursor::Start, 10, |_| true);
        let failed = &page.items[0];
        assert_eq!(failed.batch().event_count(), 1);
        assert_eq!(
            events.table.get(&failed.id()).map(|e| e.kind()),
            Some(EventType::ChargeFailed)
        );
    }
}
