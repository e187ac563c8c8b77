//! The Stripe-compatible API over real sockets: payment intents, charges, refunds,
//! lists, search, auth and the admin API.

use fauxpay_testkit::provider as common;

use common::{charge_body, json, Harness, KEY};
use fauxpay_provider::Config;
use serde_json::Value;

#[tokio::test]
async fn create_and_confirm_a_payment_intent_with_a_form_body() {
    let h = Harness::default().await;
    let resp = h
        .form("/v1/payment_intents", &charge_body("o-1", "pm_card_visa"), None)
        .await;
    assert!(resp
        .headers()
        .get("request-id")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("req_"));
    let (status, pi) = json(resp).await;
    assert_eq!(status, 200, "{pi}");
    assert!(pi["id"].as_str().unwrap().starts_with("pi_"));
    assert_eq!(pi["object"], "payment_intent");
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(pi["amount_received"], 2000);
    assert_eq!(pi["livemode"], false);
    assert_eq!(pi["metadata"]["order_id"], "o-1");
    assert!(pi["latest_charge"].as_str().unwrap().starts_with("ch_"));
    assert_eq!(pi["last_payment_error"], Value::Null);

    let (_, got) = json(
        h.get(&format!("/v1/payment_intents/{}", pi["id"].as_str().unwrap()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got, pi);
    let (_, ch) = json(
        h.get(&format!("/v1/charges/{}", pi["latest_charge"].as_str().unwrap()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ch["captured"], true);
    assert_eq!(ch["amount_captured"], 2000);
}

#[tokio::test]
async fn ids_sent_percent_encoded_and_head_requests_are_served_as_plain_ones() {
    // The provider serves most /v1 requests without axum's router (Observe dispatches
    // them); an id with a percent-escape, and HEAD, still go through the router.
    let h = Harness::default().await;
    let (_, pi) = json(
        h.form("/v1/payment_intents", &charge_body("o-enc", "pm_card_visa"), None)
            .await,
    )
    .await;
    let id = pi["id"].as_str().unwrap();
    let plain = h.get(&format!("/v1/payment_intents/{id}")).send().await.unwrap();
    let (status, got) = json(plain).await;
    assert_eq!((status, &got), (200, &pi));
    let encoded = id.replace('_', "%5F");
    let (status, got) = json(h.get(&format!("/v1/payment_intents/{encoded}")).send().await.unwrap()).await;
    assert_eq!((status, &got), (200, &pi), "the id, decoded");
    // HEAD answers as GET without a body; a route's other methods are refused as before.
    for (method, status) in [(reqwest::Method::HEAD, 200), (reqwest::Method::PUT, 405)] {
        let resp = h
            .client
            .request(method.clone(), h.url(&format!("/v1/payment_intents/{id}")))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), status, "{method}");
        if method == reqwest::Method::HEAD {
            assert!(resp.headers().contains_key("request-id"));
            assert_eq!(resp.bytes().await.unwrap().len(), 0);
        }
    }
}

#[tokio::test]
async fn json_bodies_and_two_step_confirm() {
    let h = Harness::default().await;
    let body = serde_json::json!({"amount": 1500, "currency": "eur", "metadata": {"order_id": "j-1"}, "automatic_payment_methods": {"enabled": true}});
    let (status, pi) = json(h.post("/v1/payment_intents").json(&body).send().await.unwrap()).await;
    assert_eq!(status, 200, "{pi}");
    assert_eq!(pi["status"], "requires_payment_method");
    assert_eq!(pi["automatic_payment_methods"]["enabled"], true);
    let id = pi["id"].as_str().unwrap();
    let (status, done) = json(
        h.form(
            &format!("/v1/payment_intents/{id}/confirm"),
            "payment_method=pm_card_mastercard",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "succeeded");
    let (status, again) = json(
        h.form(
            &format!("/v1/payment_intents/{id}/confirm"),
            "payment_method=pm_card_visa",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(again["error"]["code"], "payment_intent_unexpected_state");
}

#[tokio::test]
async fn declines_are_card_errors_with_stripe_codes() {
    let h = Harness::default().await;
    for (pm, code, decline) in [
        ("pm_card_chargeDeclined", "card_declined", "generic_decline"),
        (
            "pm_card_chargeDeclinedInsufficientFunds",
            "card_declined",
            "insufficient_funds",
        ),
        ("pm_card_chargeDeclinedExpiredCard", "expired_card", "expired_card"),
        ("pm_card_chargeDeclinedIncorrectCvc", "incorrect_cvc", "incorrect_cvc"),
        (
            "pm_card_chargeDeclinedProcessingError",
            "processing_error",
            "processing_error",
        ),
        ("pm_card_chargeDeclinedLostCard", "card_declined", "lost_card"),
        ("pm_card_chargeDeclinedStolenCard", "card_declined", "stolen_card"),
    ] {
        let (status, body) = json(h.form("/v1/payment_intents", &charge_body(pm, pm), None).await).await;
        assert_eq!(status, 402, "{pm}");
        assert_eq!(body["error"]["type"], "card_error");
        assert_eq!(body["error"]["code"], code, "{pm}");
        assert_eq!(body["error"]["decline_code"], decline, "{pm}");
        assert_eq!(body["error"]["payment_intent"]["status"], "requires_payment_method");
        assert!(body["error"]["charge"].as_str().unwrap().starts_with("ch_"));
    }
    // Raw card numbers decide the same way (with the expiry Stripe requires beside them).
    let raw = "amount=2000&currency=usd&confirm=true&payment_method_data[type]=card&payment_method_data[card][number]=4000000000009995&payment_method_data[card][exp_month]=12&payment_method_data[card][exp_year]=2034";
    let (status, body) = json(h.form("/v1/payment_intents", raw, None).await).await;
    assert_eq!(status, 402);
    assert_eq!(body["error"]["decline_code"], "insufficient_funds");
    assert!(h.ledger("").await.is_empty(), "declines move no money");
}

#[tokio::test]
async fn manual_capture_and_cancel() {
    let h = Harness::default().await;
    let (_, pi) = json(h.form("/v1/payment_intents", "amount=3000&currency=usd&capture_method=manual&confirm=true&payment_method=pm_card_visa&metadata[order_id]=m-1", None).await).await;
    assert_eq!(pi["status"], "requires_capture");
    assert_eq!(pi["amount_capturable"], 3000);
    assert!(
        h.ledger("").await.is_empty(),
        "an authorisation is not a captured charge"
    );
    let id = pi["id"].as_str().unwrap();
    let (status, cap) = json(
        h.form(
            &format!("/v1/payment_intents/{id}/capture"),
            "amount_to_capture=2500",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{cap}");
    assert_eq!(cap["amount_received"], 2500);
    assert_eq!(h.ledger("").await[0]["amount"], 2500);

    let (_, other) = json(
        h.form(
            "/v1/payment_intents",
            "amount=3000&currency=usd&capture_method=manual&confirm=true&payment_method=pm_card_visa",
            None,
        )
        .await,
    )
    .await;
    let oid = other["id"].as_str().unwrap();
    let (status, canceled) = json(
        h.form(
            &format!("/v1/payment_intents/{oid}/cancel"),
            "cancellation_reason=requested_by_customer",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(canceled["status"], "canceled");
    assert_eq!(canceled["cancellation_reason"], "requested_by_customer");
    let (status, _) = json(h.form(&format!("/v1/payment_intents/{oid}/capture"), "", None).await).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn legacy_charges_with_tokens() {
    let h = Harness::default().await;
    let (status, ch) = json(
        h.form(
            "/v1/charges",
            "amount=999&currency=usd&source=tok_visa&metadata[order_id]=c-1",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{ch}");
    assert_eq!(ch["object"], "charge");
    assert_eq!(ch["paid"], true);
    assert_eq!(ch["payment_method_details"]["card"]["brand"], "visa");
    let (status, err) = json(
        h.form("/v1/charges", "amount=999&currency=usd&source=tok_chargeDeclined", None)
            .await,
    )
    .await;
    assert_eq!(status, 402);
    assert!(err["error"]["charge"].as_str().unwrap().starts_with("ch_"));
    let (_, auth) = json(
        h.form(
            "/v1/charges",
            "amount=999&currency=usd&source=tok_mastercard&capture=false&metadata[order_id]=c-2",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(auth["captured"], false);
    let (status, cap) = json(
        h.form(
            &format!("/v1/charges/{}/capture", auth["id"].as_str().unwrap()),
            "",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{cap}");
    assert_eq!(cap["captured"], true);
    let (_, found) = json(
        h.get("/v1/charges/search")
            .query(&[("query", "metadata['order_id']:'c-1'")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(found["object"], "search_result");
    assert_eq!(found["data"].as_array().unwrap().len(), 1);
    assert_eq!(found["data"][0]["id"], ch["id"]);
    assert_eq!(h.ledger("").await.len(), 2);
}

#[tokio::test]
async fn refunds_full_partial_and_over_refund() {
    let h = Harness::default().await;
    let (_, pi) = json(
        h.form("/v1/payment_intents", &charge_body("r-1", "pm_card_visa"), None)
            .await,
    )
    .await;
    let pid = pi["id"].as_str().unwrap();
    let (status, r1) = json(
        h.form("/v1/refunds", &format!("payment_intent={pid}&amount=500"), None)
            .await,
    )
    .await;
    assert_eq!(status, 200, "{r1}");
    assert!(r1["id"].as_str().unwrap().starts_with("re_"));
    assert_eq!(r1["status"], "succeeded");
    let (status, over) = json(
        h.form("/v1/refunds", &format!("payment_intent={pid}&amount=1600"), None)
            .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(over["error"]["param"], "amount");
    let (status, rest) = json(
        h.form(
            "/v1/refunds",
            &format!("charge={}", pi["latest_charge"].as_str().unwrap()),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(rest["amount"], 1500);
    let (_, listed) = json(
        h.get("/v1/refunds")
            .query(&[("payment_intent", pid)])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
    let (_, got) = json(
        h.get(&format!("/v1/refunds/{}", r1["id"].as_str().unwrap()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got["amount"], 500);
    let summary = h.summary().await;
    assert_eq!(summary["refunds"], 2);
    assert_eq!(summary["refunded"]["usd"], 2000);
    assert_eq!(summary["over_refunds"][0]["requested"], 1600);
    let ledger = h.ledger("").await;
    assert_eq!(ledger.iter().filter(|r| r["kind"] == "refund").count(), 2);
}

/// A charge's own refund endpoints (Stripe's older form, still in its SDKs), refund and
/// charge updates, and a customer's saved card by id: the same rules and ledger as
/// `/v1/refunds`, each id checked against the path's parent.
#[tokio::test]
async fn a_charges_refunds_under_its_path_and_updates() {
    let h = Harness::default().await;
    let mut charges = Vec::new();
    for order in ["cr-1", "cr-2"] {
        let (_, pi) = json(
            h.form("/v1/payment_intents", &charge_body(order, "pm_card_visa"), None)
                .await,
        )
        .await;
        charges.push(pi["latest_charge"].as_str().unwrap().to_string());
    }
    let [ch, other] = [&charges[0], &charges[1]];

    let (status, r1) = json(
        h.form(&format!("/v1/charges/{ch}/refunds"), "amount=300", Some("k-r1"))
            .await,
    )
    .await;
    assert_eq!(
        (status, &r1["charge"], &r1["amount"]),
        (200, &Value::from(ch.as_str()), &Value::from(300)),
        "{r1}"
    );
    let again = h
        .form(&format!("/v1/charges/{ch}/refunds"), "amount=300", Some("k-r1"))
        .await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    // The oldest form refunds what is left and answers the charge.
    let (status, charge) = json(
        h.form(&format!("/v1/charges/{ch}/refund"), "reason=duplicate", None)
            .await,
    )
    .await;
    assert_eq!(status, 200, "{charge}");
    assert_eq!(
        (&charge["object"], &charge["amount_refunded"], &charge["refunded"]),
        (&"charge".into(), &2000.into(), &true.into())
    );
    let (status, over) = json(h.form(&format!("/v1/charges/{ch}/refunds"), "amount=1", None).await).await;
    assert_eq!(
        (status, &over["error"]["code"]),
        (400, &"charge_already_refunded".into()),
        "{over}"
    );
    let (status, both) = json(
        h.form(&format!("/v1/charges/{other}/refunds"), "payment_intent=pi_x", None)
            .await,
    )
    .await;
    assert_eq!(
        (status, &both["error"]["param"]),
        (400, &"payment_intent".into()),
        "{both}"
    );

    let (_, listed) = json(h.get(&format!("/v1/charges/{ch}/refunds")).send().await.unwrap()).await;
    assert_eq!(listed["url"], format!("/v1/charges/{ch}/refunds"));
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");
    let r1_id = r1["id"].as_str().unwrap();
    let (status, got) = json(
        h.get(&format!("/v1/charges/{ch}/refunds/{r1_id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, &got["id"]), (200, &r1["id"]));
    // A refund of another charge is no such refund under this one.
    let (status, wrong) = json(
        h.get(&format!("/v1/charges/{other}/refunds/{r1_id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, &wrong["error"]["code"], &wrong["error"]["param"]),
        (404, &"resource_missing".into(), &"refund".into())
    );
    let (status, _) = json(h.get("/v1/charges/ch_nope/refunds").send().await.unwrap()).await;
    assert_eq!(status, 404);

    let (status, noted) = json(
        h.form(
            &format!("/v1/charges/{ch}/refunds/{r1_id}"),
            "metadata[ticket]=T-1",
            None,
        )
        .await,
    )
    .await;
    assert_eq!((status, &noted["metadata"]["ticket"]), (200, &"T-1".into()), "{noted}");
    let (_, noted) = json(
        h.form(
            &format!("/v1/refunds/{r1_id}"),
            "metadata[ticket]=&metadata[by]=ops",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(noted["metadata"], serde_json::json!({"by": "ops"}));
    let (status, charge) = json(
        h.form(
            &format!("/v1/charges/{ch}"),
            "description=order%20cr-1&metadata[shipped]=no",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{charge}");
    assert_eq!(charge["description"], "order cr-1");
    assert_eq!(
        charge["metadata"],
        serde_json::json!({"order_id": "cr-1", "shipped": "no"})
    );
    let (_, events) = json(
        h.get("/v1/events")
            .query(&[("type", "charge.updated")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(events["data"][0]["data"]["object"]["description"], "order cr-1");

    // The ledger counts refunds made under the charge's path as any other.
    let summary = h.summary().await;
    assert_eq!(
        (&summary["refunds"], &summary["refunded"]["usd"]),
        (&2.into(), &2000.into()),
        "{summary}"
    );
    assert_eq!(summary["duplicate_group_count"], 0);

    let (_, customer) = json(h.form("/v1/customers", "email=a%40example.com", None).await).await;
    let cus = customer["id"].as_str().unwrap();
    let (_, pm) = json(
        h.form("/v1/payment_methods", "type=card&card[token]=tok_visa", None)
            .await,
    )
    .await;
    let pm = pm["id"].as_str().unwrap();
    let path = format!("/v1/customers/{cus}/payment_methods/{pm}");
    let (status, _) = json(h.get(&path).send().await.unwrap()).await;
    assert_eq!(status, 404, "not attached to this customer yet");
    h.form(
        &format!("/v1/payment_methods/{pm}/attach"),
        &format!("customer={cus}"),
        None,
    )
    .await;
    let (status, saved) = json(h.get(&path).send().await.unwrap()).await;
    assert_eq!((status, &saved["customer"]), (200, &Value::from(cus)), "{saved}");
}

#[tokio::test]
async fn lists_paginate_and_search_by_metadata() {
    let h = Harness::default().await;
    let mut ids = Vec::new();
    for i in 0..25 {
        let (_, pi) = json(
            h.form(
                "/v1/payment_intents",
                &format!("amount=1000&currency=usd&metadata[order_id]=l-{i}"),
                None,
            )
            .await,
        )
        .await;
        ids.push(pi["id"].as_str().unwrap().to_string());
    }
    let (_, page1) = json(h.get("/v1/payment_intents?limit=10").send().await.unwrap()).await;
    assert_eq!(page1["object"], "list");
    assert_eq!(page1["url"], "/v1/payment_intents");
    assert_eq!(page1["has_more"], true);
    let got: Vec<&str> = page1["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    let newest: Vec<&str> = ids.iter().rev().take(10).map(String::as_str).collect();
    assert_eq!(got, newest, "newest first");
    let (_, page3) = json(
        h.get(&format!("/v1/payment_intents?limit=10&starting_after={}", ids[5]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(page3["data"].as_array().unwrap().len(), 5);
    assert_eq!(page3["has_more"], false);
    let (_, before) = json(
        h.get(&format!("/v1/payment_intents?limit=2&ending_before={}", ids[5]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let got: Vec<&str> = before["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, vec![ids[7].as_str(), ids[6].as_str()]);

    let (_, found) = json(
        h.get("/v1/payment_intents/search")
            .query(&[("query", "metadata['order_id']:'l-7'")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(found["data"][0]["id"].as_str().unwrap(), ids[7]);
    let (_, all) = json(
        h.get("/v1/payment_intents/search")
            .query(&[("query", "status:'requires_payment_method'"), ("limit", "20")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(all["has_more"], true);
    let next = all["next_page"].as_str().unwrap();
    let (_, rest) = json(
        h.get("/v1/payment_intents/search")
            .query(&[("query", "status:'requires_payment_method'"), ("page", next)])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(rest["data"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn authentication() {
    let h = Harness::default().await;
    let none = h.client.get(h.url("/v1/payment_intents")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let (_, body) = json(none).await;
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let live = h
        .client
        .get(h.url("/v1/payment_intents"))
        .bearer_auth("sk_live_x")
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 401);
    let basic = h
        .client
        .get(h.url("/v1/payment_intents"))
        .basic_auth(KEY, Some(""))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 200);

    let fixed = Harness::start(Config {
        api_key: Some("sk_test_only".into()),
        ..Config::default()
    })
    .await;
    assert_eq!(fixed.get("/v1/payment_intents").send().await.unwrap().status(), 401);
    assert_eq!(
        fixed
            .client
            .get(fixed.url("/v1/payment_intents"))
            .bearer_auth("sk_test_only")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn admin_ledger_summary_reset_health_and_metrics() {
    let h = Harness::default().await;
    for i in 0..3 {
        h.form(
            "/v1/payment_intents",
            &charge_body(&format!("runA-{i}"), "pm_card_visa"),
            None,
        )
        .await;
    }
    h.form("/v1/payment_intents", &charge_body("runB-1", "pm_card_visa"), None)
        .await;
    h.form("/v1/payment_intents", &charge_body("runB-1", "pm_card_visa"), None)
        .await;
    let a = h.ledger("correlation_prefix=runA-").await;
    assert_eq!(a.len(), 3);
    for r in &a {
        assert_eq!(r["schema_version"], 1);
        assert_eq!(r["kind"], "charge");
        assert!(r["request_id"].as_str().unwrap().starts_with("req_"));
        assert_eq!(r["duplicate"], false);
        assert_eq!(r["fault"], Value::Null);
    }
    assert!(h.ledger("since=99999999999").await.is_empty());
    let s = h.summary().await;
    assert_eq!(s["charges"], 5);
    assert_eq!(s["duplicate_group_count"], 1);
    assert_eq!(s["duplicate_groups"][0]["correlation_id"], "runB-1");
    assert_eq!(s["duplicate_groups"][0]["charges"].as_array().unwrap().len(), 2);

    let metrics = h.metrics().await;
    assert!(metrics.contains("fauxpay_charges_total 5"), "{metrics}");
    assert!(metrics.contains("fauxpay_duplicate_groups 1"));
    assert!(
        metrics.contains("route=\"/v1/payment_intents\",method=\"POST\",status=\"200\"} 5"),
        "{metrics}"
    );

    let health: Value = h.admin_json("/__fauxpay/health").await;
    assert_eq!(health["status"], "ok");
    assert_eq!(
        h.client.post(h.url("/__fauxpay/reset")).send().await.unwrap().status(),
        200
    );
    assert!(h.ledger("").await.is_empty());
    assert_eq!(h.summary().await["charges"], 0);
}

#[tokio::test]
async fn admin_token_guards_the_admin_api_but_not_health() {
    let h = Harness::start(Config {
        admin_token: Some("s3cret".into()),
        ..Config::default()
    })
    .await;
    assert_eq!(
        h.client.get(h.url("/__fauxpay/summary")).send().await.unwrap().status(),
        401
    );
    assert_eq!(
        h.client.post(h.url("/__fauxpay/reset")).send().await.unwrap().status(),
        401
    );
    assert_eq!(
        h.client
            .get(h.url("/__fauxpay/summary"))
            .bearer_auth("s3cret")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        h.client.get(h.url("/__fauxpay/health")).send().await.unwrap().status(),
        200
    );
}
