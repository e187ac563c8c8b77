//! Payment intents over real sockets, the parts beyond create and confirm: update
//! (`POST /v1/payment_intents/{intent}`) in the states Stripe allows each field,
//! `amount_to_capture` on capture, and `cancellation_reason` on cancel.

use fauxpay_testkit::provider as common;
use fauxpay_testkit::provider::post_json as post;

use common::Harness;
use serde_json::{json, Value};

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id: {v}")).to_string()
}

#[tokio::test]
async fn updates_before_the_payment_change_anything_after_it_only_descriptions() {
    let h = Harness::default().await;
    let (_, cus) = post(&h, "/v1/customers", "email=a%40b.c").await;
    let (_, pi) = post(&h, "/v1/payment_intents", "amount=1000&currency=usd&metadata[a]=1").await;
    let path = format!("/v1/payment_intents/{}", id(&pi));
    let (status, up) = post(
        &h,
        &path,
        &format!(
            "amount=2500&currency=eur&customer={}&description=Tea&metadata[b]=2&receipt_email=r%40b.c&setup_future_usage=on_session&statement_descriptor=TEA+SHOP&transfer_group=g1",
            id(&cus)
        ),
    )
    .await;
    assert_eq!(status, 200, "{up}");
    assert_eq!(
        (&up["amount"], &up["currency"], &up["customer"]),
        (&json!(2500), &json!("eur"), &json!(id(&cus)))
    );
    assert_eq!(up["metadata"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        (&up["description"], &up["receipt_email"]),
        (&json!("Tea"), &json!("r@b.c"))
    );
    assert_eq!(
        (&up["setup_future_usage"], &up["statement_descriptor"]),
        (&json!("on_session"), &json!("TEA SHOP"))
    );
    assert_eq!(up["status"], "requires_payment_method");
    // A payment method makes it ready to confirm; capture_method too can change.
    let (_, up) = post(
        &h,
        &path,
        "payment_method=pm_card_visa&capture_method=manual&setup_future_usage=",
    )
    .await;
    assert_eq!(
        (&up["status"], &up["capture_method"]),
        (&json!("requires_confirmation"), &json!("manual"))
    );
    assert_eq!(up["setup_future_usage"], Value::Null, "an empty value unsets");
    let (_, held) = post(&h, &format!("{path}/confirm"), "").await;
    assert_eq!(
        (&held["status"], &held["amount_capturable"]),
        (&json!("requires_capture"), &json!(2500))
    );

    // Once paid: the amount and payment method are Stripe's state errors, naming the field.
    for (body, field) in [
        ("amount=100", "amount"),
        ("currency=usd", "currency"),
        ("payment_method=pm_card_mastercard", "payment_method"),
        ("setup_future_usage=off_session", "setup_future_usage"),
        (&format!("customer={}", id(&cus)) as &str, "customer"),
    ] {
        let (status, e) = post(&h, &path, body).await;
        assert_eq!(status, 400, "{body}: {e}");
        assert_eq!(
            (&e["error"]["code"], &e["error"]["param"]),
            (&json!("payment_intent_unexpected_state"), &json!(field)),
            "{body}"
        );
    }
    // Descriptions and metadata still change.
    let (status, up) = post(&h, &path, "description=&metadata[a]=&receipt_email=s%40b.c").await;
    assert_eq!(status, 200, "{up}");
    assert_eq!(
        (&up["description"], &up["metadata"]),
        (&Value::Null, &json!({"b": "2"}))
    );
    assert_eq!(
        (&up["receipt_email"], &up["status"]),
        (&json!("s@b.c"), &json!("requires_capture"))
    );

    // Bad values are refused before anything changes.
    for (body, param) in [
        ("amount=10", "amount"),
        ("customer=cus_nope", "customer"),
        ("capture_method=later", "capture_method"),
        ("amout=5", "amout"),
    ] {
        let (_, open) = post(&h, "/v1/payment_intents", "amount=1000&currency=usd").await;
        let (status, e) = post(&h, &format!("/v1/payment_intents/{}", id(&open)), body).await;
        assert_eq!((status, &e["error"]["param"]), (400, &json!(param)), "{body}: {e}");
    }
    let (status, e) = post(&h, "/v1/payment_intents/pi_doesnotexist", "description=x").await;
    assert_eq!((status, &e["error"]["code"]), (404, &json!("resource_missing")));
}

#[tokio::test]
async fn an_update_during_authentication_voids_it() {
    let h = Harness::default().await;
    let (_, pi) = post(
        &h,
        "/v1/payment_intents",
        "amount=1000&currency=usd&confirm=true&payment_method=pm_card_authenticationRequired",
    )
    .await;
    assert_eq!(pi["status"], "requires_action");
    let path = format!("/v1/payment_intents/{}", id(&pi));
    let (_, up) = post(&h, &path, "metadata[k]=v").await;
    assert_eq!(up["status"], "requires_action", "metadata leaves it waiting");
    let (_, up) = post(&h, &path, "payment_method=pm_card_visa&metadata[order_id]=o-upd").await;
    assert_eq!(
        (&up["status"], &up["next_action"]),
        (&json!("requires_confirmation"), &Value::Null)
    );
    let (status, e) = post(
        &h,
        &format!("/__fauxpay/payment_intents/{}/authenticate", id(&pi)),
        "outcome=succeed",
    )
    .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("payment_intent_unexpected_state"))
    );
    let (_, paid) = post(&h, &format!("{path}/confirm"), "").await;
    assert_eq!(paid["status"], "succeeded");
    let ledger = h.ledger("correlation_prefix=o-upd").await;
    assert_eq!(ledger.len(), 1, "the correlation id set by the update is the ledger's");
}

#[tokio::test]
async fn capture_part_and_cancel_with_a_reason() {
    let h = Harness::default().await;
    let (_, pi) = post(
        &h,
        "/v1/payment_intents",
        "amount=3000&currency=usd&confirm=true&capture_method=manual&payment_method=pm_card_visa&metadata[order_id]=o-cap",
    )
    .await;
    let capture = format!("/v1/payment_intents/{}/capture", id(&pi));
    for amount in ["0", "3001"] {
        let (status, e) = post(&h, &capture, &format!("amount_to_capture={amount}")).await;
        assert_eq!(
            (status, &e["error"]["param"]),
            (400, &json!("amount_to_capture")),
            "{amount}"
        );
    }
    let (status, done) = post(&h, &capture, "amount_to_capture=1800").await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (&done["status"], &done["amount_received"], &done["amount_capturable"]),
        (&json!("succeeded"), &json!(1800), &json!(0))
    );
    let ledger = h.ledger("correlation_prefix=o-cap").await;
    assert_eq!(ledger[0]["amount"], 1800);
    let (status, e) = post(&h, &capture, "").await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("payment_intent_unexpected_state"))
    );

    for reason in ["duplicate", "fraudulent", "requested_by_customer", "abandoned"] {
        let (_, open) = post(&h, "/v1/payment_intents", "amount=500&currency=usd").await;
        let (status, c) = post(
            &h,
            &format!("/v1/payment_intents/{}/cancel", id(&open)),
            &format!("cancellation_reason={reason}"),
        )
        .await;
        assert_eq!(status, 200, "{c}");
        assert_eq!(
            (&c["status"], &c["cancellation_reason"]),
            (&json!("canceled"), &json!(reason))
        );
        assert!(c["canceled_at"].is_i64());
    }
    let (_, open) = post(&h, "/v1/payment_intents", "amount=500&currency=usd").await;
    let (status, e) = post(
        &h,
        &format!("/v1/payment_intents/{}/cancel", id(&open)),
        "cancellation_reason=automatic",
    )
    .await;
    assert_eq!(
        (status, &e["error"]["param"]),
        (400, &json!("cancellation_reason")),
        "Stripe sets that one itself"
    );
    let (status, e) = post(&h, &format!("/v1/payment_intents/{}/cancel", id(&done)), "").await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("payment_intent_unexpected_state"))
    );
}
