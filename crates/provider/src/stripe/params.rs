//! Request parameters as Stripe sends them.
//!
//! Stripe clients send `application/x-www-form-urlencoded` bodies with bracket notation
//! (`metadata[order_id]=42`, `expand[]=latest_charge`, `items[0][price]=…`); others send
//! JSON. Both are turned into one [`Params`] tree, so every endpoint validates one
//! shape, and the idempotency fingerprint is computed over one canonical form: keys are
//! kept sorted, so reordered form fields are the same request. Typed getters turn a
//! missing or ill-typed parameter into a Stripe-shaped error naming it.
//!
//! The tree is built for the request path: every key and string lives in one text
//! buffer and the nodes hold spans of it, objects are vectors sorted by key, so parsing a
//! form costs a few allocations, not two per field.

use std::borrow::Cow;

use serde_json::Value;

pub mod as_json;
pub mod packed;

use crate::error::ApiError;

/// Most parameters (leaves) a single request may carry.
pub const MAX_PARAMS: usize = 1_000;
/// Deepest bracket nesting accepted (`a[b][c]…`).
pub const MAX_DEPTH: usize = 8;

/// A piece of [`Params`]'s text buffer.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Span {
    start: u32,
    len: u32,
}

/// A node of the tree; strings are spans of the text buffer.
#[derive(Debug, Clone)]
enum Node {
    Null,
    Bool(bool),
    /// A JSON number, as its text.
    Number(Span),
    String(Span),
    /// Entries sorted by key.
    Object(Vec<(Span, Node)>),
    List(Vec<Node>),
}

/// A request's parameters: always an object at the top level.
#[derive(Debug, Clone, Default)]
pub struct Params {
    text: String,
    root: Vec<(Span, Node)>,
}

/// Two parameter sets are equal when they mean the same request.
impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        self.canonical() == other.canonical()
    }
}

/// One parameter's value, borrowed from its [`Params`].
#[derive(Debug, Clone, Copy)]
pub struct Param<'a> {
    text: &'a str,
    node: &'a Node,
}

/// An object parameter (the top level, `metadata[…]`, `payment_method_data[…]`…).
#[derive(Debug, Clone, Copy)]
pub struct Object<'a> {
    text: &'a str,
    entries: &'a [(Span, Node)],
}

/// A list parameter (`expand[]=…`, `items[0]=…`, a JSON array).
#[derive(Debug, Clone, Copy)]
pub struct List<'a> {
    text: &'a str,
    items: &'a [Node],
}

/// A parameter's value by kind, for code that walks the whole tree (the spec check).
/// Form values are all strings; JSON ones keep their types.
#[derive(Debug, Clone, Copy)]
pub enum Kind<'a> {
    /// A JSON `null`.
    Null,
    Bool(bool),
    /// A JSON number, as its text.
    Number(&'a str),
    String(&'a str),
    Object(Object<'a>),
    List(List<'a>),
}

fn span_str(text: &str, span: Span) -> &str {
    &text[span.start as usize..(span.start + span.len) as usize]
}

/// Appends `s` to the text buffer and returns its span.
fn push_text(text: &mut String, s: &str) -> Span {
    let span = Span {
        start: text.len() as u32,
        len: s.len() as u32,
    };
    text.push_str(s);
    span
}

impl Params {
    /// Parses a form-encoded body or query string with Stripe's bracket notation.
    ///
    /// A name or value that is not UTF-8 once decoded, or holds a NUL character, is a
    /// 400 naming the parameter: replacing the bytes would make two different values
    /// (`%FF%FE`, `%80%81`) one.
    pub fn from_form(input: &[u8]) -> Result<Self, ApiError> {
        if input.len() > u32::MAX as usize / 2 {
            return Err(ApiError::invalid_request("Request body is too large.", None));
        }
        let mut text = String::with_capacity(input.len());
        let mut root = Node::Object(Vec::with_capacity(8));
        let mut count = 0usize;
        let mut indexed = false;
        for (name, value) in form_pairs(input) {
            if name.is_empty() {
                continue;
            }
            count += 1;
            if count > MAX_PARAMS {
                return Err(too_many_params());
            }
            let name = utf8_name(name)?;
            let value = utf8_value(&name, value)?;
            let path = split_brackets(&name)?;
            let path = path.as_slice();
            indexed |= path
                .iter()
                .any(|seg| !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()));
            let leaf = Node::String(push_text(&mut text, &value));
            insert_path(&mut text, &mut root, &name, path, leaf)?;
        }
        // Only a name with an index (`items[0]`) can make an object that is a list.
        if indexed {
            root = lists_from_indexes(&text, root);
        }
        match root {
            Node::Object(root) => Ok(Self { text, root }),
            _ => Ok(Self::default()),
        }
    }

    /// Parses a JSON body; the top level must be an object.
    pub fn from_json(input: &[u8]) -> Result<Self, ApiError> {
        if input.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        match serde_json::from_slice::<Value>(input) {
            Ok(value) => Self::from_value(&value),
            Err(e) => Err(ApiError::invalid_request(format!("Invalid JSON body: {e}."), None)),
        }
    }

    /// The parameters of a parsed JSON body (see [`Params::from_json`]).
    pub fn from_value(value: &Value) -> Result<Self, ApiError> {
        match value {
            value @ Value::Object(_) => {
                let mut text = String::new();
                let mut budget = MAX_PARAMS;
                match node_of(&mut text, value, &mut budget) {
                    Ok(Node::Object(root)) => Ok(Self { text, root }),
                    Ok(_) => Ok(Self::default()),
                    Err(JsonReject::TooMany) => Err(too_many_params()),
                    Err(JsonReject::Nul(mut path)) => {
                        path.reverse();
                        let name = bracket_name(&path);
                        Err(nul_in(&name))
                    }
                }
            }
            _ => Err(ApiError::invalid_request(
                "Invalid JSON body: the top level must be an object.",
                None,
            )),
        }
    }

    /// The parameters as a JSON object that [`Params::from_json`] reads back to the same
    /// tree (form values stay strings, JSON numbers stay numbers): what the data dir
    /// writes ([`as_json`]), as a `Value`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(as_json::Json(self)).unwrap_or_default()
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
        let _ = write_object(&mut out, &self.text, &self.root);
    }

    /// The top-level object.
    pub fn object(&self) -> Object<'_> {
        Object {
            text: &self.text,
            entries: &self.root,
        }
    }

    pub fn get(&self, name: &str) -> Option<Param<'_>> {
        self.object().get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// An optional string parameter; numbers and booleans are rejected.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, ApiError> {
        self.object().opt_str(name)
    }

    pub fn req_str(&self, name: &str) -> Result<&str, ApiError> {
        self.object().req_str(name)
    }

    /// An optional non-negative integer (a form value such as `"100"`, or a JSON number).
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.object().opt_u64(name)
    }

    /// An optional boolean (`true`/`false` as a form string or a JSON boolean).
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        self.object().opt_bool(name)
    }

    /// An optional object parameter (`metadata[...]`, `automatic_payment_methods[...]`).
    pub fn opt_object(&self, name: &str) -> Result<Option<Object<'_>>, ApiError> {
        self.object().opt_object(name)
    }

    /// Looks a dotted path up (`metadata.order_id`), as text.
    pub fn lookup_text(&self, path: &[String]) -> Option<&str> {
        let (first, rest) = path.split_first()?;
        let mut cur = self.object().get(first)?;
        for seg in rest {
            cur = cur.as_object()?.get(seg)?;
        }
        cur.as_text()
    }
}

impl<'a> Param<'a> {
    /// The value when it is a string.
    pub fn as_str(&self) -> Option<&'a str> {
        match self.node {
            Node::String(s) => Some(span_str(self.text, *s)),
            _ => None,
        }
    }

    /// The value when it is an object.
    pub fn as_object(&self) -> Option<Object<'a>> {
        match self.node {
            Node::Object(entries) => Some(Object {
                text: self.text,
                entries,
            }),
            _ => None,
        }
    }

    /// A scalar as the text a form would send (`"100"`, `"true"`); `None` for an empty
    /// string, an object or a list.
    pub fn as_text(&self) -> Option<&'a str> {
        match self.node {
            Node::String(s) | Node::Number(s) if s.len > 0 => Some(span_str(self.text, *s)),
            Node::Bool(b) => Some(if *b { "true" } else { "false" }),
            _ => None,
        }
    }

    /// Whether the value is an object or a list.
    pub fn is_container(&self) -> bool {
        matches!(self.node, Node::Object(_) | Node::List(_))
    }

    /// The value by kind.
    pub fn kind(&self) -> Kind<'a> {
        let text = self.text;
        match self.node {
            Node::Null => Kind::Null,
            Node::Bool(b) => Kind::Bool(*b),
            Node::Number(s) => Kind::Number(span_str(text, *s)),
            Node::String(s) => Kind::String(span_str(text, *s)),
            Node::Object(entries) => Kind::Object(Object { text, entries }),
            Node::List(items) => Kind::List(List { text, items }),
        }
    }
}

impl<'a> List<'a> {
    /// The items, in order.
    pub fn iter(&self) -> impl Iterator<Item = Param<'a>> + 'a {
        let text = self.text;
        self.items.iter().map(move |node| Param { text, node })
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<'a> Object<'a> {
    /// A parameter by name (`null` counts as absent).
    pub fn get(&self, name: &str) -> Option<Param<'a>> {
        let node = &self.entries[position(self.text, self.entries, name)?].1;
        (!matches!(node, Node::Null)).then_some(Param { text: self.text, node })
    }

    /// The entries, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, Param<'a>)> + 'a {
        let text = self.text;
        self.entries
            .iter()
            .map(move |(k, node)| (span_str(text, *k), Param { text, node }))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// An optional string parameter; numbers and booleans are rejected.
    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(name).map(|p| p.node) {
            None => Ok(None),
            Some(Node::String(s)) if s.len == 0 => Ok(None),
            Some(Node::String(s)) => Ok(Some(span_str(self.text, *s))),
            Some(_) => Err(ApiError::invalid_param(
                name,
                format!("Invalid string: {name} must be a string."),
            )),
        }
    }

    pub fn req_str(&self, name: &str) -> Result<&'a str, ApiError> {
        self.opt_str(name)?.ok_or_else(|| ApiError::missing_param(name))
    }

    /// An optional non-negative integer (a form value such as `"100"`, or a JSON number).
    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, ApiError> {
        let invalid =
            || ApiError::invalid_param(name, format!("Invalid integer: {name} must be a non-negative integer."));
        match self.get(name).map(|p| p.node) {
            None => Ok(None),
            Some(Node::String(s)) if s.len == 0 => Ok(None),
            Some(Node::String(s) | Node::Number(s)) => {
                let digits = span_str(self.text, *s);
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    digits.parse::<u64>().map(Some).map_err(|_| invalid())
                } else {
                    Err(invalid())
                }
            }
            Some(_) => Err(invalid()),
        }
    }

    /// An optional boolean (`true`/`false` as a form string or a JSON boolean).
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name).map(|p| p.node) {
            None => Ok(None),
            Some(Node::Bool(b)) => Ok(Some(*b)),
            Some(Node::String(s)) => match span_str(self.text, *s) {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                "" => Ok(None),
                _ => Err(invalid_bool(name)),
            },
            Some(_) => Err(invalid_bool(name)),
        }
    }

    /// An optional object parameter.
    pub fn opt_object(&self, name: &str) -> Result<Option<Object<'a>>, ApiError> {
        match self.get(name).map(|p| p.node) {
            None => Ok(None),
            Some(Node::Object(entries)) => Ok(Some(Object {
                text: self.text,
                entries,
            })),
            // Stripe clears metadata with `metadata=`; treat an empty string as "none".
            Some(Node::String(s)) if s.len == 0 => Ok(None),
            Some(_) => Err(ApiError::invalid_param(
                name,
                format!("Invalid object: {name} must be a hash (e.g. {name}[key]=value)."),
            )),
        }
    }
}

/// Where `key` is among `entries` (sorted by key). Objects are small, so a scan that
/// compares lengths before bytes beats a binary search of string comparisons.
fn position(text: &str, entries: &[(Span, Node)], key: &str) -> Option<usize> {
    if entries.len() > 16 {
        return entries.binary_search_by(|(k, _)| span_str(text, *k).cmp(key)).ok();
    }
    entries
        .iter()
        .position(|(k, _)| k.len as usize == key.len() && span_str(text, *k) == key)
}

fn invalid_bool(name: &str) -> ApiError {
    ApiError::invalid_param(name, format!("Invalid boolean: {name} must be true or false."))
}

/// Why a JSON body is refused after it parsed.
enum JsonReject {
    /// More than [`MAX_PARAMS`] parameters (leaves, empty objects and lists).
    TooMany,
    /// A NUL character in a key or string; the path to it, innermost segment first.
    Nul(Vec<String>),
}

/// The tree of a JSON value, its strings appended to `text`; `budget` is the number of
/// parameters still allowed (as a form counts them: one per leaf or empty container).
fn node_of(text: &mut String, value: &Value, budget: &mut usize) -> Result<Node, JsonReject> {
    let empty = match value {
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => true,
    };
    if empty {
        *budget = budget.checked_sub(1).ok_or(JsonReject::TooMany)?;
    }
    Ok(match value {
        Value::Null => Node::Null,
        Value::Bool(b) => Node::Bool(*b),
        Value::Number(n) => Node::Number(push_text(text, &n.to_string())),
        Value::String(s) if s.contains('\0') => return Err(JsonReject::Nul(Vec::new())),
        Value::String(s) => Node::String(push_text(text, s)),
        Value::Array(a) => Node::List(
            a.iter()
                .enumerate()
                .map(|(i, v)| node_of(text, v, budget).map_err(|e| e.within(i.to_string())))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => {
            let mut entries: Vec<(Span, Node)> = m
                .iter()
                .map(|(k, v)| {
                    if k.contains('\0') {
                        return Err(JsonReject::Nul(vec![k.clone()]));
                    }
                    let key = push_text(text, k);
                    Ok((key, node_of(text, v, budget).map_err(|e| e.within(k.clone()))?))
                })
                .collect::<Result<_, _>>()?;
            sort_entries(text, &mut entries);
            Node::Object(entries)
        }
    })
}

impl JsonReject {
    fn within(self, segment: String) -> Self {
        match self {
            JsonReject::Nul(mut path) => {
                path.push(segment);
                JsonReject::Nul(path)
            }
            other => other,
        }
    }
}

/// `a[b][c]` from `["a", "b", "c"]`: how Stripe names a nested parameter.
fn bracket_name(path: &[String]) -> String {
    let mut name = path.first().cloned().unwrap_or_default();
    for seg in path.iter().skip(1) {
        name.push('[');
        name.push_str(seg);
        name.push(']');
    }
    name
}

fn too_many_params() -> ApiError {
    ApiError::invalid_request(format!("Too many parameters: at most {MAX_PARAMS} are accepted."), None)
}

fn nul_in(name: &str) -> ApiError {
    ApiError::invalid_param(
        name,
        format!("Invalid string: {name} must not contain NUL (\\u0000) characters."),
    )
}

/// A decoded parameter name as text (not UTF-8, or holding a NUL: a 400).
fn utf8_name(name: Cow<'_, [u8]>) -> Result<Cow<'_, str>, ApiError> {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).replace('\0', "\\u0000");
    let name = match name {
        Cow::Borrowed(b) => std::str::from_utf8(b).map(Cow::Borrowed).map_err(|_| lossy(b)),
        Cow::Owned(v) => String::from_utf8(v).map(Cow::Owned).map_err(|e| lossy(e.as_bytes())),
    };
    match name {
        Ok(n) if n.contains('\0') => Err(nul_in(&n.replace('\0', "\\u0000"))),
        Ok(n) => Ok(n),
        Err(lossy) => Err(ApiError::invalid_param(
            &lossy,
            format!("Invalid parameter name: '{lossy}' is not valid UTF-8 once decoded."),
        )),
    }
}

/// A decoded value as text (not UTF-8, or holding a NUL: a 400 naming `name`).
fn utf8_value<'a>(name: &str, value: Cow<'a, [u8]>) -> Result<Cow<'a, str>, ApiError> {
    let value = match value {
        Cow::Borrowed(b) => std::str::from_utf8(b).ok().map(Cow::Borrowed),
        Cow::Owned(v) => String::from_utf8(v).ok().map(Cow::Owned),
    };
    match value {
        Some(v) if v.contains('\0') => Err(nul_in(name)),
        Some(v) => Ok(v),
        None => Err(ApiError::invalid_param(
            name,
            format!("Invalid string: {name} must be valid UTF-8 text once percent-decoded."),
        )),
    }
}

fn sort_entries(text: &str, entries: &mut [(Span, Node)]) {
    entries.sort_by(|a, b| span_str(text, a.0).cmp(span_str(text, b.0)));
}

/// An object in canonical form: `{`, its length, then its entries sorted by key.
fn write_object(out: &mut impl std::io::Write, text: &str, entries: &[(Span, Node)]) -> std::io::Result<()> {
    out.write_all(b"{")?;
    out.write_all(&(entries.len() as u32).to_le_bytes())?;
    for (k, v) in entries {
        write_text(out, span_str(text, *k))?;
        write_node(out, text, v)?;
    }
    Ok(())
}

/// A value in canonical form: booleans and numbers as the text a form would send.
fn write_node(out: &mut impl std::io::Write, text: &str, node: &Node) -> std::io::Result<()> {
    match node {
        Node::Object(entries) => write_object(out, text, entries),
        Node::List(items) => {
            out.write_all(b"[")?;
            out.write_all(&(items.len() as u32).to_le_bytes())?;
            items.iter().try_for_each(|v| write_node(out, text, v))
        }
        Node::String(s) | Node::Number(s) => write_text(out, span_str(text, *s)),
        Node::Null => out.write_all(b"n"),
        Node::Bool(b) => write_text(out, if *b { "true" } else { "false" }),
    }
}

/// A string: `s`, its length, its bytes.
fn write_text(out: &mut impl std::io::Write, text: &str) -> std::io::Result<()> {
    out.write_all(b"s")?;
    out.write_all(&(text.len() as u32).to_le_bytes())?;
    out.write_all(text.as_bytes())
}

/// The `name=value` pairs of a form body or query string, decoded to bytes (`+` is a
/// space, `%XX` a byte), as `application/x-www-form-urlencoded` says; the caller checks
/// them for UTF-8. A piece with nothing to decode, the usual case, is borrowed, not
/// copied.
fn form_pairs(input: &[u8]) -> impl Iterator<Item = (Cow<'_, [u8]>, Cow<'_, [u8]>)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        while start < input.len() {
            let end = input[start..]
                .iter()
                .position(|&b| b == b'&')
                .map_or(input.len(), |i| start + i);
            let piece = &input[start..end];
            start = end + 1;
            if piece.is_empty() {
                continue;
            }
            let (name, value) = match piece.iter().position(|&b| b == b'=') {
                Some(eq) => (&piece[..eq], &piece[eq + 1..]),
                None => (piece, &b""[..]),
            };
            return Some((form_decode(name), form_decode(value)));
        }
        None
    })
}

fn form_decode(raw: &[u8]) -> Cow<'_, [u8]> {
    if !raw.iter().any(|&b| b == b'%' || b == b'+') {
        return Cow::Borrowed(raw);
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
    Cow::Owned(bytes)
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

fn insert_path(text: &mut String, node: &mut Node, full: &str, path: &[&str], leaf: Node) -> Result<(), ApiError> {
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
        if matches!(node, Node::Null) {
            *node = Node::List(Vec::new());
        }
        let Node::List(list) = node else {
            return Err(conflict());
        };
        if rest.is_empty() {
            list.push(leaf);
            return Ok(());
        }
        list.push(Node::Null);
        let Some(last) = list.last_mut() else {
            return Err(conflict());
        };
        return insert_path(text, last, full, rest, leaf);
    }
    if matches!(node, Node::Null) {
        *node = Node::Object(Vec::new());
    }
    let Node::Object(entries) = node else {
        return Err(conflict());
    };
    let i = match entries.binary_search_by(|(k, _)| span_str(text, *k).cmp(seg)) {
        Ok(i) => i,
        Err(i) => {
            let key = push_text(text, seg);
            entries.insert(i, (key, Node::Null));
            i
        }
    };
    let child = &mut entries[i].1;
    if rest.is_empty() && matches!(child, Node::Object(_) | Node::List(_)) {
        return Err(conflict());
    }
    if !rest.is_empty() && matches!(child, Node::String(_)) {
        return Err(conflict());
    }
    insert_path(text, child, full, rest, leaf)
}

/// Turns objects whose keys are exactly 0..n into lists, recursively.
fn lists_from_indexes(text: &str, node: Node) -> Node {
    match node {
        Node::Object(entries) => {
            let has = |key: &str| entries.binary_search_by(|(k, _)| span_str(text, *k).cmp(key)).is_ok();
            let is_list = !entries.is_empty() && (0..entries.len()).all(|i| has(&i.to_string()));
            if is_list {
                let mut items: Vec<(usize, Node)> = entries
                    .into_iter()
                    .map(|(k, v)| (span_str(text, k).parse().unwrap_or(0), lists_from_indexes(text, v)))
                    .collect();
                items.sort_by_key(|(i, _)| *i);
                Node::List(items.into_iter().map(|(_, v)| v).collect())
            } else {
                Node::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k, lists_from_indexes(text, v)))
                        .collect(),
                )
            }
        }
        Node::List(items) => Node::List(items.into_iter().map(|v| lists_from_indexes(text, v)).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(s: &str) -> Params {
        Params::from_form(s.as_bytes()).unwrap()
    }

    /// A parameter as JSON, to compare trees.
    fn value(p: Param<'_>) -> Value {
        fn of(text: &str, node: &Node) -> Value {
            match node {
                Node::Null => Value::Null,
                Node::Bool(b) => json!(b),
                Node::Number(s) => serde_json::from_str(span_str(text, *s)).unwrap(),
                Node::String(s) => json!(span_str(text, *s)),
                Node::Object(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(k, v)| (span_str(text, *k).to_string(), of(text, v)))
                        .collect(),
                ),
                Node::List(items) => Value::Array(items.iter().map(|v| of(text, v)).collect()),
            }
        }
        of(p.text, p.node)
    }

    #[test]
    fn bracket_notation_builds_nested_objects() {
        let p = form("amount=2000&currency=usd&metadata[order_id]=o-1&automatic_payment_methods[enabled]=true");
        assert_eq!(p.opt_u64("amount").unwrap(), Some(2000));
        let metadata = p.opt_object("metadata").unwrap().unwrap();
        assert_eq!(metadata.get("order_id").and_then(|v| v.as_str()), Some("o-1"));
        assert_eq!(
            value(p.get("automatic_payment_methods").unwrap()),
            json!({"enabled": "true"})
        );
        assert_eq!(p.lookup_text(&["metadata".into(), "order_id".into()]), Some("o-1"));
    }

    #[test]
    fn lists_by_append_and_by_index() {
        let p = form("expand[]=a&expand[]=b&items[1][price]=p2&items[0][price]=p1");
        assert_eq!(value(p.get("expand").unwrap()), json!(["a", "b"]));
        assert_eq!(value(p.get("items").unwrap()), json!([{"price":"p1"},{"price":"p2"}]));
        // Keys that are not exactly 0..n stay an object.
        let q = form("a[0]=x&a[2]=y&b[01]=z");
        assert_eq!(value(q.get("a").unwrap()), json!({"0": "x", "2": "y"}));
        assert_eq!(value(q.get("b").unwrap()), json!({"01": "z"}));
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
            let ours: Vec<(Vec<u8>, Vec<u8>)> = form_pairs(case.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let reference: Vec<(Vec<u8>, Vec<u8>)> = form_urlencoded::parse(case.as_bytes())
                .into_owned()
                .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
                .filter(|(_, v)| v != "\u{fffd}".as_bytes())
                .collect();
            let ours: Vec<_> = ours.into_iter().filter(|(_, v)| v != &[0xff]).collect();
            assert_eq!(ours, reference, "{case}");
        }
        let p = form("metadata%5Border_id%5D=o%201");
        assert_eq!(p.lookup_text(&["metadata".into(), "order_id".into()]), Some("o 1"));
    }

    #[test]
    fn invalid_utf8_and_nul_are_errors_naming_the_param() {
        for body in [
            &b"metadata[order_id]=%FF%FE"[..],
            b"metadata[order_id]=%80%81",
            b"metadata[order_id]=\xff",
        ] {
            let err = Params::from_form(body).unwrap_err();
            assert_eq!(err.status.code(), 400);
            assert_eq!(err.code.as_deref(), Some("parameter_invalid"));
            assert_eq!(err.param.as_deref(), Some("metadata[order_id]"), "{body:?}");
        }
        let err = Params::from_form(b"description=a%00b").unwrap_err();
        assert_eq!(err.param.as_deref(), Some("description"));
        assert!(err.message.contains("NUL"), "{}", err.message);
        assert!(Params::from_form(b"a%FF=1").unwrap_err().param.is_some());
        assert!(Params::from_form(b"a%00=1").unwrap_err().param.is_some());
        let err = Params::from_json(br#"{"metadata":{"order_id":"a\u0000b"}}"#).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("metadata[order_id]"));
        let err = Params::from_json(br#"{"items":[{"p":"\u0000"}]}"#).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("items[0][p]"));
        // Valid multi-byte text is kept as sent.
        assert_eq!(form("d=%E2%82%AC").opt_str("d").unwrap(), Some("€"));
    }

    #[test]
    fn json_scalars_read_as_the_text_a_form_would_send() {
        let p = Params::from_json(br#"{"amount":2000,"capture":true,"metadata":{"n":5,"b":false,"z":null,"o":{}}}"#)
            .unwrap();
        assert_eq!(p.opt_u64("amount").unwrap(), Some(2000));
        assert_eq!(p.opt_bool("capture").unwrap(), Some(true));
        assert!(p.opt_str("amount").is_err());
        let m = p.opt_object("metadata").unwrap().unwrap();
        let texts: Vec<_> = m.iter().map(|(k, v)| (k, v.as_text(), v.is_container())).collect();
        assert_eq!(
            texts,
            [
                ("b", Some("false"), false),
                ("n", Some("5"), false),
                ("o", None, true),
                ("z", None, false)
            ]
        );
        assert_eq!(p.lookup_text(&["metadata".into(), "n".into()]), Some("5"));
        assert!(m.get("z").is_none(), "null is absent");
    }

    #[test]
    fn malformed_names_and_conflicts_are_errors_naming_the_param() {
        for bad in ["metadata[a=1", "[a]=1", "metadata[a]x=1", "a=1&a[b]=2", "a[b]=1&a=2"] {
            let err = Params::from_form(bad.as_bytes()).unwrap_err();
            assert_eq!(err.status.code(), 400, "{bad}");
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
        // JSON bodies get the same cap, top level or nested.
        let top: serde_json::Map<String, Value> = (0..=MAX_PARAMS).map(|i| (format!("k{i}"), json!("v"))).collect();
        let err = Params::from_json(&serde_json::to_vec(&top).unwrap()).unwrap_err();
        assert!(err.message.contains("Too many parameters"), "{}", err.message);
        let nested = json!({"metadata": (0..=MAX_PARAMS).map(|i| (format!("k{i}"), json!({}))).collect::<serde_json::Map<_, _>>()});
        assert!(Params::from_json(&serde_json::to_vec(&nested).unwrap()).is_err());
        let fits: serde_json::Map<String, Value> = (0..MAX_PARAMS).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(Params::from_json(&serde_json::to_vec(&fits).unwrap()).is_ok());
    }
}
