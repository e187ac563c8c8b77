//! The payment rules: what each Stripe endpoint does to payment intents, charges and
//! refunds, and which money movements it writes to the ledger.
//!
//! [`Payments`] is plain Rust, free of HTTP: each operation takes validated
//! [`Params`] and the [`Attempt`] it came from and returns the Stripe object as JSON or
//! an [`ApiError`]. Money moves only under the ledger entry of the payment's correlation
//! id, taken before the object's own lock (always in the order ledger → intent → charge
//! → refund), so a state check and the transition it guards are one atomic step and the
//! duplicate check cannot race the append.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use super::attempt::Attempt;
use super::cards::{Decline, TestCard};
use super::error::{ApiError, ErrorType};
use super::ids::{ChargeId, CorrelationId, ObjectId, PaymentIntentId, PaymentMethodId, RefundId, Token};
use super::ledger::{Ledger, LedgerEntry, Movement, MovementId, MovementKind, OverRefund};
use super::money::{check_amount, Currency};
use super::objects::{
    now_unix, CancellationReason, CaptureMethod, Charge, ChargeStatus, IntentStatus, IntentText, LastPaymentError,
    Metadata, NewCharge, PaymentIntent, Refund,
};
use super::params::Params;
use super::search::{Query, Searchable};
use super::table::{Cursor, Keyed, Table};

impl Keyed for Arc<PaymentIntent> {
    type Key = PaymentIntentId;
    fn key(&self) -> PaymentIntentId {
        self.id
    }
}

impl Keyed for Arc<Charge> {
    type Key = ChargeId;
    fn key(&self) -> ChargeId {
        self.id
    }
}

impl Keyed for Arc<Refund> {
    type Key = RefundId;
    fn key(&self) -> RefundId {
        self.id
    }
}

/// What to do with a new charge for a correlation id that already has a captured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DuplicatePolicy {
    /// Charge again and flag it, as a real provider would.
    Allow,
    /// Refuse with a 402 `duplicate_transaction` decline and count it as blocked.
    Reject,
}

/// What an operation answers: a Stripe object, shared (the idempotency store keeps the
/// same `Arc` the tables hold, not a copy of its JSON) and serialised straight to bytes
/// when sent, or a list as JSON.
#[derive(Debug, Clone)]
pub enum Reply {
    Intent(Arc<PaymentIntent>),
    Charge(Arc<Charge>),
    Refund(Arc<Refund>),
    Json(Box<Value>),
}

impl Reply {
    /// The JSON body.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Intent(o) => o.write_json(out),
            Reply::Charge(o) => o.write_json(out),
            Reply::Refund(o) => {
                let _ = serde_json::to_writer(out, &**o);
            }
            Reply::Json(v) => {
                let _ = serde_json::to_writer(out, &**v);
            }
        }
    }

    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(2048);
        self.write_json(&mut out);
        Bytes::from(out)
    }

    /// The object answered, if one.
    pub fn object(&self) -> Option<ObjectId> {
        match self {
            Reply::Intent(o) => Some(ObjectId::Intent(o.id)),
            Reply::Charge(o) => Some(ObjectId::Charge(o.id)),
            Reply::Refund(o) => Some(ObjectId::Refund(o.id)),
            Reply::Json(_) => None,
        }
    }

    /// The body as a JSON value.
    pub fn json(&self) -> Value {
        match self {
            Reply::Intent(o) => o.to_json(),
            Reply::Charge(o) => o.to_json(),
            Reply::Refund(o) => o.to_json(),
            Reply::Json(v) => (**v).clone(),
        }
    }
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
    pub intents: Table<Arc<PaymentIntent>>,
    pub charges: Table<Arc<Charge>>,
    pub refunds: Table<Arc<Refund>>,
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

    /// The correlation id of a request, read once per request.
    fn correlation_id(&self, p: &Params, attempt: &Attempt) -> Option<CorrelationId> {
        attempt.correlation_id.clone().or_else(|| self.correlate.of(p))
    }

    pub fn reset(&self) {
        self.intents.clear();
        self.charges.clear();
        self.refunds.clear();
        self.ledger.clear();
    }

    // ---- payment intents ----

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
        let card = payment_method(p)?;
        let confirm = p.opt_bool("confirm")?.unwrap_or(false);
        let metadata = metadata(p)?;
        let automatic_payment_methods = match p.opt_object("automatic_payment_methods")? {
            None => None,
            Some(apm) => {
                let enabled = Params::from_json(&serde_json::to_vec(apm).unwrap_or_default())?
                    .opt_bool("enabled")?
                    .unwrap_or(false);
                Some(enabled)
            }
        };
        if confirm && card.is_none() {
            return Err(ApiError::invalid_request(
                "You cannot confirm this PaymentIntent because it's missing a payment method. Specify a payment_method.",
                Some("payment_method".into()),
            )
            .with_code("payment_intent_unexpected_state"));
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
            payment_method: card.map(|_| PaymentMethodId::generate()),
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
        let mut entry = self.ledger.entry(pi.correlation_id.as_ref(), &pi.id.as_str());
        let result = self.confirm_locked(&mut pi, &mut entry, attempt);
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
        let new_card = payment_method(p)?;
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
                *slot = Arc::new(pi);
                result
                    .map(|()| Reply::Intent(slot.clone()))
                    .map_err(|e| e.with_extra("payment_intent", slot.to_json()))
            })
            .unwrap_or_else(|| Err(unknown()))
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
            payment_intent: Some(pi.id),
            payment_method: pi.payment_method,
            description: pi.description().map(Box::from),
            metadata: &pi.metadata,
            correlation_id: pi.correlation_id.clone(),
        });
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
                let charge_id = slot.latest_charge.expect("requires_capture has a charge");
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
        let req = self.list_request(p, |id| PaymentIntentId::parse(id).and_then(|i| self.intents.seq_of(&i)))?;
        let customer = p.opt_str("customer")?;
        let page = self.intents.page(req.cursor, req.limit, |pi| {
            customer.is_none_or(|c| pi.customer() == Some(c))
        });
        Ok(list_json(
            "/v1/payment_intents",
            page.items.iter().map(|pi| pi.to_json()).collect(),
            page.has_more,
        ))
    }

    pub fn search_intents(&self, p: &Params) -> Result<Reply, ApiError> {
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

    pub fn create_charge(&self, p: &Params, attempt: &Attempt) -> Result<Reply, ApiError> {
        let currency = Currency::parse(p.req_str("currency")?)?;
        let amount = check_amount(
            "amount",
            p.opt_u64("amount")?.ok_or_else(|| ApiError::missing_param("amount"))?,
            currency,
        )?;
        let card = source(p)?;
        let capture = p.opt_bool("capture")?.unwrap_or(true);
        let metadata = metadata(p)?;
        let correlation_id = self.correlation_id(p, attempt);
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
            self.charges.insert(Arc::new(charge));
            return Err(err);
        }
        if capture && self.policy == DuplicatePolicy::Reject && entry.captured_charges() > 0 {
            self.ledger.note_blocked_duplicate();
            return Err(duplicate_decline());
        }
        if capture {
            entry.append(MovementKind::Charge, movement_for(&charge, attempt));
        }
        let charge = Arc::new(charge);
        self.charges.insert(charge.clone());
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
        self.capture_charge_locked(&id, amount, &mut entry, attempt)
            .map(Reply::Charge)
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
                entry.append(MovementKind::Charge, movement_for(&c, attempt));
                *slot = Arc::new(c);
                Ok(slot.clone())
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("charge", &id.as_str(), "charge")))
    }

    pub fn retrieve_charge(&self, id: &str) -> Result<Reply, ApiError> {
        ChargeId::parse(id)
            .and_then(|i| self.charges.get(&i))
            .map(Reply::Charge)
            .ok_or_else(|| ApiError::unknown_object("charge", id, "charge"))
    }

    pub fn list_charges(&self, p: &Params) -> Result<Reply, ApiError> {
        let req = self.list_request(p, |id| ChargeId::parse(id).and_then(|i| self.charges.seq_of(&i)))?;
        let pi = p.opt_str("payment_intent")?;
        let page = self.charges.page(req.cursor, req.limit, |c| {
            pi.is_none_or(|pi| c.payment_intent.as_ref().is_some_and(|x| *x.as_str() == *pi))
        });
        Ok(list_json(
            "/v1/charges",
            page.items.iter().map(|c| c.to_json()).collect(),
            page.has_more,
        ))
    }

    pub fn search_charges(&self, p: &Params) -> Result<Reply, ApiError> {
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
        let requested = p.opt_u64("amount")?;
        let reason = match p.opt_str("reason")? {
            None => None,
            Some("duplicate") => Some("duplicate"),
            Some("fraudulent") => Some("fraudulent"),
            Some("requested_by_customer") => Some("requested_by_customer"),
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
                        captured: slot.amount_captured,
                        already_refunded: slot.amount_refunded,
                        requested: amount,
                        idempotency_key: attempt.idempotency_key.clone(),
                        request_id: attempt.request_id,
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
                c.amount_refunded += amount;
                c.refunded = c.amount_refunded == c.amount_captured;
                *slot = Arc::new(c);
                entry.append(
                    MovementKind::Refund,
                    Movement {
                        id: MovementId::Refund(refund.id),
                        amount,
                        currency: refund.currency,
                        payment_intent: refund.payment_intent,
                        charge: Some(refund.charge),
                        attempt: attempt.clone(),
                    },
                );
                let refund = Arc::new(refund);
                self.refunds.insert(refund.clone());
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

    pub fn list_refunds(&self, p: &Params) -> Result<Reply, ApiError> {
        let req = self.list_request(p, |id| RefundId::parse(id).and_then(|i| self.refunds.seq_of(&i)))?;
        let charge = p.opt_str("charge")?;
        let pi = p.opt_str("payment_intent")?;
        let page = self.refunds.page(req.cursor, req.limit, |r| {
            charge.is_none_or(|c| *r.charge.as_str() == *c)
                && pi.is_none_or(|pi| r.payment_intent.as_ref().is_some_and(|x| *x.as_str() == *pi))
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

fn list_json(url: &str, data: Vec<Value>, has_more: bool) -> Reply {
    Reply::Json(Box::new(
        json!({"object": "list", "data": data, "has_more": has_more, "url": url}),
    ))
}

fn search_json(url: &str, data: Vec<Value>, has_more: bool, last_seq: Option<u64>) -> Reply {
    let next_page = if has_more {
        last_seq.map(|s| format!("page_{s}"))
    } else {
        None
    };
    Reply::Json(Box::new(
        json!({"object": "search_result", "data": data, "has_more": has_more, "next_page": next_page, "url": url}),
    ))
}

fn movement_for(charge: &Charge, attempt: &Attempt) -> Movement {
    Movement {
        id: MovementId::Charge(charge.id),
        amount: charge.amount_captured,
        currency: charge.currency,
        payment_intent: charge.payment_intent,
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
    let mut out: Vec<(&str, Cow<'_, str>)> = Vec::with_capacity(map.len());
    if map.len() > MAX_METADATA_KEYS {
        return Err(ApiError::invalid_param(
            "metadata",
            format!("Metadata can have at most {MAX_METADATA_KEYS} keys."),
        ));
    }
    // The params map is sorted by key, so the metadata is too.
    for (k, v) in map {
        let param = || format!("metadata[{k}]");
        if k.chars().count() > MAX_METADATA_KEY_LEN {
            return Err(ApiError::invalid_param(
                &param(),
                format!("Metadata keys can be at most {MAX_METADATA_KEY_LEN} characters."),
            ));
        }
        let v: Cow<'_, str> = match v {
            Value::String(s) => Cow::Borrowed(s),
            Value::Number(n) => Cow::Owned(n.to_string()),
            Value::Bool(b) => Cow::Owned(b.to_string()),
            Value::Null => continue,
            _ => return Err(ApiError::invalid_param(&param(), "Metadata values must be strings.")),
        };
        if v.chars().count() > MAX_METADATA_VALUE_LEN {
            return Err(ApiError::invalid_param(
                &param(),
                format!("Metadata values can be at most {MAX_METADATA_VALUE_LEN} characters."),
            ));
        }
        if !v.is_empty() {
            out.push((k, v));
        }
    }
    Ok(Metadata::from_sorted(&out))
}

fn text(p: &Params, name: &str) -> Result<Option<Box<str>>, ApiError> {
    match p.opt_str(name)? {
        Some(s) if s.chars().count() > MAX_TEXT_LEN => Err(ApiError::invalid_param(
            name,
            format!("{name} can be at most {MAX_TEXT_LEN} characters."),
        )),
        other => Ok(other.map(Box::from)),
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
            "created" => Some(self.created.to_string()),
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
            .unwrap()
            .json();
        assert_eq!(pi["status"], "succeeded");
        assert_eq!(pi["amount_received"], 2000);
        let ch = p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap().json();
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
            .unwrap()
            .json();
        assert_eq!(pi["status"], "requires_capture");
        assert!(p.ledger.records(&Default::default()).is_empty());
        let id = pi["id"].as_str().unwrap();
        let done = p
            .capture_intent(id, &form("amount_to_capture=4000"), &attempt("b"))
            .unwrap()
            .json();
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
            .unwrap()
            .json();
        let pid = pi["id"].as_str().unwrap();
        let r = p
            .create_refund(&form(&format!("payment_intent={pid}&amount=400")), &attempt("r1"))
            .unwrap()
            .json();
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
            .unwrap()
            .json();
        assert_eq!(rest["amount"], 600);
        let s = p.ledger.summary();
        assert_eq!(s["refunds"], 2);
        assert_eq!(s["refunded"]["usd"], 1000);
        assert_eq!(s["over_refunds"].as_array().unwrap().len(), 1);
        assert_eq!(
            p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap().json()["refunded"],
            true
        );
    }

    #[test]
    fn confirm_and_cancel_follow_the_state_machine() {
        let p = payments(DuplicatePolicy::Allow);
        let pi = p
            .create_intent(&form("amount=1000&currency=usd"), &attempt("k"))
            .unwrap()
            .json();
        assert_eq!(pi["status"], "requires_payment_method");
        let id = pi["id"].as_str().unwrap();
        assert!(p.confirm_intent(id, &form(""), &attempt("c0")).is_err());
        let declined = p
            .confirm_intent(id, &form("payment_method=pm_card_chargeDeclined"), &attempt("c1"))
            .unwrap_err();
        assert_eq!(declined.decline_code.as_deref(), Some("generic_decline"));
        let ok = p
            .confirm_intent(id, &form("payment_method=pm_card_visa"), &attempt("c2"))
            .unwrap()
            .json();
        assert_eq!(ok["status"], "succeeded");
        assert_eq!(ok["last_payment_error"], Value::Null);
        assert!(p
            .confirm_intent(id, &form("payment_method=pm_card_visa"), &attempt("c3"))
            .is_err());
        assert!(p.cancel_intent(id, &form("")).is_err());
        let other = p
            .create_intent(&form("amount=1000&currency=usd"), &attempt("k"))
            .unwrap()
            .json();
        let canceled = p
            .cancel_intent(other["id"].as_str().unwrap(), &form("cancellation_reason=abandoned"))
            .unwrap()
            .json();
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
        let found = p
            .search_intents(&form("query=metadata['order_id']:'o3'"))
            .unwrap()
            .json();
        assert_eq!(found["data"].as_array().unwrap().len(), 1);
        assert_eq!(found["data"][0]["metadata"]["order_id"], "o3");
        let first = p.list_intents(&form("limit=10")).unwrap().json();
        assert_eq!(first["has_more"], true);
        let last_id = first["data"][9]["id"].as_str().unwrap();
        let second = p
            .list_intents(&form(&format!("limit=10&starting_after={last_id}")))
            .unwrap()
            .json();
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
