//! [`Reply`]: what an operation answers, a Stripe object shared with the table that
//! holds it (the idempotency store keeps the same `Arc`, not a copy of its JSON) or a
//! list as JSON, written to bytes when sent.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::resources::charges::object::Charge;
use crate::resources::checkout_sessions::object::CheckoutSession;
use crate::resources::customers::object::Customer;
use crate::resources::payment_intents::object::PaymentIntent;
use crate::resources::payment_methods::object::PaymentMethod;
use crate::resources::prices::object::Price;
use crate::resources::products::object::Product;
use crate::resources::refunds::object::Refund;
use crate::resources::setup_intents::object::SetupIntent;
use crate::stripe::ids::ObjectId;

/// What an operation answers: a Stripe object, shared (the idempotency store keeps the
/// same `Arc` the tables hold, not a copy of its JSON) and serialised straight to bytes
/// when sent, or a list as JSON.
#[derive(Debug, Clone)]
pub enum Reply {
    Intent(Arc<PaymentIntent>),
    Charge(Arc<Charge>),
    Refund(Arc<Refund>),
    Customer(Arc<Customer>),
    PaymentMethod(Arc<PaymentMethod>),
    SetupIntent(Arc<SetupIntent>),
    Product(Arc<Product>),
    Price(Arc<Price>),
    CheckoutSession(Arc<CheckoutSession>),
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
            Reply::Customer(o) => {
                let _ = serde_json::to_writer(out, &**o);
            }
            Reply::PaymentMethod(o) => {
                let _ = serde_json::to_writer(out, &**o);
            }
            Reply::SetupIntent(o) => {
                let _ = serde_json::to_writer(out, &**o);
            }
            Reply::Product(o) => {
                let _ = serde_json::to_writer(out, &**o);
            }
            Reply::Price(o) => {
                let _ = serde_json::to_writer(out, &**o);
            }
            Reply::CheckoutSession(o) => {
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
            Reply::Customer(o) => Some(ObjectId::Customer(o.id)),
            Reply::PaymentMethod(o) => Some(ObjectId::PaymentMethod(o.id)),
            Reply::SetupIntent(o) => Some(ObjectId::SetupIntent(o.id)),
            Reply::Price(o) => Some(ObjectId::Price(o.id)),
            Reply::CheckoutSession(o) => Some(ObjectId::CheckoutSession(o.id)),
            Reply::Product(_) | Reply::Json(_) => None,
        }
    }

    /// The body as a JSON value.
    pub fn json(&self) -> Value {
        match self {
            Reply::Intent(o) => o.to_json(),
            Reply::Charge(o) => o.to_json(),
            Reply::Refund(o) => o.to_json(),
            Reply::Customer(o) => o.to_json(),
            Reply::PaymentMethod(o) => o.to_json(),
            Reply::SetupIntent(o) => o.to_json(),
            Reply::Product(o) => o.to_json(),
            Reply::Price(o) => o.to_json(),
            Reply::CheckoutSession(o) => o.to_json(),
            Reply::Json(v) => (**v).clone(),
        }
    }
}
