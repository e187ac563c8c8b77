//! Request parameters as Stripe sends them.
//!
//! Stripe clients send `application/x-www-form-urlencoded` bodies with bracket notation
//! (`metadata[order_id]=42`, `expand[]=latest_charge`, `items[0][price]=…`); others send
//! JSON. Both are turned into one [`Params`] tree (a JSON object), so every endpoint
//! validates one shape, and the idempotency fingerprint is computed over one canonical
//! form: keys are kept sorted, so reordered form fields are the same request. Typed
//! getters turn a missing or ill-typed parameter into a Stripe-shaped error naming it.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::ApiError;

/// Most parameters (leaves) a single request may carry.
pub const MAX_PARAMS: usize = 1_000;
/// Deepest bracket nesting accepted (`a[b][c]…`).
pub const MAX_DEPTH: usize = 8;

/// A request's parameters: always a JSON object at the top level.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Params(Map<String, Value>);

impl Params {
    /// Parses a form-encoded body or query string with Stripe's bracket notation.
    pub fn from_form(input: &[u8]) -> Result<Self, ApiError> {
        let mut root = Value::Object(Map::new());
        let mut count = 0usize;
        let mut indexed = false;
        for (name, value) in form_pairs(input) {
            if name.is_empty() {
                continue;
            }
            count += 1;
            if count > MAX_PARAMS {
                return Err(ApiError::invalid_request(
                    format!("Too many parameters: at most {MAX_PARAMS} are accepted."),
                    None,
                ));
            }
            let path = split_brackets(&name)?;
            let path = path.as_slice();
            indexed |= path
                .iter()
                .any(|seg| !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()));
            insert_path(&mut root, &name, path, Value::String(value.into_owned()))?;
        }
        // Only a name with an index (`items[0]`) can make an object that is a list.
        if indexed {
            Ok(Self(into_object(root)))
        } else {
            match root {
                Value::Object(m) => Ok(Self(m)),
                _ => Ok(Self::default()),
            }
        }
    }

    /// Parses a JSON body; the top level must be an object.
    pub fn from_json(input: &[u8]) -> Result<Self, ApiError> {
        if input.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        match serde_json::from_slice::<Value>(input) {
            Ok(Value::Object(map)) => Ok(Self(map)),
            Ok(_) => Err(ApiError::invalid_request(
                "Invalid JSON body: the top level must be an object.",
                None,
            )),
            Err(e) => Err(ApiError::invalid_request(format!("Invalid JSON body: {e}."), None)),
        }
    }

    /// The canonical byte form used for fingerprints: keys sorted, scalars as strings (a
    /// form sends `amount=100`, a JSON body `"amount":100`; both mean one thing), every
    /// string length-prefixed, so no two different trees share a form and nothing needs
    /// escaping.
    pub fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_canonical(&mut out);
        out
    }

    /// Writes [`Params::canonical`] to `out` without building it first (the idempotency
    /// fingerprint streams it into its hash).
    pub fn write_canonical(&self, mut out: impl std::io::Write) {
        let _ = write_map(&mut out, &self.0);
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// An optional string parameter; numbers and booleans are rejected.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::invalid_param(
                name,
                format!("Invalid string: {name} must be a string."),
            )),
        }
    }

    pub fn req_str(&self, name: &str) -> Result<&str, ApiError> {
        self.opt_str(name)?.ok_or_else(|| ApiError::missing_param(name))
    }

    /// An optional non-negative integer (a form value such as `"100"`, or a JSON number).
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, ApiError> {
        let invalid =
            || ApiError::invalid_param(name, format!("Invalid integer: {name} must be a non-negative integer."));
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(invalid),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => {
                if s.bytes().all(|b| b.is_ascii_digit()) {
                    s.parse::<u64>().map(Some).map_err(|_| invalid())
                } else {
                    Err(invalid())
                }
            }
            Some(_) => Err(invalid()),
        }
    }

    /// An optional boolean (`true`/`false` as a form string or a JSON boolean).
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" => Ok(Some(true)),
            Some(Value::String(s)) if s == "false" => Ok(Some(false)),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(_) => Err(ApiError::invalid_param(
                name,
                format!("Invalid boolean: {name} must be true or false."),
            )),
        }
    }

    /// An optional object parameter (`metadata[...]`, `automatic_payment_methods[...]`).
    pub fn opt_object(&self, name: &str) -> Result<Option<&Map<String, Value>>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            // Stripe clears metadata with `metadata=`; treat an empty string as "none".
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(_) => Err(ApiError::invalid_param(
                name,
                format!("Invalid object: {name} must be a hash (e.g. {name}[key]=value)."),
            )),
        }
    }

    /// Looks a dotted path up (`metadata.order_id`), as text.
    pub fn lookup_text(&self, path: &[String]) -> Option<String> {
        let (first, rest) = path.split_first()?;
        let mut cur = self.0.get(first)?;
        for seg in rest {
            cur = cur.as_object()?.get(seg)?;
        }
        match cur {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

/// A map in canonical form: `{`, its length, then its entries sorted by key.
fn write_map(out: &mut impl std::io::Write, map: &Map<String, Value>) -> std::io::Result<()> {
    out.write_all(b"{")?;
    out.write_all(&(map.len() as u32).to_le_bytes())?;
    // serde_json's map is sorted by key (unless a crate turns on `preserve_order`).
    if map.keys().is_sorted() {
        for (k, v) in map {
            write_text(out, k)?;
            write_value(out, v)?;
        }
    } else {
        let mut entries: Vec<_> = map.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in entries {
            write_text(out, k)?;
            write_value(out, v)?;
        }
    }
    Ok(())
}

/// A value in canonical form: booleans and numbers as the text a form would send.
fn write_value(out: &mut impl std::io::Write, value: &Value) -> std::io::Result<()> {
    match value {
        Value::Object(m) => write_map(out, m),
        Value::Array(a) => {
            out.write_all(b"[")?;
            out.write_all(&(a.len() as u32).to_le_bytes())?;
            a.iter().try_for_each(|v| write_value(out, v))
        }
        Value::String(x) => write_text(out, x),
        Value::Null => out.write_all(b"n"),
        Value::Bool(b) => write_text(out, if *b { "true" } else { "false" }),
        Value::Number(n) => write_text(out, &n.to_string()),
    }
}

/// A string: `s`, its length, its bytes.
fn write_text(out: &mut impl std::io::Write, text: &str) -> std::io::Result<()> {
    out.write_all(b"s")?;
    out.write_all(&(text.len() as u32).to_le_bytes())?;
    out.write_all(text.as_bytes())
}

/// The `name=value` pairs of a form body or query string, decoded (`+` is a space,
/// `%XX` a byte, invalid UTF-8 replaced), as `application/x-www-form-urlencoded` says.
/// A piece with nothing to decode (the usual case) is borrowed, not copied.
fn form_pairs(input: &[u8]) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    input
        .split(|&b| b == b'&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| {
            let (name, value) = match piece.iter().position(|&b| b == b'=') {
                Some(eq) => (&piece[..eq], &piece[eq + 1..]),
                None => (piece, &piece[piece.len()..]),
            };
            (form_decode(name), form_decode(value))
        })
}

fn form_decode(raw: &[u8]) -> Cow<'_, str> {
    if !raw.iter().any(|&b| b == b'%' || b == b'+') {
        return match std::str::from_utf8(raw) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(raw),
        };
    }
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut bytes = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => bytes.push(b' '),
            b'%' => match (
                raw.get(i + 1).copied().and_then(hex),
                raw.get(i + 2).copied().and_then(hex),
            ) {
                (Some(hi), Some(lo)) => {
                    bytes.push(hi << 4 | lo);
                    i += 2;
                }
                // A `%` not followed by two hex digits is kept as it is.
                _ => bytes.push(b'%'),
            },
            b => bytes.push(b),
        }
        i += 1;
    }
    match String::from_utf8(bytes) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

/// The segments of a parameter name, on the stack (at most [`MAX_DEPTH`]).
struct Segments<'a> {
    items: [&'a str; MAX_DEPTH],
    len: usize,
}

impl<'a> Segments<'a> {
    fn as_slice(&self) -> &[&'a str] {
        &self.items[..self.len]
    }
}

/// Splits `a[b][c]` into `["a", "b", "c"]`; `a[]` gives an empty last segment (append).
fn split_brackets(name: &str) -> Result<Segments<'_>, ApiError> {
    let malformed = || {
        ApiError::invalid_request(
            format!("Invalid parameter name: '{name}' has unbalanced brackets."),
            Some(name.to_string()),
        )
    };
    let mut out = Segments {
        items: [""; MAX_DEPTH],
        len: 1,
    };
    let Some(open) = name.find('[') else {
        out.items[0] = name;
        return Ok(out);
    };
    out.items[0] = &name[..open];
    if out.items[0].is_empty() {
        return Err(malformed());
    }
    // Segments beyond MAX_DEPTH are counted, not kept: the name is refused below.
    let mut count = 1;
    let mut rest = &name[open..];
    while !rest.is_empty() {
        if !rest.starts_with('[') {
            return Err(malformed());
        }
        let close = rest.find(']').ok_or_else(malformed)?;
        if count < MAX_DEPTH {
            out.items[count] = &rest[1..close];
        }
        count += 1;
        rest = &rest[close + 1..];
    }
    out.len = count.min(MAX_DEPTH);
    if count > MAX_DEPTH {
        return Err(ApiError::invalid_request(
            format!("Invalid parameter name: '{name}' is nested deeper than {MAX_DEPTH} levels."),
            Some(name.to_string()),
        ));
    }
    Ok(out)
}

fn insert_path(node: &mut Value, full: &str, path: &[&str], leaf: Value) -> Result<(), ApiError> {
    let conflict = || {
        ApiError::invalid_request(
            format!("Invalid parameter: '{full}' mixes a value and a hash or list under one name."),
            Some(full.to_string()),
        )
    };
    let Some((seg, rest)) = path.split_first() else {
        *node = leaf;
        return Ok(());
    };
    // `[]` appends to a list; `[0]`, `[1]` … are kept as an object keyed by index and
    // turned into lists once the whole body is read.
    if seg.is_empty() {
        if node.is_null() {
            *node = Value::Array(Vec::new());
        }
        let Value::Array(list) = node else {
            return Err(conflict());
        };
        if rest.is_empty() {
            list.push(leaf);
            return Ok(());
        }
        list.push(Value::Null);
        let last = list.last_mut().expect("just pushed");
        return insert_path(last, full, rest, leaf);
    }
    if node.is_null() {
        *node = Value::Object(Map::new());
    }
    let Value::Object(map) = node else {
        return Err(conflict());
    };
    // One search: the key is usually new, and then its `String` is needed anyway.
    let child = map.entry(*seg).or_insert(Value::Null);
    if rest.is_empty() && (child.is_object() || child.is_array()) {
        return Err(conflict());
    }
    if !rest.is_empty() && child.is_string() {
        return Err(conflict());
    }
    insert_path(child, full, rest, leaf)
}

/// Turns objects whose keys are exactly 0..n into lists, recursively.
fn into_object(root: Value) -> Map<String, Value> {
    fn fix(v: Value) -> Value {
        match v {
            Value::Object(m) => {
                let indexed = !m.is_empty() && (0..m.len()).all(|i| m.contains_key(&i.to_string()));
                if indexed {
                    let mut items: Vec<(usize, Value)> =
                        m.into_iter().map(|(k, v)| (k.parse().unwrap_or(0), fix(v))).collect();
                    items.sort_by_key(|(i, _)| *i);
                    Value::Array(items.into_iter().map(|(_, v)| v).collect())
                } else {
                    Value::Object(m.into_iter().map(|(k, v)| (k, fix(v))).collect())
                }
            }
            Value::Array(a) => Value::Array(a.into_iter().map(fix).collect()),
            other => other,
        }
    }
    match fix(root) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(s: &str) -> Params {
        Params::from_form(s.as_bytes()).unwrap()
    }

    #[test]
    fn bracket_notation_builds_nested_objects() {
        let p = form("amount=2000&currency=usd&metadata[order_id]=o-1&automatic_payment_methods[enabled]=true");
        assert_eq!(p.opt_u64("amount").unwrap(), Some(2000));
        assert_eq!(p.opt_object("metadata").unwrap().unwrap()["order_id"], json!("o-1"));
        assert_eq!(
            p.lookup_text(&["metadata".into(), "order_id".into()]).as_deref(),
            Some("o-1")
        );
    }

    #[test]
    fn lists_by_append_and_by_index() {
        let p = form("expand[]=a&expand[]=b&items[1][price]=p2&items[0][price]=p1");
        assert_eq!(p.get("expand").unwrap(), &json!(["a", "b"]));
        assert_eq!(p.get("items").unwrap(), &json!([{"price":"p1"},{"price":"p2"}]));
    }

    #[test]
    fn reordered_fields_and_json_share_one_fingerprint() {
        let a = form("amount=100&currency=usd&metadata[b]=2&metadata[a]=1");
        let b = form("metadata[a]=1&currency=usd&metadata[b]=2&amount=100");
        let c = Params::from_json(br#"{"amount":100,"currency":"usd","metadata":{"a":"1","b":"2"}}"#).unwrap();
        assert_eq!(a.canonical(), b.canonical());
        assert_eq!(a.canonical(), c.canonical());
        assert_ne!(
            a.canonical(),
            form("amount=101&currency=usd&metadata[b]=2&metadata[a]=1").canonical()
        );
    }

    #[test]
    fn canonical_form_keeps_boundaries_between_keys_and_values() {
        assert_ne!(form("a=bc").canonical(), form("ab=c").canonical());
        assert_ne!(form("a[b]=c").canonical(), form("a=b&c=").canonical());
        assert_ne!(form("a[]=x&a[]=y").canonical(), form("a[]=xy").canonical());
        assert_eq!(
            form("capture=true&amount=5").canonical(),
            Params::from_json(br#"{"amount":5,"capture":true}"#)
                .unwrap()
                .canonical()
        );
    }

    #[test]
    fn form_decoding_matches_the_url_standard() {
        let cases = [
            "a=1&b=x+y&c=%41%42&d=%zz&e=%4&f&=g&&h=%E2%82%AC&i=%ff&j[k]=a%26b%3Dc",
            "metadata%5Border_id%5D=o%201&amount=2000",
        ];
        for case in cases {
            let ours: Vec<(String, String)> = form_pairs(case.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let reference: Vec<(String, String)> = form_urlencoded::parse(case.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            assert_eq!(ours, reference, "{case}");
        }
        let p = form("metadata%5Border_id%5D=o%201");
        assert_eq!(
            p.lookup_text(&["metadata".into(), "order_id".into()]).as_deref(),
            Some("o 1")
        );
    }

    #[test]
    fn malformed_names_and_conflicts_are_errors_naming_the_param() {
        for bad in ["metadata[a=1", "[a]=1", "metadata[a]x=1", "a=1&a[b]=2", "a[b]=1&a=2"] {
            let err = Params::from_form(bad.as_bytes()).unwrap_err();
            assert_eq!(err.status.as_u16(), 400, "{bad}");
            assert!(err.param.is_some(), "{bad}");
        }
        let deep = format!("a{}=1", "[x]".repeat(MAX_DEPTH));
        assert!(Params::from_form(deep.as_bytes()).is_err());
    }

    #[test]
    fn typed_getters_name_the_param() {
        let p = form("amount=12x&capture=maybe&currency=usd");
        assert_eq!(p.opt_u64("amount").unwrap_err().param.as_deref(), Some("amount"));
        assert_eq!(p.opt_bool("capture").unwrap_err().param.as_deref(), Some("capture"));
        assert_eq!(
            p.req_str("payment_method").unwrap_err().param.as_deref(),
            Some("payment_method")
        );
        let j = Params::from_json(br#"{"amount":-5}"#).unwrap();
        assert!(j.opt_u64("amount").is_err());
        assert!(Params::from_json(b"[1,2]").is_err());
        assert!(Params::from_json(b"{").is_err());
    }

    #[test]
    fn too_many_params_is_an_error() {
        let body: String = (0..=MAX_PARAMS).map(|i| format!("metadata[k{i}]=v&")).collect();
        assert!(Params::from_form(body.as_bytes()).is_err());
    }
}
