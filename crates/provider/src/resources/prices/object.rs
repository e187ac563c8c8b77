//! A price: its product, currency and unit amount, whether it is one-time or recurring
//! (and how often), its lookup key, and its Stripe JSON (`price`).

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::state::table::Keyed;
use crate::stripe::ids::{PriceId, ProductId};
use crate::stripe::json::{Metadata, Null};
use crate::stripe::money::Currency;

/// How often a recurring price bills (Stripe's `recurring.interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interval {
    Day,
    Week,
    Month,
    Year,
}

impl Interval {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            "year" => Self::Year,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Year => "year",
        }
    }
}

/// A recurring price's period: every `count` `interval`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recurring {
    pub interval: Interval,
    pub count: u16,
}

impl Serialize for Recurring {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Recurring", 4)?;
        o.serialize_field("aggregate_usage", &Null)?;
        o.serialize_field("interval", &self.interval)?;
        o.serialize_field("interval_count", &self.count)?;
        o.serialize_field("usage_type", "licensed")?;
        o.end()
    }
}

#[derive(Debug, Clone)]
pub struct Price {
    pub id: PriceId,
    pub product: ProductId,
    pub created: i64,
    pub active: bool,
    pub currency: Currency,
    pub unit_amount: u64,
    /// `None` for a one-time price.
    pub recurring: Option<Recurring>,
    pub lookup_key: Option<Box<str>>,
    pub nickname: Option<Box<str>>,
    pub tax_behavior: Option<Box<str>>,
    pub metadata: Metadata,
    /// Made for one Checkout Session from its `price_data`: retired with it (`--retain`).
    pub inline: bool,
}

impl Price {
    /// Stripe's `type`: `one_time` or `recurring`.
    pub fn kind(&self) -> &'static str {
        if self.recurring.is_some() {
            "recurring"
        } else {
            "one_time"
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Price {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Price", 19)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "price")?;
        o.serialize_field("active", &self.active)?;
        o.serialize_field("billing_scheme", "per_unit")?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &self.currency)?;
        o.serialize_field("custom_unit_amount", &Null)?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("lookup_key", &self.lookup_key)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("nickname", &self.nickname)?;
        o.serialize_field("product", &self.product)?;
        o.serialize_field("recurring", &self.recurring)?;
        o.serialize_field("tax_behavior", self.tax_behavior.as_deref().unwrap_or("unspecified"))?;
        o.serialize_field("tiers_mode", &Null)?;
        o.serialize_field("transform_quantity", &Null)?;
        o.serialize_field("type", self.kind())?;
        o.serialize_field("unit_amount", &self.unit_amount)?;
        o.serialize_field("unit_amount_decimal", &self.unit_amount.to_string())?;
        o.end()
    }
}

impl Keyed for Arc<Price> {
    type Key = PriceId;
    fn key(&self) -> PriceId {
        self.id
    }
}
