//! Charges: the legacy `POST /v1/charges` flow (create, capture, retrieve, list,
//! search); an intent's charge is made by the same code through `confirm`.

use std::sync::Arc;

use serde_json::json;

use super::object::{Charge, ChargeStatus, NewCharge};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::state::ledger::LedgerEntry;
use crate::state::payments::{DuplicatePolicy, Payments};
use crate::stripe::fields::{
    card_error, duplicate_decline, metadata, metadata_update, movement_for, source, text, text_update,
};
use crate::stripe::ids::{ChargeId, CheckoutSessionId, PaymentMethodId};
use crate::stripe::money::{check_amount, Currency, StoredAmount};
use crate::stripe::paging::{list_page, search_page};
use crate::stripe::params::Params;
use crate::stripe::search::Searchable;

/// Stripe's `maxLength` for a charge's `description`.
const MAX_DESCRIPTION: usize = 40_000;

impl Payments {
    pub fn create_charge(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let currency = Currency::parse(p.req_str("currency")?)?;
        let amount = check_amount(
            "amount",
            p.opt_u64("amount")?.ok_or_else(|| ApiError::missing_param("amount"))?,
            currency,
        )?;
        let card = source(p)?;
        let capture = p.opt_bool("capture")?.unwrap_or(true);
        let mut metadata = metadata(p)?;
        let correlation_id = self.correlation_id(p, attempt);
        metadata.share(correlation_id.as_ref());
        let decline = attempt.decline.clone().or_else(|| card.decline.clone());
        let charge = Charge::new(NewCharge {
            amount,
            currency,
            card,
            decline: decline.clone(),
            capture,
            payment_intent: None,
            payment_method: Some(PaymentMethodId::generate()),
            description: text(p, "description")?,
            metadata: &metadata,
            correlation_id: correlation_id.clone(),
        });
        let mut entry = self.ledger.entry(correlation_id.as_ref(), &charge.id.as_str());
        if let Some(d) = decline {
            let err = card_error(&d).with_extra("charge", json!(charge.id));
            let charge = Arc::new(charge);
            self.charges.insert(charge.clone());
            self.events
                .emit(EventType::ChargeFailed, Reply::Charge(charge), None, attempt);
            return Err(err);
        }
        if capture && self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        let charge = Arc::new(charge);
        if capture {
            entry.append(movement_for(&charge, None, attempt));
        }
        self.charges.insert(charge.clone());
        self.events
            .emit(EventType::ChargeSucceeded, Reply::Charge(charge.clone()), None, attempt);
        Ok(Reply::Charge(charge))
    }

    pub fn capture_charge(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("charge", raw_id, "charge");
        let id = ChargeId::parse(raw_id).ok_or_else(unknown)?;
        let current = self.charges.get(&id).ok_or_else(unknown)?;
        if current.payment_intent.is_some() {
            return Err(ApiError::invalid_request(
                "This charge belongs to a PaymentIntent: capture the PaymentIntent instead.",
                None,
            ));
        }
        let amount = p.opt_u64("amount")?.unwrap_or(current.amount);
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), &id.as_str());
        if self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        self.capture_charge_locked(&id, amount, None, &mut entry, attempt)
            .map(Reply::Charge)
    }

    /// Captures an authorised charge; the caller holds its ledger entry.
    pub(crate) fn capture_charge_locked(
        &self,
        id: &ChargeId,
        amount: u64,
        checkout_session: Option<CheckoutSessionId>,
        entry: &mut LedgerEntry<'_>,
        attempt: &Attempt,
    ) -> Result<Arc<Charge>, ApiError> {
        self.charges
            .update(id, |slot| {
                if slot.captured {
                    return Err(
                        ApiError::invalid_request(format!("Charge {id} has already been captured."), None)
                            .with_code("charge_already_captured")
                            .executed(),
                    );
                }
                if slot.status != ChargeStatus::Succeeded || slot.refunded {
                    return Err(ApiError::invalid_request(
                        format!("Charge {id} cannot be captured: it failed or was released."),
                        None,
                    )
                    .executed());
                }
                if amount == 0 || amount > slot.amount {
                    return Err(ApiError::invalid_param(
                        "amount",
                        format!(
                            "The amount to capture must be between 1 and the authorized amount ({}).",
                            slot.amount
                        ),
                    ));
                }
                let mut c = (**slot).clone();
                c.captured = true;
                c.amount_captured = StoredAmount::new(amount);
                let c = Arc::new(c);
                entry.append(movement_for(&c, checkout_session, attempt));
                let before = std::mem::replace(slot, c);
                self.events.emit(
                    EventType::ChargeCaptured,
                    Reply::Charge(slot.clone()),
                    Some(Reply::Charge(before)),
                    attempt,
                );
                Ok(slot.clone())
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("charge", &id.as_str(), "charge")))
    }

    /// `POST /v1/charges/{id}`: its `description` and `metadata` (merged as Stripe merges
    /// it), announced by `charge.updated`. The ledger keeps the order id the charge was
    /// made for. Stripe's other updatable fields are accepted and not modelled.
    pub fn update_charge(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("charge", raw, "charge");
        let id = ChargeId::parse(raw).ok_or_else(unknown)?;
        let description = text_update(p, "description", MAX_DESCRIPTION)?;
        self.update_announced(
            &self.charges,
            &id,
            EventType::ChargeUpdated,
            Reply::Charge,
            attempt,
            |c| {
                c.metadata = metadata_update(&c.metadata, p)?;
                c.metadata.share(c.correlation_id.as_ref());
                if let Some(d) = description {
                    c.set_description(d);
                }
                Ok(())
            },
        )
        .unwrap_or_else(|| Err(unknown()))
    }

    pub fn retrieve_charge(&self, id: &str) -> Result<Reply, ApiError> {
        ChargeId::parse(id)
            .and_then(|i| self.charges.get(&i))
            .map(Reply::Charge)
            .ok_or_else(|| ApiError::unknown_object("charge", id, "charge"))
    }

    pub fn list_charges(&self, p: &Params) -> Result<Reply, ApiError> {
        let pi = p.opt_str("payment_intent")?;
        list_page(
            &self.charges,
            p,
            "/v1/charges",
            ChargeId::parse,
            |c| pi.is_none_or(|pi| c.payment_intent.as_ref().is_some_and(|x| *x.as_str() == *pi)),
            |c| c.to_json(),
        )
    }

    pub fn search_charges(&self, p: &Params) -> Result<Reply, ApiError> {
        search_page(&self.charges, p, "/v1/charges/search", |c| c.to_json())
    }
}

impl Searchable for Charge {
    fn field(&self, name: &str) -> Option<String> {
        match name {
            "status" => Some(
                match self.status {
                    ChargeStatus::Succeeded => "succeeded",
                    ChargeStatus::Pending => "pending",
                    ChargeStatus::Failed => "failed",
                }
                .into(),
            ),
            "currency" => Some(self.currency.code().into()),
            "amount" => Some(self.amount.to_string()),
            "created" => Some(self.created.get().to_string()),
            "captured" => Some(self.captured.to_string()),
            "refunded" => Some(self.refunded.to_string()),
            "payment_intent" => self.payment_intent.as_ref().map(|p| p.to_string()),
            _ => None,
        }
    }
    fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key)
    }
}
