//! Setup intents, exercised without HTTP: every transition and error, and what a
//! succeeded setup does to the payment method.

use serde_json::Value;

use super::*;
use crate::stripe::ids::RequestId;
use crate::test_support::{form, payments};

fn attempt() -> Attempt {
    Attempt::plain(RequestId::generate(), None)
}

fn customer(p: &Payments) -> String {
    p.create_customer(&form("email=a@b.c"), &attempt()).unwrap().json()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn create(p: &Payments, body: &str) -> Result<Value, ApiError> {
    p.create_setup_intent(&form(body), &attempt()).map(|r| r.json())
}

fn method(p: &Payments, si: &Value) -> Arc<PaymentMethod> {
    let id = PaymentMethodId::parse(si["payment_method"].as_str().unwrap()).unwrap();
    p.payment_methods.get(&id).unwrap()
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap()
}

#[test]
fn a_card_is_set_up_in_two_steps_and_saved_to_the_customer() {
    let p = payments();
    let cus = customer(&p);
    let si = create(&p, &format!("customer={cus}&metadata[k]=v&description=card")).unwrap();
    assert_eq!(si["status"], "requires_payment_method");
    assert_eq!(si["usage"], "off_session", "Stripe's default");
    assert_eq!(si["customer"], cus.as_str());
    assert_eq!(si["payment_method"], Value::Null);
    let e = p.confirm_setup_intent(id(&si), &form(""), &attempt()).unwrap_err();
    assert_eq!(
        (e.code.as_deref(), e.param.as_deref()),
        (Some("setup_intent_unexpected_state"), Some("payment_method"))
    );
    let done = p
        .confirm_setup_intent(id(&si), &form("payment_method=pm_card_visa"), &attempt())
        .unwrap()
        .json();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["metadata"]["k"], "v");
    let pm = method(&p, &done);
    assert_ne!(
        done["payment_method"], "pm_card_visa",
        "a magic id is saved as a new pm_"
    );
    assert_eq!(pm.customer().map(|c| c.to_string()), Some(cus.clone()));
    assert!(pm.off_session);
    let listed = p.list_customer_payment_methods(&cus, &form("")).unwrap().json();
    assert_eq!(listed["data"][0]["id"], done["payment_method"]);
    assert_eq!(p.retrieve_setup_intent(id(&si)).unwrap().json(), done);
    let e = p.confirm_setup_intent(id(&si), &form(""), &attempt()).unwrap_err();
    assert!(e.message.contains("already succeeded"), "{e}");
    assert!(e.executed);
}

#[test]
fn confirm_at_create_without_customer_or_off_session_usage() {
    let p = payments();
    let si = create(&p, "payment_method=pm_card_mastercard&confirm=true&usage=on_session").unwrap();
    assert_eq!(
        (&si["status"], &si["usage"]),
        (&"succeeded".into(), &"on_session".into())
    );
    let pm = method(&p, &si);
    assert_eq!(pm.customer(), None, "no customer: saved, unattached");
    assert!(
        !pm.off_session,
        "on_session usage does not set it up for off-session use"
    );
    let e = create(&p, "confirm=true").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("payment_method"));
    assert!(!e.executed, "nothing was created");
}

#[test]
fn decline_cards_decline_on_setup_but_charge_only_cards_do_not() {
    let p = payments();
    let e = create(&p, "payment_method=pm_card_chargeDeclined&confirm=true").unwrap_err();
    assert_eq!((e.status.code(), e.code.as_deref()), (402, Some("card_declined")));
    let si = e.extra.iter().find(|(k, _)| *k == "setup_intent").unwrap().1.clone();
    assert_eq!(si["status"], "requires_payment_method");
    assert_eq!(si["last_setup_error"]["decline_code"], "generic_decline");
    assert_eq!(si["last_setup_error"]["type"], "card_error");
    // A new method on the same intent succeeds, and clears the error.
    let ok = p
        .confirm_setup_intent(id(&si), &form("payment_method=pm_card_visa"), &attempt())
        .unwrap()
        .json();
    assert_eq!(
        (&ok["status"], &ok["last_setup_error"]),
        (&"succeeded".into(), &Value::Null)
    );
    for card in [
        "chargeCustomerFail",
        "authenticationRequiredChargeDeclinedInsufficientFunds",
    ] {
        let si = create(&p, &format!("payment_method=pm_card_{card}&confirm=true")).unwrap();
        assert_ne!(si["status"], "requires_payment_method", "{card}: {si}");
    }
}

#[test]
fn authentication_on_setup_then_off_session_use() {
    let p = payments();
    let cus = customer(&p);
    let si = create(
        &p,
        &format!("customer={cus}&payment_method=pm_card_authenticationRequiredOnSetup&confirm=true"),
    )
    .unwrap();
    assert_eq!(si["status"], "requires_action");
    assert_eq!(si["next_action"]["type"], "use_stripe_sdk");
    assert!(si["next_action"]["use_stripe_sdk"]["stripe_js"]
        .as_str()
        .unwrap()
        .ends_with(&format!("/__fauxpay/3ds/{}", id(&si))));
    let pm = method(&p, &si);
    assert_eq!(pm.customer(), None, "attached only once set up");

    // Failed: back to requires_payment_method; confirming again asks again.
    let failed = p
        .authenticate_setup_intent(id(&si), &form("outcome=fail"), &attempt())
        .unwrap()
        .json();
    assert_eq!(failed["status"], "requires_payment_method");
    assert_eq!(failed["next_action"], Value::Null);
    assert_eq!(
        failed["last_setup_error"]["code"],
        "setup_intent_authentication_failure"
    );
    let e = p
        .authenticate_setup_intent(id(&si), &form("outcome=succeed"), &attempt())
        .unwrap_err();
    assert_eq!(e.code.as_deref(), Some("setup_intent_unexpected_state"));
    let again = p
        .confirm_setup_intent(id(&si), &form("return_url=https://shop.example/saved"), &attempt())
        .unwrap()
        .json();
    assert_eq!(again["status"], "requires_action");
    assert_eq!(again["next_action"]["type"], "redirect_to_url");
    assert_eq!(
        again["next_action"]["redirect_to_url"]["return_url"],
        "https://shop.example/saved"
    );
    assert_eq!(again["last_setup_error"], Value::Null);
    let done = p
        .authenticate_setup_intent(id(&si), &form("outcome=succeed"), &attempt())
        .unwrap()
        .json();
    assert_eq!(
        (&done["status"], &done["next_action"]),
        (&"succeeded".into(), &Value::Null)
    );
    let pm = method(&p, &done);
    assert_eq!(pm.customer().map(|c| c.to_string()), Some(cus));
    assert!(pm.off_session);
    assert!(p
        .authenticate_setup_intent("seti_nope", &form("outcome=fail"), &attempt())
        .is_err());
}

#[test]
fn cancel_and_the_states_it_allows() {
    let p = payments();
    let si = create(&p, "payment_method=pm_card_visa").unwrap();
    let canceled = p
        .cancel_setup_intent(id(&si), &form("cancellation_reason=abandoned"), &attempt())
        .unwrap()
        .json();
    assert_eq!(
        (&canceled["status"], &canceled["cancellation_reason"]),
        (&"canceled".into(), &"abandoned".into())
    );
    for e in [
        p.cancel_setup_intent(id(&si), &form(""), &attempt()).unwrap_err(),
        p.confirm_setup_intent(id(&si), &form(""), &attempt()).unwrap_err(),
    ] {
        assert_eq!(e.code.as_deref(), Some("setup_intent_unexpected_state"), "{e}");
    }
    let done = create(&p, "payment_method=pm_card_visa&confirm=true").unwrap();
    let e = p.cancel_setup_intent(id(&done), &form(""), &attempt()).unwrap_err();
    assert!(e.message.contains("status of succeeded"), "{e}");
    let waiting = create(&p, "payment_method=pm_card_authenticationRequired&confirm=true").unwrap();
    let c = p
        .cancel_setup_intent(id(&waiting), &form(""), &attempt())
        .unwrap()
        .json();
    assert_eq!((&c["status"], &c["next_action"]), (&"canceled".into(), &Value::Null));
    assert_eq!(
        p.cancel_setup_intent("seti_nope", &form(""), &attempt())
            .unwrap_err()
            .status
            .code(),
        404
    );
}

#[test]
fn references_are_checked() {
    let p = payments();
    let (a, b) = (customer(&p), customer(&p));
    let e = create(&p, "customer=cus_nope").unwrap_err();
    assert_eq!((e.status.code(), e.param.as_deref()), (400, Some("customer")));
    let e = create(&p, "payment_method=pm_nope").unwrap_err();
    assert_eq!((e.status.code(), e.param.as_deref()), (400, Some("payment_method")));
    let saved = create(&p, &format!("customer={a}&payment_method=pm_card_visa&confirm=true")).unwrap();
    let saved = saved["payment_method"].as_str().unwrap();
    let e = create(&p, &format!("customer={b}&payment_method={saved}")).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("payment_method"));
    let e = create(&p, "payment_method_types[]=sepa_debit").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("payment_method_types"));
    let e = create(&p, "payment_method_data[type]=card").unwrap_err();
    assert_eq!(e.param.as_deref(), Some("payment_method_data"));
    let ok = create(&p, "payment_method_types[]=card&payment_method_types[]=link").unwrap();
    assert_eq!(ok["payment_method_types"], serde_json::json!(["card", "link"]));
    assert_eq!(p.retrieve_setup_intent("seti_nope").unwrap_err().status.code(), 404);
    assert_eq!(p.retrieve_setup_intent("pi_nope").unwrap_err().status.code(), 404);
}

#[test]
fn lists_filter_by_customer_payment_method_and_created() {
    let p = payments();
    let cus = customer(&p);
    let a = create(&p, &format!("customer={cus}&payment_method=pm_card_visa")).unwrap();
    let b = create(&p, "").unwrap();
    let ids = |q: &str| -> Vec<String> {
        p.list_setup_intents(&form(q)).unwrap().json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(""), [id(&b), id(&a)]);
    assert_eq!(ids(&format!("customer={cus}")), [id(&a)]);
    assert_eq!(
        ids(&format!("payment_method={}", a["payment_method"].as_str().unwrap())),
        [id(&a)]
    );
    assert_eq!(ids("customer=cus_other"), Vec::<String>::new());
    assert_eq!(ids(&format!("created[gt]={}", now_unix() + 5)), Vec::<String>::new());
    assert_eq!(ids("limit=1"), [id(&b)]);
    assert_eq!(
        p.list_setup_intents(&form("")).unwrap().json()["url"],
        "/v1/setup_intents"
    );
}
