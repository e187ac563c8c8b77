//! Payment intents: create, update, confirm (with 3-D Secure and off-session payments),
//! authenticate, capture, cancel, retrieve, list and search, and the state machine
//! between them (`requires_payment_method` → `requires_confirmation` →
//! [`requires_action` →] `requires_capture` / `succeeded`, or `canceled`).
//!
//! Money moves only when a card is charged ([`Payments::charge_locked`]): on a confirm
//! that needs no authentication, or on the authenticate request that completes one, in
//! both cases under the intent's ledger entry, with the duplicate policy and a fault's
//! forced decline applied the same way.

use std::sync::Arc;

use serde_json::json;

use super::object::{CancellationReason, CaptureMethod, IntentStatus, IntentText, LastPaymentError, PaymentIntent};
use crate::error::ApiError;
use crate::fault_injection::attempt::{Attempt, KeyKind};
use crate::reply::Reply;
use crate::resources::charges::object::{Charge, NewCharge};
use crate::resources::events::object::{EventType, View};
use crate::resources::setup_intents::object::Usage;
use crate::resources::three_ds::action::{payment_gate, Authenticate, Gate, NextAction, Outcome};
use crate::state::clock::{now_unix, UnixSeconds};
use crate::state::ledger::LedgerEntry;
use crate::state::payments::{DuplicatePolicy, Payments};
use crate::state::shard;
use crate::stripe::cards::{Authentication, CardRef, Decline, TestCard, AUTHENTICATION_REQUIRED};
use crate::stripe::fields::{
    card_error, duplicate_decline, metadata, metadata_update, movement_for, text, text_update, MAX_TEXT_LEN,
};
use crate::stripe::ids::{CustomerId, PaymentIntentId};
use crate::stripe::money::{check_amount, Currency, StoredAmount};
use crate::stripe::paging::{list_page, search_page};
use crate::stripe::params::Params;
use crate::stripe::search::Searchable;

/// `confirm=true` on an intent without a payment method.
fn no_payment_method_to_confirm() -> ApiError {
    ApiError::invalid_request(
        "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
        Some("payment_method".into()),
    )
    .with_code("payment_intent_unexpected_state")
}

fn capture_method(p: &Params) -> Result<Option<CaptureMethod>, ApiError> {
    Ok(match p.opt_str("capture_method")? {
        None => None,
        Some("automatic") => Some(CaptureMethod::Automatic),
        Some("automatic_async") => Some(CaptureMethod::AutomaticAsync),
        Some("manual") => Some(CaptureMethod::Manual),
        Some(other) => {
            return Err(ApiError::invalid_param(
                "capture_method",
                format!("Invalid capture_method: '{other}'; expected automatic, automatic_async or manual."),
            ))
        }
    })
}

/// `off_session`: `true`, or Stripe's `one_off` / `recurring` (both off-session).
fn off_session(p: &Params) -> Result<bool, ApiError> {
    match p.get("off_session").and_then(|v| v.as_text()) {
        None | Some("false") => Ok(false),
        Some("true" | "one_off" | "recurring") => Ok(true),
        Some(_) => Err(ApiError::invalid_param(
            "off_session",
            "Invalid off_session: must be true, false, one_off or recurring",
        )),
    }
}

/// `setup_future_usage`: `None` when not sent, `Some(None)` when sent empty (unset).
fn setup_future_usage(p: &Params) -> Result<Option<Option<Usage>>, ApiError> {
    if !p.contains("setup_future_usage") {
        return Ok(None);
    }
    match p.opt_str("setup_future_usage")? {
        None => Ok(Some(None)),
        Some(u) => Usage::parse(u).map(|u| Some(Some(u))).ok_or_else(|| {
            ApiError::invalid_param(
                "setup_future_usage",
                "Invalid setup_future_usage: must be one of off_session or on_session",
            )
        }),
    }
}

/// An update of a field Stripe lets change only before the payment is made.
fn cannot_update(field: &str, status: IntentStatus) -> ApiError {
    ApiError::unexpected_state(format!(
        "You cannot update this PaymentIntent's {field} because it has a status of {}. You may only update the {field} of a PaymentIntent with one of the following statuses: requires_payment_method, requires_confirmation, requires_action.",
        status.as_str()
    ))
    .with_param(field)
}

/// What a confirmation was asked beyond its payment method.
#[derive(Debug, Clone, Copy, Default)]
struct Confirmation<'a> {
    /// The customer is not there to authenticate (`off_session`).
    off_session: bool,
    /// Where the authentication page sends the customer back (`return_url`).
    return_url: Option<&'a str>,
}

impl Confirmation<'_> {
    fn of(p: &Params) -> Result<Confirmation<'_>, ApiError> {
        Ok(Confirmation {
            off_session: off_session(p)?,
            return_url: crate::stripe::fields::return_url(p)?,
        })
    }
}

/// Parameters an update may change only while the intent waits for its payment.
const BEFORE_PAYMENT: &[&str] = &[
    "amount",
    "capture_method",
    "currency",
    "customer",
    "payment_method",
    "payment_method_data",
    "setup_future_usage",
    "statement_descriptor",
    "statement_descriptor_suffix",
    "transfer_group",
];

impl Payments {
    pub fn create_intent(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let currency = Currency::parse(p.req_str("currency")?)?;
        let amount = check_amount(
            "amount",
            p.opt_u64("amount")?.ok_or_else(|| ApiError::missing_param("amount"))?,
            currency,
        )?;
        let capture_method = capture_method(p)?.unwrap_or(CaptureMethod::Automatic);
        // The customer must exist; a saved payment method must be usable by it.
        let customer = self.customer_param(p, "customer")?;
        let method = self.intent_payment_method(p, customer)?;
        let card = method.map(|m| m.card);
        let confirm = p.opt_bool("confirm")?.unwrap_or(false);
        let how = Confirmation::of(p)?;
        if how.off_session && !confirm {
            return Err(ApiError::invalid_param(
                "off_session",
                "off_session can only be used with confirm=true.",
            ));
        }
        let setup_future_usage = setup_future_usage(p)?.flatten();
        let mut metadata = metadata(p)?;
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
            checkout_session: attempt.checkout_session,
            ..IntentText::default()
        };
        let manual_confirmation = match p.opt_str("confirmation_method")? {
            None | Some("automatic") => false,
            Some("manual") => true,
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "confirmation_method",
                    format!("Invalid confirmation_method: '{other}'; expected automatic or manual."),
                ))
            }
        };
        let correlation_id = self.correlation_id(p, attempt);
        metadata.share(correlation_id.as_ref());
        let mut pi = PaymentIntent {
            manual_confirmation,
            id: PaymentIntentId::generate_in(shard::weighted_group),
            amount,
            amount_received: StoredAmount::default(),
            automatic_payment_methods,
            cancellation_reason: None,
            capture_method,
            created: UnixSeconds::now(),
            currency,
            text: text.boxed(),
            latest_charge: None,
            metadata,
            payment_method: method.map(|m| m.id()),
            setup_future_usage,
            status: if card.is_some() {
                IntentStatus::RequiresConfirmation
            } else {
                IntentStatus::RequiresPaymentMethod
            },
            card: card.and_then(CardRef::of),
            correlation_id,
        };
        if !confirm {
            let pi = Arc::new(pi);
            self.intents.insert(pi.clone());
            self.events.emit(
                EventType::PaymentIntentCreated,
                Reply::Intent(pi.clone()),
                None,
                attempt,
            );
            return Ok(Reply::Intent(pi));
        }
        let Some(card) = card else {
            return Err(no_payment_method_to_confirm());
        };
        let mut entry = self.ledger.entry(pi.correlation_id.as_ref(), &pi.id.as_str());
        // `payment_intent.created` shows the intent as created, before its confirmation:
        // the confirmed intent is its snapshot, written as created (no copy is kept).
        // Its id is drawn here, before the confirmation's, and it is stored first, with
        // the confirmation's events after it (the three share one allocation).
        let created = self.events.open(EventType::PaymentIntentCreated, attempt);
        #[cfg(debug_assertions)]
        let as_created = pi.to_json();
        let result = self.confirm_locked(&mut pi, card, &mut entry, attempt, how);
        #[cfg(debug_assertions)]
        debug_assert_eq!(pi.as_created().to_json(), as_created, "PaymentIntent::as_created");
        let pi = Arc::new(pi);
        self.intents.insert(pi.clone());
        self.emit_intent_outcome(&pi, result.is_err(), attempt);
        created.close(Reply::Intent(pi.clone()), View::IntentAsCreated);
        drop(entry);
        match result {
            Ok(()) => Ok(Reply::Intent(pi)),
            Err(e) => Err(e.with_extra("payment_intent", pi.to_json())),
        }
    }

    /// Runs `f` on intent `id` holding its ledger entry (taken first, as for every money
    /// movement) and the intent's own lock. An update may have changed the intent's
    /// correlation id between reading it and taking its entry: then the entry is taken
    /// again. `None` when the intent does not exist.
    fn with_intent_locked<R>(
        &self,
        id: &PaymentIntentId,
        mut f: impl FnMut(&mut Arc<PaymentIntent>, &mut LedgerEntry<'_>) -> Result<R, ApiError>,
    ) -> Option<Result<R, ApiError>> {
        loop {
            let current = self.intents.get(id)?;
            let mut entry = self.ledger.entry(current.correlation_id.as_ref(), &id.as_str());
            let done = self.intents.update(id, |slot| {
                (slot.correlation_id == current.correlation_id).then(|| f(slot, &mut entry))
            })?;
            if let Some(result) = done {
                return Some(result);
            }
        }
    }

    pub fn update_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        use IntentStatus::*;
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        let current = self.intents.get(&id).ok_or_else(unknown)?;
        // Every parameter is read and checked first: a refused update changes nothing.
        let amount = p.opt_u64("amount")?;
        let currency = p.opt_str("currency")?.map(Currency::parse).transpose()?;
        let capture_method = capture_method(p)?;
        let customer = match p.contains("customer") {
            true => Some(self.customer_param(p, "customer")?),
            false => None,
        };
        let owner = customer.unwrap_or_else(|| current.customer().and_then(CustomerId::parse));
        let method = match p.contains("payment_method") || p.contains("payment_method_data") {
            true => Some(self.intent_payment_method(p, owner)?),
            false => None,
        };
        if let (Some(_), None, Some(saved)) = (customer, method, current.payment_method) {
            // A new customer must be able to pay with the saved method.
            self.check_intent_payment_method(saved, owner)?;
        }
        let setup_future_usage = setup_future_usage(p)?;
        let texts = [
            text_update(p, "description", MAX_TEXT_LEN)?,
            text_update(p, "receipt_email", MAX_TEXT_LEN)?,
            text_update(p, "statement_descriptor", MAX_TEXT_LEN)?,
            text_update(p, "statement_descriptor_suffix", MAX_TEXT_LEN)?,
            text_update(p, "transfer_group", MAX_TEXT_LEN)?,
        ];
        let correlation_id = self.correlation_id(p, attempt);
        let restricted = BEFORE_PAYMENT.iter().find(|f| p.contains(f));
        self.with_intent_locked(&id, |slot, _entry| {
            let open = matches!(
                slot.status,
                RequiresPaymentMethod | RequiresConfirmation | RequiresAction
            );
            if let (false, Some(field)) = (open, restricted) {
                return Err(cannot_update(field, slot.status));
            }
            let mut pi = (**slot).clone();
            if amount.is_some() || currency.is_some() {
                let currency = currency.unwrap_or(pi.currency);
                pi.amount = check_amount("amount", amount.unwrap_or(pi.amount), currency)?;
                pi.currency = currency;
            }
            pi.metadata = metadata_update(&pi.metadata, p)?;
            if let Some(m) = capture_method {
                pi.capture_method = m;
            }
            if let Some(u) = setup_future_usage {
                pi.setup_future_usage = u;
            }
            let mut t = pi.text.as_deref().cloned().unwrap_or_default();
            if let Some(c) = customer {
                t.customer = c.map(|c| c.to_string().into());
            }
            let [description, receipt_email, descriptor, suffix, group] = texts.clone();
            for (field, update) in [
                (&mut t.description, description),
                (&mut t.receipt_email, receipt_email),
                (&mut t.statement_descriptor, descriptor),
                (&mut t.statement_descriptor_suffix, suffix),
                (&mut t.transfer_group, group),
            ] {
                if let Some(v) = update {
                    *field = v;
                }
            }
            pi.text = t.boxed();
            if let Some(m) = method {
                pi.set_card(m.map(|m| m.card));
                pi.payment_method = m.map(|m| m.id());
            }
            // A new amount, currency or payment method voids a pending authentication.
            if method.is_some() || (pi.status == RequiresAction && (amount.is_some() || currency.is_some())) {
                pi.set_next_action(None);
                pi.status = if pi.card().is_some() {
                    RequiresConfirmation
                } else {
                    RequiresPaymentMethod
                };
            }
            // Money moves under the correlation id the intent has when it is charged.
            if let (true, Some(c)) = (open, &correlation_id) {
                pi.correlation_id = Some(c.clone());
            }
            pi.metadata.share(pi.correlation_id.as_ref());
            *slot = Arc::new(pi);
            Ok(Reply::Intent(slot.clone()))
        })
        .unwrap_or_else(|| Err(unknown()))
    }

    /// `POST /v1/payment_intents/{id}/confirm`; a payment that goes through completes the
    /// Checkout Session the intent was made for (confirmed in the browser).
    pub fn confirm_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let result = self.confirm_intent_only(raw_id, p, attempt);
        self.after_payment(&result, attempt);
        result
    }

    /// Completes the Checkout Session of an intent whose payment just went through.
    fn after_payment(&self, result: &Result<Reply, ApiError>, attempt: &Attempt) {
        if let Ok(Reply::Intent(pi)) = result {
            let paid = matches!(pi.status, IntentStatus::Succeeded | IntentStatus::RequiresCapture);
            self.complete_session_of(pi.checkout_session(), paid, attempt);
        }
    }

    /// The confirmation alone (a Checkout Session's pay, which holds the session).
    pub(crate) fn confirm_intent_only(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        let current = self.intents.get(&id).ok_or_else(unknown)?;
        if current.manual_confirmation && attempt.key == KeyKind::Publishable {
            return Err(ApiError::invalid_request(
                "This PaymentIntent's confirmation_method is manual: it can only be confirmed with a secret key, from your server.",
                None,
            ));
        }
        let customer = current.customer().and_then(CustomerId::parse);
        let new_method = self.intent_payment_method(p, customer)?;
        if let (None, Some(saved)) = (new_method, current.payment_method) {
            self.check_intent_payment_method(saved, customer)?;
        }
        let how = Confirmation::of(p)?;
        let capture_method = capture_method(p)?;
        let setup_future_usage = setup_future_usage(p)?;
        self.with_intent_locked(&id, |slot, entry| {
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
                pi.set_card(Some(method.card));
                pi.payment_method = Some(method.id());
            }
            if let Some(m) = capture_method {
                pi.capture_method = m;
            }
            if let Some(u) = setup_future_usage {
                pi.setup_future_usage = u;
            }
            let Some(card) = pi.card() else {
                return Err(ApiError::unexpected_state(
                    "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
                )
                .with_param("payment_method"));
            };
            let result = self.confirm_locked(&mut pi, card, entry, attempt, how);
            *slot = Arc::new(pi);
            self.emit_intent_outcome(slot, result.is_err(), attempt);
            result
                .map(|()| Reply::Intent(slot.clone()))
                .map_err(|e| e.with_extra("payment_intent", slot.to_json()))
        })
        .unwrap_or_else(|| Err(unknown()))
    }

    /// Confirms `pi` with `card`: charges it, or asks the customer to authenticate
    /// first (`requires_action`), or (off-session, on a card that wants authentication)
    /// declines it with `authentication_required`. The caller holds the intent's ledger
    /// entry.
    fn confirm_locked(
        &self,
        pi: &mut PaymentIntent,
        card: &'static TestCard,
        entry: &mut LedgerEntry<'_>,
        attempt: &Attempt,
        how: Confirmation<'_>,
    ) -> Result<(), ApiError> {
        // Looked up only for the one card it matters to: most confirmations skip it.
        let set_up = card.authentication == Authentication::UnlessSetUp
            && pi
                .payment_method
                .and_then(|id| self.payment_methods.get(&id))
                .is_some_and(|pm| pm.off_session);
        match payment_gate(card, set_up, how.off_session) {
            Gate::Proceed => self.charge_locked(pi, card, None, entry, attempt),
            Gate::Refuse => self.charge_locked(pi, card, Some(AUTHENTICATION_REQUIRED), entry, attempt),
            Gate::Challenge => {
                pi.status = IntentStatus::RequiresAction;
                pi.set_last_payment_error(None);
                let action = NextAction::new(attempt.origin.as_deref(), &pi.id.as_str(), how.return_url);
                pi.set_next_action(Some(action));
                Ok(())
            }
        }
    }

    /// Charges `card`, the intent's (declined with `refusal` when given, else as the
    /// fault or the card decides), and on success saves the payment method when the
    /// intent asks for `setup_future_usage`. The caller holds the intent's ledger entry.
    fn charge_locked(
        &self,
        pi: &mut PaymentIntent,
        card: &'static TestCard,
        refusal: Option<Decline>,
        entry: &mut LedgerEntry<'_>,
        attempt: &Attempt,
    ) -> Result<(), ApiError> {
        pi.set_next_action(None);
        let automatic = pi.capture_method != CaptureMethod::Manual;
        if automatic && self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        let decline = refusal
            .or_else(|| attempt.decline.clone())
            .or_else(|| card.decline.clone());
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
        charge.set_customer(pi.customer().and_then(CustomerId::parse));
        pi.latest_charge = Some(charge.id);
        if let Some(d) = decline {
            pi.status = IntentStatus::RequiresPaymentMethod;
            pi.set_last_payment_error(Some(LastPaymentError::from_decline(&d, charge.id)));
            let err = card_error(&d).with_extra("charge", json!(charge.id));
            let charge = Arc::new(charge);
            self.charges.insert(charge.clone());
            self.events
                .emit(EventType::ChargeFailed, Reply::Charge(charge), None, attempt);
            return Err(err);
        }
        pi.set_last_payment_error(None);
        let charge = Arc::new(charge);
        if automatic {
            pi.status = IntentStatus::Succeeded;
            pi.amount_received = StoredAmount::new(pi.amount);
            entry.append(movement_for(&charge, pi.checkout_session(), attempt));
        } else {
            pi.status = IntentStatus::RequiresCapture;
            pi.set_amount_capturable(pi.amount);
        }
        self.charges.insert(charge.clone());
        self.events
            .emit(EventType::ChargeSucceeded, Reply::Charge(charge), None, attempt);
        if let (Some(usage), Some(id)) = (pi.setup_future_usage, pi.payment_method) {
            // The payment is made: saving the method cannot fail it. What could refuse
            // the save (another customer's method, a detached one) was refused before.
            let customer = pi.customer().and_then(CustomerId::parse);
            let _ = self.save_payment_method(id, card, customer, usage, attempt);
        }
        Ok(())
    }

    /// `POST /__fauxpay/payment_intents/{id}/authenticate`: the customer completed
    /// (`outcome=succeed`: the card is charged, as a confirmation without 3-D Secure
    /// would have) or failed (`outcome=fail`: back to `requires_payment_method` with
    /// `payment_intent_authentication_failure`) the authentication the intent waits for.
    pub fn authenticate_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let result = self.authenticate_intent_only(raw_id, p, attempt);
        self.after_payment(&result, attempt);
        result
    }

    fn authenticate_intent_only(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let outcome = Authenticate::parse(p)?.outcome;
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        self.with_intent_locked(&id, |slot, entry| {
            let (IntentStatus::RequiresAction, Some(card)) = (slot.status, slot.card()) else {
                return Err(ApiError::unexpected_state(format!(
                    "This PaymentIntent is not awaiting authentication: its status is {}.",
                    slot.status.as_str()
                )));
            };
            let mut pi = (**slot).clone();
            let result = match outcome {
                Outcome::Succeed => self.charge_locked(&mut pi, card, None, entry, attempt),
                Outcome::Fail => {
                    pi.set_next_action(None);
                    pi.status = IntentStatus::RequiresPaymentMethod;
                    pi.set_last_payment_error(Some(LastPaymentError::authentication_failure()));
                    Ok(())
                }
            };
            *slot = Arc::new(pi);
            let failed = result.is_err() || outcome == Outcome::Fail;
            self.emit_intent_outcome(slot, failed, attempt);
            result
                .map(|()| Reply::Intent(slot.clone()))
                .map_err(|e| e.with_extra("payment_intent", slot.to_json()))
        })
        .unwrap_or_else(|| Err(unknown()))
    }

    pub fn capture_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let unknown = || ApiError::unknown_object("payment_intent", raw_id, "intent");
        let id = PaymentIntentId::parse(raw_id).ok_or_else(unknown)?;
        let requested = p.opt_u64("amount_to_capture")?;
        self.with_intent_locked(&id, |slot, entry| {
            if slot.status != IntentStatus::RequiresCapture {
                return Err(ApiError::unexpected_state(format!(
                    "This PaymentIntent could not be captured because it has a status of {}. Only a PaymentIntent with one of the following statuses may be captured: requires_capture.",
                    slot.status.as_str()
                )));
            }
            let amount = requested.unwrap_or(slot.amount_capturable());
            if amount == 0 || amount > slot.amount_capturable() {
                return Err(ApiError::invalid_param(
                    "amount_to_capture",
                    format!(
                        "The amount to capture must be between 1 and the capturable amount ({}).",
                        slot.amount_capturable()
                    ),
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
            let charge = self.capture_charge_locked(&charge_id, amount, slot.checkout_session(), entry, attempt)?;
            let mut pi = (**slot).clone();
            pi.status = IntentStatus::Succeeded;
            pi.set_amount_capturable(0);
            pi.amount_received = charge.amount_captured;
            *slot = Arc::new(pi);
            self.emit_intent_outcome(slot, false, attempt);
            Ok(Reply::Intent(slot.clone()))
        })
        .unwrap_or_else(|| Err(unknown()))
    }

    pub fn cancel_intent(&self, raw_id: &str, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
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
                            let before = c.clone();
                            let mut c2 = (**c).clone();
                            c2.set_amount_refunded(c2.amount);
                            c2.refunded = true;
                            *c = Arc::new(c2);
                            self.events.emit(
                                EventType::ChargeRefunded,
                                Reply::Charge(c.clone()),
                                Some(Reply::Charge(before)),
                                attempt,
                            );
                        });
                    }
                }
                pi.status = Canceled;
                pi.set_amount_capturable(0);
                pi.set_next_action(None);
                pi.set_canceled_at(now_unix());
                pi.cancellation_reason = reason;
                *slot = Arc::new(pi);
                self.events
                    .emit(EventType::PaymentIntentCanceled, Reply::Intent(slot.clone()), None, attempt);
                Ok(Reply::Intent(slot.clone()))
            })
            .unwrap_or_else(|| Err(unknown()))
    }

    /// The event a confirmation, authentication or capture of `pi` ends with: its new
    /// status (`succeeded`, `requires_action`, `amount_capturable_updated` for an
    /// authorisation) or `payment_failed` when the attempt failed.
    fn emit_intent_outcome(&self, pi: &Arc<PaymentIntent>, failed: bool, attempt: &Attempt) {
        let kind = match (failed, pi.status) {
            (true, _) => EventType::PaymentIntentPaymentFailed,
            (false, IntentStatus::Succeeded) => EventType::PaymentIntentSucceeded,
            (false, IntentStatus::RequiresCapture) => EventType::PaymentIntentAmountCapturableUpdated,
            (false, IntentStatus::RequiresAction) => EventType::PaymentIntentRequiresAction,
            (false, _) => return,
        };
        self.events.emit(kind, Reply::Intent(pi.clone()), None, attempt);
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
            "created" => Some(self.created.get().to_string()),
            "customer" => self.customer().map(str::to_string),
            "description" => self.description().map(str::to_string),
            _ => None,
        }
    }
    fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key)
    }
}

#[cfg(test)]
mod tests;
