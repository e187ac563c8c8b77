//! The provider's monotonic time, read through [`Clock`] so that a test (or an embedder)
//! can move it forward: idempotency keys are claimed, stored and expired by it; and the
//! wall clock objects are stamped with ([`now_ms`], in seconds [`now_unix`]), the one
//! wall clock of the provider, which an operation can stop
//! ([`frozen`]) so that running it again writes the same times.

use std::cell::Cell;
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
        self.at(Instant::now())
    }

    /// The provider's time when the system's monotonic clock read `real` (one clock read
    /// serves a request's several uses).
    pub fn at(&self, real: Instant) -> Instant {
        real + Duration::from_nanos(self.offset_ns.load(Ordering::Relaxed))
    }

    /// How far the provider's time has been moved forward so far.
    pub fn offset(&self) -> Duration {
        Duration::from_nanos(self.offset_ns.load(Ordering::Relaxed))
    }

    /// Moves the provider's time forward by `by` (e.g. past a key's TTL).
    pub fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .offset_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| Some(o.saturating_add(ns)));
    }
}

thread_local! {
    /// A wall-clock time this thread's operation sees instead of the system's ([`frozen`]).
    static FROZEN_MS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Milliseconds since the Unix epoch: the system's wall clock, or the time the current
/// operation runs at when [`frozen`].
pub fn now_ms() -> u64 {
    FROZEN_MS.get().unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    })
}

/// The wall clock in whole seconds: Stripe's `created` timestamps.
pub fn now_unix() -> i64 {
    (now_ms() / 1000) as i64
}

/// A Unix time in whole seconds, four bytes wide (good until 2106): a stored payment's
/// or charge's `created`, where an `i64` would take a block class more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnixSeconds(u32);

impl UnixSeconds {
    /// The wall clock ([`now_unix`]).
    pub fn now() -> Self {
        Self::from_unix(now_unix())
    }

    /// `secs`, held to the range four bytes hold (before 1970: 0).
    pub fn from_unix(secs: i64) -> Self {
        Self(u32::try_from(secs.max(0)).unwrap_or(u32::MAX))
    }

    pub fn get(self) -> i64 {
        i64::from(self.0)
    }
}

impl serde::Serialize for UnixSeconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(self.get())
    }
}

/// Runs `f` with the wall clock stopped at `ms` on this thread: every timestamp an
/// operation writes (`created`, the ledger's `created_ms`) is the same one, and running
/// it again at the same `ms` (recovery from the data dir) writes the same timestamps.
pub fn frozen<R>(ms: u64, f: impl FnOnce() -> R) -> R {
    let before = FROZEN_MS.replace(Some(ms));
    let result = f();
    FROZEN_MS.set(before);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_keep_four_bytes_and_read_back_as_written() {
        assert_eq!(std::mem::size_of::<UnixSeconds>(), 4);
        let t = UnixSeconds::from_unix(1_733_472_000);
        assert_eq!(
            (t.get(), serde_json::to_string(&t).unwrap()),
            (1_733_472_000, "1733472000".into())
        );
        assert_eq!(UnixSeconds::from_unix(-5).get(), 0);
        assert_eq!(UnixSeconds::from_unix(i64::MAX).get(), i64::from(u32::MAX));
        assert_eq!(frozen(1_733_472_000_999, UnixSeconds::now), t);
    }

    #[test]
    fn a_frozen_operation_sees_one_wall_clock_time() {
        let seen = frozen(1_700_000_000_123, || (now_ms(), now_unix()));
        assert_eq!(seen, (1_700_000_000_123, 1_700_000_000));
        assert!(now_ms() > 1_700_000_000_123);
    }

    #[test]
    fn advancing_moves_now_forward() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now() >= before + Duration::from_secs(3600));
    }
}
