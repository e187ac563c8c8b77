//! Prometheus metrics for `GET /metrics`, encoded by `prometheus-client` (and kept by it,
//! but for what every request writes, below).
//!
//! Live on the request path: requests by route, method and status, a request latency
//! histogram, idempotent replays, in-flight key conflicts and key mismatches, and the
//! requests executing now, and webhook deliveries (attempts by result, their latency,
//! the queue depth). Charge, refund, duplicate and fault figures are read from the
//! ledger and the fault injector when scraped. The text is OpenMetrics 1.0 (counters end
//! in `_total`), which Prometheus scrapes as it is.
//!
//! What every request writes (its route's counter, the latency histogram, the in-flight
//! gauge) is kept in parts, a thread writing its own ([`SpreadCounter`],
//! [`SpreadHistogram`], [`SpreadGauge`]), and summed when scraped: no cache line of them
//! is written by every core.

use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::state::ledger::Ledger;
use crate::state::shard::thread_turn;
use fauxpay_faults::{FaultKind, When};

/// Upper bounds (seconds) of the latency histogram's buckets.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The Content-Type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    result: &'static str,
}

/// Webhook delivery's metrics, shared with the delivery tasks.
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    deliveries: Family<DeliveryLabels, Counter>,
    latency: Histogram,
    /// Deliveries waiting in the endpoints' queues.
    pub queued: Gauge,
}

impl WebhookMetrics {
    /// One delivery attempt ended with `result` (`delivered`, `failed`, `dropped`, …)
    /// after `elapsed` (`None`: nothing was sent).
    pub fn observe(&self, result: &'static str, elapsed: Option<Duration>) {
        self.deliveries.get_or_create(&DeliveryLabels { result }).inc();
        if let Some(e) = elapsed {
            self.latency.observe(e.as_secs_f64());
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    kind: &'static str,
    when: &'static str,
}

/// The parts a [`SpreadCounter`], [`SpreadGauge`] or [`SpreadHistogram`] is written in: a
/// thread writes the part of its turn ([`thread_turn`] modulo `PARTS`), and `/metrics`
/// adds them up. A metric every request writes is then not a cache line every core
/// writes: with one shared histogram, each request took its write lock. A part is a
/// 128-byte line pair: ~1 KiB a metric (the request counters are one a label set; their
/// label sets are bounded).
const PARTS: usize = 8;

/// The calling thread's part.
fn part() -> usize {
    thread_turn() % PARTS
}

/// A number each thread adds to in a part of its own ([`PARTS`]); its value is their sum.
#[derive(Debug, Clone, Default)]
struct Parts(Arc<[CachePadded<AtomicI64>; PARTS]>);

impl Parts {
    /// Adds `n` in the calling thread's part; returns the part.
    fn add(&self, n: i64) -> usize {
        let part = part();
        self.add_at(part, n);
        part
    }

    fn add_at(&self, part: usize, n: i64) {
        self.0[part].fetch_add(n, Ordering::Relaxed);
    }

    fn sum(&self) -> i64 {
        self.0.iter().map(|p| p.load(Ordering::Relaxed)).sum()
    }
}

/// A counter in [`Parts`]. The request counters are these: one per label set, counted by
/// every core.
#[derive(Debug, Clone, Default)]
pub struct SpreadCounter(Parts);

impl SpreadCounter {
    pub fn inc(&self) {
        let _ = self.0.add(1);
    }

    pub fn get(&self) -> u64 {
        // Only ever added to: the sum is never below zero.
        u64::try_from(self.0.sum()).unwrap_or_default()
    }
}

impl TypedMetric for SpreadCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for SpreadCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A gauge in [`Parts`]. What one thread adds, another may take back (a request can end
/// on another worker than it started on): [`Self::inc`] says in which part it added, and
/// [`Self::dec_at`] takes it back there, so that no part is ever below zero and neither is
/// a sum a scrape reads while requests come and go.
#[derive(Debug, Clone, Default)]
pub struct SpreadGauge(Parts);

impl SpreadGauge {
    /// Adds one in the calling thread's part; returns the part, for [`Self::dec_at`].
    pub fn inc(&self) -> usize {
        self.0.add(1)
    }

    /// Takes back one that [`Self::inc`] added in `part`.
    pub fn dec_at(&self, part: usize) {
        self.0.add_at(part, -1);
    }

    pub fn get(&self) -> i64 {
        self.0.sum()
    }
}

impl TypedMetric for SpreadGauge {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for SpreadGauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// [`BUCKETS`] and +Inf (`f64::MAX`, as `prometheus-client`'s histogram ends them).
const BOUNDS: [f64; BUCKETS.len() + 1] = {
    let mut bounds = [f64::MAX; BUCKETS.len() + 1];
    let mut i = 0;
    while i < BUCKETS.len() {
        bounds[i] = BUCKETS[i];
        i += 1;
    }
    bounds
};

/// One thread's part of a [`SpreadHistogram`]: the sum and count of what it observed, and
/// how many fell in each of [`BUCKETS`] and +Inf (in the first whose bound is at least the
/// value, as `prometheus-client`'s histogram counts them).
#[derive(Debug, Default)]
struct HistogramPart {
    sum: f64,
    count: u64,
    buckets: [u64; BOUNDS.len()],
}

/// The request latency histogram, on [`BUCKETS`], observed by each thread in a part of its
/// own ([`PARTS`]) and rendered as one histogram, as `prometheus-client`'s renders.
#[derive(Debug, Clone, Default)]
pub struct SpreadHistogram {
    parts: Arc<[CachePadded<Mutex<HistogramPart>>; PARTS]>,
}

impl SpreadHistogram {
    pub fn observe(&self, v: f64) {
        // A value above the last bound (or NaN) is counted but in no bucket, as in
        // `prometheus-client`'s histogram.
        let bucket = BOUNDS.iter().position(|&b| b >= v);
        let mut part = self.parts[part()].lock();
        part.sum += v;
        part.count += 1;
        if let Some(i) = bucket {
            part.buckets[i] += 1;
        }
    }

    /// The sum and count of every part, and each bucket's count with its bound.
    fn total(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let mut buckets: Vec<(f64, u64)> = BOUNDS.iter().map(|&b| (b, 0)).collect();
        let (mut sum, mut count) = (0.0, 0);
        for part in self.parts.iter() {
            let part = part.lock();
            sum += part.sum;
            count += part.count;
            for (total, n) in buckets.iter_mut().zip(part.buckets) {
                total.1 += n;
            }
        }
        (sum, count, buckets)
    }
}

impl TypedMetric for SpreadHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SpreadHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.total();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// Where a thread keeps the request counters it counted last ([`Metrics::observe_request`]).
const RECENT_COUNTERS: usize = 16;

thread_local! {
    /// The request counters this thread counted last, with the [`Metrics`] (its `id`)
    /// and labels each belongs to: a request's count is then one atomic add, where the
    /// family's lookup (a lock and a hash of the labels) cost ~400 instructions
    /// (bench/callgrind.sh replay). The oldest goes first, hit or not: a thread that
    /// cycles through more label sets than it keeps looks each up as before. The
    /// family is never cleared, so a kept counter is always the one `/metrics` reads.
    static RECENT: RefCell<Vec<(u64, RequestLabels, SpreadCounter)>> = const { RefCell::new(Vec::new()) };
}

/// Tells apart the [`Metrics`] a thread's recent counters belong to.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

pub struct Metrics {
    /// This instance, among those of the process (tests run several).
    id: u64,
    registry: Registry,
    requests: Family<RequestLabels, SpreadCounter>,
    duration: SpreadHistogram,
    pub replays: Counter,
    pub in_flight_conflicts: Counter,
    pub key_mismatches: Counter,
    /// Writes answered 503 because the data dir's log could not be written.
    pub data_log_refusals: Counter,
    /// Compactions of the data dir's log (`--retain`).
    pub data_log_compactions: Counter,
    /// `/v1` requests being executed right now (held and delayed ones included).
    pub in_flight: SpreadGauge,
    /// Connections open now, and those refused beyond `--max-connections`.
    pub connections: Gauge,
    pub connections_refused: Counter,
    pub webhooks: WebhookMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, SpreadCounter>::default();
        let duration = SpreadHistogram::default();
        let (replays, in_flight_conflicts, key_mismatches) = Default::default();
        let data_log_refusals = Counter::default();
        let in_flight = SpreadGauge::default();
        let webhooks = WebhookMetrics {
            deliveries: Family::default(),
            latency: Histogram::new(BUCKETS),
            queued: Gauge::default(),
        };
        let (connections, connections_refused) = (Gauge::default(), Counter::default());
        let mut registry = Registry::default();
        registry.register(
            "fauxpay_connections_open",
            "HTTP connections open now (held ones included)",
            Gauge::clone(&connections),
        );
        registry.register(
            "fauxpay_connections_refused",
            "Connections refused with 503 because --max-connections were open",
            Counter::clone(&connections_refused),
        );
        registry.register(
            "fauxpay_webhook_deliveries",
            "Webhook delivery attempts, by result",
            webhooks.deliveries.clone(),
        );
        registry.register(
            "fauxpay_webhook_delivery_duration_seconds",
            "Time from sending a webhook to its answer",
            webhooks.latency.clone(),
        );
        registry.register(
            "fauxpay_webhook_queue_depth",
            "Webhook deliveries waiting in the endpoints' queues",
            Gauge::clone(&webhooks.queued),
        );
        registry.register(
            "fauxpay_http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        registry.register(
            "fauxpay_idempotent_replays",
            "Responses replayed from the idempotency store",
            Counter::clone(&replays),
        );
        registry.register(
            "fauxpay_idempotency_conflicts",
            "Requests refused with 409 because their key was in flight",
            Counter::clone(&in_flight_conflicts),
        );
        registry.register(
            "fauxpay_idempotency_mismatches",
            "Requests refused because their key was used with other parameters",
            Counter::clone(&key_mismatches),
        );
        registry.register(
            "fauxpay_data_log_refused_writes",
            "Writes answered 503 because the data dir's log could not be written (a full disk)",
            Counter::clone(&data_log_refusals),
        );
        let data_log_compactions = Counter::default();
        registry.register(
            "fauxpay_data_log_compactions",
            "Compactions of the data dir's log (with --retain): the writes whose effects all left the window dropped",
            Counter::clone(&data_log_compactions),
        );
        registry.register(
            "fauxpay_api_requests_in_flight",
            "API requests being executed (held and delayed ones included)",
            in_flight.clone(),
        );
        registry.register(
            "fauxpay_request_duration_seconds",
            "Time to answer a request",
            duration.clone(),
        );
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            registry,
            requests,
            duration,
            replays,
            in_flight_conflicts,
            key_mismatches,
            data_log_refusals,
            data_log_compactions,
            in_flight,
            connections,
            connections_refused,
            webhooks,
        }
    }
}

/// A label for an HTTP method: the standard ones by name, anything else as `OTHER`.
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    }
}

impl Metrics {
    pub fn observe_request(&self, route: &'static str, method: &str, status: u16, elapsed: Duration) {
        let labels = RequestLabels {
            route,
            method: method_label(method),
            status,
        };
        RECENT.with_borrow_mut(
            |recent| match recent.iter().find(|(id, l, _)| *id == self.id && *l == labels) {
                Some((_, _, counter)) => {
                    counter.inc();
                }
                None => {
                    let counter = self.requests.get_or_create(&labels).clone();
                    counter.inc();
                    if recent.len() == RECENT_COUNTERS {
                        recent.remove(0);
                    }
                    recent.push((self.id, labels, counter));
                }
            },
        );
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// The OpenMetrics text of every metric; `faults` are the faults applied so far, by
    /// kind and when they acted.
    pub fn render(&self, ledger: &Ledger, faults: &[((FaultKind, When), u64)]) -> String {
        let counts = ledger.counts();
        let mut scraped = Registry::default();
        scraped.register(
            "fauxpay_charges",
            "Captured charges recorded in the ledger",
            ConstCounter::new(counts.charges),
        );
        scraped.register(
            "fauxpay_refunds",
            "Refunds recorded in the ledger",
            ConstCounter::new(counts.refunds),
        );
        scraped.register(
            "fauxpay_blocked_duplicates",
            "Charges refused by --duplicates reject",
            ConstCounter::new(ledger.blocked_duplicates()),
        );
        scraped.register(
            "fauxpay_duplicate_groups",
            "Correlation ids with more than one captured charge",
            ConstGauge::new(ledger.duplicate_group_count() as i64),
        );
        let by_fault = Family::<FaultLabels, Counter>::default();
        for ((kind, when), n) in faults {
            by_fault
                .get_or_create(&FaultLabels {
                    kind: kind.as_str(),
                    when: when.as_str(),
                })
                .inc_by(*n);
        }
        scraped.register(
            "fauxpay_faults",
            "Faults injected, by kind and by when they acted",
            by_fault,
        );
        let mut out = String::with_capacity(4096);
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, &scraped);
        let _ = encode_eof(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_recent_counters_count_for_their_own_metrics_only() {
        let line =
            |n| format!("fauxpay_http_requests_total{{route=\"/v1/charges\",method=\"POST\",status=\"200\"}} {n}");
        let (a, b) = (Metrics::default(), Metrics::default());
        for _ in 0..3 {
            a.observe_request("/v1/charges", "POST", 200, Duration::ZERO);
        }
        b.observe_request("/v1/charges", "POST", 200, Duration::ZERO);
        // More label sets than a thread keeps: the first one's counter is looked up again.
        for status in 300..(300 + RECENT_COUNTERS as u16 + 1) {
            a.observe_request("/v1/charges", "POST", status, Duration::ZERO);
        }
        a.observe_request("/v1/charges", "POST", 200, Duration::ZERO);
        let (text_a, text_b) = (a.render(&Ledger::default(), &[]), b.render(&Ledger::default(), &[]));
        assert!(text_a.contains(&line(4)), "{text_a}");
        assert!(text_b.contains(&line(1)), "{text_b}");
        assert!(
            text_a.contains("fauxpay_http_requests_total{route=\"/v1/charges\",method=\"POST\",status=\"316\"} 1"),
            "{text_a}"
        );
    }

    #[test]
    fn threads_counting_at_once_render_one_counter_histogram_and_gauge() {
        let m = Metrics::default();
        let reference = Histogram::new(BUCKETS);
        // Powers of two, so that the sums are exact in any order; the last two only in +Inf.
        let values = [
            0.5f64.powi(12),
            0.5f64.powi(11),
            0.5f64.powi(9),
            0.0625,
            2.0,
            16.0,
            1024.0,
        ];
        let threads = PARTS + 3;
        // Each thread ends every other request it starts; the rest end on this thread.
        let left: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (m, reference) = (&m, &reference);
                    s.spawn(move || {
                        let mut left = Vec::new();
                        for (i, v) in values.iter().enumerate() {
                            m.duration.observe(*v);
                            reference.observe(*v);
                            m.observe_request("/v1/charges", "POST", 200, Duration::ZERO);
                            reference.observe(0.0);
                            let part = m.in_flight.inc();
                            if i % 2 == 0 {
                                m.in_flight.dec_at(part);
                            } else {
                                left.push(part);
                            }
                        }
                        left
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        fn rendered(metric: impl prometheus_client::registry::Metric) -> String {
            let mut registry = Registry::default();
            registry.register("fauxpay_request_duration_seconds", "Time to answer a request", metric);
            let mut text = String::new();
            let _ = encode_registry(&mut text, &registry);
            text
        }
        assert_eq!(rendered(m.duration.clone()), rendered(reference));
        let text = m.render(&Ledger::default(), &[]);
        let line = format!(
            "fauxpay_http_requests_total{{route=\"/v1/charges\",method=\"POST\",status=\"200\"}} {}\n",
            threads * values.len()
        );
        assert!(text.contains(&line), "{text}");
        assert_eq!(m.in_flight.get(), (threads * (values.len() / 2)) as i64);
        for part in left {
            m.in_flight.dec_at(part);
        }
        let parts = &m.in_flight.0 .0;
        assert!(parts.iter().all(|p| p.load(Ordering::Relaxed) == 0), "{parts:?}");
    }

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.observe_request("/v1/charges", "POST", 200, Duration::from_millis(3));
        m.observe_request("/v1/charges", "POST", 200, Duration::from_millis(30));
        m.replays.inc();
        m.in_flight.inc();
        m.webhooks.observe("delivered", Some(Duration::from_millis(2)));
        m.webhooks.observe("dropped", None);
        let text = m.render(&Ledger::default(), &[((FaultKind::Reset, When::AfterCommit), 3)]);
        assert!(
            text.contains("fauxpay_http_requests_total{route=\"/v1/charges\",method=\"POST\",status=\"200\"} 2"),
            "{text}"
        );
        assert!(text.contains("fauxpay_idempotent_replays_total 1"), "{text}");
        assert!(text.contains("fauxpay_api_requests_in_flight 1\n"), "{text}");
        assert!(
            text.contains("fauxpay_faults_total{kind=\"reset\",when=\"after_commit\"} 3"),
            "{text}"
        );
        assert!(text.contains("fauxpay_charges_total 0"), "{text}");
        assert!(
            text.contains("fauxpay_request_duration_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("fauxpay_request_duration_seconds_bucket{le=\"+Inf\"} 2"),
            "{text}"
        );
        assert!(text.contains("fauxpay_request_duration_seconds_count 2"), "{text}");
        assert!(
            text.contains("fauxpay_webhook_deliveries_total{result=\"delivered\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("fauxpay_webhook_delivery_duration_seconds_count 1"),
            "{text}"
        );
        assert!(text.contains("fauxpay_webhook_queue_depth 0"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
