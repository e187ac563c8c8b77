//! Checkout Sessions, products, prices and publishable keys over real sockets: a
//! session made from a product's price, paid by the scripted customer and on the hosted
//! page (read and posted as a browser would, redirects included), at most once under
//! double clicks, concurrent pays, retries after a lost answer and declines; 3-D Secure
//! through the challenge; expiry by the expire call and by the provider's clock; the
//! ledger's record of the session and the key type; correlation from
//! `checkout.client_reference_id`; and what a publishable key may do.

use fauxpay_testkit::provider as common;
use fauxpay_testkit::provider::{get_json as get, post_json as post};

use common::{json, Harness};
use fauxpay_faults::{Fault, When};
use fauxpay_provider::{Config, CorrelationSource};
use reqwest::redirect::Policy;
use serde_json::Value;

const PK: &str = "pk_test_fauxpay";

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id: {v}")).to_string()
}

/// A product with a 19.99 USD default price: the price's id.
async fn price(h: &Harness) -> String {
    let (status, product) = post(
        h,
        "/v1/products",
        "name=T-shirt&default_price_data[currency]=usd&default_price_data[unit_amount]=1999",
    )
    .await;
    assert_eq!(status, 200, "{product}");
    product["default_price"].as_str().unwrap().to_string()
}

/// A session for two of `price`, for order `order`: its JSON.
async fn session(h: &Harness, price: &str, order: &str) -> Value {
    let (status, s) = post(
        h,
        "/v1/checkout/sessions",
        &format!(
            "mode=payment&line_items[0][price]={price}&line_items[0][quantity]=2\
             &success_url=https://shop.example/done?session_id={{CHECKOUT_SESSION_ID}}\
             &cancel_url=https://shop.example/cart&metadata[order_id]={order}&client_reference_id=ref-{order}"
        ),
    )
    .await;
    assert_eq!(status, 200, "{s}");
    s
}

/// The scripted customer's pay (no API key, as a browser's).
async fn pay(h: &Harness, session: &str, body: &str) -> (u16, Value) {
    let resp = h
        .client
        .post(h.url(&format!("/__fauxpay/checkout/sessions/{session}/pay")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    json(resp).await
}

async fn event_types(h: &Harness) -> Vec<String> {
    let (_, events) = get(h, "/v1/events?limit=100").await;
    let mut types: Vec<String> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    types.reverse();
    types
}

/// A client like a browser's: no API key, redirects not followed (so they can be read).
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

#[tokio::test]
async fn a_session_is_made_from_prices_paid_once_and_completed_after_the_intents_events() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let s = session(&h, &price, "order-1").await;
    let sid = id(&s);
    assert!(sid.starts_with("cs_test_"), "{sid}");
    assert_eq!(
        (s["status"].as_str(), s["payment_status"].as_str()),
        (Some("open"), Some("unpaid"))
    );
    assert_eq!(
        (s["amount_subtotal"].as_u64(), s["amount_total"].as_u64()),
        (Some(3998), Some(3998))
    );
    assert_eq!(s["payment_intent"], Value::Null, "no intent until the customer pays");
    assert_eq!(
        s["url"].as_str().unwrap(),
        h.url(&format!("/__fauxpay/checkout/{sid}")),
        "the hosted page, at the address the client reached"
    );
    let (_, items) = get(&h, &format!("/v1/checkout/sessions/{sid}/line_items")).await;
    assert_eq!(items["data"][0]["object"], "item");
    assert_eq!(items["data"][0]["description"], "T-shirt");
    assert_eq!(items["data"][0]["amount_total"], 3998);
    assert_eq!(items["data"][0]["price"]["id"], price.as_str());

    let (status, e) = pay(&h, &sid, "payment_method=pm_card_visa").await;
    assert_eq!((status, e["error"]["param"].as_str()), (400, Some("email")), "{e}");
    let (status, paid) = pay(&h, &sid, "payment_method=pm_card_visa&email=jenny@example.com").await;
    assert_eq!(status, 200, "{paid}");
    assert_eq!(
        (paid["status"].as_str(), paid["payment_status"].as_str()),
        (Some("complete"), Some("paid"))
    );
    assert_eq!(paid["payment_intent"]["status"], "succeeded");
    assert_eq!(paid["payment_intent"]["amount"], 3998);
    assert!(
        paid["payment_intent"].get("metadata").is_none(),
        "the pay needs no key: it shows the intent as a browser may see it"
    );
    assert_eq!(paid["customer_details"]["email"], "jenny@example.com");
    assert_eq!(paid["url"], Value::Null, "no page once paid");

    let (status, again) = pay(&h, &sid, "payment_method=pm_card_visa&email=jenny@example.com").await;
    assert_eq!(status, 400, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already been paid"),
        "{again}"
    );

    let ledger = h.ledger("").await;
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert_eq!(ledger[0]["checkout_session"], sid.as_str());
    assert_eq!(ledger[0]["correlation_id"], "order-1");
    assert_eq!(ledger[0]["key_type"], "checkout_page");

    let types = event_types(&h).await;
    let completed = types.iter().position(|t| t == "checkout.session.completed").unwrap();
    let succeeded = types.iter().position(|t| t == "payment_intent.succeeded").unwrap();
    assert!(succeeded < completed, "{types:?}");
    assert_eq!(types.iter().filter(|t| *t == "checkout.session.completed").count(), 1);

    let (_, expanded) = get(
        &h,
        &format!("/v1/checkout/sessions/{sid}?expand[]=payment_intent&expand[]=line_items"),
    )
    .await;
    assert_eq!(
        expanded["payment_intent"]["latest_charge"]
            .as_str()
            .map(|c| c.starts_with("ch_")),
        Some(true)
    );
    assert_eq!(expanded["line_items"]["data"][0]["quantity"], 2);
    let pi = paid["payment_intent"]["id"].as_str().unwrap();
    let (_, listed) = get(&h, &format!("/v1/checkout/sessions?payment_intent={pi}")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);

    // The dashboard shows sessions: counted on the overview, and the session's payment
    // page (reached by the session's id too) names it; the request log has its pay.
    let page = |path: String| {
        let b = browser();
        let url = h.url(&path);
        async move { b.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let overview = page("/__fauxpay/".into()).await;
    assert!(overview.contains("checkout sessions paid"), "{overview}");
    let payment = page(format!("/__fauxpay/ui/payments/{sid}")).await;
    assert!(payment.contains(&sid) && payment.contains(pi), "{payment}");
    let requests = h.admin_json("/__fauxpay/requests?limit=100").await;
    let pays = requests["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(|p| p.ends_with(&format!("{sid}/pay"))))
        .count();
    assert_eq!(pays, 3, "{requests}");
}

#[tokio::test]
async fn concurrent_pays_of_one_session_make_one_charge() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-race").await);
    let pays = (0..8).map(|_| pay(&h, &sid, "payment_method=pm_card_visa&email=a@b.co"));
    let answers = futures_util::future::join_all(pays).await;
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(ok, 1, "{answers:?}");
    assert!(answers.iter().all(|(s, _)| matches!(s, 200 | 400)), "{answers:?}");
    assert_eq!(h.ledger("").await.len(), 1, "one charge");
    assert_eq!(h.summary().await["duplicate_group_count"], 0);
}

#[tokio::test]
async fn a_decline_leaves_the_session_open_and_the_next_card_pays_the_same_intent() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-decline").await);
    let (status, e) = pay(&h, &sid, "payment_method=4000 0000 0000 0002&email=a@b.co").await;
    assert_eq!(status, 402, "{e}");
    assert_eq!(e["error"]["decline_code"], "generic_decline");
    let (_, open) = get(&h, &format!("/v1/checkout/sessions/{sid}")).await;
    assert_eq!(open["status"], "open");
    let first_intent = open["payment_intent"].as_str().unwrap().to_string();
    let (status, paid) = pay(&h, &sid, "payment_method=4242424242424242&email=a@b.co").await;
    assert_eq!(status, 200, "{paid}");
    assert_eq!(paid["payment_intent"]["id"], first_intent.as_str(), "the same intent");
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn a_3ds_card_waits_for_its_challenge_then_the_session_completes() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-3ds").await);
    let (status, waiting) = pay(&h, &sid, "payment_method=pm_card_authenticationRequired&email=a@b.co").await;
    assert_eq!(status, 200, "{waiting}");
    assert_eq!(waiting["status"], "open");
    assert_eq!(waiting["payment_intent"]["status"], "requires_action");
    let pi = waiting["payment_intent"]["id"].as_str().unwrap().to_string();
    assert!(h.ledger("").await.is_empty());
    // The customer left the challenge and pays again: sent back to it, nothing confirmed twice.
    let (status, again) = pay(&h, &sid, "payment_method=pm_card_visa&email=a@b.co").await;
    assert_eq!(
        (status, again["payment_intent"]["status"].as_str()),
        (200, Some("requires_action")),
        "{again}"
    );
    assert_eq!(again["payment_intent"]["id"], pi.as_str());
    let (status, authed) = post(
        &h,
        &format!("/__fauxpay/payment_intents/{pi}/authenticate"),
        "outcome=succeed",
    )
    .await;
    assert_eq!((status, authed["status"].as_str()), (200, Some("succeeded")));
    let (_, done) = get(&h, &format!("/v1/checkout/sessions/{sid}")).await;
    assert_eq!(
        (done["status"].as_str(), done["payment_status"].as_str()),
        (Some("complete"), Some("paid"))
    );
    assert_eq!(done["customer_details"]["email"], "a@b.co", "kept from the pay");
    let ledger = h.ledger("").await;
    assert_eq!(
        (ledger.len(), ledger[0]["checkout_session"].as_str()),
        (1, Some(sid.as_str()))
    );
    assert!(event_types(&h)
        .await
        .contains(&"checkout.session.completed".to_string()));
}

#[tokio::test]
async fn the_hosted_page_takes_a_browser_from_the_card_to_the_success_url() {
    let h = Harness::default().await;
    let b = browser();
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-page").await);
    let page_url = h.url(&format!("/__fauxpay/checkout/{sid}"));
    let page = b.get(&page_url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let html = page.text().await.unwrap();
    for needle in [
        "T-shirt",
        "× 2",
        "39.98 USD",
        "4242 4242 4242 4242",
        "Cancel and return to the shop",
        "name=\"email\"",
    ] {
        assert!(html.contains(needle), "{needle} in {html}");
    }
    assert!(!html.contains("<script"), "no scripts");
    let action = format!("/__fauxpay/checkout/sessions/{sid}/pay");
    assert!(html.contains(&action));

    let declined = b
        .post(h.url(&action))
        .form(&[
            ("redirect", "true"),
            ("email", "a@b.co"),
            ("payment_method", "4000 0000 0000 0002"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(declined.status(), 402);
    let html = declined.text().await.unwrap();
    assert!(html.contains("Your card was declined."), "{html}");

    let paid = b
        .post(h.url(&action))
        .form(&[
            ("redirect", "true"),
            ("email", "a@b.co"),
            ("payment_method", "4242 4242 4242 4242"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 303);
    assert_eq!(
        paid.headers()["location"],
        format!("https://shop.example/done?session_id={sid}").as_str()
    );
    let after = b.get(&page_url).send().await.unwrap().text().await.unwrap();
    assert!(after.contains("already paid"), "{after}");
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn the_hosted_page_sends_a_3ds_card_through_the_challenge_and_back() {
    let h = Harness::default().await;
    let b = browser();
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-page-3ds").await);
    let to_challenge = b
        .post(h.url(&format!("/__fauxpay/checkout/sessions/{sid}/pay")))
        .form(&[
            ("redirect", "true"),
            ("email", "a@b.co"),
            ("payment_method", "4000 0027 6000 3184"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(to_challenge.status(), 303);
    let challenge = to_challenge.headers()["location"].to_str().unwrap().to_string();
    assert!(challenge.contains("/__fauxpay/3ds/pi_"), "{challenge}");
    let pi = challenge.rsplit('/').next().unwrap().to_string();
    let back = b
        .post(h.url(&format!("/__fauxpay/payment_intents/{pi}/authenticate")))
        .form(&[("outcome", "succeed"), ("redirect", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 303);
    let back = back.headers()["location"].to_str().unwrap().to_string();
    assert!(
        back.starts_with(&h.url(&format!("/__fauxpay/checkout/{sid}?"))),
        "{back}"
    );
    let done = b.get(&back).send().await.unwrap();
    assert_eq!(done.status(), 303);
    assert_eq!(
        done.headers()["location"],
        format!("https://shop.example/done?session_id={sid}").as_str()
    );
}

#[tokio::test]
async fn a_lost_answer_then_the_customers_retry_makes_one_charge() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-lost").await);
    let path = format!("/__fauxpay/checkout/sessions/{sid}/pay");
    let body = "payment_method=pm_card_visa&email=a@b.co";
    let lost = h
        .client
        .post(h.url(&path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("Idempotency-Key", "pay-1")
        .header("Fauxpay-Fault", Fault::drop_response(When::AfterCommit).header_value())
        .body(body)
        .send()
        .await;
    assert!(lost.is_err(), "the answer was dropped");
    let retried = h
        .client
        .post(h.url(&path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("Idempotency-Key", "pay-1")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(retried.headers()["idempotent-replayed"], "true");
    let (status, replayed) = json(retried).await;
    assert_eq!((status, replayed["status"].as_str()), (200, Some("complete")));
    let (status, _) = pay(&h, &sid, body).await;
    assert_eq!(status, 400, "a retry without the key finds the session paid");
    assert_eq!(h.ledger("").await.len(), 1);
}

#[tokio::test]
async fn a_retried_create_with_a_new_key_makes_a_second_session_and_paying_both_is_a_duplicate() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let first = id(&session(&h, &price, "order-twice").await);
    let second = id(&session(&h, &price, "order-twice").await);
    assert_ne!(first, second);
    for s in [&first, &second] {
        assert_eq!(pay(&h, s, "payment_method=pm_card_visa&email=a@b.co").await.0, 200);
    }
    let summary = h.summary().await;
    assert_eq!(summary["duplicate_group_count"], 1, "{summary}");
    let ledger = h.ledger("").await;
    let sessions: std::collections::BTreeSet<&str> =
        ledger.iter().map(|r| r["checkout_session"].as_str().unwrap()).collect();
    assert_eq!(sessions.len(), 2, "the ledger says which session each charge came from");
}

#[tokio::test]
async fn correlation_can_come_from_the_sessions_client_reference_id() {
    let h = Harness::start(Config {
        correlate: CorrelationSource::parse("checkout.client_reference_id").unwrap(),
        ..Config::default()
    })
    .await;
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "o7").await);
    assert_eq!(pay(&h, &sid, "payment_method=pm_card_visa&email=a@b.co").await.0, 200);
    assert_eq!(h.ledger("").await[0]["correlation_id"], "ref-o7");
}

#[tokio::test]
async fn sessions_expire_on_request_or_when_the_providers_clock_passes_expires_at() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let sid = id(&session(&h, &price, "order-x").await);
    let (status, expired) = post(&h, &format!("/v1/checkout/sessions/{sid}/expire"), "").await;
    assert_eq!((status, expired["status"].as_str()), (200, Some("expired")));
    let (status, e) = post(&h, &format!("/v1/checkout/sessions/{sid}/expire"), "").await;
    assert_eq!(status, 400, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("status of expired"));
    let (status, e) = pay(&h, &sid, "payment_method=pm_card_visa&email=a@b.co").await;
    assert_eq!(status, 400, "{e}");
    let page = browser()
        .get(h.url(&format!("/__fauxpay/checkout/{sid}")))
        .send()
        .await
        .unwrap();
    assert!(page.text().await.unwrap().contains("has expired"));

    // Expiry cancels a payment the customer had not finished: the challenge can no longer charge.
    let left = id(&session(&h, &price, "order-left").await);
    let (_, waiting) = pay(&h, &left, "payment_method=pm_card_authenticationRequired&email=a@b.co").await;
    let pi = waiting["payment_intent"]["id"].as_str().unwrap().to_string();
    post(&h, &format!("/v1/checkout/sessions/{left}/expire"), "").await;
    let (status, e) = post(
        &h,
        &format!("/__fauxpay/payment_intents/{pi}/authenticate"),
        "outcome=succeed",
    )
    .await;
    assert_eq!(status, 400, "{e}");
    let (_, canceled) = get(&h, &format!("/v1/payment_intents/{pi}")).await;
    assert_eq!(canceled["status"], "canceled");

    let soon = id(&session(&h, &price, "order-y").await);
    let moved = h
        .client
        .post(h.url("/__fauxpay/clock"))
        .form(&[("advance", "25h")])
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 200);
    let (_, lapsed) = get(&h, &format!("/v1/checkout/sessions/{soon}")).await;
    assert_eq!(lapsed["status"], "expired", "expired when the clock passed expires_at");
    // A session made after the clock moved lives its own life from then on.
    let later = id(&session(&h, &price, "order-z").await);
    h.client
        .post(h.url("/__fauxpay/clock"))
        .form(&[("advance", "1s")])
        .send()
        .await
        .unwrap();
    assert_eq!(
        get(&h, &format!("/v1/checkout/sessions/{later}")).await.1["status"],
        "open"
    );
    let types = event_types(&h).await;
    assert_eq!(
        types.iter().filter(|t| *t == "checkout.session.expired").count(),
        3,
        "{types:?}"
    );
    assert!(h.ledger("").await.is_empty());
}

#[tokio::test]
async fn bad_sessions_get_stripes_errors_naming_the_parameter() {
    let h = Harness::default().await;
    let price = price(&h).await;
    let (_, recurring) = post(
        &h,
        "/v1/prices",
        "currency=usd&unit_amount=500&product_data[name]=Plan&recurring[interval]=month",
    )
    .await;
    let recurring = id(&recurring);
    let ok = "success_url=https://s.example/ok&mode=payment";
    for (body, param) in [
        (format!("{ok}&line_items[0][price]=price_nope&line_items[0][quantity]=1"), "line_items[0][price]"),
        (format!("{ok}&line_items[0][price]={price}"), "line_items[0][quantity]"),
        (format!("{ok}&line_items[0][price]={recurring}&line_items[0][quantity]=1"), "line_items[0][price]"),
        (format!("{ok}&line_items[0][price_data][currency]=usd&line_items[0][price_data][product_data][name]=x&line_items[0][quantity]=1"), "line_items[0][price_data][unit_amount]"),
        (format!("mode=payment&success_url=javascript:alert(1)&line_items[0][price]={price}&line_items[0][quantity]=1"), "success_url"),
        (format!("{ok}&line_items[0][price]={price}&line_items[0][quantity]=1&expires_at=1"), "expires_at"),
        (format!("{ok}&line_items[0][price]={price}&line_items[0][quantity]=1&payment_method_types[]=ideal"), "payment_method_types"),
        (format!("{ok}&line_items[0][price]={price}&line_items[0][quantity]=1&ui_mode=embedded"), "ui_mode"),
        (format!("{ok}&line_items[0][price]={price}&line_items[0][quantity]=1&ui_mode=pirate"), "ui_mode"),
        (format!("success_url=https://s.example/ok&mode=subscription&line_items[0][price]={recurring}&line_items[0][quantity]=1"), "mode"),
        (ok.to_string(), "line_items"),
    ] {
        let (status, e) = post(&h, "/v1/checkout/sessions", &body).await;
        assert_eq!((status, e["error"]["param"].as_str()), (400, Some(param)), "{body}: {e}");
    }
    let (status, hosted) = post(
        &h,
        "/v1/checkout/sessions",
        &format!("{ok}&line_items[0][price]={price}&line_items[0][quantity]=1&ui_mode=hosted"),
    )
    .await;
    assert_eq!(status, 200, "{hosted}");
    // A refused create leaves nothing behind (its price_data made no price or product).
    let count = |list: Value| list["data"].as_array().unwrap().len();
    let (prices, products) = (
        count(get(&h, "/v1/prices?active=false&limit=100").await.1),
        count(get(&h, "/v1/products?limit=100").await.1),
    );
    let (status, _) = post(
        &h,
        "/v1/checkout/sessions",
        &format!("{ok}&line_items[0][price_data][currency]=usd&line_items[0][price_data][unit_amount]=300&line_items[0][price_data][product_data][name]=x&line_items[0][quantity]=1&line_items[1][price]=price_nope&line_items[1][quantity]=1"),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = post(
        &h,
        "/v1/prices",
        "currency=usd&unit_amount=5&product_data[name]=y&lookup_key=k1",
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post(
        &h,
        "/v1/prices",
        "currency=usd&unit_amount=5&product_data[name]=z&lookup_key=k1",
    )
    .await;
    assert_eq!(status, 400, "the lookup key is taken");
    assert_eq!(count(get(&h, "/v1/prices?active=false&limit=100").await.1), prices);
    assert_eq!(
        count(get(&h, "/v1/products?limit=100").await.1),
        products + 1,
        "only the accepted price's product"
    );
    let (status, e) = get(&h, "/v1/checkout/sessions/cs_test_nope").await;
    assert_eq!((status, e["error"]["code"].as_str()), (404, Some("resource_missing")));
}

#[tokio::test]
async fn a_publishable_key_confirms_with_the_client_secret_and_is_refused_elsewhere() {
    let h = Harness::default().await;
    let (_, pi) = post(
        &h,
        "/v1/payment_intents",
        "amount=1500&currency=usd&metadata[order_id]=pk-1",
    )
    .await;
    let pi_id = id(&pi);
    let secret = pi["client_secret"].as_str().unwrap().to_string();
    let pk = |method: reqwest::Method, path: &str| h.client.request(method, h.url(path)).bearer_auth(PK);

    let refused = pk(reqwest::Method::POST, "/v1/payment_intents")
        .form(&[("amount", "100"), ("currency", "usd")])
        .send()
        .await
        .unwrap();
    let (status, e) = json(refused).await;
    assert_eq!(status, 403, "{e}");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("This API call cannot be made with a publishable API key."));
    assert_eq!(
        json(pk(reqwest::Method::GET, "/v1/charges").send().await.unwrap())
            .await
            .0,
        403
    );

    let (status, pm) = json(
        pk(reqwest::Method::POST, "/v1/payment_methods")
            .form(&[("type", "card"), ("card[token]", "tok_visa")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{pm}");

    let (status, e) = json(
        pk(reqwest::Method::GET, &format!("/v1/payment_intents/{pi_id}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (400, Some("client_secret")),
        "{e}"
    );
    let (status, seen) = json(
        pk(
            reqwest::Method::GET,
            &format!("/v1/payment_intents/{pi_id}?client_secret={secret}"),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{seen}");
    assert!(
        seen.get("metadata").is_none(),
        "the merchant's metadata is not shown to the browser: {seen}"
    );
    let (status, e) = json(
        pk(reqwest::Method::POST, &format!("/v1/payment_intents/{pi_id}/confirm"))
            .form(&[("payment_method", id(&pm).as_str()), ("client_secret", "pi_x_secret_y")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, e["error"]["param"].as_str()), (400, Some("client_secret")));
    let (status, confirmed) = json(
        pk(reqwest::Method::POST, &format!("/v1/payment_intents/{pi_id}/confirm"))
            .form(&[("payment_method", id(&pm).as_str()), ("client_secret", secret.as_str())])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, confirmed["status"].as_str()),
        (200, Some("succeeded")),
        "{confirmed}"
    );
    let ledger = h.ledger("").await;
    assert_eq!(
        (ledger[0]["key_type"].as_str(), ledger[0]["correlation_id"].as_str()),
        (Some("publishable"), Some("pk-1"))
    );
    let live = h
        .client
        .get(h.url("/v1/payment_intents"))
        .bearer_auth("pk_live_nope")
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 401);
}
