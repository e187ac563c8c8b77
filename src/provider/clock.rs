//! The provider's monotonic time, read through [`Clock`] so that a test (or an embedder)
//! can move it forward: idempotency keys are claimed, stored and expired by it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The system's monotonic clock, plus an offset that only grows.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ns: AtomicU64,
}

impl Clock {
    /// Now, as the provider sees it.
    pub fn now(&self) -> Instant {
        Instant::now() + Duration::from_nanos(self.offset_ns.load(Ordering::Relaxed))
    }

    /// Moves the provider's time forward by `by` (e.g. past a key's TTL).
    pub fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .offset_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| Some(o.saturating_add(ns)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_now_forward() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now() >= before + Duration::from_secs(3600));
    }
}
