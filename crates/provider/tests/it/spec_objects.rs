//! Every object fauxpay returns, validated against Stripe's own schema for it.
//!
//! The schema is Stripe's OpenAPI 3.0 spec in `spec/stripe-openapi/` (API version
//! 2023-08-16), converted here to JSON Schema 2020-12 and checked with the `jsonschema`
//! crate. Over real sockets, each `/v1` endpoint's answers are validated against the
//! response the spec declares for that endpoint and status (`200`, or `default` for an
//! error): payment intents in every status fauxpay produces (`requires_action` with both
//! kinds of `next_action` included), setup intents in every status, charges in every
//! state, refunds, customers (deleted ones too) and payment methods, lists and search
//! results (envelope and items), and the error object
//! (declines with the payment intent they embed, validation, state, idempotency, auth,
//! routing errors, and injected 5xx and 429s). Replays are validated too.
//!
//! The conversion from OpenAPI 3.0: `$ref: #/components/schemas/X` becomes `#/$defs/X`;
//! `nullable: true` becomes a type union with `"null"` (and `null` joins an `enum`), or,
//! where the schema has no `type` (the `$ref` / `anyOf` cases), `anyOf: [schema, {type:
//! null}]`; `x-*` extensions are dropped. Two tightenings over the spec, both what
//! Stripe's API does: objects are closed (`additionalProperties: false` where the spec
//! lists `properties` and says nothing else), so a field Stripe never sends (a typo, an
//! invented name) fails; and a nullable field is required, since Stripe sends `null`
//! rather than leaving the field out (the spec's `required` lists only the non-nullable
//! ones), except the few that [`SENT_ONLY_WHEN_EXPANDED`] names.

use fauxpay_testkit::provider as common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use common::{Harness, KEY};
use fauxpay_faults::{ms, secs, Fault, ForcedFault, When};
use fauxpay_provider::resources::endpoint::Verb;
use fauxpay_provider::resources::endpoints;
use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::{json, Map, Value};

const SPEC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../spec/stripe-openapi/spec3-subset.json"
);

/// Nullable fields Stripe leaves out of an object unless `expand[]` names them (so
/// fauxpay's objects may too): a charge's `refunds`, since API version 2022-11-15; a
/// customer's `cash_balance` (one of its "includable" fields).
const SENT_ONLY_WHEN_EXPANDED: &[(&str, &str)] = &[("charge", "refunds"), ("customer", "cash_balance")];

/// The spec, and its component schemas converted to JSON Schema (the `$defs` of every
/// validator built here).
struct Spec {
    doc: Value,
    defs: Value,
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

fn spec() -> &'static Spec {
    static SPEC_DOC: OnceLock<Spec> = OnceLock::new();
    SPEC_DOC.get_or_init(|| {
        let text = std::fs::read(SPEC).unwrap_or_else(|e| panic!("{SPEC}: {e}"));
        let doc: Value = serde_json::from_slice(&text).expect("the spec is JSON");
        assert_eq!(doc["openapi"], "3.0.0");
        let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
        let mut defs: Map<String, Value> = schemas.iter().map(|(k, v)| (k.clone(), convert(v))).collect();
        for (schema, field) in SENT_ONLY_WHEN_EXPANDED {
            let required = defs[*schema]["required"].as_array_mut().expect("required");
            let before = required.len();
            required.retain(|r| r != field);
            assert_eq!(required.len(), before - 1, "{schema}.{field} is not a nullable field");
        }
        Spec {
            doc,
            defs: Value::Object(defs),
            validators: Mutex::default(),
        }
    })
}

/// An OpenAPI 3.0 schema object as JSON Schema 2020-12 (see the module docs).
fn convert(schema: &Value) -> Value {
    let Value::Object(m) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        if k.starts_with("x-") || matches!(k.as_str(), "nullable" | "description" | "title") {
            continue;
        }
        let v = match k.as_str() {
            "$ref" => json!(v
                .as_str()
                .expect("$ref is a string")
                .replace("#/components/schemas/", "#/$defs/")),
            "properties" => Value::Object(
                v.as_object()
                    .expect("properties is an object")
                    .iter()
                    .map(|(name, s)| (name.clone(), convert(s)))
                    .collect(),
            ),
            "items" | "additionalProperties" | "not" => convert(v),
            "anyOf" | "oneOf" | "allOf" => {
                Value::Array(v.as_array().expect("a list of schemas").iter().map(convert).collect())
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        if !out.contains_key("additionalProperties") {
            out.insert("additionalProperties".into(), json!(false));
        }
        let mut required: Vec<Value> = m.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        for (name, p) in props {
            if p.get("nullable") == Some(&json!(true)) && !required.contains(&json!(name)) {
                required.push(json!(name));
            }
        }
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
    }
    if m.get("nullable") == Some(&json!(true)) {
        match out.get("type").cloned() {
            Some(Value::String(t)) => {
                out.insert("type".into(), json!([t, "null"]));
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    values.push(Value::Null);
                }
            }
            Some(other) => panic!("nullable with type {other}"),
            None => return json!({"anyOf": [Value::Object(out), {"type": "null"}]}),
        }
    }
    Value::Object(out)
}

/// The validator of `schema` (a converted schema without `$defs`), built once per key.
fn validator(key: &str, schema: impl FnOnce() -> Value) -> Arc<Validator> {
    let spec = spec();
    if let Some(v) = spec.validators.lock().unwrap().get(key) {
        return v.clone();
    }
    let mut root = schema();
    root["$defs"] = spec.defs.clone();
    let v = Arc::new(
        jsonschema::draft202012::options()
            .build(&root)
            .unwrap_or_else(|e| panic!("{key}: {e}")),
    );
    spec.validators.lock().unwrap().insert(key.to_string(), v.clone());
    v
}

/// The validator of a component schema (`payment_intent`, `error`, …).
fn component(name: &str) -> Arc<Validator> {
    assert!(spec().defs.get(name).is_some(), "no schema {name}");
    validator(name, || json!({"$ref": format!("#/$defs/{name}")}))
}

/// The validator of what the spec says `method path` answers with `status`: its `200`
/// response, or its `default` (the error object) for any other status.
fn response(method: &str, path: &str, status: u16) -> Arc<Validator> {
    let code = if status == 200 { "200" } else { "default" };
    let op = &spec().doc["paths"][path][method.to_ascii_lowercase()];
    assert!(op.is_object(), "the spec has no {method} {path}");
    let schema = &op["responses"][code]["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "the spec has no {code} response for {method} {path}"
    );
    match schema["$ref"].as_str() {
        Some(r) => component(r.trim_start_matches("#/components/schemas/")),
        None => validator(&format!("{method} {path} {code}"), || convert(schema)),
    }
}

/// `validator`'s complaints about `value`, one line each.
fn errors(validator: &Validator, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for e in validator.iter_errors(value) {
        describe(&e, &mut out);
    }
    out
}

/// One line per error; an `anyOf` failure (a nullable or expandable field) is described
/// by what failed inside the branches that were not simply the wrong type.
fn describe(e: &ValidationError<'_>, out: &mut Vec<String>) {
    if let ValidationErrorKind::AnyOf { context } = e.kind() {
        let wrong_type = |branch: &Vec<ValidationError<'static>>| {
            branch.len() == 1 && matches!(branch[0].kind(), ValidationErrorKind::Type { .. })
        };
        let inner: Vec<_> = context.iter().filter(|b| !wrong_type(b)).collect();
        if !inner.is_empty() {
            for err in inner.into_iter().flatten() {
                describe(err, out);
            }
            return;
        }
    }
    let mut text = e.to_string();
    if text.len() > 300 {
        let cut = (0..=300).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    out.push(format!("at {} ({}): {text}", e.instance_path(), e.schema_path()));
}

/// A test run: requests over a real socket, each answer validated as it arrives.
struct Run {
    h: Harness,
    failures: Vec<String>,
    /// `METHOD spec-path` of every endpoint that answered 200 and was validated.
    covered: BTreeSet<String>,
    /// The error `type`s validated.
    error_types: BTreeSet<String>,
    validated: usize,
}

impl Run {
    async fn new() -> Self {
        Self {
            h: Harness::default().await,
            failures: Vec::new(),
            covered: BTreeSet::new(),
            error_types: BTreeSet::new(),
            validated: 0,
        }
    }

    /// Sends `method path` (a spec path; its `{…}` parameter filled with `id`) with a
    /// form body or query string and `headers`, and validates the answer against the
    /// spec's response for that endpoint and status.
    async fn send(&mut self, method: &str, path: &str, id: &str, form: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let concrete = fill(path, id);
        let mut rb = match method {
            "DELETE" => self.h.client.delete(self.h.url(&concrete)).bearer_auth(KEY),
            "GET" => {
                let url = if form.is_empty() {
                    concrete.clone()
                } else {
                    format!("{concrete}?{form}")
                };
                self.h.get(&url)
            }
            _ => self
                .h
                .post(&concrete)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form.to_string()),
        };
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        let resp = rb.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.expect("a JSON body");
        self.validate(method, path, status, &body);
        (status, body)
    }

    fn validate(&mut self, method: &str, path: &str, status: u16, body: &Value) {
        let label = format!(
            "{method} {path} → {status} ({})",
            [
                &body["object"],
                &body["status"],
                &body["error"]["type"],
                &body["error"]["code"]
            ]
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(" ")
        );
        let errs = errors(&response(method, path, status), body);
        self.failures.extend(errs.into_iter().map(|e| format!("{label}: {e}")));
        self.validated += 1;
        if status == 200 {
            self.covered.insert(format!("{method} {path}"));
        } else if let Some(t) = body["error"]["type"].as_str() {
            self.error_types.insert(t.to_string());
        }
    }

    async fn post(&mut self, path: &str, id: &str, form: &str) -> (u16, Value) {
        self.send("POST", path, id, form, &[]).await
    }

    async fn get(&mut self, path: &str, id: &str, query: &str) -> (u16, Value) {
        self.send("GET", path, id, query, &[]).await
    }

    /// A POST that must answer 200: its object.
    async fn ok(&mut self, path: &str, id: &str, form: &str) -> Value {
        let (status, body) = self.post(path, id, form).await;
        assert_eq!(status, 200, "POST {path} {form}: {body}");
        body
    }

    async fn fetch(&mut self, path: &str, id: &str) -> Value {
        self.fetch_with(path, id, "").await
    }

    /// A GET with a query string that must answer 200: its object.
    async fn fetch_with(&mut self, path: &str, id: &str, query: &str) -> Value {
        let (status, body) = self.get(path, id, query).await;
        assert_eq!(status, 200, "GET {path} {id}?{query}: {body}");
        body
    }
}

/// `path` with its `{…}` parameters replaced by the ids in `id`, in order (a path with
/// two takes them space-separated: `"ch_1 re_1"`).
fn fill(path: &str, id: &str) -> String {
    let mut ids = id.split(' ');
    let (mut out, mut rest) = (String::new(), path);
    while let (Some(a), Some(b)) = (rest.find('{'), rest.find('}')) {
        out.push_str(&rest[..a]);
        out.push_str(ids.next().unwrap_or(""));
        rest = &rest[b + 1..];
    }
    out + rest
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_string()
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap_or_else(|| panic!("no {field} in {v}"))
}

const PI: &str = "/v1/payment_intents";
const PI_ONE: &str = "/v1/payment_intents/{intent}";
const CH: &str = "/v1/charges";
const CH_ONE: &str = "/v1/charges/{charge}";
const RE: &str = "/v1/refunds";
const RE_ONE: &str = "/v1/refunds/{refund}";
const SI: &str = "/v1/setup_intents";
const SI_ONE: &str = "/v1/setup_intents/{intent}";
const CUS: &str = "/v1/customers";
const CUS_ONE: &str = "/v1/customers/{customer}";
const PM: &str = "/v1/payment_methods";
const PM_ONE: &str = "/v1/payment_methods/{payment_method}";
const EVT: &str = "/v1/events";
const EVT_ONE: &str = "/v1/events/{id}";
const WE: &str = "/v1/webhook_endpoints";
const WE_ONE: &str = "/v1/webhook_endpoints/{webhook_endpoint}";
const PROD: &str = "/v1/products";
const PROD_ONE: &str = "/v1/products/{id}";
const PRICE: &str = "/v1/prices";
const PRICE_ONE: &str = "/v1/prices/{price}";
const CS: &str = "/v1/checkout/sessions";
const CS_ONE: &str = "/v1/checkout/sessions/{session}";

impl Run {
    /// A `/__fauxpay/` authenticate request (not in Stripe's spec): its answer, an
    /// intent or an error, validated against Stripe's schema for that object.
    async fn authenticate(&mut self, kind: &str, id: &str, outcome: &str) -> (u16, Value) {
        let resp = self
            .h
            .form(
                &format!("/__fauxpay/{kind}s/{id}/authenticate"),
                &format!("outcome={outcome}"),
                None,
            )
            .await;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.expect("a JSON body");
        let schema = if status == 200 { kind } else { "error" };
        let errs = errors(&component(schema), &body);
        self.failures
            .extend(errs.into_iter().map(|e| format!("authenticate {kind} → {status}: {e}")));
        self.validated += 1;
        (status, body)
    }
}

/// Expanded responses: every field fauxpay expands, nested, in lists and search results,
/// a charge's refunds, a deleted customer; each validated as its endpoint's response (an
/// expandable field is a string or the object).
async fn expanded(r: &mut Run) {
    let cus = r
        .ok(
            CUS,
            "",
            "email=x%40example.com&payment_method=pm_card_visa&invoice_settings[default_payment_method]=pm_card_visa&expand[]=invoice_settings.default_payment_method",
        )
        .await;
    let cus_id = id(&cus);
    let pm = id(&cus["invoice_settings"]["default_payment_method"]);
    let pi = r
        .ok(
            PI,
            "",
            &format!("amount=2000&currency=usd&confirm=true&customer={cus_id}&payment_method={pm}&expand[]=latest_charge.customer&expand[]=customer&expand[]=payment_method.customer"),
        )
        .await;
    assert_eq!(pi["latest_charge"]["customer"]["id"], cus_id.as_str());
    let ch_id = id(&pi["latest_charge"]);
    let re = r
        .ok(
            RE,
            "",
            &format!("charge={ch_id}&amount=500&expand[]=charge&expand[]=payment_intent"),
        )
        .await;
    assert_eq!(re["charge"]["object"], "charge");
    let ch = r
        .fetch_with(
            CH_ONE,
            &ch_id,
            "expand[]=refunds.data.payment_intent&expand[]=payment_intent.latest_charge&expand[]=customer",
        )
        .await;
    assert_eq!(ch["refunds"]["data"][0]["payment_intent"]["object"], "payment_intent");
    let (_, list) = r
        .get(
            PI,
            "",
            "expand[]=data.latest_charge&expand[]=data.customer&expand[]=data.payment_method",
        )
        .await;
    assert!(list["data"][0]["latest_charge"].is_object());
    for (path, query) in [
        (
            "/v1/payment_intents/search",
            "query=status%3A%27succeeded%27&expand[]=data.latest_charge.payment_intent",
        ),
        (
            "/v1/charges/search",
            "query=amount%3A2000&expand[]=data.refunds&expand[]=data.customer",
        ),
        (CH, "expand[]=data.payment_intent"),
        (RE, "expand[]=data.charge.customer"),
        (CUS, "expand[]=data.invoice_settings.default_payment_method"),
        (
            "/v1/customers/search",
            "query=email%3A%27x%40example.com%27&expand[]=data.invoice_settings.default_payment_method",
        ),
    ] {
        let (status, list) = r.get(path, "", query).await;
        assert_eq!(status, 200, "{path}?{query}: {list}");
    }
    let (status, _) = r
        .get(
            "/v1/customers/{customer}/payment_methods",
            &cus_id,
            "expand[]=data.customer",
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = r
        .get(PM, "", &format!("customer={cus_id}&expand[]=data.customer"))
        .await;
    assert_eq!(status, 200);
    r.fetch_with(PM_ONE, &pm, "expand[]=customer").await;
    // A deleted customer: `deleted_customer` where the spec allows it.
    r.send("DELETE", CUS_ONE, &cus_id, "", &[]).await;
    let again = r
        .fetch_with(PI_ONE, &id(&pi), "expand[]=customer&expand[]=latest_charge.customer")
        .await;
    assert_eq!(again["customer"]["deleted"], true);
    // A refused expansion is the error object.
    let (status, _) = r.get(PI_ONE, &id(&pi), "expand[]=nope").await;
    assert_eq!(status, 400);
}

/// Payment intents in every status fauxpay produces, and their charges.
async fn intents(r: &mut Run) {
    // requires_payment_method, with every free-text field and metadata set.
    let cus = id(&r.ok(CUS, "", "email=a%40example.com").await);
    let full = format!("amount=1500&currency=eur&automatic_payment_methods[enabled]=true&customer={cus}&description=Tea%20%22and%22%20cake&receipt_email=a%40example.com&statement_descriptor=ACME%20TEA&statement_descriptor_suffix=TEA&transfer_group=g1&metadata[order_id]=o-1&metadata[note]=x&setup_future_usage=off_session");
    let pi = r.ok(PI, "", &full).await;
    assert_eq!(pi["status"], "requires_payment_method");
    let (cancelled_id, bare) = (id(&pi), r.ok(PI, "", "amount=700&currency=usd").await);
    assert_eq!(bare["status"], "requires_payment_method");
    // requires_confirmation, then succeeded through confirm.
    let pi = r
        .ok(
            PI,
            "",
            "amount=2000&currency=usd&payment_method=pm_card_visa&capture_method=automatic_async",
        )
        .await;
    assert_eq!(pi["status"], "requires_confirmation");
    let done = r.ok("/v1/payment_intents/{intent}/confirm", &id(&pi), "").await;
    assert_eq!(done["status"], "succeeded");
    r.fetch(CH_ONE, str_of(&done, "latest_charge")).await;
    // Confirming a requires_payment_method intent with a method.
    let done = r
        .ok(
            "/v1/payment_intents/{intent}/confirm",
            &id(&bare),
            "payment_method=pm_card_mastercard",
        )
        .await;
    assert_eq!(done["status"], "succeeded");
    // Created and confirmed at once; replayed under its key.
    let body = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o-2";
    let (status, first) = r.send("POST", PI, "", body, &[("Idempotency-Key", "spec-1")]).await;
    assert_eq!((status, &first["status"]), (200, &json!("succeeded")));
    let (_, replay) = r.send("POST", PI, "", body, &[("Idempotency-Key", "spec-1")]).await;
    assert_eq!(replay, first);
    r.fetch(PI_ONE, &id(&first)).await;

    // requires_capture; its uncaptured charge; captured in part; the charge after.
    let manual = r
        .ok(
            PI,
            "",
            "amount=3000&currency=usd&confirm=true&capture_method=manual&payment_method=pm_card_amex",
        )
        .await;
    assert_eq!(manual["status"], "requires_capture");
    let charge = r.fetch(CH_ONE, str_of(&manual, "latest_charge")).await;
    assert_eq!(charge["captured"], false);
    let captured = r
        .ok(
            "/v1/payment_intents/{intent}/capture",
            &id(&manual),
            "amount_to_capture=2500",
        )
        .await;
    assert_eq!(captured["status"], "succeeded");
    let charge = r.fetch(CH_ONE, str_of(&manual, "latest_charge")).await;
    assert_eq!(
        (&charge["captured"], &charge["amount_captured"]),
        (&json!(true), &json!(2500))
    );

    // canceled: from requires_payment_method with a reason, and from requires_capture
    // (the authorisation released).
    let canceled = r
        .ok(
            "/v1/payment_intents/{intent}/cancel",
            &cancelled_id,
            "cancellation_reason=requested_by_customer",
        )
        .await;
    assert_eq!(canceled["status"], "canceled");
    let held = r
        .ok(
            PI,
            "",
            "amount=900&currency=usd&confirm=true&capture_method=manual&payment_method=pm_card_visa",
        )
        .await;
    let released = r.ok("/v1/payment_intents/{intent}/cancel", &id(&held), "").await;
    assert_eq!(released["status"], "canceled");
    let charge = r.fetch(CH_ONE, str_of(&held, "latest_charge")).await;
    assert_eq!(
        (&charge["captured"], &charge["refunded"]),
        (&json!(false), &json!(true))
    );

    // A decline: the card error embeds the intent (requires_payment_method with its
    // last_payment_error); the intent and its failed charge, fetched.
    let (status, err) = r
        .post(
            PI,
            "",
            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_chargeDeclinedInsufficientFunds",
        )
        .await;
    assert_eq!((status, &err["error"]["type"]), (402, &json!("card_error")));
    let embedded = &err["error"]["payment_intent"];
    assert_eq!(embedded["last_payment_error"]["decline_code"], "insufficient_funds");
    let declined = r.fetch(PI_ONE, &id(embedded)).await;
    assert_eq!(declined["status"], "requires_payment_method");
    assert!(declined["last_payment_error"].is_object());
    let failed = r.fetch(CH_ONE, str_of(&err["error"], "charge")).await;
    assert_eq!(failed["status"], "failed");
    // A decline on confirm, and a raw card number that declines.
    let (status, err) = r
        .post(
            "/v1/payment_intents/{intent}/confirm",
            &id(&declined),
            "payment_method=pm_card_chargeDeclinedExpiredCard",
        )
        .await;
    assert_eq!((status, &err["error"]["code"]), (402, &json!("expired_card")));
    let (status, _) = r
        .post(
            PI,
            "",
            "amount=2000&currency=usd&confirm=true&payment_method_data[type]=card&payment_method_data[card][number]=4000000000000002&payment_method_data[card][exp_month]=12&payment_method_data[card][exp_year]=2034",
        )
        .await;
    assert_eq!(status, 402);

    // Updated, before and after the payment.
    let open = id(&r
        .ok(PI, "", "amount=700&currency=usd&description=d&metadata[note]=x")
        .await);
    let updated = r.ok(PI_ONE, &open, "amount=1600&description=&metadata[note]=y").await;
    assert_eq!(updated["amount"], 1600);
    r.ok(PI_ONE, &id(&done), "metadata[k]=v").await;
}

/// Payment intents waiting for 3-D Secure (`next_action` of both kinds), after a failed
/// authentication, after a completed one, and refused off-session.
async fn three_d_secure(r: &mut Run) {
    let waiting = r
        .ok(
            PI,
            "",
            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_authenticationRequired",
        )
        .await;
    assert_eq!(waiting["next_action"]["type"], "use_stripe_sdk");
    let redirect = r
        .ok(
            PI,
            "",
            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_threeDSecure2Required&return_url=https%3A%2F%2Fshop.example%2Fback",
        )
        .await;
    assert_eq!(redirect["next_action"]["type"], "redirect_to_url");
    r.fetch(PI_ONE, &id(&redirect)).await;
    let (status, failed) = r.authenticate("payment_intent", &id(&waiting), "fail").await;
    assert_eq!(status, 200);
    assert_eq!(
        failed["last_payment_error"]["code"],
        "payment_intent_authentication_failure"
    );
    r.fetch(PI_ONE, &id(&waiting)).await;
    let (status, done) = r.authenticate("payment_intent", &id(&redirect), "succeed").await;
    assert_eq!((status, &done["status"]), (200, &json!("succeeded")));
    let (status, _) = r.authenticate("payment_intent", &id(&redirect), "succeed").await;
    assert_eq!(status, 400);
    let declined = r
        .ok(
            PI,
            "",
            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_authenticationRequiredChargeDeclinedInsufficientFunds",
        )
        .await;
    let (status, _) = r.authenticate("payment_intent", &id(&declined), "succeed").await;
    assert_eq!(status, 402);
    let (status, e) = r
        .post(
            PI,
            "",
            "amount=2000&currency=usd&confirm=true&off_session=true&payment_method=pm_card_authenticationRequired",
        )
        .await;
    assert_eq!((status, &e["error"]["code"]), (402, &json!("authentication_required")));
}

/// Setup intents in every status fauxpay produces.
async fn setup_intents(r: &mut Run) {
    let cus = id(&r.ok(CUS, "", "email=s%40example.com").await);
    let open = r
        .ok(SI, "", &format!("customer={cus}&description=d&metadata[k]=v"))
        .await;
    assert_eq!(open["status"], "requires_payment_method");
    let ready = r.ok(SI, "", "payment_method=pm_card_visa&usage=on_session").await;
    assert_eq!(ready["status"], "requires_confirmation");
    let ready = r
        .ok(
            SI_ONE,
            &id(&ready),
            "description=later&metadata[k]=v&payment_method=pm_card_mastercard",
        )
        .await;
    assert_eq!(ready["status"], "requires_confirmation");
    let done = r
        .ok(&format!("{SI_ONE}/confirm"), &id(&open), "payment_method=pm_card_visa")
        .await;
    assert_eq!(done["status"], "succeeded");
    let canceled = r
        .ok(
            &format!("{SI_ONE}/cancel"),
            &id(&ready),
            "cancellation_reason=abandoned",
        )
        .await;
    assert_eq!(canceled["status"], "canceled");
    let waiting = r
        .ok(
            SI,
            "",
            &format!("customer={cus}&payment_method=pm_card_authenticationRequiredOnSetup&confirm=true"),
        )
        .await;
    assert_eq!(waiting["status"], "requires_action");
    let redirect = r
        .ok(
            SI,
            "",
            "payment_method=pm_card_authenticationRequired&confirm=true&return_url=https%3A%2F%2Fshop.example%2Fsaved&payment_method_types[]=card",
        )
        .await;
    assert_eq!(redirect["next_action"]["type"], "redirect_to_url");
    let (status, failed) = r.authenticate("setup_intent", &id(&waiting), "fail").await;
    assert_eq!((status, &failed["status"]), (200, &json!("requires_payment_method")));
    let (status, _) = r.authenticate("setup_intent", &id(&redirect), "succeed").await;
    assert_eq!(status, 200);
    r.fetch(SI_ONE, &id(&waiting)).await;
    let (status, e) = r
        .post(SI, "", "payment_method=pm_card_chargeDeclined&confirm=true")
        .await;
    assert_eq!(
        (status, &e["error"]["setup_intent"]["status"]),
        (402, &json!("requires_payment_method"))
    );
    let (status, e) = r.post(&format!("{SI_ONE}/cancel"), &id(&done), "").await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("setup_intent_unexpected_state"))
    );
    let (status, _) = r.get(SI_ONE, "seti_doesnotexist", "").await;
    assert_eq!(status, 404);
}

/// Products, prices and Checkout Sessions (paid, with 3-D Secure, in setup mode,
/// expired), their lists, searches, expansions and line items.
async fn checkout(r: &mut Run) {
    let product = r
        .ok(
            PROD,
            "",
            "name=Mug&description=d&metadata[k]=v&images[]=https%3A%2F%2Fi.example%2Fm.png&default_price_data[currency]=usd&default_price_data[unit_amount]=1200",
        )
        .await;
    let prod = id(&product);
    let price = str_of(&product, "default_price").to_string();
    r.ok(PROD_ONE, &prod, "name=Big%20mug&active=true").await;
    r.fetch(PROD_ONE, &prod).await;
    r.fetch_with(PROD, "", "active=true&limit=3").await;
    r.fetch_with(&format!("{PROD}/search"), "", "query=name%3A%27Big%20mug%27")
        .await;
    r.fetch_with(PROD_ONE, &prod, "expand[]=default_price").await;
    let spare = id(&r.ok(PROD, "", "name=Spare&id=spare-1").await);
    let (status, gone) = r.send("DELETE", PROD_ONE, &spare, "", &[]).await;
    assert_eq!((status, &gone["deleted"]), (200, &json!(true)));
    let (status, _) = r.get(PROD_ONE, &spare, "").await;
    assert_eq!(status, 404);
    let monthly = r
        .ok(
            PRICE,
            "",
            &format!("currency=usd&unit_amount=500&product={prod}&recurring[interval]=month&lookup_key=m&nickname=n"),
        )
        .await;
    r.ok(PRICE_ONE, &id(&monthly), "metadata[k]=v&active=false").await;
    r.fetch(PRICE_ONE, &price).await;
    r.fetch_with(PRICE, "", &format!("product={prod}&type=recurring")).await;
    r.fetch_with(&format!("{PRICE}/search"), "", "query=currency%3A%27usd%27")
        .await;
    r.fetch_with(PRICE_ONE, &price, "expand[]=product").await;

    let new_session = |extra: &str| {
        format!(
            "mode=payment&line_items[0][price]={price}&line_items[0][quantity]=2\
             &line_items[1][price_data][currency]=usd&line_items[1][price_data][unit_amount]=300\
             &line_items[1][price_data][product_data][name]=Gift%20wrap&line_items[1][quantity]=1\
             &success_url=https%3A%2F%2Fshop.example%2Fok&cancel_url=https%3A%2F%2Fshop.example%2Fcart\
             &client_reference_id=c1&metadata[order_id]=cs-1&payment_intent_data[description]=d{extra}"
        )
    };
    let open = r.ok(CS, "", &new_session("&customer_email=a%40b.co")).await;
    assert_eq!(open["amount_total"], 2700);
    let sid = id(&open);
    r.fetch(CS_ONE, &sid).await;
    r.fetch_with(&format!("{CS_ONE}/line_items"), &sid, "limit=1").await;
    let pay = |sid: &str, card: &str| {
        (
            format!("/__fauxpay/checkout/sessions/{sid}/pay"),
            format!("payment_method={card}&email=a%40b.co"),
        )
    };
    let (path, body) = pay(&sid, "pm_card_visa");
    let resp = r.h.form(&path, &body, None).await;
    assert_eq!(resp.status(), 200);
    let paid = r
        .fetch_with(
            CS_ONE,
            &sid,
            "expand[]=payment_intent&expand[]=line_items&expand[]=line_items.data.price.product",
        )
        .await;
    assert_eq!(paid["status"], "complete");
    r.fetch_with(
        CS,
        "",
        &format!(
            "payment_intent={}&limit=2",
            paid["payment_intent"]["id"].as_str().unwrap()
        ),
    )
    .await;
    r.fetch_with(CS, "", "expand[]=data.payment_intent").await;
    let waiting = id(&r
        .ok(CS, "", &new_session("&payment_intent_data[capture_method]=manual"))
        .await);
    let (path, body) = pay(&waiting, "pm_card_authenticationRequired");
    assert_eq!(r.h.form(&path, &body, None).await.status(), 200);
    r.fetch(CS_ONE, &waiting).await;
    let cus = id(&r.ok(CUS, "", "email=s%40example.com").await);
    let setup = id(&r
        .ok(
            CS,
            "",
            &format!("mode=setup&currency=usd&customer={cus}&success_url=https%3A%2F%2Fshop.example%2Fsaved"),
        )
        .await);
    let (path, body) = pay(&setup, "4242424242424242");
    assert_eq!(r.h.form(&path, &body, None).await.status(), 200);
    let saved = r.fetch_with(CS_ONE, &setup, "expand[]=setup_intent").await;
    assert_eq!(saved["payment_status"], "no_payment_required");
    let doomed = id(&r.ok(CS, "", &new_session("")).await);
    let expired = r.ok(&format!("{CS_ONE}/expire"), &doomed, "").await;
    assert_eq!(expired["status"], "expired");
    let (status, _) = r.post(&format!("{CS_ONE}/expire"), &doomed, "").await;
    assert_eq!(status, 400);
    let (status, _) = r.get(CS_ONE, "cs_test_doesnotexist", "").await;
    assert_eq!(status, 404);
}

/// Customers (deleted ones too) and payment methods.
async fn customers_and_payment_methods(r: &mut Run) {
    let c = r
        .ok(
            CUS,
            "",
            "email=c%40example.com&name=C&phone=%2B15555550100&description=d&metadata[k]=v&payment_method=pm_card_visa&invoice_settings[default_payment_method]=pm_card_visa",
        )
        .await;
    r.fetch(CUS_ONE, &id(&c)).await;
    r.ok(CUS_ONE, &id(&c), "name=D&metadata[k]=").await;
    let pm = r
        .ok(
            PM,
            "",
            "type=card&card[token]=tok_mastercard&billing_details[name]=C&billing_details[address][city]=Paris&metadata[k]=v",
        )
        .await;
    r.ok(PM_ONE, &id(&pm), "billing_details[email]=c%40example.com").await;
    r.ok(&format!("{PM_ONE}/attach"), &id(&pm), &format!("customer={}", id(&c)))
        .await;
    r.fetch(PM_ONE, &id(&pm)).await;
    r.fetch(
        "/v1/customers/{customer}/payment_methods/{payment_method}",
        &format!("{} {}", id(&c), id(&pm)),
    )
    .await;
    r.fetch(PM_ONE, "pm_card_amex").await;
    for (path, query) in [
        (CUS, "limit=1"),
        ("/v1/customers/search", "query=email%3A%27c%40example.com%27"),
        (PM, "type=card"),
    ] {
        let (status, list) = r.get(path, "", query).await;
        assert_eq!(status, 200, "{path}?{query}: {list}");
    }
    let (status, _) = r
        .get("/v1/customers/{customer}/payment_methods", &id(&c), "type=card")
        .await;
    assert_eq!(status, 200);
    r.ok(&format!("{PM_ONE}/detach"), &id(&pm), "").await;
    let (status, gone) = r.send("DELETE", CUS_ONE, &id(&c), "", &[]).await;
    assert_eq!((status, &gone["deleted"]), (200, &json!(true)));
    let deleted = r.fetch(CUS_ONE, &id(&c)).await;
    assert_eq!(deleted["deleted"], true);
}

/// Charges made directly: captured, failed, authorised then captured, refunded in part
/// and in full; refunds.
async fn charges_and_refunds(r: &mut Run) {
    let ch = r
        .ok(
            CH,
            "",
            "amount=5000&currency=usd&source=tok_visa&description=direct&metadata[order_id]=c-1",
        )
        .await;
    assert_eq!((&ch["status"], &ch["captured"]), (&json!("succeeded"), &json!(true)));
    let (status, err) = r
        .post(CH, "", "amount=5000&currency=usd&source=tok_chargeDeclined")
        .await;
    assert_eq!(status, 402);
    let failed = r.fetch(CH_ONE, str_of(&err["error"], "charge")).await;
    assert_eq!(failed["status"], "failed");
    let auth = r
        .ok(
            CH,
            "",
            "amount=4000&currency=gbp&source[number]=4242424242424242&capture=false",
        )
        .await;
    assert_eq!(auth["captured"], false);
    let later = r.ok("/v1/charges/{charge}/capture", &id(&auth), "amount=3000").await;
    assert_eq!(
        (&later["captured"], &later["amount_captured"]),
        (&json!(true), &json!(3000))
    );

    // Refunds: part of a charge, then the rest; an intent's charge, whole.
    let part = r
        .ok(
            RE,
            "",
            &format!(
                "charge={}&amount=1000&reason=requested_by_customer&metadata[k]=v",
                id(&ch)
            ),
        )
        .await;
    assert_eq!(part["object"], "refund");
    let charge = r.fetch(CH_ONE, &id(&ch)).await;
    assert_eq!(
        (&charge["amount_refunded"], &charge["refunded"]),
        (&json!(1000), &json!(false))
    );
    r.ok(RE, "", &format!("charge={}", id(&ch))).await;
    let charge = r.fetch(CH_ONE, &id(&ch)).await;
    assert_eq!(charge["refunded"], true);
    let pi = r
        .ok(
            PI,
            "",
            "amount=1200&currency=usd&confirm=true&payment_method=pm_card_visa",
        )
        .await;
    let whole = r
        .ok(RE, "", &format!("payment_intent={}&reason=duplicate", id(&pi)))
        .await;
    assert_eq!(whole["payment_intent"], pi["id"]);
    r.fetch(RE_ONE, &id(&part)).await;
    r.ok(RE_ONE, &id(&part), "metadata[k]=w").await;
    r.ok(CH_ONE, &id(&ch), "description=updated&metadata[k]=v").await;
    // A charge's refunds under its own path, and Stripe's oldest refund call.
    let under = r
        .ok("/v1/charges/{charge}/refunds", &id(&auth), "amount=500&metadata[k]=v")
        .await;
    assert_eq!((&under["object"], &under["charge"]), (&json!("refund"), &auth["id"]));
    let both = format!("{} {}", id(&auth), id(&under));
    r.fetch("/v1/charges/{charge}/refunds", &id(&auth)).await;
    r.fetch("/v1/charges/{charge}/refunds/{refund}", &both).await;
    r.ok("/v1/charges/{charge}/refunds/{refund}", &both, "metadata[k]=w")
        .await;
    let refunded = r.ok("/v1/charges/{charge}/refund", &id(&auth), "amount=100").await;
    assert_eq!(
        (&refunded["object"], &refunded["amount_refunded"]),
        (&json!("charge"), &json!(600))
    );
    // Refunding what is left of nothing: a stored error.
    let (status, _) = r.post(RE, "", &format!("charge={}&amount=1", id(&ch))).await;
    assert_eq!(status, 400);
}

/// Lists and search results, one page and several.
async fn lists(r: &mut Run) {
    for (path, query, more) in [
        (PI, "limit=100", false),
        (PI, "limit=2", true),
        (CH, "limit=100", false),
        (CH, "limit=1", true),
        (RE, "", false),
        (RE, "limit=1", true),
        (SI, "", false),
        (SI, "limit=1", true),
        (
            "/v1/payment_intents/search",
            "query=status%3A%27succeeded%27&limit=100",
            false,
        ),
        (
            "/v1/payment_intents/search",
            "query=status%3A%27succeeded%27&limit=1",
            true,
        ),
        ("/v1/charges/search", "query=status%3A%27failed%27", false),
        ("/v1/charges/search", "query=amount%3E1000&limit=1", true),
    ] {
        let (status, list) = r.get(path, "", query).await;
        assert_eq!(status, 200, "{path}?{query}: {list}");
        assert!(
            !list["data"].as_array().unwrap().is_empty(),
            "{path}?{query} lists nothing"
        );
        assert_eq!(list["has_more"], more, "{path}?{query}");
    }
}

/// Error objects of every kind fauxpay answers with.
async fn error_objects(r: &mut Run) {
    // Validation: a missing parameter, a bad enum, a bad integer.
    let (status, e) = r.post(PI, "", "currency=usd").await;
    assert_eq!((status, &e["error"]["code"]), (400, &json!("parameter_missing")));
    let (status, _) = r.post(PI, "", "amount=100&currency=usd&capture_method=later").await;
    assert_eq!(status, 400);
    let (status, _) = r.post(PI, "", "amount=ten&currency=usd").await;
    assert_eq!(status, 400);
    let (status, _) = r.get(PI, "", "limit=1000").await;
    assert_eq!(status, 400);
    // Unknown objects, and a state error.
    let (status, _) = r.get(PI_ONE, "pi_doesnotexist", "").await;
    assert_eq!(status, 404);
    let (status, _) = r.get(CH_ONE, "ch_doesnotexist", "").await;
    assert_eq!(status, 404);
    let (status, _) = r.get(RE_ONE, "re_doesnotexist", "").await;
    assert_eq!(status, 404);
    let pi = r
        .ok(
            PI,
            "",
            "amount=100&currency=usd&confirm=true&payment_method=pm_card_visa",
        )
        .await;
    let (status, e) = r.post("/v1/payment_intents/{intent}/capture", &id(&pi), "").await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("payment_intent_unexpected_state"))
    );
    // Idempotency: a key reused with other parameters…
    r.send(
        "POST",
        PI,
        "",
        "amount=100&currency=usd",
        &[("Idempotency-Key", "spec-k")],
    )
    .await;
    let (status, e) = r
        .send(
            "POST",
            PI,
            "",
            "amount=200&currency=usd",
            &[("Idempotency-Key", "spec-k")],
        )
        .await;
    assert_eq!((status, &e["error"]["type"]), (400, &json!("idempotency_error")));
    // …and on another endpoint.
    let (status, e) = r
        .send(
            "POST",
            CH,
            "",
            "amount=100&currency=usd&source=tok_visa",
            &[("Idempotency-Key", "spec-k")],
        )
        .await;
    assert_eq!((status, &e["error"]["type"]), (400, &json!("idempotency_error")));
    // Injected faults: a 5xx and a 429; a forced decline.
    let (status, e) = r
        .send(
            "POST",
            PI,
            "",
            "amount=100&currency=usd",
            &[("Fauxpay-Fault", &Fault::error(When::BeforeCommit, 503).header_value())],
        )
        .await;
    assert_eq!((status, &e["error"]["type"]), (503, &json!("api_error")));
    let (status, _) = r
        .send(
            "GET",
            PI,
            "",
            "",
            &[("Fauxpay-Fault", &Fault::rate_limit(secs(1)).header_value())],
        )
        .await;
    assert_eq!(status, 429);
    let (status, e) = r
        .send(
            "POST",
            CH,
            "",
            "amount=100&currency=usd&source=tok_visa",
            &[(
                "Fauxpay-Fault",
                &Fault::decline("card_declined", "do_not_honor", None).header_value(),
            )],
        )
        .await;
    assert_eq!((status, &e["error"]["decline_code"]), (402, &json!("do_not_honor")));

    // A key whose first request is still running (409).
    let slow =
        r.h.post(PI)
            .header("Idempotency-Key", "spec-busy")
            .header(
                "Fauxpay-Fault",
                ForcedFault::new().latency(ms(300), When::BeforeCommit).header_value(),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .body("amount=100&currency=usd")
            .send();
    let slow = tokio::spawn(slow);
    r.h.wait_in_flight(1).await;
    let (status, e) = r
        .send(
            "POST",
            PI,
            "",
            "amount=100&currency=usd",
            &[("Idempotency-Key", "spec-busy")],
        )
        .await;
    assert_eq!((status, &e["error"]["code"]), (409, &json!("idempotency_key_in_use")));
    let first = slow.await.unwrap().unwrap();
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    r.validate("POST", PI, 200, &first);

    // Answers from the edge: no key, a bad body, an unknown URL, a wrong method.
    let default = component("error");
    let post = || r.h.post(PI);
    for (what, resp) in [
        ("no API key", r.h.client.get(r.h.url(PI)).send().await.unwrap()),
        (
            "a wrong API key",
            r.h.client
                .get(r.h.url(PI))
                .bearer_auth("pk_test_x")
                .send()
                .await
                .unwrap(),
        ),
        (
            "a malformed JSON body",
            post()
                .header("content-type", "application/json")
                .body("{")
                .send()
                .await
                .unwrap(),
        ),
        (
            "an unsupported body",
            post()
                .header("content-type", "text/plain")
                .body("x")
                .send()
                .await
                .unwrap(),
        ),
        ("an unknown URL", r.h.get("/v1/nothing_here").send().await.unwrap()),
        (
            "a wrong method",
            r.h.client.put(r.h.url(PI)).bearer_auth(KEY).send().await.unwrap(),
        ),
    ] {
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        assert!(status >= 400, "{what}: {status}");
        let errs = errors(&default, &body);
        r.failures
            .extend(errs.into_iter().map(|e| format!("{what} → {status}: {e}")));
        r.validated += 1;
    }
}

#[tokio::test]
async fn every_object_fauxpay_returns_validates_against_stripes_schema() {
    let mut r = Run::new().await;
    intents(&mut r).await;
    three_d_secure(&mut r).await;
    setup_intents(&mut r).await;
    checkout(&mut r).await;
    customers_and_payment_methods(&mut r).await;
    charges_and_refunds(&mut r).await;
    events_and_webhook_endpoints(&mut r).await;
    lists(&mut r).await;
    error_objects(&mut r).await;
    expanded(&mut r).await;
    assert!(
        r.failures.is_empty(),
        "{} of {} responses do not match Stripe's schema:\n{}",
        r.failures.len(),
        r.validated,
        r.failures.join("\n")
    );
    // Every endpoint fauxpay serves answered 200 at least once, under its spec path.
    for e in endpoints() {
        let method = match e.verb {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        };
        let spec_path = spec_path(e.path).unwrap_or_else(|| panic!("the spec has no path for {e:?}"));
        assert!(
            r.covered.contains(&format!("{method} {spec_path}")),
            "{e:?} was not validated (covered: {:?})",
            r.covered
        );
    }
    let types: Vec<&str> = r.error_types.iter().map(String::as_str).collect();
    assert_eq!(
        types,
        ["api_error", "card_error", "idempotency_error", "invalid_request_error"]
    );
}

/// Events of every type the runs before produced (each event, and the object in its
/// `data.object`, validated: the spec types `data.object` only as an object), filtered
/// lists, and webhook endpoints (created with their secret, listed, updated, deleted).
async fn events_and_webhook_endpoints(r: &mut Run) {
    let mut types = BTreeSet::new();
    let mut cursor = String::new();
    loop {
        let list = r.fetch_with(EVT, "", &format!("limit=100{cursor}")).await;
        let data = list["data"].as_array().unwrap().clone();
        for e in &data {
            let kind = str_of(e, "type");
            types.insert(kind.to_string());
            let schema = match kind.split('.').next().unwrap() {
                "charge" if kind.starts_with("charge.refund.") => "refund",
                "checkout" => "checkout.session",
                other => other,
            };
            let errs = errors(&component(schema), &e["data"]["object"]);
            r.failures
                .extend(errs.into_iter().map(|x| format!("{kind} data.object: {x}")));
            r.validated += 1;
        }
        if list["has_more"] != true {
            break;
        }
        cursor = format!("&starting_after={}", id(data.last().unwrap()));
    }
    for kind in [
        "payment_intent.created",
        "payment_intent.succeeded",
        "payment_intent.payment_failed",
        "payment_intent.requires_action",
        "payment_intent.canceled",
        "payment_intent.amount_capturable_updated",
        "charge.succeeded",
        "charge.failed",
        "charge.captured",
        "charge.refunded",
        "charge.refund.updated",
        "checkout.session.completed",
        "checkout.session.expired",
        "product.created",
        "product.updated",
        "product.deleted",
        "price.created",
        "price.updated",
        "customer.created",
        "customer.updated",
        "payment_method.attached",
        "setup_intent.created",
        "setup_intent.succeeded",
    ] {
        assert!(types.contains(kind), "no {kind} event among {types:?}");
    }
    let one = r
        .fetch_with(EVT, "", "limit=1&type=charge.*&delivery_success=true")
        .await;
    r.fetch(EVT_ONE, &id(&one["data"][0])).await;
    r.fetch_with(
        EVT,
        "",
        "types[]=customer.created&types[]=customer.updated&created[gte]=0",
    )
    .await;
    let we = r
        .ok(
            WE,
            "",
            "url=http://127.0.0.1:9/hook&enabled_events[]=payment_intent.succeeded&description=d&metadata[k]=v",
        )
        .await;
    assert!(str_of(&we, "secret").starts_with("whsec_"));
    r.fetch(WE_ONE, &id(&we)).await;
    r.fetch_with(WE, "", "limit=3").await;
    r.ok(WE_ONE, &id(&we), "disabled=true&enabled_events[]=*").await;
    let (status, gone) = r.send("DELETE", WE_ONE, &id(&we), "", &[]).await;
    assert_eq!(status, 200, "{gone}");
}

/// The spec's path for fauxpay's route pattern (`/v1/charges/{id}` → `/v1/charges/{charge}`).
fn spec_path(route: &str) -> Option<&'static str> {
    let segments: Vec<&str> = route.split('/').collect();
    spec().doc["paths"].as_object()?.keys().map(String::as_str).find(|p| {
        let theirs: Vec<&str> = p.split('/').collect();
        theirs.len() == segments.len()
            && theirs
                .iter()
                .zip(&segments)
                .all(|(a, b)| a == b || (a.starts_with('{') && b.starts_with('{')))
    })
}

/// The conversion keeps the spec's teeth: what Stripe would not send fails.
#[test]
fn the_converted_schema_refuses_what_stripe_would_not_send() {
    let refund = component("refund");
    let good = json!({
        "id": "re_1", "object": "refund", "amount": 100, "balance_transaction": null,
        "charge": "ch_1", "created": 1_700_000_000, "currency": "usd", "metadata": {},
        "payment_intent": null, "reason": null, "receipt_number": null,
        "source_transfer_reversal": null, "status": "succeeded", "transfer_reversal": null
    });
    assert_eq!(errors(&refund, &good), Vec::<String>::new());
    for (field, bad) in [
        ("amount", json!("100")),          // a string for an integer
        ("amount", Value::Null),           // null where Stripe never sends it
        ("reason", json!("changed_mind")), // not in the enum
        ("object", json!("charge")),       // the wrong object tag
        ("charge", json!(7)),              // an expandable field: a string or an object
        ("metadata", json!({"k": 1})),     // metadata values are strings
        ("refund_reason", json!("typo")),  // a field Stripe does not have
    ] {
        let mut v = good.clone();
        v[field] = bad.clone();
        assert!(!errors(&refund, &v).is_empty(), "{field}: {bad} passed");
    }
    for field in ["created", "reason"] {
        let mut v = good.clone();
        v.as_object_mut().unwrap().remove(field);
        assert!(!errors(&refund, &v).is_empty(), "a missing {field} passed");
    }

    // Nullable through `anyOf` (an expandable, a nested object) and through `$ref`.
    let pi = component("payment_intent");
    let intent = |k: &str, v: Value| {
        // The spec's nullable fields as null, then the rest.
        let mut o: Map<String, Value> = spec().doc["components"]["schemas"]["payment_intent"]["properties"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, p)| p["nullable"] == json!(true))
            .map(|(name, _)| (name.clone(), Value::Null))
            .collect();
        o.extend(
            json!({
                "id": "pi_1", "object": "payment_intent", "amount": 1, "capture_method": "automatic",
                "confirmation_method": "automatic", "created": 1, "currency": "usd", "livemode": false,
                "payment_method_types": ["card"], "status": "succeeded", k: v
            })
            .as_object()
            .unwrap()
            .clone(),
        );
        Value::Object(o)
    };
    for ok in [
        intent("latest_charge", Value::Null),
        intent("latest_charge", json!("ch_1")),
        intent("last_payment_error", Value::Null),
        intent(
            "last_payment_error",
            json!({"type": "card_error", "code": "card_declined"}),
        ),
        intent("cancellation_reason", Value::Null),
        intent("automatic_payment_methods", json!({"enabled": true})),
    ] {
        assert_eq!(errors(&pi, &ok), Vec::<String>::new(), "{ok}");
    }
    let mut without = intent("latest_charge", Value::Null);
    without.as_object_mut().unwrap().remove("latest_charge");
    for bad in [
        without,
        intent("last_payment_error", json!({"type": "card_declined"})),
        intent("last_payment_error", json!("card_declined")),
        intent("automatic_payment_methods", json!({})),
        intent("status", json!("requires_source")),
        intent("livemode", Value::Null),
    ] {
        assert!(!errors(&pi, &bad).is_empty(), "{bad} passed");
    }
    // A charge's `refunds` may be left out; it is still a list when present.
    let charge = component("charge");
    let required = |v: &Validator, field: &str| {
        let mut o = Map::new();
        o.insert("refunds".into(), json!(7));
        errors(v, &Value::Object(o))
            .iter()
            .any(|e| e.contains(&format!("\"{field}\" is a required")))
    };
    assert!(!required(&charge, "refunds") && required(&charge, "invoice"));
    assert!(errors(&charge, &json!({"refunds": 7}))
        .iter()
        .any(|e| e.contains("/refunds")));
    // An error object, and a list envelope from a path's 200 response.
    let error = component("error");
    assert!(errors(
        &error,
        &json!({"error": {"type": "invalid_request_error", "message": "m"}})
    )
    .is_empty());
    assert!(!errors(&error, &json!({"error": {"message": "no type"}})).is_empty());
    let list = response("GET", "/v1/refunds", 200);
    let page = json!({"object": "list", "data": [good], "has_more": false, "url": "/v1/refunds"});
    assert_eq!(errors(&list, &page), Vec::<String>::new());
    let mut wrong = page.clone();
    wrong["url"] = json!("/v1/charges");
    assert!(!errors(&list, &wrong).is_empty(), "the url pattern");
}
