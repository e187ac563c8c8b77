//! `expand[]` over real sockets: every field fauxpay expands, on the endpoints that answer
//! its object (create, confirm, capture, retrieve, update, attach…), nested paths, lists
//! and search results through `data.…`, form, query and JSON alike; Stripe's 400 for a
//! path it would refuse (nothing charged, the key left free); and a replay answering the
//! expanded bytes first sent.

use fauxpay_testkit::provider as common;
use fauxpay_testkit::provider::{get_json as get, post_json as post};

use common::{json, Harness, KEY};
use serde_json::{json, Value};

/// A POST that must answer 200: its object.
async fn ok(h: &Harness, path: &str, body: &str) -> Value {
    let (status, v) = post(h, path, body).await;
    assert_eq!(status, 200, "POST {path} {body}: {v}");
    v
}

/// A GET that must answer 200: its object.
async fn fetch(h: &Harness, path: &str) -> Value {
    let (status, v) = get(h, path).await;
    assert_eq!(status, 200, "GET {path}: {v}");
    v
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}"))
}

/// A customer whose default payment method is a saved visa: (customer, its card's id).
async fn customer_with_card(h: &Harness, email: &str) -> (Value, String) {
    let cus = ok(
        h,
        "/v1/customers",
        &format!("email={email}&payment_method=pm_card_visa&invoice_settings[default_payment_method]=pm_card_visa"),
    )
    .await;
    let pm = cus["invoice_settings"]["default_payment_method"]
        .as_str()
        .unwrap()
        .to_string();
    (cus, pm)
}

/// Asserts Stripe's refusal of an expansion.
fn assert_refused(got: &(u16, Value), message: &str, param: &str) {
    let (status, body) = got;
    assert_eq!(*status, 400, "{body}");
    let e = &body["error"];
    assert_eq!(e["type"], "invalid_request_error", "{body}");
    assert_eq!(e["message"], message, "{body}");
    assert_eq!(e["param"], param, "{body}");
}

#[tokio::test]
async fn intents_expand_their_charge_customer_and_payment_method_on_every_endpoint() {
    let h = Harness::default().await;
    let (cus, pm) = customer_with_card(&h, "jenny%40example.com").await;
    let cus_id = id(&cus);

    // Create and confirm at once.
    let pi = ok(
        &h,
        "/v1/payment_intents",
        &format!("amount=2000&currency=usd&confirm=true&customer={cus_id}&payment_method={pm}&expand[]=latest_charge&expand[]=customer&expand[]=payment_method"),
    )
    .await;
    assert_eq!(pi["status"], "succeeded");
    let charge = &pi["latest_charge"];
    assert_eq!(charge["object"], "charge");
    assert!(id(charge).starts_with("ch_"));
    assert_eq!(charge["amount_captured"], 2000);
    assert_eq!(charge["payment_intent"], pi["id"]);
    assert_eq!(charge["customer"], cus["id"]);
    assert_eq!(pi["customer"], cus);
    assert_eq!(pi["payment_method"]["id"], pm.as_str());
    assert_eq!(pi["payment_method"]["customer"], cus["id"]);
    assert_eq!(pi["payment_method"]["card"]["last4"], "4242");
    // The same objects as their retrieves.
    assert_eq!(charge, &fetch(&h, &format!("/v1/charges/{}", id(charge))).await);
    assert_eq!(
        &pi["payment_method"],
        &fetch(&h, &format!("/v1/payment_methods/{pm}")).await
    );

    // Retrieve (query string, indexed as Stripe's SDKs send it), without and with.
    let path = format!("/v1/payment_intents/{}", id(&pi));
    let plain = fetch(&h, &path).await;
    assert_eq!(plain["latest_charge"], charge["id"]);
    assert_eq!(plain["customer"], cus["id"]);
    let again = fetch(
        &h,
        &format!("{path}?expand%5B0%5D=latest_charge&expand%5B1%5D=customer"),
    )
    .await;
    assert_eq!(&again["latest_charge"], charge);
    assert_eq!(again["customer"], cus);
    assert_eq!(again["payment_method"], pm.as_str(), "not asked for");

    // Confirm, on a two-step intent paid with a test card directly: its pm_… expands too.
    let open = ok(
        &h,
        "/v1/payment_intents",
        "amount=1500&currency=eur&capture_method=manual",
    )
    .await;
    let held = ok(
        &h,
        &format!("/v1/payment_intents/{}/confirm", id(&open)),
        "payment_method=pm_card_mastercard&expand[]=payment_method&expand[]=latest_charge",
    )
    .await;
    assert_eq!(held["status"], "requires_capture");
    assert_eq!(held["payment_method"]["object"], "payment_method");
    assert_eq!(held["payment_method"]["card"]["brand"], "mastercard");
    assert_eq!(held["payment_method"]["customer"], Value::Null);
    assert_eq!(held["latest_charge"]["captured"], false);
    assert_eq!(held["customer"], Value::Null);

    // Capture and cancel answer intents too.
    let captured = ok(
        &h,
        &format!("/v1/payment_intents/{}/capture", id(&open)),
        "amount_to_capture=1000&expand[]=latest_charge",
    )
    .await;
    assert_eq!(captured["latest_charge"]["amount_captured"], 1000);
    let other = ok(
        &h,
        "/v1/payment_intents",
        &format!("amount=900&currency=usd&customer={cus_id}"),
    )
    .await;
    let canceled = ok(
        &h,
        &format!("/v1/payment_intents/{}/cancel", id(&other)),
        "expand[]=customer&expand[]=latest_charge",
    )
    .await;
    assert_eq!(canceled["status"], "canceled");
    assert_eq!(canceled["customer"]["email"], "jenny@example.com");
    assert_eq!(canceled["latest_charge"], Value::Null, "null stays null");
}

#[tokio::test]
async fn charges_refunds_customers_and_payment_methods_expand_their_references() {
    let h = Harness::default().await;
    let (cus, pm) = customer_with_card(&h, "sam%40example.com").await;
    let pi = ok(
        &h,
        "/v1/payment_intents",
        &format!(
            "amount=3000&currency=usd&confirm=true&customer={}&payment_method={pm}",
            id(&cus)
        ),
    )
    .await;
    let ch_id = pi["latest_charge"].as_str().unwrap();

    // Charges: payment_intent, customer, and refunds (a list sent only when expanded).
    let ch = fetch(
        &h,
        &format!("/v1/charges/{ch_id}?expand[]=payment_intent&expand[]=customer"),
    )
    .await;
    assert_eq!(ch["payment_intent"]["id"], pi["id"]);
    assert_eq!(ch["payment_intent"]["latest_charge"], ch_id);
    assert_eq!(ch["customer"], cus);
    assert!(ch.get("refunds").is_none());

    // Refunds: charge and payment_intent, on create and retrieve.
    let re = ok(
        &h,
        "/v1/refunds",
        &format!("charge={ch_id}&amount=1000&expand[]=charge&expand[]=payment_intent"),
    )
    .await;
    assert_eq!(re["charge"]["id"], ch_id);
    assert_eq!(re["charge"]["amount_refunded"], 1000, "the charge after the refund");
    assert_eq!(re["payment_intent"]["id"], pi["id"]);
    let re2 = fetch(&h, &format!("/v1/refunds/{}?expand[]=charge", id(&re))).await;
    assert_eq!(re2["charge"], re["charge"]);
    assert_eq!(re2["payment_intent"], pi["id"]);
    let ch = fetch(&h, &format!("/v1/charges/{ch_id}?expand[]=refunds")).await;
    assert_eq!(ch["refunds"]["object"], "list");
    assert_eq!(ch["refunds"]["data"][0]["id"], re["id"]);
    assert_eq!(ch["refunds"]["url"], format!("/v1/charges/{ch_id}/refunds"));

    // Legacy charges: no intent, no customer; capture answers a charge too.
    let auth = ok(
        &h,
        "/v1/charges",
        "amount=500&currency=usd&source=tok_visa&capture=false&expand[]=payment_intent&expand[]=customer",
    )
    .await;
    assert_eq!(
        (&auth["payment_intent"], &auth["customer"]),
        (&Value::Null, &Value::Null)
    );
    let done = ok(
        &h,
        &format!("/v1/charges/{}/capture", id(&auth)),
        "expand[]=balance_transaction",
    )
    .await;
    assert!(
        done["balance_transaction"].as_str().unwrap().starts_with("txn_"),
        "accepted, not modelled"
    );

    // Customers: invoice_settings.default_payment_method, on retrieve, update and create.
    let c = fetch(
        &h,
        &format!(
            "/v1/customers/{}?expand[]=invoice_settings.default_payment_method",
            id(&cus)
        ),
    )
    .await;
    let default = &c["invoice_settings"]["default_payment_method"];
    assert_eq!(default["id"], pm.as_str());
    assert_eq!(default["card"]["brand"], "visa");
    let updated = ok(
        &h,
        &format!("/v1/customers/{}", id(&cus)),
        "name=Sam&expand[]=invoice_settings.default_payment_method",
    )
    .await;
    assert_eq!(updated["name"], "Sam");
    assert_eq!(&updated["invoice_settings"]["default_payment_method"], default);
    let created = ok(
        &h,
        "/v1/customers",
        "payment_method=pm_card_amex&invoice_settings[default_payment_method]=pm_card_amex&expand[]=invoice_settings.default_payment_method",
    )
    .await;
    assert_eq!(
        created["invoice_settings"]["default_payment_method"]["card"]["brand"],
        "amex"
    );

    // Payment methods: customer, on attach and retrieve; nested into its default card.
    let card = ok(&h, "/v1/payment_methods", "type=card&card[token]=tok_mastercard").await;
    let attached = ok(
        &h,
        &format!("/v1/payment_methods/{}/attach", id(&card)),
        &format!(
            "customer={}&expand[]=customer.invoice_settings.default_payment_method",
            id(&cus)
        ),
    )
    .await;
    assert_eq!(attached["customer"]["id"], cus["id"]);
    assert_eq!(
        attached["customer"]["invoice_settings"]["default_payment_method"]["id"],
        pm.as_str()
    );
    let got = fetch(&h, &format!("/v1/payment_methods/{}?expand[]=customer", id(&card))).await;
    assert_eq!(got["customer"]["name"], "Sam");
}

#[tokio::test]
async fn nested_paths_and_deleted_customers() {
    let h = Harness::default().await;
    let (cus, pm) = customer_with_card(&h, "kim%40example.com").await;
    let pi = ok(
        &h,
        "/v1/payment_intents",
        &format!(
            "amount=2500&currency=gbp&confirm=true&customer={}&payment_method={pm}",
            id(&cus)
        ),
    )
    .await;
    // Two and three levels: the charge's intent, and that intent's customer.
    let v = fetch(
        &h,
        &format!(
            "/v1/payment_intents/{}?expand[]=latest_charge.payment_intent.customer&expand[]=latest_charge.customer",
            id(&pi)
        ),
    )
    .await;
    let charge = &v["latest_charge"];
    assert_eq!(charge["payment_intent"]["id"], pi["id"]);
    assert_eq!(
        charge["payment_intent"]["latest_charge"], charge["id"],
        "one level at a time"
    );
    assert_eq!(charge["payment_intent"]["customer"], cus);
    assert_eq!(charge["customer"], cus);
    assert_eq!(v["customer"], cus["id"]);

    // A deleted customer expands as Stripe's deleted object.
    let (status, _) = json(
        h.client
            .delete(h.url(&format!("/v1/customers/{}", id(&cus))))
            .bearer_auth(KEY)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    let v = fetch(&h, &format!("/v1/payment_intents/{}?expand[]=customer", id(&pi))).await;
    assert_eq!(
        v["customer"],
        json!({"id": id(&cus), "object": "customer", "deleted": true})
    );
}

#[tokio::test]
async fn lists_and_search_results_expand_through_data() {
    let h = Harness::default().await;
    let (cus, pm) = customer_with_card(&h, "lee%40example.com").await;
    for (amount, order) in [(1100, "l-1"), (1200, "l-2")] {
        ok(
            &h,
            "/v1/payment_intents",
            &format!(
                "amount={amount}&currency=usd&confirm=true&customer={}&payment_method={pm}&metadata[order_id]={order}",
                id(&cus)
            ),
        )
        .await;
    }
    let list = fetch(
        &h,
        "/v1/payment_intents?limit=2&expand[]=data.latest_charge.payment_intent&expand[]=data.customer",
    )
    .await;
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for pi in data {
        assert_eq!(pi["latest_charge"]["amount"], pi["amount"]);
        assert_eq!(pi["latest_charge"]["payment_intent"]["id"], pi["id"]);
        assert_eq!(pi["customer"]["id"], cus["id"]);
    }
    assert_eq!((&list["object"], &list["has_more"]), (&json!("list"), &json!(false)));

    // Search results, charges and refunds lists, a customer's payment methods.
    let found = fetch(
        &h,
        "/v1/payment_intents/search?query=metadata%5B%27order_id%27%5D%3A%27l-1%27&expand[]=data.payment_method",
    )
    .await;
    assert_eq!(found["object"], "search_result");
    assert_eq!(found["data"][0]["amount"], 1100);
    assert_eq!(found["data"][0]["payment_method"]["id"], pm.as_str());
    let charges = fetch(&h, "/v1/charges/search?query=amount%3A1200&expand[]=data.customer").await;
    assert_eq!(charges["data"][0]["customer"]["email"], "lee@example.com");
    let charges = fetch(&h, "/v1/charges?expand[]=data.payment_intent").await;
    assert_eq!(charges["data"].as_array().unwrap().len(), 2);
    let ch_id = charges["data"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(charges["data"][0]["payment_intent"]["latest_charge"], ch_id.as_str());
    ok(&h, "/v1/refunds", &format!("charge={ch_id}")).await;
    let refunds = fetch(&h, "/v1/refunds?expand[]=data.charge").await;
    assert_eq!(refunds["data"][0]["charge"]["refunded"], true);
    let cards = fetch(
        &h,
        &format!("/v1/customers/{}/payment_methods?expand[]=data.customer", id(&cus)),
    )
    .await;
    assert_eq!(cards["data"][0]["customer"]["id"], cus["id"]);
    let customers = fetch(
        &h,
        "/v1/customers?expand[]=data.invoice_settings.default_payment_method",
    )
    .await;
    assert_eq!(
        customers["data"][0]["invoice_settings"]["default_payment_method"]["id"],
        pm.as_str()
    );

    // An item's field without `data.`: Stripe's 400 and its hint.
    assert_refused(
        &get(&h, "/v1/payment_intents?expand[]=customer").await,
        "This property cannot be expanded (customer). You may want to try expanding 'data.customer' instead.",
        "expand[0]",
    );
}

#[tokio::test]
async fn a_path_stripe_refuses_is_its_400_and_nothing_runs() {
    let h = Harness::default().await;
    let body = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=bad-1";
    let (status, e) = json(
        h.form(
            "/v1/payment_intents",
            &format!("{body}&expand[]=latest_charge&expand[]=latest_charge.nope"),
            Some("k-bad"),
        )
        .await,
    )
    .await;
    assert_refused(
        &(status, e),
        "This property cannot be expanded (latest_charge.nope).",
        "expand[1]",
    );
    assert!(h.ledger("").await.is_empty(), "nothing was charged");
    // The key was not used: the same key with a valid request runs.
    let resp = h.form("/v1/payment_intents", body, Some("k-bad")).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("idempotent-replayed").is_none());

    for (path, message) in [
        ("/v1/charges/ch_1?expand[]=foo", "This property cannot be expanded (foo)."),
        (
            "/v1/charges/ch_1?expand[]=payment_method",
            "This property cannot be expanded (payment_method).",
        ),
        (
            "/v1/customers/cus_1?expand[]=default_payment_method",
            "This property cannot be expanded (default_payment_method).",
        ),
        (
            "/v1/payment_intents?expand[]=data.latest_charge.payment_intent.latest_charge.customer",
            "You cannot expand more than 4 levels of a property. Property: data.latest_charge.payment_intent.latest_charge.customer",
        ),
    ] {
        assert_refused(&get(&h, path).await, message, "expand[0]");
    }
    // Paths are checked before the object is looked up (`ch_1` above names none); a
    // good path on an unknown object is the object's 404.
    let (status, _) = get(&h, "/v1/charges/ch_doesnotexist?expand[]=customer").await;
    assert_eq!(status, 404);
    // A JSON body's list, too.
    let (status, e) = json(
        h.post("/v1/refunds")
            .json(&json!({"charge": "ch_x", "expand": ["charge", "refund"]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_refused(&(status, e), "This property cannot be expanded (refund).", "expand[1]");
}

#[tokio::test]
async fn a_replay_answers_the_expanded_bytes_first_sent() {
    let h = Harness::default().await;
    let body = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=r-1&expand[]=latest_charge&expand[]=payment_method";
    let first = h.form("/v1/payment_intents", body, Some("k-expand")).await;
    assert_eq!(first.status(), 200);
    let first = first.bytes().await.unwrap();
    let pi: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(pi["latest_charge"]["refunded"], false);
    let ch_id = pi["latest_charge"]["id"].as_str().unwrap();
    // The charge changes after the first answer; the replay is still that answer.
    ok(&h, "/v1/refunds", &format!("charge={ch_id}")).await;
    let replay = h.form("/v1/payment_intents", body, Some("k-expand")).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.bytes().await.unwrap(), first, "byte-identical");
    let kinds: Vec<Value> = h
        .ledger("correlation_prefix=r-1")
        .await
        .iter()
        .map(|r| r["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("charge"), json!("refund")], "charged once");
    // The same parameters in another order are the same request; other expansions are not.
    let reordered = "expand[]=latest_charge&expand[]=payment_method&metadata[order_id]=r-1&payment_method=pm_card_visa&confirm=true&currency=usd&amount=2000";
    let again = h.form("/v1/payment_intents", reordered, Some("k-expand")).await;
    assert_eq!(again.bytes().await.unwrap(), first);
    let (status, e) = json(
        h.form(
            "/v1/payment_intents",
            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=r-1&expand[]=latest_charge",
            Some("k-expand"),
        )
        .await,
    )
    .await;
    assert_eq!((status, &e["error"]["type"]), (400, &json!("idempotency_error")));
    // Retrieving now shows the refund.
    let now = fetch(&h, &format!("/v1/payment_intents/{}?expand[]=latest_charge", id(&pi))).await;
    assert_eq!(now["latest_charge"]["refunded"], true);
}

/// A real Stripe client (`async-stripe`): `expand` on create and retrieve of a payment
/// intent, the expanded fields deserialised as the SDK's objects.
#[tokio::test]
async fn the_async_stripe_sdk_expands_latest_charge() {
    use stripe::ClientBuilder;
    use stripe_core::customer::CreateCustomer;
    use stripe_core::payment_intent::{CreatePaymentIntent, RetrievePaymentIntent};
    use stripe_core::{ChargeStatus, PaymentIntentStatus};
    use stripe_types::{Currency, Expandable};

    let h = Harness::default().await;
    let client = ClientBuilder::new(KEY).url(h.provider.url()).build().unwrap();
    let customer = CreateCustomer::new()
        .email("jenny@example.com")
        .send(&client)
        .await
        .unwrap();

    let pi = CreatePaymentIntent::new(2000, Currency::USD)
        .customer(customer.id.as_str())
        .payment_method("pm_card_visa")
        .confirm(true)
        .expand(vec!["latest_charge".to_string(), "payment_method".to_string()])
        .send(&client)
        .await
        .expect("the SDK parses the expanded payment intent");
    assert_eq!(pi.status, PaymentIntentStatus::Succeeded);
    let Some(Expandable::Object(charge)) = &pi.latest_charge else {
        panic!("latest_charge is not an object: {:?}", pi.latest_charge);
    };
    assert!(charge.id.as_str().starts_with("ch_"));
    assert_eq!(charge.status, ChargeStatus::Succeeded);
    assert_eq!(charge.amount_captured, 2000);
    assert!(matches!(&charge.payment_intent, Some(Expandable::Id(id)) if *id == pi.id));
    assert!(matches!(&charge.customer, Some(Expandable::Id(id)) if *id == customer.id));
    let Some(Expandable::Object(pm)) = &pi.payment_method else {
        panic!("payment_method is not an object: {:?}", pi.payment_method);
    };
    assert_eq!(pm.card.as_ref().map(|c| c.last4.as_str()), Some("4242"));
    assert!(matches!(&pi.customer, Some(Expandable::Id(id)) if *id == customer.id));

    // Retrieve, with a nested path: the charge's customer too.
    let again = RetrievePaymentIntent::new(pi.id.clone())
        .expand(vec!["latest_charge.customer".to_string(), "customer".to_string()])
        .send(&client)
        .await
        .expect("the SDK parses the expanded payment intent");
    let Some(Expandable::Object(charge)) = &again.latest_charge else {
        panic!("latest_charge is not an object: {:?}", again.latest_charge);
    };
    let Some(Expandable::Object(charge_customer)) = &charge.customer else {
        panic!("the charge's customer is not an object: {:?}", charge.customer);
    };
    assert_eq!(charge_customer.email.as_deref(), Some("jenny@example.com"));
    assert!(matches!(&again.customer, Some(Expandable::Object(c)) if c.id == customer.id));
    assert!(matches!(&again.payment_method, Some(Expandable::Id(id)) if *id == pm.id));

    // A path Stripe refuses is the SDK's invalid request error.
    let err = RetrievePaymentIntent::new(pi.id.clone())
        .expand(vec!["latest_charge.nope".to_string()])
        .send(&client)
        .await
        .unwrap_err();
    match err {
        stripe::StripeError::Stripe(e, 400) => {
            assert_eq!(
                e.message.as_deref(),
                Some("This property cannot be expanded (latest_charge.nope).")
            );
            assert_eq!(e.param.as_deref(), Some("expand[0]"));
        }
        other => panic!("expected a 400, got {other:?}"),
    }
}
