//! Scenarios run against the idempotent merchant on every backend (in memory, and Redis +
//! PostgreSQL), plus the load-like profile runs shared by all strategies.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fauxpay_merchant::Strategy;
use reqwest::Client;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::*;

/// Lost answers (dropped, reset) and ambiguous 500s after the commit: the first request is
/// already answered 200 (the inline search finds the charge), retries replay it, a new key
/// gets the same payment, and the provider charged once.
pub async fn lost_and_ambiguous_answers(backend: &Backend) {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), backend, |_| {}).await;
    let c = Client::new();
    let run = run_id("lost");
    let pms = [
        "pm_fault_drop_after_commit",
        "pm_fault_reset_after_commit",
        "pm_fault_error_after_commit",
    ];
    let mut paid = HashMap::new();
    for (i, pm) in pms.iter().enumerate() {
        let order_id = format!("{run}-{i}");
        let key = format!("{order_id}-key");
        let b = body(&order_id, 2000, pm);
        let first = checkout(&c, &m.url(), &b, Some(&key)).await.expect("answer");
        assert_eq!(first.status, 200, "{pm}: {:?}", first.body);
        assert!(!first.replayed);
        let pi = first.body["payment_intent"].as_str().unwrap().to_string();
        assert!(pi.starts_with("pi_"));
        assert_eq!(first.body["status"], "paid");
        let again = checkout(&c, &m.url(), &b, Some(&key)).await.expect("answer");
        assert_eq!((again.status, again.replayed), (200, true), "{pm}");
        assert_eq!(again.body, first.body);
        let other_key = checkout(&c, &m.url(), &b, Some(&format!("{key}-2")))
            .await
            .expect("answer");
        assert_eq!(other_key.status, 200);
        assert_eq!(other_key.body["payment_intent"], pi.as_str());
        let (status, row) = order(&c, &m.url(), &order_id).await;
        assert_eq!(status, 200);
        assert_eq!(row["status"], "paid");
        assert_eq!(row["payment_intent"], pi.as_str());
        assert_eq!(row["attempts"], 1, "paid without a second provider call: {row}");
        paid.insert(order_id, pi);
    }
    let charges = charges_by_order(&c, &p.url(), &run).await;
    for (order_id, pi) in &paid {
        let got = &charges[order_id];
        assert_eq!(got.len(), 1, "{order_id}: {got:?}");
        assert_eq!(got[0]["payment_intent"], pi.as_str());
    }
    assert!(duplicate_orders(&c, &p.url(), &run).await.is_empty());
    m.shutdown().await;
}

/// A provider that hangs after charging: the merchant times out, moves the order to
/// `reconciling`, and the search finds the charge.
pub async fn provider_timeout_is_reconciled(backend: &Backend) {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), backend, |c| {
        c.provider_timeout = Duration::from_millis(500);
    })
    .await;
    let c = Client::new();
    let order_id = run_id("hang");
    let b = body(&order_id, 1500, "pm_fault_hang_after_commit");
    let started = Instant::now();
    let (outcome, seen) =
        checkout_until_final(&c, &m.url(), &b, Some("k"), Instant::now() + Duration::from_secs(8)).await;
    let Outcome::Paid(pi) = outcome else {
        panic!("expected paid, got {outcome:?} after {seen:?}")
    };
    assert!(started.elapsed() < Duration::from_secs(5));
    let charges = charges_by_order(&c, &p.url(), &order_id).await;
    assert_eq!(charges[&order_id].len(), 1);
    assert_eq!(charges[&order_id][0]["payment_intent"], pi.as_str());
    m.shutdown().await;
    // The provider is still holding the hung request for 30 s: it is dropped, not shut down.
}

/// A failure before the commit charges nothing: the order stays `reconciling` until the
/// attempt has settled, the reconciler then proves there is no charge and reopens it, and
/// a retry tries again (with the same provider key) — still charging nothing twice.
pub async fn no_charge_reopens_the_order(backend: &Backend) {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), backend, |c| {
        c.reconcile_settle = Some(Duration::from_millis(300));
    })
    .await;
    let c = Client::new();
    let order_id = run_id("before");
    let b = body(&order_id, 2000, "pm_fault_drop_before_commit");
    let first = checkout(&c, &m.url(), &b, Some("k1")).await.expect("answer");
    assert_eq!(first.status, 503, "{:?}", first.body);
    assert_eq!(first.body["status"], "reconciling");
    assert_eq!(first.body["error"], "outcome_unknown");
    assert_eq!(first.retry_after.as_deref(), Some("1"));
    assert!(
        wait_settled(&c, &m, std::slice::from_ref(&order_id), Duration::from_secs(5))
            .await
            .is_empty()
    );
    let (_, row) = order(&c, &m.url(), &order_id).await;
    assert_eq!(row["status"], "pending", "{row}");
    assert_eq!(row["attempts"], 1);
    let second = checkout(&c, &m.url(), &b, Some("k1")).await.expect("answer");
    assert_eq!(second.status, 503);
    let (_, row) = order(&c, &m.url(), &order_id).await;
    assert_eq!(row["attempts"], 2);
    assert_eq!(
        row["generation"], 0,
        "a retry after reconciliation keeps the provider key"
    );
    assert!(charges_by_order(&c, &p.url(), &order_id).await.is_empty());
    m.shutdown().await;
}

/// Declines are final and replayed; a key reused with another body is a 422; a new key
/// may pay a declined order (a new generation); an order id reused for another amount is
/// a 422.
pub async fn key_semantics(backend: &Backend) {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), backend, |_| {}).await;
    let c = Client::new();
    let order_id = run_id("keys");
    let declined = body(&order_id, 2000, "pm_card_chargeDeclinedInsufficientFunds");
    let r = checkout(&c, &m.url(), &declined, Some("k1")).await.unwrap();
    assert_eq!(r.status, 402, "{:?}", r.body);
    assert_eq!(r.body["status"], "declined");
    assert_eq!(r.body["decline_code"], "insufficient_funds");
    assert_eq!(r.body["order_id"], order_id.as_str());
    let replay = checkout(&c, &m.url(), &declined, Some("k1")).await.unwrap();
    assert_eq!((replay.status, replay.replayed), (402, true));
    assert_eq!(replay.body, r.body);

    let visa = body(&order_id, 2000, "pm_card_visa");
    let reused = checkout(&c, &m.url(), &visa, Some("k1")).await.unwrap();
    assert_eq!(reused.status, 422);
    assert_eq!(reused.body["error"], "idempotency_key_reused");

    let paid = checkout(&c, &m.url(), &visa, Some("k2")).await.unwrap();
    assert_eq!(paid.status, 200, "{:?}", paid.body);
    let (_, row) = order(&c, &m.url(), &order_id).await;
    assert_eq!(
        (row["generation"].as_u64(), row["attempts"].as_u64()),
        (Some(1), Some(2))
    );
    let replay = checkout(&c, &m.url(), &visa, Some("k2")).await.unwrap();
    assert_eq!((replay.status, replay.replayed), (200, true));
    assert_eq!(replay.body["payment_intent"], paid.body["payment_intent"]);

    let other_amount = checkout(&c, &m.url(), &body(&order_id, 999, "pm_card_visa"), Some("k3"))
        .await
        .unwrap();
    assert_eq!(other_amount.status, 422);
    assert_eq!(other_amount.body["error"], "order_mismatch");

    let charges = charges_by_order(&c, &p.url(), &order_id).await;
    assert_eq!(charges[&order_id].len(), 1);
    m.shutdown().await;
}

/// Many concurrent requests with one key (a double click), and with one order but many
/// keys: 409s while one is in flight, then every one gets the same payment; one charge.
pub async fn concurrent_requests(backend: &Backend) {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), backend, |_| {}).await;
    let c = Client::new();
    let run = run_id("conc");
    let same_key = format!("{run}-samekey");
    let same_order = format!("{run}-sameorder");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut tasks = JoinSet::new();
    for i in 0..8 {
        // The slow body keeps the first request in flight for the provider timeout.
        for (order_id, key) in [
            (same_key.clone(), "the-key".to_string()),
            (same_order.clone(), format!("key-{i}")),
        ] {
            let (c, url) = (c.clone(), m.url());
            tasks.spawn(async move {
                let b = body(&order_id, 2000, "pm_fault_slow_body");
                let (outcome, seen) = checkout_until_final(&c, &url, &b, Some(&key), deadline).await;
                (order_id, outcome, seen)
            });
        }
    }
    let mut pis: HashMap<String, Vec<String>> = HashMap::new();
    let mut saw_409 = false;
    while let Some(done) = tasks.join_next().await {
        let (order_id, outcome, seen) = done.unwrap();
        saw_409 |= seen.contains(&409);
        match outcome {
            Outcome::Paid(pi) => pis.entry(order_id).or_default().push(pi),
            other => panic!("{order_id}: {other:?} after {seen:?}"),
        }
    }
    assert!(saw_409, "overlapping requests should have met a 409");
    let charges = charges_by_order(&c, &p.url(), &run).await;
    for order_id in [&same_key, &same_order] {
        let got = &pis[order_id];
        assert_eq!(got.len(), 8);
        assert!(got.iter().all(|pi| pi == &got[0]), "{order_id}: {got:?}");
        assert_eq!(charges[order_id].len(), 1, "{order_id}");
        assert_eq!(charges[order_id][0]["payment_intent"], got[0].as_str());
    }
    m.shutdown().await;
}

/// Without an `Idempotency-Key` there is no replay, but the order row still guards the
/// payment: a retry of a lost answer gets the same payment, never a second charge.
pub async fn no_key_still_charges_once(backend: &Backend) {
    let p = provider("happy").await;
    let m = merchant(Strategy::Idempotent, &p.url(), backend, |_| {}).await;
    let c = Client::new();
    let order_id = run_id("nokey");
    let b = body(&order_id, 2000, "pm_fault_drop_after_commit");
    let first = checkout(&c, &m.url(), &b, None).await.unwrap();
    assert_eq!(first.status, 200, "{:?}", first.body);
    let second = checkout(&c, &m.url(), &b, None).await.unwrap();
    assert_eq!(second.status, 200);
    assert!(!second.replayed);
    assert_eq!(second.body["payment_intent"], first.body["payment_intent"]);
    assert_eq!(charges_by_order(&c, &p.url(), &order_id).await[&order_id].len(), 1);
    m.shutdown().await;
}

/// What a load-like run produced.
pub struct LoadRun {
    pub run: String,
    pub outcomes: HashMap<String, (Outcome, Vec<u16>)>,
    /// Orders still `processing` or `reconciling` after the settling wait.
    pub unsettled: Vec<String>,
    pub charges: HashMap<String, Vec<Value>>,
    pub duplicates: Vec<String>,
    /// Each order's row at the end.
    pub rows: HashMap<String, Value>,
    /// Charges whose answer a fault hid from the merchant (dropped, reset, hung or
    /// replaced by a 5xx after the commit): the hazard the merchant had to survive.
    pub hidden_charges: usize,
}

/// `orders` checkouts (one key each, retried by a correct client) against `strategy` under
/// the provider fault `profile`, `concurrency` at a time; then waits for reconciliation.
pub async fn profile_run(strategy: Strategy, profile: &str, backend: &Backend, orders: usize) -> LoadRun {
    let p = provider(profile).await;
    let m = merchant(strategy, &p.url(), backend, |c| {
        c.provider_timeout = Duration::from_secs(1);
    })
    .await;
    let c = Client::new();
    let run = run_id(profile);
    let deadline = Instant::now() + Duration::from_secs(9);
    let gate = Arc::new(Semaphore::new(8));
    let mut tasks = JoinSet::new();
    for i in 0..orders {
        let (c, url, gate) = (c.clone(), m.url(), gate.clone());
        let order_id = format!("{run}-{i}");
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let b = body(&order_id, 1000 + i as u64, "pm_card_visa");
            let key = format!("{order_id}-key");
            let result = checkout_until_final(&c, &url, &b, Some(&key), deadline).await;
            (order_id, result)
        });
    }
    let mut outcomes = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        let (order_id, result) = done.unwrap();
        outcomes.insert(order_id, result);
    }
    let ids: Vec<String> = outcomes.keys().cloned().collect();
    let unsettled = if strategy == Strategy::Idempotent {
        wait_settled(&c, &m, &ids, Duration::from_secs(6)).await
    } else {
        Vec::new()
    };
    let mut rows = HashMap::new();
    for id in &ids {
        rows.insert(id.clone(), order(&c, &m.url(), id).await.1);
    }
    let charges = charges_by_order(&c, &p.url(), &run).await;
    let duplicates = duplicate_orders(&c, &p.url(), &run).await;
    let hidden_charges = hidden_charges(&charges);
    m.shutdown().await;
    let result = LoadRun {
        run,
        outcomes,
        unsettled,
        charges,
        duplicates,
        rows,
        hidden_charges,
    };
    eprintln!("{}", result.describe());
    result
}

/// Charges of this run whose answer a fault after the commit kept from the merchant: the
/// ledger names the fault that acted on the request that moved the money.
fn hidden_charges(charges: &HashMap<String, Vec<Value>>) -> usize {
    const HIDING: [&str; 4] = ["drop_response after_commit", "reset after_commit", "hang", "error 5"];
    charges
        .values()
        .flatten()
        .filter_map(|c| c["fault"].as_str())
        .filter(|f| HIDING.iter().any(|h| f.starts_with(h)) && f.contains("after_commit"))
        .count()
}

impl LoadRun {
    /// One line: outcomes, statuses seen, hazards, charges.
    pub fn describe(&self) -> String {
        let mut statuses: std::collections::BTreeMap<u16, usize> = Default::default();
        for (_, seen) in self.outcomes.values() {
            for s in seen {
                *statuses.entry(*s).or_default() += 1;
            }
        }
        let paid = self
            .outcomes
            .values()
            .filter(|(o, _)| matches!(o, Outcome::Paid(_)))
            .count();
        format!(
            "{}: {} orders, {paid} paid, statuses seen {statuses:?}, {} charges hidden by faults, {} charges, {} double-charged orders",
            self.run,
            self.outcomes.len(),
            self.hidden_charges,
            self.charges.values().map(Vec::len).sum::<usize>(),
            self.duplicates.len()
        )
    }

    /// Zero double charges, every order resolved, and the client, the merchant and the
    /// ledger agree on every payment.
    pub fn assert_clean(&self) {
        assert!(
            self.duplicates.is_empty(),
            "{}: double charges: {:?}",
            self.run,
            self.duplicates
        );
        assert!(
            self.unsettled.is_empty(),
            "{}: unresolved orders: {:?}",
            self.run,
            self.unsettled
        );
        let mut paid = 0;
        for (order_id, (outcome, seen)) in &self.outcomes {
            let charges = self.charges.get(order_id).map(Vec::as_slice).unwrap_or_default();
            assert!(charges.len() <= 1, "{order_id}: {charges:?}");
            let row = &self.rows[order_id];
            let ledger_pi = charges.first().map(|c| c["payment_intent"].clone());
            match outcome {
                Outcome::Paid(pi) => {
                    paid += 1;
                    assert_eq!(
                        ledger_pi.as_ref(),
                        Some(&Value::from(pi.as_str())),
                        "{order_id}: lost charge"
                    );
                }
                Outcome::Failed(status) => {
                    assert!(
                        charges.is_empty(),
                        "{order_id}: phantom charge after {status} ({seen:?})"
                    );
                }
                Outcome::Unresolved => {}
            }
            // The merchant's row agrees with the ledger.
            if row["status"] == "paid" {
                assert_eq!(Some(&row["payment_intent"]), ledger_pi.as_ref(), "{order_id}: {row}");
            } else {
                assert!(charges.is_empty(), "{order_id}: charged but the order is {row}");
            }
        }
        assert!(
            paid * 10 >= self.outcomes.len() * 8,
            "{}: only {paid} of {} paid: {:?}",
            self.run,
            self.outcomes.len(),
            self.outcomes
                .values()
                .filter(|(o, _)| !matches!(o, Outcome::Paid(_)))
                .collect::<Vec<_>>()
        );
    }

    /// Extra charges in the ledger, all orders together.
    pub fn extra_charges(&self) -> usize {
        self.charges.values().map(|c| c.len().saturating_sub(1)).sum()
    }
}
