//! Time as the merchant sees it: Unix milliseconds, the unit every stored timestamp uses,
//! read through [`Clock`] so that tests can move it.
//!
//! Claim leases, key expiry, the in-memory lock, the reconciler's settling delay and its
//! pruning cadence all compare these numbers. [`SystemClock`] reads the wall clock, so all
//! merchant instances sharing one database should run on synchronised clocks (as they
//! would on one host, or under NTP); [`ManualClock`] moves only when told, so a test can
//! let a lease lapse or a key expire without waiting for it.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time in Unix milliseconds.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    fn now_ms(&self) -> i64;
}

/// The clock the merchant's parts share.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl SystemClock {
    pub fn shared() -> SharedClock {
        Arc::new(SystemClock)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

/// A clock that stands still until [`ManualClock::advance`] moves it (tests, simulations).
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        Self {
            now_ms: AtomicI64::new(start_ms),
        }
    }

    /// A manual clock that starts at the system time (so its timestamps look real).
    pub fn starting_now() -> Self {
        Self::new(now_ms())
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now_ms.fetch_add(ms(by), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

/// Now, in milliseconds since the Unix epoch, by the system's wall clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A duration in whole milliseconds, saturating.
pub fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(Duration::from_millis(250));
        assert_eq!(clock.now_ms(), 1_250);
    }
}
