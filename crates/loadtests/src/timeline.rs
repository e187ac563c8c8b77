//! The run over time: per-second buckets built from the journal (payments and attempts
//! per second, outcomes, anomalies, attempt and end-to-end latency with their
//! histograms), the provider's fault profile, and their merge across load generators.
//!
//! Buckets are keyed by absolute Unix second, so reports written by several load
//! generators against one provider line up when [`Timeline::merge`] combines them; each
//! bucket keeps its latency histograms (HdrHistogram, base64) so merged percentiles are
//! exact. `report.html` draws its charts from this (`report_html`). A run costs about
//! 0.5 to 1 KB of `report.json` per second of run time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::client::{Outcome, PaymentRecord};
use crate::latency::Latency;
use crate::ledger::LedgerView;

/// One second of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Unix time, whole seconds.
    pub t: u64,
    /// Payments that finished in this second.
    pub payments: u64,
    /// Attempts started in this second.
    pub attempts: u64,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
    /// Payments finished in this second with an anomaly (double, lost or phantom charge).
    pub anomalies: u64,
    pub attempt_p50_ms: f64,
    pub attempt_p99_ms: f64,
    pub payment_p50_ms: f64,
    pub payment_p99_ms: f64,
    /// HdrHistogram V2-deflate, base64, microseconds (for an exact merge).
    pub attempt_histogram: String,
    pub payment_histogram: String,
}

/// A run over time, and the provider's profile during it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The provider's fault profile at the end of the run (`GET /__fauxpay/profile`),
    /// one per distinct profile for merged reports.
    #[serde(default)]
    pub profiles: Vec<String>,
    #[serde(default)]
    pub buckets: Vec<Bucket>,
}

#[derive(Default)]
struct Acc {
    payments: u64,
    attempts: u64,
    ok: u64,
    fail: u64,
    info: u64,
    anomalies: u64,
    attempt: Latency,
    payment: Latency,
}

impl Acc {
    fn bucket(self, t: u64) -> Bucket {
        let (a, p) = (self.attempt.percentiles(), self.payment.percentiles());
        Bucket {
            t,
            payments: self.payments,
            attempts: self.attempts,
            ok: self.ok,
            fail: self.fail,
            info: self.info,
            anomalies: self.anomalies,
            attempt_p50_ms: a.p50_ms,
            attempt_p99_ms: a.p99_ms,
            payment_p50_ms: p.p50_ms,
            payment_p99_ms: p.p99_ms,
            attempt_histogram: self.attempt.to_base64(),
            payment_histogram: self.payment.to_base64(),
        }
    }

    fn from_bucket(b: &Bucket) -> Result<Self, String> {
        Ok(Self {
            payments: b.payments,
            attempts: b.attempts,
            ok: b.ok,
            fail: b.fail,
            info: b.info,
            anomalies: b.anomalies,
            attempt: Latency::from_base64(&b.attempt_histogram)?,
            payment: Latency::from_base64(&b.payment_histogram)?,
        })
    }

    fn add(&mut self, o: &Acc) {
        self.payments += o.payments;
        self.attempts += o.attempts;
        self.ok += o.ok;
        self.fail += o.fail;
        self.info += o.info;
        self.anomalies += o.anomalies;
        self.attempt.merge(&o.attempt);
        self.payment.merge(&o.payment);
    }
}

/// Fills the seconds in between with empty buckets, so charts show idle time as zero.
fn buckets(acc: BTreeMap<u64, Acc>) -> Vec<Bucket> {
    let (Some(&first), Some(&last)) = (acc.keys().next(), acc.keys().next_back()) else {
        return Vec::new();
    };
    let mut acc = acc;
    (first..=last)
        .map(|t| acc.remove(&t).unwrap_or_default().bucket(t))
        .collect()
}

impl Timeline {
    /// Buckets a run's journal; `started_ms` is when the run started (attempt times are
    /// relative to it).
    pub fn build(payments: &[PaymentRecord], ledger: &LedgerView, started_ms: u64) -> Self {
        let mut acc: BTreeMap<u64, Acc> = BTreeMap::new();
        let second = |us: u64| (started_ms + us / 1000) / 1000;
        for p in payments {
            for a in &p.attempts {
                let b = acc.entry(second(a.start_us)).or_default();
                b.attempts += 1;
                b.attempt.record(a.elapsed_us);
            }
            let start = p.attempts.first().map_or(0, |a| a.start_us);
            let b = acc.entry(second(start + p.e2e_us)).or_default();
            b.payments += 1;
            match p.outcome {
                Outcome::Ok => b.ok += 1,
                Outcome::Fail => b.fail += 1,
                Outcome::Info => b.info += 1,
            }
            b.payment.record(p.e2e_us);
            let charges = ledger.charges.get(&p.order_id).map_or(0, Vec::len);
            let anomalous = charges > 1
                || (p.outcome == Outcome::Ok && charges == 0)
                || (p.outcome == Outcome::Fail && charges > 0);
            b.anomalies += u64::from(anomalous);
        }
        Self {
            profiles: Vec::new(),
            buckets: buckets(acc),
        }
    }

    /// Combines the timelines of concurrent runs, second by second.
    pub fn merge<'a>(timelines: impl IntoIterator<Item = &'a Timeline>) -> Result<Self, String> {
        let mut acc: BTreeMap<u64, Acc> = BTreeMap::new();
        let mut profiles: Vec<String> = Vec::new();
        for t in timelines {
            for p in &t.profiles {
                if !profiles.contains(p) {
                    profiles.push(p.clone());
                }
            }
            for b in &t.buckets {
                acc.entry(b.t).or_default().add(&Acc::from_bucket(b)?);
            }
        }
        Ok(Self {
            profiles,
            buckets: buckets(acc),
        })
    }
}

/// The name of the provider's active fault profile, if its admin API says.
pub async fn provider_profile(client: &reqwest::Client, provider: &str, token: Option<&str>) -> Option<String> {
    let url = format!("{}/__fauxpay/profile", provider.trim_end_matches('/'));
    let mut req = client.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let body = crate::body::read_capped(req.send().await.ok()?, crate::body::MAX_ANSWER_BYTES)
        .await
        .ok()??;
    let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
    v["profile"]["name"].as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{AttemptRecord, AttemptResult};
    use crate::ledger::LedgerCharge;
    use crate::mix::Behaviour;

    pub(crate) fn payment(order: &str, start_ms: u64, e2e_ms: u64, outcome: Outcome) -> PaymentRecord {
        PaymentRecord {
            order_id: order.into(),
            amount: 100,
            behaviour: Behaviour::RetrySameKey,
            outcome,
            e2e_us: e2e_ms * 1000,
            steps: Vec::new(),
            expect: None,
            attempts: vec![AttemptRecord {
                n: 1,
                key: Some("k".into()),
                start_us: start_ms * 1000,
                elapsed_us: e2e_ms * 1000,
                result: AttemptResult::Answer {
                    status: 200,
                    payment_id: None,
                    replayed: false,
                    retry_after: None,
                    should_retry: None,
                },
            }],
        }
    }

    fn charge() -> LedgerCharge {
        LedgerCharge {
            id: "ch".into(),
            amount: 100,
            payment_intent: None,
            idempotency_key: None,
            fault: None,
        }
    }

    #[test]
    fn payments_are_bucketed_by_second_and_gaps_are_zero() {
        let mut ledger = LedgerView::default();
        ledger.charges.insert("a".into(), vec![charge()]);
        ledger.charges.insert("b".into(), vec![charge(), charge()]);
        let payments = [
            payment("a", 100, 50, Outcome::Ok),
            payment("b", 200, 30, Outcome::Ok),
            payment("c", 2_500, 100, Outcome::Ok),
        ];
        let t = Timeline::build(&payments, &ledger, 10_000);
        let secs: Vec<u64> = t.buckets.iter().map(|b| b.t).collect();
        assert_eq!(secs, [10, 11, 12]);
        assert_eq!(t.buckets[0].payments, 2);
        assert_eq!(t.buckets[0].anomalies, 1, "b was charged twice");
        assert_eq!(t.buckets[1].payments, 0, "an idle second is a zero");
        assert_eq!(t.buckets[2].anomalies, 1, "c was told ok and never charged");
        assert!((t.buckets[2].payment_p50_ms - 100.0).abs() < 0.5);
    }

    #[test]
    fn merged_timelines_add_up_second_by_second() {
        let ledger = LedgerView::default();
        let a = Timeline::build(&[payment("a", 0, 10, Outcome::Fail)], &ledger, 5_000);
        let mut b = Timeline::build(
            &[
                payment("b", 0, 30, Outcome::Fail),
                payment("c", 1_000, 30, Outcome::Fail),
            ],
            &ledger,
            5_000,
        );
        b.profiles = vec!["flaky-network".into()];
        let m = Timeline::merge([&a, &b]).unwrap();
        assert_eq!(m.buckets.len(), 2);
        assert_eq!(m.buckets[0].payments, 2);
        assert_eq!(m.buckets[0].fail, 2);
        assert!(
            (m.buckets[0].attempt_p99_ms - 30.0).abs() < 0.5,
            "exact: from the histograms"
        );
        assert_eq!(m.profiles, ["flaky-network"]);
    }
}
