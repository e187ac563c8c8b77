//! A product: what fauxpay keeps of it (name, description, whether it is active, its
//! default price, metadata and the few display fields Stripe returns), and its Stripe
//! JSON (`product`; the deletion answers Stripe's deleted object).

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::state::table::Keyed;
use crate::stripe::ids::{PriceId, ProductId};
use crate::stripe::json::{Metadata, Null};

/// A product's free-text fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProductText {
    pub name: Box<str>,
    pub description: Option<Box<str>>,
    pub statement_descriptor: Option<Box<str>>,
    pub unit_label: Option<Box<str>>,
    pub url: Option<Box<str>>,
}

#[derive(Debug, Clone)]
pub struct Product {
    pub id: ProductId,
    pub created: i64,
    pub updated: i64,
    pub active: bool,
    pub text: ProductText,
    pub images: Box<[Box<str>]>,
    pub shippable: Option<bool>,
    pub metadata: Metadata,
    pub default_price: Option<PriceId>,
    /// Deleted: answered as Stripe's deleted object by the deletion, unknown afterwards.
    pub deleted: bool,
    /// Made for one Checkout Session from its `product_data`: retired with it (`--retain`).
    pub inline: bool,
}

impl Product {
    pub fn name(&self) -> &str {
        &self.text.name
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Product {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.deleted {
            let mut o = s.serialize_struct("DeletedProduct", 3)?;
            o.serialize_field("id", &self.id)?;
            o.serialize_field("object", "product")?;
            o.serialize_field("deleted", &true)?;
            return o.end();
        }
        let t = &self.text;
        let mut o = s.serialize_struct("Product", 18)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "product")?;
        o.serialize_field("active", &self.active)?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("default_price", &self.default_price)?;
        o.serialize_field("description", &t.description)?;
        o.serialize_field("features", &[] as &[Value])?;
        o.serialize_field("images", &self.images)?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("name", &t.name)?;
        o.serialize_field("package_dimensions", &Null)?;
        o.serialize_field("shippable", &self.shippable)?;
        o.serialize_field("statement_descriptor", &t.statement_descriptor)?;
        o.serialize_field("tax_code", &Null)?;
        o.serialize_field("unit_label", &t.unit_label)?;
        o.serialize_field("updated", &self.updated)?;
        o.serialize_field("url", &t.url)?;
        o.end()
    }
}

impl Keyed for Arc<Product> {
    type Key = ProductId;
    fn key(&self) -> ProductId {
        self.id.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_stripes_shape_and_a_deleted_product_is_stripes_deleted_object() {
        let mut p = Product {
            id: ProductId::generate(),
            created: 1_700_000_000,
            updated: 1_700_000_000,
            active: true,
            text: ProductText {
                name: "T-shirt".into(),
                ..ProductText::default()
            },
            images: Box::new([]),
            shippable: None,
            metadata: Metadata::new(),
            default_price: None,
            deleted: false,
            inline: false,
        };
        let j = p.to_json();
        assert_eq!(
            (j["object"].as_str(), j["name"].as_str()),
            (Some("product"), Some("T-shirt"))
        );
        assert!(j["id"].as_str().unwrap().starts_with("prod_"));
        assert_eq!(j["default_price"], Value::Null);
        p.deleted = true;
        assert_eq!(
            p.to_json(),
            serde_json::json!({"id": p.id.to_string(), "object": "product", "deleted": true})
        );
    }
}
