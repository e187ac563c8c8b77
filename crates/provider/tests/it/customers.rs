//! Customers and saved payment methods over real sockets: every endpoint, its errors,
//! payment intents charging saved methods, idempotency, reset, and a fault rule on
//! `/v1/customers*`.

use fauxpay_testkit::provider as common;
use fauxpay_testkit::provider::{get_json as get, post_json as post};

use common::{json, Harness, KEY};
use fauxpay_faults as faults;
use fauxpay_provider::Config;
use serde_json::{json, Value};

async fn delete(h: &Harness, path: &str) -> (u16, Value) {
    json(h.client.delete(h.url(path)).bearer_auth(KEY).send().await.unwrap()).await
}

/// Creates a customer from `body`; its id.
async fn customer(h: &Harness, body: &str) -> String {
    let (status, c) = post(h, "/v1/customers", body).await;
    assert_eq!(status, 200, "{c}");
    c["id"].as_str().unwrap().to_string()
}

fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect()
}

/// Asserts a Stripe error: status, `type`, `code`, `param`.
fn assert_error(got: &(u16, Value), status: u16, code: Option<&str>, param: Option<&str>) {
    let (s, body) = got;
    let e = &body["error"];
    assert_eq!(*s, status, "{body}");
    assert_eq!(e["type"], "invalid_request_error", "{body}");
    assert_eq!(e["code"].as_str(), code, "{body}");
    assert_eq!(e["param"].as_str(), param, "{body}");
}

#[tokio::test]
async fn customers_create_retrieve_update_delete() {
    let h = Harness::default().await;
    let (status, c) = post(
        &h,
        "/v1/customers",
        "email=jenny%40example.com&name=Jenny+Rosen&phone=%2B15555550100&description=VIP&metadata[tier]=gold",
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let id = c["id"].as_str().unwrap();
    assert!(id.starts_with("cus_"));
    assert_eq!(c["object"], "customer");
    assert_eq!(c["email"], "jenny@example.com");
    assert_eq!(c["name"], "Jenny Rosen");
    assert_eq!(c["phone"], "+15555550100");
    assert_eq!(c["description"], "VIP");
    assert_eq!(c["metadata"], json!({"tier": "gold"}));
    assert_eq!(c["livemode"], false);
    assert_eq!(c["balance"], 0);
    assert_eq!(c["invoice_settings"]["default_payment_method"], Value::Null);

    assert_eq!(get(&h, &format!("/v1/customers/{id}")).await, (200, c.clone()));

    // A JSON body updates as a form does; an empty value unsets.
    let (status, up) = json(
        h.post(&format!("/v1/customers/{id}"))
            .json(&json!({"name": "Jenny R.", "description": "", "metadata": {"tier": "", "plan": "pro"}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{up}");
    assert_eq!(up["name"], "Jenny R.");
    assert_eq!(up["description"], Value::Null);
    assert_eq!(up["email"], "jenny@example.com");
    assert_eq!(up["metadata"], json!({"plan": "pro"}));

    let deleted = delete(&h, &format!("/v1/customers/{id}")).await;
    assert_eq!(deleted, (200, json!({"id": id, "object": "customer", "deleted": true})));
    assert_eq!(
        get(&h, &format!("/v1/customers/{id}")).await,
        deleted,
        "retrieved as deleted"
    );
    for got in [
        delete(&h, &format!("/v1/customers/{id}")).await,
        post(&h, &format!("/v1/customers/{id}"), "name=x").await,
        get(&h, &format!("/v1/customers/{id}/payment_methods")).await,
    ] {
        assert_error(&got, 404, Some("resource_missing"), Some("customer"));
    }
    // Used elsewhere: a 400 naming the parameter.
    let got = post(
        &h,
        "/v1/payment_intents",
        &format!("amount=500&currency=usd&customer={id}"),
    )
    .await;
    assert_error(&got, 400, Some("resource_missing"), Some("customer"));
    let got = post(&h, "/v1/payment_methods/pm_card_visa/attach", &format!("customer={id}")).await;
    assert_error(&got, 400, Some("resource_missing"), Some("customer"));
    let (_, list) = get(&h, "/v1/customers").await;
    assert!(ids(&list).is_empty(), "lists skip deleted customers");

    assert_error(
        &get(&h, "/v1/customers/cus_nope").await,
        404,
        Some("resource_missing"),
        Some("customer"),
    );
    assert_error(
        &post(&h, "/v1/customers", "phone=123456789012345678901").await,
        400,
        Some("parameter_invalid"),
        Some("phone"),
    );
    assert_error(
        &post(&h, "/v1/customers", "metadata=x").await,
        400,
        Some("parameter_invalid"),
        Some("metadata"),
    );
}

#[tokio::test]
async fn customers_list_by_email_and_created_and_search() {
    let h = Harness::default().await;
    let a = customer(&h, "email=a%40x.io&name=Ann&metadata[plan]=pro").await;
    let b = customer(&h, "email=b%40x.io&name=Bob").await;
    let c = customer(&h, "email=a%40x.io&name=Cy").await;

    let (status, list) = get(&h, "/v1/customers").await;
    assert_eq!(status, 200);
    assert_eq!(list["object"], "list");
    assert_eq!(list["url"], "/v1/customers");
    assert_eq!(ids(&list), [c.as_str(), b.as_str(), a.as_str()]);
    assert_eq!(
        ids(&get(&h, "/v1/customers?email=a%40x.io").await.1),
        [c.as_str(), a.as_str()]
    );
    let (_, page) = get(&h, "/v1/customers?limit=2").await;
    assert_eq!(
        (ids(&page), page["has_more"].clone()),
        (vec![c.clone(), b.clone()], json!(true))
    );
    let (_, rest) = get(&h, &format!("/v1/customers?limit=2&starting_after={b}")).await;
    assert_eq!((ids(&rest), rest["has_more"].clone()), (vec![a.clone()], json!(false)));
    assert_eq!(
        ids(&get(&h, &format!("/v1/customers?ending_before={a}")).await.1),
        [c.as_str(), b.as_str()]
    );

    let (_, first) = get(&h, &format!("/v1/customers/{a}")).await;
    let created = first["created"].as_i64().unwrap();
    assert_eq!(
        ids(&get(&h, &format!("/v1/customers?created[gte]={created}")).await.1).len(),
        3
    );
    assert!(ids(&get(&h, &format!("/v1/customers?created[gt]={}", created + 3600))
        .await
        .1)
    .is_empty());
    assert!(ids(&get(&h, &format!("/v1/customers?created[lt]={created}")).await.1).is_empty());
    assert_error(
        &get(&h, "/v1/customers?created[gt]=soon").await,
        400,
        // Stripe's spec check answers before the rule does.
        Some("parameter_invalid_integer"),
        Some("created[gt]"),
    );
    assert_error(
        &get(&h, "/v1/customers?limit=0").await,
        400,
        Some("parameter_invalid"),
        Some("limit"),
    );

    let search = |q: &'static str| {
        let h = &h;
        async move {
            let (status, r) = json(
                h.get("/v1/customers/search")
                    .query(&[("query", q)])
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, 200, "{r}");
            assert_eq!(r["object"], "search_result");
            assert_eq!(r["url"], "/v1/customers/search");
            ids(&r)
        }
    };
    assert_eq!(search("email:'a@x.io'").await, [c.as_str(), a.as_str()]);
    assert_eq!(search("name:'Bob'").await, [b.as_str()]);
    assert_eq!(search("metadata['plan']:'pro'").await, [a.as_str()]);
    assert_eq!(search("email:'a@x.io' AND name:'Ann'").await, [a.as_str()]);
    let (_, paged) = json(
        h.get("/v1/customers/search")
            .query(&[("query", "-name:'nobody'"), ("limit", "2")])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ids(&paged), [c.as_str(), b.as_str()]);
    let next = paged["next_page"].as_str().unwrap();
    let (_, tail) = json(
        h.get("/v1/customers/search")
            .query(&[("query", "-name:'nobody'"), ("page", next)])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(ids(&tail), [a.as_str()]);
    assert_error(
        &get(&h, "/v1/customers/search").await,
        400,
        Some("parameter_missing"),
        Some("query"),
    );
    assert_error(
        &json(
            h.get("/v1/customers/search")
                .query(&[("query", "email")])
                .send()
                .await
                .unwrap(),
        )
        .await,
        400,
        Some("parameter_invalid"),
        Some("query"),
    );
}

#[tokio::test]
async fn payment_methods_create_retrieve_update() {
    let h = Harness::default().await;
    let (status, pm) = post(
        &h,
        "/v1/payment_methods",
        "type=card&card[token]=tok_visa&metadata[k]=v",
    )
    .await;
    assert_eq!(status, 200, "{pm}");
    let id = pm["id"].as_str().unwrap();
    assert!(id.starts_with("pm_"));
    assert_eq!(pm["object"], "payment_method");
    assert_eq!(pm["type"], "card");
    assert_eq!(pm["customer"], Value::Null);
    assert_eq!(pm["card"]["brand"], "visa");
    assert_eq!(pm["card"]["last4"], "4242");
    assert_eq!(pm["card"]["funding"], "credit");
    assert_eq!(pm["card"]["country"], "US");
    assert_eq!(pm["card"]["fingerprint"].as_str().unwrap().len(), 16);
    assert_eq!(pm["metadata"], json!({"k": "v"}));
    assert_eq!(get(&h, &format!("/v1/payment_methods/{id}")).await, (200, pm.clone()));

    let year = pm["card"]["exp_year"].as_i64().unwrap();
    let (status, amex) = post(
        &h,
        "/v1/payment_methods",
        &format!("type=card&card[number]=378282246310005&card[exp_month]=4&card[exp_year]={year}&card[cvc]=1234&billing_details[name]=Jenny&billing_details[address][postal_code]=94107"),
    )
    .await;
    assert_eq!(status, 200, "{amex}");
    assert_eq!(amex["card"]["brand"], "amex");
    assert_eq!(amex["card"]["last4"], "0005");
    assert_eq!(
        (amex["card"]["exp_month"].as_i64(), amex["card"]["exp_year"].as_i64()),
        (Some(4), Some(year))
    );
    assert_eq!(amex["card"]["checks"]["cvc_check"], "unchecked");
    assert_eq!(amex["billing_details"]["name"], "Jenny");
    assert_eq!(amex["billing_details"]["address"]["postal_code"], "94107");

    let (status, up) = post(
        &h,
        &format!("/v1/payment_methods/{id}"),
        "billing_details[email]=j%40example.com&metadata[k]=&metadata[n]=1",
    )
    .await;
    assert_eq!(status, 200, "{up}");
    assert_eq!(up["billing_details"]["email"], "j@example.com");
    assert_eq!(up["metadata"], json!({"n": "1"}));

    // The magic test ids retrieve as objects under their own name.
    let (status, visa) = get(&h, "/v1/payment_methods/pm_card_mastercard").await;
    assert_eq!(status, 200, "{visa}");
    assert_eq!(
        (visa["id"].as_str(), visa["card"]["last4"].as_str()),
        (Some("pm_card_mastercard"), Some("4444"))
    );

    assert_error(
        &post(&h, "/v1/payment_methods", "card[token]=tok_visa").await,
        400,
        Some("parameter_missing"),
        Some("type"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods", "type=card").await,
        400,
        Some("parameter_missing"),
        Some("card"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods", "type=ideal").await,
        400,
        Some("parameter_invalid"),
        Some("type"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods", "type=card&card[token]=tok_nope").await,
        400,
        Some("resource_missing"),
        Some("card[token]"),
    );
    let (status, bad) = post(
        &h,
        "/v1/payment_methods",
        &format!("type=card&card[number]=4242424242424241&card[exp_month]=1&card[exp_year]={year}"),
    )
    .await;
    assert_eq!(status, 402);
    assert_eq!(bad["error"]["type"], "card_error");
    assert_eq!(bad["error"]["code"], "incorrect_number");
    assert_eq!(bad["error"]["param"], "card[number]");
    let (status, bad) = post(
        &h,
        "/v1/payment_methods",
        "type=card&card[number]=4242424242424242&card[exp_month]=1&card[exp_year]=2001",
    )
    .await;
    assert_eq!((status, &bad["error"]["code"]), (402, &json!("invalid_expiry_year")));
    assert_error(
        &get(&h, "/v1/payment_methods/pm_nope").await,
        404,
        Some("resource_missing"),
        Some("payment_method"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods/pm_nope", "metadata[a]=1").await,
        404,
        Some("resource_missing"),
        Some("payment_method"),
    );
    let (status, _) = post(&h, "/v1/payment_methods/pm_card_visa", "metadata[a]=1").await;
    assert_eq!(status, 400, "a magic test method is not updated");
}

#[tokio::test]
async fn payment_methods_attach_detach_and_list() {
    let h = Harness::default().await;
    let a = customer(&h, "email=a%40x.io").await;
    let b = customer(&h, "email=b%40x.io").await;

    // A magic id is cloned into a new saved method, each time.
    let (status, first) = post(&h, "/v1/payment_methods/pm_card_visa/attach", &format!("customer={a}")).await;
    assert_eq!(status, 200, "{first}");
    let first_id = first["id"].as_str().unwrap().to_string();
    assert!(first_id.starts_with("pm_") && first_id != "pm_card_visa");
    assert_eq!(first["customer"], a.as_str());
    let (_, again) = post(&h, "/v1/payment_methods/pm_card_visa/attach", &format!("customer={a}")).await;
    assert_ne!(again["id"], first["id"]);

    // A saved method is attached in place.
    let (_, pm) = post(&h, "/v1/payment_methods", "type=card&card[token]=tok_mastercard").await;
    let pm_id = pm["id"].as_str().unwrap().to_string();
    let (status, attached) = post(
        &h,
        &format!("/v1/payment_methods/{pm_id}/attach"),
        &format!("customer={b}"),
    )
    .await;
    assert_eq!(
        (status, attached["id"].as_str(), attached["customer"].as_str()),
        (200, Some(pm_id.as_str()), Some(b.as_str()))
    );
    let (status, other) = post(
        &h,
        &format!("/v1/payment_methods/{pm_id}/attach"),
        &format!("customer={a}"),
    )
    .await;
    assert_eq!(status, 400, "{other}");
    assert!(other["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already been attached"));

    let (status, list) = get(&h, &format!("/v1/customers/{a}/payment_methods")).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["url"], format!("/v1/customers/{a}/payment_methods"));
    assert_eq!(ids(&list), [again["id"].as_str().unwrap(), first_id.as_str()]);
    assert_eq!(
        ids(
            &get(&h, &format!("/v1/customers/{a}/payment_methods?type=card&limit=1"))
                .await
                .1
        )
        .len(),
        1
    );
    assert!(
        ids(&get(&h, &format!("/v1/customers/{a}/payment_methods?type=sepa_debit"))
            .await
            .1)
        .is_empty()
    );
    assert_eq!(
        ids(&get(&h, &format!("/v1/payment_methods?customer={b}")).await.1),
        [pm_id.as_str()]
    );
    assert_eq!(ids(&get(&h, "/v1/payment_methods?type=card").await.1).len(), 3);
    assert_error(
        &get(&h, "/v1/payment_methods?customer=cus_nope").await,
        400,
        Some("resource_missing"),
        Some("customer"),
    );
    assert_error(
        &get(&h, "/v1/customers/cus_nope/payment_methods").await,
        404,
        Some("resource_missing"),
        Some("customer"),
    );

    let (status, detached) = post(&h, &format!("/v1/payment_methods/{pm_id}/detach"), "").await;
    assert_eq!((status, &detached["customer"]), (200, &Value::Null), "{detached}");
    assert!(ids(&get(&h, &format!("/v1/customers/{b}/payment_methods")).await.1).is_empty());
    let (status, e) = post(&h, &format!("/v1/payment_methods/{pm_id}/detach"), "").await;
    assert_eq!(status, 400);
    assert!(e["error"]["message"].as_str().unwrap().contains("not attached"), "{e}");
    let (status, e) = post(
        &h,
        &format!("/v1/payment_methods/{pm_id}/attach"),
        &format!("customer={b}"),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("may not be used again"),
        "{e}"
    );

    assert_error(
        &post(&h, "/v1/payment_methods/pm_card_visa/attach", "").await,
        400,
        Some("parameter_missing"),
        Some("customer"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods/pm_card_visa/attach", "customer=cus_nope").await,
        400,
        Some("resource_missing"),
        Some("customer"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods/pm_nope/attach", &format!("customer={a}")).await,
        404,
        Some("resource_missing"),
        Some("payment_method"),
    );
    assert_error(
        &post(&h, "/v1/payment_methods/pm_nope/detach", "").await,
        404,
        Some("resource_missing"),
        Some("payment_method"),
    );
}

#[tokio::test]
async fn a_customer_created_with_a_card_gets_it_as_default() {
    let h = Harness::default().await;
    let (status, c) = post(
        &h,
        "/v1/customers",
        "email=a%40x.io&payment_method=pm_card_visa&invoice_settings[default_payment_method]=pm_card_visa",
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let id = c["id"].as_str().unwrap();
    let default = c["invoice_settings"]["default_payment_method"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(default.starts_with("pm_") && default != "pm_card_visa");
    assert_eq!(
        ids(&get(&h, &format!("/v1/customers/{id}/payment_methods")).await.1),
        [default.as_str()]
    );

    let (_, loose) = post(&h, "/v1/payment_methods", "type=card&card[token]=tok_amex").await;
    let loose = loose["id"].as_str().unwrap();
    let got = post(
        &h,
        &format!("/v1/customers/{id}"),
        &format!("invoice_settings[default_payment_method]={loose}"),
    )
    .await;
    assert_error(&got, 400, None, Some("invoice_settings[default_payment_method]"));
    let got = post(
        &h,
        "/v1/customers",
        "invoice_settings[default_payment_method]=pm_card_visa",
    )
    .await;
    assert_error(&got, 400, None, Some("invoice_settings[default_payment_method]"));
    assert_error(
        &post(&h, "/v1/customers", "payment_method=pm_nope").await,
        400,
        Some("resource_missing"),
        Some("payment_method"),
    );

    post(
        &h,
        &format!("/v1/payment_methods/{loose}/attach"),
        &format!("customer={id}"),
    )
    .await;
    let (status, up) = post(
        &h,
        &format!("/v1/customers/{id}"),
        &format!("invoice_settings[default_payment_method]={loose}"),
    )
    .await;
    assert_eq!(
        (status, up["invoice_settings"]["default_payment_method"].as_str()),
        (200, Some(loose))
    );
    post(&h, &format!("/v1/payment_methods/{loose}/detach"), "").await;
    let (_, after) = get(&h, &format!("/v1/customers/{id}")).await;
    assert_eq!(
        after["invoice_settings"]["default_payment_method"],
        Value::Null,
        "a detached default is forgotten"
    );
}

#[tokio::test]
async fn intents_charge_saved_methods_for_their_customer_only() {
    let h = Harness::default().await;
    let a = customer(&h, "payment_method=pm_card_visa").await;
    let b = customer(&h, "email=b%40x.io").await;
    let (_, saved) = get(&h, &format!("/v1/customers/{a}/payment_methods")).await;
    let saved = saved["data"][0]["id"].as_str().unwrap().to_string();

    let (status, pi) = post(
        &h,
        "/v1/payment_intents",
        &format!(
            "amount=2000&currency=usd&confirm=true&customer={a}&payment_method={saved}&metadata[order_id]=saved-1"
        ),
    )
    .await;
    assert_eq!(status, 200, "{pi}");
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(
        (pi["customer"].as_str(), pi["payment_method"].as_str()),
        (Some(a.as_str()), Some(saved.as_str()))
    );
    let ledger = h.ledger("correlation_prefix=saved-1").await;
    assert_eq!(ledger.len(), 1, "the charge is in the ledger");

    let got = post(
        &h,
        "/v1/payment_intents",
        &format!("amount=2000&currency=usd&confirm=true&customer={b}&payment_method={saved}"),
    )
    .await;
    assert_error(&got, 400, None, Some("payment_method"));
    let got = post(
        &h,
        "/v1/payment_intents",
        &format!("amount=2000&currency=usd&confirm=true&payment_method={saved}"),
    )
    .await;
    assert_error(&got, 400, None, Some("payment_method"));
    // Two steps: B's intent confirmed with A's card.
    let (_, open) = post(
        &h,
        "/v1/payment_intents",
        &format!("amount=2000&currency=usd&customer={b}"),
    )
    .await;
    let got = post(
        &h,
        &format!("/v1/payment_intents/{}/confirm", open["id"].as_str().unwrap()),
        &format!("payment_method={saved}"),
    )
    .await;
    assert_error(&got, 400, None, Some("payment_method"));
    let got = post(&h, "/v1/payment_intents", "amount=2000&currency=usd&customer=cus_nope").await;
    assert_error(&got, 400, Some("resource_missing"), Some("customer"));
    assert_eq!(h.ledger("").await.len(), 1, "no refused intent moved money");

    // Lists of intents filter by a real customer.
    let (_, mine) = get(&h, &format!("/v1/payment_intents?customer={a}")).await;
    assert_eq!(ids(&mine), [pi["id"].as_str().unwrap()]);
}

#[tokio::test]
async fn idempotency_and_reset_cover_customers() {
    let h = Harness::default().await;
    let first = h.form("/v1/customers", "email=k%40x.io", Some("cust-1")).await;
    let (_, a) = json(first).await;
    let replay = h.form("/v1/customers", "email=k%40x.io", Some("cust-1")).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let (_, b) = json(replay).await;
    assert_eq!(a, b);
    let without_key = post(&h, "/v1/customers", "email=other%40x.io").await;
    assert_eq!(without_key.0, 200);
    // The key with other parameters: Stripe's idempotency error, nothing created.
    let reused = json(h.form("/v1/customers", "email=other%40x.io", Some("cust-1")).await).await;
    assert_eq!(reused.0, 400);
    assert_eq!(reused.1["error"]["type"], "idempotency_error");
    assert_eq!(ids(&get(&h, "/v1/customers").await.1).len(), 2);

    let (_, log) = json(h.client.get(h.url("/__fauxpay/requests")).send().await.unwrap()).await;
    let objects: Vec<&Value> = log["data"].as_array().unwrap().iter().map(|r| &r["object"]).collect();
    assert!(
        objects.contains(&&json!(a["id"])),
        "the request log names the customer: {log}"
    );

    let reset = h.client.post(h.url("/__fauxpay/reset")).send().await.unwrap();
    assert_eq!(reset.status(), 200);
    assert!(ids(&get(&h, "/v1/customers").await.1).is_empty());
    assert!(ids(&get(&h, "/v1/payment_methods").await.1).is_empty());
}

#[tokio::test]
async fn a_fault_rule_on_customers_acts_on_customers_only() {
    let toml = "name = \"c\"\ndescription = \"c\"\nseed = 1\n[[rules]]\nkind = \"error\"\nstatus = 503\n[rules.match]\npath = \"/v1/customers*\"\n";
    let profile = faults::parse_profile("test.toml", toml).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")));
    let h = Harness::start(Config {
        profile,
        profile_source: toml.to_string(),
        ..Config::default()
    })
    .await;
    let got = post(&h, "/v1/customers", "email=a%40x.io").await;
    assert_eq!(got.0, 503, "{}", got.1);
    assert_eq!(got.1["error"]["type"], "api_error");
    assert_eq!(get(&h, "/v1/customers").await.0, 503);
    let (status, pm) = post(&h, "/v1/payment_methods", "type=card&card[token]=tok_visa").await;
    assert_eq!(status, 200, "other paths are untouched: {pm}");
    assert!(ids(&get(&h, "/v1/payment_methods").await.1).len() == 1);
    // Before the commit: nothing was created.
    h.client
        .put(h.url("/__fauxpay/profile"))
        .body("name = \"happy\"\ndescription = \"h\"\nseed = 1\n")
        .send()
        .await
        .unwrap();
    assert!(ids(&get(&h, "/v1/customers").await.1).is_empty());
}

/// The real `async-stripe` SDK, changing only its base URL: create a customer, attach a
/// test card (saved as a new `pm_…`), list it, make it the default, charge it, search,
/// and delete (retrieved as the SDK's `DeletedCustomer`).
#[tokio::test]
async fn the_async_stripe_sdk_saves_a_card_for_a_customer() {
    use stripe::ClientBuilder;
    use stripe_core::customer::{
        CreateCustomer, DeleteCustomer, ListPaymentMethodsCustomer, RetrieveCustomer, RetrieveCustomerReturned,
        SearchCustomer, UpdateCustomer, UpdateCustomerInvoiceSettings,
    };
    use stripe_core::payment_intent::CreatePaymentIntent;
    use stripe_core::PaymentIntentStatus;
    use stripe_payment::payment_method::{AttachPaymentMethod, DetachPaymentMethod, RetrievePaymentMethod};
    use stripe_types::{Currency, Expandable};

    let h = Harness::default().await;
    let client = ClientBuilder::new(KEY).url(h.provider.url()).build().unwrap();

    let customer = CreateCustomer::new()
        .email("jenny@example.com")
        .name("Jenny Rosen")
        .metadata([("tier".to_string(), "gold".to_string())])
        .send(&client)
        .await
        .expect("the SDK parses fauxpay's customer");
    assert!(customer.id.as_str().starts_with("cus_"));
    assert_eq!(customer.email.as_deref(), Some("jenny@example.com"));

    let pm = AttachPaymentMethod::new("pm_card_visa")
        .customer(customer.id.as_str())
        .send(&client)
        .await
        .expect("the SDK parses fauxpay's payment method");
    assert_ne!(pm.id.as_str(), "pm_card_visa", "saved as a new payment method");
    assert!(matches!(&pm.customer, Some(Expandable::Id(id)) if *id == customer.id));
    let card = pm.card.as_ref().expect("a card");
    assert_eq!((card.brand.as_str(), card.last4.as_str()), ("visa", "4242"));

    let list = ListPaymentMethodsCustomer::new(customer.id.clone())
        .send(&client)
        .await
        .expect("the SDK parses the list");
    assert_eq!(list.data.iter().map(|p| &p.id).collect::<Vec<_>>(), [&pm.id]);
    assert!(!list.has_more);

    let mut settings = UpdateCustomerInvoiceSettings::new();
    settings.default_payment_method = Some(pm.id.to_string());
    let updated = UpdateCustomer::new(customer.id.clone())
        .invoice_settings(settings)
        .send(&client)
        .await
        .unwrap();
    let default = updated.invoice_settings.and_then(|s| s.default_payment_method);
    assert!(matches!(default, Some(Expandable::Id(id)) if id == pm.id));

    let pi = CreatePaymentIntent::new(2500, Currency::USD)
        .customer(customer.id.as_str())
        .payment_method(pm.id.as_str())
        .confirm(true)
        .send(&client)
        .await
        .unwrap();
    assert_eq!(pi.status, PaymentIntentStatus::Succeeded);
    assert!(matches!(&pi.payment_method, Some(Expandable::Id(id)) if *id == pm.id));

    let found = SearchCustomer::new("email:'jenny@example.com'")
        .send(&client)
        .await
        .unwrap();
    assert_eq!(found.data.iter().map(|c| &c.id).collect::<Vec<_>>(), [&customer.id]);

    let detached = DetachPaymentMethod::new(pm.id.clone()).send(&client).await.unwrap();
    assert!(detached.customer.is_none());
    let again = RetrievePaymentMethod::new(pm.id.clone()).send(&client).await.unwrap();
    assert_eq!(again.id, pm.id);

    let deleted = DeleteCustomer::new(customer.id.clone()).send(&client).await.unwrap();
    assert_eq!(deleted.id, customer.id);
    match RetrieveCustomer::new(customer.id.clone()).send(&client).await.unwrap() {
        RetrieveCustomerReturned::DeletedCustomer(d) => assert_eq!(d.id, customer.id),
        RetrieveCustomerReturned::Customer(c) => panic!("expected a deleted customer, got {c:?}"),
    }
}
