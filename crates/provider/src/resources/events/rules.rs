//! Reading events: retrieve one, and list them newest first with Stripe's filters
//! (`type` — exact or with a `*` wildcard such as `payment_intent.*` —, `types[]`,
//! `created[gt|gte|lt|lte]`, `delivery_success`) and cursors. Events past the TTL are
//! gone even before the sweep removes them.

use super::object::{type_matches, Event};
use crate::error::ApiError;
use crate::reply::Reply;
use crate::state::clock::now_unix;
use crate::state::payments::Payments;
use crate::stripe::ids::EventId;
use crate::stripe::paging::{list_page, TimeRange};
use crate::stripe::params::{Kind, Params};

/// The most `types[]` a list may name (Stripe's limit).
const MAX_TYPES: usize = 20;

fn types(p: &Params) -> Result<Option<Vec<&str>>, ApiError> {
    let Some(param) = p.get("types") else {
        return Ok(None);
    };
    let names: Vec<&str> = match param.kind() {
        Kind::List(list) => list.iter().filter_map(|t| t.as_text()).collect(),
        Kind::Object(indexed) => indexed.iter().filter_map(|(_, t)| t.as_text()).collect(),
        _ => param.as_text().into_iter().collect(),
    };
    if names.len() > MAX_TYPES {
        return Err(ApiError::invalid_param(
            "types",
            format!("Invalid types: at most {MAX_TYPES} event types."),
        ));
    }
    Ok(Some(names))
}

impl Payments {
    pub fn retrieve_event(&self, raw: &str) -> Result<Reply, ApiError> {
        let now = now_unix();
        EventId::parse(raw)
            .and_then(|id| self.events.table.get(&id))
            .filter(|e| !self.events.expired(e, now))
            .map(|e| Reply::Json(Box::new(e.to_json())))
            .ok_or_else(|| ApiError::unknown_object("event", raw, "id"))
    }

    pub fn list_events(&self, p: &Params) -> Result<Reply, ApiError> {
        let kind = p.opt_str("type")?;
        let kinds = types(p)?;
        if kind.is_some() && kinds.is_some() {
            return Err(ApiError::invalid_request(
                "You may only specify one of these parameters: type, types.",
                Some("type".into()),
            ));
        }
        let created = TimeRange::of(p, "created")?;
        let delivered = p.opt_bool("delivery_success")?;
        let now = now_unix();
        let keep = |e: &Event| {
            let name = e.kind().as_str();
            !self.events.expired(e, now)
                && kind.is_none_or(|k| type_matches(k, name))
                && kinds.as_ref().is_none_or(|ks| ks.contains(&name))
                && created.contains(e.created())
                && delivered.is_none_or(|d| e.delivered() == d)
        };
        list_page(&self.events.table, p, "/v1/events", EventId::parse, keep, |e| {
            e.to_json()
        })
    }
}
