//! The payment rules, exercised without HTTP.

use serde_json::Value;

use super::*;
use crate::idempotency::key::IdempotencyKey;
use crate::stripe::ids::RequestId;
use crate::test_support::{form, payments_with as payments};

fn attempt(key: &str) -> Attempt {
    Attempt::plain(RequestId::generate(), IdempotencyKey::parse(key).ok())
}

#[test]
fn confirmed_intent_captures_one_charge_into_the_ledger() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = p
        .create_intent(
            &form("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o1"),
            &attempt("k1"),
        )
        .unwrap()
        .json();
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(pi["amount_received"], 2000);
    let ch = p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap().json();
    assert_eq!(ch["captured"], true);
    assert_eq!(ch["payment_method_details"]["card"]["last4"], "4242");
    let recs = p.ledger.records(&Default::default());
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].correlation_id.as_ref().unwrap().as_str(), "o1");
    assert_eq!(recs[0].idempotency_key.as_ref().unwrap().as_str(), "k1");
}

#[test]
fn decline_leaves_intent_requiring_payment_method_and_no_money_moved() {
    let p = payments(DuplicatePolicy::Allow);
    let err = p
        .create_intent(
            &form("amount=2000&currency=usd&confirm=true&payment_method=pm_card_chargeDeclinedInsufficientFunds"),
            &attempt("k"),
        )
        .unwrap_err();
    assert_eq!(err.status.code(), 402);
    assert_eq!(err.decline_code.as_deref(), Some("insufficient_funds"));
    assert!(err.executed);
    let body = err.body();
    assert_eq!(body["error"]["payment_intent"]["status"], "requires_payment_method");
    assert_eq!(
        body["error"]["payment_intent"]["last_payment_error"]["decline_code"],
        "insufficient_funds"
    );
    assert!(p.ledger.records(&Default::default()).is_empty());
}

#[test]
fn manual_capture_moves_money_only_on_capture() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = p
        .create_intent(
            &form("amount=5000&currency=eur&capture_method=manual&confirm=true&payment_method=pm_card_mastercard"),
            &attempt("a"),
        )
        .unwrap()
        .json();
    assert_eq!(pi["status"], "requires_capture");
    assert!(p.ledger.records(&Default::default()).is_empty());
    let id = pi["id"].as_str().unwrap();
    let done = p
        .capture_intent(id, &form("amount_to_capture=4000"), &attempt("b"))
        .unwrap()
        .json();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["amount_received"], 4000);
    assert_eq!(p.ledger.records(&Default::default())[0].amount(), 4000);
    assert!(p.capture_intent(id, &form(""), &attempt("c")).unwrap_err().executed);
}

#[test]
fn second_charge_for_an_order_is_flagged_or_rejected() {
    let allow = payments(DuplicatePolicy::Allow);
    let body = form("amount=1000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=o7");
    allow.create_intent(&body, &attempt("k1")).unwrap();
    allow.create_intent(&body, &attempt("k2")).unwrap();
    assert_eq!(allow.ledger.summary()["duplicate_group_count"], 1);

    let reject = payments(DuplicatePolicy::Reject);
    reject.create_intent(&body, &attempt("k1")).unwrap();
    let err = reject.create_intent(&body, &attempt("k2")).unwrap_err();
    assert_eq!(err.decline_code.as_deref(), Some("duplicate_transaction"));
    assert_eq!(reject.ledger.summary()["duplicate_group_count"], 0);
    assert_eq!(reject.ledger.blocked_duplicates(), 1);
}

#[test]
fn refunds_are_bounded_by_what_was_captured() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = p
        .create_intent(
            &form("amount=1000&currency=usd&confirm=true&payment_method=tok_visa&metadata[order_id]=r1"),
            &attempt("k"),
        )
        .unwrap()
        .json();
    let pid = pi["id"].as_str().unwrap();
    let r = p
        .create_refund(&form(&format!("payment_intent={pid}&amount=400")), &attempt("r1"))
        .unwrap()
        .json();
    assert_eq!(r["amount"], 400);
    let err = p
        .create_refund(&form(&format!("payment_intent={pid}&amount=700")), &attempt("r2"))
        .unwrap_err();
    assert_eq!(err.param.as_deref(), Some("amount"));
    let rest = p
        .create_refund(
            &form(&format!("charge={}", pi["latest_charge"].as_str().unwrap())),
            &attempt("r3"),
        )
        .unwrap()
        .json();
    assert_eq!(rest["amount"], 600);
    let s = p.ledger.summary();
    assert_eq!(s["refunds"], 2);
    assert_eq!(s["refunded"]["usd"], 1000);
    assert_eq!(s["over_refunds"].as_array().unwrap().len(), 1);
    assert_eq!(
        p.retrieve_charge(pi["latest_charge"].as_str().unwrap()).unwrap().json()["refunded"],
        true
    );
}

#[test]
fn confirm_and_cancel_follow_the_state_machine() {
    let p = payments(DuplicatePolicy::Allow);
    let pi = p
        .create_intent(&form("amount=1000&currency=usd"), &attempt("k"))
        .unwrap()
        .json();
    assert_eq!(pi["status"], "requires_payment_method");
    let id = pi["id"].as_str().unwrap();
    assert!(p.confirm_intent(id, &form(""), &attempt("c0")).is_err());
    let declined = p
        .confirm_intent(id, &form("payment_method=pm_card_chargeDeclined"), &attempt("c1"))
        .unwrap_err();
    assert_eq!(declined.decline_code.as_deref(), Some("generic_decline"));
    let ok = p
        .confirm_intent(id, &form("payment_method=pm_card_visa"), &attempt("c2"))
        .unwrap()
        .json();
    assert_eq!(ok["status"], "succeeded");
    assert_eq!(ok["last_payment_error"], Value::Null);
    assert!(p
        .confirm_intent(id, &form("payment_method=pm_card_visa"), &attempt("c3"))
        .is_err());
    assert!(p.cancel_intent(id, &form(""), &crate::test_support::attempt()).is_err());
    let other = p
        .create_intent(&form("amount=1000&currency=usd"), &attempt("k"))
        .unwrap()
        .json();
    let canceled = p
        .cancel_intent(
            other["id"].as_str().unwrap(),
            &form("cancellation_reason=abandoned"),
            &crate::test_support::attempt(),
        )
        .unwrap()
        .json();
    assert_eq!(canceled["status"], "canceled");
}

#[test]
fn search_finds_by_metadata_and_lists_paginate() {
    let p = payments(DuplicatePolicy::Allow);
    for i in 0..15 {
        p.create_intent(
            &form(&format!("amount=1000&currency=usd&metadata[order_id]=o{i}")),
            &attempt("k"),
        )
        .unwrap();
    }
    let found = p
        .search_intents(&form("query=metadata['order_id']:'o3'"))
        .unwrap()
        .json();
    assert_eq!(found["data"].as_array().unwrap().len(), 1);
    assert_eq!(found["data"][0]["metadata"]["order_id"], "o3");
    let first = p.list_intents(&form("limit=10")).unwrap().json();
    assert_eq!(first["has_more"], true);
    let last_id = first["data"][9]["id"].as_str().unwrap();
    let second = p
        .list_intents(&form(&format!("limit=10&starting_after={last_id}")))
        .unwrap()
        .json();
    assert_eq!(second["data"].as_array().unwrap().len(), 5);
    assert_eq!(second["has_more"], false);
    assert!(p.list_intents(&form("limit=101")).is_err());
}

#[test]
fn validation_errors_name_the_param() {
    let p = payments(DuplicatePolicy::Allow);
    let cases = [
        ("currency=usd", "amount"),
        ("amount=100", "currency"),
        ("amount=abc&currency=usd", "amount"),
        ("amount=100&currency=usd&payment_method=pm_nope", "payment_method"),
        ("amount=100&currency=usd&capture_method=later", "capture_method"),
        ("amount=100&currency=usd&confirm=true", "payment_method"),
    ];
    for (body, param) in cases {
        let e = p.create_intent(&form(body), &attempt("k")).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{body}");
        assert!(!e.executed, "{body}");
    }
    let long = format!("amount=100&currency=usd&metadata[{}]=v", "k".repeat(41));
    assert!(p
        .create_intent(&form(&long), &attempt("k"))
        .unwrap_err()
        .param
        .unwrap()
        .starts_with("metadata["));
}

#[test]
fn retiring_a_window_forgets_old_payments_but_keeps_duplicates_and_exact_totals() {
    let p = payments(DuplicatePolicy::Allow);
    let pay = |order: &str, key: &str| {
        p.create_intent(
            &form(&format!(
                "amount=700&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}"
            )),
            &attempt(key),
        )
        .unwrap()
        .json()
    };
    let once = pay("once", "k1");
    let first = pay("twice", "k2");
    let second = pay("twice", "k3");
    let before = p.ledger.summary();
    // Everything so far is older than the window's start.
    let cutoff = crate::state::clock::now_ms() + 2_000;
    assert!(p.retire_before(cutoff) > 0);
    assert!(
        p.retrieve_intent(once["id"].as_str().unwrap()).is_err(),
        "gone from memory"
    );
    assert!(p.retrieve_intent(second["id"].as_str().unwrap()).is_err());
    assert_eq!(p.events.table.len(), 0);
    let after = p.ledger.summary();
    for field in [
        "charges",
        "captured",
        "duplicate_group_count",
        "duplicate_charges",
        "correlation_ids",
    ] {
        assert_eq!(after[field], before[field], "{field}");
    }
    // The duplicate group keeps both its charges, with their intents.
    let group = &after["duplicate_groups"][0];
    assert_eq!(group["correlation_id"], "twice");
    let intents: Vec<&str> = group["charges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["payment_intent"].as_str().unwrap())
        .collect();
    assert_eq!(intents, [first["id"].as_str().unwrap(), second["id"].as_str().unwrap()]);
    assert_eq!(p.ledger.records(&Default::default()).len(), 2);
}
