//! A refund and its Stripe JSON.

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::state::table::Keyed;
use crate::stripe::ids::{ChargeId, PaymentIntentId, RefundId, Token};
use crate::stripe::money::Currency;

use crate::stripe::json::{Metadata, Null, Prefixed};

/// Why a refund was made (Stripe's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    Duplicate,
    Fraudulent,
    RequestedByCustomer,
}

impl RefundReason {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "duplicate" => Self::Duplicate,
            "fraudulent" => Self::Fraudulent,
            "requested_by_customer" => Self::RequestedByCustomer,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Refund {
    pub id: RefundId,
    pub amount: u64,
    /// The random part of `balance_transaction` (`txn_…`).
    pub balance_transaction: Token,
    pub charge: ChargeId,
    pub created: i64,
    pub currency: Currency,
    pub metadata: Metadata,
    pub payment_intent: Option<PaymentIntentId>,
    pub reason: Option<RefundReason>,
}

impl Refund {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Refund {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Refund", 14)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "refund")?;
        o.serialize_field("amount", &self.amount)?;
        o.serialize_field("balance_transaction", &Prefixed("txn_", &self.balance_transaction))?;
        o.serialize_field("charge", &self.charge)?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("payment_intent", &self.payment_intent)?;
        o.serialize_field("reason", &self.reason)?;
        o.serialize_field("receipt_number", &Null)?;
        o.serialize_field("source_transfer_reversal", &Null)?;
        o.serialize_field("status", "succeeded")?;
        o.serialize_field("transfer_reversal", &Null)?;
        o.end()
    }
}

impl Keyed for Arc<Refund> {
    type Key = RefundId;
    fn key(&self) -> RefundId {
        self.id
    }
}
