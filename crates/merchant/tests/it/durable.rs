//! The idempotent merchant on the real Redis (127.0.0.1:6379, the order lock) and
//! PostgreSQL (127.0.0.1:5432/test, key records and orders, in a schema of the test's
//! own): the same scenarios and fault profiles as on the embedded store, and state that
//! survives a merchant restart. Fails, naming the missing service and how to start it,
//! when either is not there (with or without `CI`).

use fauxpay_testkit::merchant as merchant_common;

use std::sync::Arc;
use std::time::Duration;

use fauxpay_merchant::clock::ManualClock;
use fauxpay_merchant::Strategy;
use merchant_common::scenarios;
use merchant_common::*;
use reqwest::Client;

/// Runs `scenario` on a fresh durable backend, then drops its schema.
macro_rules! durable {
    ($name:ident, $scenario:expr) => {
        #[tokio::test]
        async fn $name() {
            let backend = Backend::durable().await;
            $scenario(&backend).await;
            backend.cleanup().await;
        }
    };
}

durable!(
    lost_and_ambiguous_answers_are_reconciled,
    scenarios::lost_and_ambiguous_answers
);
durable!(
    a_provider_timeout_is_reconciled,
    scenarios::provider_timeout_is_reconciled
);
durable!(
    an_order_with_no_charge_is_reopened,
    scenarios::no_charge_reopens_the_order
);
durable!(key_semantics, scenarios::key_semantics);
durable!(concurrent_same_key_and_same_order, scenarios::concurrent_requests);
durable!(no_key_still_charges_once, scenarios::no_key_still_charges_once);

/// Zero double charges under a bundled profile, every order resolved, and the profile
/// did hide some charges' answers from the merchant.
macro_rules! clean_under {
    ($name:ident, $profile:literal) => {
        #[tokio::test]
        async fn $name() {
            let backend = Backend::durable().await;
            let run = scenarios::profile_run(Strategy::Idempotent, $profile, &backend, 100).await;
            run.assert_clean();
            assert!(
                run.hidden_charges > 0,
                "the profile should have hidden some answers"
            );
            backend.cleanup().await;
        }
    };
}

clean_under!(clean_under_flaky_network, "flaky-network");
clean_under!(clean_under_lost_responses, "lost-responses");
clean_under!(clean_under_ambiguous_errors, "ambiguous-errors");
clean_under!(clean_under_chaos, "chaos");

#[tokio::test]
async fn key_records_and_orders_survive_a_merchant_restart() {
    let backend = Backend::durable().await;
    let p = provider("happy").await;
    let c = Client::new();
    let order_id = run_id("restart");
    let b = body(&order_id, 2000, "pm_fault_drop_after_commit");
    let first_merchant = merchant(Strategy::Idempotent, &p.url(), &backend, |_| {}).await;
    let first = checkout(&c, &first_merchant.url(), &b, Some("k")).await.unwrap();
    assert_eq!(first.status, 200, "{:?}", first.body);
    first_merchant.shutdown().await;

    let second_merchant = merchant(Strategy::Idempotent, &p.url(), &backend, |_| {}).await;
    let replay = checkout(&c, &second_merchant.url(), &b, Some("k")).await.unwrap();
    assert_eq!((replay.status, replay.replayed), (200, true));
    assert_eq!(replay.body, first.body);
    let (_, row) = order(&c, &second_merchant.url(), &order_id).await;
    assert_eq!(row["status"], "paid");
    let health: serde_json::Value = c
        .get(format!("{}/health", second_merchant.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (health["store"].as_str(), health["lock"].as_str()),
        (Some("postgres"), Some("redis"))
    );
    assert_eq!(charges_by_order(&c, &p.url(), &order_id).await[&order_id].len(), 1);
    second_merchant.shutdown().await;
    backend.cleanup().await;
}

#[tokio::test]
async fn expired_key_records_are_pruned_and_the_order_still_guards() {
    let backend = Backend::durable().await;
    let p = provider("happy").await;
    let c = Client::new();
    // The merchant's clock moves only when the test says: the key expires on cue.
    let clock = Arc::new(ManualClock::starting_now());
    let m = merchant(Strategy::Idempotent, &p.url(), &backend, |cfg| {
        cfg.key_ttl = Duration::from_millis(300);
        cfg.clock = clock.clone();
    })
    .await;
    let order_id = run_id("expiry");
    let b = body(&order_id, 2000, "pm_card_visa");
    let first = checkout(&c, &m.url(), &b, Some("k")).await.unwrap();
    assert_eq!(first.status, 200);
    clock.advance(Duration::from_millis(800));
    // A round that started after the advance sees the key expired and prunes it (the
    // prune cadence, key_ttl / 2, is also read from the clock): two rounds from now, the
    // first of which may have started before the advance.
    reconciler_rounds(&m, 2).await;
    let Backend::Durable {
        postgres_url, schema, ..
    } = &backend
    else {
        unreachable!()
    };
    let (pg, conn) = tokio_postgres::connect(postgres_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let left: i64 = pg
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".merchant_idempotency_keys"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the expired record is pruned");
    // The same key after expiry is a new request, but the order row answers: no new charge.
    let again = checkout(&c, &m.url(), &b, Some("k")).await.unwrap();
    assert_eq!((again.status, again.replayed), (200, false));
    assert_eq!(again.body["payment_intent"], first.body["payment_intent"]);
    assert_eq!(charges_by_order(&c, &p.url(), &order_id).await[&order_id].len(), 1);
    m.shutdown().await;
    backend.cleanup().await;
}
