//! Request templates: how one checkout attempt is sent to the target API.
//!
//! A template names the method, the path, the headers and the body (JSON or form) of the
//! checkout request, with placeholders `{{order_id}}`, `{{amount}}`, `{{currency}}`,
//! `{{idempotency_key}}`, `{{payment_method}}` and `{{api_key}}`, and the JSON pointers
//! where the answer names the payment (`/payment_intent`, `/id`). Templates are compiled
//! once into literal and placeholder segments, so rendering an attempt is a few copies.
//! Two are bundled: `checkout-json` (a merchant's `POST /checkout`) and `stripe` (the
//! provider itself, `POST /v1/payment_intents` with `confirm=true`).
//!
//! A template may also name a fulfilment [`Probe`] (`[fulfillment]`: a method, a path
//! with `{{order_id}}`, and a JSON pointer to the integer count of times the target
//! fulfilled the order); `checkout-json` probes `GET /orders/{{order_id}}` →
//! `/fulfillments`. After a run the load generator asks it about every logical payment.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::pointer::Pointer;

/// The values one attempt fills in.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    pub order_id: &'a str,
    pub amount: u64,
    pub currency: &'a str,
    /// `None` for a client that sends no key: headers using it are left out.
    pub idempotency_key: Option<&'a str>,
    pub payment_method: &'a str,
    pub api_key: &'a str,
    /// A multi-step flow's captured values, by capture index (none for one request).
    pub captures: &'a [Option<String>],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placeholder {
    OrderId,
    Amount,
    Currency,
    IdempotencyKey,
    PaymentMethod,
    ApiKey,
    /// A value a multi-step flow captured from an earlier step's answer.
    Capture(u16),
}

impl Placeholder {
    fn parse(name: &str) -> Option<Self> {
        Some(match name.trim() {
            "order_id" => Self::OrderId,
            "amount" => Self::Amount,
            "currency" => Self::Currency,
            "idempotency_key" => Self::IdempotencyKey,
            "payment_method" => Self::PaymentMethod,
            "api_key" => Self::ApiKey,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Value(Placeholder),
}

/// How placeholder values are escaped in a part of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    Json,
    Form,
}

/// A string with placeholders, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Text(Vec<Segment>);

impl Text {
    fn compile(source: &str, file: &str, field: &str) -> Result<Self, ConfigError> {
        Self::compile_with(source, file, field, &Names::default())
    }

    /// [`Text::compile`] in a flow's step, where `names` says which captures exist
    /// before this step (and which only later).
    pub(crate) fn compile_with(source: &str, file: &str, field: &str, names: &Names<'_>) -> Result<Self, ConfigError> {
        let mut segments = Vec::new();
        let mut rest = source;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                segments.push(Segment::Literal(rest[..open].to_string()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| ConfigError::new(file, field, "an unclosed '{{' (placeholders are written {{name}})"))?;
            let name = &after[..close];
            let p = match Placeholder::parse(name) {
                Some(p) => p,
                None => match names.before.iter().position(|n| n == name.trim()) {
                    Some(i) => Placeholder::Capture(names.index[i]),
                    None if names.later.iter().any(|n| n == name.trim()) => {
                        return Err(ConfigError::new(
                            file,
                            field,
                            format!(
                                "a value an earlier step captured, but {{{{{name}}}}} is captured only by a later step"
                            ),
                        ))
                    }
                    None => {
                        let captured = match names.before {
                            [] => String::new(),
                            some => format!(", or a value an earlier step captures ({})", some.join(", ")),
                        };
                        return Err(ConfigError::new(
                            file,
                            field,
                            format!("unknown placeholder {{{{{name}}}}}, expected one of order_id, amount, currency, idempotency_key, payment_method, api_key{captured}"),
                        ));
                    }
                },
            };
            segments.push(Segment::Value(p));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            segments.push(Segment::Literal(rest.to_string()));
        }
        Ok(Self(segments))
    }

    fn uses(&self, p: Placeholder) -> bool {
        self.0.contains(&Segment::Value(p))
    }

    fn render(&self, v: &Values<'_>, escape: Escape, out: &mut String) {
        for seg in &self.0 {
            match seg {
                Segment::Literal(s) => out.push_str(s),
                Segment::Value(p) => {
                    let amount;
                    let raw: &str = match p {
                        Placeholder::OrderId => v.order_id,
                        Placeholder::Amount => {
                            amount = v.amount.to_string();
                            &amount
                        }
                        Placeholder::Currency => v.currency,
                        Placeholder::IdempotencyKey => v.idempotency_key.unwrap_or(""),
                        Placeholder::PaymentMethod => v.payment_method,
                        Placeholder::ApiKey => v.api_key,
                        Placeholder::Capture(i) => {
                            v.captures.get(usize::from(*i)).and_then(|c| c.as_deref()).unwrap_or("")
                        }
                    };
                    match escape {
                        Escape::None => out.push_str(raw),
                        Escape::Json => {
                            let quoted = serde_json::to_string(raw).unwrap_or_default();
                            out.push_str(&quoted[1..quoted.len() - 1]);
                        }
                        Escape::Form => out.extend(form_urlencoded::byte_serialize(raw.as_bytes())),
                    }
                }
            }
        }
    }
}

/// The capture names a step's placeholders may use: those captured before it (with
/// their indexes), and those only later steps capture (for a clear error).
#[derive(Debug, Default)]
pub(crate) struct Names<'a> {
    pub before: &'a [String],
    pub index: &'a [u16],
    pub later: &'a [String],
}

/// The body format of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum BodyFormat {
    #[serde(rename = "json")]
    Json,
    #[serde(rename = "form")]
    Form,
}

/// A template as written in TOML.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateFile {
    name: String,
    method: String,
    path: String,
    format: BodyFormat,
    body: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default = "default_pointers")]
    payment_id: Vec<String>,
    #[serde(default)]
    fulfillment: Option<ProbeFile>,
}

/// `[fulfillment]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProbeFile {
    #[serde(default = "default_probe_method")]
    method: String,
    path: String,
    count: String,
}

fn default_probe_method() -> String {
    "GET".into()
}

/// How to ask the target how many times it fulfilled an order.
#[derive(Debug, Clone)]
pub struct Probe {
    pub method: reqwest::Method,
    path: Text,
    /// A JSON pointer to an integer in the answer.
    pub count: String,
    /// The probe as written (`GET /orders/{{order_id}} → /fulfillments`), for reports.
    pub describe: String,
}

impl Probe {
    pub(crate) fn compile(file: &str, p: &ProbeFile) -> Result<Self, ConfigError> {
        let method = reqwest::Method::from_bytes(p.method.to_ascii_uppercase().as_bytes()).map_err(|_| {
            ConfigError::new(
                file,
                "fulfillment.method",
                format!("an HTTP method, got '{}'", p.method),
            )
        })?;
        if !p.path.starts_with('/') {
            return Err(ConfigError::new(file, "fulfillment.path", "a path starting with '/'"));
        }
        let path = Text::compile(&p.path, file, "fulfillment.path")?;
        let only_order_id = path.0.iter().all(|seg| match seg {
            Segment::Literal(_) => true,
            Segment::Value(v) => *v == Placeholder::OrderId,
        });
        if !path.uses(Placeholder::OrderId) || !only_order_id {
            return Err(ConfigError::new(
                file,
                "fulfillment.path",
                "a path naming the order with {{order_id}} and no other placeholder, such as /orders/{{order_id}}",
            ));
        }
        if !p.count.starts_with('/') {
            return Err(ConfigError::new(
                file,
                "fulfillment.count",
                format!(
                    "a JSON pointer starting with '/' to an integer, such as /fulfillments, got '{}'",
                    p.count
                ),
            ));
        }
        Ok(Self {
            describe: format!("{method} {} → {}", p.path, p.count),
            method,
            path,
            count: p.count.clone(),
        })
    }

    /// The probe's path for one order (the id form-escaped, as in a checkout's path).
    pub fn path(&self, order_id: &str) -> String {
        let values = Values {
            order_id,
            amount: 0,
            currency: "",
            idempotency_key: None,
            payment_method: "",
            api_key: "",
            captures: &[],
        };
        let mut out = String::new();
        self.path.render(&values, Escape::Form, &mut out);
        out
    }

    /// The count in an answer's body: the integer at the pointer.
    pub fn count_in(&self, body: &[u8]) -> Result<u64, String> {
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
        match v.pointer(&self.count) {
            Some(n) => n
                .as_u64()
                .ok_or_else(|| format!("{} is {n}, not a non-negative integer", self.count)),
            None => Err(format!("the answer has nothing at {}", self.count)),
        }
    }
}

pub(crate) fn default_pointers() -> Vec<String> {
    vec!["/payment_intent".into(), "/id".into()]
}

/// A compiled request template.
#[derive(Debug, Clone)]
pub struct Template {
    pub name: String,
    pub method: reqwest::Method,
    path: Text,
    format: BodyFormat,
    body: Text,
    headers: Vec<(reqwest::header::HeaderName, Text)>,
    payment_id: Vec<Pointer>,
    /// `[fulfillment]`, if the template has one.
    pub fulfillment: Option<Probe>,
}

/// A rendered attempt, ready to send.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub path: String,
    pub content_type: &'static str,
    pub body: String,
    pub headers: Vec<(reqwest::header::HeaderName, String)>,
}

pub const CHECKOUT_JSON: &str = r#"
name = "checkout-json"
method = "POST"
path = "/checkout"
format = "json"
body = '{"order_id":"{{order_id}}","amount":{{amount}},"currency":"{{currency}}","payment_method":"{{payment_method}}"}'
payment_id = ["/payment_intent", "/id"]

[headers]
Idempotency-Key = "{{idempotency_key}}"

[fulfillment]
method = "GET"
path = "/orders/{{order_id}}"
count = "/fulfillments"
"#;

pub const STRIPE: &str = r#"
name = "stripe"

# The server's confirm, with its key, retries and --mix.
[[step]]
name = "confirm"
payment = true
method = "POST"
path = "/v1/payment_intents"
format = "form"
body = "amount={{amount}}&currency={{currency}}&confirm=true&payment_method={{payment_method}}&metadata[order_id]={{order_id}}"
payment_id = ["/id", "/error/payment_intent/id"]
capture = { intent = "/id", status = "/status" }

[step.headers]
Authorization = "Bearer {{api_key}}"
Idempotency-Key = "{{idempotency_key}}"

# A card that asks for 3-D Secure: the customer passes it (fauxpay's scripted page).
[[step]]
name = "authenticate"
if = { status = "requires_action" }
method = "POST"
path = "/__fauxpay/payment_intents/{{intent}}/authenticate"
format = "form"
body = "outcome=succeed"
# The intent, or (a card declined after 3-D Secure) the 402 error's intent.
capture = { status = ["/status", "/error/payment_intent/status"] }

[outcome]
ok = { status = ["succeeded", "requires_capture", "processing"] }
fail = { status = ["requires_payment_method", "canceled"] }
"#;

pub const PAYMENT_ELEMENT: &str = r#"
name = "payment-element"

# The merchant opens an intent for the order (POST /api/payment-intents, as the reference
# merchants' storefront API; keyed: retries and --mix apply). Nothing is charged yet.
[[step]]
name = "create"
payment = true
method = "POST"
path = "/api/payment-intents"
format = "json"
body = '{"order_id":"{{order_id}}","amount":{{amount}},"currency":"{{currency}}"}'
payment_id = ["/payment_intent"]
capture = { intent = "/payment_intent", client_secret = "/clientSecret" }
[step.headers]
Idempotency-Key = "{{idempotency_key}}"

# The browser: the Payment Element confirms with the publishable key and the client secret.
[[step]]
name = "confirm"
base = "provider"
method = "POST"
path = "/v1/payment_intents/{{intent}}/confirm"
format = "form"
body = "client_secret={{client_secret}}&payment_method={{payment_method}}&return_url=https://fauxpay.invalid/done"
capture = { status = ["/status", "/error/payment_intent/status"] }
[step.headers]
Authorization = "Bearer pk_test_fauxpay_load"

# A card that asks for 3-D Secure: the customer passes it.
[[step]]
name = "authenticate"
base = "provider"
if = { status = "requires_action" }
method = "POST"
path = "/__fauxpay/payment_intents/{{intent}}/authenticate"
format = "form"
body = "outcome=succeed"
capture = { status = ["/status", "/error/payment_intent/status"] }

# Paid in the browser: the client polls the order until the merchant's webhook says paid.
[[step]]
name = "order"
if = { status = ["succeeded", "requires_capture", "processing"] }
path = "/orders/{{order_id}}"
capture = { order_status = "/status" }
poll = { every = "100ms", timeout = "10s", until = { order_status = "paid" } }

[outcome]
ok = { order_status = "paid" }
fail = { status = ["requires_payment_method", "canceled"] }

[fulfillment]
method = "GET"
path = "/orders/{{order_id}}"
count = "/fulfillments"
"#;

pub const CHECKOUT_SESSION: &str = r#"
name = "checkout-session"

# The merchant opens a Checkout Session for the order (POST /api/checkout-sessions, as the
# reference merchants' storefront API; keyed: retries and --mix apply).
[[step]]
name = "session"
payment = true
method = "POST"
path = "/api/checkout-sessions"
format = "json"
body = '{"order_id":"{{order_id}}","amount":{{amount}},"currency":"{{currency}}"}'
payment_id = ["/id"]
capture = { session = "/id" }
[step.headers]
Idempotency-Key = "{{idempotency_key}}"

# The customer pays on the Checkout page (its scripted pay).
[[step]]
name = "pay"
base = "provider"
method = "POST"
path = "/__fauxpay/checkout/sessions/{{session}}/pay"
format = "form"
body = "payment_method={{payment_method}}&email=customer@fauxpay.invalid"
think = "50ms..150ms"
capture = { intent = ["/payment_intent/id", "/error/payment_intent/id"], status = ["/payment_intent/status", "/error/payment_intent/status"] }

# A card that asks for 3-D Secure: the customer passes it.
[[step]]
name = "authenticate"
base = "provider"
if = { status = "requires_action" }
method = "POST"
path = "/__fauxpay/payment_intents/{{intent}}/authenticate"
format = "form"
body = "outcome=succeed"
capture = { status = ["/status", "/error/payment_intent/status"] }

# Back on the shop: the success page (the session's success_url).
[[step]]
name = "success"
if = { status = ["succeeded", "requires_capture", "processing"] }
path = "/checkout/success?session_id={{session}}"

# The client polls the order until it reads paid.
[[step]]
name = "order"
if = { status = ["succeeded", "requires_capture", "processing"] }
path = "/orders/{{order_id}}"
capture = { order_status = "/status" }
poll = { every = "100ms", timeout = "10s", until = { order_status = "paid" } }

[outcome]
ok = { order_status = "paid" }
fail = { status = ["requires_payment_method", "canceled"] }

[fulfillment]
method = "GET"
path = "/orders/{{order_id}}"
count = "/fulfillments"
"#;

/// The bundled templates, by name.
pub const BUNDLED: &[(&str, &str)] = &[
    ("checkout-json", CHECKOUT_JSON),
    ("stripe", STRIPE),
    ("payment-element", PAYMENT_ELEMENT),
    ("checkout-session", CHECKOUT_SESSION),
];

impl Template {
    /// A bundled one-request template by name, or a TOML file by path (a multi-step
    /// template is loaded by `crate::plan::Plan::load`).
    pub fn load(name_or_path: &str) -> Result<Self, ConfigError> {
        let (file, text) = source(name_or_path)?;
        Self::parse(&file, &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        Self::parse_with(file, text, &Names::default())
    }

    /// [`Template::parse`], its placeholders also taking `names` (a feeder's columns).
    pub(crate) fn parse_with(file: &str, text: &str, names: &Names<'_>) -> Result<Self, ConfigError> {
        let t: TemplateFile = toml::from_str(text).map_err(|e| toml_error(file, text, e))?;
        Self::compile(file, t, names)
    }
}

/// A bundled template's name and text, or a file's path and text.
pub(crate) fn source(name_or_path: &str) -> Result<(String, String), ConfigError> {
    if let Some((name, text)) = BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
        return Ok((name.to_string(), text.to_string()));
    }
    if !(name_or_path.contains('/') || name_or_path.ends_with(".toml")) {
        return Err(ConfigError::new(
            name_or_path,
            "template",
            "a bundled template (checkout-json, stripe, payment-element, checkout-session) or a path to a .toml file",
        ));
    }
    let text = std::fs::read_to_string(name_or_path)
        .map_err(|e| ConfigError::new(name_or_path, "template", format!("a readable file ({e})")))?;
    Ok((name_or_path.to_string(), text))
}

/// A TOML error in `file`, at its line.
pub(crate) fn toml_error(file: &str, text: &str, e: toml::de::Error) -> ConfigError {
    let line = e.span().map(|s| text[..s.start].lines().count().max(1));
    let message = e.message().to_string();
    match line {
        Some(l) => ConfigError::new(&format!("{file}:{l}"), "template", message),
        None => ConfigError::new(file, "template", message),
    }
}

/// A template's or a step's method: one that goose sends and counts (any other went out
/// as a POST through goose's request builder, unsaid).
fn sendable_method(file: &str, field: &str, text: &str) -> Result<reqwest::Method, ConfigError> {
    match reqwest::Method::from_bytes(text.to_ascii_uppercase().as_bytes()) {
        Ok(m) if goose::goose::goose_method_from_method(m.clone()).is_ok() => Ok(m),
        _ => Err(ConfigError::new(
            file,
            field,
            format!("GET, POST, PUT, PATCH, DELETE or HEAD, got '{text}'"),
        )),
    }
}

impl Template {
    fn compile(file: &str, t: TemplateFile, names: &Names<'_>) -> Result<Self, ConfigError> {
        let method = sendable_method(file, "method", &t.method)?;
        if !t.path.starts_with('/') {
            return Err(ConfigError::new(file, "path", "a path starting with '/'"));
        }
        let path = Text::compile_with(&t.path, file, "path", names)?;
        let body = Text::compile_with(&t.body, file, "body", names)?;
        if !body.uses(Placeholder::OrderId) {
            return Err(ConfigError::new(
                file,
                "body",
                "a body that sends {{order_id}} (the provider correlates charges by it)",
            ));
        }
        let mut headers = Vec::new();
        for (name, value) in &t.headers {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ConfigError::new(file, &format!("headers.{name}"), "a valid header name"))?;
            headers.push((
                header,
                Text::compile_with(value, file, &format!("headers.{name}"), names)?,
            ));
        }
        let payment_id = pointers(file, "payment_id", &t.payment_id)?;
        let fulfillment = t.fulfillment.as_ref().map(|p| Probe::compile(file, p)).transpose()?;
        Ok(Self {
            name: t.name,
            method,
            path,
            format: t.format,
            body,
            headers,
            payment_id,
            fulfillment,
        })
    }

    /// One step's request (`field` names the step in errors): its placeholders may use
    /// the captures `names` allows. No body (a GET) sends no content type.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn request(
        file: &str,
        field: &str,
        method: &str,
        path: &str,
        format: Option<BodyFormat>,
        body: Option<&str>,
        headers: &BTreeMap<String, String>,
        names: &Names<'_>,
    ) -> Result<Self, ConfigError> {
        let at = |f: &str| format!("{field}.{f}");
        let method = sendable_method(file, &at("method"), method)?;
        if body.is_some() && format.is_none() {
            return Err(ConfigError::new(
                file,
                &at("format"),
                "json or form, for the step's body",
            ));
        }
        let mut compiled_headers = Vec::new();
        for (name, value) in headers {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ConfigError::new(file, &at(&format!("headers.{name}")), "a valid header name"))?;
            compiled_headers.push((
                header,
                Text::compile_with(value, file, &at(&format!("headers.{name}")), names)?,
            ));
        }
        Ok(Self {
            name: field.to_string(),
            method,
            path: Text::compile_with(path, file, &at("path"), names)?,
            format: format.unwrap_or(BodyFormat::Json),
            body: match body {
                Some(b) => Text::compile_with(b, file, &at("body"), names)?,
                None => Text(Vec::new()),
            },
            headers: compiled_headers,
            payment_id: Vec::new(),
            fulfillment: None,
        })
    }

    /// Makes a flow's payment step's request (`self`, from [`Template::request`]) the
    /// template's: named `name`, naming the payment at `payment_id`, with the template's
    /// fulfilment probe. Its body must send `{{order_id}}`.
    pub(crate) fn into_payment_step(
        mut self,
        file: &str,
        name: &str,
        payment_id: Option<Vec<String>>,
        fulfillment: Option<&ProbeFile>,
    ) -> Result<Self, ConfigError> {
        let field = std::mem::take(&mut self.name);
        if !self.body.uses(Placeholder::OrderId) {
            return Err(ConfigError::new(
                file,
                &format!("{field}.body"),
                "a body that sends {{order_id}} (the provider correlates charges by it)",
            ));
        }
        self.payment_id = pointers(
            file,
            &format!("{field}.payment_id"),
            &payment_id.unwrap_or_else(default_pointers),
        )?;
        self.fulfillment = fulfillment.map(|p| Probe::compile(file, p)).transpose()?;
        self.name = name.to_string();
        Ok(self)
    }

    /// The captures this request's placeholders use.
    pub fn captures_used(&self) -> Vec<u16> {
        let mut used: Vec<u16> = std::iter::once(&self.path)
            .chain(std::iter::once(&self.body))
            .chain(self.headers.iter().map(|(_, t)| t))
            .flat_map(|t| t.0.iter())
            .filter_map(|seg| match seg {
                Segment::Value(Placeholder::Capture(i)) => Some(*i),
                _ => None,
            })
            .collect();
        used.sort_unstable();
        used.dedup();
        used
    }

    /// Whether the template sends an idempotency key at all.
    pub fn sends_key(&self) -> bool {
        self.headers.iter().any(|(_, v)| v.uses(Placeholder::IdempotencyKey))
            || self.body.uses(Placeholder::IdempotencyKey)
    }

    pub fn render(&self, v: &Values<'_>) -> Rendered {
        let mut path = String::new();
        self.path.render(v, Escape::Form, &mut path);
        let (escape, content_type) = match self.format {
            BodyFormat::Json => (Escape::Json, "application/json"),
            BodyFormat::Form => (Escape::Form, "application/x-www-form-urlencoded"),
        };
        let mut body = String::with_capacity(256);
        self.body.render(v, escape, &mut body);
        // A request without a body (a step's GET) says no content type.
        let content_type = if self.body.0.is_empty() { "" } else { content_type };
        let headers = self
            .headers
            .iter()
            .filter(|(_, t)| v.idempotency_key.is_some() || !t.uses(Placeholder::IdempotencyKey))
            .map(|(name, t)| {
                let mut value = String::new();
                t.render(v, Escape::None, &mut value);
                (name.clone(), value)
            })
            .collect();
        Rendered {
            path,
            content_type,
            body,
            headers,
        }
    }

    /// The payment id named by a successful (or card-error) answer.
    pub fn payment_id(&self, body: &serde_json::Value) -> Option<String> {
        self.payment_id
            .iter()
            .find_map(|p| p.lookup(body).and_then(|v| v.as_str()).map(str::to_string))
    }

    /// [`Template::payment_id`] of an answer's raw body, without building its JSON
    /// tree: each pointer is followed through the bytes and reading stops at the id (a
    /// Stripe object's first key); only the id is copied. It differs from parsing the
    /// whole body only for bodies no API sends (see [`crate::pointer`]). `None` when no
    /// pointer leads to a string in a body that is JSON up to that point.
    pub fn payment_id_in(&self, body: &[u8]) -> Option<String> {
        self.payment_id.iter().find_map(|p| p.find_str(body))
    }
}

/// Each of a template's `field` (JSON pointers starting with '/'), compiled.
pub(crate) fn pointers(file: &str, field: &str, written: &[String]) -> Result<Vec<Pointer>, ConfigError> {
    written
        .iter()
        .map(|p| {
            Pointer::rooted(p)
                .ok_or_else(|| ConfigError::new(file, field, format!("JSON pointers starting with '/', got '{p}'")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payment_ids_are_found_in_raw_bodies_as_in_parsed_ones() {
        let t = crate::plan::Plan::load("stripe").unwrap().template;
        let bodies: &[&[u8]] = &[
            br#"{"id":"pi_1","object":"payment_intent","metadata":{"id":"no"}}"#,
            br#"{"error":{"type":"card_error","payment_intent":{"id":"pi_2","x":[1,{"id":3}]}}}"#,
            br#"{"error":{"type":"api_error"}}"#,
            br#"{"id":5}"#,
            br#"{"id":"a\u00e9"}"#,
            br#"{"id" pi_1}"#,
            b"[1,2]",
            b"",
            b"  {\"id\" : \"spaced\" }  ",
        ];
        for body in bodies {
            let parsed = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| t.payment_id(&v));
            assert_eq!(t.payment_id_in(body), parsed, "{}", String::from_utf8_lossy(body));
        }
        // Reading stops at the id: the first of duplicate keys wins, and what follows it
        // is not read (a parsed `Value` would say "second", and None for the other two).
        for (body, id) in [
            (&br#"{"id":"first","id":"second"}"#[..], "first"),
            (br#"{"id":"pi_1"} trailing"#, "pi_1"),
            (br#"{"id":"a"b\u00e9"}"#, "a"),
            (br#"{"id":"pi_1","object":"payment_intent","amount":"#, "pi_1"),
            // A key whose value leads nowhere does not end the search.
            (br#"{"id":5,"object":{"id":"no"},"id":"pi_3"}"#, "pi_3"),
        ] {
            assert_eq!(
                t.payment_id_in(body).as_deref(),
                Some(id),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    fn values(key: Option<&str>) -> Values<'_> {
        Values {
            order_id: "r1-000001",
            amount: 2500,
            currency: "usd",
            idempotency_key: key,
            payment_method: "pm_card_visa",
            api_key: "sk_test_x",
            captures: &[],
        }
    }

    #[test]
    fn bundled_templates_render() {
        let t = Template::load("checkout-json").unwrap();
        let r = t.render(&values(Some("k-1")));
        assert_eq!(r.path, "/checkout");
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(body["amount"], 2500);
        assert_eq!(body["order_id"], "r1-000001");
        assert_eq!(r.headers[0].1, "k-1");
        let s = crate::plan::Plan::load("stripe")
            .unwrap()
            .template
            .render(&values(Some("k 1")));
        assert!(s.body.contains("metadata[order_id]=r1-000001"));
        assert!(s
            .headers
            .iter()
            .any(|(n, v)| n == "authorization" && v == "Bearer sk_test_x"));
    }

    #[test]
    fn no_key_leaves_the_key_header_out() {
        let t = Template::load("checkout-json").unwrap();
        assert!(t.sends_key());
        assert!(t.render(&values(None)).headers.is_empty());
    }

    #[test]
    fn values_are_escaped_for_their_format() {
        let t = Template::parse(
            "t.toml",
            "name='t'\nmethod='post'\npath='/x'\nformat='form'\nbody='order={{order_id}}'\n",
        )
        .unwrap();
        let mut v = values(None);
        v.order_id = "a&b=c d";
        assert_eq!(t.render(&v).body, "order=a%26b%3Dc+d");
        let j = Template::parse(
            "j.toml",
            "name='j'\nmethod='POST'\npath='/x'\nformat='json'\nbody='{\"o\":\"{{order_id}}\"}'\n",
        )
        .unwrap();
        v.order_id = "q\"uote";
        let parsed: serde_json::Value = serde_json::from_str(&j.render(&v).body).unwrap();
        assert_eq!(parsed["o"], "q\"uote");
    }

    #[test]
    fn bad_templates_name_the_field() {
        let cases = [
            (
                "name='t'\nmethod='POST'\npath='/x'\nformat='json'\nbody='{{nope}}'\n",
                "body",
            ),
            (
                "name='t'\nmethod='POST'\npath='x'\nformat='json'\nbody='{{order_id}}'\n",
                "path",
            ),
            ("name='t'\nmethod='POST'\npath='/x'\nformat='json'\nbody='{}'\n", "body"),
            (
                "name='t'\nmethod='POST'\npath='/x'\nformat='xml'\nbody='{{order_id}}'\n",
                "template",
            ),
            (
                "name='t'\nmethod='POST'\npath='/x'\nformat='json'\nbody='{{order_id}}'\nextra=1\n",
                "template",
            ),
        ];
        for (text, field) in cases {
            let e = Template::parse("t.toml", text).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{text}: {e}");
        }
        assert!(Template::load("nonexistent").is_err());
    }

    #[test]
    fn the_fulfillment_probe_is_compiled_and_checked() {
        let p = Template::load("checkout-json").unwrap().fulfillment.unwrap();
        assert_eq!(p.method, reqwest::Method::GET);
        assert_eq!(p.path("r1-000001"), "/orders/r1-000001");
        assert_eq!(p.path("a b/c"), "/orders/a+b%2Fc");
        assert_eq!(p.describe, "GET /orders/{{order_id}} → /fulfillments");
        assert_eq!(p.count_in(br#"{"order_id":"o","fulfillments":2}"#), Ok(2));
        assert!(p.count_in(br#"{"fulfillments":-1}"#).is_err());
        assert!(p.count_in(br#"{"fulfillments":"2"}"#).is_err());
        assert!(p.count_in(br#"{}"#).is_err());
        assert!(p.count_in(b"<html>").is_err());
        assert!(crate::plan::Plan::load("stripe")
            .unwrap()
            .template
            .fulfillment
            .is_none());

        for method in ["OPTIONS", "trace", "NO PE"] {
            let e = Template::parse(
                "t.toml",
                &format!("name='t'\nmethod='{method}'\npath='/x'\nformat='json'\nbody='{{{{order_id}}}}'\n"),
            )
            .unwrap_err()
            .to_string();
            assert_eq!(
                e,
                format!("t.toml: method: expected GET, POST, PUT, PATCH, DELETE or HEAD, got '{method}'")
            );
        }
        assert_eq!(
            Template::parse(
                "t.toml",
                "name='t'\nmethod='head'\npath='/x'\nformat='json'\nbody='{{order_id}}'\n"
            )
            .unwrap()
            .method,
            reqwest::Method::HEAD
        );

        let base = "name='t'\nmethod='POST'\npath='/x'\nformat='json'\nbody='{{order_id}}'\n";
        let ok = Template::parse(
            "t.toml",
            &format!("{base}[fulfillment]\npath='/o/{{{{order_id}}}}/x'\ncount='/n'\n"),
        )
        .unwrap()
        .fulfillment
        .unwrap();
        assert_eq!((ok.method.as_str(), ok.path("7").as_str()), ("GET", "/o/7/x"));
        for (table, field, expected) in [
            (
                "method='NO PE'\npath='/o/{{order_id}}'\ncount='/n'",
                "fulfillment.method",
                "an HTTP method",
            ),
            (
                "path='o/{{order_id}}'\ncount='/n'",
                "fulfillment.path",
                "starting with '/'",
            ),
            ("path='/orders'\ncount='/n'", "fulfillment.path", "{{order_id}}"),
            (
                "path='/o/{{order_id}}/{{amount}}'\ncount='/n'",
                "fulfillment.path",
                "no other placeholder",
            ),
            (
                "path='/o/{{nope}}'\ncount='/n'",
                "fulfillment.path",
                "unknown placeholder",
            ),
            ("path='/o/{{order_id}}'\ncount='n'", "fulfillment.count", "JSON pointer"),
            ("path='/o/{{order_id}}'", "template", "count"),
            ("path='/o/{{order_id}}'\ncount='/n'\nextra=1", "template", "extra"),
        ] {
            let e = Template::parse("t.toml", &format!("{base}[fulfillment]\n{table}\n")).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{table}: {e}");
            let line = e.to_string();
            assert!(line.contains(expected) && !line.contains('\n'), "{table}: {line}");
            assert!(line.starts_with("t.toml"), "{line}");
        }
    }

    #[test]
    fn payment_ids_come_from_the_pointers() {
        let t = crate::plan::Plan::load("stripe").unwrap().template;
        assert_eq!(
            t.payment_id(&serde_json::json!({"id": "pi_1"})).as_deref(),
            Some("pi_1")
        );
        let err = serde_json::json!({"error": {"payment_intent": {"id": "pi_2"}}});
        assert_eq!(t.payment_id(&err).as_deref(), Some("pi_2"));
    }
}
