//! A document tree that remembers lines: TOML (through the `toml` crate's span protocol)
//! or JSON is read into [`Node`]s, each with the 1-based line its value starts on (a
//! table's header line for `[table]` and `[[array]]` tables; a table only implied by a
//! dotted header such as `[rules.match.metadata]` takes its first entry's line), so that
//! validation can name the exact line. JSON has no positions, so its nodes carry none.

use std::fmt;
use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::error::Diagnostic;

/// A value and the line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub line: Option<u32>,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Datetime(String),
    Null,
    Array(Vec<Node>),
    /// Entries in document order.
    Table(Vec<(String, Node)>),
}

impl Node {
    /// What the value is, for "expected …, got …" messages: `integer 5`, `string "x"`.
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Str(s) => format!("string {s:?}"),
            Value::Int(i) => format!("integer {i}"),
            Value::Float(x) => format!("number {x}"),
            Value::Bool(b) => format!("boolean {b}"),
            Value::Datetime(d) => format!("datetime {d}"),
            Value::Null => "null".to_string(),
            Value::Array(_) => "an array".to_string(),
            Value::Table(_) => "a table".to_string(),
        }
    }
}

/// Reads TOML text; a syntax error is one diagnostic at its line.
pub(crate) fn from_toml(source: &str, text: &str) -> Result<Node, Diagnostic> {
    match toml::from_str::<Located>(text) {
        Ok(raw) => Ok(LineIndex::new(text).node(raw)),
        Err(e) => Err(Diagnostic {
            source: source.to_string(),
            line: e.span().map(|s| LineIndex::new(text).line(s.start)),
            field: String::new(),
            message: format!("invalid TOML: {}", e.message().trim().replace('\n', "; ")),
        }),
    }
}

/// Reads JSON text; a syntax error is one diagnostic at its line.
pub(crate) fn from_json(source: &str, text: &str) -> Result<Node, Diagnostic> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => Ok(from_json_value(v)),
        Err(e) => Err(Diagnostic {
            source: source.to_string(),
            line: u32::try_from(e.line()).ok().filter(|l| *l > 0),
            field: String::new(),
            message: format!("invalid JSON: {e}"),
        }),
    }
}

/// A JSON value as a tree (without lines).
pub(crate) fn from_json_value(v: serde_json::Value) -> Node {
    use serde_json::Value as J;
    let value = match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::Str(s),
        J::Array(a) => Value::Array(a.into_iter().map(from_json_value).collect()),
        J::Object(o) => Value::Table(o.into_iter().map(|(k, v)| (k, from_json_value(v))).collect()),
    };
    Node { line: None, value }
}

/// Byte offset → 1-based line.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    fn line(&self, offset: usize) -> u32 {
        let line = self.starts.partition_point(|&s| s <= offset);
        u32::try_from(line).unwrap_or(u32::MAX)
    }

    fn node(&self, located: Located) -> Node {
        let value = match located.raw {
            Raw::Str(s) => Value::Str(s),
            Raw::Int(i) => Value::Int(i),
            Raw::Float(x) => Value::Float(x),
            Raw::Bool(b) => Value::Bool(b),
            Raw::Datetime(d) => Value::Datetime(d),
            Raw::Array(a) => Value::Array(a.into_iter().map(|n| self.node(n)).collect()),
            Raw::Table(t) => Value::Table(t.into_iter().map(|(k, n)| (k, self.node(n))).collect()),
        };
        let line = match (&located.span, &value) {
            (Some(span), _) => Some(self.line(span.start)),
            (None, Value::Table(entries)) => entries.iter().find_map(|(_, n)| n.line),
            (None, _) => None,
        };
        Node { line, value }
    }
}

/// The TOML deserializer's view of a document, with each value's span where it has one.
enum Raw {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Datetime(String),
    Array(Vec<Located>),
    Table(Vec<(String, Located)>),
}

/// A value and its byte span. The deserializer has no span for a table that only a dotted
/// header implies (`match` in `[rules.match.metadata]`), which `toml::Spanned` refuses:
/// this reads either.
struct Located {
    span: Option<Range<usize>>,
    raw: Raw,
}

/// The span protocol between the `toml` deserializer and `serde_spanned`: a struct of
/// this name and these fields is answered, when a span is known, by a map of them.
const SPANNED: &str = "$__serde_spanned_private_Spanned";
const SPAN_FIELDS: &[&str] = &[
    "$__serde_spanned_private_start",
    "$__serde_spanned_private_end",
    "$__serde_spanned_private_value",
];

/// How the `toml` crate hands a datetime to `deserialize_any`: a one-entry map.
const TOML_DATETIME_KEY: &str = "$__toml_private_datetime";

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

impl<'de> Deserialize<'de> for Located {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_struct(SPANNED, SPAN_FIELDS, LocatedVisitor)
    }
}

/// Reads the span map, or, when there is no span, the value itself.
struct LocatedVisitor;

fn unspanned<E>(raw: Result<Raw, E>) -> Result<Located, E> {
    raw.map(|raw| Located { span: None, raw })
}

impl<'de> Visitor<'de> for LocatedVisitor {
    type Value = Located;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Located, E> {
        unspanned(RawVisitor.visit_bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Located, E> {
        unspanned(RawVisitor.visit_i64(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Located, E> {
        unspanned(RawVisitor.visit_u64(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Located, E> {
        unspanned(RawVisitor.visit_f64(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Located, E> {
        unspanned(RawVisitor.visit_str(v))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Located, E> {
        unspanned(RawVisitor.visit_string(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Located, A::Error> {
        unspanned(RawVisitor.visit_seq(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Located, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Ok(Located {
                span: None,
                raw: Raw::Table(Vec::new()),
            });
        };
        if first != SPAN_FIELDS[0] {
            // No span: a table, of which `first` is the first key.
            return unspanned(table_from(first, map));
        }
        let start: usize = map.next_value()?;
        span_field(&mut map, SPAN_FIELDS[1])?;
        let end: usize = map.next_value()?;
        span_field(&mut map, SPAN_FIELDS[2])?;
        let raw: Raw = map.next_value()?;
        Ok(Located {
            span: Some(start..end),
            raw,
        })
    }
}

fn span_field<'de, A: MapAccess<'de>>(map: &mut A, expected: &str) -> Result<(), A::Error> {
    match map.next_key::<String>()? {
        Some(key) if key == expected => Ok(()),
        _ => Err(serde::de::Error::custom("a malformed span")),
    }
}

/// A table (or a datetime, which comes as a one-entry map) whose first key is read.
fn table_from<'de, A: MapAccess<'de>>(first: String, mut map: A) -> Result<Raw, A::Error> {
    if first == TOML_DATETIME_KEY {
        return Ok(Raw::Datetime(map.next_value::<String>()?));
    }
    let mut entries = vec![(first, map.next_value()?)];
    while let Some(key) = map.next_key::<String>()? {
        entries.push((key, map.next_value()?));
    }
    Ok(Raw::Table(entries))
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Raw, E> {
        i64::try_from(v)
            .map(Raw::Int)
            .map_err(|_| E::custom("integer out of range"))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        match map.next_key::<String>()? {
            Some(first) => table_from(first, map),
            None => Ok(Raw::Table(Vec::new())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: &Node) -> &[(String, Node)] {
        match &n.value {
            Value::Table(t) => t,
            other => panic!("not a table: {other:?}"),
        }
    }

    #[test]
    fn toml_values_and_tables_know_their_lines() {
        let text = "# c\nname = \"x\"\nwhen = 1979-05-27T07:32:00Z\n\n[[rules]]\nkind = \"a\"\nm = { x = 1 }\n\
                    [rules.window]\nstart = \"1s\"\n";
        let root = from_toml("f", text).unwrap();
        let t = table(&root);
        assert_eq!(t[0].1.line, Some(2));
        assert_eq!(t[1].1.value, Value::Datetime("1979-05-27T07:32:00Z".into()));
        let Value::Array(rules) = &t[2].1.value else { panic!() };
        assert_eq!(rules[0].line, Some(5));
        let rule = table(&rules[0]);
        assert_eq!(rule[0].1.line, Some(6));
        assert_eq!(rule[1].1.line, Some(7));
        assert_eq!(rule[2].1.line, Some(8), "a [table] starts at its header");
        assert_eq!(table(&rule[2].1)[0].1.line, Some(9));
    }

    #[test]
    fn tables_implied_by_dotted_headers_and_keys_are_read() {
        let text =
            "[[rules]]\nkind = \"a\"\n\n[rules.match.metadata]\ntier = \"gold\"\n\n[rules.window]\nstart.x = 1\n";
        let root = from_toml("f", text).unwrap();
        let Value::Array(rules) = &table(&root)[0].1.value else {
            panic!()
        };
        let rule = table(&rules[0]);
        assert_eq!(rule[1].0, "match");
        assert_eq!(rule[1].1.line, Some(4), "an implied table takes its first entry's line");
        let metadata = &table(&rule[1].1)[0];
        assert_eq!((metadata.0.as_str(), metadata.1.line), ("metadata", Some(4)));
        assert_eq!(table(&metadata.1)[0].1.value, Value::Str("gold".into()));
        let start = &table(&rule[2].1)[0].1;
        assert_eq!(table(start)[0].1.value, Value::Int(1));
        assert_eq!(start.line, Some(8));
    }

    #[test]
    fn toml_syntax_errors_are_one_line() {
        let e = from_toml("f.toml", "a = 1\nb = \n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.starts_with("invalid TOML: "), "{}", e.message);
        assert!(!e.to_string().contains('\n'));
        let e = from_toml("f.toml", "a = 1\na = 2\n").unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn json_has_values_but_no_lines() {
        let root = from_json("f.json", r#"{"a": 1, "b": [1.5, null], "c": "x"}"#).unwrap();
        let t = table(&root);
        assert_eq!(
            t[0].1,
            Node {
                line: None,
                value: Value::Int(1)
            }
        );
        assert_eq!(t[2].1.describe(), "string \"x\"");
        let e = from_json("f.json", "{\n\"a\": }").unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn line_index_maps_offsets() {
        let idx = LineIndex::new("a\nbc\n\nd");
        assert_eq!([0, 1, 2, 4, 5, 6].map(|o| idx.line(o)), [1, 1, 2, 2, 3, 4]);
    }
}
