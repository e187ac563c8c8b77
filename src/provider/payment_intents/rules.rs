//! Payment intents: create, confirm, capture, cancel, retrieve, list and search, and
//! the state machine between them (`requires_payment_method` → `requires_confirmation` →
//! `requires_capture` / `succeeded`, or `canceled`).

use std::sync::Arc;

use serde_json::json;

use super::object::{CancellationReason, CaptureMethod, IntentStatus, IntentText, LastPaymentError, PaymentIntent};
use crate::provider::attempt::Attempt;
use crate::provider::cards::TestCard;
use crate::provider::charges::object::{Charge, NewCharge};
use crate::provider::error::ApiError;
use crate::provider::fields::{card_error, duplicate_decline, metadata, movement_for, text};
use crate::provider::ids::{CustomerId, PaymentIntentId};
use crate::provider::json::now_unix;
use crate::provider::ledger::{LedgerEntry, MovementKind};
use crate::provider::money::{check_amount, Currency};
use crate::provider::paging::{list_page, search_page};
use crate::provider::params::Params;
use crate::provider::payments::{DuplicatePolicy, Payments};
use crate::provider::reply::Reply;
use crate::provider::search::Searchable;

/// `confirm=true` on an intent without a payment method.
fn no_payment_method_to_confirm() -> ApiError {
    ApiError::invalid_request(
        "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
        Some("payment_method".into()),
    )
    .with_code("payment_intent_unexpected_state")
}

impl Payments {
    pub fn create_intent(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let currency = Currency::parse(p.req_str("currency")?)?;
        let amount = check_amount(
            "amount",
            p.opt_u64("amount")?.ok_or_else(|| ApiError::missing_param("amount"))?,
            currency,
        )?;
        let capture_method = match p.opt_str("capture_method")? {
            None | Some("automatic") => CaptureMethod::Automatic,
            Some("automatic_async") => CaptureMethod::AutomaticAsync,
            Some("manual") => CaptureMethod::Manual,
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "capture_method",
                    format!("Invalid capture_method: '{other}'; expected automatic, automatic_async or manual."),
                ))
            }
        };
        // The customer must exist; a saved payment method must be usable by it.
        let customer = self.customer_param(p, "customer")?;
        let method = self.intent_payment_method(p, customer)?;
        let card = method.map(|m| m.card);
        let confirm = p.opt_bool("confirm")?.unwrap_or(false);
        let metadata = metadata(p)?;
        let automatic_payment_methods = match p.opt_object("automatic_payment_methods")? {
            None => None,
            Some(apm) => {
                let enabled = apm.opt_bool("enabled")?.unwrap_or(false);
                Some(enabled)
            }
        };
        if confirm && card.is_none() {
            return Err(no_payment_method_to_confirm());
        }
        let text = IntentText {
            customer: text(p, "customer")?,
            description: text(p, "description")?,
            receipt_email: text(p, "receipt_email")?,
            statement_descriptor: text(p, "statement_descriptor")?,
            statement_descriptor_suffix: text(p, "statement_descriptor_suffix")?,
            transfer_group: text(p, "transfer_group")?,
        };
        let mut pi = PaymentIntent {
            id: PaymentIntentId::generate(),
            amount,
            amount_capturable: 0,
            amount_received: 0,
            automatic_payment_methods,
            canceled_at: None,
            cancellation_reason: None,
            capture_method,
            created: now_unix(),
            currency,
            text: text.boxed(),
            last_payment_error: None,
            latest_charge: None,
            metadata,
            payment_method: method.map(|m| m.id()),
            status: if card.is_some() {
                IntentStatus::RequiresConfirmation
            } else {
                IntentStatus::RequiresPaymentMethod
            },
            card,
            correlation_id: self.correlation_id(p, attempt),
        };
        if !confirm {
            let pi = Arc::new(pi);
            self.intents.insert(pi.clone());
            return Ok(Reply::Intent(pi));
        }
        let Some(card) = card else {
            return Err(no_payment_method_to_confirm());
        };
        let mut entry = self.ledger.entry(pi.correlation_id.as_ref(), &pi.id.as_str());
        let result = self.confirm_locked(&mut pi, card, &mut entry, attempt);
        let pi = Arc::new(pi);
        self.intents.insert(pi.clone());
        drop(entry);
        match result {
            Ok(()) => Ok(Reply::Intent(pi)),
            Err(e) => Err(e.with_extra("payment_intent", pi.to_json())),
        }
    }

    pub fn confirm_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        let current = self.intents.get(&id).ok_or_else(unknown)?;
        let customer = current.customer().and_then(CustomerId::parse);
        let new_method = self.intent_payment_method(p, customer)?;
        if let (None, Some(saved)) = (new_method, current.payment_method) {
            self.check_intent_payment_method(saved, customer)?;
        }
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), &id.as_str());
        self.intents
            .update(&id, |slot| {
                let mut pi = (**slot).clone();
                match pi.status {
                    IntentStatus::RequiresPaymentMethod | IntentStatus::RequiresConfirmation => {}
                    IntentStatus::Succeeded => {
                        return Err(ApiError::unexpected_state(
                            "You cannot confirm this PaymentIntent because it has already succeeded after being previously confirmed.",
                        ))
                    }
                    other => {
                        return Err(ApiError::unexpected_state(format!(
                            "This PaymentIntent's status is {}, but it must be requires_payment_method or requires_confirmation to be confirmed.",
                            other.as_str()
                        )))
                    }
                }
                if let Some(method) = new_method {
                    pi.card = Some(method.card);
                    pi.payment_method = Some(method.id());
                }
                let Some(card) = pi.card else {
                    return Err(ApiError::unexpected_state(
                        "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
                    )
                    .with_param("payment_method"));
                };
                let result = self.confirm_locked(&mut pi, card, &mut entry, attempt);
                *slot = Arc::new(pi);
                result
                    .map(|()| Reply::Intent(slot.clone()))
                    .map_err(|e| e.with_extra("payment_intent", slot.to_json()))
            })
            .unwrap_or_else(|| Err(unknown()))
    }

    /// Charges `card`, the intent's; the caller holds the intent's ledger entry.
    fn confirm_locked(
        &self,
        pi: &mut PaymentIntent,
        card: &'static TestCard,
        entry: &mut LedgerEntry<'_>,
        attempt: &Attempt,
    ) -> Result<(), ApiError> {
        let automatic = pi.capture_method != CaptureMethod::Manual;
        if automatic && self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        let decline = attempt.decline.clone().or_else(|| card.decline.clone());
        let mut charge = Charge::new(NewCharge {
            amount: pi.amount,
            currency: pi.currency,
            card,
            decline: decline.clone(),
            capture: automatic,
            payment_intent: Some(pi.id),
            payment_method: pi.payment_method,
            description: pi.description().map(Box::from),
            metadata: &pi.metadata,
            correlation_id: pi.correlation_id.clone(),
        });
        charge.customer = pi.customer().and_then(CustomerId::parse);
        pi.latest_charge = Some(charge.id);
        if let Some(d) = decline {
            pi.status = IntentStatus::RequiresPaymentMethod;
            pi.last_payment_error = Some(Box::new(LastPaymentError::from_decline(&d, charge.id)));
            let err = card_error(&d).with_extra("charge", json!(charge.id));
            self.charges.insert(Arc::new(charge));
            return Err(err);
        }
        pi.last_payment_error = None;
        if automatic {
            pi.status = IntentStatus::Succeeded;
            pi.amount_received = pi.amount;
            entry.append(MovementKind::Charge, movement_for(&charge, attempt));
        } else {
            pi.status = IntentStatus::RequiresCapture;
            pi.amount_capturable = pi.amount;
        }
        self.charges.insert(Arc::new(charge));
        Ok(())
    }

    pub fn capture_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        let current = self.intents.get(&id).ok_or_else(unknown)?;
        let requested = p.opt_u64("amount_to_capture")?;
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), &id.as_str());
        self.intents
            .update(&id, |slot| {
                if slot.status != IntentStatus::RequiresCapture {
                    return Err(ApiError::unexpected_state(format!(
                        "This PaymentIntent could not be captured because it has a status of {}. Only a PaymentIntent with one of the following statuses may be captured: requires_capture.",
                        slot.status.as_str()
                    )));
                }
                let amount = requested.unwrap_or(slot.amount_capturable);
                if amount == 0 || amount > slot.amount_capturable {
                    return Err(ApiError::invalid_param(
                        "amount_to_capture",
                        format!("The amount to capture must be between 1 and the capturable amount ({}).", slot.amount_capturable),
                    ));
                }
                if self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
                    self.ledger.note_blocked_duplicate();
                    return Err(duplicate_decline());
                }
                let Some(charge_id) = slot.latest_charge else {
                    return Err(ApiError::unexpected_state(
                        "This PaymentIntent has no charge to capture.",
                    ));
                };
                let charge = self.capture_charge_locked(&charge_id, amount, &mut entry, attempt)?;
                let mut pi = (**slot).clone();
                pi.status = IntentStatus::Succeeded;
                pi.amount_capturable = 0;
                pi.amount_received = charge.amount_captured;
                *slot = Arc::new(pi);
                Ok(Reply::Intent(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown()))
    }

    pub fn cancel_intent(&self, raw_id: &str, p: &Params) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let reason = match p.opt_str("cancellation_reason")? {
            None => None,
            Some(r) => Some(CancellationReason::parse(r).ok_or_else(|| {
                ApiError::invalid_param(
                    "cancellation_reason",
                    format!("Invalid cancellation_reason: '{r}'; expected duplicate, fraudulent, requested_by_customer or abandoned."),
                )
            })?),
        };
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        self.intents
            .update(&id, |slot| {
                use IntentStatus::*;
                if !matches!(slot.status, RequiresPaymentMethod | RequiresConfirmation | RequiresAction | RequiresCapture) {
                    return Err(ApiError::unexpected_state(format!(
                        "You cannot cancel this PaymentIntent because it has a status of {}. Only a PaymentIntent with one of the following statuses may be canceled: requires_payment_method, requires_capture, requires_confirmation, requires_action, processing.",
                        slot.status.as_str()
                    )));
                }
                let mut pi = (**slot).clone();
                if pi.status == RequiresCapture {
                    // Release the authorisation: no money moved, so the ledger is untouched.
                    if let Some(ch) = &pi.latest_charge {
                        self.charges.update(ch, |c| {
                            let mut c2 = (**c).clone();
                            c2.refunded = true;
                            c2.amount_refunded = c2.amount;
                            *c = Arc::new(c2);
                        });
                    }
                }
                pi.status = Canceled;
                pi.amount_capturable = 0;
                pi.canceled_at = Some(now_unix());
                pi.cancellation_reason = reason;
                *slot = Arc::new(pi);
                Ok(Reply::Intent(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown()))
    }

    pub fn retrieve_intent(&self, id: &str) -> Result<Reply, ApiError> {
        PaymentIntentId::parse(id)
            .and_then(|i| self.intents.get(&i))
            .map(Reply::Intent)
            .ok_or_else(|| ApiError::unknown_object("payment_intent", id, "intent"))
    }

    pub fn list_intents(&self, p: &Params) -> Result<Reply, ApiError> {
        let customer = p.opt_str("customer")?;
        list_page(
            &self.intents,
            p,
            "/v1/payment_intents",
            PaymentIntentId::parse,
            |pi| customer.is_none_or(|c| pi.customer() == Some(c)),
            |pi| pi.to_json(),
        )
    }

    pub fn search_intents(&self, p: &Params) -> Result<Reply, ApiError> {
        search_page(&self.intents, p, "/v1/payment_intents/search", |pi| pi.to_json())
    }
}

impl Searchable for PaymentIntent {
    fn field(&self, name: &str) -> Option<String> {
        match name {
            "status" => Some(self.status.as_str().into()),
            "currency" => Some(self.currency.code().into()),
            "amount" => Some(self.amount.to_string()),
            "created" => Some(self.created.to_string()),
            "customer" => self.customer().map(str::to_string),
            "description" => self.description().map(str::to_string),
            _ => None,
        }
    }
    fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key)
    }
}
