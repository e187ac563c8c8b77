//! Fencing: an order's version is the token that makes a stale worker's late write harmless.
//!
//! Every change to an order is computed from the row a worker read, and written with a
//! compare-and-set on that row's [`Version`] (`UPDATE … WHERE id = $1 AND version = $2 AND
//! status = $3`). A worker that stalled past its lock and its claim's lease — a GC pause,
//! a slow provider — comes back holding an old version: by then another worker (or the
//! reconciler) has moved the order on and bumped the version, so the late write matches
//! no row and changes nothing ([`Advance::Fenced`]). The worker then re-reads the order
//! and answers from what it finds. The lock makes such races rare; the version makes
//! them safe.

use std::fmt;

use serde::Serialize;

use super::order::{Order, Transition, TransitionError};
use super::store::{Store, StoreError};

/// An order's version: starts at 1, bumped by every change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Version(u64);

impl Version {
    pub const FIRST: Version = Version(1);

    pub fn new(v: u64) -> Self {
        Self(v)
    }

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What a store did with a conditional write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FencedWrite {
    /// The row still had the expected version: the new row is stored.
    Applied,
    /// The row had moved on (or is gone): nothing was written.
    Fenced,
}

/// The result of [`advance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// The transition is stored; this is the order now.
    Applied(Order),
    /// Someone changed the order since `current` was read: nothing was written.
    Fenced,
    /// The transition is not allowed from `current`'s status: nothing was written.
    Refused(TransitionError),
}

/// Applies `transition` to `current` and stores the result only if the stored order is
/// still at `current.version`.
pub async fn advance(
    store: &dyn Store,
    current: &Order,
    transition: Transition,
    now_ms: i64,
) -> Result<Advance, StoreError> {
    let next = match current.apply(transition, now_ms) {
        Ok(next) => next,
        Err(e) => return Ok(Advance::Refused(e)),
    };
    Ok(match store.write_order(current, &next).await? {
        FencedWrite::Applied => Advance::Applied(next),
        FencedWrite::Fenced => {
            tracing::debug!(order_id = %current.id, version = %current.version, "write fenced: the order moved on");
            Advance::Fenced
        }
    })
}
