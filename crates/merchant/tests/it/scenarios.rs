//! The reference merchants end to end on the embedded store, against an in-process
//! provider, with magic payment methods forcing the faults: naive and lock-only
//! double-charge on client retries, idempotent never does and resolves what it could not
//! know.

use fauxpay_testkit::merchant as merchant_common;

use std::time::{Duration, Instant};

use fauxpay_merchant::Strategy;
use merchant_common::scenarios;
use merchant_common::*;
use reqwest::Client;
use serde_json::json;

#[tokio::test]
async fn naive_double_charges_every_retry_of_a_lost_answer() {
    let p = provider("happy").await;
    let m = merchant(Strategy::Naive, &p.url(), &Backend::Memory, |_| {}).await;
    let c = Client::new();
    let order_id = run_id("naive");
    let b = body(&order_id, 2000, "pm_fault_drop_after_commit");
    for _ in 0..3 {
        let r = checkout(&c, &m.url(), &b, Some("same-key")).await.expect("answer");
        assert_eq!(r.status, 502, "{:?}", r.body);
        assert_eq!(r.body["error"], "provider_error");
    }
    let charges = charges_by_order(&c, &p.url(), &order_id).await;
    assert_eq!(charges[&order_id].len(), 3, "one charge per retry");
    assert_eq!(duplicate_orders(&c, &p.url(), &order_id).await, vec![order_id.clone()]);
    let s = summary(&c, &p.url()).await;
    assert_eq!(s["duplicate_groups"][0]["charge_count"], 3);

    // Even a successful payment is repeated by a retry with the same key: two payments
    // answered for one key (an inconsistent replay).
    let order_id = run_id("naive-ok");
    let b = body(&order_id, 2000, "pm_card_visa");
    let first = checkout(&c, &m.url(), &b, Some("k")).await.unwrap();
    let second = checkout(&c, &m.url(), &b, Some("k")).await.unwrap();
    assert_eq!((first.status, second.status), (200, 200));
    assert_ne!(first.body["payment_intent"], second.body["payment_intent"]);
    let (_, row) = order(&c, &m.url(), &order_id).await;
    assert_eq!(
        (row["status"].as_str(), row["attempts"].as_u64()),
        (Some("paid"), Some(2))
    );
    m.shutdown().await;
}

#[tokio::test]
async fn lock_only_blocks_overlap_but_double_charges_a_late_retry() {
    let p = provider("happy").await;
    let m = merchant(Strategy::LockOnly, &p.url(), &Backend::Memory, |c| {
        c.provider_timeout = Duration::from_secs(5);
    })
    .await;
    let c = Client::new();
    // Overlap: the slow body holds the first request (and its lock) for ~2 s after the
    // provider committed its charge; once the ledger shows that charge, the first request
    // is inside its lock.
    let order_id = run_id("lock-overlap");
    let b = body(&order_id, 2000, "pm_fault_slow_body");
    let first = {
        let (c, url, b) = (c.clone(), m.url(), b.clone());
        tokio::spawn(async move { checkout(&c, &url, &b, Some("k")).await })
    };
    poll_until("the first request's charge", Duration::from_secs(5), || async {
        charges_by_order(&c, &p.url(), &order_id).await.contains_key(&order_id)
    })
    .await;
    let second = checkout(&c, &m.url(), &b, Some("k")).await.unwrap();
    assert_eq!(second.status, 409, "{:?}", second.body);
    assert_eq!(second.body["error"], "request_in_flight");
    assert_eq!(first.await.unwrap().unwrap().status, 200);
    assert_eq!(charges_by_order(&c, &p.url(), &order_id).await[&order_id].len(), 1);

    // A retry after the lock is released: the lost answer is charged again.
    let order_id = run_id("lock-late");
    let b = body(&order_id, 2000, "pm_fault_drop_after_commit");
    for _ in 0..2 {
        assert_eq!(checkout(&c, &m.url(), &b, Some("k")).await.unwrap().status, 502);
    }
    assert_eq!(charges_by_order(&c, &p.url(), &order_id).await[&order_id].len(), 2);
    assert_eq!(duplicate_orders(&c, &p.url(), &order_id).await, vec![order_id.clone()]);
    m.shutdown().await;
}

#[tokio::test]
async fn idempotent_reconciles_lost_and_ambiguous_answers() {
    scenarios::lost_and_ambiguous_answers(&Backend::Memory).await;
}

#[tokio::test]
async fn idempotent_reconciles_a_provider_timeout() {
    scenarios::provider_timeout_is_reconciled(&Backend::Memory).await;
}

#[tokio::test]
async fn idempotent_reopens_an_order_when_no_charge_exists() {
    scenarios::no_charge_reopens_the_order(&Backend::Memory).await;
}

#[tokio::test]
async fn idempotent_key_semantics() {
    scenarios::key_semantics(&Backend::Memory).await;
}

#[tokio::test]
async fn idempotent_concurrent_same_key_and_same_order() {
    scenarios::concurrent_requests(&Backend::Memory).await;
}

#[tokio::test]
async fn idempotent_without_a_key_still_charges_once() {
    scenarios::no_key_still_charges_once(&Backend::Memory).await;
}

#[tokio::test]
async fn a_rate_limited_provider_is_retryable_and_charges_nothing() {
    let p = provider("happy").await;
    let idem = merchant(Strategy::Idempotent, &p.url(), &Backend::Memory, |_| {}).await;
    let naive = merchant(Strategy::Naive, &p.url(), &Backend::Memory, |_| {}).await;
    let c = Client::new();
    let order_id = run_id("429");
    let b = body(&order_id, 2000, "pm_fault_rate_limit");
    let r = checkout(&c, &idem.url(), &b, Some("k")).await.unwrap();
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert_eq!(r.body["error"], "provider_unavailable");
    assert_eq!(r.retry_after.as_deref(), Some("1"));
    let (_, row) = order(&c, &idem.url(), &order_id).await;
    assert_eq!(row["status"], "pending");
    assert_eq!(checkout(&c, &naive.url(), &b, None).await.unwrap().status, 502);
    assert!(charges_by_order(&c, &p.url(), &order_id).await.is_empty());
    idem.shutdown().await;
    naive.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_clear_json_errors() {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), &Backend::Memory, |_| {}).await;
    let c = Client::new();
    let url = m.url();
    let post = |body: String, key: Option<&'static str>| {
        let mut rb = c
            .post(format!("{url}/checkout"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(k) = key {
            rb = rb.header("Idempotency-Key", k);
        }
        rb.send()
    };
    for (body, param) in [
        (
            r#"{"order_id":"o1","amount":"2000","currency":"usd","payment_method":"pm_card_visa"}"#,
            json!("amount"),
        ),
        (
            r#"{"order_id":"o 1","amount":2000,"currency":"usd","payment_method":"pm_card_visa"}"#,
            json!("order_id"),
        ),
        (
            r#"{"order_id":"o1","amount":2000,"currency":"usdx","payment_method":"pm_card_visa"}"#,
            json!("currency"),
        ),
        (
            r#"{"order_id":"o1","amount":2000,"currency":"usd"}"#,
            json!("payment_method"),
        ),
        (r#"{"order_id":"o1","#, json!(null)),
        (r#""just a string""#, json!(null)),
    ] {
        let resp = post(body.to_string(), Some("k")).await.unwrap();
        assert_eq!(resp.status(), 400, "{body}");
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["error"], "invalid_request", "{body}");
        assert_eq!(v["param"], param, "{body}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let valid = r#"{"order_id":"o1","amount":2000,"currency":"usd","payment_method":"pm_card_visa"}"#;
    let long_key: &'static str = Box::leak("k".repeat(300).into_boxed_str());
    let resp = post(valid.to_string(), Some(long_key)).await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<serde_json::Value>().await.unwrap()["param"],
        "Idempotency-Key"
    );
    let resp = post("x".repeat(100_000), None).await.unwrap();
    assert_eq!(resp.status(), 413);
    assert!(resp.json::<serde_json::Value>().await.unwrap()["error"].is_string());

    let (status, v) = order(&c, &url, "no-such-order").await;
    assert_eq!((status, v["error"].as_str()), (404, Some("order_not_found")));
    let resp = c.get(format!("{url}/nope")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.json::<serde_json::Value>().await.unwrap()["error"], "not_found");
    let resp = c.get(format!("{url}/checkout")).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    let health: serde_json::Value = c
        .get(format!("{url}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["strategy"], "idempotent");
    assert_eq!(health["store"], "memory");
    // Nothing above reached the provider.
    assert_eq!(summary(&c, &p.url()).await["charges"], 0);
    m.shutdown().await;
}

#[tokio::test]
async fn a_merchant_that_cannot_reach_the_provider_answers_retryably() {
    // A port with nothing listening.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{dead}");
    let m = merchant(Strategy::Idempotent, &url, &Backend::Memory, |_| {}).await;
    let c = Client::new();
    let order_id = run_id("down");
    let deadline = Instant::now() + Duration::from_secs(2);
    let (outcome, seen) = checkout_until_final(
        &c,
        &m.url(),
        &body(&order_id, 2000, "pm_card_visa"),
        Some("k"),
        deadline,
    )
    .await;
    assert_eq!(outcome, Outcome::Unresolved);
    assert!(seen.iter().all(|s| *s == 503), "{seen:?}");
    let (_, row) = order(&c, &m.url(), &order_id).await;
    assert_eq!(row["status"], "pending");
    m.shutdown().await;
}
