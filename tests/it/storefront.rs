//! The example storefront (`examples/storefront/`: a shop's pages written against
//! Stripe.js, and its Node server creating intents and sessions with the secret key) in
//! headless Chromium, against fauxpay serving both the API and its Stripe.js stand-in
//! (`/v3/`): the Payment Element pays with 4242, through a 3-D Secure challenge in the
//! stand-in's modal (passed, and failed), after a decline on the same page; a double
//! submit and a confirm whose answer is lost after the commit make one charge each, and
//! the page says what the ledger says; a Checkout redirect pays on fauxpay's page and comes
//! back; every paid order is fulfilled once by its verified webhook. The reference
//! merchants serve the same pages: under duplicated webhooks naive ships twice and
//! idempotent once.
//!
//! Without chromedriver or Node the tests say so on stderr and pass, except under `CI`,
//! where they fail.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, Locator};
use fauxpay_faults::{Profile, Rule, WebhookRule};
use fauxpay_merchant::webhook::WebhookSecret;
use fauxpay_merchant::{MerchantConfig, RunningMerchant, Strategy};
use fauxpay_testkit::provider::{with_profile, Harness};
use serde_json::Value;

use crate::browser::{browser, console_errors, driver, fill_and_pay, shoot, text};

/// The example storefront's server on a free port, stopped on drop.
struct Shop {
    child: Child,
    url: String,
    client: reqwest::Client,
}

impl Drop for Shop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Shop {
    /// Starts `node examples/storefront/server.mjs` against `provider`, waiting for its
    /// `storefront listening on URL` line; `None` (said) without Node.
    fn start(provider: &str) -> Option<Shop> {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/storefront/server.mjs");
        let child = Command::new("node")
            .arg(script)
            .env("FAUXPAY_URL", provider)
            .env("PORT", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                fauxpay_testkit::provider::missing_tool("the storefront tests", &format!("node: {e}"));
                return None;
            }
        };
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("storefront listening on ").map(str::to_string))
            .expect("the storefront starts");
        std::thread::spawn(move || lines.for_each(drop));
        Some(Shop {
            child,
            url,
            client: reqwest::Client::new(),
        })
    }

    /// What the shop knows of `order`: `{fulfilled, deliveries}`.
    async fn order(&self, order: &str) -> Value {
        self.client
            .get(format!("{}/api/orders/{order}", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// The provider's webhook deliveries, drained (every one acknowledged or given up).
async fn drained(h: &Harness) {
    let resp = h
        .client
        .get(h.url("/__fauxpay/webhooks/drain?timeout=30s"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// The page's status line once it reads something other than "Paying…".
async fn outcome(c: &Client) -> (String, String) {
    let wait = c.wait().at_most(Duration::from_secs(30));
    let element = wait
        .for_element(Locator::Css("#message[data-kind='ok'], #message[data-kind='error']"))
        .await
        .expect("the page says how the payment went");
    (
        element.attr("data-kind").await.unwrap().unwrap_or_default(),
        element.text().await.unwrap(),
    )
}

/// Opens the payment page, types `card` into the stand-in's element and submits.
async fn pay(c: &Client, shop: &Shop, card: &str) -> String {
    pay_at(c, &shop.url, card).await
}

/// [`pay`] on the storefront at `base`: the order's id.
async fn pay_at(c: &Client, base: &str, card: &str) -> String {
    c.goto(&format!("{base}/payment.html")).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("#submit:not([disabled])"))
        .await
        .expect("the element is ready");
    let order = text(c, "#order").await;
    type_card(c, card).await;
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    order
}

/// Types a card into the mounted element (number, expiry, CVC, postal code).
async fn type_card(c: &Client, card: &str) {
    for (field, value) in [
        ("number", card),
        ("expiry", "12 / 34"),
        ("cvc", "123"),
        ("postal", "10001"),
    ] {
        let input = c
            .find(Locator::Css(&format!(".fauxpay-input[data-field='{field}']")))
            .await
            .unwrap_or_else(|e| panic!("the element's {field} field: {e}"));
        input.clear().await.unwrap();
        input.send_keys(value).await.unwrap();
    }
}

/// Presses a button of the 3-D Secure page shown in the stand-in's modal.
async fn challenge(c: &Client, button: &str) {
    let frame = c
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("iframe.fauxpay-3ds-frame"))
        .await
        .expect("the 3-D Secure modal");
    frame.enter_frame().await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::XPath(&format!("//button[contains(., '{button}')]")))
        .await
        .expect("the challenge's buttons")
        .click()
        .await
        .unwrap();
    c.enter_parent_frame().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_storefront_pays_through_the_stripe_js_stand_in() {
    let Some(d) = driver() else { return };
    let h = Harness::default().await;
    let Some(shop) = Shop::start(&h.provider.url()) else {
        return;
    };
    let c = browser(&d).await;

    // 4242: paid on the page, fulfilled once by the verified webhook.
    let paid = pay(&c, &shop, "4242 4242 4242 4242").await;
    let (kind, said) = outcome(&c).await;
    assert_eq!(kind, "ok", "{said}");
    assert!(said.starts_with("Payment succeeded: pi_"), "{said}");
    shoot(&c, "storefront").await;
    let errors = console_errors(&c).await;
    assert!(errors.is_empty(), "{errors:?}");

    // A 3-D Secure card: challenged in the modal, completed, paid.
    let challenged = pay(&c, &shop, "4000 0027 6000 3184").await;
    challenge(&c, "Complete authentication").await;
    let (kind, said) = outcome(&c).await;
    assert_eq!(kind, "ok", "{said}");

    // A failed challenge: the error, and nothing charged.
    let failed = pay(&c, &shop, "4000 0027 6000 3184").await;
    challenge(&c, "Fail authentication").await;
    let (kind, said) = outcome(&c).await;
    assert_eq!(kind, "error");
    assert!(said.contains("failed authentication"), "{said}");

    // A decline: the message, and the form takes another card for the same order.
    let declined = pay(&c, &shop, "4000 0000 0000 0002").await;
    let (kind, said) = outcome(&c).await;
    assert_eq!((kind.as_str(), said.as_str()), ("error", "Your card was declined."));
    type_card(&c, "4242 4242 4242 4242").await;
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("#message[data-kind='ok']"))
        .await
        .expect("the second card pays");

    drained(&h).await;
    let ledger = h.ledger("").await;
    let charged: Vec<&str> = ledger.iter().map(|r| r["correlation_id"].as_str().unwrap()).collect();
    assert_eq!(charged, [paid.as_str(), challenged.as_str(), declined.as_str()]);
    // The browser confirmed with the publishable key; the 3-D Secure card was charged by
    // the authentication on fauxpay's challenge page.
    let keys: Vec<&str> = ledger.iter().map(|r| r["key_type"].as_str().unwrap()).collect();
    assert_eq!(keys, ["publishable", "checkout_page", "publishable"]);
    for order in [&paid, &challenged, &declined] {
        let seen = shop.order(order).await;
        assert_eq!(
            (&seen["fulfilled"], &seen["deliveries"]),
            (&Value::Bool(true), &Value::from(1)),
            "{order}: {seen}"
        );
    }
    assert_eq!(shop.order(&failed).await["fulfilled"], false);
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_double_submit_and_a_lost_confirm_answer_each_charge_once() {
    let Some(d) = driver() else { return };
    // The first answer to every confirm is lost after the commit.
    let profile = Profile::builder("lost-confirm")
        .seed(1)
        .rule(
            Rule::drop_response()
                .after_commit()
                .first_attempts(1)
                .method("POST")
                .path("/v1/payment_intents/*"),
        )
        .build()
        .unwrap();
    let h = Harness::start(with_profile(profile)).await;
    let Some(shop) = Shop::start(&h.provider.url()) else {
        return;
    };
    let c = browser(&d).await;

    // The confirm's answer never arrives: Stripe.js reports a connection error, the page
    // asks the intent, and says what the ledger says.
    let lost = pay(&c, &shop, "4242 4242 4242 4242").await;
    let (kind, said) = outcome(&c).await;
    assert_eq!(kind, "ok", "{said}");

    // Two submits at once (a double click the page did not stop): one charge.
    c.goto(&format!("{}/payment.html", shop.url)).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("#submit:not([disabled])"))
        .await
        .unwrap();
    let twice = text(&c, "#order").await;
    type_card(&c, "4242 4242 4242 4242").await;
    c.execute(
        "const f = document.getElementById('payment-form'); f.requestSubmit(); f.requestSubmit();",
        Vec::new(),
    )
    .await
    .unwrap();
    outcome(&c).await;

    drained(&h).await;
    let ledger = h.ledger("").await;
    let charged: Vec<&str> = ledger.iter().map(|r| r["correlation_id"].as_str().unwrap()).collect();
    assert_eq!(charged, [lost.as_str(), twice.as_str()], "one charge each");
    assert_eq!(h.summary().await["duplicate_group_count"], 0);
    for order in [&lost, &twice] {
        assert_eq!(shop.order(order).await["fulfilled"], true, "{order}");
    }
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_storefront_sends_the_customer_to_checkout_and_back() {
    let Some(d) = driver() else { return };
    let h = Harness::default().await;
    let Some(shop) = Shop::start(&h.provider.url()) else {
        return;
    };
    let c = browser(&d).await;
    c.goto(&shop.url).await.unwrap();
    c.find(Locator::Css("#checkout")).await.unwrap().click().await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("#email"))
        .await
        .expect("fauxpay's Checkout page");
    assert!(c
        .current_url()
        .await
        .unwrap()
        .path()
        .starts_with("/__fauxpay/checkout/cs_test_"));
    fill_and_pay(&c, "4242 4242 4242 4242").await;
    let (kind, said) = outcome(&c).await;
    assert_eq!(kind, "ok", "{said}");
    assert!(said.starts_with("Paid with Checkout: cs_test_"), "{said}");
    let order = said.rsplit("order ").next().unwrap().trim_end_matches(')').to_string();
    drained(&h).await;
    assert_eq!(shop.order(&order).await["fulfilled"], true);
    assert_eq!(h.ledger("").await.len(), 1);
    c.close().await.unwrap();
}

/// The reference merchants serve the same storefront (`fauxpay merchant`): a Payment
/// Element order and a Checkout order each, with every `payment_intent.succeeded`
/// delivered twice: naive ships each order twice, idempotent once.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_merchants_sell_through_the_storefront() {
    let Some(d) = driver() else { return };
    let profile = Profile::builder("every-success-twice")
        .seed(1)
        .webhook(WebhookRule::duplicate(2).event("payment_intent.succeeded"))
        .build()
        .unwrap();
    let h = Harness::start(with_profile(profile)).await;
    let c = browser(&d).await;
    for (strategy, shipped) in [(Strategy::Naive, 2), (Strategy::Idempotent, 1)] {
        // The merchant's webhook endpoint at the provider, and its secret.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let endpoint: Value = h
            .form(
                "/v1/webhook_endpoints",
                &format!("url={base}/webhooks/stripe&enabled_events[]=payment_intent.succeeded"),
                None,
            )
            .await
            .json()
            .await
            .unwrap();
        let mut config = MerchantConfig::new(strategy, h.provider.url());
        config.webhook_secret = Some(WebhookSecret::parse(endpoint["secret"].as_str().unwrap()).unwrap());
        let merchant = RunningMerchant::start_on(config, listener)
            .await
            .expect("the merchant starts");

        let element = pay_at(&c, &base, "4242 4242 4242 4242").await;
        let (kind, said) = outcome(&c).await;
        assert_eq!(kind, "ok", "{strategy:?}: {said}");

        c.goto(&base).await.unwrap();
        c.find(Locator::Css("#checkout")).await.unwrap().click().await.unwrap();
        fill_and_pay(&c, "4242 4242 4242 4242").await;
        let (kind, said) = outcome(&c).await;
        assert_eq!(kind, "ok", "{strategy:?}: {said}");

        c.goto(&base).await.unwrap();
        c.find(Locator::Css("#checkout")).await.unwrap().click().await.unwrap();
        let email = c
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css("#email"))
            .await
            .expect("fauxpay's Checkout page");
        email.send_keys("jenny@example.com").await.unwrap();
        c.find(Locator::Css("#card"))
            .await
            .unwrap()
            .send_keys("4242 4242 4242 4242")
            .await
            .unwrap();
        c.find(Locator::Css("#pay")).await.unwrap().click().await.unwrap();
        let (kind, said) = outcome(&c).await;
        assert_eq!(kind, "ok", "{strategy:?}: {said}");
        let checkout = said.rsplit("order ").next().unwrap().trim_end_matches(')').to_string();

        drained(&h).await;
        for order in [&element, &checkout] {
            let seen: Value = reqwest::get(format!("{base}/orders/{order}"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(seen["fulfillments"], shipped, "{strategy:?} {order}: {seen}");
            if strategy == Strategy::Idempotent {
                assert_eq!(seen["status"], "paid", "{order}: {seen}");
            }
        }
        // The next merchant's events are not this one's.
        let gone = h
            .delete(&format!("/v1/webhook_endpoints/{}", endpoint["id"].as_str().unwrap()))
            .send()
            .await
            .unwrap();
        assert_eq!(gone.status(), 200);
        merchant.shutdown().await;
    }
    c.close().await.unwrap();
}
