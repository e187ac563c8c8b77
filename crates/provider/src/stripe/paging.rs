//! Lists and searches, shared by every resource: Stripe's `limit`, `starting_after` /
//! `ending_before` cursors and `page` tokens, and the `list` / `search_result` envelopes.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::error::ApiError;
use crate::reply::Reply;
use crate::state::table::{Cursor, Keyed, Row, Table};
use crate::stripe::params::Params;
use crate::stripe::search::{Query, Searchable};

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
pub fn list_page<V: Row>(
    table: &Table<V>,
    p: &Params,
    url: &str,
    parse: impl Fn(&str) -> Option<V::Key>,
    keep: impl Fn(&V::Item) -> bool,
    to_json: impl Fn(&V::Item) -> Value,
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
    search_page_where(table, p, url, |_| true, to_json)
}

/// [`search_page`] over the objects `keep` accepts (e.g. not deleted).
pub fn search_page_where<T: Searchable>(
    table: &Table<Arc<T>>,
    p: &Params,
    url: &str,
    keep: impl Fn(&Arc<T>) -> bool,
    to_json: impl Fn(&Arc<T>) -> Value,
) -> Result<Reply, ApiError>
where
    Arc<T>: Keyed,
{
    let (query, limit, cursor) = search_request(p)?;
    let page = table.page(cursor, limit, |v| keep(v) && query.matches(&**v));
    Ok(search_json(
        url,
        page.items.iter().map(to_json).collect(),
        page.has_more,
        page.last_seq,
    ))
}

/// A list's timestamp filter, as Stripe takes `created`: an exact time
/// (`created=1700000000`) or bounds (`created[gt]`, `created[gte]`, `created[lt]`,
/// `created[lte]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub gt: Option<i64>,
    pub gte: Option<i64>,
    pub lt: Option<i64>,
    pub lte: Option<i64>,
}

impl TimeRange {
    /// The range named `name` in `p` (every time when absent).
    pub fn of(p: &Params, name: &str) -> Result<Self, ApiError> {
        let Some(param) = p.get(name) else {
            return Ok(Self::default());
        };
        let int = |text: Option<&str>, param: &str| {
            text.filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse::<i64>().ok())
                .ok_or_else(|| {
                    ApiError::invalid_param(param, format!("Invalid integer: {param} must be a Unix timestamp."))
                })
        };
        let Some(bounds) = param.as_object() else {
            let exact = int(param.as_text(), name)?;
            return Ok(Self {
                gte: Some(exact),
                lte: Some(exact),
                ..Self::default()
            });
        };
        let mut range = Self::default();
        for (key, value) in bounds.iter() {
            let param = format!("{name}[{key}]");
            let slot = match key {
                "gt" => &mut range.gt,
                "gte" => &mut range.gte,
                "lt" => &mut range.lt,
                "lte" => &mut range.lte,
                _ => {
                    return Err(
                        ApiError::invalid_request(format!("Received unknown parameter: {param}"), Some(param))
                            .with_code("parameter_unknown"),
                    )
                }
            };
            *slot = Some(int(value.as_text(), &param)?);
        }
        Ok(range)
    }

    pub fn contains(&self, t: i64) -> bool {
        self.gt.is_none_or(|b| t > b)
            && self.gte.is_none_or(|b| t >= b)
            && self.lt.is_none_or(|b| t < b)
            && self.lte.is_none_or(|b| t <= b)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn form(s: &str) -> Params {
        Params::from_form(s.as_bytes()).unwrap()
    }

    #[test]
    fn time_ranges_take_an_exact_time_or_bounds() {
        let all = TimeRange::of(&form("limit=3"), "created").unwrap();
        assert!(all.contains(0) && all.contains(i64::MAX));
        let exact = TimeRange::of(&form("created=100"), "created").unwrap();
        assert!(exact.contains(100) && !exact.contains(99) && !exact.contains(101));
        let r = TimeRange::of(&form("created[gt]=10&created[lte]=20"), "created").unwrap();
        assert!(!r.contains(10) && r.contains(11) && r.contains(20) && !r.contains(21));
        let r = TimeRange::of(&form("created[gte]=10&created[lt]=20"), "created").unwrap();
        assert!(r.contains(10) && !r.contains(20));
        let e = TimeRange::of(&form("created[gt]=soon"), "created").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("created[gt]"));
        let e = TimeRange::of(&form("created[after]=1"), "created").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("created[after]"));
        assert_eq!(e.code.as_deref(), Some("parameter_unknown"));
        assert!(TimeRange::of(&form("created=x"), "created").is_err());
    }
}
