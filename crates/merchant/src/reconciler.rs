//! The reconciler: resolves orders whose payment outcome is unknown, by searching — never
//! by charging.
//!
//! An order is `reconciling` after a provider timeout, a dropped answer or a 5xx (and a
//! `processing` order whose claim lapsed is moved there first). [`Reconciler::resolve`]
//! searches the provider for the order's payment intents (`metadata['order_id']`): a
//! succeeded one makes the order `paid`; none at all, once the last attempt has had
//! `settle` to land, makes it `pending` again so a client retry can pay — with the *same*
//! provider idempotency key, and after another search, so an attempt that landed late is
//! found or replayed rather than repeated. An intent in an in-between state, or a failed
//! search, leaves the order as it is for the next round. Writes are fenced by version, so
//! the background loop ([`Reconciler::run`]) and a client's inline resolution never fight.
//! The same loop prunes expired idempotency-key records, and counts its rounds
//! ([`Reconciler::rounds`]) so that whoever waits for it can wake on a round, not a timer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::clock::{ms, SharedClock};
use super::fencing::{advance, Advance};
use super::gateway::{FoundPayment, Gateway};
use super::order::{Order, OrderStatus, PaymentIntentId, Transition};
use super::store::{Store, StoreError};

/// What a search says about an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A payment intent for the order succeeded: the order is paid by it.
    Charged(PaymentIntentId),
    /// An intent may still turn into a charge: ask again later.
    InDoubt(String),
    /// No intent for the order succeeded or can still succeed.
    NoCharge,
}

/// Judges a search's results for `order` (pure).
pub fn examine(order: &Order, found: &[FoundPayment]) -> Finding {
    let succeeded: Vec<&FoundPayment> = found.iter().filter(|p| p.succeeded()).collect();
    if succeeded.len() > 1 {
        tracing::error!(
            order_id = %order.id, count = succeeded.len(),
            "the provider holds more than one succeeded payment for this order"
        );
    }
    // The provider lists newest first: the oldest success is the order's payment.
    if let Some(first) = succeeded.iter().rev().min_by_key(|p| p.created) {
        if first.amount != order.amount.get() || first.currency != order.currency.as_str() {
            tracing::warn!(order_id = %order.id, payment_intent = %first.payment_intent, "succeeded payment differs in amount or currency");
        }
        return Finding::Charged(first.payment_intent.clone());
    }
    match found.iter().find(|p| p.unsettled()) {
        Some(p) => Finding::InDoubt(format!("payment intent {} is `{}`", p.payment_intent, p.status)),
        None => Finding::NoCharge,
    }
}

/// What [`Reconciler::resolve`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The order is paid (by a charge the search found).
    Paid(Order),
    /// No charge exists: the order is pending again.
    Reopened(Order),
    /// Still unknown; the reason says why.
    Unresolved(String),
    /// Someone else changed the order meanwhile; re-read it.
    Moved,
}

/// Counts from one sweep.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    pub paid: usize,
    pub reopened: usize,
    pub unresolved: usize,
}

pub struct Reconciler {
    store: Arc<dyn Store>,
    gateway: Arc<dyn Gateway>,
    clock: SharedClock,
    settle: Duration,
    /// Rounds of [`Reconciler::run`] completed so far.
    rounds: watch::Sender<u64>,
}

/// Orders resolved per sweep, at most.
const SWEEP_BATCH: usize = 200;

impl Reconciler {
    /// `settle`: how long after an attempt started a search finding nothing is trusted
    /// (at least the provider timeout: a request still in flight could land until then).
    pub fn new(store: Arc<dyn Store>, gateway: Arc<dyn Gateway>, clock: SharedClock, settle: Duration) -> Self {
        Self {
            store,
            gateway,
            clock,
            settle,
            rounds: watch::channel(0).0,
        }
    }

    /// The number of rounds (a sweep, then pruning if due) [`Reconciler::run`] has
    /// completed; the receiver wakes after each one.
    pub fn rounds(&self) -> watch::Receiver<u64> {
        self.rounds.subscribe()
    }

    /// Resolves one `reconciling` order (or a `processing` one whose lease lapsed).
    pub async fn resolve(&self, order: &Order) -> Result<Resolution, StoreError> {
        let store = &*self.store;
        let mut order = order.clone();
        let now = self.clock.now_ms();
        if order.lease_expired(now) {
            let reason = "the worker's claim lapsed before it recorded an outcome".to_string();
            match advance(store, &order, Transition::Suspect { reason }, now).await? {
                Advance::Applied(o) => {
                    tracing::warn!(order_id = %o.id, version = %o.version, "stale claim: order moved to reconciling");
                    order = o;
                }
                _ => return Ok(Resolution::Moved),
            }
        }
        if order.status != OrderStatus::Reconciling {
            return Ok(Resolution::Moved);
        }
        let found = match self.gateway.find_payments(&order.id).await {
            Ok(found) => found,
            Err(e) => return Ok(Resolution::Unresolved(e.to_string())),
        };
        let now = self.clock.now_ms();
        let transition = match examine(&order, &found) {
            Finding::Charged(payment_intent) => Transition::Pay { payment_intent },
            Finding::InDoubt(why) => return Ok(Resolution::Unresolved(why)),
            Finding::NoCharge if now - order.last_attempt_ms < ms(self.settle) => {
                return Ok(Resolution::Unresolved(
                    "no charge found yet; waiting for the last attempt to settle".into(),
                ))
            }
            Finding::NoCharge => Transition::Reopen,
        };
        Ok(match advance(store, &order, transition, now).await? {
            Advance::Applied(o) if o.status == OrderStatus::Paid => {
                tracing::info!(order_id = %o.id, payment_intent = ?o.payment_intent, "reconciled: paid");
                Resolution::Paid(o)
            }
            Advance::Applied(o) => {
                tracing::info!(order_id = %o.id, "reconciled: no charge, order pending again");
                Resolution::Reopened(o)
            }
            Advance::Fenced | Advance::Refused(_) => Resolution::Moved,
        })
    }

    /// Resolves every order that needs it, once.
    pub async fn sweep(&self) -> Result<Sweep, StoreError> {
        let mut sweep = Sweep::default();
        for order in self.store.orders_to_reconcile(self.clock.now_ms(), SWEEP_BATCH).await? {
            match self.resolve(&order).await? {
                Resolution::Paid(_) => sweep.paid += 1,
                Resolution::Reopened(_) => sweep.reopened += 1,
                Resolution::Unresolved(why) => {
                    tracing::debug!(order_id = %order.id, why, "still reconciling");
                    sweep.unresolved += 1;
                }
                Resolution::Moved => {}
            }
        }
        Ok(sweep)
    }

    /// Sweeps every `interval` and prunes expired key records every `prune_every` (by the
    /// merchant's clock), until `stop` turns true.
    pub async fn run(self, interval: Duration, prune_every: Duration, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_prune_ms = self.clock.now_ms();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %e, "reconciliation sweep failed");
            }
            let now = self.clock.now_ms();
            if now.saturating_sub(last_prune_ms) >= ms(prune_every) {
                last_prune_ms = now;
                match self.store.prune_keys(now).await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(pruned = n, "expired idempotency keys pruned"),
                    Err(e) => tracing::warn!(error = %e, "pruning idempotency keys failed"),
                }
            }
            self.rounds.send_modify(|n| *n += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::{Amount, Currency, OrderId, PaymentMethod};

    fn order() -> Order {
        Order::new(
            OrderId::parse("o1").unwrap(),
            Amount::new(2000).unwrap(),
            Currency::parse("usd").unwrap(),
            PaymentMethod::parse("pm_card_visa").unwrap(),
            0,
        )
    }

    fn pi(id: &str, status: &str, created: i64) -> FoundPayment {
        FoundPayment {
            payment_intent: PaymentIntentId::new(id),
            status: status.into(),
            amount: 2000,
            currency: "usd".into(),
            created,
        }
    }

    #[test]
    fn a_succeeded_intent_pays_the_order() {
        let found = [pi("pi_2", "requires_payment_method", 2), pi("pi_1", "succeeded", 1)];
        assert_eq!(
            examine(&order(), &found),
            Finding::Charged(PaymentIntentId::new("pi_1"))
        );
    }

    #[test]
    fn the_oldest_success_wins_when_there_are_several() {
        let found = [
            pi("pi_3", "succeeded", 5),
            pi("pi_2", "succeeded", 5),
            pi("pi_1", "succeeded", 4),
        ];
        assert_eq!(
            examine(&order(), &found),
            Finding::Charged(PaymentIntentId::new("pi_1"))
        );
        let same_second = [pi("pi_new", "succeeded", 5), pi("pi_old", "succeeded", 5)];
        assert_eq!(
            examine(&order(), &same_second),
            Finding::Charged(PaymentIntentId::new("pi_old"))
        );
    }

    #[test]
    fn declines_alone_are_no_charge_and_unsettled_intents_are_in_doubt() {
        assert_eq!(examine(&order(), &[]), Finding::NoCharge);
        assert_eq!(
            examine(&order(), &[pi("pi_1", "requires_payment_method", 1)]),
            Finding::NoCharge
        );
        assert!(matches!(
            examine(&order(), &[pi("pi_1", "processing", 1)]),
            Finding::InDoubt(_)
        ));
    }
}
