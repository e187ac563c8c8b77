//! A customer: what fauxpay keeps of it (contact fields, metadata, the default payment
//! method, whether it was deleted), and its Stripe JSON: the full `customer` object, or
//! Stripe's `deleted_customer` (`{"id","object":"customer","deleted":true}`) once deleted.

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::state::table::Keyed;
use crate::stripe::ids::{CustomerId, PaymentMethodId};
use crate::stripe::json::{Metadata, Null};

/// Salt of the token an invoice prefix is derived from.
const INVOICE_PREFIX: u64 = 0x696e_7670_7265_0003;

/// A customer's free-text fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerText {
    pub description: Option<Box<str>>,
    pub email: Option<Box<str>>,
    pub name: Option<Box<str>>,
    pub phone: Option<Box<str>>,
}

#[derive(Debug, Clone)]
pub struct Customer {
    pub id: CustomerId,
    pub created: i64,
    pub text: CustomerText,
    pub metadata: Metadata,
    /// `invoice_settings.default_payment_method`: always one attached to this customer.
    pub default_payment_method: Option<PaymentMethodId>,
    /// Deleted: retrieved as Stripe's `deleted_customer`, unknown everywhere else.
    pub deleted: bool,
}

impl Customer {
    pub fn email(&self) -> Option<&str> {
        self.text.email.as_deref()
    }

    pub fn name(&self) -> Option<&str> {
        self.text.name.as_deref()
    }

    /// Stripe's `invoice_prefix`: eight uppercase alphanumerics, derived from the id.
    pub fn invoice_prefix(&self) -> String {
        self.id.token().derived(INVOICE_PREFIX).text()[..8].to_ascii_uppercase()
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Serialize)]
struct InvoiceSettings {
    custom_fields: Null,
    default_payment_method: Option<PaymentMethodId>,
    footer: Null,
    rendering_options: Null,
}

impl Serialize for Customer {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.deleted {
            let mut o = s.serialize_struct("DeletedCustomer", 3)?;
            o.serialize_field("id", &self.id)?;
            o.serialize_field("object", "customer")?;
            o.serialize_field("deleted", &true)?;
            return o.end();
        }
        let t = &self.text;
        let mut o = s.serialize_struct("Customer", 24)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "customer")?;
        o.serialize_field("address", &Null)?;
        o.serialize_field("balance", &0)?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("currency", &Null)?;
        o.serialize_field("default_source", &Null)?;
        o.serialize_field("delinquent", &false)?;
        o.serialize_field("description", &t.description)?;
        o.serialize_field("discount", &Null)?;
        o.serialize_field("email", &t.email)?;
        o.serialize_field("invoice_prefix", &self.invoice_prefix())?;
        o.serialize_field(
            "invoice_settings",
            &InvoiceSettings {
                custom_fields: Null,
                default_payment_method: self.default_payment_method,
                footer: Null,
                rendering_options: Null,
            },
        )?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("name", &t.name)?;
        o.serialize_field("next_invoice_sequence", &1)?;
        o.serialize_field("phone", &t.phone)?;
        o.serialize_field("preferred_locales", &[] as &[&str])?;
        o.serialize_field("shipping", &Null)?;
        o.serialize_field("tax_exempt", "none")?;
        o.serialize_field("test_clock", &Null)?;
        o.end()
    }
}

impl Keyed for Arc<Customer> {
    type Key = CustomerId;
    fn key(&self) -> CustomerId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn customer() -> Customer {
        Customer {
            id: CustomerId::generate(),
            created: 1_700_000_000,
            text: CustomerText {
                email: Some("jenny@example.com".into()),
                name: Some("Jenny \"J\" Rosen".into()),
                ..CustomerText::default()
            },
            metadata: Metadata::from_sorted(&[("tier", "gold")]),
            default_payment_method: None,
            deleted: false,
        }
    }

    #[test]
    fn json_has_stripe_shape() {
        let mut c = customer();
        let j = c.to_json();
        assert_eq!(j["object"], "customer");
        assert!(j["id"].as_str().unwrap().starts_with("cus_"));
        assert_eq!(j["email"], "jenny@example.com");
        assert_eq!(j["name"], "Jenny \"J\" Rosen");
        assert_eq!(j["phone"], Value::Null);
        assert_eq!(j["metadata"]["tier"], "gold");
        assert_eq!(j["invoice_settings"]["default_payment_method"], Value::Null);
        assert_eq!(j["livemode"], false);
        let prefix = j["invoice_prefix"].as_str().unwrap();
        assert_eq!(prefix.len(), 8);
        assert!(prefix.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert_eq!(prefix, c.invoice_prefix(), "stable for a customer");
        let pm = PaymentMethodId::generate();
        c.default_payment_method = Some(pm);
        assert_eq!(
            c.to_json()["invoice_settings"]["default_payment_method"],
            pm.to_string()
        );
    }

    #[test]
    fn a_deleted_customer_is_stripes_deleted_object() {
        let mut c = customer();
        c.deleted = true;
        assert_eq!(
            c.to_json(),
            serde_json::json!({"id": c.id.to_string(), "object": "customer", "deleted": true})
        );
    }
}
