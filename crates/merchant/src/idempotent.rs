//! The idempotent merchant: every safeguard of the seeds, in one design.
//!
//! A checkout replays a final answer stored under its key without further ado; otherwise
//! it takes the order's lock (409 if held, 503 if the lock service is down), then records
//! or re-checks the client's key (replay a final answer, 422 on another body), then
//! works on the order row, whose status moves only by fenced compare-and-set: a pending
//! (or declined) order is *claimed* (`processing`, version bumped, a lease), the provider
//! is called with the order's stable idempotency key, and the outcome is written with the
//! claim's version — paid, declined, pending again when nothing was charged, or
//! `reconciling` when the outcome is unknown. A reconciling order is resolved only by
//! searching the provider (inline, and by the background reconciler); a pending order that
//! was attempted before is searched again before it is charged again. Final answers (200,
//! 402) are stored under the key; everything retryable (503) is not, so the client's retry
//! with the same key runs this again and finds the order as the first run left it.
//!
//! Fulfilment on a `payment_intent.succeeded` webhook is guarded twice: the event id is
//! recorded under a unique constraint (a redelivery is answered `duplicate_event` at
//! once), and the order is fulfilled only through its fenced `Fulfil` transition, which
//! the state machine allows once — so concurrent copies of one event, or the events of
//! two payment intents for one order, still ship it once. A redelivered event whose first
//! delivery was recorded but not applied (a store failure in between) is applied then.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::checkout::{Answer, CheckoutRequest, Reply};
use super::clock::{ms, SharedClock};
use super::fencing::{advance, Advance};
use super::gateway::{ChargeOutcome, ChargeRequest, Gateway};
use super::idempotency_record::{IdempotencyKey, KeyBegin, KeyCheck, KeyRecord};
use super::lock::OrderLock;
use super::order::{Order, OrderId, OrderStatus, Transition};
use super::reconciler::{examine, Finding, Reconciler, Resolution};
use super::store::{Store, StoreError};
use super::strategy::{CheckoutService, Health, Strategy};
use super::webhook::{EventRecord, Fulfillment, PaymentSucceeded};

/// The idempotent merchant's tunables.
#[derive(Debug, Clone)]
pub struct IdempotentSettings {
    /// How long the order lock, and a claim's lease, last: longer than a checkout's
    /// critical section (two searches and a charge, each bounded by the provider timeout).
    pub lock_ttl: Duration,
    /// How long a key record (and its stored answer) is kept.
    pub key_ttl: Duration,
    /// How long after an attempt a search that finds nothing is trusted.
    pub settle: Duration,
}

pub struct Idempotent {
    store: Arc<dyn Store>,
    lock: Arc<dyn OrderLock>,
    gateway: Arc<dyn Gateway>,
    clock: SharedClock,
    reconciler: Reconciler,
    settings: IdempotentSettings,
}

/// Steps one checkout may take before it gives up with a 503 (each re-reads the order).
const MAX_STEPS: usize = 6;

/// One step's result: an answer, or "the order changed: look again".
enum Step {
    Done(Reply),
    Again,
}

impl Idempotent {
    /// `clock` times leases, key expiry and the reconciler's settling delay; the lock
    /// keeps its own time (a `MemoryLock` should share this clock).
    pub fn new(
        store: Arc<dyn Store>,
        lock: Arc<dyn OrderLock>,
        gateway: Arc<dyn Gateway>,
        clock: SharedClock,
        settings: IdempotentSettings,
    ) -> Self {
        let reconciler = Reconciler::new(store.clone(), gateway.clone(), clock.clone(), settings.settle);
        Self {
            store,
            lock,
            gateway,
            clock,
            reconciler,
            settings,
        }
    }

    /// A reconciler sharing this merchant's store, gateway and clock (for the background
    /// loop).
    pub fn reconciler(&self) -> Reconciler {
        Reconciler::new(
            self.store.clone(),
            self.gateway.clone(),
            self.clock.clone(),
            self.settings.settle,
        )
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    async fn checkout_locked(&self, req: &CheckoutRequest, key: Option<&IdempotencyKey>) -> Result<Answer, StoreError> {
        let fingerprint = req.fingerprint();
        if let Some(key) = key {
            let now = self.now_ms();
            let record = KeyRecord {
                key: key.clone(),
                order_id: req.order_id.clone(),
                fingerprint: fingerprint.clone(),
                reply: None,
                created_ms: now,
                expires_ms: now.saturating_add(ms(self.settings.key_ttl)),
            };
            if let KeyBegin::Existing(existing) = self.store.begin_key(&record, now).await? {
                match existing.check(&fingerprint) {
                    KeyCheck::Mismatch => {
                        return Ok(Reply::KeyReused {
                            order_id: req.order_id.clone(),
                        }
                        .into())
                    }
                    KeyCheck::Replay(stored) => return Ok(Answer::replay(stored)),
                    KeyCheck::Proceed => {}
                }
            }
        }
        let reply = self.pay(req).await?;
        if let (Some(key), true) = (key, reply.is_final()) {
            // A final answer is given only once it is stored: a key never answers two ways.
            self.store.complete_key(key, &fingerprint, &reply.to_stored()).await?;
        }
        Ok(reply.into())
    }

    /// `req`'s order: the stored one, or a new pending one stored now.
    async fn take_order(&self, req: &CheckoutRequest) -> Result<Order, StoreError> {
        let fresh = Order::new(
            req.order_id.clone(),
            req.amount,
            req.currency.clone(),
            req.payment_method.clone(),
            self.now_ms(),
        );
        self.store.create_order(&fresh).await
    }

    async fn pay(&self, req: &CheckoutRequest) -> Result<Reply, StoreError> {
        let mut order = self.take_order(req).await?;
        if order.amount != req.amount || order.currency != req.currency {
            return Ok(Reply::OrderMismatch {
                order_id: req.order_id.clone(),
                message: format!(
                    "order {} is for {} {}, not {} {}",
                    order.id, order.amount, order.currency, req.amount, req.currency
                ),
            });
        }
        for _ in 0..MAX_STEPS {
            match self.step(req, &order).await? {
                Step::Done(reply) => return Ok(reply),
                Step::Again => {
                    order = self
                        .store
                        .order(&req.order_id)
                        .await?
                        .ok_or_else(|| StoreError::Corrupt(format!("order {} disappeared", req.order_id)))?;
                }
            }
        }
        Ok(Reply::unavailable(
            Some(&req.order_id),
            "order_busy",
            "the order kept changing under this request; retry with the same key",
        ))
    }

    /// Decides what to do with `order` as it was just read.
    async fn step(&self, req: &CheckoutRequest, order: &Order) -> Result<Step, StoreError> {
        match order.status {
            OrderStatus::Paid => {
                let payment_intent = order
                    .payment_intent
                    .clone()
                    .ok_or_else(|| StoreError::Corrupt(format!("paid order {} has no payment intent", order.id)))?;
                Ok(Step::Done(Reply::paid(order, payment_intent)))
            }
            OrderStatus::Processing if !order.lease_expired(self.now_ms()) => Ok(Step::Done(Reply::InFlight {
                order_id: order.id.clone(),
            })),
            OrderStatus::Processing | OrderStatus::Reconciling => Ok(match self.reconciler.resolve(order).await? {
                Resolution::Paid(o) => Step::Done(paid_reply(&o)?),
                Resolution::Reopened(_) | Resolution::Moved => Step::Again,
                Resolution::Unresolved(why) => Step::Done(reconciling_reply(order, &why)),
            }),
            OrderStatus::Pending | OrderStatus::Declined => {
                if !order.accepts_payment_method(&req.payment_method) {
                    return Ok(Step::Done(Reply::OrderMismatch {
                        order_id: order.id.clone(),
                        message: format!(
                            "order {} was already attempted with payment method `{}`; another one is accepted only after a decline",
                            order.id, order.payment_method
                        ),
                    }));
                }
                if order.status == OrderStatus::Pending && order.generation_attempts > 0 {
                    // An earlier attempt of this generation may have landed after all.
                    if let Some(step) = self.search_before_retry(order).await? {
                        return Ok(step);
                    }
                }
                self.attempt(req, order).await
            }
        }
    }

    /// Searches before charging an order again; `None` means no charge exists: go on.
    async fn search_before_retry(&self, order: &Order) -> Result<Option<Step>, StoreError> {
        let found = match self.gateway.find_payments(&order.id).await {
            Ok(found) => found,
            Err(e) => {
                return Ok(Some(Step::Done(Reply::unavailable(
                    Some(&order.id),
                    "provider_unavailable",
                    format!("cannot check the order's earlier attempt: {e}"),
                ))))
            }
        };
        Ok(match examine(order, &found) {
            Finding::NoCharge => None,
            Finding::InDoubt(why) => Some(Step::Done(reconciling_reply(order, &why))),
            Finding::Charged(payment_intent) => {
                match advance(&*self.store, order, Transition::Pay { payment_intent }, self.now_ms()).await? {
                    Advance::Applied(o) => Some(Step::Done(paid_reply(&o)?)),
                    _ => Some(Step::Again),
                }
            }
        })
    }

    /// Claims the order, calls the provider once, and records the outcome under the claim.
    async fn attempt(&self, req: &CheckoutRequest, order: &Order) -> Result<Step, StoreError> {
        let now = self.now_ms();
        let claim = Transition::Claim {
            payment_method: req.payment_method.clone(),
            lease_until_ms: now.saturating_add(ms(self.settings.lock_ttl)),
        };
        let claimed = match advance(&*self.store, order, claim, now).await? {
            Advance::Applied(o) => o,
            Advance::Fenced => return Ok(Step::Again),
            Advance::Refused(e) => {
                tracing::warn!(order_id = %order.id, error = %e, "claim refused");
                return Ok(Step::Again);
            }
        };
        let charge = ChargeRequest {
            order_id: claimed.id.clone(),
            amount: claimed.amount,
            currency: claimed.currency.clone(),
            payment_method: claimed.payment_method.clone(),
            idempotency_key: Some(claimed.provider_key()),
        };
        tracing::debug!(order_id = %claimed.id, key = ?charge.idempotency_key, version = %claimed.version, "charging");
        let outcome = self.gateway.charge(&charge).await;
        let (transition, reply) = match outcome {
            ChargeOutcome::Succeeded { payment_intent } => {
                let reply = Reply::paid(&claimed, payment_intent.clone());
                (Transition::Pay { payment_intent }, reply)
            }
            ChargeOutcome::Declined { decline_code, message } => {
                let reply = Reply::Declined {
                    order_id: claimed.id.clone(),
                    decline_code: decline_code.clone(),
                    message: message.clone(),
                };
                (Transition::Decline { decline_code, message }, reply)
            }
            ChargeOutcome::Rejected { param, message } => {
                let reply = Reply::ProviderRejected {
                    order_id: claimed.id.clone(),
                    param,
                    message: message.clone(),
                };
                (Transition::Release { reason: message }, reply)
            }
            ChargeOutcome::NotCharged { reason } => {
                let reply = Reply::unavailable(Some(&claimed.id), "provider_unavailable", reason.clone());
                (Transition::Release { reason }, reply)
            }
            ChargeOutcome::Unknown { reason, .. } => {
                tracing::info!(order_id = %claimed.id, reason, "payment outcome unknown: reconciling");
                return self.suspect(&claimed, reason).await;
            }
        };
        // The fencing token: this write applies only if the order is still at our claim's version.
        Ok(
            match advance(&*self.store, &claimed, transition, self.now_ms()).await? {
                Advance::Applied(_) => Step::Done(reply),
                Advance::Fenced | Advance::Refused(_) => {
                    // Routine when a payment_intent.succeeded webhook paid the order first
                    // (the re-read finds it paid); otherwise the claim went stale.
                    tracing::debug!(order_id = %claimed.id, version = %claimed.version, "claim moved on: late outcome not written");
                    Step::Again
                }
            },
        )
    }

    /// Records an unknown outcome and tries to resolve it at once (a lost answer to a
    /// charge that went through is found by the first search).
    async fn suspect(&self, claimed: &Order, reason: String) -> Result<Step, StoreError> {
        let reconciling = match advance(&*self.store, claimed, Transition::Suspect { reason }, self.now_ms()).await? {
            Advance::Applied(o) => o,
            Advance::Fenced | Advance::Refused(_) => return Ok(Step::Again),
        };
        Ok(match self.reconciler.resolve(&reconciling).await? {
            Resolution::Paid(o) => Step::Done(paid_reply(&o)?),
            Resolution::Unresolved(why) => Step::Done(reconciling_reply(&reconciling, &why)),
            // Reopened only happens with a zero settle time; either way, look again.
            Resolution::Reopened(_) | Resolution::Moved => Step::Again,
        })
    }
}

impl Idempotent {
    async fn fulfill_order(&self, event: &PaymentSucceeded) -> Result<Fulfillment, StoreError> {
        let Some(mut order) = self.store.order(&event.order_id).await? else {
            return Ok(Fulfillment::UnknownOrder);
        };
        let now = self.now_ms();
        let record = EventRecord {
            id: event.event_id.clone(),
            kind: event.kind.clone(),
            order_id: event.order_id.clone(),
            received_ms: now,
            expires_ms: now.saturating_add(ms(self.settings.key_ttl)),
        };
        let first_delivery = self.store.record_event(&record).await?;
        for _ in 0..MAX_STEPS {
            if order.fulfillments > 0 {
                let fulfillments = order.fulfillments;
                return Ok(if first_delivery {
                    Fulfillment::AlreadyFulfilled { fulfillments }
                } else {
                    Fulfillment::DuplicateEvent { fulfillments }
                });
            }
            let fulfill = Transition::Fulfill {
                payment_intent: event.payment_intent.clone(),
            };
            match advance(&*self.store, &order, fulfill, self.now_ms()).await? {
                Advance::Applied(o) => {
                    tracing::debug!(order_id = %o.id, event = %event.event_id, "order fulfilled");
                    return Ok(Fulfillment::Fulfilled {
                        fulfillments: o.fulfillments,
                    });
                }
                Advance::Fenced | Advance::Refused(_) => {
                    order = self
                        .store
                        .order(&event.order_id)
                        .await?
                        .ok_or_else(|| StoreError::Corrupt(format!("order {} disappeared", event.order_id)))?;
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "order {} kept changing while it was being fulfilled",
            event.order_id
        )))
    }
}

fn paid_reply(order: &Order) -> Result<Reply, StoreError> {
    let payment_intent = order
        .payment_intent
        .clone()
        .ok_or_else(|| StoreError::Corrupt(format!("paid order {} has no payment intent", order.id)))?;
    Ok(Reply::paid(order, payment_intent))
}

fn reconciling_reply(order: &Order, why: &str) -> Reply {
    Reply::Unavailable {
        order_id: Some(order.id.clone()),
        status: Some(OrderStatus::Reconciling),
        code: "outcome_unknown",
        message: format!("the payment's outcome is not known yet ({why}); retry with the same Idempotency-Key"),
    }
}

#[async_trait]
impl CheckoutService for Idempotent {
    fn strategy(&self) -> Strategy {
        Strategy::Idempotent
    }

    async fn checkout(&self, req: CheckoutRequest, key: Option<IdempotencyKey>) -> Answer {
        // Fast path, before the lock: a stored answer is replayed (even while Redis is down).
        if let Some(key) = &key {
            match self.store.key(key).await {
                Ok(Some(record)) if !record.is_expired(self.now_ms()) => match record.check(&req.fingerprint()) {
                    KeyCheck::Replay(stored) => return Answer::replay(stored),
                    KeyCheck::Mismatch => return Reply::KeyReused { order_id: req.order_id }.into(),
                    KeyCheck::Proceed => {}
                },
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(order_id = %req.order_id, error = %e, "store failure");
                    return Reply::unavailable(Some(&req.order_id), "store_unavailable", e.to_string()).into();
                }
            }
        }
        let lease = match self.lock.acquire(&req.order_id, self.settings.lock_ttl).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return Reply::InFlight { order_id: req.order_id }.into(),
            Err(e) => {
                tracing::warn!(order_id = %req.order_id, error = %e, "lock unavailable: refusing to pay unguarded");
                return Reply::unavailable(Some(&req.order_id), "lock_unavailable", e.to_string()).into();
            }
        };
        let answer = match self.checkout_locked(&req, key.as_ref()).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(order_id = %req.order_id, error = %e, "store failure");
                Reply::unavailable(Some(&req.order_id), "store_unavailable", e.to_string()).into()
            }
        };
        if let Err(e) = self.lock.release(&lease).await {
            tracing::warn!(order_id = %req.order_id, error = %e, "lock release failed; it will expire");
        }
        answer
    }

    async fn open_order(&self, req: &CheckoutRequest) -> Result<(), StoreError> {
        self.take_order(req).await.map(|_| ())
    }

    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        self.store.order(id).await
    }

    async fn fulfill(&self, event: &PaymentSucceeded) -> Result<Fulfillment, StoreError> {
        self.fulfill_order(event).await
    }

    async fn health(&self) -> Health {
        let problem = match (self.store.ping().await, self.lock.ping().await) {
            (Ok(()), Ok(())) => None,
            (Err(e), _) => Some(e.to_string()),
            (_, Err(e)) => Some(e.to_string()),
        };
        Health {
            status: if problem.is_none() { "ok" } else { "unavailable" },
            strategy: Strategy::Idempotent,
            store: self.store.kind(),
            lock: Some(self.lock.kind()),
            problem,
        }
    }
}
