//! The payment rules: what each Stripe endpoint does to payment intents, charges and
//! refunds, and which money movements it writes to the ledger.
//!
//! [`Payments`] is plain Rust, free of HTTP: each operation takes validated
//! [`Params`] and the [`Attempt`] it came from and returns the Stripe object as JSON or
//! an [`ApiError`]. Money moves only under the ledger entry of the payment's correlation
//! id, taken before the object's own lock (always in the order ledger → intent → charge
//! → refund), so a state check and the transition it guards are one atomic step and the
//! duplicate check cannot race the append.

use std::sync::Arc;

use serde_json::{json, Value};

use super::attempt::Attempt;
use super::cards::{Decline, TestCard};
use super::error::{ApiError, ErrorType};
use super::ids::{ChargeId, CorrelationId, PaymentIntentId, PaymentMethodId, RefundId};
use super::ledger::{Ledger, LedgerEntry, Movement, MovementId, MovementKind, OverRefund};
use super::money::{check_amount, Currency};
use super::objects::{
    now_unix, CaptureMethod, Charge, ChargeStatus, IntentStatus, LastPaymentError, Metadata, NewCharge, PaymentIntent,
    Refund,
};
use super::params::Params;
use super::search::{Query, Searchable};
use super::table::{Cursor, Table};

/// What to do with a new charge for a correlation id that already has a captured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DuplicatePolicy {
    /// Charge again and flag it, as a real provider would.
    Allow,
    /// Refuse with a 402 `duplicate_transaction` decline and count it as blocked.
    Reject,
}

/// Where a payment's correlation id comes from: a dotted path into its parameters,
/// such as `metadata.order_id` (the default) or `description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelationSource(Vec<String>);

impl CorrelationSource {
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<String> = s.split('.').map(str::to_string).collect();
        let valid = parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if !valid || parts.len() > 3 {
            return Err(format!(
                "invalid correlation path '{s}': expected a dotted parameter path such as metadata.order_id"
            ));
        }
        Ok(Self(parts))
    }

    pub fn of(&self, params: &Params) -> Option<CorrelationId> {
        params.lookup_text(&self.0).map(|s| CorrelationId::new(&s))
    }

    /// The metadata key this source reads, if it reads one (for search indexing).
    pub fn metadata_key(&self) -> Option<&str> {
        match self.0.as_slice() {
            [m, k] if m == "metadata" => Some(k),
            _ => None,
        }
    }
}

impl std::fmt::Display for CorrelationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// Stripe's metadata limits.
const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_LEN: usize = 40;
const MAX_METADATA_VALUE_LEN: usize = 500;
const MAX_TEXT_LEN: usize = 5_000;

/// All payment state and the rules that move it.
pub struct Payments {
    pub intents: Table<PaymentIntentId, Arc<PaymentIntent>>,
    pub charges: Table<ChargeId, Arc<Charge>>,
    pub refunds: Table<RefundId, Arc<Refund>>,
    pub ledger: Ledger,
    pub policy: DuplicatePolicy,
    pub correlate: CorrelationSource,
}

/// The shape of a list request: page size, cursor and filters.
pub struct ListRequest {
    pub limit: usize,
    pub cursor: Cursor,
}

impl Payments {
    pub fn new(policy: DuplicatePolicy, correlate: CorrelationSource) -> Self {
        Self {
            intents: Table::default(),
            charges: Table::default(),
            refunds: Table::default(),
            ledger: Ledger::default(),
            policy,
            correlate,
        }
    }

    pub fn reset(&self) {
        self.intents.clear();
        self.charges.clear();
        self.refunds.clear();
        self.ledger.clear();
    }

    // ---- payment intents ----

    pub fn create_intent(&self, p: &Params, attempt: &Attempt) -> Result<Value, ApiError> {
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
        let card = payment_method(p)?;
        let confirm = p.opt_bool("confirm")?.unwrap_or(false);
        let metadata = metadata(p)?;
        let automatic_payment_methods = match p.opt_object("automatic_payment_methods")? {
            None => None,
            Some(apm) => {
                let enabled = Params::from_json(&serde_json::to_vec(apm).unwrap_or_default())?
                    .opt_bool("enabled")?
                    .unwrap_or(false);
                Some(json!({"enabled": enabled}))
            }
        };
        if confirm && card.is_none() {
            return Err(ApiError::invalid_request(
                "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
                Some("payment_method".into()),
            )
            .with_code("payment_intent_unexpected_state"));
        }
        let id = PaymentIntentId::generate();
        let mut pi = PaymentIntent {
            client_secret: format!("{id}_secret_{}", &PaymentIntentId::generate().as_str()[3..]),
            id,
            object: "payment_intent",
            amount,
            amount_capturable: 0,
            amount_received: 0,
            application: None,
            application_fee_amount: None,
            automatic_payment_methods,
            canceled_at: None,
            cancellation_reason: None,
            capture_method,
            confirmation_method: "automatic",
            created: now_unix(),
            currency: currency.code(),
            customer: text(p, "customer")?,
            description: text(p, "description")?,
            last_payment_error: None,
            latest_charge: None,
            livemode: false,
            metadata,
            next_action: None,
            on_behalf_of: None,
            payment_method: card.map(|_| PaymentMethodId::generate()),
            payment_method_options: json!({"card": {"installments": null, "mandate_options": null, "network": null, "request_three_d_secure": "automatic"}}),
            payment_method_types: vec!["card"],
            processing: None,
            receipt_email: text(p, "receipt_email")?,
            review: None,
            setup_future_usage: None,
            shipping: None,
            statement_descriptor: text(p, "statement_descriptor")?,
            statement_descriptor_suffix: text(p, "statement_descriptor_suffix")?,
            status: if card.is_some() {
                IntentStatus::RequiresConfirmation
            } else {
                IntentStatus::RequiresPaymentMethod
            },
            transfer_data: None,
            transfer_group: text(p, "transfer_group")?,
            card,
            correlation_id: self.correlate.of(p),
        };
        if !confirm {
            let out = pi.to_json();
            self.intents.insert(pi.id.clone(), Arc::new(pi));
            return Ok(out);
        }
        let mut entry = self.ledger.entry(pi.correlation_id.as_ref(), pi.id.as_str());
        let result = self.confirm_locked(&mut pi, &mut entry, attempt);
        let out = pi.to_json();
        self.intents.insert(pi.id.clone(), Arc::new(pi));
        drop(entry);
        match result {
            Ok(()) => Ok(out),
            Err(e) => Err(e.with_extra("payment_intent", out)),
        }
    }

    pub fn confirm_intent(&self, id: &str, p: &Params, attempt: &Attempt) -> Result<Value, ApiError> {
        let id = PaymentIntentId::from_client(id);
        let current = self
            .intents
            .get(&id)
            .ok_or_else(|| ApiError::unknown_object("payment_intent", id.as_str(), "intent"))?;
        let new_card = payment_method(p)?;
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), id.as_str());
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
                if let Some(card) = new_card {
                    pi.card = Some(card);
                    pi.payment_method = Some(PaymentMethodId::generate());
                }
                if pi.card.is_none() {
                    return Err(ApiError::unexpected_state(
                        "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
                    )
                    .with_param("payment_method"));
                }
                let result = self.confirm_locked(&mut pi, &mut entry, attempt);
                let out = pi.to_json();
                *slot = Arc::new(pi);
                result.map(|()| out.clone()).map_err(|e| e.with_extra("payment_intent", out))
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("payment_intent", id.as_str(), "intent")))
    }

    /// Charges the intent's card; the caller holds the intent's ledger entry.
    fn confirm_locked(
        &self,
        pi: &mut PaymentIntent,
        entry: &mut LedgerEntry<'_>,
        attempt: &Attempt,
    ) -> Result<(), ApiError> {
        let card = pi.card.expect("checked by the caller");
        let automatic = pi.capture_method != CaptureMethod::Manual;
        if automatic && self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        let decline = attempt.decline.clone().or_else(|| card.decline.clone());
        let charge = Charge::new(NewCharge {
            amount: pi.amount,
            currency: pi.currency,
            card,
            decline: decline.clone(),
            capture: automatic,
            payment_intent: Some(pi.id.clone()),
            payment_method: pi.payment_method.clone(),
            description: pi.description.clone(),
            metadata: &pi.metadata,
            correlation_id: pi.correlation_id.clone(),
        });
        pi.latest_charge = Some(charge.id.clone());
        if let Some(d) = decline {
            pi.status = IntentStatus::RequiresPaymentMethod;
            pi.last_payment_error = Some(LastPaymentError::from_decline(&d, charge.id.clone()));
            let err = card_error(&d).with_extra("charge", json!(charge.id));
            self.charges.insert(charge.id.clone(), Arc::new(charge));
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
        self.charges.insert(charge.id.clone(), Arc::new(charge));
        Ok(())
    }

    pub fn capture_intent(&self, id: &str, p: &Params, attempt: &Attempt) -> Result<Value, ApiError> {
        let id = PaymentIntentId::from_client(id);
        let current = self
            .intents
            .get(&id)
            .ok_or_else(|| ApiError::unknown_object("payment_intent", id.as_str(), "intent"))?;
        let requested = p.opt_u64("amount_to_capture")?;
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), id.as_str());
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
                let charge_id = slot.latest_charge.clone().expect("requires_capture has a charge");
                let charge = self.capture_charge_locked(&charge_id, amount, &mut entry, attempt)?;
                let mut pi = (**slot).clone();
                pi.status = IntentStatus::Succeeded;
                pi.amount_capturable = 0;
                pi.amount_received = charge.amount_captured;
                let out = pi.to_json();
                *slot = Arc::new(pi);
                Ok(out)
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("payment_intent", id.as_str(), "intent")))
    }

    pub fn cancel_intent(&self, id: &str, p: &Params) -> Result<Value, ApiError> {
        let id = PaymentIntentId::from_client(id);
        let reason = match p.opt_str("cancellation_reason")? {
            None => None,
            Some(r @ ("duplicate" | "fraudulent" | "requested_by_customer" | "abandoned")) => Some(r.to_string()),
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "cancellation_reason",
                    format!("Invalid cancellation_reason: '{other}'; expected duplicate, fraudulent, requested_by_customer or abandoned."),
                ))
            }
        };
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
                let out = pi.to_json();
                *slot = Arc::new(pi);
                Ok(out)
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("payment_intent", id.as_str(), "intent")))
    }

    pub fn retrieve_intent(&self, id: &str) -> Result<Value, ApiError> {
        self.intents
            .get(&PaymentIntentId::from_client(id))
            .map(|pi| pi.to_json())
            .ok_or_else(|| ApiError::unknown_object("payment_intent", id, "intent"))
    }

    pub fn list_intents(&self, p: &Params) -> Result<Value, ApiError> {
        let req = self.list_request(p, |id| self.intents.seq_of(&PaymentIntentId::from_client(id)))?;
        let customer = p.opt_str("customer")?;
        let page = self.intents.page(req.cursor, req.limit, |pi| {
            customer.is_none_or(|c| pi.customer.as_deref() == Some(c))
        });
        Ok(list_json(
            "/v1/payment_intents",
            page.items.iter().map(|pi| pi.to_json()).collect(),
            page.has_more,
        ))
    }

    pub fn search_intents(&self, p: &Params) -> Result<Value, ApiError> {
        let (query, limit, cursor) = search_request(p)?;
        let page = self.intents.page(cursor, limit, |pi| query.matches(&**pi));
        Ok(search_json(
            "/v1/payment_intents/search",
            page.items.iter().map(|pi| pi.to_json()).collect(),
            page.has_more,
            page.last_seq,
        ))
    }

    // ---- charges ----

    pub fn create_charge(&self, p: &Params, attempt: &Attempt) -> Result<Value, ApiError> {
        let currency = Currency::parse(p.req_str("currency")?)?;
        let amount = check_amount(
            "amount",
            p.opt_u64("amount")?.ok_or_else(|| ApiError::missing_param("amount"))?,
            currency,
        )?;
        let card = source(p)?;
        let capture = p.opt_bool("capture")?.unwrap_or(true);
        let metadata = metadata(p)?;
        let correlation_id = self.correlate.of(p);
        let decline = attempt.decline.clone().or_else(|| card.decline.clone());
        let charge = Charge::new(NewCharge {
            amount,
            currency: currency.code(),
            card,
            decline: decline.clone(),
            capture,
            payment_intent: None,
            payment_method: Some(PaymentMethodId::generate()),
            description: text(p, "description")?,
            metadata: &metadata,
            correlation_id: correlation_id.clone(),
        });
        let mut entry = self.ledger.entry(correlation_id.as_ref(), charge.id.as_str());
        if let Some(d) = decline {
            let err = card_error(&d).with_extra("charge", json!(charge.id));
            self.charges.insert(charge.id.clone(), Arc::new(charge));
            return Err(err);
        }
        if capture && self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        if capture {
            entry.append(MovementKind::Charge, movement_for(&charge, attempt));
        }
        let out = charge.to_json();
        self.charges.insert(charge.id.clone(), Arc::new(charge));
        Ok(out)
    }

    pub fn capture_charge(&self, id: &str, p: &Params, attempt: &Attempt) -> Result<Value, ApiError> {
        let id = ChargeId::from_client(id);
        let current = self
            .charges
            .get(&id)
            .ok_or_else(|| ApiError::unknown_object("charge", id.as_str(), "charge"))?;
        if current.payment_intent.is_some() {
            return Err(ApiError::invalid_request(
                "This charge belongs to a PaymentIntent: capture the PaymentIntent instead.",
                None,
            ));
        }
        let amount = p.opt_u64("amount")?.unwrap_or(current.amount);
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), id.as_str());
        if self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        self.capture_charge_locked(&id, amount, &mut entry, attempt)
            .map(|c| c.to_json())
    }

    /// Captures an authorised charge; the caller holds its ledger entry.
    fn capture_charge_locked(
        &self,
        id: &ChargeId,
        amount: u64,
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
                c.amount_captured = amount;
                c.balance_transaction = Some(format!("txn_{}", &ChargeId::generate().as_str()[3..]));
                entry.append(MovementKind::Charge, movement_for(&c, attempt));
                *slot = Arc::new(c);
                Ok(slot.clone())
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("charge", id.as_str(), "charge")))
    }

    pub fn retrieve_charge(&self, id: &str) -> Result<Value, ApiError> {
        self.charges
            .get(&ChargeId::from_client(id))
            .map(|c| c.to_json())
            .ok_or_else(|| ApiError::unknown_object("charge", id, "charge"))
    }

    pub fn list_charges(&self, p: &Params) -> Result<Value, ApiError> {
        let req = self.list_request(p, |id| self.charges.seq_of(&ChargeId::from_client(id)))?;
        let pi = p.opt_str("payment_intent")?;
        let page = self.charges.page(req.cursor, req.limit, |c| {
            pi.is_none_or(|pi| c.payment_intent.as_ref().is_some_and(|x| x.as_str() == pi))
        });
        Ok(list_json(
            "/v1/charges",
            page.items.iter().map(|c| c.to_json()).collect(),
            page.has_more,
        ))
    }

    pub fn search_charges(&self, p: &Params) -> Result<Value, ApiError> {
        let (query, limit, cursor) = search_request(p)?;
        let page = self.charges.page(cursor, limit, |c| query.matches(&**c));
        Ok(search_json(
            "/v1/charges/search",
            page.items.iter().map(|c| c.to_json()).collect(),
            page.has_more,
            page.last_seq,
        ))
    }

    // ---- refunds ----

    pub fn create_refund(&self, p: &Params, attempt: &Attempt) -> Result<Value, ApiError> {
        let charge_id = match (p.opt_str("charge")?, p.opt_str("payment_intent")?) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_request(
                    "Pass either charge or payment_intent, not both.",
                    Some("payment_intent".into()),
                ))
            }
            (Some(c), None) => ChargeId::from_client(c),
            (None, Some(pi)) => {
                let intent = self
                    .intents
                    .get(&PaymentIntentId::from_client(pi))
                    .ok_or_else(|| ApiError::unknown_reference("payment_intent", pi, "payment_intent"))?;
                match (&intent.latest_charge, intent.status) {
                    (Some(c), IntentStatus::Succeeded) => c.clone(),
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
        let requested = p.opt_u64("amount")?;
        let reason = match p.opt_str("reason")? {
            None => None,
            Some(r @ ("duplicate" | "fraudulent" | "requested_by_customer")) => Some(r.to_string()),
            Some(other) => {
                return Err(ApiError::invalid_param(
                    "reason",
                    format!("Invalid reason: '{other}'; expected duplicate, fraudulent or requested_by_customer."),
                ))
            }
        };
        let meta = metadata(p)?;
        let current = self
            .charges
            .get(&charge_id)
            .ok_or_else(|| ApiError::unknown_reference("charge", charge_id.as_str(), "charge"))?;
        if !current.captured {
            return Err(ApiError::invalid_request(
                format!("Charge {charge_id} has not been captured: there is nothing to refund."),
                Some("charge".into()),
            ));
        }
        let mut entry = self.ledger.entry(current.correlation_id.as_ref(), charge_id.as_str());
        self.charges
            .update(&charge_id, |slot| {
                let left = slot.refundable();
                let amount = requested.unwrap_or(left);
                if amount == 0 || amount > left {
                    entry.append_over_refund(OverRefund {
                        charge: slot.id.clone(),
                        payment_intent: slot.payment_intent.clone(),
                        correlation_id: slot.correlation_id.clone(),
                        captured: slot.amount_captured,
                        already_refunded: slot.amount_refunded,
                        requested: amount,
                        idempotency_key: attempt.idempotency_key.clone(),
                        request_id: attempt.request_id.clone(),
                        created_ms: super::ledger::now_ms(),
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
                    object: "refund",
                    amount,
                    balance_transaction: Some(format!("txn_{}", &RefundId::generate().as_str()[3..])),
                    charge: slot.id.clone(),
                    created: now_unix(),
                    currency: slot.currency,
                    metadata: meta,
                    payment_intent: slot.payment_intent.clone(),
                    reason,
                    receipt_number: None,
                    source_transfer_reversal: None,
                    status: "succeeded",
                    transfer_reversal: None,
                };
                let mut c = (**slot).clone();
                c.amount_refunded += amount;
                c.refunded = c.amount_refunded == c.amount_captured;
                *slot = Arc::new(c);
                entry.append(
                    MovementKind::Refund,
                    Movement {
                        id: MovementId::Refund(refund.id.clone()),
                        amount,
                        currency: refund.currency,
                        payment_intent: refund.payment_intent.clone(),
                        charge: Some(refund.charge.clone()),
                        attempt: attempt.clone(),
                    },
                );
                let out = refund.to_json();
                self.refunds.insert(refund.id.clone(), Arc::new(refund));
                Ok(out)
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("charge", charge_id.as_str(), "charge")))
    }

    pub fn retrieve_refund(&self, id: &str) -> Result<Value, ApiError> {
        self.refunds
            .get(&RefundId::from_client(id))
            .map(|r| r.to_json())
            .ok_or_else(|| ApiError::unknown_object("refund", id, "refund"))
    }

    pub fn list_refunds(&self, p: &Params) -> Result<Value, ApiError> {
        let req = self.list_request(p, |id| self.refunds.seq_of(&RefundId::from_client(id)))?;
        let charge = p.opt_str("charge")?;
        let pi = p.opt_str("payment_intent")?;
        let page = self.refunds.page(req.cursor, req.limit, |r| {
            charge.is_none_or(|c| r.charge.as_str() == c)
                && pi.is_none_or(|pi| r.payment_intent.as_ref().is_some_and(|x| x.as_str() == pi))
        });
        Ok(list_json(
            "/v1/refunds",
            page.items.iter().map(|r| r.to_json()).collect(),
            page.has_more,
        ))
    }

    fn list_request(&self, p: &Params, seq_of: impl Fn(&str) -> Option<u64>) -> Result<ListRequest, ApiError> {
        let limit = limit(p)?;
        let cursor = match (p.opt_str("starting_after")?, p.opt_str("ending_before")?) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_request(
                    "You may only specify one of these parameters: ending_before, starting_after.",
                    Some("starting_after".into()),
                ))
            }
            (Some(id), None) => Cursor::StartingAfter(
                seq_of(id).ok_or_else(|| ApiError::unknown_reference("object", id, "starting_after"))?,
            ),
            (None, Some(id)) => Cursor::EndingBefore(
                seq_of(id).ok_or_else(|| ApiError::unknown_reference("object", id, "ending_before"))?,
            ),
            (None, None) => Cursor::Start,
        };
        Ok(ListRequest { limit, cursor })
    }
}

fn limit(p: &Params) -> Result<usize, ApiError> {
    match p.opt_u64("limit")? {
        None => Ok(10),
        Some(n @ 1..=100) => Ok(n as usize),
        Some(_) => Err(ApiError::invalid_param(
            "limit",
            "Invalid limit: must be between 1 and 100.",
        )),
    }
}

fn search_request(p: &Params) -> Result<(Query, usize, Cursor), ApiError> {
    let query = Query::parse(p.req_str("query")?)?;
    let limit = limit(p)?;
    let cursor = match p.opt_str("page")? {
        None => Cursor::Start,
        Some(token) => Cursor::StartingAfter(token.strip_prefix("page_").and_then(|s| s.parse().ok()).ok_or_else(
            || {
                ApiError::invalid_param(
                    "page",
                    "Invalid page token: pass the next_page value of a previous search result.",
                )
            },
        )?),
    };
    Ok((query, limit, cursor))
}

fn list_json(url: &str, data: Vec<Value>, has_more: bool) -> Value {
    json!({"object": "list", "data": data, "has_more": has_more, "url": url})
}

fn search_json(url: &str, data: Vec<Value>, has_more: bool, last_seq: Option<u64>) -> Value {
    let next_page = if has_more {
        last_seq.map(|s| format!("page_{s}"))
    } else {
        None
    };
    json!({"object": "search_result", "data": data, "has_more": has_more, "next_page": next_page, "url": url})
}

fn movement_for(charge: &Charge, attempt: &Attempt) -> Movement {
    Movement {
        id: MovementId::Charge(charge.id.clone()),
        amount: charge.amount_captured,
        currency: charge.currency,
        payment_intent: charge.payment_intent.clone(),
        charge: None,
        attempt: attempt.clone(),
    }
}

/// A 402 card error, stored and replayed like any executed response.
pub fn card_error(d: &Decline) -> ApiError {
    let mut e = ApiError::new(
        axum::http::StatusCode::PAYMENT_REQUIRED,
        ErrorType::CardError,
        d.message.clone(),
    )
    .with_code(d.code.clone())
    .executed();
    e.decline_code = Some(d.decline_code.clone());
    e
}

fn duplicate_decline() -> ApiError {
    card_error(&Decline {
        code: "card_declined".into(),
        decline_code: "duplicate_transaction".into(),
        message: "A transaction with identical amount and payment details was submitted very recently for this order (fauxpay --duplicates reject).".into(),
    })
}

/// The test card named by `payment_method` (or `payment_method_data[card][number]`).
fn payment_method(p: &Params) -> Result<Option<&'static TestCard>, ApiError> {
    if let Some(pm) = p.opt_str("payment_method")? {
        // A magic `pm_fault_…` method charges its underlying test card.
        let card = crate::faults::forced_by_payment_method(pm).map_or(pm, |(_, card)| card);
        return TestCard::resolve(card)
            .map(Some)
            .ok_or_else(|| ApiError::unknown_reference("PaymentMethod", pm, "payment_method"));
    }
    if let Some(data) = p.opt_object("payment_method_data")? {
        let number = data.get("card").and_then(|c| c.get("number")).and_then(Value::as_str);
        return match number {
            Some(n) => TestCard::resolve(n).map(Some).ok_or_else(|| {
                card_error(&Decline {
                    code: "incorrect_number".into(),
                    decline_code: "incorrect_number".into(),
                    message: "Your card number is incorrect.".into(),
                })
                .with_param("payment_method_data[card][number]")
            }),
            None => Err(ApiError::missing_param("payment_method_data[card][number]")),
        };
    }
    Ok(None)
}

/// The test card named by a charge's `source` (a token, or `source[number]`).
fn source(p: &Params) -> Result<&'static TestCard, ApiError> {
    let reference = match p.get("source") {
        Some(Value::Object(m)) => m
            .get("number")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::missing_param("source[number]"))?,
        Some(_) => p.req_str("source")?,
        None => return Err(ApiError::missing_param("source")),
    };
    TestCard::resolve(reference).ok_or_else(|| ApiError::unknown_reference("source", reference, "source"))
}

fn metadata(p: &Params) -> Result<Metadata, ApiError> {
    let Some(map) = p.opt_object("metadata")? else {
        return Ok(Metadata::new());
    };
    if map.len() > MAX_METADATA_KEYS {
        return Err(ApiError::invalid_param(
            "metadata",
            format!("Metadata can have at most {MAX_METADATA_KEYS} keys."),
        ));
    }
    let mut out = Metadata::new();
    for (k, v) in map {
        let param = format!("metadata[{k}]");
        if k.chars().count() > MAX_METADATA_KEY_LEN {
            return Err(ApiError::invalid_param(
                &param,
                format!("Metadata keys can be at most {MAX_METADATA_KEY_LEN} characters."),
            ));
        }
        let v = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => continue,
            _ => return Err(ApiError::invalid_param(&param, "Metadata values must be strings.")),
        };
        if v.chars().count() > MAX_METADATA_VALUE_LEN {
            return Err(ApiError::invalid_param(
                &param,
                format!("Metadata values can be at most {MAX_METADATA_VALUE_LEN} characters."),
            ));
        }
        if !v.is_empty() {
            out.insert(k.clone(), v);
        }
    }
    Ok(out)
}

fn text(p: &Params, name: &str) -> Result<Option<String>, ApiError> {
    match p.opt_str(name)? {
        Some(s) if s.chars().count() > MAX_TEXT_LEN => Err(ApiError::invalid_param(
            name,
            format!("{name} can be at most {MAX_TEXT_LEN} characters."),
        )),
        other => Ok(other.map(str::to_string)),
    }
}

impl Searchable for PaymentIntent {
    fn field(&self, name: &str) -> Option<String> {
        match name {
            "status" => Some(self.status.as_str().into()),
            "currency" => Some(self.currency.into()),
            "amount" => Some(self.amount.to_string()),
            "created" => Some(self.created.to_string()),
            "customer" => self.customer.clone(),
            "description" => self.description.clone(),
            _ => None,
        }
    }
    fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
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
            "currency" => Some(self.currency.into()),
            "amount" => Some(self.amount.to_string()),
            "created" => Some(self.created.to_string()),
            "captured" => Some(self.captured.to_string()),
            "refunded" => Some(self.refunded.to_string()),
            "payment_intent" => self.payment_intent.as_ref().map(|p| p.to_string()),
            "customer" => self.customer.clone(),
            _ => None,
        }
    }
    fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ids::{IdempotencyKey, RequestId};

    fn payments(policy: DuplicatePolicy) -> Payments {
        Payments::new(policy, CorrelationSource::parse("metadata.order_id").unwrap())
    }

    fn attempt(key: &str) -> Attempt {
        Attempt::plain(RequestId::generate(), IdempotencyKey::parse(key).ok())
    }

    fn form(s: &str) -> Params {
        Params::from_form(s.as_bytes()).unwrap()
    }

    #[test]
    fn confirmed_intent_captures_one_charge_into_the_ledger() {
        let p = payments(DuplicatePolicy::Allow);
        let pi = p
            .create_intent(
                &form("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o1"),
                &attempt("k1"),
            )
            .unwrap();
        assert_eq!(pi["status"], "succeeded");
        assert_eq!(pi["amount_received"], 2000);
        let ch = p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap();
        assert_eq!(ch["captured"], true);
        assert_eq!(ch["payment_method_details"]["card"]["last4"], "4242");
        let recs = p.ledger.records(&Default::default());
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].correlation_id.as_ref().unwrap().as_str(), "o1");
        assert_eq!(recs[0].idempotency_key.as_ref().unwrap().as_str(), "k1");
    }

    #[test]
    fn decline_leaves_intent_requiring_payment_method_and_no_money_moved() {
        let p = payments(DuplicatePolicy::Allow);
        let err = p
            .create_intent(
                &form("amount=2000&currency=usd&confirm=true&payment_method=pm_card_chargeDeclinedInsufficientFunds"),
                &attempt("k"),
            )
            .unwrap_err();
        assert_eq!(err.status.as_u16(), 402);
        assert_eq!(err.decline_code.as_deref(), Some("insufficient_funds"));
        assert!(err.executed);
        let body = err.body();
        assert_eq!(body["error"]["payment_intent"]["status"], "requires_payment_method");
        assert_eq!(
            body["error"]["payment_intent"]["last_payment_error"]["decline_code"],
            "insufficient_funds"
        );
        assert!(p.ledger.records(&Default::default()).is_empty());
    }

    #[test]
    fn manual_capture_moves_money_only_on_capture() {
        let p = payments(DuplicatePolicy::Allow);
        let pi = p
            .create_intent(
                &form("amount=5000&currency=eur&capture_method=manual&confirm=true&payment_method=pm_card_mastercard"),
                &attempt("a"),
            )
            .unwrap();
        assert_eq!(pi["status"], "requires_capture");
        assert!(p.ledger.records(&Default::default()).is_empty());
        let id = pi["id"].as_str().unwrap();
        let done = p
            .capture_intent(id, &form("amount_to_capture=4000"), &attempt("b"))
            .unwrap();
        assert_eq!(done["status"], "succeeded");
        assert_eq!(done["amount_received"], 4000);
        assert_eq!(p.ledger.records(&Default::default())[0].amount, 4000);
        assert!(p.capture_intent(id, &form(""), &attempt("c")).unwrap_err().executed);
    }

    #[test]
    fn second_charge_for_an_order_is_flagged_or_rejected() {
        let allow = payments(DuplicatePolicy::Allow);
        let body = form("amount=1000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o7");
        allow.create_intent(&body, &attempt("k1")).unwrap();
        allow.create_intent(&body, &attempt("k2")).unwrap();
        assert_eq!(allow.ledger.summary()["duplicate_group_count"], 1);

        let reject = payments(DuplicatePolicy::Reject);
        reject.create_intent(&body, &attempt("k1")).unwrap();
        let err = reject.create_intent(&body, &attempt("k2")).unwrap_err();
        assert_eq!(err.decline_code.as_deref(), Some("duplicate_transaction"));
        assert_eq!(reject.ledger.summary()["duplicate_group_count"], 0);
        assert_eq!(reject.ledger.blocked_duplicates(), 1);
    }

    #[test]
    fn refunds_are_bounded_by_what_was_captured() {
        let p = payments(DuplicatePolicy::Allow);
        let pi = p
            .create_intent(
                &form("amount=1000&currency=usd&confirm=true&payment_method=tok_visa&metadata[order_id]=r1"),
                &attempt("k"),
            )
            .unwrap();
        let pid = pi["id"].as_str().unwrap();
        let r = p
            .create_refund(&form(&format!("payment_intent={pid}&amount=400")), &attempt("r1"))
            .unwrap();
        assert_eq!(r["amount"], 400);
        let err = p
            .create_refund(&form(&format!("payment_intent={pid}&amount=700")), &attempt("r2"))
            .unwrap_err();
        assert_eq!(err.param.as_deref(), Some("amount"));
        let rest = p
            .create_refund(
                &form(&format!("charge={}", pi["latest_charge"].as_str().unwrap())),
                &attempt("r3"),
            )
            .unwrap();
        assert_eq!(rest["amount"], 600);
        let s = p.ledger.summary();
        assert_eq!(s["refunds"], 2);
        assert_eq!(s["refunded"]["usd"], 1000);
        assert_eq!(s["over_refunds"].as_array().unwrap().len(), 1);
        assert_eq!(
            p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap()["refunded"],
            true
        );
    }

    #[test]
    fn confirm_and_cancel_follow_the_state_machine() {
        let p = payments(DuplicatePolicy::Allow);
        let pi = p
            .create_intent(&form("amount=1000&currency=usd"), &attempt("k"))
            .unwrap();
        assert_eq!(pi["status"], "requires_payment_method");
        let id = pi["id"].as_str().unwrap();
        assert!(p.confirm_intent(id, &form(""), &attempt("c0")).is_err());
        let declined = p
            .confirm_intent(id, &form("payment_method=pm_card_chargeDeclined"), &attempt("c1"))
            .unwrap_err();
        assert_eq!(declined.decline_code.as_deref(), Some("generic_decline"));
        let ok = p
            .confirm_intent(id, &form("payment_method=pm_card_visa"), &attempt("c2"))
            .unwrap();
        assert_eq!(ok["status"], "succeeded");
        assert_eq!(ok["last_payment_error"], Value::Null);
        assert!(p
            .confirm_intent(id, &form("payment_method=pm_card_visa"), &attempt("c3"))
            .is_err());
        assert!(p.cancel_intent(id, &form("")).is_err());
        let other = p
            .create_intent(&form("amount=1000&currency=usd"), &attempt("k"))
            .unwrap();
        let canceled = p
            .cancel_intent(other["id"].as_str().unwrap(), &form("cancellation_reason=abandoned"))
            .unwrap();
        assert_eq!(canceled["status"], "canceled");
    }

    #[test]
    fn search_finds_by_metadata_and_lists_paginate() {
        let p = payments(DuplicatePolicy::Allow);
        for i in 0..15 {
            p.create_intent(
                &form(&format!("amount=1000&currency=usd&metadata[order_id]=o{i}")),
                &attempt("k"),
            )
            .unwrap();
        }
        let found = p.search_intents(&form("query=metadata['order_id']:'o3'")).unwrap();
        assert_eq!(found["data"].as_array().unwrap().len(), 1);
        assert_eq!(found["data"][0]["metadata"]["order_id"], "o3");
        let first = p.list_intents(&form("limit=10")).unwrap();
        assert_eq!(first["has_more"], true);
        let last_id = first["data"][9]["id"].as_str().unwrap();
        let second = p
            .list_intents(&form(&format!("limit=10&starting_after={last_id}")))
            .unwrap();
        assert_eq!(second["data"].as_array().unwrap().len(), 5);
        assert_eq!(second["has_more"], false);
        assert!(p.list_intents(&form("limit=101")).is_err());
    }

    #[test]
    fn validation_errors_name_the_param() {
        let p = payments(DuplicatePolicy::Allow);
        let cases = [
            ("currency=usd", "amount"),
            ("amount=100", "currency"),
            ("amount=abc&currency=usd", "amount"),
            ("amount=100&currency=usd&payment_method=pm_nope", "payment_method"),
            ("amount=100&currency=usd&capture_method=later", "capture_method"),
            ("amount=100&currency=usd&confirm=true", "payment_method"),
        ];
        for (body, param) in cases {
            let e = p.create_intent(&form(body), &attempt("k")).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
            assert!(!e.executed, "{body}");
        }
        let long = format!("amount=100&currency=usd&metadata[{}]=v", "k".repeat(41));
        assert!(p
            .create_intent(&form(&long), &attempt("k"))
            .unwrap_err()
            .param
            .unwrap()
            .starts_with("metadata["));
    }
}
