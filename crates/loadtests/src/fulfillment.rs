//! Fulfilment: did the target ship each paid order exactly once?
//!
//! A template's [`Probe`] names how to ask the target how many times it fulfilled an
//! order. After the attack, [`drain`] asks the provider to wait until its webhook delivery
//! queue is empty (`GET /__fauxpay/webhooks/drain`: no sleeping, the provider answers when
//! nothing is queued, in flight or waiting for a retry), then [`probe_all`] asks the
//! target about every logical payment, and [`judge`] (pure) finds the two anomalies:
//! a **double fulfilment** (the count is above 1) and a **missed fulfilment** (the client
//! was told ok, the ledger holds a captured charge, and the count is 0). Each example's
//! story puts the provider's webhook deliveries for the order ([`fetch_deliveries`], best
//! effort) beside the payment's own story. When the provider delivered no webhook at all
//! during the run (no `--webhook` endpoint, or a provider without webhooks), fulfilment
//! is not checked, and the report says why.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{Outcome, PaymentRecord};
use crate::ledger::LedgerView;
use crate::reconcile::{Anomaly, Example, MAX_EXAMPLES};
use crate::template::Probe;

/// Probes in flight at once.
pub const PROBE_CONCURRENCY: usize = 32;

/// The provider's delivery queue, as `GET /__fauxpay/webhooks/drain` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainStatus {
    pub drained: bool,
    #[serde(default)]
    pub queued: u64,
    #[serde(default)]
    pub in_flight: u64,
    #[serde(default)]
    pub retrying: u64,
    #[serde(default)]
    pub delivered: u64,
    #[serde(default)]
    pub failed: u64,
}

impl DrainStatus {
    /// Deliveries finished or still owed.
    fn total(&self) -> u64 {
        self.queued + self.in_flight + self.retrying + self.delivered + self.failed
    }
}

/// Why the drain endpoint gave no status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrainError {
    /// 404: the provider has no webhook delivery.
    NotServed,
    Failed(String),
}

fn admin(req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}

/// Asks the provider to wait up to `timeout` for its delivery queue to drain
/// (`timeout` 0: the status now).
pub async fn drain(
    http: &reqwest::Client,
    provider: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<DrainStatus, DrainError> {
    let url = format!("{}/__fauxpay/webhooks/drain", provider.trim_end_matches('/'));
    let wait = format!("{}ms", timeout.as_millis());
    let resp = admin(http.get(&url).query(&[("timeout", wait.as_str())]), token)
        .timeout(timeout + Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| DrainError::Failed(format!("{url}: {e}")))?;
    match resp.status().as_u16() {
        404 => Err(DrainError::NotServed),
        200..=299 => crate::body::json_capped::<DrainStatus>(resp, crate::body::MAX_ANSWER_BYTES)
            .await
            .map_err(|e| DrainError::Failed(format!("{url}: {e}"))),
        s => Err(DrainError::Failed(format!("{url} answered {s}"))),
    }
}

/// Whether fulfilment can be judged, from the delivery queue before and after the run.
pub fn checkable(
    before: &Result<DrainStatus, DrainError>,
    after: &Result<DrainStatus, DrainError>,
) -> Result<(), String> {
    match (before, after) {
        (_, Err(DrainError::NotServed)) => Err(
            "the provider delivers no webhooks (it does not serve /__fauxpay/webhooks/drain): run a fauxpay serve with --webhook URL".into(),
        ),
        (_, Err(DrainError::Failed(e))) => Err(format!("the provider's delivery queue could not be read: {e}")),
        (Ok(b), Ok(a)) if a.total() <= b.total() => Err(
            "the provider delivered no webhook during the run: point a webhook endpoint at the target (fauxpay serve --webhook URL/webhooks/stripe)".into(),
        ),
        (Err(_), Ok(a)) if a.total() == 0 => Err(
            "the provider delivered no webhook during the run: point a webhook endpoint at the target (fauxpay serve --webhook URL/webhooks/stripe)".into(),
        ),
        _ => Ok(()),
    }
}

/// What a probe found for one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probed {
    Count(u64),
    /// 404: the target does not know the order (it fulfilled nothing).
    NotFound,
    Failed(String),
}

/// Probes every order, [`PROBE_CONCURRENCY`] at a time; the answers are in `orders`' order.
pub async fn probe_all(http: &reqwest::Client, target: &str, probe: &Probe, orders: Vec<String>) -> Vec<Probed> {
    let orders = Arc::new(orders);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..PROBE_CONCURRENCY.min(orders.len()) {
        let (orders, next, http, probe) = (orders.clone(), next.clone(), http.clone(), probe.clone());
        let base = target.trim_end_matches('/').to_string();
        tasks.spawn(async move {
            let mut found = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(order) = orders.get(i) else { break };
                found.push((i, probe_one(&http, &base, &probe, order).await));
            }
            found
        });
    }
    let mut out = vec![Probed::Failed("not probed".into()); orders.len()];
    while let Some(done) = tasks.join_next().await {
        for (i, p) in done.unwrap_or_default() {
            out[i] = p;
        }
    }
    out
}

async fn probe_one(http: &reqwest::Client, base: &str, probe: &Probe, order: &str) -> Probed {
    let url = format!("{base}{}", probe.path(order));
    let resp = match http.request(probe.method.clone(), &url).send().await {
        Ok(r) => r,
        Err(e) => return Probed::Failed(format!("{} {url}: {e}", probe.method)),
    };
    let status = resp.status();
    if status.as_u16() == 404 {
        return Probed::NotFound;
    }
    let body = match crate::body::read_capped(resp, crate::body::MAX_ANSWER_BYTES).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return Probed::Failed(format!(
                "{} {url}: the answer is longer than {} bytes; not read",
                probe.method,
                crate::body::MAX_ANSWER_BYTES
            ))
        }
        Err(e) => return Probed::Failed(format!("{} {url}: {e}", probe.method)),
    };
    if !status.is_success() {
        return Probed::Failed(format!("{} {url} answered {status}", probe.method));
    }
    match probe.count_in(&body) {
        Ok(n) => Probed::Count(n),
        Err(e) => Probed::Failed(format!("{} {url}: {e}", probe.method)),
    }
}

/// The provider's delivery log (`GET /__fauxpay/webhooks`), as loosely typed entries;
/// empty when it cannot be read (stories are best effort).
pub async fn fetch_deliveries(http: &reqwest::Client, provider: &str, token: Option<&str>) -> Vec<Value> {
    let url = format!("{}/__fauxpay/webhooks", provider.trim_end_matches('/'));
    let Ok(resp) = admin(http.get(&url).query(&[("limit", "16384")]), token).send().await else {
        return Vec::new();
    };
    let parsed = match crate::body::read_capped(resp, crate::body::MAX_ADMIN_BYTES).await {
        Ok(Some(body)) => serde_json::from_slice::<Value>(&body),
        _ => return Vec::new(),
    };
    match parsed {
        Ok(Value::Array(entries)) => entries,
        Ok(Value::Object(mut m)) => match m.remove("data") {
            Some(Value::Array(entries)) => entries,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Pages of `GET /v1/events` read to tell the stories (100 events each, newest first).
pub const MAX_EVENT_PAGES: usize = 20;

/// The `payment_intent.succeeded` events naming each of `orders` (`GET /v1/events`,
/// newest first, at most [`MAX_EVENT_PAGES`] pages): order id → event ids. Best effort:
/// the delivery log names events, not orders, and this joins the two.
pub async fn fetch_event_ids(
    http: &reqwest::Client,
    provider: &str,
    api_key: &str,
    orders: &std::collections::HashSet<String>,
) -> std::collections::HashMap<String, Vec<String>> {
    let mut found: std::collections::HashMap<String, Vec<String>> = std::collections::HashMap::new();
    if orders.is_empty() {
        return found;
    }
    let url = format!("{}/v1/events", provider.trim_end_matches('/'));
    let mut after: Option<String> = None;
    for _ in 0..MAX_EVENT_PAGES {
        let mut query = vec![
            ("type", "payment_intent.succeeded".to_string()),
            ("limit", "100".to_string()),
        ];
        if let Some(a) = &after {
            query.push(("starting_after", a.clone()));
        }
        let Ok(resp) = http.get(&url).bearer_auth(api_key).query(&query).send().await else {
            break;
        };
        let Ok(page) = crate::body::json_capped::<Value>(resp, crate::body::MAX_ADMIN_BYTES).await else {
            break;
        };
        let Some(data) = page["data"].as_array() else { break };
        for e in data {
            let order = e.pointer("/data/object/metadata/order_id").and_then(Value::as_str);
            if let (Some(order), Some(id)) = (order, e["id"].as_str()) {
                if orders.contains(order) {
                    found.entry(order.to_string()).or_default().push(id.to_string());
                }
            }
        }
        after = data.last().and_then(|e| e["id"].as_str()).map(str::to_string);
        if page["has_more"] != Value::Bool(true) || after.is_none() {
            break;
        }
    }
    found
}

/// Whether `v` holds one of `needles` as a string value anywhere (bounded depth).
fn mentions(v: &Value, needles: &[&str], depth: usize) -> bool {
    match v {
        Value::String(s) => needles.contains(&s.as_str()),
        Value::Array(a) if depth > 0 => a.iter().any(|x| mentions(x, needles, depth - 1)),
        Value::Object(m) if depth > 0 => m.values().any(|x| mentions(x, needles, depth - 1)),
        _ => false,
    }
}

/// One delivery log entry in a few words: `evt_… payment_intent.succeeded attempt 2 → 200 (duplicate)`.
fn delivery_words(e: &Value) -> String {
    let field = |names: &[&str]| {
        names.iter().find_map(|n| match e.get(*n) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(x)) => Some(x.to_string()),
            _ => None,
        })
    };
    let mut s = String::new();
    if let Some(id) = field(&["event", "event_id"]) {
        s.push_str(&id);
    }
    if let Some(t) = field(&["event_type", "type"]) {
        s.push(' ');
        s.push_str(&t);
    }
    if let Some(a) = field(&["attempt"]) {
        s.push_str(" attempt ");
        s.push_str(&a);
    }
    if let Some(c) = field(&["copy"]) {
        s.push_str(" copy ");
        s.push_str(&c);
    }
    if let Some(r) = field(&["status", "http_status", "error", "result"]) {
        s.push_str(" → ");
        s.push_str(&r);
    }
    if let Some(f) = field(&["fault"]) {
        s.push_str(" (");
        s.push_str(&f);
        s.push(')');
    }
    s.trim().to_string()
}

/// The deliveries of `order`'s events (matched by its id, its payment intents' ids or
/// its events' ids) to `target` (entries naming another endpoint's `url` are left out).
pub fn deliveries_of<'a>(order: &str, ids: &[&str], target: &str, log: &'a [Value]) -> Vec<&'a Value> {
    let mut needles = vec![order];
    needles.extend_from_slice(ids);
    log.iter()
        .filter(|e| {
            e.get("url")
                .and_then(Value::as_str)
                .is_none_or(|u| u.starts_with(target))
        })
        .filter(|e| mentions(e, &needles, 6))
        .collect()
}

/// What the probes found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub probed: u64,
    pub probe_failures: u64,
    /// A few probe failures, as messages.
    pub failure_examples: Vec<String>,
    pub double: Anomaly,
    /// Fulfilments beyond the first, over all doubly fulfilled orders.
    pub extra: u64,
    pub missed: Anomaly,
}

/// Joins each payment's probe with its outcome and its captured charges (pure).
/// `story` tells a payment's story (as `reconcile::story`); `log` is the delivery log and
/// `events` the event ids of the orders (see [`fetch_event_ids`]).
pub fn judge(
    payments: &[PaymentRecord],
    probes: &[Probed],
    ledger: &LedgerView,
    log: &[Value],
    events: &std::collections::HashMap<String, Vec<String>>,
    target: &str,
    story: impl Fn(&PaymentRecord) -> String,
) -> Findings {
    let mut f = Findings::default();
    let none = Vec::new();
    for (p, probed) in payments.iter().zip(probes) {
        let count = match probed {
            Probed::Count(n) => *n,
            Probed::NotFound => 0,
            Probed::Failed(e) => {
                f.probe_failures += 1;
                if f.failure_examples.len() < MAX_EXAMPLES {
                    f.failure_examples.push(e.clone());
                }
                continue;
            }
        };
        f.probed += 1;
        let charges = ledger.charges.get(&p.order_id).unwrap_or(&none);
        let example = || {
            let mut ids: Vec<&str> = charges.iter().filter_map(|c| c.payment_intent.as_deref()).collect();
            ids.extend(events.get(&p.order_id).into_iter().flatten().map(String::as_str));
            let deliveries: Vec<String> = deliveries_of(&p.order_id, &ids, target, log)
                .into_iter()
                .take(6)
                .map(delivery_words)
                .collect();
            let deliveries = if deliveries.is_empty() {
                "none logged".to_string()
            } else {
                deliveries.join("; ")
            };
            Example {
                order_id: p.order_id.clone(),
                story: format!(
                    "fulfilled {count} time{} | deliveries: {deliveries} | {}",
                    if count == 1 { "" } else { "s" },
                    story(p)
                ),
            }
        };
        if count > 1 {
            f.extra += count - 1;
            f.double.add(example);
        } else if count == 0 && p.outcome == Outcome::Ok && !charges.is_empty() {
            f.missed.add(example);
        }
    }
    f
}

/// The fulfilment section of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FulfillmentReport {
    /// The probe (`GET /orders/{{order_id}} → /fulfillments`).
    pub probe: String,
    /// False when fulfilment was not judged; `note` says why.
    pub checked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub probed: u64,
    pub probe_failures: u64,
    #[serde(default)]
    pub probe_failure_examples: Vec<String>,
    /// Whether the provider's delivery queue was empty before the probes.
    pub drained: bool,
    /// Webhook deliveries the provider completed during the run (delivered, failed for good).
    pub deliveries_delivered: u64,
    pub deliveries_failed: u64,
}

impl FulfillmentReport {
    /// A section for a run whose fulfilment was not judged.
    pub fn unchecked(probe: &Probe, note: String) -> Self {
        Self {
            probe: probe.describe.clone(),
            checked: false,
            note: Some(note),
            probed: 0,
            probe_failures: 0,
            probe_failure_examples: Vec::new(),
            drained: false,
            deliveries_delivered: 0,
            deliveries_failed: 0,
        }
    }

    /// Adds another run's section (`report merge`).
    pub fn merge(&mut self, o: &FulfillmentReport) {
        self.checked &= o.checked;
        if self.note.is_none() {
            self.note = o.note.clone();
        }
        self.probed += o.probed;
        self.probe_failures += o.probe_failures;
        let room = MAX_EXAMPLES.saturating_sub(self.probe_failure_examples.len());
        self.probe_failure_examples
            .extend(o.probe_failure_examples.iter().take(room).cloned());
        self.drained &= o.drained;
        self.deliveries_delivered += o.deliveries_delivered;
        self.deliveries_failed += o.deliveries_failed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{AttemptRecord, AttemptResult};
    use crate::ledger::LedgerCharge;
    use crate::mix::Behaviour;

    fn payment(order: &str, outcome: Outcome) -> PaymentRecord {
        PaymentRecord {
            order_id: order.into(),
            amount: 1000,
            behaviour: Behaviour::RetrySameKey,
            outcome,
            e2e_us: 1,
            steps: Vec::new(),
            expect: None,
            attempts: vec![AttemptRecord {
                n: 1,
                key: Some("k".into()),
                start_us: 0,
                elapsed_us: 1,
                result: AttemptResult::Answer {
                    status: 200,
                    payment_id: Some(format!("pi_{order}")),
                    replayed: false,
                    retry_after: None,
                    should_retry: None,
                },
            }],
        }
    }

    fn charged(ledger: &mut LedgerView, order: &str) {
        ledger.charges.entry(order.into()).or_default().push(LedgerCharge {
            id: format!("ch_{order}"),
            amount: 1000,
            payment_intent: Some(format!("pi_{order}")),
            idempotency_key: None,
            fault: None,
        });
    }

    #[test]
    fn double_and_missed_fulfillments_are_found() {
        let payments = vec![
            payment("twice", Outcome::Ok),
            payment("once", Outcome::Ok),
            payment("missed", Outcome::Ok),
            payment("unknown", Outcome::Ok),
            payment("declined", Outcome::Fail),
            payment("lost", Outcome::Ok),
            payment("broken", Outcome::Ok),
        ];
        let mut ledger = LedgerView::default();
        for o in ["twice", "once", "missed", "unknown", "broken"] {
            charged(&mut ledger, o);
        }
        let probes = vec![
            Probed::Count(3),
            Probed::Count(1),
            Probed::Count(0),
            Probed::NotFound,
            Probed::Count(0),
            // Told ok, but nothing was charged: a lost charge, not a missed fulfilment.
            Probed::Count(0),
            Probed::Failed("GET /orders/broken answered 500".into()),
        ];
        let log = vec![
            serde_json::json!({"event": "evt_1", "event_type": "payment_intent.succeeded", "attempt": 1, "status": 200, "fault": "duplicate copy 2", "object": {"id": "pi_twice"}}),
            serde_json::json!({"event": "evt_2", "type": "charge.succeeded", "attempt": 1, "status": 200}),
            // The provider's own shape: the event id only, joined through `events`.
            serde_json::json!({"seq": 9, "event": "evt_3", "type": "payment_intent.succeeded", "endpoint": "we_1", "url": "http://m:1/webhooks/stripe", "attempt": 2, "copy": 2, "result": "delivered", "status": null, "error": "timed out", "fault": null}),
            // The same event to another endpoint: not this target's story.
            serde_json::json!({"event": "evt_3", "type": "payment_intent.succeeded", "url": "http://other:2/webhooks/stripe", "attempt": 1, "status": 500}),
        ];
        let events = [("twice".to_string(), vec!["evt_3".to_string()])].into_iter().collect();
        let f = judge(&payments, &probes, &ledger, &log, &events, "http://m:1", |p| {
            format!("order {}", p.order_id)
        });
        assert_eq!((f.probed, f.probe_failures), (6, 1));
        assert_eq!((f.double.count, f.extra), (1, 2));
        assert_eq!(f.missed.count, 2);
        let missed: Vec<&str> = f.missed.examples.iter().map(|e| e.order_id.as_str()).collect();
        assert_eq!(missed, ["missed", "unknown"]);
        let story = &f.double.examples[0].story;
        assert!(
            story.starts_with(
                "fulfilled 3 times | deliveries: evt_1 payment_intent.succeeded attempt 1 → 200 (duplicate copy 2); evt_3 payment_intent.succeeded attempt 2 copy 2 → timed out | order twice"
            ),
            "{story}"
        );
        assert!(f.missed.examples[0].story.contains("deliveries: none logged"));
        assert_eq!(f.failure_examples, ["GET /orders/broken answered 500"]);
    }

    #[test]
    fn fulfillment_is_checked_only_when_webhooks_were_delivered() {
        let s = |delivered, queued| {
            Ok(DrainStatus {
                drained: queued == 0,
                delivered,
                queued,
                ..DrainStatus::default()
            })
        };
        assert!(checkable(&s(0, 0), &s(5, 0)).is_ok());
        assert!(
            checkable(&s(0, 0), &s(0, 2)).is_ok(),
            "still queued: judged, not drained"
        );
        assert!(checkable(&s(5, 0), &s(5, 0))
            .unwrap_err()
            .contains("no webhook during the run"));
        assert!(checkable(&Err(DrainError::NotServed), &Err(DrainError::NotServed))
            .unwrap_err()
            .contains("--webhook"));
        assert!(checkable(&s(0, 0), &Err(DrainError::Failed("401".into())))
            .unwrap_err()
            .contains("401"));
    }
}
