//! A provider with something to show on every dashboard page (shared by
//! the provider's tests/it/dashboard.rs and the binary's tests/it/browser.rs): paid orders, an order charged twice (the
//! first answer dropped after the commit, the retry under a new key), a 503 injected
//! before the commit, a decline, and metadata and keys that try to inject HTML.

pub use crate::provider::Harness;

/// Metadata that would run a script if the dashboard did not escape it.
pub const HOSTILE: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";

pub struct Seeded {
    pub harness: Harness,
    /// The order charged twice.
    pub order: &'static str,
    /// Its two charges, oldest first.
    pub charges: Vec<String>,
    /// The payment intent with the hostile metadata.
    pub hostile_intent: String,
}

async fn pay(
    h: &Harness,
    order: &str,
    key: &str,
    extra: &str,
    fault: Option<&str>,
) -> reqwest::Result<reqwest::Response> {
    let mut rb = h
        .post("/v1/payment_intents")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("Idempotency-Key", key)
        .body(format!(
            "amount=2500&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}{extra}"
        ));
    if let Some(f) = fault {
        rb = rb.header("Fauxpay-Fault", f);
    }
    rb.send().await
}

pub async fn seed(config: fauxpay_provider::Config) -> Seeded {
    let harness = Harness::start(config).await;
    let h = &harness;
    // A paid order whose metadata is hostile.
    let hostile = pay(
        h,
        "order-hostile",
        "key-hostile",
        &format!("&metadata[note]={}", urlencode(HOSTILE)),
        None,
    )
    .await
    .unwrap();
    assert_eq!(hostile.status(), 200);
    let hostile_intent = hostile.json::<serde_json::Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The double charge: the answer to the first is dropped after the commit...
    let lost = pay(
        h,
        "order-twice",
        "key-first",
        "",
        Some("drop_response; when=after_commit"),
    )
    .await;
    assert!(lost.is_err(), "the connection closes without an answer");
    // ... and the client retries with a new key.
    let retry = pay(h, "order-twice", "key-second", "", None).await.unwrap();
    assert_eq!(retry.status(), 200);
    // A 503 before the commit (nothing charged), then a success with the same key.
    let failed = pay(h, "order-503", "key-503", "", Some("error; status=503"))
        .await
        .unwrap();
    assert_eq!(failed.status(), 503);
    assert_eq!(pay(h, "order-503", "key-503", "", None).await.unwrap().status(), 200);
    // A decline.
    let declined = h
        .post("/v1/payment_intents")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("amount=900&currency=usd&confirm=true&payment_method=pm_card_chargeDeclined&metadata[order_id]=order-declined")
        .send()
        .await
        .unwrap();
    assert_eq!(declined.status(), 402);
    let ledger = h.ledger("correlation_prefix=order-twice").await;
    let charges = ledger.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    Seeded {
        harness,
        order: "order-twice",
        charges,
        hostile_intent,
    }
}

pub fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
