//! The provider's request path in process, from 1 thread and then from 2: new payments
//! (each with its own idempotency key and order id) run through the pipeline with no
//! socket, parser or client around them (`fauxpay_provider::post_in_process`), on a fresh
//! provider per run. The ratio of the two rates measures contention inside the provider
//! alone (shared writes, locks), without the kernel or the client: on a 2-core host,
//! perfect scaling is 2.0.
//!
//! Then its ceiling: 2 threads again, each driving a provider of its own (PAYMENTS each,
//! so each provider grows as the one-thread run's does), so that they share nothing of
//! the provider's (only the process, the allocator and the host). On a
//! host whose two cores slow each other down (virtual CPUs on one physical core's
//! hyper-threads, a shared cache or memory bus), that ratio is below 2.0 with no
//! contention in fauxpay at all: an estimate of what the shared run could reach there
//! (not a bound: the two providers hold twice the memory of the shared one).
//!
//! With `replay` it drives idempotent replays instead: each thread creates one payment
//! with a key of its own, then sends the same request under that key PAYMENTS ÷ THREADS
//! times, each answered from the idempotency store. From one thread, the microseconds a
//! request (1,000,000 ÷ `per_second`) are what the pipeline alone costs a new payment or
//! a replay, the floor under what the HTTP rows' provider spends beyond their ceiling.
//!
//!   inproc [PAYMENTS] [THREADS] [apart|replay]
//!       # default 200000 a run, from 1 thread, 2 threads on one provider, 2 threads on
//!       # a provider each (or only THREADS, on one provider or, with `apart`, on one
//!       # each, e.g. under a profiler; with `replay`, replays on one provider); one
//!       # JSON line each (`"replay":true` on a replay run's, whose `payments` counts
//!       # the replays)

use std::sync::Arc;
use std::time::Instant;

use fauxpay_provider::{post_in_process, ApiKey, Config, Provider};

/// The allocator `fauxpay serve` runs with (src/main.rs): glibc's malloc would be measured
/// instead of the provider (its arenas' locks and consolidation were ~14% of this row's
/// samples).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What the driver threads send.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// New payments on one provider.
    Shared,
    /// New payments on a provider a thread.
    Apart,
    /// Replays of one key a thread, on one provider.
    Replay,
}

/// The request a driver sends: payment `i` of thread `t` (a replay sends payment 0's).
fn payment(tag: &str, t: usize, i: usize) -> (String, String) {
    let body =
        format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={tag}{t}-{i}");
    (body, format!("{tag}{t}-{i}"))
}

/// Requests a second from `threads` driver tasks: `payments` in all on one provider, or
/// (`Apart`) `payments` on each of a provider per thread.
fn rate(threads: usize, payments: usize, mode: Mode) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let providers = if mode == Mode::Apart { threads } else { 1 };
        let mut apps = Vec::new();
        for p in 0..providers {
            let app = Provider::new(Config::default());
            let key = ApiKey::new("sk_test_inproc");
            // Warm-up: the spec, the tables' first shards, the allocator.
            for i in 0..1000 {
                let (body, idem) = payment("w", p, i);
                post_in_process(&app, &key, "/v1/payment_intents", Some(&idem), &body).await;
            }
            apps.push(app);
        }
        // Apart, each provider ends as full as the one-thread run's: its tables' sizes
        // (and their growth on the way) are the same, so the ratio shows the host.
        let per = if mode == Mode::Apart {
            payments
        } else {
            payments / threads
        };
        let mut started = Instant::now();
        if mode == Mode::Replay {
            // Each thread's one payment, made before the clock starts.
            let key = ApiKey::new("sk_test_inproc");
            for t in 0..threads {
                let (body, idem) = payment("t", t, 0);
                let status = post_in_process(&apps[0], &key, "/v1/payment_intents", Some(&idem), &body).await;
                assert_eq!(status, 200, "payment {t}-0");
            }
            started = Instant::now();
        }
        let tasks: Vec<_> = (0..threads)
            .map(|t| {
                let app: Arc<Provider> = apps[t % providers].clone();
                // A key of the thread's own, as the HTTP edge gives each worker thread
                // (`ApiKey::interned`): one shared key's holder count, written by every
                // request on both threads, would be contention the server does not have.
                let key = ApiKey::new("sk_test_inproc");
                tokio::spawn(async move {
                    for i in 0..per {
                        let n = if mode == Mode::Replay { 0 } else { i };
                        let (body, idem) = payment("t", t, n);
                        let status = post_in_process(&app, &key, "/v1/payment_intents", Some(&idem), &body).await;
                        assert_eq!(status, 200, "payment {t}-{n}, request {i} of thread {t}");
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
    let mode = match std::env::args().nth(3).as_deref() {
        None => Mode::Shared,
        Some("apart") => Mode::Apart,
        Some("replay") => Mode::Replay,
        Some(other) => panic!("the third argument is `apart`, `replay` or nothing, got {other:?}"),
    };
    let runs = only.map_or(vec![(1, Mode::Shared), (2, Mode::Shared), (2, Mode::Apart)], |t| {
        vec![(t, mode)]
    });
    for (threads, mode) in runs {
        let r = rate(threads, payments, mode);
        let (providers, total) = if mode == Mode::Apart {
            (threads, payments * threads)
        } else {
            (1, payments / threads * threads)
        };
        let replay = if mode == Mode::Replay { ",\"replay\":true" } else { "" };
        println!(
            "{{\"threads\":{threads},\"providers\":{providers},\"payments\":{total},\"per_second\":{r:.0}{replay}}}"
        );
    }
}
