//! Checking a request's parameters against its endpoint's compiled schema, with Stripe's
//! errors: 400 `invalid_request_error`, `param` in bracket notation
//! (`payment_method_data[card][number]`, `expand[0]`).
//!
//! The walk allocates nothing while the request is valid: an endpoint's operation comes
//! from a table made once, properties are found by hash (large objects) or binary search,
//! and the parameter's path is a chain of stack frames turned into a string only for an
//! error.
//! Within an object the present parameters are checked first (in key order), then the
//! required ones.

use std::sync::OnceLock;

use crate::error::ApiError;
use crate::resources::endpoint::{Endpoint, Verb};
use crate::resources::endpoints;
use crate::state::shard::FastMap;
use crate::stripe::params::{Kind, Object, Param, Params};
use crate::stripe::spec::schema::{spec, AnyOfRule, ObjectRule, Operation, Schema, StringRule};

/// Checks `params` against the spec's schema for `endpoint`. An endpoint the spec does not
/// describe is not checked (a test holds every served endpoint to having one).
pub fn validate(endpoint: &Endpoint, params: &Params) -> Result<(), ApiError> {
    match operation_of(endpoint) {
        Some(op) => check_params(&op.params, params),
        None => Ok(()),
    }
}

/// The spec's operation for an endpoint: for those fauxpay serves, from a table made
/// once (a hash of the path pattern rather than a path-shape search per request).
fn operation_of(endpoint: &Endpoint) -> Option<&'static Operation> {
    static SERVED: OnceLock<FastMap<(Verb, &'static str), &'static Operation>> = OnceLock::new();
    let served = SERVED.get_or_init(|| {
        endpoints()
            .filter_map(|e| Some(((e.verb, e.path), spec().operation(e.verb, e.path)?)))
            .collect()
    });
    match served.get(&(endpoint.verb, endpoint.path)) {
        Some(op) => Some(op),
        None => spec().operation(endpoint.verb, endpoint.path),
    }
}

/// Checks a request's parameters against an operation's parameter object.
pub fn check_params(rule: &ObjectRule, params: &Params) -> Result<(), ApiError> {
    check_object(rule, params.object(), None)
}

/// One step of a parameter's path.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// A parameter's path, as a chain of stack frames (leaf first).
#[derive(Clone, Copy)]
struct At<'a> {
    parent: Option<&'a At<'a>>,
    step: Step<'a>,
}

impl<'a> At<'a> {
    fn child(&'a self, step: Step<'a>) -> At<'a> {
        At {
            parent: Some(self),
            step,
        }
    }

    /// Bracket notation: `a[b][0]`.
    fn render(&self) -> String {
        let mut steps = Vec::new();
        let mut cur = Some(self);
        while let Some(at) = cur {
            steps.push(at.step);
            cur = at.parent;
        }
        let mut out = String::new();
        for (i, step) in steps.iter().rev().enumerate() {
            match (i, step) {
                (0, Step::Key(k)) => out.push_str(k),
                (0, Step::Index(n)) => out.push_str(&n.to_string()),
                (_, Step::Key(k)) => {
                    out.push('[');
                    out.push_str(k);
                    out.push(']');
                }
                (_, Step::Index(n)) => {
                    out.push('[');
                    out.push_str(&n.to_string());
                    out.push(']');
                }
            }
        }
        out
    }
}

fn key<'a>(parent: Option<&'a At<'a>>, name: &'a str) -> At<'a> {
    At {
        parent,
        step: Step::Key(name),
    }
}

fn check_object(rule: &ObjectRule, object: Object<'_>, at: Option<&At<'_>>) -> Result<(), ApiError> {
    for (name, value) in object.iter() {
        if matches!(value.kind(), Kind::Null) {
            continue;
        }
        let here = key(at, name);
        match rule.property(name).or(rule.additional.as_deref()) {
            Some(schema) => check(schema, value, &here)?,
            None => return Err(errors::unknown(&here)),
        }
    }
    for name in rule.required.iter() {
        match object.get(name).map(|p| p.kind()) {
            None => return Err(errors::missing(&key(at, name))),
            Some(Kind::String("")) => return Err(errors::empty(&key(at, name))),
            Some(_) => {}
        }
    }
    Ok(())
}

fn check(schema: &Schema, value: Param<'_>, at: &At<'_>) -> Result<(), ApiError> {
    let kind = value.kind();
    match kind {
        Kind::Null => return Ok(()),
        Kind::String("") => {
            return if accepts_empty(schema) {
                Ok(())
            } else {
                Err(errors::empty(at))
            }
        }
        _ => {}
    }
    match schema {
        Schema::Any => Ok(()),
        Schema::String(rule) => match kind {
            Kind::String(text) | Kind::Number(text) => check_string(rule, text, at),
            Kind::Bool(b) => check_string(rule, if b { "true" } else { "false" }, at),
            _ => Err(errors::container("string", kind, at)),
        },
        Schema::Integer => match kind {
            Kind::String(text) | Kind::Number(text) if is_integer(text) => Ok(()),
            Kind::String(text) | Kind::Number(text) => Err(errors::integer(text, at)),
            Kind::Bool(b) => Err(errors::integer(if b { "true" } else { "false" }, at)),
            _ => Err(errors::container("integer", kind, at)),
        },
        Schema::Number => match kind {
            Kind::String(text) | Kind::Number(text) if text.parse::<f64>().is_ok_and(f64::is_finite) => Ok(()),
            Kind::String(text) | Kind::Number(text) => Err(errors::number(text, at)),
            Kind::Bool(b) => Err(errors::number(if b { "true" } else { "false" }, at)),
            _ => Err(errors::container("number", kind, at)),
        },
        Schema::Boolean => match kind {
            Kind::Bool(_) | Kind::String("true" | "false") => Ok(()),
            Kind::String(text) | Kind::Number(text) => Err(errors::boolean(text, at)),
            _ => Err(errors::container("boolean", kind, at)),
        },
        Schema::Array(items) => match kind {
            Kind::List(list) => {
                for (i, item) in list.iter().enumerate() {
                    check(items, item, &at.child(Step::Index(i)))?;
                }
                Ok(())
            }
            // `a[0]=x&a[2]=y`: indexes, not exactly 0..n.
            Kind::Object(object) if is_indexed(object) => {
                for (k, item) in object.iter() {
                    check(items, item, &at.child(Step::Key(k)))?;
                }
                Ok(())
            }
            _ => Err(errors::array(at)),
        },
        Schema::Object(rule) => match kind {
            Kind::Object(object) => check_object(rule, object, Some(at)),
            _ => Err(errors::object(at)),
        },
        Schema::AnyOf(rule) => check_any_of(rule, value, at),
    }
}

/// The first alternative of the value's shape (hash, list or scalar) that accepts it; if
/// none does, the first such alternative's error (or, when none has the shape, the
/// first alternative's).
fn check_any_of(rule: &AnyOfRule, value: Param<'_>, at: &At<'_>) -> Result<(), ApiError> {
    let kind = value.kind();
    let mut first_error = None;
    for alt in rule.alternatives.iter() {
        if !same_shape(alt, kind) {
            continue;
        }
        match check(alt, value, at) {
            Ok(()) => return Ok(()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match (first_error, rule.alternatives.first()) {
        (Some(e), _) => Err(e),
        (None, Some(first)) => check(first, value, at),
        (None, None) => Ok(()),
    }
}

fn same_shape(schema: &Schema, kind: Kind<'_>) -> bool {
    match schema {
        Schema::Any | Schema::AnyOf(_) => true,
        Schema::Object(_) => matches!(kind, Kind::Object(_)),
        Schema::Array(_) => match kind {
            Kind::List(_) => true,
            Kind::Object(object) => is_indexed(object),
            _ => false,
        },
        Schema::String(_) | Schema::Integer | Schema::Number | Schema::Boolean => {
            matches!(kind, Kind::String(_) | Kind::Number(_) | Kind::Bool(_))
        }
    }
}

/// Whether `""` (unset) is a valid value.
fn accepts_empty(schema: &Schema) -> bool {
    match schema {
        Schema::Any => true,
        Schema::String(rule) => rule
            .one_of
            .as_ref()
            .is_none_or(|values| values.iter().any(|v| v.is_empty())),
        Schema::AnyOf(rule) => rule.empty || rule.alternatives.iter().any(accepts_empty),
        Schema::Integer | Schema::Number | Schema::Boolean | Schema::Array(_) | Schema::Object(_) => false,
    }
}

fn check_string(rule: &StringRule, text: &str, at: &At<'_>) -> Result<(), ApiError> {
    if let Some(values) = &rule.one_of {
        if !values.iter().any(|v| **v == *text) {
            return Err(errors::one_of(values, at));
        }
    }
    if let Some(max) = rule.max_len {
        // Bytes bound characters from above: count only when the bytes are over.
        if text.len() > max && text.chars().count() > max {
            return Err(errors::too_long(text, max, at));
        }
    }
    Ok(())
}

/// `-?[0-9]+`, within 64 bits.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && text.parse::<i64>().is_ok()
}

fn is_indexed(object: Object<'_>) -> bool {
    !object.is_empty()
        && object
            .iter()
            .all(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// Stripe's errors, built only when a check fails.
mod errors {
    use super::At;
    use crate::error::ApiError;
    use crate::stripe::params::Kind;

    fn error(at: &At<'_>, code: &'static str, message: String) -> ApiError {
        ApiError::invalid_request(message, Some(at.render())).with_code(code)
    }

    pub fn unknown(at: &At<'_>) -> ApiError {
        let param = at.render();
        ApiError::invalid_request(format!("Received unknown parameter: {param}"), Some(param))
            .with_code("parameter_unknown")
    }

    pub fn missing(at: &At<'_>) -> ApiError {
        ApiError::missing_param(&at.render())
    }

    /// Stripe's words for an empty string where one cannot unset the parameter.
    pub fn empty(at: &At<'_>) -> ApiError {
        let p = at.render();
        error(
            at,
            "parameter_invalid_empty",
            format!(
                "You passed an empty string for '{p}'. We assume empty values are an attempt to unset a parameter; however '{p}' cannot be unset. You should remove '{p}' from your request or supply a non-empty value."
            ),
        )
    }

    pub fn integer(text: &str, at: &At<'_>) -> ApiError {
        error(
            at,
            "parameter_invalid_integer",
            format!("Invalid integer: {}", preview(text)),
        )
    }

    pub fn number(text: &str, at: &At<'_>) -> ApiError {
        error(at, "parameter_invalid", format!("Invalid number: {}", preview(text)))
    }

    pub fn boolean(text: &str, at: &At<'_>) -> ApiError {
        error(at, "parameter_invalid", format!("Invalid boolean: {}", preview(text)))
    }

    pub fn one_of(values: &[Box<str>], at: &At<'_>) -> ApiError {
        let list = match values {
            [] => String::new(),
            [one] => one.to_string(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
        };
        error(
            at,
            "parameter_invalid",
            format!("Invalid {}: must be one of {list}", at.render()),
        )
    }

    pub fn too_long(text: &str, max: usize, at: &At<'_>) -> ApiError {
        error(
            at,
            "parameter_invalid",
            format!("Invalid string: {}; must be at most {max} characters", preview(text)),
        )
    }

    pub fn object(at: &At<'_>) -> ApiError {
        let p = at.render();
        error(
            at,
            "parameter_invalid",
            format!("Invalid object: {p} must be a hash (e.g. {p}[key]=value)."),
        )
    }

    pub fn array(at: &At<'_>) -> ApiError {
        let p = at.render();
        error(
            at,
            "parameter_invalid",
            format!("Invalid array: {p} must be a list (e.g. {p}[]=value)."),
        )
    }

    /// A hash or a list where a scalar of `kind` belongs.
    pub fn container(expected: &str, got: Kind<'_>, at: &At<'_>) -> ApiError {
        let code = if expected == "integer" {
            "parameter_invalid_integer"
        } else {
            "parameter_invalid"
        };
        let got = if matches!(got, Kind::List(_)) {
            "a list"
        } else {
            "a hash"
        };
        let article = if expected == "integer" { "an" } else { "a" };
        error(
            at,
            code,
            format!(
                "Invalid {expected}: {} must be {article} {expected}, not {got}.",
                at.render()
            ),
        )
    }

    /// A value as an error message quotes it: at most 40 characters.
    fn preview(text: &str) -> String {
        const MAX: usize = 40;
        match text.char_indices().nth(MAX) {
            Some((cut, _)) => format!("{}...", &text[..cut]),
            None => text.to_string(),
        }
    }
}
