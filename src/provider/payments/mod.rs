//! The payment rules: what each Stripe endpoint does to payment intents, charges and
//! refunds, and which money movements it writes to the ledger.
//!
//! [`Payments`] is plain Rust, free of HTTP: each operation takes validated
//! [`Params`] and the [`Attempt`] it came from and returns the Stripe object as JSON or
//! an [`ApiError`]. Money moves only under the ledger entry of the payment's correlation
//! id, taken before the object's own lock (always in the order ledger → intent → charge
//! → refund), so a state check and the transition it guards are one atomic step and the
//! duplicate check cannot race the append.
//!
//! One file per resource (`intents`, `charges`, `refunds`), each adding its operations
//! to [`Payments`]; `fields` turns request fields into domain values; this file holds
//! the state, the replies, and list and search paging shared by every resource.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::provider::attempt::Attempt;
use crate::provider::error::ApiError;
use crate::provider::ids::{ChargeId, CorrelationId, ObjectId, PaymentIntentId, RefundId};
use crate::provider::ledger::Ledger;
use crate::provider::objects::{Charge, PaymentIntent, Refund};
use crate::provider::params::Params;
use crate::provider::search::{Query, Searchable};
use crate::provider::table::{Cursor, Keyed, Table};

mod charges;
mod fields;
mod intents;
mod refunds;
#[cfg(test)]
mod tests;

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
        params.lookup_text(&self.0).map(CorrelationId::new)
    }
}

impl std::fmt::Display for CorrelationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

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

    /// A Stripe list of `table`'s objects that `keep` accepts, newest first.
    fn list_page<V: Keyed + Clone>(
        &self,
        table: &Table<V>,
        p: &Params,
        url: &str,
        parse: impl Fn(&str) -> Option<V::Key>,
        keep: impl Fn(&V) -> bool,
        to_json: impl Fn(&V) -> Value,
    ) -> Result<Reply, ApiError> {
        let req = self.list_request(p, |id| parse(id).and_then(|k| table.seq_of(&k)))?;
        let page = table.page(req.cursor, req.limit, keep);
        Ok(list_json(url, page.items.iter().map(to_json).collect(), page.has_more))
    }
}

/// A Stripe search over `table` (`query`, `limit`, `page`), newest first.
fn search_page<T: Searchable>(
    table: &Table<Arc<T>>,
    p: &Params,
    url: &str,
    to_json: impl Fn(&Arc<T>) -> Value,
) -> Result<Reply, ApiError>
where
    Arc<T>: Keyed,
{
    let (query, limit, cursor) = search_request(p)?;
    let page = table.page(cursor, limit, |v| query.matches(&**v));
    Ok(search_json(
        url,
        page.items.iter().map(to_json).collect(),
        page.has_more,
        page.last_seq,
    ))
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
