//! The compiled parameter schemas: Stripe's OpenAPI spec, embedded, turned once into one
//! [`Operation`] per path and method, each a tree of [`Schema`] nodes with sorted
//! property lists, so that checking a request walks it without building anything.
//!
//! Operations are kept sorted by verb and path *shape* (every `{…}` placeholder as `{}`),
//! so fauxpay's `/v1/charges/{id}/capture` finds Stripe's `/v1/charges/{charge}/capture`
//! by binary search over byte strings, its shape written to a stack buffer.

use std::sync::OnceLock;

use crate::state::shard::FastMap;

use serde_json::{Map, Value};

use crate::resources::endpoint::Verb;
use crate::stripe::spec::extensions;

/// Stripe's OpenAPI spec, as `spec/stripe-openapi/` holds it (see its README).
pub const SPEC_JSON: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../spec/stripe-openapi/spec3-subset.json"
));

/// The API version the embedded spec describes.
pub const API_VERSION: &str = "2023-08-16";

/// Deepest `$ref` / nesting followed while compiling (request schemas are far shallower).
const MAX_COMPILE_DEPTH: usize = 64;

/// What a parameter may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// Anything (a schema without a type).
    Any,
    String(StringRule),
    Integer,
    Number,
    Boolean,
    /// A list of items of one schema.
    Array(Box<Schema>),
    Object(ObjectRule),
    AnyOf(AnyOfRule),
}

/// A string: at most `max_len` characters, one of `one_of` when it is given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StringRule {
    pub max_len: Option<usize>,
    pub one_of: Option<Box<[Box<str>]>>,
}

/// A hash: named properties (sorted by name), the required ones, and what other keys
/// may hold (`None`: no other key is accepted).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectRule {
    pub properties: Box<[(Box<str>, Schema)]>,
    pub required: Box<[Box<str>]>,
    pub additional: Option<Box<Schema>>,
    /// Positions in `properties` by name, for objects with many properties (a hash
    /// lookup costs a fifth of a binary search over a payment intent's 40-odd names).
    index: Option<Box<FastMap<Box<str>, u32>>>,
}

/// Objects with more properties than this get an [`ObjectRule`] index.
const INDEX_FROM: usize = 8;

/// One of several schemas. The spec's "or the empty string to unset" alternative
/// (`enum: [""]`) is not kept as an alternative but as `empty`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnyOfRule {
    pub alternatives: Box<[Schema]>,
    pub empty: bool,
}

impl ObjectRule {
    /// A rule of `properties` (sorted by name), indexed when they are many.
    pub fn new(
        properties: Box<[(Box<str>, Schema)]>,
        required: Box<[Box<str>]>,
        additional: Option<Box<Schema>>,
    ) -> Self {
        let index = (properties.len() > INDEX_FROM).then(|| {
            Box::new(
                properties
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i as u32))
                    .collect::<FastMap<_, _>>(),
            )
        });
        Self {
            properties,
            required,
            additional,
            index,
        }
    }

    /// The schema of property `name`.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        match &self.index {
            Some(index) => index.get(name).map(|&i| &self.properties[i as usize].1),
            None => self
                .properties
                .binary_search_by(|(k, _)| (**k).cmp(name))
                .ok()
                .map(|i| &self.properties[i].1),
        }
    }

    /// The property names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.properties.iter().map(|(k, _)| &**k)
    }
}

/// One endpoint of Stripe's API: its verb, Stripe's path, and its parameters (the form
/// body of a POST or DELETE, the query of a GET) as one closed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub verb: Verb,
    pub path: Box<str>,
    /// The path with every placeholder as `{}`: what fauxpay's paths are matched on.
    pub shape: Box<str>,
    pub params: ObjectRule,
}

/// Every operation of the spec, sorted by verb and path shape.
#[derive(Debug, Default)]
pub struct Spec {
    operations: Vec<Operation>,
}

/// The embedded spec with fauxpay's extensions, compiled on first use (the provider
/// compiles it at start, so no request pays for it). An embedded spec that does not
/// compile (a unit test proves it does) leaves every request unchecked, never a panic.
pub fn spec() -> &'static Spec {
    static SPEC: OnceLock<Spec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let compiled = serde_json::from_slice::<Value>(SPEC_JSON)
            .map_err(|e| e.to_string())
            .and_then(|mut doc| {
                extensions::apply(&mut doc)?;
                Spec::compile(&doc)
            });
        compiled.unwrap_or_else(|e| {
            tracing::error!(error = %e, "Stripe's OpenAPI spec did not compile: requests are not validated");
            Spec::default()
        })
    })
}

impl Spec {
    /// Compiles an OpenAPI document's paths.
    pub fn compile(doc: &Value) -> Result<Self, String> {
        let paths = doc
            .get("paths")
            .and_then(Value::as_object)
            .ok_or("the spec has no paths")?;
        let compiler = Compiler { doc };
        let mut operations = Vec::new();
        for (path, methods) in paths {
            let Some(methods) = methods.as_object() else {
                continue;
            };
            for (method, op) in methods {
                let verb = match method.as_str() {
                    "get" => Verb::Get,
                    "post" => Verb::Post,
                    "delete" => Verb::Delete,
                    _ => continue,
                };
                let params = match verb {
                    Verb::Get => compiler.query(op),
                    Verb::Post | Verb::Delete => compiler.form_body(op),
                };
                operations.push(Operation {
                    verb,
                    path: path.as_str().into(),
                    shape: shape(path).into(),
                    params,
                });
            }
        }
        operations.sort_by(|a, b| (verb_rank(a.verb), &a.shape).cmp(&(verb_rank(b.verb), &b.shape)));
        Ok(Self { operations })
    }

    /// The operation for `verb` on a path of this shape (`/v1/charges/{id}` finds
    /// `/v1/charges/{charge}`).
    pub fn operation(&self, verb: Verb, path: &str) -> Option<&Operation> {
        let mut buf = [0u8; MAX_PATH];
        let key = (verb_rank(verb), shape_into(path, &mut buf)?);
        self.operations
            .binary_search_by(|op| (verb_rank(op.verb), op.shape.as_bytes()).cmp(&key))
            .ok()
            .map(|i| &self.operations[i])
    }

    /// Every operation, sorted by verb and path shape.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }
}

fn verb_rank(verb: Verb) -> u8 {
    match verb {
        Verb::Get => 0,
        Verb::Post => 1,
        Verb::Delete => 2,
    }
}

/// Longest path whose shape [`Spec::operation`] looks up (fauxpay's are under 64 bytes).
const MAX_PATH: usize = 256;

/// A path's shape, written to `buf`: every `{placeholder}` as `{}`
/// (`/v1/charges/{id}/capture` → `/v1/charges/{}/capture`); `None` when it does not fit.
fn shape_into<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut n = 0;
    let mut inside = false;
    for &b in path.as_bytes() {
        match (inside, b) {
            (true, b'}') => inside = false,
            (true, _) => continue,
            (false, b'{') => inside = true,
            (false, _) => {}
        }
        *buf.get_mut(n)? = b;
        n += 1;
    }
    Some(&buf[..n])
}

/// A path's shape, as a string (see [`shape_into`]).
pub fn shape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut inside = false;
    for c in path.chars() {
        match (inside, c) {
            (true, '}') => inside = false,
            (true, _) => continue,
            (false, '{') => inside = true,
            (false, _) => {}
        }
        out.push(c);
    }
    out
}

struct Compiler<'a> {
    doc: &'a Value,
}

impl<'a> Compiler<'a> {
    /// The form body of a POST or DELETE, as a closed object.
    fn form_body(&self, op: &Value) -> ObjectRule {
        let schema = op.pointer("/requestBody/content/application~1x-www-form-urlencoded/schema");
        match schema.map(|s| self.node(s, 0)) {
            Some(Schema::Object(rule)) => rule,
            _ => ObjectRule::default(),
        }
    }

    /// The `in: query` parameters of a GET, as a closed object.
    fn query(&self, op: &Value) -> ObjectRule {
        let mut properties: Vec<(Box<str>, Schema)> = Vec::new();
        let mut required: Vec<Box<str>> = Vec::new();
        for p in op.get("parameters").and_then(Value::as_array).into_iter().flatten() {
            let p = self.resolve(p, 0);
            if p.get("in").and_then(Value::as_str) != Some("query") {
                continue;
            }
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            let schema = p.get("schema").map_or(Schema::Any, |s| self.node(s, 0));
            properties.push((Box::from(name), schema));
            if p.get("required").and_then(Value::as_bool) == Some(true) {
                required.push(Box::from(name));
            }
        }
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        ObjectRule::new(properties.into(), required.into(), None)
    }

    /// Follows `$ref`s (`#/components/schemas/…`) to the node they name.
    fn resolve<'v>(&self, v: &'v Value, depth: usize) -> &'v Value
    where
        'a: 'v,
    {
        let mut v = v;
        for _ in depth..MAX_COMPILE_DEPTH {
            let Some(r) = v.get("$ref").and_then(Value::as_str) else {
                return v;
            };
            match r.strip_prefix('#').and_then(|p| self.doc.pointer(p)) {
                Some(target) => v = target,
                None => return &Value::Null,
            }
        }
        v
    }

    fn node(&self, v: &Value, depth: usize) -> Schema {
        if depth > MAX_COMPILE_DEPTH {
            return Schema::Any;
        }
        let v = self.resolve(v, depth);
        let Some(o) = v.as_object() else {
            return Schema::Any;
        };
        let bypass = o.get("x-stripeBypassValidation").and_then(Value::as_bool) == Some(true);
        if let Some(alternatives) = o.get("anyOf").and_then(Value::as_array) {
            return self.any_of(alternatives, depth);
        }
        match o.get("type").and_then(Value::as_str) {
            Some("string") => {
                let rule = StringRule {
                    max_len: o.get("maxLength").and_then(Value::as_u64).map(|n| n as usize),
                    // A bypassed enum is not exhaustive: any string goes.
                    one_of: match o.get("enum").and_then(Value::as_array) {
                        Some(values) if !bypass => {
                            Some(values.iter().filter_map(Value::as_str).map(Box::from).collect())
                        }
                        _ => None,
                    },
                };
                if bypass && !o.contains_key("enum") {
                    // `source`: an id, or (legacy) a hash of card details.
                    let any_hash = Schema::Object(ObjectRule {
                        additional: Some(Box::new(Schema::Any)),
                        ..ObjectRule::default()
                    });
                    return Schema::AnyOf(AnyOfRule {
                        alternatives: Box::new([Schema::String(rule), any_hash]),
                        empty: false,
                    });
                }
                Schema::String(rule)
            }
            Some("integer") => Schema::Integer,
            Some("number") => Schema::Number,
            Some("boolean") => Schema::Boolean,
            Some("array") => Schema::Array(Box::new(
                o.get("items").map_or(Schema::Any, |items| self.node(items, depth + 1)),
            )),
            Some("object") => Schema::Object(self.object(o, depth)),
            _ if o.contains_key("properties") => Schema::Object(self.object(o, depth)),
            _ => Schema::Any,
        }
    }

    fn object(&self, o: &Map<String, Value>, depth: usize) -> ObjectRule {
        let mut properties: Vec<(Box<str>, Schema)> = o
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (Box::from(k.as_str()), self.node(v, depth + 1)))
            .collect();
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        let required = o
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(Box::from)
            .collect();
        // Absent means closed: Stripe refuses unknown parameters at every level.
        let additional = match o.get("additionalProperties") {
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(Box::new(Schema::Any)),
            Some(schema) => Some(Box::new(self.node(schema, depth + 1))),
        };
        ObjectRule::new(properties.into(), required, additional)
    }

    fn any_of(&self, alternatives: &[Value], depth: usize) -> Schema {
        let mut kept = Vec::with_capacity(alternatives.len());
        let mut empty = false;
        for alt in alternatives {
            match self.node(alt, depth + 1) {
                Schema::String(StringRule {
                    one_of: Some(values), ..
                }) if values.iter().all(|v| v.is_empty()) => empty = true,
                // Nested choices flatten into this one.
                Schema::AnyOf(inner) => {
                    empty |= inner.empty;
                    kept.extend(inner.alternatives.into_vec());
                }
                other => kept.push(other),
            }
        }
        match (kept.len(), empty) {
            (0, _) => Schema::String(StringRule {
                max_len: None,
                one_of: Some(Box::new([Box::from("")])),
            }),
            (1, false) => kept.pop().unwrap_or(Schema::Any),
            _ => Schema::AnyOf(AnyOfRule {
                alternatives: kept.into(),
                empty,
            }),
        }
    }
}
