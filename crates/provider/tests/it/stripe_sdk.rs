//! Drives fauxpay with a real Stripe client written elsewhere (the `async-stripe`
//! crate), changing only its base URL: create and confirm, a decline as the client's
//! card error, a replay with an idempotency key; and a saved card's life: customer →
//! setup intent (off-session) → off-session payment, and a 3-D Secure payment completed
//! through fauxpay's authenticate endpoint.

use fauxpay_testkit::provider as common;

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

/// The SDK's own flow for saving a card and charging it later: a customer, a setup
/// intent for off-session use on a card that asks for authentication "unless set up"
/// (completed through the authenticate endpoint, as the customer would on the page), an
/// off-session payment that needs no authentication; then a 3-D Secure payment, waiting
/// in `requires_action` with Stripe's `next_action`, completed the same way.
#[tokio::test]
async fn the_async_stripe_sdk_sets_up_a_card_and_pays_off_session_and_through_3ds() {
    use stripe_core::customer::CreateCustomer;
    use stripe_core::payment_intent::{CreatePaymentIntentOffSession, RetrievePaymentIntent};
    use stripe_core::setup_intent::{CreateSetupIntent, CreateSetupIntentUsage, RetrieveSetupIntent};
    use stripe_core::SetupIntentStatus;
    use stripe_types::Expandable;

    let h = Harness::default().await;
    let client = ClientBuilder::new(common::KEY).url(h.provider.url()).build().unwrap();
    let customer = CreateCustomer::new()
        .email("sam@example.com")
        .send(&client)
        .await
        .unwrap();

    let si = CreateSetupIntent::new()
        .customer(customer.id.as_str())
        .payment_method("pm_card_authenticationRequiredOnSetup")
        .usage(CreateSetupIntentUsage::OffSession)
        .confirm(true)
        .send(&client)
        .await
        .expect("the SDK parses fauxpay's setup intent");
    assert_eq!(si.status, SetupIntentStatus::RequiresAction);
    let action = si.next_action.as_ref().expect("a next action");
    assert_eq!(action.type_, "use_stripe_sdk");
    assert!(si
        .client_secret
        .as_deref()
        .unwrap()
        .starts_with(&format!("{}_secret_", si.id)));
    let done = h
        .form(
            &format!("/__fauxpay/setup_intents/{}/authenticate", si.id),
            "outcome=succeed",
            None,
        )
        .await;
    assert_eq!(done.status(), 200);
    let si = RetrieveSetupIntent::new(si.id.clone()).send(&client).await.unwrap();
    assert_eq!(si.status, SetupIntentStatus::Succeeded);
    assert_eq!(si.usage, "off_session");
    let Some(Expandable::Id(pm)) = si.payment_method else {
        panic!("a saved payment method id: {:?}", si.payment_method);
    };

    // Later, the customer away: an off-session payment with the saved card.
    let renewal = CreatePaymentIntent::new(4200, Currency::USD)
        .customer(customer.id.as_str())
        .payment_method(pm.as_str())
        .off_session(CreatePaymentIntentOffSession::Bool(true))
        .confirm(true)
        .metadata([("order_id".to_string(), "sdk-renewal".to_string())])
        .send(&client)
        .await
        .expect("no authentication needed off-session once set up");
    assert_eq!(renewal.status, PaymentIntentStatus::Succeeded);
    assert_eq!(h.ledger("correlation_prefix=sdk-renewal").await.len(), 1);

    // A 3-D Secure payment: requires_action, authenticated, then retrieved as succeeded.
    let pi = CreatePaymentIntent::new(2000, Currency::USD)
        .payment_method("pm_card_threeDSecure2Required")
        .confirm(true)
        .return_url("https://shop.example/back")
        .metadata([("order_id".to_string(), "sdk-3ds".to_string())])
        .send(&client)
        .await
        .unwrap();
    assert_eq!(pi.status, PaymentIntentStatus::RequiresAction);
    let action = pi.next_action.as_ref().expect("a next action");
    assert_eq!(action.type_, "redirect_to_url");
    let redirect = action.redirect_to_url.as_ref().unwrap();
    assert_eq!(
        redirect.url.as_deref(),
        Some(&*h.url(&format!("/__fauxpay/3ds/{}", pi.id)))
    );
    assert_eq!(redirect.return_url.as_deref(), Some("https://shop.example/back"));
    let done = h
        .form(
            &format!("/__fauxpay/payment_intents/{}/authenticate", pi.id),
            "outcome=succeed",
            None,
        )
        .await;
    assert_eq!(done.status(), 200);
    let pi = RetrievePaymentIntent::new(pi.id.clone()).send(&client).await.unwrap();
    assert_eq!(pi.status, PaymentIntentStatus::Succeeded);
    assert_eq!(pi.amount_received, 2000);
    assert!(pi.next_action.is_none());
    assert_eq!(h.ledger("correlation_prefix=sdk-3ds").await.len(), 1);

    // The same, with the authentication failed: back to requires_payment_method, with
    // Stripe's payment_intent_authentication_failure, and nothing charged.
    let pi = CreatePaymentIntent::new(2000, Currency::USD)
        .payment_method("pm_card_authenticationRequired")
        .confirm(true)
        .metadata([("order_id".to_string(), "sdk-3ds-fail".to_string())])
        .send(&client)
        .await
        .unwrap();
    assert_eq!(pi.status, PaymentIntentStatus::RequiresAction);
    let failed = h
        .form(
            &format!("/__fauxpay/payment_intents/{}/authenticate", pi.id),
            "outcome=fail",
            None,
        )
        .await;
    assert_eq!(failed.status(), 200);
    let pi = RetrievePaymentIntent::new(pi.id.clone()).send(&client).await.unwrap();
    assert_eq!(pi.status, PaymentIntentStatus::RequiresPaymentMethod);
    let error = pi.last_payment_error.as_ref().expect("a last payment error");
    assert_eq!(
        error.code.as_ref().map(|c| c.as_str()),
        Some("payment_intent_authentication_failure")
    );
    assert!(h.ledger("correlation_prefix=sdk-3ds-fail").await.is_empty());
}
