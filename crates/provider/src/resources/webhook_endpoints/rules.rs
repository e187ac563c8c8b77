//! Webhook endpoints' operations: create (the only answer that shows the secret), list,
//! retrieve, update (`url`, `enabled_events`, `description`, `metadata`, `disabled`) and
//! delete, with Stripe's validation errors. Every change hands the enabled endpoints to
//! the events store, which delivers new events to them.

use std::sync::Arc;

use serde_json::json;

use super::object::{generate_secret, WebhookEndpoint};
use crate::error::ApiError;
use crate::fault_injection::attempt::Attempt;
use crate::reply::Reply;
use crate::resources::events::object::EventType;
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::state::table::Cursor;
use crate::stripe::fields::{metadata, metadata_update, text_at_most, text_update, MAX_TEXT_LEN};
use crate::stripe::ids::WebhookEndpointId;
use crate::stripe::paging::list_page;
use crate::stripe::params::{Kind, Params};

/// Stripe's limit of webhook endpoints per account.
pub const MAX_ENDPOINTS: usize = 16;
const MAX_URL: usize = 2_048;
/// The most entries `enabled_events` may list.
const MAX_ENABLED_EVENTS: usize = 256;

/// The resources whose events fauxpay emits: an event name under one of them must be
/// one fauxpay knows (a typo would never be delivered); names under other resources
/// (`invoice.paid`) are accepted and never sent, as fauxpay has no such objects.
const MODELLED: &[&str] = &["payment_intent", "charge", "customer", "payment_method", "setup_intent"];

pub fn check_url(url: &str) -> Result<Box<str>, ApiError> {
    let bad = || {
        ApiError::invalid_param(
            "url",
            format!("Invalid URL: {url}. A webhook endpoint's URL must be an absolute http:// or https:// URL."),
        )
    };
    if url.len() > MAX_URL {
        return Err(bad());
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad());
    }
    Ok(url.into())
}

/// One `enabled_events` entry: `*`, a known event, `prefix.*`, or an event of a resource
/// fauxpay does not model.
fn check_event_name(name: &str, param: &str) -> Result<(), ApiError> {
    let refuse = || {
        ApiError::invalid_param(
            param,
            format!(
                "Invalid {param}: '{name}' is not a valid event type (e.g. payment_intent.succeeded, charge.*, or *)."
            ),
        )
    };
    if name == "*" || EventType::parse(name).is_some() {
        return Ok(());
    }
    let well_formed = !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'.' || b == b'*' || b.is_ascii_digit());
    let Some((resource, rest)) = name.split_once('.').filter(|_| well_formed) else {
        return Err(refuse());
    };
    if rest == "*" {
        return Ok(());
    }
    if rest.contains('*') || MODELLED.contains(&resource) {
        return Err(refuse());
    }
    Ok(())
}

/// `enabled_events`: a non-empty list of event names.
fn enabled_events(p: &Params) -> Result<Option<Box<[Box<str>]>>, ApiError> {
    let Some(param) = p.get("enabled_events") else {
        return Ok(None);
    };
    let names: Vec<&str> = match param.kind() {
        Kind::List(list) => list.iter().map(|t| t.as_text().unwrap_or("")).collect(),
        Kind::Object(indexed) => indexed.iter().map(|(_, t)| t.as_text().unwrap_or("")).collect(),
        _ => param.as_text().into_iter().collect(),
    };
    if names.is_empty() {
        return Err(ApiError::invalid_param(
            "enabled_events",
            "Invalid enabled_events: must list at least one event type (or *).",
        ));
    }
    if names.len() > MAX_ENABLED_EVENTS {
        return Err(ApiError::invalid_param(
            "enabled_events",
            format!("Invalid enabled_events: at most {MAX_ENABLED_EVENTS} entries."),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        check_event_name(name, &format!("enabled_events[{i}]"))?;
    }
    Ok(Some(names.into_iter().map(Box::from).collect()))
}

impl Payments {
    /// The enabled endpoints, handed to the events store after every change.
    fn refresh_webhook_endpoints(&self) {
        let page = self
            .webhook_endpoints
            .page(Cursor::Start, MAX_ENDPOINTS * 4, |e| !e.disabled);
        self.events.set_endpoints(page.items);
    }

    /// Registers an endpoint for every event (`fauxpay serve --webhook URL`).
    pub fn register_webhook(&self, url: &str, secret: &str) -> Result<Arc<WebhookEndpoint>, ApiError> {
        let endpoint = Arc::new(WebhookEndpoint {
            id: WebhookEndpointId::generate(),
            created: now_unix(),
            url: check_url(url)?,
            enabled_events: vec![Box::from("*")].into(),
            description: Some("fauxpay serve --webhook".into()),
            metadata: Default::default(),
            disabled: false,
            secret: secret.into(),
            from_cli: true,
        });
        self.webhook_endpoints.insert(endpoint.clone());
        self.refresh_webhook_endpoints();
        Ok(endpoint)
    }

    /// Puts back endpoints registered before a reset (those of `--webhook`).
    pub fn restore_webhook_endpoints(&self, endpoints: &[Arc<WebhookEndpoint>]) {
        for e in endpoints {
            self.webhook_endpoints.insert(e.clone());
        }
        self.refresh_webhook_endpoints();
    }

    pub fn create_webhook_endpoint(&self, p: &Params, _attempt: &Attempt) -> Result<Reply, ApiError> {
        let url = check_url(p.req_str("url")?)?;
        let enabled_events = enabled_events(p)?.ok_or_else(|| ApiError::missing_param("enabled_events"))?;
        if p.opt_bool("connect")? == Some(true) {
            return Err(ApiError::invalid_param(
                "connect",
                "fauxpay has no connected accounts: connect must be false.",
            ));
        }
        let description = text_at_most(p, "description", MAX_TEXT_LEN)?;
        let metadata = metadata(p)?;
        if self.webhook_endpoints.len() >= MAX_ENDPOINTS {
            return Err(ApiError::invalid_request(
                format!("You have reached the maximum of {MAX_ENDPOINTS} test webhook endpoints."),
                None,
            ));
        }
        let endpoint = Arc::new(WebhookEndpoint {
            id: WebhookEndpointId::generate(),
            created: now_unix(),
            url,
            enabled_events,
            description,
            metadata,
            disabled: false,
            secret: generate_secret().into(),
            from_cli: false,
        });
        self.webhook_endpoints.insert(endpoint.clone());
        self.refresh_webhook_endpoints();
        Ok(Reply::Json(Box::new(endpoint.json(true))))
    }

    fn webhook_endpoint(&self, raw: &str) -> Result<Arc<WebhookEndpoint>, ApiError> {
        WebhookEndpointId::parse(raw)
            .and_then(|id| self.webhook_endpoints.get(&id))
            .ok_or_else(|| ApiError::unknown_object("webhook_endpoint", raw, "webhook_endpoint"))
    }

    pub fn retrieve_webhook_endpoint(&self, raw: &str) -> Result<Reply, ApiError> {
        Ok(Reply::Json(Box::new(self.webhook_endpoint(raw)?.json(false))))
    }

    pub fn list_webhook_endpoints(&self, p: &Params) -> Result<Reply, ApiError> {
        list_page(
            &self.webhook_endpoints,
            p,
            "/v1/webhook_endpoints",
            WebhookEndpointId::parse,
            |_| true,
            |e| e.json(false),
        )
    }

    pub fn update_webhook_endpoint(&self, raw: &str, p: &Params, _attempt: &Attempt) -> Result<Reply, ApiError> {
        let current = self.webhook_endpoint(raw)?;
        let url = p.opt_str("url")?.map(check_url).transpose()?;
        let enabled = enabled_events(p)?;
        let description = text_update(p, "description", MAX_TEXT_LEN)?;
        let disabled = p.opt_bool("disabled")?;
        let updated = self
            .webhook_endpoints
            .update(&current.id, |slot| {
                let mut e = (**slot).clone();
                e.metadata = metadata_update(&e.metadata, p)?;
                if let Some(url) = url {
                    e.url = url;
                }
                if let Some(events) = enabled {
                    e.enabled_events = events;
                }
                if let Some(d) = description {
                    e.description = d;
                }
                if let Some(d) = disabled {
                    e.disabled = d;
                }
                *slot = Arc::new(e);
                Ok(slot.clone())
            })
            .unwrap_or_else(|| Err(ApiError::unknown_object("webhook_endpoint", raw, "webhook_endpoint")))?;
        self.refresh_webhook_endpoints();
        Ok(Reply::Json(Box::new(updated.json(false))))
    }

    pub fn delete_webhook_endpoint(&self, raw: &str) -> Result<Reply, ApiError> {
        let current = self.webhook_endpoint(raw)?;
        self.webhook_endpoints.retain(|e| e.id != current.id);
        self.refresh_webhook_endpoints();
        Ok(Reply::Json(Box::new(json!({
            "id": current.id,
            "object": "webhook_endpoint",
            "deleted": true,
        }))))
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::{attempt, form, payments};

    #[test]
    fn create_shows_the_secret_once_and_validates() {
        let p = payments();
        let made = p
            .create_webhook_endpoint(
                &form("url=http://127.0.0.1:9/hook&enabled_events[]=payment_intent.succeeded&enabled_events[]=charge.*&metadata[team]=ops"),
                &attempt(),
            )
            .unwrap()
            .json();
        assert!(made["secret"].as_str().unwrap().starts_with("whsec_"));
        assert_eq!(made["status"], "enabled");
        let id = made["id"].as_str().unwrap();
        let got = p.retrieve_webhook_endpoint(id).unwrap().json();
        assert!(got.get("secret").is_none());
        assert_eq!(
            got["enabled_events"],
            serde_json::json!(["payment_intent.succeeded", "charge.*"])
        );
        assert_eq!(p.events.endpoints().len(), 1);

        for (body, param) in [
            ("enabled_events[]=*", "url"),
            ("url=ftp://x/y&enabled_events[]=*", "url"),
            ("url=http://x/y", "enabled_events"),
            (
                "url=http://x/y&enabled_events[]=payment_intent.succeded",
                "enabled_events[0]",
            ),
            (
                "url=http://x/y&enabled_events[]=*&enabled_events[]=charge",
                "enabled_events[1]",
            ),
        ] {
            let e = p.create_webhook_endpoint(&form(body), &attempt()).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
        assert!(p
            .create_webhook_endpoint(&form("url=http://x/y&enabled_events[]=invoice.paid"), &attempt())
            .is_ok());

        let off = p
            .update_webhook_endpoint(id, &form("disabled=true&description=paused"), &attempt())
            .unwrap()
            .json();
        assert_eq!(
            (off["status"].as_str(), off["description"].as_str()),
            (Some("disabled"), Some("paused"))
        );
        assert_eq!(p.events.endpoints().len(), 1, "a disabled endpoint gets nothing");
        let gone = p.delete_webhook_endpoint(id).unwrap().json();
        assert_eq!(gone["deleted"], true);
        assert_eq!(p.retrieve_webhook_endpoint(id).unwrap_err().status.code(), 404);
        let list = p.list_webhook_endpoints(&form("")).unwrap().json();
        assert_eq!(list["data"].as_array().unwrap().len(), 1);
    }
}
