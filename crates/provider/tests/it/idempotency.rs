//! Idempotency-Key semantics and duplicate detection over real sockets, including
//! concurrent requests with one key and concurrent new-key charges for one order.

use fauxpay_testkit::provider as common;

use std::time::Duration;

use common::{charge_body, json, Harness};
use fauxpay_provider::{Config, DuplicatePolicy, IdempotencyMode};

#[tokio::test]
async fn same_key_replays_the_first_response() {
    let h = Harness::default().await;
    let first = h
        .form(
            "/v1/payment_intents",
            &charge_body("o-1", "pm_card_visa"),
            Some("key-1"),
        )
        .await;
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first_req = first.headers()["request-id"].to_str().unwrap().to_string();
    let (s1, b1) = json(first).await;
    // Same parameters in another order: the same request.
    let again = h
        .form(
            "/v1/payment_intents",
            "metadata[order_id]=o-1&payment_method=pm_card_visa&confirm=true&currency=usd&amount=2000",
            Some("key-1"),
        )
        .await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["original-request"].to_str().unwrap(), first_req);
    assert_ne!(again.headers()["request-id"].to_str().unwrap(), first_req);
    let (s2, b2) = json(again).await;
    assert_eq!((s1, &b1), (s2, &b2));
    assert_eq!(h.ledger("").await.len(), 1, "one charge for one key");
}

#[tokio::test]
async fn declines_and_state_errors_are_replayed_too() {
    let h = Harness::default().await;
    let (s1, b1) = json(
        h.form(
            "/v1/payment_intents",
            &charge_body("d-1", "pm_card_chargeDeclined"),
            Some("kd"),
        )
        .await,
    )
    .await;
    assert_eq!(s1, 402);
    let replay = h
        .form(
            "/v1/payment_intents",
            &charge_body("d-1", "pm_card_chargeDeclined"),
            Some("kd"),
        )
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let (s2, b2) = json(replay).await;
    assert_eq!((s1, b1), (s2, b2));
}

#[tokio::test]
async fn same_key_other_parameters_is_an_idempotency_error() {
    let h = Harness::default().await;
    h.form("/v1/payment_intents", &charge_body("o-2", "pm_card_visa"), Some("k2"))
        .await;
    let (status, body) = json(
        h.form("/v1/payment_intents", &charge_body("o-3", "pm_card_visa"), Some("k2"))
            .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "idempotency_error");
    // The same key on another endpoint is another request too.
    let (status, _) = json(
        h.form("/v1/charges", "amount=2000&currency=usd&source=tok_visa", Some("k2"))
            .await,
    )
    .await;
    assert_eq!(status, 400);

    let ietf = Harness::start(Config {
        idempotency: IdempotencyMode::Ietf,
        ..Config::default()
    })
    .await;
    ietf.form(
        "/v1/payment_intents",
        &charge_body("o-2", "pm_card_visa"),
        Some("\"k2\""),
    )
    .await;
    let (status, _) = json(
        ietf.form(
            "/v1/payment_intents",
            &charge_body("o-3", "pm_card_visa"),
            Some("\"k2\""),
        )
        .await,
    )
    .await;
    assert_eq!(status, 422);
    // The quoted and the bare form name one key.
    let replay = ietf
        .form("/v1/payment_intents", &charge_body("o-2", "pm_card_visa"), Some("k2"))
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn ietf_mode_can_require_a_key() {
    let h = Harness::start(Config {
        idempotency: IdempotencyMode::Ietf,
        require_idempotency_key: true,
        ..Config::default()
    })
    .await;
    let (status, body) = json(
        h.form("/v1/payment_intents", &charge_body("o", "pm_card_visa"), None)
            .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "Idempotency-Key");
    assert_eq!(
        h.get("/v1/payment_intents").send().await.unwrap().status(),
        200,
        "GET needs no key"
    );
}

#[tokio::test]
async fn validation_failures_are_not_stored() {
    let h = Harness::default().await;
    let (status, body) = json(
        h.form("/v1/payment_intents", "amount=abc&currency=usd", Some("kv"))
            .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "amount");
    let (status, pi) = json(
        h.form("/v1/payment_intents", &charge_body("o-v", "pm_card_visa"), Some("kv"))
            .await,
    )
    .await;
    assert_eq!(status, 200, "the key is free again after a validation failure: {pi}");
}

#[tokio::test]
async fn keys_are_scoped_per_api_key() {
    let h = Harness::default().await;
    let send = |api: &'static str, order: &'static str| {
        h.client
            .post(h.url("/v1/payment_intents"))
            .bearer_auth(api)
            .header("Idempotency-Key", "shared")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(charge_body(order, "pm_card_visa"))
            .send()
    };
    assert_eq!(send("sk_test_a", "a").await.unwrap().status(), 200);
    assert_eq!(send("sk_test_b", "b").await.unwrap().status(), 200);
    assert_eq!(h.ledger("").await.len(), 2);
}

#[tokio::test]
async fn keys_expire_after_the_ttl() {
    let h = Harness::start(Config {
        key_ttl: Duration::from_millis(300),
        ..Config::default()
    })
    .await;
    let (_, a) = json(
        h.form("/v1/payment_intents", &charge_body("t-1", "pm_card_visa"), Some("kt"))
            .await,
    )
    .await;
    let replay = h
        .form("/v1/payment_intents", &charge_body("t-1", "pm_card_visa"), Some("kt"))
        .await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    // Past the key's TTL: the provider's clock is moved, not waited for.
    h.provider.provider.clock.advance(Duration::from_millis(400));
    let late = h
        .form("/v1/payment_intents", &charge_body("t-1", "pm_card_visa"), Some("kt"))
        .await;
    assert!(late.headers().get("idempotent-replayed").is_none());
    let (_, b) = json(late).await;
    assert_ne!(a["id"], b["id"], "an expired key makes a new payment");
    let s = h.summary().await;
    assert_eq!(s["duplicate_group_count"], 1, "and the ledger sees the double charge");
}

#[tokio::test]
async fn get_requests_ignore_keys() {
    let h = Harness::default().await;
    let (_, pi) = json(
        h.form("/v1/payment_intents", &charge_body("g", "pm_card_visa"), None)
            .await,
    )
    .await;
    let path = format!("/v1/payment_intents/{}", pi["id"].as_str().unwrap());
    for _ in 0..2 {
        let r = h.get(&path).header("Idempotency-Key", "ignored").send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("idempotent-replayed").is_none());
    }
}

#[tokio::test]
async fn concurrent_requests_with_one_key_charge_once() {
    let h = Harness::default().await;
    let body = charge_body("c-1", "pm_card_visa");
    let sends = (0..32).map(|_| h.form("/v1/payment_intents", &body, Some("one-key")));
    let results = futures_util::future::join_all(sends).await;
    let mut ids = std::collections::HashSet::new();
    for r in results {
        let status = r.status().as_u16();
        let conflict = status == 409;
        if conflict {
            assert_eq!(r.headers()["stripe-should-retry"], "true");
        }
        let (_, body) = json(r).await;
        if conflict {
            assert_eq!(body["error"]["code"], "idempotency_key_in_use");
        } else {
            assert_eq!(status, 200, "{body}");
            ids.insert(body["id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(ids.len(), 1, "every success is the same payment intent");
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn concurrent_new_key_charges_for_one_order_are_all_recorded_and_flagged() {
    let h = Harness::default().await;
    let keys: Vec<String> = (0..40).map(|i| format!("k-{i}")).collect();
    let body = charge_body("hot", "pm_card_visa");
    let sends = keys.iter().map(|k| h.form("/v1/payment_intents", &body, Some(k)));
    let ok = futures_util::future::join_all(sends)
        .await
        .into_iter()
        .filter(|r| r.status() == 200)
        .count();
    assert_eq!(ok, 40);
    let ledger = h.ledger("").await;
    assert_eq!(ledger.len(), 40);
    assert_eq!(ledger.iter().filter(|r| r["duplicate"] == true).count(), 39);
    let s = h.summary().await;
    assert_eq!(s["duplicate_group_count"], 1);
    assert_eq!(s["duplicate_groups"][0]["charge_count"], 40);
    assert_eq!(s["duplicate_groups"][0]["extra_amount"], 39 * 2000);
}

#[tokio::test]
async fn reject_policy_lets_exactly_one_concurrent_charge_through() {
    let h = Harness::start(Config {
        duplicates: DuplicatePolicy::Reject,
        ..Config::default()
    })
    .await;
    let keys: Vec<String> = (0..40).map(|i| format!("k-{i}")).collect();
    let body = charge_body("hot", "pm_card_visa");
    let sends = keys.iter().map(|k| h.form("/v1/payment_intents", &body, Some(k)));
    let mut statuses = Vec::new();
    for r in futures_util::future::join_all(sends).await {
        let (status, body) = json(r).await;
        if status == 402 {
            assert_eq!(body["error"]["decline_code"], "duplicate_transaction");
        }
        statuses.push(status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == 402).count(), 39);
    let s = h.summary().await;
    assert_eq!(s["duplicate_group_count"], 0);
    assert_eq!(s["blocked_duplicates"], 39);
}

/// `POST /__fauxpay/clock advance=…` moves the provider's time: a key past its TTL makes a
/// new payment, as at Stripe after 24 hours, without waiting a day.
#[tokio::test]
async fn the_admin_clock_crosses_a_keys_ttl_without_waiting() {
    let h = common::Harness::default().await;
    let body = common::charge_body("clock-1", "pm_card_visa");
    let (_, first) = common::json(h.form("/v1/payment_intents", &body, Some("clock-key")).await).await;
    let (_, replay) = common::json(h.form("/v1/payment_intents", &body, Some("clock-key")).await).await;
    assert_eq!(first["id"], replay["id"]);
    let resp = h
        .client
        .post(h.url("/__fauxpay/clock"))
        .form(&[("advance", "25h")])
        .send()
        .await
        .unwrap();
    let (status, clock) = common::json(resp).await;
    assert_eq!((status, clock["offset"].as_str()), (200, Some("1day 1h")), "{clock}");
    let (_, later) = common::json(h.form("/v1/payment_intents", &body, Some("clock-key")).await).await;
    assert_ne!(first["id"], later["id"], "the key expired: a new payment");
    let resp = h
        .client
        .post(h.url("/__fauxpay/clock"))
        .form(&[("advance", "soon")])
        .send()
        .await
        .unwrap();
    let (status, e) = common::json(resp).await;
    assert_eq!((status, e["error"]["param"].as_str()), (400, Some("advance")), "{e}");
}
