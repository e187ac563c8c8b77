//! Stripe's request validation over real sockets: each class of error (unknown, nested
//! unknown, wrong type, bad enum, missing, too long, hash or list in a scalar's place,
//! empty) comes back as Stripe sends it, for form bodies, JSON bodies and query strings;
//! a refused request is not stored under its idempotency key and frees it.

use fauxpay_testkit::provider as common;

use common::{charge_body, json, Harness};
use serde_json::Value;

/// Asserts a 400 `invalid_request_error` with this code, param and message.
#[track_caller]
fn assert_error(status: u16, body: &Value, code: &str, param: &str, message: &str) {
    assert_eq!(status, 400, "{body}");
    let e = &body["error"];
    assert_eq!(e["type"], "invalid_request_error", "{body}");
    assert_eq!(e["code"], code, "{body}");
    assert_eq!(e["param"], param, "{body}");
    assert_eq!(e["message"], message, "{body}");
}

async fn post_form(h: &Harness, path: &str, body: &str) -> (u16, Value) {
    json(h.form(path, body, None).await).await
}

async fn post_json(h: &Harness, path: &str, body: Value) -> (u16, Value) {
    json(h.post(path).json(&body).send().await.unwrap()).await
}

async fn get(h: &Harness, path_and_query: &str) -> (u16, Value) {
    json(h.get(path_and_query).send().await.unwrap()).await
}

#[tokio::test]
async fn unknown_parameters() {
    let h = Harness::default().await;
    let (status, body) = post_form(&h, "/v1/payment_intents", "amout=2000&amount=2000&currency=usd").await;
    assert_error(
        status,
        &body,
        "parameter_unknown",
        "amout",
        "Received unknown parameter: amout",
    );
    let (status, body) = post_json(&h, "/v1/refunds", serde_json::json!({"charge": "ch_1", "amont": 5})).await;
    assert_error(
        status,
        &body,
        "parameter_unknown",
        "amont",
        "Received unknown parameter: amont",
    );
    let (status, body) = get(&h, "/v1/payment_intents?limit=3&customr=cus_1").await;
    assert_error(
        status,
        &body,
        "parameter_unknown",
        "customr",
        "Received unknown parameter: customr",
    );
    // Nothing was created on the way.
    let (_, list) = get(&h, "/v1/payment_intents").await;
    assert_eq!(list["data"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn nested_unknown_parameters() {
    let h = Harness::default().await;
    let (status, body) = post_form(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&confirm=true&payment_method_data[type]=card&payment_method_data[card][numbr]=4242424242424242",
    )
    .await;
    assert_error(
        status,
        &body,
        "parameter_unknown",
        "payment_method_data[card][numbr]",
        "Received unknown parameter: payment_method_data[card][numbr]",
    );
    let (status, body) = get(&h, "/v1/charges?created[gt]=1&created[after]=2").await;
    assert_error(
        status,
        &body,
        "parameter_unknown",
        "created[after]",
        "Received unknown parameter: created[after]",
    );
    assert!(h.ledger("").await.is_empty(), "no money moved");
}

#[tokio::test]
async fn wrong_types() {
    let h = Harness::default().await;
    let (status, body) = post_form(&h, "/v1/payment_intents", "amount=abc&currency=usd").await;
    assert_error(
        status,
        &body,
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: abc",
    );
    let (status, body) = post_json(
        &h,
        "/v1/payment_intents",
        serde_json::json!({"amount": 20.5, "currency": "usd"}),
    )
    .await;
    assert_error(
        status,
        &body,
        "parameter_invalid_integer",
        "amount",
        "Invalid integer: 20.5",
    );
    let (status, body) = post_form(&h, "/v1/payment_intents", "amount=2000&currency=usd&confirm=yes").await;
    assert_error(status, &body, "parameter_invalid", "confirm", "Invalid boolean: yes");
    let (status, body) = get(&h, "/v1/payment_intents?limit=abc").await;
    assert_error(
        status,
        &body,
        "parameter_invalid_integer",
        "limit",
        "Invalid integer: abc",
    );
    let (status, body) = get(&h, "/v1/refunds?created[gte]=x").await;
    assert_error(
        status,
        &body,
        "parameter_invalid_integer",
        "created[gte]",
        "Invalid integer: x",
    );
}

#[tokio::test]
async fn bad_enum_values() {
    let h = Harness::default().await;
    let (status, body) = post_form(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&capture_method=later",
    )
    .await;
    assert_error(
        status,
        &body,
        "parameter_invalid",
        "capture_method",
        "Invalid capture_method: must be one of automatic, automatic_async or manual",
    );
    let (status, body) = post_form(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=sometimes",
    )
    .await;
    assert_error(
        status,
        &body,
        "parameter_invalid",
        "automatic_payment_methods[allow_redirects]",
        "Invalid automatic_payment_methods[allow_redirects]: must be one of always or never",
    );
}

#[tokio::test]
async fn missing_required_parameters() {
    let h = Harness::default().await;
    let (status, body) = post_form(&h, "/v1/payment_intents", "currency=usd").await;
    assert_error(
        status,
        &body,
        "parameter_missing",
        "amount",
        "Missing required param: amount.",
    );
    let (status, body) = get(&h, "/v1/payment_intents/search?limit=5").await;
    assert_error(
        status,
        &body,
        "parameter_missing",
        "query",
        "Missing required param: query.",
    );
    let (status, body) = post_form(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&confirm=true&payment_method_data[type]=card&payment_method_data[card][number]=4242424242424242",
    )
    .await;
    assert_error(
        status,
        &body,
        "parameter_missing",
        "payment_method_data[card][exp_month]",
        "Missing required param: payment_method_data[card][exp_month].",
    );
}

#[tokio::test]
async fn strings_over_their_max_length() {
    let h = Harness::default().await;
    let body = format!("amount=2000&currency=usd&description={}", "d".repeat(1001));
    let (status, body) = post_form(&h, "/v1/payment_intents", &body).await;
    assert_error(
        status,
        &body,
        "parameter_invalid",
        "description",
        &format!("Invalid string: {}...; must be at most 1000 characters", "d".repeat(40)),
    );
}

#[tokio::test]
async fn hashes_lists_and_scalars_in_each_others_place() {
    let h = Harness::default().await;
    let (status, body) = post_form(&h, "/v1/payment_intents", "amount=2000&currency=usd&metadata=notahash").await;
    assert_error(
        status,
        &body,
        "parameter_invalid",
        "metadata",
        "Invalid object: metadata must be a hash (e.g. metadata[key]=value).",
    );
    let (status, body) = post_form(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&payment_method[id]=pm_card_visa",
    )
    .await;
    assert_error(
        status,
        &body,
        "parameter_invalid",
        "payment_method",
        "Invalid string: payment_method must be a string, not a hash.",
    );
    let (status, body) = get(&h, "/v1/charges/ch_1?expand=payment_intent").await;
    assert_error(
        status,
        &body,
        "parameter_invalid",
        "expand",
        "Invalid array: expand must be a list (e.g. expand[]=value).",
    );
}

#[tokio::test]
async fn empty_strings_where_a_parameter_cannot_be_unset() {
    let h = Harness::default().await;
    let (status, body) = post_form(&h, "/v1/payment_intents", "amount=&currency=usd").await;
    assert_error(
        status,
        &body,
        "parameter_invalid_empty",
        "amount",
        "You passed an empty string for 'amount'. We assume empty values are an attempt to unset a parameter; however 'amount' cannot be unset. You should remove 'amount' from your request or supply a non-empty value.",
    );
}

#[tokio::test]
async fn the_rules_keep_their_own_errors_where_the_spec_check_passes() {
    let h = Harness::default().await;
    // Stripe's spec says "a string" and "an integer"; the rules know more.
    let (status, body) = post_form(&h, "/v1/payment_intents", "amount=2000&currency=xyz").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "currency");
    assert_ne!(body["error"]["code"], "parameter_unknown");
    let (status, body) = post_form(&h, "/v1/payment_intents", "amount=10&currency=usd").await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "amount");
    // A parameter Stripe knows and fauxpay does not model is accepted, and changes nothing.
    let (status, pi) = post_form(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&setup_future_usage=off_session&radar_options[session]=s1",
    )
    .await;
    assert_eq!(status, 200, "{pi}");
    assert_eq!(pi["status"], "succeeded");
}

#[tokio::test]
async fn a_refused_request_is_not_stored_and_frees_its_key() {
    let h = Harness::default().await;
    let bad = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=v-1&amout=1";
    let (status, body) = json(h.form("/v1/payment_intents", bad, Some("v-key")).await).await;
    assert_error(
        status,
        &body,
        "parameter_unknown",
        "amout",
        "Received unknown parameter: amout",
    );
    // The same key with the corrected request runs, as a first request.
    let resp = h
        .form(
            "/v1/payment_intents",
            &charge_body("v-1", "pm_card_visa"),
            Some("v-key"),
        )
        .await;
    assert!(resp.headers().get("idempotent-replayed").is_none());
    let (status, pi) = json(resp).await;
    assert_eq!(status, 200, "{pi}");
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(h.ledger("").await.len(), 1);
}
