//! [`Events`]: where every rule publishes its events, at the commit point of the change
//! they describe and under the same locks (so one object's events are stored in the
//! order its changes happened). An event is stored (listed newest first, kept for the
//! event TTL) and handed to the [`Publisher`] (webhook delivery) with the webhook
//! endpoints that want it; `pending_webhooks` starts at their number.
//!
//! Publishing is cheap and never waits: with no endpoint it is one allocation and one
//! table insert; delivery is queued, never performed, on the request's path.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::object::{Event, EventType};
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::webhook_endpoints::object::WebhookEndpoint;
use crate::state::clock::now_unix;
use crate::state::table::Table;

/// Receives every stored event with the endpoints it is to be delivered to.
pub trait Publisher: Send + Sync {
    fn publish(&self, event: &Arc<Event>, endpoints: &[Arc<WebhookEndpoint>]);
}

/// Stripe keeps events for 30 days.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Every event, and who hears of new ones.
pub struct Events {
    pub table: Table<Arc<Event>>,
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
pub type Deferred = (Arc<Event>, Vec<Arc<WebhookEndpoint>>);

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
        event.created.saturating_add(self.ttl_secs.load(Ordering::Relaxed)) < now
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
            .partition(|(event, _)| self.table.get(&event.id).is_some());
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
    /// update), caused by `attempt`, and publishes it.
    pub fn emit(&self, kind: EventType, object: Reply, previous: Option<Reply>, attempt: &Attempt) -> Arc<Event> {
        let publishing = self.publisher.get().is_some() || self.deferring.load(Ordering::Relaxed);
        let wanted: Vec<Arc<WebhookEndpoint>> = match publishing {
            true => self
                .endpoints
                .load()
                .iter()
                .filter(|e| e.wants(kind))
                .cloned()
                .collect(),
            false => Vec::new(),
        };
        let event = Arc::new(Event::new(
            kind,
            object,
            previous,
            Some(attempt.request_id),
            attempt.idempotency_key.clone(),
            now_unix(),
            wanted.len() as u32,
        ));
        self.table.insert(event.clone());
        if !wanted.is_empty() {
            crate::state::trace::owed(self.table.touch_of(&event.id), wanted.len() as u32);
            match self.publisher.get() {
                Some(publisher) => publisher.publish(&event, &wanted),
                None => self.deferred.lock().push((event.clone(), wanted)),
            }
        }
        event
    }

    /// Forgets events past the TTL; says how many.
    pub fn purge_expired(&self, now: i64) -> usize {
        self.table.retain(|e| !self.expired(e, now))
    }

    pub fn clear(&self) {
        self.table.clear();
    }
}
