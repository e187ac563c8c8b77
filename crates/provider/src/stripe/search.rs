//! Stripe's search query language, the subset fauxpay needs.
//!
//! `GET /v1/payment_intents/search?query=metadata['order_id']:'o-42' AND status:'succeeded'`
//! parses into a [`Query`]: clauses joined by `AND` or by `OR` (Stripe forbids mixing
//! them), each a field or `metadata['key']`, an operator (`:` equals, `-` prefix negates,
//! `>`, `<`, `>=`, `<=` for numbers) and a quoted or bare value. Objects answer through
//! the [`Searchable`] trait, so the same query runs over intents and charges.

use crate::error::ApiError;

/// What a searchable object exposes to queries.
pub trait Searchable {
    /// A named field's value as text (`status`, `currency`, `amount`, …).
    fn field(&self, name: &str) -> Option<String>;
    fn metadata(&self, key: &str) -> Option<&str>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Named(String),
    Metadata(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Gt,
    Lt,
    Gte,
    Lte,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    pub field: Field,
    pub negated: bool,
    pub op: Op,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub clauses: Vec<Clause>,
    /// True for `OR`, false for `AND` (or a single clause).
    pub any: bool,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::invalid_param("query", msg)
}

impl Query {
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let input = input.trim();
        if input.is_empty() {
            return Err(ApiError::missing_param("query"));
        }
        if input.len() > 10_000 {
            return Err(bad("Search query is too long (10,000 characters at most)."));
        }
        let mut rest = input;
        let mut clauses = Vec::new();
        let mut joiner: Option<bool> = None;
        loop {
            let (clause, after) = parse_clause(rest)?;
            clauses.push(clause);
            rest = after.trim_start();
            if rest.is_empty() {
                break;
            }
            let any = if let Some(r) = rest.strip_prefix("AND ") {
                rest = r;
                false
            } else if let Some(r) = rest.strip_prefix("OR ") {
                rest = r;
                true
            } else {
                return Err(bad(format!("Search query: expected AND or OR at '{rest}'.")));
            };
            if joiner.is_some_and(|j| j != any) {
                return Err(bad("Search query: AND and OR cannot be mixed in one query."));
            }
            joiner = Some(any);
            rest = rest.trim_start();
            if clauses.len() >= 10 {
                return Err(bad("Search query: at most 10 clauses are supported."));
            }
        }
        Ok(Query {
            clauses,
            any: joiner.unwrap_or(false),
        })
    }

    pub fn matches(&self, obj: &impl Searchable) -> bool {
        let test = |c: &Clause| c.matches(obj);
        if self.any {
            self.clauses.iter().any(test)
        } else {
            self.clauses.iter().all(test)
        }
    }

    /// The value of an equality clause on `metadata[key]`, if the query is exactly that
    /// clause joined by AND: lets a caller use an index.
    pub fn metadata_equals(&self, key: &str) -> Option<&str> {
        if self.any && self.clauses.len() > 1 {
            return None;
        }
        self.clauses.iter().find_map(|c| match &c.field {
            Field::Metadata(k) if k == key && c.op == Op::Eq && !c.negated => Some(c.value.as_str()),
            _ => None,
        })
    }
}

impl Clause {
    fn matches(&self, obj: &impl Searchable) -> bool {
        let value = match &self.field {
            Field::Metadata(k) => obj.metadata(k).map(str::to_string),
            Field::Named(n) => obj.field(n),
        };
        let hit = match (self.op, value) {
            (_, None) => false,
            (Op::Eq, Some(v)) => v == self.value,
            (op, Some(v)) => match (v.parse::<i64>(), self.value.parse::<i64>()) {
                (Ok(a), Ok(b)) => match op {
                    Op::Gt => a > b,
                    Op::Lt => a < b,
                    Op::Gte => a >= b,
                    Op::Lte => a <= b,
                    Op::Eq => a == b,
                },
                _ => false,
            },
        };
        hit != self.negated
    }
}

/// The canonical text of a query: what [`Query::parse`] reads back as the same query
/// (values and metadata keys single-quoted, `\\` and `'` escaped).
impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let quote = |s: &str| s.replace('\\', "\\\\").replace('\'', "\\'");
        for (i, c) in self.clauses.iter().enumerate() {
            if i > 0 {
                f.write_str(if self.any { " OR " } else { " AND " })?;
            }
            if c.negated {
                f.write_str("-")?;
            }
            match &c.field {
                Field::Named(n) => f.write_str(n)?,
                Field::Metadata(k) => write!(f, "metadata['{}']", quote(k))?,
            }
            let op = match c.op {
                Op::Eq => ":",
                Op::Gt => ">",
                Op::Lt => "<",
                Op::Gte => ">=",
                Op::Lte => "<=",
            };
            write!(f, "{op}'{}'", quote(&c.value))?;
        }
        Ok(())
    }
}

fn parse_clause(s: &str) -> Result<(Clause, &str), ApiError> {
    let (negated, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (field, s) = if let Some(r) = s.strip_prefix("metadata[") {
        let (key, r) = quoted(r).ok_or_else(|| bad("Search query: metadata keys are written metadata['key']."))?;
        let r = r
            .strip_prefix(']')
            .ok_or_else(|| bad("Search query: expected ']' after the metadata key."))?;
        (Field::Metadata(key), r)
    } else {
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(s.len());
        if end == 0 {
            return Err(bad(format!("Search query: expected a field at '{s}'.")));
        }
        (Field::Named(s[..end].to_string()), &s[end..])
    };
    let (op, s) = if let Some(r) = s.strip_prefix(">=") {
        (Op::Gte, r)
    } else if let Some(r) = s.strip_prefix("<=") {
        (Op::Lte, r)
    } else if let Some(r) = s.strip_prefix('>') {
        (Op::Gt, r)
    } else if let Some(r) = s.strip_prefix('<') {
        (Op::Lt, r)
    } else if let Some(r) = s.strip_prefix(':') {
        (Op::Eq, r)
    } else {
        return Err(bad(format!(
            "Search query: expected ':', '>', '<', '>=' or '<=' at '{s}'."
        )));
    };
    let (value, rest) = match quoted(s) {
        Some(v) => v,
        None if s.starts_with(['\'', '"']) => {
            return Err(bad("Search query: a quoted value has no closing quote."));
        }
        None => {
            let end = s.find(char::is_whitespace).unwrap_or(s.len());
            if end == 0 {
                return Err(bad("Search query: a clause has no value."));
            }
            (s[..end].to_string(), &s[end..])
        }
    };
    Ok((
        Clause {
            field,
            negated,
            op,
            value,
        },
        rest,
    ))
}

/// Reads a `'…'` or `"…"` string with `\` escapes; None if `s` does not start with a quote.
fn quoted(s: &str) -> Option<(String, &str)> {
    let quote = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let mut out = String::new();
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return Some((out, &s[i + 1..]));
        } else {
            out.push(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Obj {
        status: &'static str,
        amount: u64,
        meta: BTreeMap<String, String>,
    }

    impl Searchable for Obj {
        fn field(&self, name: &str) -> Option<String> {
            match name {
                "status" => Some(self.status.into()),
                "amount" => Some(self.amount.to_string()),
                _ => None,
            }
        }
        fn metadata(&self, key: &str) -> Option<&str> {
            self.meta.get(key).map(String::as_str)
        }
    }

    fn obj() -> Obj {
        Obj {
            status: "succeeded",
            amount: 1500,
            meta: [("order_id".to_string(), "o-1".to_string())].into(),
        }
    }

    #[test]
    fn metadata_and_fields_match() {
        let o = obj();
        assert!(Query::parse("metadata['order_id']:'o-1'").unwrap().matches(&o));
        assert!(!Query::parse("metadata['order_id']:'o-2'").unwrap().matches(&o));
        assert!(Query::parse("status:'succeeded' AND amount>1000").unwrap().matches(&o));
        assert!(!Query::parse("status:'succeeded' AND amount<1000").unwrap().matches(&o));
        assert!(Query::parse("status:'canceled' OR amount>=1500").unwrap().matches(&o));
        assert!(Query::parse("-status:'canceled'").unwrap().matches(&o));
        assert!(Query::parse("metadata[\"order_id\"]:\"o-1\"").unwrap().matches(&o));
    }

    #[test]
    fn index_hint_only_for_plain_equality() {
        let q = Query::parse("metadata['order_id']:'o-1' AND status:'succeeded'").unwrap();
        assert_eq!(q.metadata_equals("order_id"), Some("o-1"));
        assert_eq!(
            Query::parse("metadata['order_id']:'o-1' OR status:'x'")
                .unwrap()
                .metadata_equals("order_id"),
            None
        );
    }

    #[test]
    fn malformed_queries_name_the_query_param() {
        for bad in [
            "",
            "status",
            "metadata[order_id]:'x'",
            "status:'a' AND amount>1 OR x:'y'",
            "status:'a' NOT x:'b'",
            "metadata['a':'b'",
            "status:'succeeded",
            "metadata['order_id']:\"o-1",
        ] {
            let e = Query::parse(bad).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("query"), "{bad}");
        }
    }
}
