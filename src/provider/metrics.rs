//! Prometheus metrics for `GET /metrics`.
//!
//! Counters for requests by route, method and status, idempotent replays, in-flight key
//! conflicts and key mismatches, plus a request latency histogram. Request counters are
//! sharded by label so concurrent requests do not contend on one lock; charge, refund
//! and duplicate figures are read from the ledger when scraped.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::faults::When;
use crate::provider::ledger::Ledger;
use crate::provider::shard::{FastMap, Sharded};

/// Upper bounds (seconds) of the latency histogram's buckets.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RequestLabel {
    route: String,
    method: String,
    status: u16,
}

/// Request counts of one route, by method and status (a handful each).
type RouteCounts = Vec<(String, u16, u64)>;

#[derive(Default)]
pub struct Metrics {
    /// By route (looked up by `&str`: counting a request allocates nothing).
    requests: Sharded<FastMap<Box<str>, RouteCounts>>,
    pub replays: AtomicU64,
    pub in_flight_conflicts: AtomicU64,
    pub key_mismatches: AtomicU64,
    /// `/v1` requests being executed right now.
    pub in_flight: AtomicU64,
    buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
}

impl Metrics {
    pub fn observe_request(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        {
            let mut shard = self.requests.lock(route);
            let counts = match shard.get_mut(route) {
                Some(c) => c,
                None => shard.entry(route.into()).or_default(),
            };
            match counts.iter_mut().find(|(m, s, _)| *s == status && m == method) {
                Some((_, _, n)) => *n += 1,
                None => counts.push((method.to_string(), status, 1)),
            }
        }
        let secs = elapsed.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self, ledger: &Ledger, faults: &[((&'static str, When), u64)]) -> String {
        let mut out = String::with_capacity(4096);
        let mut rows: Vec<(RequestLabel, u64)> = Vec::new();
        for shard in self.requests.iter() {
            for (route, counts) in shard.lock().iter() {
                rows.extend(counts.iter().map(|(method, status, n)| {
                    (
                        RequestLabel {
                            route: route.to_string(),
                            method: method.clone(),
                            status: *status,
                        },
                        *n,
                    )
                }));
            }
        }
        rows.sort_by(|a, b| (&a.0.route, &a.0.method, a.0.status).cmp(&(&b.0.route, &b.0.method, b.0.status)));
        out.push_str("# HELP fauxpay_http_requests_total HTTP requests by route, method and status.\n# TYPE fauxpay_http_requests_total counter\n");
        for (l, v) in rows {
            let _ = writeln!(
                out,
                "fauxpay_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{}\"}} {v}",
                escape(&l.route),
                l.method,
                l.status
            );
        }
        let counts = ledger.counts();
        let counters = [
            (
                "fauxpay_charges_total",
                "Captured charges recorded in the ledger.",
                counts.charges,
            ),
            (
                "fauxpay_refunds_total",
                "Refunds recorded in the ledger.",
                counts.refunds,
            ),
            (
                "fauxpay_idempotent_replays_total",
                "Responses replayed from the idempotency store.",
                self.replays.load(Ordering::Relaxed),
            ),
            (
                "fauxpay_idempotency_conflicts_total",
                "Requests refused with 409 because their key was in flight.",
                self.in_flight_conflicts.load(Ordering::Relaxed),
            ),
            (
                "fauxpay_idempotency_mismatches_total",
                "Requests refused because their key was used with other parameters.",
                self.key_mismatches.load(Ordering::Relaxed),
            ),
            (
                "fauxpay_blocked_duplicates_total",
                "Charges refused by --duplicates reject.",
                ledger.blocked_duplicates(),
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP fauxpay_api_requests_in_flight API requests being executed (held and delayed ones included).\n# TYPE fauxpay_api_requests_in_flight gauge\nfauxpay_api_requests_in_flight {}",
            self.in_flight.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP fauxpay_duplicate_groups Correlation ids with more than one captured charge.\n# TYPE fauxpay_duplicate_groups gauge\nfauxpay_duplicate_groups {}",
            ledger.duplicate_group_count()
        );
        out.push_str("# HELP fauxpay_faults_total Faults injected, by kind and by when they acted.\n# TYPE fauxpay_faults_total counter\n");
        for ((kind, when), v) in faults {
            let _ = writeln!(out, "fauxpay_faults_total{{kind=\"{kind}\",when=\"{when}\"}} {v}");
        }
        out.push_str("# HELP fauxpay_request_duration_seconds Time to answer a request.\n# TYPE fauxpay_request_duration_seconds histogram\n");
        let mut cumulative = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "fauxpay_request_duration_seconds_bucket{{le=\"{b}\"}} {cumulative}"
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(out, "fauxpay_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "fauxpay_request_duration_seconds_sum {}",
            self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "fauxpay_request_duration_seconds_count {count}");
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        let m = Metrics::default();
        m.observe_request("/v1/charges", "POST", 200, Duration::from_millis(3));
        m.observe_request("/v1/charges", "POST", 200, Duration::from_millis(30));
        Metrics::bump(&m.replays);
        let text = m.render(&Ledger::default(), &[(("reset", When::AfterCommit), 3)]);
        assert!(text.contains("fauxpay_http_requests_total{route=\"/v1/charges\",method=\"POST\",status=\"200\"} 2"));
        assert!(text.contains("fauxpay_idempotent_replays_total 1"));
        assert!(text.contains("fauxpay_faults_total{kind=\"reset\",when=\"after_commit\"} 3"));
        assert!(text.contains("fauxpay_request_duration_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("fauxpay_request_duration_seconds_bucket{le=\"+Inf\"} 2"));
    }
}
