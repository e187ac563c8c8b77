//! The dashboard over HTTP (the browser's view is tests/it/browser.rs): every page answers
//! HTML with what a person looks for, escapes what requests put there, changes the
//! provider only through its forms, and honours `--admin-token`.

use fauxpay_testkit::dashboard as dashboard_common;

use dashboard_common::{seed, urlencode, HOSTILE};
use fauxpay_provider::Config;
use reqwest::{redirect, Client, StatusCode};

async fn page(client: &Client, url: &str) -> (StatusCode, String, reqwest::header::HeaderMap) {
    let resp = client.get(url).send().await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    (status, resp.text().await.unwrap(), headers)
}

/// POSTs a dashboard form (as the browser would) and returns the answer.
async fn post_form(client: &Client, url: &str, form: &[(&str, &str)]) -> reqwest::Response {
    client.post(url).form(form).send().await.unwrap()
}

fn no_redirects() -> Client {
    Client::builder().redirect(redirect::Policy::none()).build().unwrap()
}

#[tokio::test]
async fn every_page_shows_what_happened_and_escapes_what_requests_sent() {
    let s = seed(Config::default()).await;
    let h = &s.harness;
    let client = Client::new();

    let (status, overview, headers) = page(&client, &h.url("/__fauxpay/")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'sha256-"), "{csp}");
    assert!(overview.contains("orders charged twice or more"));
    assert!(overview.contains(">order-twice</a>"), "the duplicate group is listed");
    for ch in &s.charges {
        assert!(overview.contains(ch.as_str()), "the group's charge {ch} is listed");
    }
    assert!(
        overview.contains("drop_response after_commit"),
        "faults injected are counted"
    );
    assert!(
        overview.contains("<strong>happy</strong>"),
        "the active profile is named"
    );

    let (_, payments, _) = page(&client, &h.url("/__fauxpay/ui/payments")).await;
    assert!(payments.contains(&s.hostile_intent));
    assert!(
        !payments.contains("<script>document.title"),
        "hostile metadata is escaped"
    );
    assert!(!payments.contains("<img src=x"), "hostile metadata is escaped");
    assert!(payments.contains("&lt;script&gt;document.title"), "and still shown");
    let (_, searched, _) = page(&client, &h.url("/__fauxpay/ui/payments?q=order-503")).await;
    assert!(searched.contains("order-503") && !searched.contains(&s.hostile_intent));
    let (_, by_status, _) = page(&client, &h.url("/__fauxpay/ui/payments?status=requires_payment_method")).await;
    assert!(by_status.contains("order-declined") && !by_status.contains("order-503"));

    let (status, one, _) = page(&client, &h.url(&format!("/__fauxpay/ui/payments/{}", s.charges[0]))).await;
    assert_eq!(status, 200);
    assert!(
        one.contains("key-first") && one.contains("dropped"),
        "the attempt whose answer was lost"
    );
    assert!(one.contains("key-second"), "the retry is among the order's attempts");
    assert!(one.contains(">duplicate</span>"), "the ledger flags the second charge");
    let (status, _, _) = page(&client, &h.url("/__fauxpay/ui/payments/pi_nope")).await;
    assert_eq!(status, 404);
    let (status, missing, _) = page(
        &client,
        &h.url(&format!("/__fauxpay/ui/payments/{}", urlencode(HOSTILE))),
    )
    .await;
    assert_eq!(status, 404);
    assert!(!missing.contains("<script>document.title"));

    let (_, dups, _) = page(&client, &h.url("/__fauxpay/ui/duplicates")).await;
    assert!(dups.contains("Order order-twice was charged 2 times: 50.00 usd captured, 25.00 usd too much."));
    assert!(dups.contains("The client never learned that"));
    assert!(dups.contains("new idempotency key (key-first, key-second)"));

    let (_, faulted, _) = page(&client, &h.url("/__fauxpay/ui/requests?fault=any")).await;
    assert!(
        faulted.contains(">error 503 before_commit (forced)<"),
        "the fault is named on the request"
    );
    assert!(faulted.contains("key-503") && !faulted.contains("key-hostile"));
    let (_, only_503, _) = page(&client, &h.url("/__fauxpay/ui/requests?outcome=503")).await;
    assert!(only_503.contains("key-503") && !only_503.contains("key-second"));
    let (_, broken, _) = page(&client, &h.url("/__fauxpay/ui/requests?outcome=broken")).await;
    assert!(broken.contains("key-first") && !broken.contains("key-503"));
}

#[tokio::test]
async fn the_profile_form_shows_mistakes_inline_and_reset_wants_confirmation() {
    let s = seed(Config::default()).await;
    let h = &s.harness;
    let client = no_redirects();
    let bad = "name = \"mine\"\ndescription = \"<b>x</b>\"\nseed = \"one\"\n";
    let resp = post_form(&client, &h.url("/__fauxpay/ui/profile"), &[("toml", bad)]).await;
    assert_eq!(resp.status(), 400);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("pasted profile:3: seed: expected a non-negative integer"),
        "{body}"
    );
    assert!(
        body.contains("description = &quot;&lt;b&gt;x&lt;/b&gt;&quot;"),
        "the paste is kept, escaped"
    );
    let profile: serde_json::Value = h.admin_json("/__fauxpay/profile").await;
    assert_eq!(profile["profile"]["name"], "happy", "the active profile is unchanged");

    let resp = post_form(
        &client,
        &h.url("/__fauxpay/ui/profile"),
        &[("bundled", "lost-responses")],
    )
    .await;
    assert_eq!(resp.status(), 303);
    let (_, shown, _) = page(&client, &h.url("/__fauxpay/ui/profile?activated=1")).await;
    assert!(shown.contains("Profile activated.") && shown.contains("<strong>lost-responses</strong>"));

    let resp = post_form(&client, &h.url("/__fauxpay/ui/reset"), &[("x", "1")]).await;
    assert_eq!(resp.status(), 400, "no confirmation, no reset");
    assert_eq!(h.ledger("").await.len(), 4);
    let resp = post_form(&client, &h.url("/__fauxpay/ui/reset"), &[("confirm", "yes")]).await;
    assert_eq!(resp.status(), 303);
    assert!(h.ledger("").await.is_empty());
}

#[tokio::test]
async fn the_admin_token_guards_the_pages_by_bearer_or_cookie() {
    let config = Config {
        admin_token: Some("s3cret".into()),
        ..Config::default()
    };
    let h = dashboard_common::Harness::start(config).await;
    let client = no_redirects();
    let (status, body, _) = page(&client, &h.url("/__fauxpay/")).await;
    assert_eq!(status, 401);
    assert!(body.contains("name=\"token\""), "the token form");
    assert_eq!(
        client.get(h.url("/__fauxpay/ui/live")).send().await.unwrap().status(),
        401
    );
    let resp = post_form(&client, &h.url("/__fauxpay/ui/reset"), &[("confirm", "yes")]).await;
    assert_eq!(resp.status(), 401, "no form posts without the token");

    let wrong = post_form(&client, &h.url("/__fauxpay/ui/login"), &[("token", "nope")]).await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.text().await.unwrap().contains("That is not the admin token."));
    let right = post_form(&client, &h.url("/__fauxpay/ui/login"), &[("token", "s3cret")]).await;
    assert_eq!(right.status(), 303);
    let cookie = right.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("fauxpay_admin=s3cret;")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
    );
    let with_cookie = client
        .get(h.url("/__fauxpay/"))
        .header("cookie", "other=1; fauxpay_admin=s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status(), 200);
    let with_bearer = client
        .get(h.url("/__fauxpay/ui/requests"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(with_bearer.status(), 200);
}

#[tokio::test]
async fn the_live_marker_changes_with_the_provider() {
    let h = dashboard_common::Harness::default().await;
    let marker = || async {
        h.client
            .get(h.url("/__fauxpay/ui/live"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let before = marker().await;
    assert_eq!(before, marker().await, "nothing happened, nothing changed");
    let resp = h
        .form(
            "/v1/payment_intents",
            "amount=100&currency=usd&confirm=true&payment_method=pm_card_visa",
            None,
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert_ne!(before, marker().await);
}
