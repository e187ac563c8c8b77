//! The merchants' webhook receiver, `POST /webhooks/stripe`, over real sockets: deliveries
//! signed here by an HMAC-SHA256 written from RFC 2104 (on `sha2`, not the `hmac` crate
//! the merchant uses), so the merchant's verifier is checked against an independent
//! signer. Good signatures fulfil; forged, tampered, stale or missing ones are refused
//! with 400 and change nothing; a redelivered event fulfils the naive and lock-only
//! merchants again (the classic bug) and the idempotent one never — on the embedded store
//! and on PostgreSQL (with its Redis lock), sequentially and with copies sent at once.

use fauxpay_testkit::merchant as merchant_common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fauxpay_merchant::webhook::WebhookSecret;
use fauxpay_merchant::{RunningMerchant, Strategy};
use merchant_common::*;
use reqwest::Client;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const SECRET: &str = "whsec_test_fulfilment_secret";

/// HMAC-SHA256 (RFC 2104), hex: the test's own signer.
fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// `Stripe-Signature` for `body` at `t`, signed with `secret`.
fn signature(secret: &str, t: i64, body: &str) -> String {
    format!(
        "t={t},v1={}",
        hmac_sha256_hex(secret.as_bytes(), format!("{t}.{body}").as_bytes())
    )
}

/// A `payment_intent.succeeded` event as Stripe shapes it (the fields that matter).
fn succeeded(event_id: &str, payment_intent: &str, order: &str) -> String {
    json!({
        "id": event_id,
        "object": "event",
        "api_version": "2023-08-16",
        "created": now_secs(),
        "livemode": false,
        "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null},
        "type": "payment_intent.succeeded",
        "data": {"object": {
            "id": payment_intent, "object": "payment_intent", "amount": 2000, "currency": "usd",
            "status": "succeeded", "metadata": {"order_id": order},
        }},
    })
    .to_string()
}

async fn deliver(client: &Client, m: &RunningMerchant, body: &str, signature: Option<&str>) -> (u16, Value) {
    let mut req = client
        .post(format!("{}/webhooks/stripe", m.url()))
        .header("content-type", "application/json; charset=utf-8")
        .body(body.to_string());
    if let Some(s) = signature {
        req = req.header("Stripe-Signature", s);
    }
    let resp = req.send().await.expect("the merchant answers");
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

async fn signed(client: &Client, m: &RunningMerchant, body: &str) -> (u16, Value) {
    deliver(client, m, body, Some(&signature(SECRET, now_secs(), body))).await
}

async fn fulfillments(client: &Client, m: &RunningMerchant, order: &str) -> u64 {
    let (status, body) = order_of(client, m, order).await;
    assert_eq!(status, 200, "{body}");
    body["fulfillments"].as_u64().expect("fulfillments is a count")
}

async fn order_of(client: &Client, m: &RunningMerchant, order: &str) -> (u16, Value) {
    merchant_common::order(client, &m.url(), order).await
}

async fn webhook_merchant(strategy: Strategy, provider_url: &str, backend: &Backend) -> RunningMerchant {
    merchant(strategy, provider_url, backend, |c| {
        c.webhook_secret = Some(WebhookSecret::parse(SECRET).unwrap());
    })
    .await
}

/// Pays `order` through the merchant and returns its payment intent.
async fn pay(client: &Client, m: &RunningMerchant, order: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    match checkout_until_final(
        client,
        &m.url(),
        &body(order, 2000, "pm_card_visa"),
        Some(order),
        deadline,
    )
    .await
    {
        (Outcome::Paid(pi), _) => pi,
        other => panic!("{order} was not paid: {other:?}"),
    }
}

/// Forged, tampered, stale and unsigned deliveries are refused and change nothing; a good
/// one fulfils; events the merchant does not act on are acknowledged.
async fn refuses_forgeries(strategy: Strategy, backend: &Backend) {
    let provider = provider("happy").await;
    let m = webhook_merchant(strategy, &provider.url(), backend).await;
    let client = Client::new();
    let order = format!("{}-forged", run_id(strategy.as_str()));
    let pi = pay(&client, &m, &order).await;
    assert_eq!(fulfillments(&client, &m, &order).await, 0, "no webhook yet");

    let body = succeeded("evt_forged_1", &pi, &order);
    let now = now_secs();
    let tampered = body.replace("\"amount\":2000", "\"amount\":1");
    assert_ne!(tampered, body);
    for (what, sig, sent) in [
        (
            "another secret",
            Some(signature("whsec_attacker", now, &body)),
            body.clone(),
        ),
        ("a tampered body", Some(signature(SECRET, now, &body)), tampered),
        (
            "a stale timestamp",
            Some(signature(SECRET, now - 301, &body)),
            body.clone(),
        ),
        ("no v1", Some(format!("t={now}")), body.clone()),
        (
            "a v0 only",
            Some(format!("t={now},v0={}", "0".repeat(64))),
            body.clone(),
        ),
        ("no header", None, body.clone()),
    ] {
        let (status, answer) = deliver(&client, &m, &sent, sig.as_deref()).await;
        assert_eq!(status, 400, "{what}: {answer}");
        assert_eq!(answer["error"], "invalid_signature", "{what}: {answer}");
    }
    assert_eq!(fulfillments(&client, &m, &order).await, 0, "a forgery fulfils nothing");

    // Within the tolerance is fine, and a rolled secret's extra v1 does not hurt.
    let t = now - 299;
    let rolled = format!(
        "t={t},v1={},v1={}",
        "ab".repeat(32),
        hmac_sha256_hex(SECRET.as_bytes(), format!("{t}.{body}").as_bytes())
    );
    let (status, answer) = deliver(&client, &m, &body, Some(&rolled)).await;
    assert_eq!((status, &answer["result"]), (200, &json!("fulfilled")), "{answer}");
    assert_eq!(answer["fulfillments"], 1);
    assert_eq!(fulfillments(&client, &m, &order).await, 1);

    // Acknowledged and ignored: another type, an unknown order, no order id, bad JSON.
    let charge =
        json!({"id": "evt_charge", "type": "charge.succeeded", "data": {"object": {"id": "ch_1"}}}).to_string();
    let (status, answer) = signed(&client, &m, &charge).await;
    assert_eq!((status, &answer["result"]), (200, &json!("ignored")), "{answer}");
    let unknown = succeeded("evt_unknown", "pi_nope", &format!("{order}-unknown"));
    let (status, answer) = signed(&client, &m, &unknown).await;
    assert_eq!((status, &answer["result"]), (200, &json!("unknown_order")), "{answer}");
    let anonymous = succeeded("evt_anon", &pi, &order).replace(&format!("\"order_id\":\"{order}\""), "\"x\":1");
    let (status, answer) = signed(&client, &m, &anonymous).await;
    assert_eq!((status, &answer["result"]), (200, &json!("ignored")), "{answer}");
    let (status, answer) = signed(&client, &m, "not json").await;
    assert_eq!((status, &answer["error"]), (400, &json!("invalid_event")), "{answer}");
    assert_eq!(fulfillments(&client, &m, &order).await, 1);
    m.shutdown().await;
    let _ = provider.shutdown().await;
}

/// One event delivered three times in a row, a fourth time as three copies at once, and
/// another event (a second payment intent) for the same order: naive and lock-only ship
/// on every one; idempotent ships once.
async fn redeliveries(strategy: Strategy, backend: &Backend) {
    let provider = provider("happy").await;
    let m = webhook_merchant(strategy, &provider.url(), backend).await;
    let client = Client::new();
    let order = format!("{}-redelivered", run_id(strategy.as_str()));
    let pi = pay(&client, &m, &order).await;
    let body = succeeded("evt_redelivered_1", &pi, &order);
    let mut results = Vec::new();
    for _ in 0..3 {
        let (status, answer) = signed(&client, &m, &body).await;
        assert_eq!(status, 200, "{answer}");
        results.push(answer["result"].as_str().unwrap().to_string());
    }
    let copies = futures_util::future::join_all((0..3).map(|_| signed(&client, &m, &body))).await;
    for (status, answer) in &copies {
        assert_eq!(*status, 200, "{answer}");
    }
    let other = succeeded("evt_redelivered_2", &format!("{pi}_second"), &order);
    let (status, answer) = signed(&client, &m, &other).await;
    assert_eq!(status, 200, "{answer}");
    let count = fulfillments(&client, &m, &order).await;
    match strategy {
        Strategy::Idempotent => {
            assert_eq!(count, 1, "the idempotent merchant ships once");
            assert_eq!(results, ["fulfilled", "duplicate_event", "duplicate_event"]);
            assert!(
                copies.iter().all(|(_, a)| a["result"] == "duplicate_event"),
                "{copies:?}"
            );
            assert_eq!(answer["result"], "already_fulfilled", "{answer}");
            let (_, o) = order_of(&client, &m, &order).await;
            assert_eq!(
                o["payment_intent"],
                pi.as_str(),
                "the order keeps its own payment intent"
            );
        }
        _ => {
            assert_eq!(
                count, 7,
                "{strategy} ships on every delivery (the bug it exists to show)"
            );
            assert_eq!(results, ["fulfilled", "fulfilled", "fulfilled"]);
        }
    }
    m.shutdown().await;
    let _ = provider.shutdown().await;
}

#[tokio::test]
async fn forgeries_are_refused_by_every_merchant() {
    for strategy in Strategy::ALL {
        refuses_forgeries(strategy, &Backend::Memory).await;
    }
}

#[tokio::test]
async fn redelivered_events_fulfill_naive_and_lock_only_again_and_idempotent_once() {
    for strategy in Strategy::ALL {
        redeliveries(strategy, &Backend::Memory).await;
    }
}

#[tokio::test]
async fn the_idempotent_merchant_on_postgres_fulfills_once_and_refuses_forgeries() {
    let backend = Backend::durable().await;
    redeliveries(Strategy::Idempotent, &backend).await;
    refuses_forgeries(Strategy::Idempotent, &backend).await;
    backend.cleanup().await;
}

/// The provider's word that a payment intent succeeded fulfils a known order whatever its
/// checkout concluded (here a decline stands in for an answer the webhook overtook): the
/// order is known from the moment its charge starts, for every merchant.
#[tokio::test]
async fn a_succeeded_event_fulfills_a_known_order_whatever_its_checkout_said() {
    let provider = provider("happy").await;
    let client = Client::new();
    for strategy in Strategy::ALL {
        let m = webhook_merchant(strategy, &provider.url(), &Backend::Memory).await;
        let order = format!("{}-early", run_id(strategy.as_str()));
        let declined = checkout(
            &client,
            &m.url(),
            &body(&order, 2000, "pm_card_chargeDeclined"),
            Some(&order),
        )
        .await
        .unwrap();
        assert_eq!(declined.status, 402, "{:?}", declined.body);
        let (status, answer) = signed(&client, &m, &succeeded("evt_early", "pi_early", &order)).await;
        assert_eq!(
            (status, &answer["result"]),
            (200, &json!("fulfilled")),
            "{strategy}: {answer}"
        );
        assert_eq!(fulfillments(&client, &m, &order).await, 1, "{strategy}");
        m.shutdown().await;
    }
    let _ = provider.shutdown().await;
}

#[tokio::test]
async fn without_a_secret_the_route_says_how_to_turn_it_on() {
    let provider = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &provider.url(), &Backend::Memory, |_| {}).await;
    let client = Client::new();
    let body = succeeded("evt_1", "pi_1", "o-1");
    let (status, answer) = deliver(&client, &m, &body, Some(&signature(SECRET, now_secs(), &body))).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"], "webhooks_not_configured");
    assert!(answer["message"].as_str().unwrap().contains("--webhook-secret"));
    m.shutdown().await;
    let _ = provider.shutdown().await;
}

/// POSTs `body` as JSON: the status and the JSON answer.
async fn post_json(client: &Client, url: &str, body: Value) -> (u16, Value) {
    answer(client.post(url).json(&body)).await
}

/// GETs `url` (redirects not followed with this test's client): the status and the JSON.
async fn get_json(client: &Client, url: &str) -> (u16, Value) {
    answer(client.get(url)).await
}

/// Sends `request`: the status and the JSON answered.
async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = request.send().await.expect("the server answers");
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

/// A `checkout.session.completed` event as Stripe shapes it (the fields that matter).
fn session_completed(event_id: &str, session: &Value) -> String {
    json!({
        "id": event_id,
        "object": "event",
        "type": "checkout.session.completed",
        "data": {"object": session},
    })
    .to_string()
}

/// The checkout-session flow (`--flow checkout-session`): the storefront API opens a
/// Checkout Session for the order a load test names; the customer pays on the provider's
/// page and comes back to `GET /checkout/success`, which fulfils a paid session, as does
/// its `checkout.session.completed` (and not `payment_intent.succeeded`, in this flow).
/// Naive ships on each, idempotent once; in the default flow the success page only
/// redirects.
#[tokio::test]
async fn in_the_checkout_session_flow_the_success_page_and_the_completed_session_fulfil() {
    use fauxpay_merchant::checkout_flow::CheckoutFlow;
    let provider = provider("happy").await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (strategy, flow, shipped) in [
        (Strategy::Naive, CheckoutFlow::CheckoutSession, [1, 2, 3]),
        (Strategy::Idempotent, CheckoutFlow::CheckoutSession, [1, 1, 1]),
        (Strategy::Naive, CheckoutFlow::ServerConfirm, [0, 0, 0]),
    ] {
        let m = merchant(strategy, &provider.url(), &Backend::Memory, |c| {
            c.webhook_secret = Some(WebhookSecret::parse(SECRET).unwrap());
            c.flow = flow;
        })
        .await;
        let order = format!("cs-{}-{}", strategy.as_str(), flow.as_str());
        // A load test's order, amount and currency.
        let (status, opened) = post_json(
            &client,
            &format!("{}/api/checkout-sessions", m.url()),
            json!({"order_id": order, "amount": 1500, "currency": "eur"}),
        )
        .await;
        assert_eq!(status, 200, "{opened}");
        assert_eq!(opened["order"], order.as_str());
        let id = opened["id"].as_str().unwrap().to_string();
        let (_, row) = order_of(&client, &m, &order).await;
        assert_eq!(row["amount"], 1500, "{row}");
        // The customer pays on the Checkout page.
        let (_, paid) = answer(
            client
                .post(format!("{}/__fauxpay/checkout/sessions/{id}/pay", provider.url()))
                .form(&[("payment_method", "pm_card_visa"), ("email", "jenny@example.com")]),
        )
        .await;
        assert_eq!(paid["payment_status"], "paid", "{paid}");
        // Back on the shop, twice (a reload), then the session's webhook.
        for expected in &shipped[..2] {
            let back = client
                .get(format!("{}/checkout/success?session_id={id}", m.url()))
                .send()
                .await
                .unwrap();
            assert_eq!(back.status(), 303);
            assert_eq!(
                back.headers()["location"].to_str().unwrap(),
                format!("/done.html?session_id={id}&order={order}")
            );
            assert_eq!(fulfillments(&client, &m, &order).await, *expected, "{order}");
        }
        let (_, session) = answer(
            client
                .get(format!("{}/v1/checkout/sessions/{id}", provider.url()))
                .bearer_auth("sk_test_fauxpay_merchant"),
        )
        .await;
        let (status, answer) = signed(&client, &m, &session_completed("evt_cs_done", &session)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(fulfillments(&client, &m, &order).await, shipped[2], "{order}: {answer}");
        if flow == CheckoutFlow::CheckoutSession {
            // Its payment_intent.succeeded is not what this flow fulfils on.
            let pi = session["payment_intent"].as_str().unwrap();
            let (_, answer) = signed(&client, &m, &succeeded("evt_pi_done", pi, &order)).await;
            assert_eq!(answer["result"], "ignored", "{answer}");
            assert_eq!(fulfillments(&client, &m, &order).await, shipped[2]);
            let (_, row) = order_of(&client, &m, &order).await;
            assert_eq!(row["status"], "paid", "{row}");
        }
        // Mistakes name their field.
        for (body, param) in [
            (json!({"order_id": "no spaces"}), "order_id"),
            (json!({"order_id": "o-x", "amount": -1}), "amount"),
        ] {
            let (status, bad) = post_json(&client, &format!("{}/api/checkout-sessions", m.url()), body).await;
            assert_eq!(status, 400);
            assert_eq!(bad["param"], param, "{bad}");
        }
        let (status, bad) = get_json(&client, &format!("{}/checkout/success?session_id=pi_1", m.url())).await;
        assert_eq!((status, &bad["param"]), (400, &json!("session_id")), "{bad}");
        let (status, _) = get_json(
            &client,
            &format!("{}/checkout/success?session_id=cs_test_nope", m.url()),
        )
        .await;
        assert_eq!(status, 404);
        // The order keeps its price: another amount for it is refused, nothing opened.
        let (status, cheaper) = post_json(
            &client,
            &format!("{}/api/payment-intents", m.url()),
            json!({"order_id": order, "amount": 1, "currency": "eur"}),
        )
        .await;
        // As POST /checkout answers an order with another amount: 422 order_mismatch.
        assert_eq!(status, 422);
        assert_eq!(
            (cheaper["error"].as_str(), cheaper["order_id"].as_str()),
            (Some("order_mismatch"), Some(order.as_str()))
        );
        m.shutdown().await;
    }
    let _ = provider.shutdown().await;
}
