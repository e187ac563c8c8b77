//! The reference merchants under the bundled fault profiles, driven by a correct client
//! (one key per checkout, retried with that key): idempotent has zero double charges and
//! resolves every order; naive and lock-only double-charge exactly once per answer the
//! provider lost after charging.

use fauxpay_testkit::merchant as merchant_common;

use fauxpay_merchant::Strategy;
use merchant_common::scenarios::profile_run;
use merchant_common::Backend;

const ORDERS: usize = 100;

#[tokio::test]
async fn idempotent_is_clean_under_flaky_network() {
    let run = profile_run(Strategy::Idempotent, "flaky-network", &Backend::Memory, ORDERS).await;
    run.assert_clean();
    assert!(run.hidden_charges > 0, "the profile should have hidden some answers");
}

#[tokio::test]
async fn idempotent_is_clean_under_lost_responses() {
    let run = profile_run(Strategy::Idempotent, "lost-responses", &Backend::Memory, ORDERS).await;
    run.assert_clean();
    assert!(run.hidden_charges > 0, "the profile should have hidden some answers");
}

#[tokio::test]
async fn idempotent_is_clean_under_ambiguous_errors() {
    let run = profile_run(Strategy::Idempotent, "ambiguous-errors", &Backend::Memory, ORDERS).await;
    run.assert_clean();
    assert!(run.hidden_charges > 0, "the profile should have hidden some answers");
}

#[tokio::test]
async fn idempotent_is_clean_under_chaos() {
    let run = profile_run(Strategy::Idempotent, "chaos", &Backend::Memory, ORDERS).await;
    run.assert_clean();
    assert!(run.hidden_charges > 0, "the profile should have hidden some answers");
}

/// Under lost-responses every 502 a client saw was a charge whose answer was dropped, so
/// each is one extra charge in the ledger.
async fn double_charges_match_lost_answers(strategy: Strategy) {
    let run = profile_run(strategy, "lost-responses", &Backend::Memory, ORDERS).await;
    assert!(
        !run.duplicates.is_empty(),
        "{strategy} should double-charge under lost-responses"
    );
    for (order_id, (outcome, seen)) in &run.outcomes {
        let lost = seen.iter().filter(|s| **s == 502).count();
        let charges = run.charges.get(order_id).map_or(0, Vec::len);
        let paid = usize::from(matches!(outcome, merchant_common::Outcome::Paid(_)));
        assert_eq!(charges, lost + paid, "{order_id}: seen {seen:?}, {charges} charges");
    }
    assert_eq!(
        run.duplicates.len(),
        run.charges.values().filter(|c| c.len() > 1).count()
    );
}

#[tokio::test]
async fn naive_double_charges_under_lost_responses() {
    double_charges_match_lost_answers(Strategy::Naive).await;
}

#[tokio::test]
async fn lock_only_double_charges_under_lost_responses() {
    double_charges_match_lost_answers(Strategy::LockOnly).await;
}
