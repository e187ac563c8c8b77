//! Lists and searches, shared by every resource: Stripe's `limit`, `starting_after` /
//! `ending_before` cursors and `page` tokens, and the `list` / `search_result` envelopes.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::provider::error::ApiError;
use crate::provider::params::Params;
use crate::provider::reply::Reply;
use crate::provider::search::{Query, Searchable};
use crate::provider::table::{Cursor, Keyed, Table};

/// The shape of a list request: page size, cursor and filters.
pub struct ListRequest {
    pub limit: usize,
    pub cursor: Cursor,
}

/// Reads a list request; `seq_of` finds a cursor object's position in its table.
pub fn list_request(p: &Params, seq_of: impl Fn(&str) -> Option<u64>) -> Result<ListRequest, ApiError> {
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
        (None, Some(id)) => {
            Cursor::EndingBefore(seq_of(id).ok_or_else(|| ApiError::unknown_reference("object", id, "ending_before"))?)
        }
        (None, None) => Cursor::Start,
    };
    Ok(ListRequest { limit, cursor })
}

/// A Stripe list of `table`'s objects that `keep` accepts, newest first.
pub fn list_page<V: Keyed + Clone>(
    table: &Table<V>,
    p: &Params,
    url: &str,
    parse: impl Fn(&str) -> Option<V::Key>,
    keep: impl Fn(&V) -> bool,
    to_json: impl Fn(&V) -> Value,
) -> Result<Reply, ApiError> {
    let req = list_request(p, |id| parse(id).and_then(|k| table.seq_of(&k)))?;
    let page = table.page(req.cursor, req.limit, keep);
    Ok(list_json(url, page.items.iter().map(to_json).collect(), page.has_more))
}

/// A Stripe search over `table` (`query`, `limit`, `page`), newest first.
pub fn search_page<T: Searchable>(
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
