//! A webhook endpoint: its URL, which events it wants (`enabled_events`: `*`, exact
//! names, or `prefix.*`), whether it is disabled, its description and metadata, and its
//! signing secret (`whsec_…`), with Stripe's `webhook_endpoint` JSON.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::resources::events::object::{type_matches, EventType, API_VERSION};
use crate::state::table::Keyed;
use crate::stripe::ids::{Token, WebhookEndpointId};
use crate::stripe::json::Metadata;

/// A fresh signing secret: `whsec_` and 32 random alphanumerics.
pub fn generate_secret() -> String {
    let (a, b) = (Token::random().text(), Token::random().text());
    format!("whsec_{}{}", &a[..16], &b[..16])
}

#[derive(Debug, Clone)]
pub struct WebhookEndpoint {
    pub id: WebhookEndpointId,
    pub created: i64,
    pub url: Box<str>,
    /// `*`, event names, or prefixes (`payment_intent.*`).
    pub enabled_events: Box<[Box<str>]>,
    pub description: Option<Box<str>>,
    pub metadata: Metadata,
    pub disabled: bool,
    pub secret: Arc<str>,
    /// Set by `fauxpay serve --webhook` (listed like the others).
    pub from_cli: bool,
}

impl WebhookEndpoint {
    /// Whether an event of `kind` is delivered here.
    pub fn wants(&self, kind: EventType) -> bool {
        !self.disabled && self.enabled_events.iter().any(|p| type_matches(p, kind.as_str()))
    }

    /// Stripe's JSON, with the secret only when `with_secret` (the create answer).
    pub fn json(&self, with_secret: bool) -> Value {
        let mut v = json!({
            "id": self.id,
            "object": "webhook_endpoint",
            "api_version": API_VERSION,
            "application": null,
            "created": self.created,
            "description": self.description.as_deref(),
            "enabled_events": self.enabled_events,
            "livemode": false,
            "metadata": self.metadata,
            "status": if self.disabled { "disabled" } else { "enabled" },
            "url": self.url,
        });
        if with_secret {
            v["secret"] = json!(self.secret);
        }
        v
    }
}

impl Keyed for Arc<WebhookEndpoint> {
    type Key = WebhookEndpointId;
    fn key(&self) -> WebhookEndpointId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wants_what_it_enables_unless_disabled_and_hides_its_secret() {
        let mut e = WebhookEndpoint {
            id: WebhookEndpointId::generate(),
            created: 1,
            url: "http://localhost:1/hook".into(),
            enabled_events: vec![Box::from("payment_intent.*"), Box::from("charge.failed")].into(),
            description: None,
            metadata: Metadata::new(),
            disabled: false,
            secret: generate_secret().into(),
            from_cli: false,
        };
        assert!(e.wants(EventType::PaymentIntentSucceeded));
        assert!(e.wants(EventType::ChargeFailed));
        assert!(!e.wants(EventType::ChargeSucceeded));
        assert!(e.json(false).get("secret").is_none());
        assert!(e.json(true)["secret"].as_str().unwrap().starts_with("whsec_"));
        assert_eq!(e.secret.len(), 6 + 32);
        e.disabled = true;
        assert!(!e.wants(EventType::PaymentIntentSucceeded));
        assert_eq!(e.json(false)["status"], "disabled");
    }
}
