//! Refunds: created against a charge or an intent's charge, bounded by what was
//! captured (the ledger refuses an over-refund), retrieved, updated and listed; and the
//! same under a charge's path (`/v1/charges/{id}/refunds…`, `/v1/charges/{id}/refund`),
//! Stripe's older form that SDKs and integrations still call.

use std::sync::Arc;

use super::object::{Refund, RefundReason};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::resources::payment_intents::object::IntentStatus;
use crate::state::clock::now_unix;
use crate::state::ledger::{Moved, Movement, OverRefund, RefundMoved};
use crate::state::payments::Payments;
use crate::stripe::fields::{metadata, metadata_update};
use crate::stripe::ids::{ChargeId, PaymentIntentId, RefundId, Token};
use crate::stripe::paging::list_page;
use crate::stripe::params::Params;

impl Payments {
    pub fn create_refund(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let charge_id = match (p.opt_str("charge")?, p.opt_str("payment_intent")?) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_request(
                    "Pass either charge or payment_intent, not both.",
                    Some("payment_intent".into()),
                ))
            }
            (Some(c), None) => ChargeId::parse(c).ok_or_else(|| ApiError::unknown_reference("charge", c, "charge"))?,
            (None, Some(pi)) => {
                let intent = PaymentIntentId::parse(pi)
                    .and_then(|i| self.intents.get(&i))
                    .ok_or_else(|| ApiError::unknown_reference("payment_intent", pi, "payment_intent"))?;
                match (&intent.latest_charge, intent.status) {
                    (Some(c), IntentStatus::Succeeded) => *c,
                    _ => {
                        return Err(ApiError::invalid_request(
                            format!("This PaymentIntent ({pi}) does not have a successful charge to refund."),
                            Some("payment_intent".into()),
                        ))
                    }
                }
            }
            (None, None) => return Err(ApiError::missing_param("charge")),
        };
        self.refund(charge_id, p, attempt)
    }

    /// `POST /v1/charges/{id}/refunds`: a refund of the charge in the path.
    pub fn create_charge_refund(&self, charge: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let charge = self.path_charge(charge)?;
        if p.opt_str("payment_intent")?.is_some() {
            return Err(ApiError::invalid_request(
                "Pass either charge or payment_intent, not both.",
                Some("payment_intent".into()),
            ));
        }
        self.refund(charge, p, attempt)
    }

    /// `POST /v1/charges/{id}/refund`: refunds the charge (what is left, or `amount`) and
    /// answers the charge, as Stripe's oldest refund call does.
    pub fn refund_charge(&self, charge: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        self.create_charge_refund(charge, p, attempt)?;
        self.retrieve_charge(charge)
    }

    /// The charge a path names, or 404.
    fn path_charge(&self, raw: &str) -> Result<ChargeId, ApiError> {
        ChargeId::parse(raw)
            .filter(|id| self.charges.get(id).is_some())
            .ok_or_else(|| ApiError::unknown_object("charge", raw, "charge"))
    }

    /// Refunds `charge_id`: `amount` (default: what is left), `reason`, `metadata`.
    fn refund(&self, charge_id: ChargeId, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let requested = p.opt_u64("amount")?;
        let reason = match p.opt_str("reason")? {
            None => None,
            Some(r) => Some(RefundReason::parse(r).ok_or_else(|| {
                ApiError::invalid_param(
                    "reason",
                    format!("Invalid reason: '{r}'; expected duplicate, fraudulent or requested_by_customer."),
                )
            })?),
        };
        let meta = metadata(p)?;
        let current = self
            .charges
            .get(&charge_id)
            .ok_or_else(|| ApiError::unknown_reference("charge", &charge_id.as_str(), "charge"))?;
        if !current.captured {
            return Err(ApiError::invalid_request(
                format!("Charge {charge_id} has not been captured: there is nothing to refund."),
                Some("charge".into()),
            ));
        }
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), &charge_id.as_str());
        self.charges
            .update(&charge_id, |slot| {
                let left = slot.refundable();
                let amount = requested.unwrap_or(left);
                if amount == 0 || amount > left {
                    entry.append_over_refund(OverRefund {
                        charge: slot.id,
                        payment_intent: slot.payment_intent,
                        correlation_id: slot.correlation_id.clone(),
                        captured: slot.amount_captured.get(),
                        already_refunded: slot.amount_refunded(),
                        requested: amount,
                        idempotency_key: attempt.idempotency_key.clone(),
                        request_id: attempt.request_id,
                        created_ms: crate::state::clock::now_ms(),
                    });
                    let err = if left == 0 {
                        ApiError::invalid_request(
                            format!("Charge {} has already been refunded.", slot.id),
                            Some("amount".into()),
                        )
                        .with_code("charge_already_refunded")
                    } else {
                        ApiError::invalid_param(
                            "amount",
                            format!("Refund amount ({amount}) is greater than unrefunded amount on charge ({left})."),
                        )
                    };
                    return Err(err.executed());
                }
                let refund = Refund {
                    id: RefundId::generate(),
                    amount,
                    balance_transaction: Token::random(),
                    charge: slot.id,
                    created: now_unix(),
                    currency: slot.currency,
                    metadata: meta,
                    payment_intent: slot.payment_intent,
                    reason,
                };
                let mut c = (**slot).clone();
                c.set_amount_refunded(c.amount_refunded() + amount);
                let before = std::mem::replace(slot, Arc::new(c));
                entry.append(Movement {
                    moved: Moved::Refund(RefundMoved {
                        id: refund.id,
                        amount,
                        currency: refund.currency,
                        payment_intent: refund.payment_intent,
                        charge: refund.charge,
                    }),
                    checkout_session: None,
                    attempt: attempt.clone(),
                });
                let refund = Arc::new(refund);
                self.refunds.insert(refund.clone());
                self.events.emit(
                    EventType::ChargeRefunded,
                    Reply::Charge(slot.clone()),
                    Some(Reply::Charge(before)),
                    attempt,
                );
                // The refund reaches `succeeded` at once, as a test-mode refund does.
                self.events.emit(
                    EventType::ChargeRefundUpdated,
                    Reply::Refund(refund.clone()),
                    None,
                    attempt,
                );
                Ok(Reply::Refund(refund))
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("charge", &charge_id.as_str(), "charge")))
    }

    pub fn retrieve_refund(&self, id: &str) -> Result<Reply, ApiError> {
        RefundId::parse(id)
            .and_then(|i| self.refunds.get(&i))
            .map(Reply::Refund)
            .ok_or_else(|| ApiError::unknown_object("refund", id, "refund"))
    }

    /// `POST /v1/refunds/{id}`: its `metadata`, merged as Stripe merges it, announced by
    /// `charge.refund.updated`.
    pub fn update_refund(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("refund", raw, "refund");
        let id = RefundId::parse(raw).ok_or_else(unknown)?;
        self.update_announced(
            &self.refunds,
            &id,
            EventType::ChargeRefundUpdated,
            Reply::Refund,
            attempt,
            |r| {
                r.metadata = metadata_update(&r.metadata, p)?;
                Ok(())
            },
        )
        .unwrap_or_else(|| Err(unknown()))
    }

    /// The refund `raw` of the charge `charge` (`/v1/charges/{id}/refunds/{sub}`): a
    /// refund of another charge is no such refund there.
    fn charge_refund(&self, charge: &str, raw: &str) -> Result<Arc<Refund>, ApiError> {
        let charge = self.path_charge(charge)?;
        RefundId::parse(raw)
            .and_then(|id| self.refunds.get(&id))
            .filter(|r| r.charge == charge)
            .ok_or_else(|| ApiError::unknown_object("refund", raw, "refund"))
    }

    pub fn retrieve_charge_refund(&self, charge: &str, raw: &str) -> Result<Reply, ApiError> {
        self.charge_refund(charge, raw).map(Reply::Refund)
    }

    pub fn update_charge_refund(
        &self,
        charge: &str,
        raw: &str,
        p: &Params,
        attempt: &Attempt,
    ) -> Result<Reply, ApiError> {
        self.charge_refund(charge, raw)?;
        self.update_refund(raw, p, attempt)
    }

    /// `GET /v1/charges/{id}/refunds`: the charge's refunds, newest first.
    pub fn list_charge_refunds(&self, charge: &str, p: &Params) -> Result<Reply, ApiError> {
        let charge = self.path_charge(charge)?;
        list_page(
            &self.refunds,
            p,
            &format!("/v1/charges/{charge}/refunds"),
            RefundId::parse,
            |r| r.charge == charge,
            |r| r.to_json(),
        )
    }

    pub fn list_refunds(&self, p: &Params) -> Result<Reply, ApiError> {
        let charge = p.opt_str("charge")?;
        let pi = p.opt_str("payment_intent")?;
        list_page(
            &self.refunds,
            p,
            "/v1/refunds",
            RefundId::parse,
            |r| {
                charge.is_none_or(|c| *r.charge.as_str() == *c)
                    && pi.is_none_or(|pi| r.payment_intent.as_ref().is_some_and(|x| *x.as_str() == *pi))
            },
            |r| r.to_json(),
        )
    }
}
