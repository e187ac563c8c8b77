//! Bad input gets a clear Stripe-shaped error naming the parameter, and nothing a
//! client sends can make the provider panic or lose state.

use fauxpay_testkit::provider as common;

use common::{charge_body, json, Harness};

#[tokio::test]
async fn oversized_bodies_are_413() {
    let h = Harness::default().await;
    let body = format!("amount=100&currency=usd&description={}", "x".repeat(70 * 1024));
    let (status, err) = json(h.form("/v1/payment_intents", &body, None).await).await;
    assert_eq!(status, 413);
    assert_eq!(err["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn unsupported_content_type_is_415() {
    let h = Harness::default().await;
    let r = h
        .post("/v1/payment_intents")
        .header("content-type", "text/xml")
        .body("<a/>")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
}

#[tokio::test]
async fn malformed_bodies_and_wrong_types_name_the_param() {
    let h = Harness::default().await;
    let r = h
        .post("/v1/payment_intents")
        .header("content-type", "application/json")
        .body("{\"amount\": 1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let cases = [
        ("currency=usd", "amount"),
        ("amount=100", "currency"),
        ("amount=-5&currency=usd", "amount"),
        ("amount=1.5&currency=usd", "amount"),
        ("amount=100&currency=USD", "currency"),
        ("amount=100&currency=usd&confirm=yes", "confirm"),
        ("amount=100000000&currency=usd", "amount"),
        ("amount=10&currency=usd", "amount"),
        ("amount=100&currency=usd&metadata=notahash", "metadata"),
        (
            "amount=100&currency=usd&payment_method=pm_card_unknown&confirm=true",
            "payment_method",
        ),
        ("amount=100&currency=usd&metadata[a=1", "metadata[a"),
    ];
    for (body, param) in cases {
        let (status, err) = json(h.form("/v1/payment_intents", body, None).await).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["error"]["type"], "invalid_request_error", "{body}");
        assert_eq!(err["error"]["param"], param, "{body}");
    }
    let json_wrong_type = serde_json::json!({"amount": "lots", "currency": "usd"});
    let (status, err) = json(
        h.post("/v1/payment_intents")
            .json(&json_wrong_type)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(err["error"]["param"], "amount");
}

#[tokio::test]
async fn long_keys_unknown_routes_wrong_methods_and_unknown_ids() {
    let h = Harness::default().await;
    let (status, err) = json(
        h.form(
            "/v1/payment_intents",
            &charge_body("k", "pm_card_visa"),
            Some(&"k".repeat(256)),
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(err["error"]["param"], "Idempotency-Key");
    let (status, err) = json(h.get("/v1/subscriptions").send().await.unwrap()).await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["type"], "invalid_request_error");
    let (status, err) = json(
        h.client
            .delete(h.url("/v1/payment_intents"))
            .bearer_auth(common::KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 405);
    assert!(err["error"]["message"].as_str().unwrap().contains("DELETE"));
    let (status, err) = json(h.get("/v1/payment_intents/pi_nope").send().await.unwrap()).await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["code"], "resource_missing");
    let (status, _) = json(
        h.form(
            "/v1/payment_intents/pi_nope/confirm",
            "payment_method=pm_card_visa",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(status, 404);
}

/// A deterministic generator of hostile inputs (no external fuzzer needed in CI).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() as usize) % xs.len()]
    }
}

#[tokio::test]
async fn hostile_input_never_panics_the_server() {
    let h = Harness::default().await;
    let paths = [
        "/v1/payment_intents",
        "/v1/payment_intents/pi_x/confirm",
        "/v1/payment_intents/pi_x/capture",
        "/v1/payment_intents/pi_x/cancel",
        "/v1/charges",
        "/v1/charges/ch_x/capture",
        "/v1/refunds",
        "/v1/payment_intents/search",
    ];
    let names = [
        "amount",
        "currency",
        "confirm",
        "metadata[order_id]",
        "metadata[]",
        "payment_method",
        "payment_method_data[card][number]",
        "source",
        "source[number]",
        "capture",
        "capture_method",
        "charge",
        "payment_intent",
        "limit",
        "query",
        "a[0][1][2]",
        "[]",
        "%ff",
        "amount_to_capture",
        "metadata[x][y]",
    ];
    let values = [
        "",
        "usd",
        "-1",
        "18446744073709551616",
        "99999999",
        "true",
        "pm_card_visa",
        "tok_visa",
        "4242424242424242",
        "%00",
        "%ff%fe",
        "'",
        "metadata['a']:'b'",
        "\u{1F4B3}",
        "null",
        "{}",
    ];
    let mut rng = Lcg(42);
    // Make a real payment so ids exist for refund and capture paths.
    h.form("/v1/payment_intents", &charge_body("f", "pm_card_visa"), None)
        .await;
    for i in 0..400 {
        let n = 1 + rng.next() % 6;
        let body: Vec<String> = (0..n)
            .map(|_| format!("{}={}", rng.pick(&names), rng.pick(&values)))
            .collect();
        let body = body.join("&");
        let path = rng.pick(&paths);
        let req = if rng.next() % 4 == 0 {
            h.post(path).header("content-type", "application/json").body(format!(
                "{{\"{}\": {}}}",
                rng.pick(&names),
                rng.pick(&["1", "\"x\"", "[1,2]", "{\"a\":{}}", "-0.5", "true", "null"])
            ))
        } else if path.ends_with("search") {
            h.get(&format!("{path}?{body}"))
        } else {
            h.post(path)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body.clone())
        };
        let req = if i % 3 == 0 {
            req.header("Idempotency-Key", format!("fuzz-{}", i % 17))
        } else {
            req
        };
        let resp = req.send().await.expect("the server answers");
        let status = resp.status().as_u16();
        assert!(status < 500, "{path} {body} gave {status}");
        let _: serde_json::Value = resp.json().await.expect("a JSON body");
    }
    let health = h.client.get(h.url("/__fauxpay/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
}
