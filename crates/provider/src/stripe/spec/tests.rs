//! The spec check: the embedded spec compiles, fauxpay's paths find Stripe's, and each
//! class of error comes back with Stripe's code, param and message, for form bodies,
//! JSON bodies and query strings.

use serde_json::json;

use super::extensions::{self, EXTENSIONS};
use super::schema::{shape, spec, Schema, Spec, API_VERSION, SPEC_JSON};
use super::validate::check_params;
use crate::error::ApiError;
use crate::resources::endpoint::Verb;
use crate::stripe::params::Params;

fn form(verb: Verb, path: &str, body: &str) -> Result<(), ApiError> {
    let op = spec()
        .operation(verb, path)
        .unwrap_or_else(|| panic!("no {verb:?} {path}"));
    check_params(&op.params, &Params::from_form(body.as_bytes()).unwrap())
}

fn json_body(verb: Verb, path: &str, body: serde_json::Value) -> Result<(), ApiError> {
    let op = spec().operation(verb, path).unwrap();
    check_params(&op.params, &Params::from_json(body.to_string().as_bytes()).unwrap())
}

fn create(body: &str) -> Result<(), ApiError> {
    form(Verb::Post, "/v1/payment_intents", body)
}

/// Asserts a 400 `invalid_request_error` with this code, param and message.
#[track_caller]
fn assert_error(result: Result<(), ApiError>, code: &str, param: &str, message: &str) {
    let e = result.expect_err("an error");
    assert_eq!(e.status.code(), 400, "{e:?}");
    assert_eq!(e.kind.as_str(), "invalid_request_error");
    assert_eq!(e.code.as_deref(), Some(code), "{e:?}");
    assert_eq!(e.param.as_deref(), Some(param), "{e:?}");
    assert_eq!(e.message, message);
    assert!(!e.executed, "a validation failure is never stored");
}

const PAYMENT: &str = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o-1";

#[test]
fn the_embedded_spec_compiles_with_the_extensions() {
    let doc: serde_json::Value = serde_json::from_slice(SPEC_JSON).unwrap();
    assert_eq!(doc["info"]["version"], API_VERSION);
    let mut extended = doc.clone();
    extensions::apply(&mut extended).unwrap();
    let plain = Spec::compile(&doc).unwrap();
    let compiled = Spec::compile(&extended).unwrap();
    assert_eq!(compiled.operations().len(), plain.operations().len());
    assert_eq!(spec().operations().len(), compiled.operations().len());
    assert!(compiled.operations().len() > 50);
    // Each extension is absent from Stripe's spec and present once grafted.
    for ext in EXTENSIONS.iter().filter(|e| e.param.contains('[')) {
        let (parent, _) = ext.param.split_once('[').unwrap();
        let find = |s: &Spec| match s.operation(ext.verb, ext.path).unwrap().params.property(parent) {
            Some(Schema::Object(o)) => o.property("card").cloned(),
            other => panic!("{other:?}"),
        };
        assert!(find(&plain).is_none(), "{}: Stripe's spec has it now", ext.param);
        assert!(matches!(find(&compiled), Some(Schema::Object(_))), "{}", ext.param);
    }
    let session = |s: &Spec| {
        s.operation(Verb::Post, "/v1/checkout/sessions")
            .unwrap()
            .params
            .property("ui_mode")
            .is_some()
    };
    assert!(!session(&plain), "Stripe's spec has ui_mode now");
    assert!(session(&compiled));
}

#[test]
fn paths_are_found_by_shape() {
    let s = spec();
    let capture = s.operation(Verb::Post, "/v1/charges/{id}/capture").unwrap();
    assert_eq!(&*capture.path, "/v1/charges/{charge}/capture");
    assert_eq!(
        &*s.operation(Verb::Get, "/v1/payment_intents/{id}").unwrap().path,
        "/v1/payment_intents/{intent}"
    );
    // A literal segment is not a placeholder.
    assert_eq!(
        &*s.operation(Verb::Get, "/v1/payment_intents/search").unwrap().path,
        "/v1/payment_intents/search"
    );
    assert!(s.operation(Verb::Delete, "/v1/payment_intents").is_none());
    assert!(s.operation(Verb::Post, "/v1/nothing").is_none());
    assert_eq!(shape("/v1/a/{x}/b"), "/v1/a/{}/b");
    assert_eq!(shape("/v1/a/{x}"), shape("/v1/a/{yy}"));
    assert_ne!(shape("/v1/a/{x}"), shape("/v1/a/b"));
    // A path too long to look up is simply not found.
    assert!(s.operation(Verb::Get, &format!("/v1/{}", "a".repeat(300))).is_none());
}

#[test]
fn what_fauxpays_clients_send_is_valid() {
    create(PAYMENT).unwrap();
    create("amount=2000&currency=usd&capture_method=manual&automatic_payment_methods[enabled]=true&expand[]=latest_charge&expand[]=customer&description=&statement_descriptor=shop").unwrap();
    // The extension: a raw card number, with Stripe's required expiry.
    create("amount=2000&currency=usd&confirm=true&payment_method_data[type]=card&payment_method_data[card][number]=4242424242424242&payment_method_data[card][exp_month]=12&payment_method_data[card][exp_year]=2034").unwrap();
    form(
        Verb::Post,
        "/v1/charges",
        "amount=999&currency=usd&source=tok_visa&capture=false&metadata[order_id]=c-1",
    )
    .unwrap();
    // `source` bypasses validation: the legacy inline card hash is accepted.
    form(
        Verb::Post,
        "/v1/charges",
        "amount=999&currency=usd&source[number]=4242424242424242",
    )
    .unwrap();
    form(
        Verb::Post,
        "/v1/payment_intents/{id}/capture",
        "amount_to_capture=500&metadata=",
    )
    .unwrap();
    form(
        Verb::Post,
        "/v1/payment_intents/{id}/cancel",
        "cancellation_reason=requested_by_customer",
    )
    .unwrap();
    form(
        Verb::Post,
        "/v1/refunds",
        "payment_intent=pi_1&amount=100&reason=duplicate",
    )
    .unwrap();
    form(
        Verb::Get,
        "/v1/payment_intents",
        "limit=3&starting_after=pi_1&created[gte]=1700000000&created[lt]=1800000000",
    )
    .unwrap();
    form(Verb::Get, "/v1/payment_intents", "created=1700000000").unwrap();
    form(
        Verb::Get,
        "/v1/payment_intents/search",
        "query=metadata['order_id']:'o-1'&limit=100&page=page_3",
    )
    .unwrap();
    form(Verb::Get, "/v1/charges/{id}", "expand[0]=payment_intent").unwrap();
    json_body(
        Verb::Post,
        "/v1/payment_intents",
        json!({"amount": 2000, "currency": "usd", "confirm": true, "payment_method": "pm_card_visa",
               "metadata": {"order_id": "o-1", "n": 5}, "description": null, "expand": ["latest_charge"]}),
    )
    .unwrap();
}

#[test]
fn unknown_parameters_top_level_and_nested() {
    assert_error(
        create("amout=2000&amount=2000&currency=usd"),
        "parameter_unknown",
        "amout",
        "Received unknown parameter: amout",
    );
    assert_error(
        create(
            "amount=2000&currency=usd&payment_method_data[type]=card&payment_method_data[card][numbr]=4242424242424242",
        ),
        "parameter_unknown",
        "payment_method_data[card][numbr]",
        "Received unknown parameter: payment_method_data[card][numbr]",
    );
    assert_error(
        create("amount=2000&currency=usd&automatic_payment_methods[enabled]=true&automatic_payment_methods[on]=1"),
        "parameter_unknown",
        "automatic_payment_methods[on]",
        "Received unknown parameter: automatic_payment_methods[on]",
    );
    assert_error(
        json_body(Verb::Post, "/v1/refunds", json!({"charge": "ch_1", "amont": 5})),
        "parameter_unknown",
        "amont",
        "Received unknown parameter: amont",
    );
    // Query strings too; a retrieve takes only `expand` (and `client_secret`).
    assert_error(
        form(Verb::Get, "/v1/payment_intents", "limit=3&customr=cus_1"),
        "parameter_unknown",
        "customr",
        "Received unknown parameter: customr",
    );
    assert_error(
        form(Verb::Get, "/v1/refunds/{id}", "amount=1"),
        "parameter_unknown",
        "amount",
        "Received unknown parameter: amount",
    );
    assert_error(
        form(Verb::Get, "/v1/charges", "created[gt]=1&created[after]=2"),
        "parameter_unknown",
        "created[after]",
        "Received unknown parameter: created[after]",
    );
}

#[test]
fn wrong_types() {
    assert_error(
        create("amount=abc&currency=usd"),
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: abc",
    );
    assert_error(
        create("amount=1.5&currency=usd"),
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: 1.5",
    );
    assert_error(
        create("amount=99999999999999999999&currency=usd"),
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: 99999999999999999999",
    );
    // A negative integer is an integer: the rules refuse it with their own message.
    create("amount=-5&currency=usd").unwrap();
    assert_error(
        json_body(
            Verb::Post,
            "/v1/payment_intents",
            json!({"amount": "lots", "currency": "usd"}),
        ),
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: lots",
    );
    assert_error(
        json_body(
            Verb::Post,
            "/v1/payment_intents",
            json!({"amount": 20.5, "currency": "usd"}),
        ),
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: 20.5",
    );
    assert_error(
        create("amount=2000&currency=usd&confirm=yes"),
        "parameter_invalid",
        "confirm",
        "Invalid boolean: yes",
    );
    assert_error(
        json_body(
            Verb::Post,
            "/v1/payment_intents",
            json!({"amount": 2000, "currency": "usd", "confirm": 1}),
        ),
        "parameter_invalid",
        "confirm",
        "Invalid boolean: 1",
    );
    assert_error(
        form(Verb::Get, "/v1/payment_intents", "limit=abc"),
        "parameter_invalid_integer",
        "limit",
        "Invalid integer: abc",
    );
    assert_error(
        form(Verb::Get, "/v1/payment_intents", "created[gte]=x"),
        "parameter_invalid_integer",
        "created[gte]",
        "Invalid integer: x",
    );
    assert_error(
        form(Verb::Get, "/v1/charges", "created=yesterday"),
        "parameter_invalid_integer",
        "created",
        "Invalid integer: yesterday",
    );
    // `off_session` is a boolean or one of two strings.
    form(Verb::Post, "/v1/payment_intents/{id}/confirm", "off_session=true").unwrap();
    form(Verb::Post, "/v1/payment_intents/{id}/confirm", "off_session=recurring").unwrap();
    assert_error(
        form(Verb::Post, "/v1/payment_intents/{id}/confirm", "off_session=maybe"),
        "parameter_invalid",
        "off_session",
        "Invalid boolean: maybe",
    );
    // Inside lists, the param names the item.
    assert_error(
        json_body(
            Verb::Post,
            "/v1/payment_intents/{id}/cancel",
            json!({"expand": ["a", {"b": 1}]}),
        ),
        "parameter_invalid",
        "expand[1]",
        "Invalid string: expand[1] must be a string, not a hash.",
    );
}

#[test]
fn bad_enum_values() {
    assert_error(
        create("amount=2000&currency=usd&capture_method=later"),
        "parameter_invalid",
        "capture_method",
        "Invalid capture_method: must be one of automatic, automatic_async or manual",
    );
    assert_error(
        create("amount=2000&currency=usd&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=sometimes"),
        "parameter_invalid",
        "automatic_payment_methods[allow_redirects]",
        "Invalid automatic_payment_methods[allow_redirects]: must be one of always or never",
    );
    assert_error(
        form(Verb::Post, "/v1/refunds", "charge=ch_1&reason=changed_mind"),
        "parameter_invalid",
        "reason",
        "Invalid reason: must be one of duplicate, fraudulent or requested_by_customer",
    );
    // `x-stripeBypassValidation`: the list is not exhaustive, so it is not checked here
    // (the rules still refuse what fauxpay does not know).
    form(
        Verb::Post,
        "/v1/payment_intents/{id}/cancel",
        "cancellation_reason=other",
    )
    .unwrap();
    create("amount=2000&currency=usd&payment_method_data[type]=card").unwrap();
}

#[test]
fn missing_required_parameters() {
    assert_error(
        create("currency=usd"),
        "parameter_missing",
        "amount",
        "Missing required param: amount.",
    );
    assert_error(
        json_body(
            Verb::Post,
            "/v1/payment_intents",
            json!({"amount": 2000, "currency": null}),
        ),
        "parameter_missing",
        "currency",
        "Missing required param: currency.",
    );
    assert_error(
        create("amount=2000&currency=usd&automatic_payment_methods[allow_redirects]=never"),
        "parameter_missing",
        "automatic_payment_methods[enabled]",
        "Missing required param: automatic_payment_methods[enabled].",
    );
    // The extension carries Stripe's own required fields.
    assert_error(
        create("amount=2000&currency=usd&payment_method_data[type]=card&payment_method_data[card][number]=4242424242424242"),
        "parameter_missing",
        "payment_method_data[card][exp_month]",
        "Missing required param: payment_method_data[card][exp_month].",
    );
    assert_error(
        form(Verb::Get, "/v1/charges/search", "limit=5"),
        "parameter_missing",
        "query",
        "Missing required param: query.",
    );
}

#[test]
fn strings_over_their_max_length() {
    let long = "x".repeat(1001);
    assert_error(
        create(&format!("amount=2000&currency=usd&description={long}")),
        "parameter_invalid",
        "description",
        "Invalid string: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...; must be at most 1000 characters",
    );
    // Characters, not bytes: 1000 three-byte characters fit.
    create(&format!("amount=2000&currency=usd&description={}", "€".repeat(1000))).unwrap();
    assert_error(
        form(
            Verb::Get,
            "/v1/payment_intents",
            &format!("starting_after={}", "p".repeat(5001)),
        ),
        "parameter_invalid",
        "starting_after",
        &format!("Invalid string: {}...; must be at most 5000 characters", "p".repeat(40)),
    );
}

#[test]
fn hashes_lists_and_scalars_in_each_others_place() {
    assert_error(
        create("amount=2000&currency=usd&metadata=notahash"),
        "parameter_invalid",
        "metadata",
        "Invalid object: metadata must be a hash (e.g. metadata[key]=value).",
    );
    assert_error(
        create("amount=2000&currency=usd&payment_method[id]=pm_card_visa"),
        "parameter_invalid",
        "payment_method",
        "Invalid string: payment_method must be a string, not a hash.",
    );
    assert_error(
        create("amount[]=1&currency=usd"),
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: amount must be an integer, not a list.",
    );
    assert_error(
        create("amount=2000&currency=usd&expand=latest_charge"),
        "parameter_invalid",
        "expand",
        "Invalid array: expand must be a list (e.g. expand[]=value).",
    );
    assert_error(
        create("amount=2000&currency=usd&metadata[order][id]=1"),
        "parameter_invalid",
        "metadata[order]",
        "Invalid string: metadata[order] must be a string, not a hash.",
    );
    // `created` is a hash of bounds or an integer, never a list.
    assert_error(
        form(Verb::Get, "/v1/refunds", "created[]=1"),
        "parameter_invalid",
        "created",
        "Invalid object: created must be a hash (e.g. created[key]=value).",
    );
    // Sparse indexes are a list too.
    create("amount=2000&currency=usd&expand[0]=a&expand[2]=b").unwrap();
}

#[test]
fn empty_strings_unset_only_what_can_be_unset() {
    let empty = |p: &str| {
        format!("You passed an empty string for '{p}'. We assume empty values are an attempt to unset a parameter; however '{p}' cannot be unset. You should remove '{p}' from your request or supply a non-empty value.")
    };
    assert_error(
        create("amount=&currency=usd"),
        "parameter_invalid_empty",
        "amount",
        &empty("amount"),
    );
    assert_error(
        create("amount=2000&currency="),
        "parameter_invalid_empty",
        "currency",
        &empty("currency"),
    );
    assert_error(
        create("amount=2000&currency=usd&capture_method="),
        "parameter_invalid_empty",
        "capture_method",
        &empty("capture_method"),
    );
    // An optional string, an `anyOf` with the "" alternative and a metadata value may be unset.
    create("amount=2000&currency=usd&description=&metadata[a]=").unwrap();
    form(
        Verb::Post,
        "/v1/payment_intents/{id}/confirm",
        "receipt_email=&shipping=",
    )
    .unwrap();
}

#[test]
fn the_first_bad_parameter_in_key_order_is_reported() {
    let e = create("zzz=1&amount=abc&currency=usd").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("amount"));
    // Present parameters are checked before required ones.
    let e = create("amout=2000&currency=usd").unwrap_err();
    assert_eq!(e.code.as_deref(), Some("parameter_unknown"));
}

#[test]
fn refs_maps_and_open_objects_in_a_hand_written_spec() {
    let doc = json!({
        "paths": {
            "/v1/things/{thing}": {
                "post": {"requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {
                    "additionalProperties": false,
                    "properties": {
                        "item": {"$ref": "#/components/schemas/item"},
                        "tags": {"additionalProperties": {"type": "integer"}, "type": "object"},
                        "free": {"additionalProperties": true, "type": "object"},
                        "anything": {},
                        "ratio": {"type": "number"}
                    },
                    "type": "object"
                }}}}},
                "get": {"parameters": [
                    {"in": "path", "name": "thing", "required": true, "schema": {"type": "string"}},
                    {"in": "query", "name": "n", "required": true, "schema": {"type": "integer"}}
                ]}
            }
        },
        "components": {"schemas": {"item": {"properties": {"name": {"maxLength": 3, "type": "string"}}, "required": ["name"], "type": "object"}}}
    });
    let s = Spec::compile(&doc).unwrap();
    let post = |body: &str| {
        check_params(
            &s.operation(Verb::Post, "/v1/things/{id}").unwrap().params,
            &Params::from_form(body.as_bytes()).unwrap(),
        )
    };
    post("item[name]=abc&tags[a]=1&free[x][y]=z&anything[]=1&ratio=0.5").unwrap();
    assert_error(
        post("item[name]=abcd"),
        "parameter_invalid",
        "item[name]",
        "Invalid string: abcd; must be at most 3 characters",
    );
    assert_error(
        post("item[nam]=a"),
        "parameter_unknown",
        "item[nam]",
        "Received unknown parameter: item[nam]",
    );
    assert_error(
        post("tags[a]=x"),
        "parameter_invalid_integer",
        "tags[a]",
        "Invalid integer: x",
    );
    assert_error(post("ratio=half"), "parameter_invalid", "ratio", "Invalid number: half");
    let get = |q: &str| {
        check_params(
            &s.operation(Verb::Get, "/v1/things/{id}").unwrap().params,
            &Params::from_form(q.as_bytes()).unwrap(),
        )
    };
    get("n=1").unwrap();
    // The path parameter is not a query parameter.
    assert_error(
        get("n=1&thing=x"),
        "parameter_unknown",
        "thing",
        "Received unknown parameter: thing",
    );
    assert_error(get(""), "parameter_missing", "n", "Missing required param: n.");
}

#[test]
fn a_spec_that_no_longer_fits_an_extension_is_an_error() {
    let mut doc = json!({"paths": {}});
    assert!(extensions::apply(&mut doc).is_err());
}
