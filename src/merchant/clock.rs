//! Wall-clock time in Unix milliseconds, the unit every stored timestamp uses.
//!
//! Leases, key expiry and the reconciler's settling delay compare these numbers, so all
//! merchant instances sharing one database should run on synchronised clocks (as they
//! would on one host, or under NTP).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch.
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
