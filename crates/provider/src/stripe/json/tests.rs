//! The objects' JSON, checked against Stripe's shape and against each other.

use crate::resources::charges::object::{Charge, NewCharge};
use crate::resources::payment_intents::object::*;
use crate::state::clock::UnixSeconds;
use crate::stripe::cards::{CardRef, TestCard};
use crate::stripe::ids::{ChargeId, CorrelationId, CustomerId, PaymentIntentId, PaymentMethodId};
use crate::stripe::json::*;
use crate::stripe::money::Currency;
use serde_json::Value;

#[test]
fn metadata_keeps_sorted_entries_in_one_allocation() {
    let m = Metadata::from_sorted(&[("a", "1"), ("order_id", "o-42")]);
    assert_eq!(m.get("order_id"), Some("o-42"));
    assert_eq!(m.get("b"), None);
    assert_eq!(m.len(), 2);
    assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a":"1","order_id":"o-42"}"#);
    assert!(Metadata::from_sorted::<&str, &str>(&[]).is_empty());
    assert_eq!(serde_json::to_string(&Metadata::new()).unwrap(), "{}");
}

#[test]
fn a_lone_order_id_is_its_text_and_shares_the_correlation_ids() {
    assert_eq!(std::mem::size_of::<Metadata>(), 8, "one word");
    let empty = Metadata::from_sorted(&[("order_id", "")]);
    assert_eq!((empty.get("order_id"), empty.len()), (Some(""), 1));
    let m = Metadata::from_sorted(&[("order_id", "o-42")]);
    assert_eq!(
        (m.get("order_id"), m.get("a"), m.len(), m.is_empty()),
        (Some("o-42"), None, 1, false)
    );
    assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"order_id":"o-42"}"#);
    let mut writer = Vec::new();
    write::metadata(&mut writer, &m);
    assert_eq!(writer, br#"{"order_id":"o-42"}"#);
    assert_ne!(m, Metadata::from_sorted(&[("order_id", "o-43")]));
    assert_ne!(m, Metadata::from_sorted(&[("a", "1"), ("order_id", "o-42")]));
    assert_ne!(m, Metadata::from_sorted(&[("order", "o-42")]));

    let same_text =
        |m: &Metadata, c: &CorrelationId| std::ptr::eq(m.get("order_id").unwrap().as_ptr(), c.as_str().as_ptr());
    let (mut shared, id) = (m.clone(), CorrelationId::new("o-42"));
    assert!(!same_text(&shared, &id), "two allocations until shared");
    shared.share(Some(&id));
    assert!(same_text(&shared, &id), "the metadata keeps the correlation id's text");
    assert_eq!(shared, m);
    let mut other = m.clone();
    other.share(Some(&CorrelationId::new("o-7")));
    assert_eq!(
        other.get("order_id"),
        Some("o-42"),
        "a different correlation id is not taken"
    );
    let mut many = Metadata::from_sorted(&[("a", "1"), ("order_id", "o-42")]);
    many.share(Some(&id));
    assert_eq!(many.len(), 2);
}

#[test]
fn objects_serialise_stripe_fields_with_id_first() {
    let card = TestCard::resolve("pm_card_visa").unwrap();
    let charge = Charge::new(NewCharge {
        amount: 2000,
        currency: Currency::parse("usd").unwrap(),
        card,
        decline: None,
        capture: true,
        payment_intent: None,
        payment_method: Some(PaymentMethodId::generate()),
        description: None,
        metadata: &Metadata::from_sorted(&[("order_id", "o-1")]),
        correlation_id: None,
    });
    let text = serde_json::to_string(&charge).unwrap();
    assert!(text.starts_with(&format!(r#"{{"id":"{}","object":"charge""#, charge.id)));
    let v = charge.to_json();
    assert_eq!(v["payment_method_details"]["card"]["last4"], "4242");
    assert_eq!(v["outcome"]["type"], "authorized");
    assert_eq!(v["paid"], true);
    assert!(v["balance_transaction"].as_str().unwrap().starts_with("txn_"));
    assert_eq!(v["billing_details"]["address"]["city"], Value::Null);
    assert_eq!(v["invoice"], Value::Null);
    assert_eq!(v["payment_method_details"]["card"]["network_token"]["used"], false);
    assert_eq!(v.as_object().unwrap().len(), 42);
}

#[test]
fn written_json_is_exactly_the_serialised_json() {
    let visa = TestCard::resolve("pm_card_visa").unwrap();
    let declined = TestCard::resolve("pm_card_chargeDeclinedInsufficientFunds").unwrap();
    let metadata = Metadata::from_sorted(&[("note", "a \"quoted\" \\ line\n"), ("order_id", "o-1")]);
    for (card, capture, description) in [
        (visa, true, None),
        (visa, false, Some("tea & \"cake\" \u{1F600}")),
        (declined, true, None),
    ] {
        let mut charge = Charge::new(NewCharge {
            amount: 2000,
            currency: Currency::parse("eur").unwrap(),
            card,
            decline: card.decline.clone(),
            capture,
            payment_intent: Some(PaymentIntentId::generate()),
            payment_method: Some(PaymentMethodId::generate()),
            description: description.map(Box::from),
            metadata: &metadata,
            correlation_id: None,
        });
        let mut out = Vec::new();
        charge.write_json(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&charge).unwrap());
        charge.refunded = true;
        charge.payment_intent = None;
        charge.set_customer(Some(CustomerId::generate()));
        let mut out = Vec::new();
        charge.write_json(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&charge).unwrap());
    }
    let mut pi = PaymentIntent {
        created: UnixSeconds::now(),
        card: CardRef::of(visa),
        ..PaymentIntent::example()
    };
    let check = |pi: &PaymentIntent| {
        let mut out = Vec::new();
        pi.write_json(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(pi).unwrap());
    };
    check(&pi);
    pi.set_amount_capturable(5000); // in the box of what most intents lack
    check(&pi);
    pi.automatic_payment_methods = Some(false);
    pi.cancellation_reason = Some(CancellationReason::Abandoned);
    pi.latest_charge = Some(ChargeId::generate());
    pi.payment_method = Some(PaymentMethodId::generate());
    pi.metadata = metadata.clone();
    pi.text = IntentText {
        customer: Some("cus_1".into()),
        description: Some("line\tbreak \"q\"".into()),
        receipt_email: Some("a@b.c".into()),
        statement_descriptor: Some("ACME".into()),
        statement_descriptor_suffix: Some("X".into()),
        transfer_group: Some("g".into()),
        checkout_session: None,
        canceled_at: None,
        last_payment_error: None,
        next_action: None,
        amount_capturable: 5000,
    }
    .boxed();
    pi.set_canceled_at(1_700_000_000); // beside the texts, in their box
    pi.set_last_payment_error(Some(LastPaymentError::from_decline(
        declined.decline.as_ref().unwrap(),
        ChargeId::generate(),
    )));
    pi.status = IntentStatus::Canceled;
    check(&pi);
    pi.automatic_payment_methods = Some(true);
    check(&pi);
    pi.set_last_payment_error(Some(LastPaymentError::authentication_failure()));
    pi.status = IntentStatus::RequiresAction;
    pi.setup_future_usage = Some(crate::resources::setup_intents::object::Usage::OffSession);
    for return_url in [None, Some("https://shop.example/back?\"x\"")] {
        pi.set_next_action(Some(crate::resources::three_ds::action::NextAction::new(
            Some("http://127.0.0.1:1"),
            &pi.id.as_str(),
            return_url,
        )));
        check(&pi);
    }
}
