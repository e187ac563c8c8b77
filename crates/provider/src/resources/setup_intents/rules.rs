//! Setup intents: create, update, confirm, authenticate, cancel, retrieve and list, and the
//! state machine between them (`requires_payment_method` → `requires_confirmation` →
//! [`requires_action` →] `succeeded`, or `canceled`); and saving a payment method for
//! future use, which a succeeded setup intent and a payment intent with
//! `setup_future_usage` share.
//!
//! Confirming checks the card as Stripe's test mode does when a card is set up: a
//! decline card is declined (402, `last_setup_error`), a card that asks for 3-D Secure
//! waits in `requires_action`, anything else succeeds. Success saves the payment method
//! (a magic `pm_card_…` was saved as a new `pm_…` when named), attaches it to the
//! intent's customer, and with `usage=off_session` (Stripe's default) marks it set up
//! for off-session use. No money moves, so the ledger is not involved.

use std::sync::Arc;

use super::object::{LastSetupError, SetupCancellationReason, SetupIntent, SetupStatus, Usage};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::resources::payment_methods::object::{Attachment, PaymentMethod};
use crate::resources::payment_methods::rules::{Chosen, Named};
use crate::resources::three_ds::action::{setup_challenges, Authenticate, NextAction, Outcome};
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::stripe::cards::TestCard;
use crate::stripe::fields::{card_error, metadata, metadata_update, text_at_most, text_update};
use crate::stripe::ids::{CustomerId, PaymentMethodId, SetupIntentId};
use crate::stripe::paging::{list_page, TimeRange};
use crate::stripe::params::{Kind, Params};

/// Stripe's `maxLength` for a setup intent's description.
const MAX_DESCRIPTION: usize = 1_000;

fn unknown_path(raw: &str) -> ApiError {
    ApiError::unknown_object("setup_intent", raw, "intent")
}

/// A state error of a setup intent (stored and replayed, as Stripe's).
fn unexpected_state(message: impl Into<String>) -> ApiError {
    ApiError::invalid_request(message, None)
        .with_code("setup_intent_unexpected_state")
        .executed()
}

/// Confirming without a payment method (a validation error: stored only once the
/// intent exists, [`ApiError::executed`]).
fn no_payment_method_to_confirm() -> ApiError {
    ApiError::invalid_request(
        "You cannot confirm this SetupIntent because it's missing a payment method. Update the SetupIntent with a payment method and then confirm it again.",
        Some("payment_method".into()),
    )
    .with_code("setup_intent_unexpected_state")
}

/// `payment_method_types`, as sent (`None`: not sent, Stripe's `["card"]`). fauxpay
/// sets up cards only, so the list must name `card`.
fn payment_method_types(p: &Params) -> Result<Option<Box<[Box<str>]>>, ApiError> {
    let Some(param) = p.get("payment_method_types") else {
        return Ok(None);
    };
    let types: Vec<Box<str>> = match param.kind() {
        Kind::List(list) => list.iter().filter_map(|t| t.as_text().map(Box::from)).collect(),
        Kind::Object(indexed) => indexed.iter().filter_map(|(_, t)| t.as_text().map(Box::from)).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() {
        return Ok(None);
    }
    if !types.iter().any(|t| &**t == "card") {
        return Err(ApiError::invalid_param(
            "payment_method_types",
            "fauxpay sets up card payment methods only: payment_method_types must include card.",
        ));
    }
    Ok(Some(types.into()))
}

impl Payments {
    /// The card payment method a setup intent's `payment_method` names, usable by
    /// `customer` (a saved one must be unattached or that customer's).
    fn setup_payment_method(&self, p: &Params, customer: Option<CustomerId>) -> Result<Option<Chosen>, ApiError> {
        if p.contains("payment_method_data") && !p.contains("payment_method") {
            return Err(ApiError::invalid_param(
                "payment_method_data",
                "fauxpay sets up card payment methods only: pass one as payment_method (pm_card_visa, or a saved pm_…).",
            ));
        }
        match p.contains("payment_method") {
            true => self.intent_payment_method(p, customer),
            false => Ok(None),
        }
    }

    /// The saved payment method `chosen` stands for: a magic test card is saved (as
    /// Stripe does when one is used), unattached.
    fn saved_method(&self, chosen: Chosen) -> PaymentMethodId {
        if let Some(id) = chosen.saved {
            return id;
        }
        let pm = Arc::new(PaymentMethod::new(chosen.card));
        self.payment_methods.insert(pm.clone());
        pm.id
    }

    /// Saves the payment method `id` for future use after a successful setup or payment:
    /// attached to `customer` (if any), and set up for off-session use when `usage` is
    /// off-session. A method fauxpay has not saved yet (a magic test card a payment
    /// intent charged under a fresh id) is saved under that id.
    pub fn save_payment_method(
        &self,
        id: PaymentMethodId,
        card: &'static TestCard,
        customer: Option<CustomerId>,
        usage: Usage,
        attempt: &Attempt,
    ) -> Result<Arc<PaymentMethod>, ApiError> {
        let pm = match (self.payment_methods.get(&id), customer) {
            (Some(pm), Some(c)) => self.attach(Named::Saved(pm), c, attempt)?,
            (Some(pm), None) => pm,
            (None, _) => {
                let pm = Arc::new(PaymentMethod {
                    id,
                    attachment: customer.map_or(Attachment::Unattached, Attachment::Customer),
                    ..PaymentMethod::new(card)
                });
                self.payment_methods.insert(pm.clone());
                if customer.is_some() {
                    self.events.emit(
                        EventType::PaymentMethodAttached,
                        Reply::PaymentMethod(pm.clone()),
                        None,
                        attempt,
                    );
                }
                pm
            }
        };
        if usage != Usage::OffSession || pm.off_session {
            return Ok(pm);
        }
        Ok(self
            .payment_methods
            .update(&id, |slot| {
                let mut saved = (**slot).clone();
                saved.off_session = true;
                *slot = Arc::new(saved);
                slot.clone()
            })
            .unwrap_or(pm))
    }

    pub fn create_setup_intent(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let customer = self.customer_param(p, "customer")?;
        let method = self.setup_payment_method(p, customer)?;
        let confirm = p.opt_bool("confirm")?.unwrap_or(false);
        let usage = match p.opt_str("usage")? {
            None => Usage::OffSession,
            Some(u) => Usage::parse(u).ok_or_else(|| {
                ApiError::invalid_param("usage", "Invalid usage: must be one of off_session or on_session")
            })?,
        };
        let metadata = metadata(p)?;
        let description = text_at_most(p, "description", MAX_DESCRIPTION)?;
        let payment_method_types = payment_method_types(p)?;
        let return_url = crate::stripe::fields::return_url(p)?;
        if confirm && method.is_none() {
            return Err(no_payment_method_to_confirm());
        }
        let payment_method = method.map(|m| self.saved_method(m));
        let mut si = SetupIntent {
            id: SetupIntentId::generate(),
            created: now_unix(),
            status: match payment_method {
                Some(_) => SetupStatus::RequiresConfirmation,
                None => SetupStatus::RequiresPaymentMethod,
            },
            usage,
            customer,
            payment_method,
            description,
            metadata,
            cancellation_reason: None,
            last_setup_error: None,
            next_action: None,
            payment_method_types,
        };
        let result = match confirm {
            true => {
                // `setup_intent.created` shows the intent as created, before its confirmation.
                let created = Arc::new(si.clone());
                self.events.emit(
                    EventType::SetupIntentCreated,
                    Reply::SetupIntent(created),
                    None,
                    attempt,
                );
                self.confirm_setup_locked(&mut si, attempt, return_url)
            }
            false => Ok(()),
        };
        let si = Arc::new(si);
        self.setup_intents.insert(si.clone());
        match confirm {
            true => self.emit_setup_outcome(&si, result.is_err(), attempt),
            false => {
                self.events.emit(
                    EventType::SetupIntentCreated,
                    Reply::SetupIntent(si.clone()),
                    None,
                    attempt,
                );
            }
        }
        match result {
            Ok(()) => Ok(Reply::SetupIntent(si)),
            Err(e) => Err(e.with_extra("setup_intent", si.to_json())),
        }
    }

    /// `POST /v1/setup_intents/{id}`: `description` and `metadata` in any status;
    /// `customer`, `payment_method` and `payment_method_types` while the intent waits
    /// for its payment method (`requires_payment_method`, `requires_confirmation`,
    /// `requires_action`), else 400 `setup_intent_unexpected_state` naming the field. A
    /// new payment method voids a pending authentication: the intent then waits for its
    /// confirmation. No event, as Stripe has no `setup_intent.updated`.
    pub fn update_setup_intent(&self, raw: &str, p: &Params) -> Result<Reply, ApiError> {
        let id = SetupIntentId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        let current = self.setup_intents.get(&id).ok_or_else(|| unknown_path(raw))?;
        let customer = match p.contains("customer") {
            true => Some(self.customer_param(p, "customer")?),
            false => None,
        };
        let owner = customer.unwrap_or(current.customer);
        let method = self.setup_payment_method(p, owner)?;
        if let (Some(_), None, Some(saved)) = (customer, method, current.payment_method) {
            // A new customer must be able to use the method already on the intent.
            self.check_intent_payment_method(saved, owner)?;
        }
        let description = text_update(p, "description", MAX_DESCRIPTION)?;
        let types = payment_method_types(p)?;
        let restricted = ["customer", "payment_method", "payment_method_types"]
            .into_iter()
            .find(|f| p.contains(f));
        self.setup_intents
            .update(&id, |slot| {
                let open = matches!(
                    slot.status,
                    SetupStatus::RequiresPaymentMethod | SetupStatus::RequiresConfirmation | SetupStatus::RequiresAction
                );
                if let (false, Some(field)) = (open, restricted) {
                    return Err(unexpected_state(format!(
                        "You cannot update this SetupIntent's {field} because it has a status of {}. You may only update the {field} of a SetupIntent with one of the following statuses: requires_payment_method, requires_confirmation, requires_action.",
                        slot.status.as_str()
                    ))
                    .with_param(field));
                }
                let mut si = (**slot).clone();
                si.metadata = metadata_update(&si.metadata, p)?;
                if let Some(d) = description {
                    si.description = d;
                }
                if let Some(c) = customer {
                    si.customer = c;
                }
                if types.is_some() {
                    si.payment_method_types = types.clone();
                }
                if let Some(m) = method {
                    si.payment_method = Some(self.saved_method(m));
                    si.next_action = None;
                    si.status = SetupStatus::RequiresConfirmation;
                }
                *slot = Arc::new(si);
                Ok(Reply::SetupIntent(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    pub fn confirm_setup_intent(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let id = SetupIntentId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        let current = self.setup_intents.get(&id).ok_or_else(|| unknown_path(raw))?;
        let new_method = self.setup_payment_method(p, current.customer)?;
        if let (None, Some(saved)) = (new_method, current.payment_method) {
            self.check_intent_payment_method(saved, current.customer)?;
        }
        let return_url = crate::stripe::fields::return_url(p)?;
        self.setup_intents
            .update(&id, |slot| {
                match slot.status {
                    SetupStatus::RequiresPaymentMethod | SetupStatus::RequiresConfirmation => {}
                    SetupStatus::Succeeded => {
                        return Err(unexpected_state(
                            "You cannot confirm this SetupIntent because it has already succeeded after being previously confirmed.",
                        ))
                    }
                    other => {
                        return Err(unexpected_state(format!(
                            "This SetupIntent's status is {}, but it must be requires_payment_method or requires_confirmation to be confirmed.",
                            other.as_str()
                        )))
                    }
                }
                let mut si = (**slot).clone();
                if let Some(m) = new_method {
                    si.payment_method = Some(self.saved_method(m));
                }
                let result = self.confirm_setup_locked(&mut si, attempt, return_url);
                *slot = Arc::new(si);
                self.emit_setup_outcome(slot, result.is_err(), attempt);
                result
                    .map(|()| Reply::SetupIntent(slot.clone()))
                    .map_err(|e| e.with_extra("setup_intent", slot.to_json()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// Sets up `si`'s payment method: declined, waiting for authentication, or done.
    fn confirm_setup_locked(
        &self,
        si: &mut SetupIntent,
        attempt: &Attempt,
        return_url: Option<&str>,
    ) -> Result<(), ApiError> {
        let pm = si
            .payment_method
            .and_then(|id| self.payment_methods.get(&id))
            .ok_or_else(|| no_payment_method_to_confirm().executed())?;
        let card = pm.card;
        let decline = attempt
            .decline
            .clone()
            .or_else(|| card.decline.clone().filter(|_| card.declines_setup));
        if let Some(d) = decline {
            si.status = SetupStatus::RequiresPaymentMethod;
            si.next_action = None;
            si.last_setup_error = Some(Box::new(LastSetupError::from_decline(&d)));
            return Err(card_error(&d));
        }
        if setup_challenges(card) {
            si.status = SetupStatus::RequiresAction;
            si.last_setup_error = None;
            si.next_action = Some(Box::new(NextAction::new(
                attempt.origin.as_deref(),
                &si.id.as_str(),
                return_url,
            )));
            return Ok(());
        }
        self.succeed_setup(si, pm.id, card, attempt)
    }

    /// The setup is done: the payment method is saved for the intent's customer and usage.
    fn succeed_setup(
        &self,
        si: &mut SetupIntent,
        pm: PaymentMethodId,
        card: &'static TestCard,
        attempt: &Attempt,
    ) -> Result<(), ApiError> {
        self.save_payment_method(pm, card, si.customer, si.usage, attempt)
            .map_err(ApiError::executed)?;
        si.status = SetupStatus::Succeeded;
        si.next_action = None;
        si.last_setup_error = None;
        Ok(())
    }

    /// `POST /__fauxpay/setup_intents/{id}/authenticate`: the customer completed
    /// (`outcome=succeed`: the setup succeeds) or failed (`outcome=fail`: back to
    /// `requires_payment_method` with `setup_intent_authentication_failure`) the
    /// authentication the setup intent waits for.
    pub fn authenticate_setup_intent(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let result = self.authenticate_setup_only(raw, p, attempt);
        // A setup-mode Checkout Session completes once its card is set up.
        if let Ok(Reply::SetupIntent(si)) = &result {
            if si.status == SetupStatus::Succeeded {
                self.complete_session_of(self.session_of_setup_intent(si.id), true, attempt);
            }
        }
        result
    }

    fn authenticate_setup_only(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let outcome = Authenticate::parse(p)?.outcome;
        let id = SetupIntentId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        self.setup_intents
            .update(&id, |slot| {
                if slot.status != SetupStatus::RequiresAction {
                    return Err(unexpected_state(format!(
                        "This SetupIntent is not awaiting authentication: its status is {}.",
                        slot.status.as_str()
                    )));
                }
                let mut si = (**slot).clone();
                match outcome {
                    Outcome::Succeed => {
                        let pm = si
                            .payment_method
                            .and_then(|id| self.payment_methods.get(&id))
                            .ok_or_else(|| no_payment_method_to_confirm().executed())?;
                        self.succeed_setup(&mut si, pm.id, pm.card, attempt)?;
                    }
                    Outcome::Fail => {
                        si.status = SetupStatus::RequiresPaymentMethod;
                        si.next_action = None;
                        si.last_setup_error = Some(Box::new(LastSetupError::authentication_failure()));
                    }
                }
                *slot = Arc::new(si);
                self.emit_setup_outcome(slot, outcome == Outcome::Fail, attempt);
                Ok(Reply::SetupIntent(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    pub fn cancel_setup_intent(&self, raw: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let reason = match p.opt_str("cancellation_reason")? {
            None => None,
            Some(r) => Some(SetupCancellationReason::parse(r).ok_or_else(|| {
                ApiError::invalid_param(
                    "cancellation_reason",
                    "Invalid cancellation_reason: must be one of abandoned, duplicate or requested_by_customer",
                )
            })?),
        };
        let id = SetupIntentId::parse(raw).ok_or_else(|| unknown_path(raw))?;
        self.setup_intents
            .update(&id, |slot| {
                use SetupStatus::*;
                if !matches!(slot.status, RequiresPaymentMethod | RequiresConfirmation | RequiresAction) {
                    return Err(unexpected_state(format!(
                        "You cannot cancel this SetupIntent because it has a status of {}. Only a SetupIntent with one of the following statuses may be canceled: requires_payment_method, requires_confirmation, requires_action.",
                        slot.status.as_str()
                    )));
                }
                let mut si = (**slot).clone();
                si.status = Canceled;
                si.next_action = None;
                si.cancellation_reason = reason;
                *slot = Arc::new(si);
                self.events
                    .emit(EventType::SetupIntentCanceled, Reply::SetupIntent(slot.clone()), None, attempt);
                Ok(Reply::SetupIntent(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown_path(raw)))
    }

    /// The event a confirmation or authentication of `si` ends with.
    fn emit_setup_outcome(&self, si: &Arc<SetupIntent>, failed: bool, attempt: &Attempt) {
        let kind = match (failed, si.status) {
            (true, _) => EventType::SetupIntentSetupFailed,
            (false, SetupStatus::Succeeded) => EventType::SetupIntentSucceeded,
            (false, SetupStatus::RequiresAction) => EventType::SetupIntentRequiresAction,
            (false, _) => return,
        };
        self.events.emit(kind, Reply::SetupIntent(si.clone()), None, attempt);
    }

    pub fn retrieve_setup_intent(&self, raw: &str) -> Result<Reply, ApiError> {
        SetupIntentId::parse(raw)
            .and_then(|id| self.setup_intents.get(&id))
            .map(Reply::SetupIntent)
            .ok_or_else(|| unknown_path(raw))
    }

    /// `GET /v1/setup_intents`: filters `customer`, `payment_method`, `created`.
    pub fn list_setup_intents(&self, p: &Params) -> Result<Reply, ApiError> {
        let customer = p.opt_str("customer")?;
        let method = p.opt_str("payment_method")?;
        let created = TimeRange::of(p, "created")?;
        let named = |id: Option<String>, wanted: Option<&str>| wanted.is_none_or(|w| id.as_deref() == Some(w));
        list_page(
            &self.setup_intents,
            p,
            "/v1/setup_intents",
            SetupIntentId::parse,
            |si| {
                created.contains(si.created)
                    && named(si.customer.map(|c| c.to_string()), customer)
                    && named(si.payment_method.map(|m| m.to_string()), method)
            },
            |si| si.to_json(),
        )
    }
}

#[cfg(test)]
mod tests;
