//! Payment intents' newer rules, exercised without HTTP: 3-D Secure, off-session
//! payments, `setup_future_usage`, and updates.

use serde_json::Value;

use super::*;
use crate::idempotency::key::IdempotencyKey;
use crate::state::ledger::RecordFilter;
use crate::stripe::ids::{PaymentMethodId, RequestId};
use crate::test_support::{form, payments_with as payments};

fn attempt(key: &str) -> Attempt {
    Attempt {
        origin: Some("http://fauxpay.test:12111".into()),
        ..Attempt::plain(RequestId::generate(), IdempotencyKey::parse(key).ok())
    }
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap()
}

fn create(p: &Payments, body: &str) -> Result<Value, ApiError> {
    p.create_intent(&form(&format!("amount=2000&currency=usd&{body}")), &attempt("create"))
        .map(|r| r.json())
}

fn authenticate(p: &Payments, pi: &Value, outcome: &str, key: &str) -> Result<Value, ApiError> {
    p.authenticate_intent(id(pi), &form(&format!("outcome={outcome}")), &attempt(key))
        .map(|r| r.json())
}

fn customer(p: &Payments) -> String {
    p.create_customer(&form("email=a@b.c"), &crate::test_support::attempt())
        .unwrap()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The intent a card error embeds.
fn embedded(e: &ApiError) -> Value {
    e.extra.iter().find(|(k, _)| *k == "payment_intent").unwrap().1.clone()
}

fn ledger(p: &Payments) -> usize {
    p.ledger.records(&RecordFilter::default()).len()
}

#[test]
fn a_3ds_card_waits_for_authentication_then_charges_under_the_intents_correlation_id() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = create(
        &p,
        "confirm=true&payment_method=pm_card_authenticationRequired&metadata[order_id]=o-3ds",
    )
    .unwrap();
    assert_eq!(pi["status"], "requires_action");
    assert_eq!(pi["latest_charge"], Value::Null, "nothing charged yet");
    assert_eq!(pi["next_action"]["type"], "use_stripe_sdk");
    assert_eq!(
        pi["next_action"]["use_stripe_sdk"]["stripe_js"],
        format!("http://fauxpay.test:12111/__fauxpay/3ds/{}", id(&pi))
    );
    assert_eq!(ledger(&p), 0);
    assert!(p.charges.is_empty());

    let done = authenticate(&p, &pi, "succeed", "auth-1").unwrap();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["amount_received"], 2000);
    assert_eq!(done["next_action"], Value::Null);
    let records = p.ledger.records(&RecordFilter::default());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].correlation_id.as_ref().unwrap().as_str(), "o-3ds");
    assert_eq!(
        records[0].idempotency_key.as_ref().unwrap().as_str(),
        "auth-1",
        "the authenticate request moved the money"
    );
    let e = authenticate(&p, &pi, "succeed", "auth-2").unwrap_err();
    assert_eq!(e.code.as_deref(), Some("payment_intent_unexpected_state"));
    assert!(e.message.contains("not awaiting authentication"), "{e}");
    assert_eq!(ledger(&p), 1);
}

#[test]
fn failed_authentication_leaves_requires_payment_method_and_no_charge() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = create(
        &p,
        "confirm=true&payment_method=pm_card_threeDSecure2Required&return_url=https%3A%2F%2Fshop.example%2Fback",
    )
    .unwrap();
    assert_eq!(pi["next_action"]["type"], "redirect_to_url");
    assert_eq!(
        pi["next_action"]["redirect_to_url"]["return_url"],
        "https://shop.example/back"
    );
    let failed = authenticate(&p, &pi, "fail", "f").unwrap();
    assert_eq!(failed["status"], "requires_payment_method");
    assert_eq!(failed["next_action"], Value::Null);
    let err = &failed["last_payment_error"];
    assert_eq!(err["code"], "payment_intent_authentication_failure");
    assert_eq!(err["type"], "invalid_request_error");
    assert!(err.get("charge").is_none() && err.get("decline_code").is_none());
    assert!(p.charges.is_empty());
    // Confirm again with another card: charged at once.
    let ok = p
        .confirm_intent(id(&pi), &form("payment_method=pm_card_visa"), &attempt("c"))
        .unwrap()
        .json();
    assert_eq!(
        (&ok["status"], &ok["last_payment_error"]),
        (&"succeeded".into(), &Value::Null)
    );
}

#[test]
fn declines_after_authentication_and_forced_declines() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = create(
        &p,
        "confirm=true&payment_method=pm_card_authenticationRequiredChargeDeclinedInsufficientFunds",
    )
    .unwrap();
    assert_eq!(pi["status"], "requires_action");
    let e = authenticate(&p, &pi, "succeed", "a").unwrap_err();
    assert_eq!(
        (e.status.code(), e.decline_code.as_deref()),
        (402, Some("insufficient_funds"))
    );
    let after = embedded(&e);
    assert_eq!(after["status"], "requires_payment_method");
    assert_eq!(after["last_payment_error"]["decline_code"], "insufficient_funds");
    assert_eq!(after["last_payment_error"]["charge"], after["latest_charge"]);
    let charge = p
        .retrieve_charge(after["latest_charge"].as_str().unwrap())
        .unwrap()
        .json();
    assert_eq!(charge["status"], "failed");
    assert_eq!(ledger(&p), 0);

    // The raw number works as well as the pm_card_ name.
    let pi = create(
        &p,
        "confirm=true&payment_method_data[type]=card&payment_method_data[card][number]=4000008400001629&payment_method_data[card][exp_month]=12&payment_method_data[card][exp_year]=2040",
    )
    .unwrap();
    assert_eq!(pi["status"], "requires_action");
    let e = authenticate(&p, &pi, "succeed", "b").unwrap_err();
    assert_eq!(
        (e.code.as_deref(), e.decline_code.as_deref()),
        (Some("card_declined"), Some("generic_decline"))
    );

    // A fault's forced decline acts on the request that charges: the authentication.
    let pi = create(&p, "confirm=true&payment_method=pm_card_authenticationRequired").unwrap();
    let forced = Attempt {
        decline: Some(crate::stripe::cards::Decline {
            code: "card_declined".into(),
            decline_code: "do_not_honor".into(),
            message: "Your card was declined.".into(),
        }),
        ..attempt("forced")
    };
    let e = p
        .authenticate_intent(id(&pi), &form("outcome=succeed"), &forced)
        .unwrap_err();
    assert_eq!(e.decline_code.as_deref(), Some("do_not_honor"));
}

#[test]
fn duplicates_are_judged_when_the_authenticated_payment_is_charged() {
    let p = payments(DuplicatePolicy::Reject);
    let first = create(&p, "confirm=true&payment_method=pm_card_visa&metadata[order_id]=o-dup").unwrap();
    assert_eq!(first["status"], "succeeded");
    let second = create(
        &p,
        "confirm=true&payment_method=pm_card_authenticationRequired&metadata[order_id]=o-dup",
    )
    .unwrap();
    assert_eq!(second["status"], "requires_action");
    let e = authenticate(&p, &second, "succeed", "dup").unwrap_err();
    assert_eq!(e.decline_code.as_deref(), Some("duplicate_transaction"));
    assert_eq!(p.ledger.blocked_duplicates(), 1);
    assert_eq!(ledger(&p), 1);
}

#[test]
fn off_session_payments_on_cards_that_want_authentication_are_declined() {
    let p = payments(DuplicatePolicy::Allow);
    for card in [
        "authenticationRequired",
        "authenticationRequiredOnSetup",
        "threeDSecure2Required",
    ] {
        let e = create(
            &p,
            &format!("confirm=true&off_session=true&payment_method=pm_card_{card}"),
        )
        .unwrap_err();
        assert_eq!(
            (e.status.code(), e.code.as_deref(), e.decline_code.as_deref()),
            (402, Some("authentication_required"), Some("authentication_required")),
            "{card}"
        );
        let pi = embedded(&e);
        assert_eq!(pi["status"], "requires_payment_method");
        assert_eq!(pi["last_payment_error"]["code"], "authentication_required");
    }
    let ok = create(&p, "confirm=true&off_session=recurring&payment_method=pm_card_visa").unwrap();
    assert_eq!(ok["status"], "succeeded");
    let e = create(&p, "off_session=true&payment_method=pm_card_visa").unwrap_err();
    assert_eq!((e.status.code(), e.param.as_deref()), (400, Some("off_session")));
    let e = create(&p, "confirm=true&off_session=sometimes&payment_method=pm_card_visa").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("off_session"));
}

#[test]
fn a_card_set_up_off_session_pays_off_session_without_authentication() {
    let p = payments(DuplicatePolicy::Allow);
    let cus = customer(&p);
    // Saved with setup_future_usage=off_session, authenticated on session.
    let first = create(
        &p,
        &format!("customer={cus}&confirm=true&setup_future_usage=off_session&payment_method=pm_card_authenticationRequiredOnSetup"),
    )
    .unwrap();
    assert_eq!(
        (&first["status"], &first["setup_future_usage"]),
        (&"requires_action".into(), &"off_session".into())
    );
    let saved = first["payment_method"].as_str().unwrap().to_string();
    assert!(
        p.retrieve_payment_method(&saved).is_err(),
        "saved only once the payment succeeds"
    );
    let paid = authenticate(&p, &first, "succeed", "a").unwrap();
    assert_eq!(paid["status"], "succeeded");
    let pm = p.payment_methods.get(&PaymentMethodId::parse(&saved).unwrap()).unwrap();
    assert_eq!(pm.customer().map(|c| c.to_string()), Some(cus.clone()));
    assert!(pm.off_session);
    // Later, off-session and on-session: no authentication.
    for extra in ["&off_session=true", ""] {
        let later = create(
            &p,
            &format!("customer={cus}&confirm=true&payment_method={saved}{extra}"),
        )
        .unwrap();
        assert_eq!(later["status"], "succeeded", "{extra}");
    }
    // The always-authenticate card is not exempted by being set up.
    let always = create(
        &p,
        &format!(
            "customer={cus}&confirm=true&setup_future_usage=off_session&payment_method=pm_card_authenticationRequired"
        ),
    )
    .unwrap();
    authenticate(&p, &always, "succeed", "b").unwrap();
    let saved = always["payment_method"].as_str().unwrap();
    let e = create(
        &p,
        &format!("customer={cus}&confirm=true&off_session=true&payment_method={saved}"),
    )
    .unwrap_err();
    assert_eq!(e.code.as_deref(), Some("authentication_required"));
}

#[test]
fn setup_future_usage_on_session_or_without_customer() {
    let p = payments(DuplicatePolicy::Allow);
    let cus = customer(&p);
    let pi = create(
        &p,
        &format!("customer={cus}&confirm=true&setup_future_usage=on_session&payment_method=pm_card_authenticationRequiredOnSetup"),
    )
    .unwrap();
    authenticate(&p, &pi, "succeed", "a").unwrap();
    let saved = pi["payment_method"].as_str().unwrap();
    let pm = p.payment_methods.get(&PaymentMethodId::parse(saved).unwrap()).unwrap();
    assert!(!pm.off_session, "on-session use only");
    let e = create(
        &p,
        &format!("customer={cus}&confirm=true&off_session=true&payment_method={saved}"),
    )
    .unwrap_err();
    assert_eq!(e.code.as_deref(), Some("authentication_required"));
    // No customer: saved unattached (attachable later), as at Stripe.
    let loose = create(
        &p,
        "confirm=true&setup_future_usage=off_session&payment_method=pm_card_visa",
    )
    .unwrap();
    let pm = p
        .payment_methods
        .get(&PaymentMethodId::parse(loose["payment_method"].as_str().unwrap()).unwrap())
        .unwrap();
    assert_eq!((pm.customer(), pm.off_session), (None, true));
    // Declined: nothing saved.
    let e = create(
        &p,
        &format!("customer={cus}&confirm=true&setup_future_usage=off_session&payment_method=pm_card_chargeDeclined"),
    )
    .unwrap_err();
    let declined = embedded(&e)["payment_method"].as_str().unwrap().to_string();
    assert!(p.retrieve_payment_method(&declined).is_err());
}

#[test]
fn updates_change_what_the_status_allows() {
    let p = payments(DuplicatePolicy::Allow);
    let cus = customer(&p);
    let pi = create(&p, "metadata[a]=1").unwrap();
    let up = p
        .update_intent(
            id(&pi),
            &form(&format!(
                "amount=3100&currency=eur&description=tea&metadata[b]=2&customer={cus}&receipt_email=a%40b.c&setup_future_usage=off_session&capture_method=manual&statement_descriptor=TEA"
            )),
            &attempt("u1"),
        )
        .unwrap()
        .json();
    assert_eq!((&up["amount"], &up["currency"]), (&3100.into(), &"eur".into()));
    assert_eq!(up["metadata"], serde_json::json!({"a": "1", "b": "2"}));
    assert_eq!(up["customer"], cus.as_str());
    assert_eq!(up["description"], "tea");
    assert_eq!(up["receipt_email"], "a@b.c");
    assert_eq!(up["setup_future_usage"], "off_session");
    assert_eq!(up["capture_method"], "manual");
    assert_eq!(up["statement_descriptor"], "TEA");
    assert_eq!(up["status"], "requires_payment_method");
    let up = p
        .update_intent(
            id(&pi),
            &form("payment_method=pm_card_visa&receipt_email=&setup_future_usage="),
            &attempt("u2"),
        )
        .unwrap()
        .json();
    assert_eq!(up["status"], "requires_confirmation");
    assert_eq!(
        (&up["receipt_email"], &up["setup_future_usage"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(up["description"], "tea", "not sent: kept");
    let e = p
        .update_intent(id(&pi), &form("amount=10&currency=usd"), &attempt("u3"))
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("amount"), "below the minimum");
    assert!(!e.executed);

    // Once paid, only the descriptive fields change.
    let paid = p.confirm_intent(id(&pi), &form(""), &attempt("c")).unwrap().json();
    assert_eq!(paid["status"], "requires_capture");
    for field in [
        "amount=5000",
        "currency=gbp",
        "payment_method=pm_card_mastercard",
        "capture_method=automatic",
    ] {
        let e = p.update_intent(id(&pi), &form(field), &attempt("u4")).unwrap_err();
        let name = field.split('=').next().unwrap();
        assert_eq!(
            (e.code.as_deref(), e.param.as_deref()),
            (Some("payment_intent_unexpected_state"), Some(name)),
            "{field}"
        );
        assert!(e.message.contains("status of requires_capture"), "{e}");
    }
    let up = p
        .update_intent(
            id(&pi),
            &form("metadata[a]=&description=&receipt_email=r%40b.c"),
            &attempt("u5"),
        )
        .unwrap()
        .json();
    assert_eq!(up["metadata"], serde_json::json!({"b": "2"}));
    assert_eq!(
        (&up["description"], &up["receipt_email"]),
        (&Value::Null, &"r@b.c".into())
    );
    assert_eq!(up["status"], "requires_capture");
    assert_eq!(
        p.update_intent("pi_nope", &form(""), &attempt("x"))
            .unwrap_err()
            .status
            .code(),
        404
    );
    let e = p
        .update_intent(id(&pi), &form("customer=cus_nope"), &attempt("x"))
        .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("customer"));
}

#[test]
fn an_update_voids_a_pending_authentication_and_can_set_the_correlation_id() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = create(&p, "confirm=true&payment_method=pm_card_authenticationRequired").unwrap();
    assert_eq!(pi["status"], "requires_action");
    let up = p
        .update_intent(id(&pi), &form("metadata[note]=x"), &attempt("m"))
        .unwrap()
        .json();
    assert_eq!(up["status"], "requires_action", "metadata does not void it");
    let up = p
        .update_intent(id(&pi), &form("amount=2500&metadata[order_id]=o-late"), &attempt("a"))
        .unwrap()
        .json();
    assert_eq!(
        (&up["status"], &up["next_action"]),
        (&"requires_confirmation".into(), &Value::Null)
    );
    let paid = p
        .confirm_intent(id(&pi), &form("payment_method=pm_card_visa"), &attempt("c"))
        .unwrap()
        .json();
    assert_eq!(
        (&paid["status"], &paid["amount_received"]),
        (&"succeeded".into(), &2500.into())
    );
    let records = p.ledger.records(&RecordFilter::default());
    assert_eq!(records[0].correlation_id.as_ref().unwrap().as_str(), "o-late");
    // After the payment the correlation id stays what the money moved under.
    p.update_intent(id(&pi), &form("metadata[order_id]=o-other"), &attempt("m2"))
        .unwrap();
    let pi = p.intents.get(&PaymentIntentId::parse(id(&pi)).unwrap()).unwrap();
    assert_eq!(pi.correlation_id.as_ref().unwrap().as_str(), "o-late");
}

#[test]
fn cancel_clears_a_pending_authentication() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = create(&p, "confirm=true&payment_method=pm_card_authenticationRequired").unwrap();
    let c = p
        .cancel_intent(
            id(&pi),
            &form("cancellation_reason=abandoned"),
            &crate::test_support::attempt(),
        )
        .unwrap()
        .json();
    assert_eq!((&c["status"], &c["next_action"]), (&"canceled".into(), &Value::Null));
    assert_eq!(c["cancellation_reason"], "abandoned");
    let e = authenticate(&p, &pi, "succeed", "late").unwrap_err();
    assert!(e.message.contains("status is canceled"), "{e}");
}

/// The events one request made, oldest first.
fn event_log(p: &Payments) -> Vec<Value> {
    let all = usize::MAX - 1;
    let mut events: Vec<Value> = p
        .events
        .table
        .page(crate::state::table::Cursor::Start, all, |_| true)
        .items
        .iter()
        .map(|e| e.to_json())
        .collect();
    events.reverse();
    events
}

#[test]
fn created_and_confirmed_at_once_the_created_event_shows_the_intent_before_its_confirmation() {
    // One intent per outcome a confirmation has: paid, authorised, declined, waiting for
    // 3-D Secure. `payment_intent.created` is written from the confirmed intent, as created.
    let cases = [
        (
            "pm_card_visa",
            "",
            "succeeded",
            vec!["charge.succeeded", "payment_intent.succeeded"],
        ),
        (
            "pm_card_visa",
            "&capture_method=manual",
            "requires_capture",
            vec!["charge.succeeded", "payment_intent.amount_capturable_updated"],
        ),
        (
            "pm_card_chargeDeclined",
            "",
            "requires_payment_method",
            vec!["charge.failed", "payment_intent.payment_failed"],
        ),
        (
            "pm_card_authenticationRequired",
            "",
            "requires_action",
            vec!["payment_intent.requires_action"],
        ),
    ];
    for (method, extra, status, after) in cases {
        let p = payments(DuplicatePolicy::Allow);
        let body = format!("confirm=true&payment_method={method}&metadata[order_id]=o-1&description=d{extra}");
        let pi = match create(&p, &body) {
            Ok(pi) => pi,
            Err(e) => embedded(&e),
        };
        assert_eq!(pi["status"], status, "{method}{extra}");
        let events = event_log(&p);
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        let mut expected = vec!["payment_intent.created"];
        expected.extend(after);
        assert_eq!(types, expected, "{method}{extra}: stored in the order they happened");
        let created = &events[0]["data"]["object"];
        let mut as_created = pi.clone();
        for (field, value) in [
            ("status", Value::from("requires_confirmation")),
            ("amount_capturable", Value::from(0)),
            ("amount_received", Value::from(0)),
            ("latest_charge", Value::Null),
            ("last_payment_error", Value::Null),
            ("next_action", Value::Null),
        ] {
            as_created[field] = value;
        }
        assert_eq!(created, &as_created, "{method}{extra}");
        let last = &events[events.len() - 1]["data"]["object"];
        assert_eq!(last, &pi, "{method}{extra}: the outcome shows the intent as it is");
        assert!(
            events.iter().all(|e| e["request"]["idempotency_key"] == "create"),
            "{method}{extra}: every event names the request"
        );
        let ids: std::collections::HashSet<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), events.len(), "{method}{extra}: distinct ids");
    }
}
