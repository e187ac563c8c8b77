//! A setup intent: its state, and its Stripe JSON (`setup_intent`, API version
//! 2023-08-16). Also [`Usage`], how a saved payment method will be used, which payment
//! intents' `setup_future_usage` shares.

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::resources::three_ds::action::NextAction;
use crate::state::table::Keyed;
use crate::stripe::cards::Decline;
use crate::stripe::ids::{CustomerId, PaymentMethodId, SetupIntentId};
use crate::stripe::json::{Metadata, Null, CLIENT_SECRET};

/// How a saved payment method will be used: a setup intent's `usage`, a payment
/// intent's `setup_future_usage`. Off-session use is what lets a later payment skip
/// authentication on a card that asks for it "unless set up".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    OnSession,
    OffSession,
}

impl Usage {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "on_session" => Some(Self::OnSession),
            "off_session" => Some(Self::OffSession),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnSession => "on_session",
            Self::OffSession => "off_session",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupStatus {
    RequiresPaymentMethod,
    RequiresConfirmation,
    RequiresAction,
    Canceled,
    Succeeded,
}

impl SetupStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequiresPaymentMethod => "requires_payment_method",
            Self::RequiresConfirmation => "requires_confirmation",
            Self::RequiresAction => "requires_action",
            Self::Canceled => "canceled",
            Self::Succeeded => "succeeded",
        }
    }
}

/// Why a setup intent was canceled (the reasons a client may give).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupCancellationReason {
    Abandoned,
    Duplicate,
    RequestedByCustomer,
}

impl SetupCancellationReason {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "abandoned" => Some(Self::Abandoned),
            "duplicate" => Some(Self::Duplicate),
            "requested_by_customer" => Some(Self::RequestedByCustomer),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Abandoned => "abandoned",
            Self::Duplicate => "duplicate",
            Self::RequestedByCustomer => "requested_by_customer",
        }
    }
}

/// Stripe's `last_setup_error` (an `api_errors` object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastSetupError {
    pub code: std::borrow::Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decline_code: Option<std::borrow::Cow<'static, str>>,
    pub doc_url: String,
    pub message: std::borrow::Cow<'static, str>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

fn doc_url(code: &str) -> String {
    format!("https://stripe.com/docs/error-codes/{}", code.replace('_', "-"))
}

impl LastSetupError {
    /// The card was declined on setup.
    pub fn from_decline(d: &Decline) -> Self {
        Self {
            doc_url: doc_url(&d.code),
            code: d.code.clone(),
            decline_code: Some(d.decline_code.clone()),
            message: d.message.clone(),
            kind: "card_error",
        }
    }

    /// The customer failed the 3-D Secure authentication.
    pub fn authentication_failure() -> Self {
        const CODE: &str = "setup_intent_authentication_failure";
        Self {
            doc_url: doc_url(CODE),
            code: CODE.into(),
            decline_code: None,
            message: "The latest attempt to set up the payment method has failed because authentication failed.".into(),
            kind: "invalid_request_error",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SetupIntent {
    pub id: SetupIntentId,
    pub created: i64,
    pub status: SetupStatus,
    pub usage: Usage,
    pub customer: Option<CustomerId>,
    /// Always a saved payment method (a magic `pm_card_…` is saved when named).
    pub payment_method: Option<PaymentMethodId>,
    pub description: Option<Box<str>>,
    pub metadata: Metadata,
    pub cancellation_reason: Option<SetupCancellationReason>,
    pub last_setup_error: Option<Box<LastSetupError>>,
    pub next_action: Option<Box<NextAction>>,
    /// `payment_method_types` as sent; `None` is Stripe's default, `["card"]`.
    pub payment_method_types: Option<Box<[Box<str>]>>,
}

impl SetupIntent {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// `{id}_secret_{…}`, derived from the id.
    pub fn client_secret(&self) -> String {
        format!("{}_secret_{}", self.id, &*self.id.token().derived(CLIENT_SECRET).text())
    }
}

#[derive(Serialize)]
struct PaymentMethodOptions {
    card: CardOptions,
}

#[derive(Serialize)]
struct CardOptions {
    mandate_options: Null,
    network: Null,
    request_three_d_secure: &'static str,
}

impl Serialize for SetupIntent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const CARD: &[&str] = &["card"];
        let mut o = s.serialize_struct("SetupIntent", 24)?;
        o.serialize_field("id", &self.id)?;
        o.serialize_field("object", "setup_intent")?;
        o.serialize_field("application", &Null)?;
        o.serialize_field("automatic_payment_methods", &Null)?;
        o.serialize_field("cancellation_reason", &self.cancellation_reason.map(|r| r.as_str()))?;
        o.serialize_field("client_secret", &self.client_secret())?;
        o.serialize_field("created", &self.created)?;
        o.serialize_field("customer", &self.customer)?;
        o.serialize_field("description", &self.description)?;
        o.serialize_field("flow_directions", &Null)?;
        o.serialize_field("last_setup_error", &self.last_setup_error)?;
        o.serialize_field("latest_attempt", &Null)?;
        o.serialize_field("livemode", &false)?;
        o.serialize_field("mandate", &Null)?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("next_action", &self.next_action)?;
        o.serialize_field("on_behalf_of", &Null)?;
        o.serialize_field("payment_method", &self.payment_method)?;
        o.serialize_field(
            "payment_method_options",
            &PaymentMethodOptions {
                card: CardOptions {
                    mandate_options: Null,
                    network: Null,
                    request_three_d_secure: "automatic",
                },
            },
        )?;
        match &self.payment_method_types {
            Some(types) => o.serialize_field("payment_method_types", types)?,
            None => o.serialize_field("payment_method_types", CARD)?,
        }
        o.serialize_field("single_use_mandate", &Null)?;
        o.serialize_field("status", self.status.as_str())?;
        o.serialize_field("usage", self.usage.as_str())?;
        o.end()
    }
}

impl Keyed for Arc<SetupIntent> {
    type Key = SetupIntentId;
    fn key(&self) -> SetupIntentId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn intent() -> SetupIntent {
        SetupIntent {
            id: SetupIntentId::generate(),
            created: 1_700_000_000,
            status: SetupStatus::RequiresPaymentMethod,
            usage: Usage::OffSession,
            customer: None,
            payment_method: None,
            description: None,
            metadata: Metadata::new(),
            cancellation_reason: None,
            last_setup_error: None,
            next_action: None,
            payment_method_types: None,
        }
    }

    #[test]
    fn json_has_stripes_shape() {
        let mut si = intent();
        let j = si.to_json();
        let id = j["id"].as_str().unwrap();
        assert!(id.starts_with("seti_"));
        assert_eq!(j["object"], "setup_intent");
        let secret = j["client_secret"].as_str().unwrap();
        assert!(secret.starts_with(&format!("{id}_secret_")) && secret.len() == id.len() + 8 + 24);
        assert_eq!(secret, si.client_secret(), "stable");
        assert_eq!(j["status"], "requires_payment_method");
        assert_eq!(j["usage"], "off_session");
        assert_eq!(j["payment_method_types"], json!(["card"]));
        for null in [
            "customer",
            "payment_method",
            "latest_attempt",
            "mandate",
            "next_action",
            "last_setup_error",
        ] {
            assert_eq!(j[null], Value::Null, "{null}");
        }
        assert_eq!(
            j["payment_method_options"]["card"]["request_three_d_secure"],
            "automatic"
        );
        si.customer = Some(CustomerId::generate());
        si.status = SetupStatus::RequiresAction;
        si.usage = Usage::OnSession;
        si.cancellation_reason = Some(SetupCancellationReason::RequestedByCustomer);
        si.next_action = Some(Box::new(NextAction::new(None, id, None)));
        si.last_setup_error = Some(Box::new(LastSetupError::authentication_failure()));
        si.payment_method_types = Some(vec!["card".into(), "link".into()].into());
        let j = si.to_json();
        assert_eq!(j["customer"], si.customer.unwrap().to_string());
        assert_eq!(j["status"], "requires_action");
        assert_eq!(j["usage"], "on_session");
        assert_eq!(j["cancellation_reason"], "requested_by_customer");
        assert_eq!(j["next_action"]["type"], "use_stripe_sdk");
        assert_eq!(j["last_setup_error"]["code"], "setup_intent_authentication_failure");
        assert_eq!(j["last_setup_error"]["type"], "invalid_request_error");
        assert!(j["last_setup_error"].get("decline_code").is_none());
        assert_eq!(j["payment_method_types"], json!(["card", "link"]));
    }

    #[test]
    fn usage_and_reasons_parse_their_own_names() {
        for u in [Usage::OnSession, Usage::OffSession] {
            assert_eq!(Usage::parse(u.as_str()), Some(u));
        }
        assert_eq!(Usage::parse("later"), None);
        for r in [
            SetupCancellationReason::Abandoned,
            SetupCancellationReason::Duplicate,
            SetupCancellationReason::RequestedByCustomer,
        ] {
            assert_eq!(SetupCancellationReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(SetupCancellationReason::parse("fraudulent"), None);
        let d = LastSetupError::from_decline(&Decline {
            code: "card_declined".into(),
            decline_code: "generic_decline".into(),
            message: "Your card was declined.".into(),
        });
        assert_eq!(d.doc_url, "https://stripe.com/docs/error-codes/card-declined");
        assert_eq!(d.kind, "card_error");
    }
}
