//! The provider's request path in process, from 1 thread and then from 2: new payments
//! (each with its own idempotency key and order id) run through the pipeline with no
//! socket, parser or client around them (`fauxpay_provider::post_in_process`), on a fresh
//! provider per run. The ratio of the two rates measures contention inside the provider
//! alone (shared writes, locks), without the kernel or the client: on a 2-core host,
//! perfect scaling is 2.0.
//!
//!   inproc [PAYMENTS] [THREADS]   # default 200000 a run, from 1 then 2 threads (or only
//!                                 # THREADS, e.g. under a profiler); one JSON line each

use std::sync::Arc;
use std::time::Instant;

use fauxpay_provider::{post_in_process, ApiKey, Config, Provider};

/// The allocator `fauxpay serve` runs with (src/main.rs): glibc's malloc would be measured
/// instead of the provider (its arenas' locks and consolidation were ~14% of this row's
/// samples).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn rate(threads: usize, payments: usize) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let app = Provider::new(Config::default());
        let key = ApiKey::new("sk_test_inproc");
        // Warm-up: the spec, the tables' first shards, the allocator.
        for i in 0..1000 {
            let body = format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=w{i}");
            post_in_process(&app, &key, "/v1/payment_intents", Some(&format!("w{i}")), &body).await;
        }
        let per = payments / threads;
        let started = Instant::now();
        let tasks: Vec<_> = (0..threads)
            .map(|t| {
                let app: Arc<Provider> = app.clone();
                // A key of the thread's own, as the HTTP edge gives each worker thread
                // (`ApiKey::interned`): one shared key's holder count, written by every
                // request on both threads, would be contention the server does not have.
                let key = ApiKey::new("sk_test_inproc");
                tokio::spawn(async move {
                    for i in 0..per {
                        let body = format!(
                            "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=t{t}-{i}"
                        );
                        let status = post_in_process(&app, &key, "/v1/payment_intents", Some(&format!("t{t}-{i}")), &body).await;
                        assert_eq!(status, 200, "payment {t}-{i}");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a driver task");
        }
        (per * threads) as f64 / started.elapsed().as_secs_f64()
    })
}

fn main() {
    let payments: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("PAYMENTS: a number"))
        .unwrap_or(200_000);
    let only: Option<usize> = std::env::args()
        .nth(2)
        .map(|n| n.parse().ok().filter(|t| *t > 0).expect("THREADS: a number above 0"));
    for threads in only.map_or(vec![1, 2], |t| vec![t]) {
        let r = rate(threads, payments);
        println!("{{\"threads\":{threads},\"payments\":{payments},\"per_second\":{r:.0}}}");
    }
}
