//! A Redis of the test's own (a child `redis-server` on a free port) killed in the middle of
//! a run and restarted: while it is down the idempotent merchant refuses new work with a
//! retryable 503 and never pays without its lock (stored answers are still replayed); once
//! it is back, the clients' retries with the same keys pay every order exactly once. On the
//! embedded store, and with the orders in PostgreSQL. The run's phases follow signals
//! (clients paid, clients that met the outage), not a timetable.

use fauxpay_testkit::merchant as merchant_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fauxpay_merchant::Strategy;
use merchant_common::*;
use reqwest::Client;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Waits until `n` permits have been added to `signal`.
async fn signalled(signal: &Semaphore, n: u32, what: &str) {
    tokio::time::timeout(Duration::from_secs(10), signal.acquire_many(n))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("the signal is never closed")
        .forget();
}

async fn redis_killed_mid_run(with_postgres: bool) {
    let mut redis = OwnRedis::start().await;
    let backend = if with_postgres {
        require_postgres().await;
        Backend::Durable {
            redis_url: redis.url(),
            postgres_url: LOCAL_POSTGRES.to_string(),
            schema: unique_schema(),
        }
    } else {
        Backend::Memory
    };
    let p = provider("happy").await;
    let redis_url = redis.url();
    let m = merchant(Strategy::Idempotent, &p.url(), &backend, |c| {
        c.redis_url = Some(redis_url);
        c.store_timeout = Duration::from_millis(500);
    })
    .await;
    let c = Client::new();
    let run = run_id(if with_postgres { "outage-pg" } else { "outage-mem" });

    // 30 checkouts, a third of them losing their answer after the charge, at most GATE at a
    // time: ten start at once; Redis is killed as soon as five of them are paid (others may
    // be mid-payment); the other twenty start into the outage.
    const GATE: usize = 6;
    let deadline = Instant::now() + Duration::from_secs(12);
    let gate = Arc::new(Semaphore::new(GATE));
    // A permit per client paid, and per client that met the outage (its first 503).
    let paid_signal = Arc::new(Semaphore::new(0));
    let outage_signal = Arc::new(Semaphore::new(0));
    let client = |i: u64| {
        let (c, url, gate) = (c.clone(), m.url(), gate.clone());
        let (paid_signal, outage_signal) = (paid_signal.clone(), outage_signal.clone());
        let order_id = format!("{run}-{i}");
        async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let pm = if i % 3 == 0 {
                "pm_fault_drop_after_commit"
            } else {
                "pm_card_visa"
            };
            let b = body(&order_id, 1000 + i, pm);
            let key = format!("{order_id}-key");
            let mut met_outage = false;
            let result = checkout_until_final_reporting(&c, &url, &b, Some(&key), deadline, |status| {
                if status == 503 && !met_outage {
                    met_outage = true;
                    outage_signal.add_permits(1);
                }
            })
            .await;
            if matches!(result.0, Outcome::Paid(_)) {
                paid_signal.add_permits(1);
            }
            (order_id, result)
        }
    };
    let mut clients = JoinSet::new();
    for i in 0..10u64 {
        clients.spawn(client(i));
    }

    let settled = format!("{run}-settled");
    let settled_body = body(&settled, 700, "pm_card_visa");
    let before = checkout(&c, &m.url(), &settled_body, Some("settled-key"))
        .await
        .expect("answer");
    assert_eq!(before.status, 200);

    signalled(&paid_signal, 5, "five paid checkouts").await;
    redis.stop();
    // A stored answer is still replayed: it needs no lock.
    let replay = checkout(&c, &m.url(), &settled_body, Some("settled-key"))
        .await
        .expect("answer");
    assert_eq!((replay.status, replay.replayed), (200, true), "{:?}", replay.body);
    assert_eq!(replay.body, before.body);
    // While Redis is down: a retryable 503 and a failing health check, and no charge.
    let probe = format!("{run}-probe");
    let probe_body = body(&probe, 500, "pm_card_visa");
    let r = checkout(&c, &m.url(), &probe_body, Some("probe-key"))
        .await
        .expect("answer");
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert_eq!(r.body["error"], "lock_unavailable");
    assert_eq!(r.retry_after.as_deref(), Some("1"));
    let health = c.get(format!("{}/health", m.url())).send().await.unwrap();
    assert_eq!(health.status(), 503);
    for i in 10..30u64 {
        clients.spawn(client(i));
    }
    // No checkout gets the lock any more, so the gate fills with clients retrying against
    // the outage: Redis stays down until GATE of them have met it.
    signalled(&outage_signal, GATE as u32, "clients meeting the outage").await;
    assert!(charges_by_order(&c, &p.url(), &probe).await.is_empty());
    redis.restart().await;

    let mut saw_outage = false;
    let mut paid = Vec::new();
    while let Some(done) = clients.join_next().await {
        let (order_id, (outcome, seen)) = done.unwrap();
        saw_outage |= seen.contains(&503);
        match outcome {
            Outcome::Paid(pi) => paid.push((order_id, pi)),
            other => panic!("{order_id}: {other:?} after {seen:?}"),
        }
    }
    assert!(saw_outage, "some clients should have met the outage");
    let r = checkout(&c, &m.url(), &probe_body, Some("probe-key"))
        .await
        .expect("answer");
    assert_eq!(r.status, 200, "after the restart: {:?}", r.body);

    let charges = charges_by_order(&c, &p.url(), &run).await;
    for (order_id, pi) in &paid {
        assert_eq!(charges[order_id].len(), 1, "{order_id}: {:?}", charges[order_id]);
        assert_eq!(charges[order_id][0]["payment_intent"], pi.as_str());
    }
    assert!(duplicate_orders(&c, &p.url(), &run).await.is_empty());
    m.shutdown().await;
    backend.cleanup().await;
}

#[tokio::test]
async fn redis_killed_mid_run_on_the_embedded_store() {
    redis_killed_mid_run(false).await;
}

#[tokio::test]
async fn redis_killed_mid_run_with_orders_in_postgres() {
    redis_killed_mid_run(true).await;
}
