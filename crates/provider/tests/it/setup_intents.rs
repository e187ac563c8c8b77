//! Setup intents over real sockets: every state transition and error; the saved card
//! (attached to the customer, set up for off-session use) and the off-session payments
//! it makes possible; `setup_future_usage` on payment intents; idempotency, lists, and a
//! fault rule on `/v1/setup_intents*`.

use fauxpay_testkit::provider as common;
use fauxpay_testkit::provider::{get_json as get, post_json as post};

use common::{json, Harness};
use fauxpay_faults as faults;
use fauxpay_provider::Config;
use serde_json::{json, Value};

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id: {v}")).to_string()
}

async fn customer(h: &Harness) -> String {
    let (status, c) = post(h, "/v1/customers", "email=jenny%40example.com").await;
    assert_eq!(status, 200, "{c}");
    id(&c)
}

/// Asserts an `invalid_request_error`: status, `code`, `param`.
fn assert_error(got: &(u16, Value), status: u16, code: &str, param: Option<&str>) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["param"].as_str(), param, "{body}");
}

fn ids(list: &Value) -> Vec<String> {
    list["data"].as_array().unwrap().iter().map(id).collect()
}

#[tokio::test]
async fn a_setup_intent_goes_through_every_status() {
    let h = Harness::default().await;
    let cus = customer(&h).await;
    // requires_payment_method → requires_confirmation → succeeded.
    let (status, si) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&description=Card+for+later&metadata[plan]=pro"),
    )
    .await;
    assert_eq!(status, 200, "{si}");
    let si_id = id(&si);
    assert!(si_id.starts_with("seti_"));
    assert_eq!(si["object"], "setup_intent");
    assert_eq!(si["status"], "requires_payment_method");
    assert_eq!(si["usage"], "off_session");
    assert_eq!(si["customer"], cus.as_str());
    assert_eq!(si["latest_attempt"], Value::Null);
    assert_eq!(si["mandate"], Value::Null);
    assert!(si["client_secret"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{si_id}_secret_")));
    assert_error(
        &post(&h, &format!("/v1/setup_intents/{si_id}/confirm"), "").await,
        400,
        "setup_intent_unexpected_state",
        Some("payment_method"),
    );
    let (status, done) = post(
        &h,
        &format!("/v1/setup_intents/{si_id}/confirm"),
        "payment_method=pm_card_visa",
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "succeeded");
    let pm = done["payment_method"].as_str().unwrap().to_string();
    assert!(
        pm.starts_with("pm_") && pm != "pm_card_visa",
        "saved as a new pm_: {pm}"
    );
    let (_, saved) = get(&h, &format!("/v1/payment_methods/{pm}")).await;
    assert_eq!(saved["customer"], cus.as_str(), "attached to the customer");
    let (_, cards) = get(&h, &format!("/v1/customers/{cus}/payment_methods")).await;
    assert_eq!(ids(&cards), [pm.as_str()]);
    assert_eq!(get(&h, &format!("/v1/setup_intents/{si_id}")).await, (200, done));

    // requires_confirmation at create, then confirmed.
    let (_, second) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&payment_method=pm_card_mastercard&usage=on_session"),
    )
    .await;
    assert_eq!(
        (&second["status"], &second["usage"]),
        (&"requires_confirmation".into(), &"on_session".into())
    );
    let (_, done) = post(&h, &format!("/v1/setup_intents/{}/confirm", id(&second)), "").await;
    assert_eq!(done["status"], "succeeded");

    // Succeeded is final.
    assert_error(
        &post(&h, &format!("/v1/setup_intents/{si_id}/confirm"), "").await,
        400,
        "setup_intent_unexpected_state",
        None,
    );
    assert_error(
        &post(&h, &format!("/v1/setup_intents/{si_id}/cancel"), "").await,
        400,
        "setup_intent_unexpected_state",
        None,
    );
}

#[tokio::test]
async fn declines_authentication_and_cancel() {
    let h = Harness::default().await;
    let cus = customer(&h).await;
    // A decline card: 402 with the setup intent, which waits for another method.
    let (status, e) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&payment_method=pm_card_chargeDeclined&confirm=true"),
    )
    .await;
    assert_eq!(status, 402, "{e}");
    assert_eq!(
        (&e["error"]["type"], &e["error"]["code"]),
        (&"card_error".into(), &"card_declined".into())
    );
    let failed = &e["error"]["setup_intent"];
    assert_eq!(failed["status"], "requires_payment_method");
    assert_eq!(failed["last_setup_error"]["decline_code"], "generic_decline");
    let (_, retrieved) = get(&h, &format!("/v1/setup_intents/{}", id(failed))).await;
    assert_eq!(&retrieved, failed);

    // A card that asks for 3-D Secure on setup: requires_action, then failed, then done.
    let (_, si) = post(
        &h,
        &format!("/v1/setup_intents/{}/confirm", id(failed)),
        "payment_method=pm_card_authenticationRequiredOnSetup&return_url=https%3A%2F%2Fshop.example%2Fsaved",
    )
    .await;
    assert_eq!(si["status"], "requires_action", "{si}");
    assert_eq!(si["last_setup_error"], Value::Null);
    assert_eq!(si["next_action"]["type"], "redirect_to_url");
    assert_eq!(
        si["next_action"]["redirect_to_url"]["url"],
        h.url(&format!("/__fauxpay/3ds/{}", id(&si)))
    );
    let auth = format!("/__fauxpay/setup_intents/{}/authenticate", id(&si));
    let (status, after) = post(&h, &auth, "outcome=fail").await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["status"], "requires_payment_method");
    assert_eq!(after["last_setup_error"]["code"], "setup_intent_authentication_failure");
    let (_, si) = post(&h, &format!("/v1/setup_intents/{}/confirm", id(&si)), "").await;
    assert_eq!(si["status"], "requires_action");
    let (_, done) = post(&h, &auth, "outcome=succeed").await;
    assert_eq!(
        (&done["status"], &done["next_action"]),
        (&"succeeded".into(), &Value::Null)
    );
    assert_error(
        &post(&h, &auth, "outcome=succeed").await,
        400,
        "setup_intent_unexpected_state",
        None,
    );

    // The page of a setup intent, and its form's redirect.
    let (_, waiting) = post(
        &h,
        "/v1/setup_intents",
        "payment_method=pm_card_authenticationRequired&confirm=true&return_url=https%3A%2F%2Fshop.example%2Fsaved",
    )
    .await;
    let html = h
        .client
        .get(h.url(&format!("/__fauxpay/3ds/{}", id(&waiting))))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(&format!(
            "action=\"/__fauxpay/setup_intents/{}/authenticate\"",
            id(&waiting)
        )),
        "{html}"
    );
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let back = browser
        .post(h.url(&format!("/__fauxpay/setup_intents/{}/authenticate", id(&waiting))))
        .form(&[("outcome", "succeed"), ("redirect", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 303);
    assert_eq!(
        back.headers()["location"].to_str().unwrap(),
        format!(
            "https://shop.example/saved?setup_intent={}&setup_intent_client_secret={}&redirect_status=succeeded",
            id(&waiting),
            waiting["client_secret"].as_str().unwrap()
        )
    );

    // Cancel, from each open status, with a reason.
    for body in [
        "",
        "payment_method=pm_card_visa",
        "payment_method=pm_card_authenticationRequired&confirm=true",
    ] {
        let (_, open) = post(&h, "/v1/setup_intents", body).await;
        let (status, c) = post(
            &h,
            &format!("/v1/setup_intents/{}/cancel", id(&open)),
            "cancellation_reason=requested_by_customer",
        )
        .await;
        assert_eq!(status, 200, "{body}: {c}");
        assert_eq!(
            (&c["status"], &c["cancellation_reason"]),
            (&"canceled".into(), &"requested_by_customer".into())
        );
        assert_eq!(c["next_action"], Value::Null);
        assert_error(
            &post(
                &h,
                &format!("/v1/setup_intents/{}/confirm", id(&open)),
                "payment_method=pm_card_visa",
            )
            .await,
            400,
            "setup_intent_unexpected_state",
            None,
        );
    }
}

#[tokio::test]
async fn requests_are_checked_as_stripe_checks_them() {
    let h = Harness::default().await;
    let (a, b) = (customer(&h).await, customer(&h).await);
    let (_, si) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={a}&payment_method=pm_card_visa&confirm=true"),
    )
    .await;
    let saved = si["payment_method"].as_str().unwrap();
    for (body, status, code, param) in [
        ("customer=cus_nope".to_string(), 400, "resource_missing", "customer"),
        (
            "payment_method=pm_nope".into(),
            400,
            "resource_missing",
            "payment_method",
        ),
        (
            format!("customer={b}&payment_method={saved}"),
            400,
            "",
            "payment_method",
        ),
        (format!("payment_method={saved}"), 400, "", "payment_method"),
        (
            "confirm=true".into(),
            400,
            "setup_intent_unexpected_state",
            "payment_method",
        ),
        ("usage=sometimes".into(), 400, "parameter_invalid", "usage"),
        ("usag=off_session".into(), 400, "parameter_unknown", "usag"),
        (
            "payment_method_types[]=sepa_debit".into(),
            400,
            "parameter_invalid",
            "payment_method_types",
        ),
        (
            "payment_method_data[type]=card".into(),
            400,
            "parameter_invalid",
            "payment_method_data",
        ),
        (
            "description=".to_string() + &"d".repeat(1001),
            400,
            "parameter_invalid",
            "description",
        ),
    ] {
        let (s, e) = post(&h, "/v1/setup_intents", &body).await;
        assert_eq!(s, status, "{body}: {e}");
        if !code.is_empty() {
            assert_eq!(e["error"]["code"], code, "{body}: {e}");
        }
        assert_eq!(e["error"]["param"], param, "{body}: {e}");
    }
    for got in [
        get(&h, "/v1/setup_intents/seti_doesnotexist").await,
        post(&h, "/v1/setup_intents/seti_doesnotexist/confirm", "").await,
        post(&h, "/v1/setup_intents/seti_doesnotexist/cancel", "").await,
        post(
            &h,
            "/__fauxpay/setup_intents/seti_doesnotexist/authenticate",
            "outcome=fail",
        )
        .await,
    ] {
        assert_error(&got, 404, "resource_missing", Some("intent"));
    }
    let (status, e) = post(
        &h,
        &format!("/v1/setup_intents/{}/cancel", id(&si)),
        "cancellation_reason=fraudulent",
    )
    .await;
    assert_eq!(
        (status, &e["error"]["param"]),
        (400, &"cancellation_reason".into()),
        "{e}"
    );
    // A refused request is not stored: its key is free for the corrected one.
    let bad = h.form("/v1/setup_intents", "customer=cus_nope", Some("si-key")).await;
    assert_eq!(bad.status(), 400);
    let good = h
        .form(
            "/v1/setup_intents",
            &format!("customer={a}&payment_method=pm_card_visa&confirm=true"),
            Some("si-key"),
        )
        .await;
    assert_eq!(good.status(), 200);
    let first: Value = good.json().await.unwrap();
    let replay = h
        .form(
            "/v1/setup_intents",
            &format!("customer={a}&payment_method=pm_card_visa&confirm=true"),
            Some("si-key"),
        )
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let (_, replayed) = json(replay).await;
    assert_eq!(replayed, first, "replayed, not set up twice");
    let (_, cards) = get(&h, &format!("/v1/customers/{a}/payment_methods")).await;
    assert_eq!(ids(&cards).len(), 2, "the first setup and the keyed one");
}

/// Updates: text and metadata always; customer and payment method only while the intent
/// waits for its payment method; a new card voids a pending challenge.
#[tokio::test]
async fn updates_follow_the_status() {
    let h = Harness::default().await;
    let cus = customer(&h).await;
    let (_, si) = post(&h, "/v1/setup_intents", "metadata[a]=1").await;
    let path = format!("/v1/setup_intents/{}", id(&si));
    let (status, si) = post(
        &h,
        &path,
        &format!("customer={cus}&payment_method=pm_card_visa&description=d&metadata[b]=2"),
    )
    .await;
    assert_eq!(status, 200, "{si}");
    assert_eq!(
        (&si["status"], &si["customer"], &si["description"]),
        (&json!("requires_confirmation"), &json!(cus), &json!("d"))
    );
    assert_eq!(si["metadata"], json!({"a": "1", "b": "2"}));
    assert!(si["payment_method"].as_str().unwrap().starts_with("pm_"));

    // A card asking for 3-D Secure waits; another card voids the challenge.
    let (_, waiting) = post(
        &h,
        &format!("{path}/confirm"),
        "payment_method=pm_card_authenticationRequiredOnSetup",
    )
    .await;
    assert_eq!(waiting["status"], "requires_action", "{waiting}");
    let (_, swapped) = post(&h, &path, "payment_method=pm_card_mastercard").await;
    assert_eq!(
        (&swapped["status"], &swapped["next_action"]),
        (&json!("requires_confirmation"), &Value::Null)
    );
    let (_, done) = post(&h, &format!("{path}/confirm"), "").await;
    assert_eq!(done["status"], "succeeded", "{done}");

    let refused = post(&h, &path, "payment_method=pm_card_visa").await;
    assert_error(&refused, 400, "setup_intent_unexpected_state", Some("payment_method"));
    assert_error(
        &post(&h, &path, "payment_method_types[]=card").await,
        400,
        "setup_intent_unexpected_state",
        Some("payment_method_types"),
    );
    let (status, noted) = post(&h, &path, "metadata[a]=&description=").await;
    assert_eq!(status, 200, "{noted}");
    assert_eq!(
        (&noted["metadata"], &noted["description"]),
        (&json!({"b": "2"}), &Value::Null)
    );
    assert_error(
        &post(&h, "/v1/setup_intents/seti_nope", "metadata[a]=1").await,
        404,
        "resource_missing",
        Some("intent"),
    );
}

#[tokio::test]
async fn lists_filter_and_paginate() {
    let h = Harness::default().await;
    let cus = customer(&h).await;
    let (_, a) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&payment_method=pm_card_visa"),
    )
    .await;
    let (_, b) = post(&h, "/v1/setup_intents", &format!("customer={cus}")).await;
    let (_, c) = post(&h, "/v1/setup_intents", "").await;
    let (status, all) = get(&h, "/v1/setup_intents").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        (&all["object"], &all["url"]),
        (&"list".into(), &"/v1/setup_intents".into())
    );
    assert_eq!(ids(&all), [id(&c), id(&b), id(&a)]);
    assert_eq!(
        ids(&get(&h, &format!("/v1/setup_intents?customer={cus}")).await.1),
        [id(&b), id(&a)]
    );
    let pm = a["payment_method"].as_str().unwrap();
    assert_eq!(
        ids(&get(&h, &format!("/v1/setup_intents?payment_method={pm}")).await.1),
        [id(&a)]
    );
    let (_, page) = get(&h, "/v1/setup_intents?limit=2").await;
    assert_eq!((ids(&page), &page["has_more"]), (vec![id(&c), id(&b)], &json!(true)));
    let (_, rest) = get(&h, &format!("/v1/setup_intents?limit=2&starting_after={}", id(&b))).await;
    assert_eq!((ids(&rest), &rest["has_more"]), (vec![id(&a)], &json!(false)));
    let created = a["created"].as_i64().unwrap();
    assert_eq!(
        ids(&get(&h, &format!("/v1/setup_intents?created[lt]={created}")).await.1).len(),
        0
    );
    assert_eq!(
        ids(&get(&h, &format!("/v1/setup_intents?created[gte]={created}")).await.1).len(),
        3
    );
}

#[tokio::test]
async fn a_card_set_up_off_session_pays_off_session() {
    let h = Harness::default().await;
    let cus = customer(&h).await;
    // Set up off-session (Stripe's default usage): the card asks for authentication once.
    let (_, si) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&payment_method=pm_card_authenticationRequiredOnSetup&confirm=true"),
    )
    .await;
    assert_eq!(si["status"], "requires_action");
    let (_, si) = post(
        &h,
        &format!("/__fauxpay/setup_intents/{}/authenticate", id(&si)),
        "outcome=succeed",
    )
    .await;
    assert_eq!(si["status"], "succeeded");
    let pm = si["payment_method"].as_str().unwrap().to_string();

    // Later, without the customer: off-session, no authentication; the ledger records it.
    let body = format!("amount=4200&currency=usd&confirm=true&off_session=true&customer={cus}&payment_method={pm}&metadata[order_id]=renewal-1");
    let (status, pi) = post(&h, "/v1/payment_intents", &body).await;
    assert_eq!(status, 200, "{pi}");
    assert_eq!(
        (&pi["status"], &pi["payment_method"]),
        (&"succeeded".into(), &pm.clone().into())
    );
    assert_eq!(h.ledger("correlation_prefix=renewal-1").await.len(), 1);

    // Set up on-session only: the same card is refused off-session.
    let (_, on) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&payment_method=pm_card_authenticationRequiredOnSetup&confirm=true&usage=on_session"),
    )
    .await;
    let (_, on) = post(
        &h,
        &format!("/__fauxpay/setup_intents/{}/authenticate", id(&on)),
        "outcome=succeed",
    )
    .await;
    let (status, e) = post(
        &h,
        "/v1/payment_intents",
        &format!(
            "amount=4200&currency=usd&confirm=true&off_session=true&customer={cus}&payment_method={}",
            on["payment_method"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (402, &"authentication_required".into()),
        "{e}"
    );

    // An always-authenticate card stays so, set up or not.
    let (_, always) = post(
        &h,
        "/v1/setup_intents",
        &format!("customer={cus}&payment_method=pm_card_authenticationRequired&confirm=true"),
    )
    .await;
    let (_, always) = post(
        &h,
        &format!("/__fauxpay/setup_intents/{}/authenticate", id(&always)),
        "outcome=succeed",
    )
    .await;
    let (status, _) = post(
        &h,
        "/v1/payment_intents",
        &format!(
            "amount=4200&currency=usd&confirm=true&off_session=true&customer={cus}&payment_method={}",
            always["payment_method"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(status, 402);
}

#[tokio::test]
async fn setup_future_usage_saves_the_card_after_the_payment() {
    let h = Harness::default().await;
    let cus = customer(&h).await;
    let (_, pi) = post(
        &h,
        "/v1/payment_intents",
        &format!("amount=2000&currency=usd&confirm=true&customer={cus}&setup_future_usage=off_session&payment_method=pm_card_authenticationRequiredOnSetup"),
    )
    .await;
    assert_eq!(
        (&pi["status"], &pi["setup_future_usage"]),
        (&"requires_action".into(), &"off_session".into())
    );
    let pm = pi["payment_method"].as_str().unwrap().to_string();
    let (_, cards) = get(&h, &format!("/v1/customers/{cus}/payment_methods")).await;
    assert!(ids(&cards).is_empty(), "saved only once the payment succeeds");
    let (_, paid) = post(
        &h,
        &format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi)),
        "outcome=succeed",
    )
    .await;
    assert_eq!(paid["status"], "succeeded");
    let (_, cards) = get(&h, &format!("/v1/customers/{cus}/payment_methods")).await;
    assert_eq!(ids(&cards), [pm.as_str()], "the payment's own payment method, saved");
    let (status, later) = post(
        &h,
        "/v1/payment_intents",
        &format!("amount=900&currency=usd&confirm=true&off_session=true&customer={cus}&payment_method={pm}"),
    )
    .await;
    assert_eq!((status, &later["status"]), (200, &"succeeded".into()), "{later}");
}

#[tokio::test]
async fn a_fault_rule_on_setup_intents_acts_on_setup_intents() {
    let toml = "name = \"s\"\ndescription = \"s\"\nseed = 1\n[[rules]]\nkind = \"error\"\nstatus = 503\n[rules.match]\npath = \"/v1/setup_intents*\"\n";
    let profile = faults::parse_profile("test.toml", toml).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")));
    let h = Harness::start(Config {
        profile,
        profile_source: toml.to_string(),
        ..Config::default()
    })
    .await;
    let (status, e) = post(&h, "/v1/setup_intents", "payment_method=pm_card_visa&confirm=true").await;
    assert_eq!((status, &e["error"]["type"]), (503, &"api_error".into()));
    assert_eq!(get(&h, "/v1/setup_intents").await.0, 503);
    let (status, _) = post(&h, "/v1/payment_intents", "amount=500&currency=usd").await;
    assert_eq!(status, 200, "other paths are untouched");
    let (_, pms) = get(&h, "/v1/payment_methods").await;
    assert!(ids(&pms).is_empty(), "before the commit: nothing saved");
}
