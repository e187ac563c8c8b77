//! A developer's fauxpay is open while they browse the web. A page on another site must
//! not change it: every state-changing admin route and dashboard form refuses a request
//! whose `Origin` or `Sec-Fetch-Site` says it comes from elsewhere, and changes nothing;
//! `curl` and same-origin forms still work; the Stripe-facing routes still answer a
//! storefront on another origin. On loopback, a `Host` fauxpay does not answer to (DNS
//! rebinding) is refused on every route. The dashboard's token form is throttled.

use fauxpay_testkit::provider as common;

use common::{charge_body, Harness};
use fauxpay_provider::{Config, LOOPBACK_HOSTS};
use reqwest::Method;

/// The state-changing admin routes and dashboard forms, with a body each would accept.
const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", "/__fauxpay/reset", ""),
    ("PUT", "/__fauxpay/profile", "{\"bundled\":\"chaos\"}"),
    ("POST", "/__fauxpay/webhooks/resend", "event=evt_none"),
    ("POST", "/__fauxpay/clock", "advance=25h"),
    ("POST", "/__fauxpay/ui/reset", "confirm=yes"),
    ("POST", "/__fauxpay/ui/profile", "bundled=chaos"),
    ("POST", "/__fauxpay/ui/login", "token=x"),
];

async fn charges(h: &Harness) -> u64 {
    h.summary().await["charges"].as_u64().unwrap()
}

#[tokio::test]
async fn state_changing_admin_routes_refuse_other_sites_and_change_nothing() {
    let h = Harness::default().await;
    let r = h
        .form("/v1/payment_intents", &charge_body("xs-1", "pm_card_visa"), None)
        .await;
    assert_eq!(r.status(), 200);
    for (method, path, body) in ROUTES {
        for (name, value) in [("origin", "https://evil.example"), ("sec-fetch-site", "cross-site")] {
            let resp = h
                .client
                .request(Method::from_bytes(method.as_bytes()).unwrap(), h.url(path))
                .header("content-type", "application/x-www-form-urlencoded")
                .header(name, value)
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 403, "{method} {path} with {name}: {value}");
        }
    }
    assert_eq!(charges(&h).await, 1, "nothing was reset");
    let (_, profile) = common::json(h.client.get(h.url("/__fauxpay/profile")).send().await.unwrap()).await;
    assert_ne!(
        profile["profile"]["name"], "chaos",
        "the profile was not swapped: {profile}"
    );

    // The same forms from fauxpay's own pages, and the admin API from curl, still work.
    let own = h.provider.url();
    let resp = h
        .client
        .post(h.url("/__fauxpay/ui/reset"))
        .header("origin", &own)
        .header("sec-fetch-site", "same-origin")
        .form(&[("confirm", "yes")])
        .send()
        .await
        .unwrap();
    assert!(
        resp.status().is_success() || resp.status().is_redirection(),
        "{}",
        resp.status()
    );
    assert_eq!(charges(&h).await, 0);
    h.form("/v1/payment_intents", &charge_body("xs-2", "pm_card_visa"), None)
        .await;
    let resp = h.client.post(h.url("/__fauxpay/reset")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(charges(&h).await, 0);
}

#[tokio::test]
async fn the_stripe_facing_routes_still_answer_a_storefront_on_another_origin() {
    let h = Harness::default().await;
    let resp = h
        .post("/v1/payment_intents")
        .header("origin", "https://shop.example")
        .header("sec-fetch-site", "cross-site")
        .form(&[
            ("amount", "2000"),
            ("currency", "usd"),
            ("confirm", "true"),
            ("payment_method", "pm_card_authenticationRequired"),
            ("metadata[order_id]", "xs-3ds"),
        ])
        .send()
        .await
        .unwrap();
    let (status, pi) = common::json(resp).await;
    assert_eq!(status, 200, "{pi}");
    let id = pi["id"].as_str().unwrap();
    let resp = h
        .client
        .post(h.url(&format!("/__fauxpay/payment_intents/{id}/authenticate")))
        .header("origin", "https://shop.example")
        .header("sec-fetch-site", "cross-site")
        .form(&[("outcome", "succeed")])
        .send()
        .await
        .unwrap();
    let (status, pi) = common::json(resp).await;
    assert_eq!((status, pi["status"].as_str()), (200, Some("succeeded")), "{pi}");
}

#[tokio::test]
async fn on_loopback_a_foreign_host_is_refused_everywhere() {
    let h = Harness::start(Config {
        allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect(),
        ..Config::default()
    })
    .await;
    let port = h.provider.url().rsplit(':').next().unwrap().to_string();
    for path in ["/v1/payment_intents", "/__fauxpay/summary", "/__fauxpay/"] {
        let resp = h
            .get(path)
            .header("host", format!("evil.example:{port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403, "{path}");
        let resp = h
            .get(path)
            .header("host", format!("localhost:{port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let resp = h
        .client
        .post(h.url("/__fauxpay/reset"))
        .header("host", "rebound.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
}

#[tokio::test]
async fn the_dashboard_takes_the_token_as_the_api_does_and_throttles_guesses() {
    let h = Harness::start(Config {
        admin_token: Some("s3cret".into()),
        ..Config::default()
    })
    .await;
    for auth in ["Bearer s3cret", "bearer s3cret"] {
        let resp = h
            .client
            .get(h.url("/__fauxpay/"))
            .header("authorization", auth)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{auth}");
        let resp = h
            .client
            .get(h.url("/__fauxpay/summary"))
            .header("authorization", auth)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{auth}");
    }
    let guess = |token: &'static str| {
        h.client
            .post(h.url("/__fauxpay/ui/login"))
            .form(&[("token", token)])
            .send()
    };
    let mut statuses = Vec::new();
    for _ in 0..30 {
        statuses.push(guess("wrong").await.unwrap().status().as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 401).count(), 10, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 20, "{statuses:?}");
    // Closed for everyone for the minute, the right token included.
    assert_eq!(guess("s3cret").await.unwrap().status(), 429);
}
