//! The dashboard's view models: what each page of `GET /__fauxpay/` shows, read from a
//! running [`Provider`] (payments, ledger, request journal, fault profile), as plain
//! values with no HTML and no HTTP.
//!
//! The pages themselves (HTML, escaped by maud's templates) live in
//! `http/dashboard/`. Reading here costs the dashboard, not the API: a page walks the
//! ledger and the request journal under their shard locks one shard at a time, as
//! `GET /__fauxpay/summary` does, and [`Provider`]'s counters give the live marker
//! ([`change_marker`]) without walking anything. Lists are capped ([`MAX_ROWS`]).
//! [`story`] turns a duplicate group and its requests into sentences a person reads.
//!
//! Seam for events and webhooks: a payment's page is a [`PaymentView`]; its future
//! `events` and `deliveries` go beside `requests` and `ledger`.

pub mod story;

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::app::Provider;
use crate::journal::{Outcome, RequestRecord};
use crate::resources::charges::object::Charge;
use crate::resources::checkout_sessions::object::{CheckoutSession, SessionStatus};
use crate::resources::payment_intents::object::PaymentIntent;
use crate::state::clock::now_ms;
use crate::state::ledger::{LedgerRecord, RecordFilter};
use crate::state::table::Cursor;
use crate::stripe::ids::{ChargeId, ObjectId, PaymentIntentId};

/// Rows at most in any list the dashboard shows.
pub const MAX_ROWS: usize = 200;

/// Longest search text or filter value accepted (longer ones are cut).
pub const MAX_QUERY_CHARS: usize = 200;

/// The window requests per second are measured over.
const RATE_WINDOW_MS: u64 = 10_000;

/// Cuts a query value to [`MAX_QUERY_CHARS`] characters, trimmed.
pub fn clip(q: &str) -> &str {
    let q = q.trim();
    match q.char_indices().nth(MAX_QUERY_CHARS) {
        Some((i, _)) => &q[..i],
        None => q,
    }
}

/// One charge of a duplicate group, as `GET /__fauxpay/summary` serves it (what the
/// dashboard's story of the group shows of it).
#[derive(Debug, Clone, Deserialize)]
pub struct GroupCharge {
    pub id: String,
    pub amount: u64,
    pub idempotency_key: Option<String>,
    pub request_id: String,
}

/// A correlation id with more than one captured charge.
#[derive(Debug, Clone, Deserialize)]
pub struct DuplicateGroup {
    pub correlation_id: String,
    pub captured_amount: u64,
    pub extra_amount: u64,
    pub currency: String,
    pub charges: Vec<GroupCharge>,
}

/// A refund that asked for more than was left.
#[derive(Debug, Clone, Deserialize)]
pub struct OverRefundView {
    pub charge: String,
    pub correlation_id: Option<String>,
    pub captured: u64,
    pub already_refunded: u64,
    pub requested: u64,
    pub idempotency_key: Option<String>,
}

/// The ledger summary (the `GET /__fauxpay/summary` contract, read back typed).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Summary {
    pub charges: u64,
    pub refunds: u64,
    pub captured: std::collections::BTreeMap<String, u64>,
    pub refunded: std::collections::BTreeMap<String, u64>,
    pub duplicate_charges: u64,
    pub duplicate_groups: Vec<DuplicateGroup>,
    pub blocked_duplicates: u64,
    pub over_refunds: Vec<OverRefundView>,
}

/// The active fault profile.
#[derive(Debug, Clone)]
pub struct ProfileView {
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub rules: usize,
    pub source: String,
    pub activated_ms: u64,
}

/// The overview page.
#[derive(Debug, Clone)]
pub struct Overview {
    pub payment_intents: usize,
    /// Checkout Sessions made, and how many of them were paid (completed).
    pub checkout_sessions: usize,
    pub checkout_sessions_complete: usize,
    pub summary: Summary,
    pub profile: ProfileView,
    pub requests_logged: u64,
    pub requests_per_second: f64,
    /// Faults injected so far: (`kind when`, count).
    pub faults: Vec<(String, u64)>,
}

/// A marker that changes whenever something the dashboard shows may have changed (a
/// request logged, a movement recorded, a profile swapped): four atomic reads.
pub fn change_marker(app: &Provider) -> String {
    let counts = app.payments.ledger.counts();
    format!(
        "{}-{}-{}-{}",
        app.journal.logged(),
        counts.charges,
        counts.refunds,
        app.faults.active().activated_ms
    )
}

pub fn profile(app: &Provider) -> ProfileView {
    let active = app.faults.active();
    let p = active.engine.profile();
    ProfileView {
        name: p.name.clone(),
        description: p.description.clone(),
        seed: p.seed,
        rules: p.rules.len(),
        source: active.source.clone(),
        activated_ms: active.activated_ms,
    }
}

pub fn summary(app: &Provider) -> Summary {
    serde_json::from_value(app.payments.ledger.summary()).unwrap_or_default()
}

pub fn overview(app: &Provider) -> Overview {
    let since = now_ms().saturating_sub(RATE_WINDOW_MS);
    let recent = app.journal.recent(usize::MAX, |r| r.time_ms >= since).len();
    Overview {
        payment_intents: app.payments.intents.len(),
        checkout_sessions: app.payments.checkout_sessions.len(),
        checkout_sessions_complete: app
            .payments
            .checkout_sessions
            .page(Cursor::Start, usize::MAX - 1, |s| s.status == SessionStatus::Complete)
            .items
            .len(),
        summary: summary(app),
        profile: profile(app),
        requests_logged: app.journal.logged(),
        requests_per_second: recent as f64 * 1000.0 / RATE_WINDOW_MS as f64,
        faults: app
            .faults
            .counts()
            .into_iter()
            .map(|((kind, when), n)| (format!("{} {}", kind.as_str(), when.as_str()), n))
            .collect(),
    }
}

/// Filters of the payments page.
#[derive(Debug, Clone, Default)]
pub struct PaymentFilter {
    /// An id (`pi_…`, `ch_…`), or part of an order / correlation id.
    pub q: String,
    /// A payment intent status (`succeeded`, `requires_payment_method`, …), or empty.
    pub status: String,
}

impl PaymentFilter {
    fn keeps_intent(&self, pi: &PaymentIntent) -> bool {
        (self.status.is_empty() || pi.status.as_str() == self.status)
            && (self.q.is_empty()
                || pi.id.as_str().contains(self.q.as_str())
                || pi
                    .correlation_id
                    .as_ref()
                    .is_some_and(|c| c.as_str().contains(self.q.as_str()))
                || pi.metadata.iter().any(|(_, v)| v.contains(self.q.as_str())))
    }

    fn keeps_charge(&self, ch: &Charge) -> bool {
        let status = match ch.status {
            crate::resources::charges::object::ChargeStatus::Succeeded => "succeeded",
            crate::resources::charges::object::ChargeStatus::Failed => "failed",
            crate::resources::charges::object::ChargeStatus::Pending => "pending",
        };
        (self.status.is_empty() || status == self.status)
            && (self.q.is_empty()
                || ch.id.as_str().contains(self.q.as_str())
                || ch.payment_intent.is_some_and(|p| p.as_str().contains(self.q.as_str()))
                || ch
                    .correlation_id
                    .as_ref()
                    .is_some_and(|c| c.as_str().contains(self.q.as_str())))
    }
}

/// The payments page: intents and charges, newest first.
#[derive(Debug, Clone)]
pub struct PaymentList {
    pub intents: Vec<Arc<PaymentIntent>>,
    pub charges: Vec<Arc<Charge>>,
    pub more_intents: bool,
    pub more_charges: bool,
}

pub fn payments(app: &Provider, filter: &PaymentFilter) -> PaymentList {
    let intents = app
        .payments
        .intents
        .page(Cursor::Start, MAX_ROWS, |pi| filter.keeps_intent(pi));
    let charges = app
        .payments
        .charges
        .page(Cursor::Start, MAX_ROWS, |ch| filter.keeps_charge(ch));
    PaymentList {
        intents: intents.items,
        charges: charges.items,
        more_intents: intents.has_more,
        more_charges: charges.has_more,
    }
}

/// One payment: the intent (or a charge without one), its charges, the requests that
/// touched it or its order (the request journal), and its ledger records.
#[derive(Debug, Clone)]
pub struct PaymentView {
    pub intent: Option<Arc<PaymentIntent>>,
    pub charges: Vec<Arc<Charge>>,
    pub correlation_id: Option<String>,
    pub requests: Vec<RequestRecord>,
    pub ledger: Vec<Arc<LedgerRecord>>,
    /// Other payment intents of the same order (a double charge's other half).
    pub siblings: Vec<PaymentIntentId>,
    /// The Checkout Session the payment was made for.
    pub checkout_session: Option<Arc<CheckoutSession>>,
}

/// The payment page of `id` (`pi_…`, `ch_…`, or a paid `cs_test_…`), if fauxpay knows it.
pub fn payment(app: &Provider, id: &str) -> Option<PaymentView> {
    let (intent, charge) = match ObjectId::parse(id)? {
        ObjectId::CheckoutSession(cs) => {
            let pi = app.payments.checkout_sessions.get(&cs)?.payment_intent?;
            (Some(app.payments.intents.get(&pi)?), None)
        }
        ObjectId::Intent(pi) => (Some(app.payments.intents.get(&pi)?), None),
        ObjectId::Charge(ch) => {
            let charge = app.payments.charges.get(&ch)?;
            let intent = charge.payment_intent.and_then(|pi| app.payments.intents.get(&pi));
            (intent, Some(charge))
        }
        _ => return None,
    };
    let pi_id = intent.as_ref().map(|pi| pi.id);
    let charges: Vec<Arc<Charge>> = match pi_id {
        Some(pi) => {
            app.payments
                .charges
                .page(Cursor::Start, MAX_ROWS, |c| c.payment_intent == Some(pi))
                .items
        }
        None => charge.into_iter().collect(),
    };
    let charge_ids: Vec<ChargeId> = charges.iter().map(|c| c.id).collect();
    let correlation = intent
        .as_ref()
        .and_then(|pi| pi.correlation_id.clone())
        .or_else(|| charges.first().and_then(|c| c.correlation_id.clone()));
    let touches = |object: Option<ObjectId>| match object {
        Some(ObjectId::Intent(p)) => Some(p) == pi_id,
        Some(ObjectId::Charge(c)) => charge_ids.contains(&c),
        _ => false,
    };
    let requests = app.journal.recent(MAX_ROWS, |r| {
        touches(r.object) || (correlation.is_some() && r.correlation_id == correlation)
    });
    let ledger: Vec<Arc<LedgerRecord>> = app
        .payments
        .ledger
        .records(&RecordFilter {
            correlation_prefix: correlation.as_ref().map(|c| c.as_str().to_string()),
            since_ms: None,
        })
        .into_iter()
        .filter(|r| {
            (r.payment_intent().is_some() && r.payment_intent() == pi_id)
                || r.charge().is_some_and(|c| charge_ids.contains(&c))
                || matches!(r.id(), crate::state::ledger::MovementId::Charge(c) if charge_ids.contains(&c))
                || (correlation.is_some() && r.correlation_id == correlation)
        })
        .take(MAX_ROWS)
        .collect();
    let siblings = match &correlation {
        Some(c) => app
            .payments
            .intents
            .page(Cursor::Start, 20, |pi| {
                pi.correlation_id.as_ref() == Some(c) && Some(pi.id) != pi_id
            })
            .items
            .iter()
            .map(|pi| pi.id)
            .collect(),
        None => Vec::new(),
    };
    let checkout_session = intent
        .as_ref()
        .and_then(|pi| pi.checkout_session())
        .and_then(|cs| app.payments.checkout_sessions.get(&cs));
    Some(PaymentView {
        intent,
        charges,
        correlation_id: correlation.map(|c| c.as_str().to_string()),
        requests,
        ledger,
        siblings,
        checkout_session,
    })
}

/// Each duplicate group with the requests of its order, oldest first.
pub fn duplicates(app: &Provider) -> Vec<(DuplicateGroup, Vec<RequestRecord>)> {
    let groups = summary(app).duplicate_groups;
    let wanted: std::collections::HashSet<&str> = groups.iter().map(|g| g.correlation_id.as_str()).collect();
    let mut by_order: HashMap<String, Vec<RequestRecord>> = HashMap::new();
    for r in app.journal.recent(usize::MAX, |r| {
        r.correlation_id.as_ref().is_some_and(|c| wanted.contains(c.as_str()))
    }) {
        if let Some(c) = &r.correlation_id {
            let list = by_order.entry(c.as_str().to_string()).or_default();
            if list.len() < MAX_ROWS {
                list.push(r);
            }
        }
    }
    groups
        .into_iter()
        .take(MAX_ROWS)
        .map(|g| {
            let requests = by_order.remove(&g.correlation_id).unwrap_or_default();
            (g, requests)
        })
        .collect()
}

/// Filters of the requests page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFilter {
    /// `""` (all), `ok` (2xx), `error` (4xx and 5xx), `broken` (dropped, reset, hung),
    /// `replayed`, or an exact status such as `402`.
    pub outcome: String,
    /// `""` (all), `any` (a fault acted), `none`, or text the fault's label contains.
    pub fault: String,
    /// Text an id, key, path or correlation id contains.
    pub q: String,
}

/// The outcome classes the requests page offers.
pub const OUTCOME_CLASSES: &[(&str, &str)] = &[
    ("", "all outcomes"),
    ("ok", "2xx"),
    ("error", "4xx and 5xx"),
    ("broken", "dropped, reset or hung"),
    ("replayed", "idempotent replays"),
];

impl RequestFilter {
    pub fn keeps(&self, r: &RequestRecord) -> bool {
        let outcome = match self.outcome.as_str() {
            "" => true,
            "ok" => matches!(r.outcome, Outcome::Status(s) if (200..300).contains(&s)),
            "error" => matches!(r.outcome, Outcome::Status(s) if s >= 400),
            "broken" => matches!(r.outcome, Outcome::Dropped | Outcome::Reset | Outcome::Hung),
            "replayed" => r.replayed,
            exact => outcome_text(r.outcome) == exact,
        };
        let fault = match self.fault.as_str() {
            "" => true,
            "any" => r.fault.is_some(),
            "none" => r.fault.is_none(),
            text => r.fault.as_deref().is_some_and(|f| f.contains(text)),
        };
        let q = self.q.as_str();
        let text = q.is_empty()
            || r.request_id.as_str().contains(q)
            || r.path.contains(q)
            || r.idempotency_key.as_ref().is_some_and(|k| k.as_str().contains(q))
            || r.correlation_id.as_ref().is_some_and(|c| c.as_str().contains(q))
            || r.object.is_some_and(|o| o.as_str().contains(q));
        outcome && fault && text
    }
}

/// The journal's most recent requests matching `filter`, newest first.
pub fn requests(app: &Provider, filter: &RequestFilter) -> Vec<RequestRecord> {
    let mut out = app.journal.recent(MAX_ROWS, |r| filter.keeps(r));
    out.reverse();
    out
}

/// What the client saw, in words: `200`, `dropped`, `reset`, `hung`.
pub fn outcome_text(o: Outcome) -> String {
    match o {
        Outcome::Pending => "pending".into(),
        Outcome::Status(s) => s.to_string(),
        Outcome::Dropped => "dropped".into(),
        Outcome::Reset => "reset".into(),
        Outcome::Hung => "hung".into(),
    }
}

pub use crate::stripe::money::display as money;

/// A Unix time in milliseconds as UTC `HH:MM:SS.mmm` (the dashboard's clock face).
pub fn clock(ms: u64) -> String {
    let day_ms = ms % 86_400_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_clock_read_as_a_person_reads_them() {
        assert_eq!(money(1234, "usd"), "12.34 usd");
        assert_eq!(money(5, "eur"), "0.05 eur");
        assert_eq!(money(500, "jpy"), "500 jpy");
        assert_eq!(clock(3_723_004), "01:02:03.004");
    }

    #[test]
    fn queries_are_clipped() {
        let long = "x".repeat(MAX_QUERY_CHARS + 50);
        assert_eq!(clip(&long).len(), MAX_QUERY_CHARS);
        assert_eq!(clip("  pi_1 "), "pi_1");
        assert_eq!(clip(&"é".repeat(300)).chars().count(), MAX_QUERY_CHARS);
    }
}
