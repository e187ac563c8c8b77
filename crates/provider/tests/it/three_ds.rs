//! 3-D Secure over real sockets: a confirmation that waits in `requires_action` with
//! Stripe's `next_action` pointing at fauxpay, completed or failed through
//! `POST /__fauxpay/payment_intents/{id}/authenticate` and through the page's own form
//! (driven here as a browser would, redirects included); declines after the
//! authentication; off-session payments refused with `authentication_required`; the
//! ledger, duplicates and faults on the authenticating request; and the page's escaping.

use fauxpay_testkit::provider as common;
use fauxpay_testkit::provider::{get_json as get, post_json as post};

use common::{json, Harness};
use fauxpay_faults::{self as faults, Fault, When};
use fauxpay_provider::{Config, DuplicatePolicy};
use reqwest::redirect::Policy;
use serde_json::Value;

/// A payment intent confirmed at once with `body`'s payment method: its JSON.
async fn confirmed(h: &Harness, body: &str) -> (u16, Value) {
    post(
        h,
        "/v1/payment_intents",
        &format!("amount=2000&currency=usd&confirm=true&{body}"),
    )
    .await
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id: {v}")).to_string()
}

async fn authenticate(h: &Harness, pi: &str, outcome: &str) -> (u16, Value) {
    post(
        h,
        &format!("/__fauxpay/payment_intents/{pi}/authenticate"),
        &format!("outcome={outcome}"),
    )
    .await
}

/// A client like a browser's: no API key, redirects not followed (so they can be read).
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

/// The page's forms: each one's action and hidden fields (enough HTML reading for
/// fauxpay's own page).
fn forms(html: &str) -> Vec<(String, String)> {
    let attr = |tag: &str, name: &str| {
        let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
        let len = tag[start..].find('"')?;
        Some(tag[start..start + len].replace("&amp;", "&"))
    };
    html.split("<form ")
        .skip(1)
        .map(|form| {
            let form = &form[..form.find("</form>").unwrap()];
            let action = attr(form, "action").unwrap();
            let fields: Vec<String> = form
                .split("<input ")
                .skip(1)
                .map(|input| format!("{}={}", attr(input, "name").unwrap(), attr(input, "value").unwrap()))
                .collect();
            (action, fields.join("&"))
        })
        .collect()
}

#[tokio::test]
async fn a_payment_waits_for_authentication_then_charges_once() {
    let h = Harness::default().await;
    let (status, pi) = confirmed(
        &h,
        "payment_method=pm_card_authenticationRequired&metadata[order_id]=order-3ds",
    )
    .await;
    assert_eq!(status, 200, "{pi}");
    assert_eq!(pi["status"], "requires_action");
    assert_eq!(pi["latest_charge"], Value::Null);
    let pi_id = id(&pi);
    assert_eq!(pi["next_action"]["type"], "use_stripe_sdk");
    assert_eq!(
        pi["next_action"]["use_stripe_sdk"]["stripe_js"],
        h.url(&format!("/__fauxpay/3ds/{pi_id}")),
        "the URL points at fauxpay as the client reached it"
    );
    assert!(h.ledger("").await.is_empty(), "nothing charged yet");

    let (status, done) = authenticate(&h, &pi_id, "succeed").await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (&done["status"], &done["amount_received"]),
        (&"succeeded".into(), &2000.into())
    );
    assert_eq!(done["next_action"], Value::Null);
    let ledger = h.ledger("").await;
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["correlation_id"], "order-3ds");
    assert_eq!(ledger[0]["payment_intent"], pi_id.as_str());
    let (_, charge) = get(&h, &format!("/v1/charges/{}", done["latest_charge"].as_str().unwrap())).await;
    assert_eq!(
        (&charge["captured"], &charge["payment_intent"]),
        (&true.into(), &pi_id.clone().into())
    );
    assert_eq!(get(&h, &format!("/v1/payment_intents/{pi_id}")).await, (200, done));

    // Not waiting any more: Stripe's state error, and nothing charged twice.
    let (status, e) = authenticate(&h, &pi_id, "succeed").await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &"payment_intent_unexpected_state".into())
    );
    assert_eq!(h.ledger("").await.len(), 1);
    // The request log names the authenticating request and its intent.
    let log: Value = h.admin_json("/__fauxpay/requests").await;
    let path = format!("/__fauxpay/payment_intents/{pi_id}/authenticate");
    let authenticated: Vec<&Value> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["path"] == path.as_str())
        .collect();
    assert_eq!(authenticated.len(), 2, "{log}");
    assert_eq!(authenticated[0]["outcome"], "200");
    assert_eq!(authenticated[0]["object"], pi_id.as_str());
    assert_eq!(authenticated[1]["outcome"], "400");
}

#[tokio::test]
async fn failed_authentication_and_declines_after_authentication() {
    let h = Harness::default().await;
    for card in [
        "authenticationRequired",
        "threeDSecure2Required",
        "authenticationRequiredOnSetup",
    ] {
        let (_, pi) = confirmed(&h, &format!("payment_method=pm_card_{card}")).await;
        assert_eq!(pi["status"], "requires_action", "{card}");
        let (status, failed) = authenticate(&h, &id(&pi), "fail").await;
        assert_eq!(status, 200, "{failed}");
        assert_eq!(failed["status"], "requires_payment_method");
        assert_eq!(
            failed["last_payment_error"]["code"],
            "payment_intent_authentication_failure"
        );
        assert_eq!(failed["last_payment_error"]["type"], "invalid_request_error");
        assert_eq!(failed["latest_charge"], Value::Null, "no charge was made");
    }
    assert!(h.ledger("").await.is_empty());
    let (_, charges) = get(&h, "/v1/charges").await;
    assert_eq!(charges["data"], serde_json::json!([]));

    for (card, code, decline) in [
        (
            "authenticationRequiredChargeDeclinedInsufficientFunds",
            "card_declined",
            "insufficient_funds",
        ),
        ("threeDSecureRequiredChargeDeclined", "card_declined", "generic_decline"),
    ] {
        let (_, pi) = confirmed(&h, &format!("payment_method=pm_card_{card}")).await;
        assert_eq!(pi["status"], "requires_action", "{card}");
        let (status, e) = authenticate(&h, &id(&pi), "succeed").await;
        assert_eq!(status, 402, "{e}");
        assert_eq!(
            (&e["error"]["code"], &e["error"]["decline_code"]),
            (&code.into(), &decline.into())
        );
        let after = &e["error"]["payment_intent"];
        assert_eq!(after["status"], "requires_payment_method");
        assert_eq!(after["last_payment_error"]["decline_code"], decline);
        let (_, charge) = get(&h, &format!("/v1/charges/{}", e["error"]["charge"].as_str().unwrap())).await;
        assert_eq!(charge["status"], "failed");
    }
    // Raw numbers behave as their pm_card_ names.
    let (_, pi) = confirmed(
        &h,
        "payment_method_data[type]=card&payment_method_data[card][number]=4000002760003184&payment_method_data[card][exp_month]=12&payment_method_data[card][exp_year]=2040",
    )
    .await;
    assert_eq!(pi["status"], "requires_action");
    assert!(h.ledger("").await.is_empty());
}

#[tokio::test]
async fn off_session_payments_that_need_authentication_are_declined() {
    let h = Harness::default().await;
    for card in [
        "authenticationRequired",
        "authenticationRequiredOnSetup",
        "threeDSecure2Required",
        "authenticationRequiredChargeDeclinedInsufficientFunds",
    ] {
        let (status, e) = confirmed(&h, &format!("payment_method=pm_card_{card}&off_session=true")).await;
        assert_eq!(status, 402, "{card}: {e}");
        let err = &e["error"];
        assert_eq!(err["type"], "card_error");
        assert_eq!(
            (&err["code"], &err["decline_code"]),
            (&"authentication_required".into(), &"authentication_required".into())
        );
        assert_eq!(err["payment_intent"]["status"], "requires_payment_method");
        assert_eq!(
            err["payment_intent"]["last_payment_error"]["code"],
            "authentication_required"
        );
    }
    let (status, ok) = confirmed(&h, "payment_method=pm_card_visa&off_session=true").await;
    assert_eq!((status, &ok["status"]), (200, &"succeeded".into()));
    let (status, e) = post(&h, "/v1/payment_intents", "amount=2000&currency=usd&off_session=true").await;
    assert_eq!((status, &e["error"]["param"]), (400, &"off_session".into()));
    // Two steps: confirm off-session.
    let (_, open) = post(
        &h,
        "/v1/payment_intents",
        "amount=2000&currency=usd&payment_method=pm_card_authenticationRequired",
    )
    .await;
    let (status, e) = post(
        &h,
        &format!("/v1/payment_intents/{}/confirm", id(&open)),
        "off_session=one_off",
    )
    .await;
    assert_eq!((status, &e["error"]["code"]), (402, &"authentication_required".into()));
}

#[tokio::test]
async fn the_page_completes_the_authentication_and_returns_to_the_shop() {
    let h = Harness::default().await;
    let hostile = "https://shop.example/back?x=\"><script>alert(2)</script>";
    let (_, pi) = confirmed(
        &h,
        &format!(
            "payment_method=pm_card_authenticationRequired&return_url={}&metadata[note]=%3Cscript%3Ealert(1)%3C%2Fscript%3E&description=tea+%26+%3Cb%3Ecake%3C%2Fb%3E",
            url_encode(hostile)
        ),
    )
    .await;
    let pi_id = id(&pi);
    assert_eq!(pi["next_action"]["type"], "redirect_to_url");
    let redirect = &pi["next_action"]["redirect_to_url"];
    assert_eq!(redirect["return_url"], hostile);
    let url = redirect["url"].as_str().unwrap();
    assert_eq!(url, h.url(&format!("/__fauxpay/3ds/{pi_id}")));

    let browser = browser();
    let page = browser.get(url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let html = page.text().await.unwrap();
    assert!(!html.contains("<script"), "nothing from the request is markup: {html}");
    assert!(!html.contains("<b>"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("tea &amp; &lt;b&gt;cake&lt;/b&gt;"));
    assert!(html.contains("&quot;&gt;&lt;script&gt;alert(2)"));
    let buttons = forms(&html);
    assert_eq!(buttons.len(), 2, "complete and fail: {html}");
    let (action, fields) = &buttons[0];
    assert_eq!(*action, format!("/__fauxpay/payment_intents/{pi_id}/authenticate"));
    assert_eq!(fields, "outcome=succeed&redirect=true");

    // The browser submits the form: back to the shop with Stripe's query parameters.
    let done = browser
        .post(h.url(action))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(fields.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 303);
    let location = done.headers()["location"].to_str().unwrap().to_string();
    let secret = pi["client_secret"].as_str().unwrap();
    assert_eq!(
        location,
        format!("{hostile}&payment_intent={pi_id}&payment_intent_client_secret={secret}&redirect_status=succeeded")
    );
    let (_, after) = get(&h, &format!("/v1/payment_intents/{pi_id}")).await;
    assert_eq!(after["status"], "succeeded");
    assert_eq!(h.ledger("").await.len(), 1);

    // Afterwards the page offers nothing to press.
    let html = browser.get(url).send().await.unwrap().text().await.unwrap();
    assert!(
        forms(&html).is_empty() && html.contains("not awaiting authentication"),
        "{html}"
    );
}

/// Percent-encodes everything but unreserved characters.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn the_pages_fail_button_and_the_page_without_a_return_url() {
    let h = Harness::default().await;
    let browser = browser();
    // Failed, with a return_url: back to the shop with redirect_status=failed.
    let (_, pi) = confirmed(
        &h,
        "payment_method=pm_card_threeDSecure2Required&return_url=https%3A%2F%2Fshop.example%2Fdone%23top",
    )
    .await;
    let html = browser
        .get(h.url(&format!("/__fauxpay/3ds/{}", id(&pi))))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (action, fields) = forms(&html).remove(1);
    assert_eq!(fields, "outcome=fail&redirect=true");
    let back = browser
        .post(h.url(&action))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(fields)
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 303);
    let location = back.headers()["location"].to_str().unwrap();
    assert!(
        location.starts_with("https://shop.example/done?payment_intent="),
        "{location}"
    );
    assert!(location.ends_with("&redirect_status=failed#top"), "{location}");

    // A decline after the authentication is a failed redirect too.
    let (_, pi) = confirmed(
        &h,
        "payment_method=pm_card_authenticationRequiredChargeDeclinedInsufficientFunds&return_url=https%3A%2F%2Fshop.example%2Fdone",
    )
    .await;
    let back = browser
        .post(h.url(&format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi))))
        .form(&[("outcome", "succeed"), ("redirect", "true")])
        .send()
        .await
        .unwrap();
    assert!(back.headers()["location"]
        .to_str()
        .unwrap()
        .ends_with("redirect_status=failed"));

    // No return_url: a result page.
    let (_, pi) = confirmed(&h, "payment_method=pm_card_authenticationRequired").await;
    let page = browser
        .post(h.url(&format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi))))
        .form(&[("outcome", "succeed"), ("redirect", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Status: succeeded."));
    // Pressed twice: the state error, on a page.
    let page = browser
        .post(h.url(&format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi))))
        .form(&[("outcome", "succeed"), ("redirect", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 400);
    assert!(page.text().await.unwrap().contains("not awaiting authentication"));

    // Unknown ids, hostile ones included, are escaped on a 404 page.
    let page = browser
        .get(h.url("/__fauxpay/3ds/%3Cscript%3Ealert(1)%3C%2Fscript%3E"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    let html = page.text().await.unwrap();
    assert!(!html.contains("<script") && html.contains("&lt;script&gt;"), "{html}");
}

#[tokio::test]
async fn authenticate_requests_are_checked() {
    let h = Harness::default().await;
    let (_, pi) = confirmed(&h, "payment_method=pm_card_authenticationRequired").await;
    let path = format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi));
    for (body, code, param) in [
        ("", "parameter_missing", "outcome"),
        ("outcome=perhaps", "parameter_invalid", "outcome"),
        ("outcome=succeed&amount=1", "parameter_unknown", "amount"),
    ] {
        let (status, e) = post(&h, &path, body).await;
        assert_eq!(status, 400, "{body}: {e}");
        assert_eq!(
            (&e["error"]["code"], &e["error"]["param"]),
            (&code.into(), &param.into()),
            "{body}"
        );
    }
    let (status, e) = authenticate(&h, "pi_doesnotexist", "succeed").await;
    assert_eq!((status, &e["error"]["code"]), (404, &"resource_missing".into()));
    let (status, _) = authenticate(&h, "ch_nope", "succeed").await;
    assert_eq!(status, 404);
    let (status, still) = get(&h, &format!("/v1/payment_intents/{}", id(&pi))).await;
    assert_eq!((status, &still["status"]), (200, &"requires_action".into()));
}

#[tokio::test]
async fn the_ledger_duplicates_and_faults_apply_to_the_authenticating_request() {
    let h = Harness::start(Config {
        duplicates: DuplicatePolicy::Reject,
        ..Config::default()
    })
    .await;
    // A lost answer on the authenticating request: the money moved, the key replays it.
    let (_, pi) = confirmed(
        &h,
        "payment_method=pm_card_authenticationRequired&metadata[order_id]=o-lost",
    )
    .await;
    let path = format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi));
    let lost = h
        .post(&path)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("Idempotency-Key", "auth-k")
        .header("Fauxpay-Fault", Fault::drop_response(When::AfterCommit).header_value())
        .body("outcome=succeed")
        .send()
        .await;
    assert!(lost.is_err(), "no answer");
    let ledger = h.ledger("correlation_prefix=o-lost").await;
    assert_eq!(ledger.len(), 1, "the money moved");
    assert_eq!(ledger[0]["idempotency_key"], "auth-k");
    assert!(ledger[0]["fault"]
        .as_str()
        .unwrap()
        .starts_with("drop_response after_commit"));
    let replay = h.form(&path, "outcome=succeed", Some("auth-k")).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let (status, replayed) = json(replay).await;
    assert_eq!((status, &replayed["status"]), (200, &"succeeded".into()));
    assert_eq!(h.ledger("correlation_prefix=o-lost").await.len(), 1);

    // --duplicates reject: a second payment for the order is refused when it is charged.
    let (_, again) = confirmed(
        &h,
        "payment_method=pm_card_authenticationRequired&metadata[order_id]=o-lost",
    )
    .await;
    assert_eq!(again["status"], "requires_action");
    let (status, e) = authenticate(&h, &id(&again), "succeed").await;
    assert_eq!(
        (status, &e["error"]["decline_code"]),
        (402, &"duplicate_transaction".into())
    );
    assert_eq!(h.summary().await["blocked_duplicates"], 1);

    // A forced decline on the authenticating request.
    let (_, pi) = confirmed(
        &h,
        "payment_method=pm_card_authenticationRequired&metadata[order_id]=o-forced",
    )
    .await;
    let forced = h
        .post(&format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi)))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(
            "Fauxpay-Fault",
            Fault::decline("card_declined", "do_not_honor", None).header_value(),
        )
        .body("outcome=succeed")
        .send()
        .await
        .unwrap();
    let (status, e) = json(forced).await;
    assert_eq!((status, &e["error"]["decline_code"]), (402, &"do_not_honor".into()));
}

#[tokio::test]
async fn a_profile_rule_on_the_authenticate_path_and_no_admin_token_needed() {
    let toml = "name = \"a\"\ndescription = \"a\"\nseed = 1\n[[rules]]\nkind = \"error\"\nstatus = 503\n[rules.match]\npath = \"/__fauxpay/payment_intents*\"\n";
    let profile = faults::parse_profile("test.toml", toml).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")));
    let h = Harness::start(Config {
        profile,
        profile_source: toml.to_string(),
        admin_token: Some("s3cret".into()),
        ..Config::default()
    })
    .await;
    let (_, pi) = confirmed(&h, "payment_method=pm_card_authenticationRequired").await;
    let path = format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi));
    let unauthenticated = reqwest::Client::new();
    let resp = unauthenticated
        .post(h.url(&path))
        .form(&[("outcome", "succeed")])
        .send()
        .await
        .unwrap();
    let (status, e) = json(resp).await;
    assert_eq!(
        (status, &e["error"]["type"]),
        (503, &"api_error".into()),
        "the rule acted, not the admin token"
    );
    let (_, still) = get(&h, &format!("/v1/payment_intents/{}", id(&pi))).await;
    assert_eq!(
        still["status"], "requires_action",
        "before the commit: nothing happened"
    );
    let page = unauthenticated
        .get(h.url(&format!("/__fauxpay/3ds/{}", id(&pi))))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200, "a customer's browser needs no token");
    assert_eq!(
        unauthenticated
            .get(h.url("/__fauxpay/summary"))
            .send()
            .await
            .unwrap()
            .status(),
        401,
        "the rest of the admin API keeps it"
    );
}
