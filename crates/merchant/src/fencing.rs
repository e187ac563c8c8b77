//! Fencing: an order's version is the token that makes a stale worker's late write harmless.
//!
//! Every change to an order is computed from the row a worker read, and written with a
//! compare-and-set on that row's [`Version`] (`UPDATE … WHERE id = $1 AND version = $2 AND
//! status = $3`). A worker that stalled past its lock and its claim's lease — a GC pause,
//! a slow provider — comes back holding an old version: by then another worker (or the
//! reconciler) has moved the order on and bumped the version, so the late write matches
//! no row and changes nothing ([`Advance::Fenced`]). The worker then re-reads the order
//! and answers from what it finds. The lock makes such races rare; the version makes
//! them safe. [`advance`] is the one way the strategies change an order: the state
//! machine (`order`) decides, the store's conditional write (`store`) applies.
//!
//! [`Version`]: super::order::Version

use super::order::{Order, Transition, TransitionError};
use super::store::{FencedWrite, Store, StoreError};

/// The result of [`advance`]. (A short-lived return value, never stored: the order is
/// carried by value rather than boxed.)
#[allow(clippy::large_enum_variant)]
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
