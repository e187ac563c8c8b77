//! Drives fauxpay with a real Stripe client written elsewhere (the `async-stripe`
//! crate), changing only its base URL: create and confirm, a decline as the client's
//! card error, and a replay with an idempotency key.

mod common;

use common::Harness;
use stripe::{
    ApiErrorsCode, ApiErrorsType, ClientBuilder, IdempotencyKey, RequestStrategy, StripeError, StripeRequest,
};
use stripe_core::payment_intent::{ConfirmPaymentIntent, CreatePaymentIntent};
use stripe_core::PaymentIntentStatus;
use stripe_types::Currency;

#[tokio::test]
async fn the_async_stripe_sdk_works_against_fauxpay() {
    let h = Harness::default().await;
    let client = ClientBuilder::new(common::KEY).url(h.provider.url()).build().unwrap();

    let pi = CreatePaymentIntent::new(2000, Currency::USD)
        .payment_method("pm_card_visa")
        .confirm(true)
        .metadata([("order_id".to_string(), "sdk-1".to_string())])
        .send(&client)
        .await
        .expect("the SDK parses fauxpay's payment intent");
    assert_eq!(pi.status, PaymentIntentStatus::Succeeded);
    assert_eq!(pi.amount_received, 2000);
    assert!(pi.id.as_str().starts_with("pi_"));

    // Two-step: create, then confirm.
    let open = CreatePaymentIntent::new(1500, Currency::EUR)
        .send(&client)
        .await
        .unwrap();
    assert_eq!(open.status, PaymentIntentStatus::RequiresPaymentMethod);
    let confirmed = ConfirmPaymentIntent::new(open.id.clone())
        .payment_method("pm_card_mastercard")
        .send(&client)
        .await
        .unwrap();
    assert_eq!(confirmed.status, PaymentIntentStatus::Succeeded);

    let err = CreatePaymentIntent::new(2000, Currency::USD)
        .payment_method("pm_card_chargeDeclinedInsufficientFunds")
        .confirm(true)
        .send(&client)
        .await
        .unwrap_err();
    match &err {
        StripeError::Stripe(e, status) => {
            assert_eq!(*status, 402);
            assert_eq!(e.type_, ApiErrorsType::CardError);
            assert_eq!(e.code, Some(ApiErrorsCode::CardDeclined));
            assert_eq!(e.decline_code.as_deref(), Some("insufficient_funds"));
        }
        other => panic!("expected a card error, got {other:?}"),
    }

    let key = IdempotencyKey::new("sdk-order-42").unwrap();
    let req = CreatePaymentIntent::new(2000, Currency::USD)
        .payment_method("pm_card_visa")
        .confirm(true)
        .metadata([("order_id".to_string(), "sdk-2".to_string())]);
    let a = req
        .customize()
        .request_strategy(RequestStrategy::Idempotent(key.clone()))
        .send(&client)
        .await
        .unwrap();
    let b = req
        .customize()
        .request_strategy(RequestStrategy::Idempotent(key))
        .send(&client)
        .await
        .unwrap();
    assert_eq!(a.id, b.id, "the replay returns the same payment intent");
    let ledger = h.ledger("correlation_prefix=sdk-2").await;
    assert_eq!(ledger.len(), 1, "and charges once");
    assert_eq!(ledger[0]["idempotency_key"], "sdk-order-42");
}
