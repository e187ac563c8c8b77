//! Latency histograms (HdrHistogram, microseconds): per attempt, and per logical payment
//! end to end (retries and backoff included). Histograms serialise to base64 V2-deflate
//! so reports from several load generators merge exactly.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest value tracked: one hour in microseconds.
const MAX_US: u64 = 3_600_000_000;

/// A histogram of microseconds.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"))
    }
}

/// Percentiles of a histogram, in milliseconds, as reports show them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn record(&mut self, us: u64) {
        self.0.saturating_record(us.clamp(1, MAX_US));
    }

    pub fn merge(&mut self, other: &Latency) {
        let _ = self.0.add(&other.0);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The latency at quantile `q` (0..=1), in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.value_at_quantile(q) as f64 / 1000.0
        }
    }

    pub fn percentiles(&self) -> Percentiles {
        let ms = |us: u64| us as f64 / 1000.0;
        let empty = self.0.is_empty();
        let q = |q: f64| if empty { 0.0 } else { ms(self.0.value_at_quantile(q)) };
        Percentiles {
            count: self.0.len(),
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: if empty { 0.0 } else { ms(self.0.max()) },
        }
    }

    pub fn to_base64(&self) -> String {
        let mut buf = Vec::new();
        let _ = V2DeflateSerializer::new().serialize(&self.0, &mut buf);
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    pub fn from_base64(s: &str) -> Result<Self, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| e.to_string())?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("{e:?}"))?;
        let mut out = Latency::default();
        out.0.add(&h).map_err(|e| format!("{e:?}"))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_round_trip() {
        let mut l = Latency::default();
        for us in 1..=1000u64 {
            l.record(us * 1000);
        }
        let p = l.percentiles();
        assert_eq!(p.count, 1000);
        assert!((p.p50_ms - 500.0).abs() < 2.0, "{p:?}");
        assert!((p.max_ms - 1000.0).abs() < 2.0);
        let back = Latency::from_base64(&l.to_base64()).unwrap();
        assert_eq!(back.percentiles(), p);
        let mut merged = l.clone();
        merged.merge(&back);
        assert_eq!(merged.count(), 2000);
        assert_eq!(Latency::default().percentiles().p99_ms, 0.0);
    }
}
