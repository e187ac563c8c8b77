//! The baseline load generator: a bare goose 0.19 scenario sending exactly the request
//! `fauxpay load --template stripe` sends (`POST /v1/payment_intents`, a form body with
//! `confirm=true` and `metadata[order_id]`, a unique `Idempotency-Key`, Bearer auth),
//! reading each answer's body, with none of fauxpay load's bookkeeping (no retries, no
//! journal, no latency histograms, no reconciliation).
//!
//! Takes goose's own options (`-H`, `-u`, `-r`, `-t`, …) and prints one JSON line:
//! `{"requests": N, "ok": N, "duration_secs": S}`, timed over the same span as
//! `fauxpay load`'s `duration_secs` (goose initialised, attack run).

#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use goose::config::GooseConfiguration;
use goose::prelude::*;

#[derive(Parser)]
struct Args {
    /// Order-id prefix (like fauxpay load's run id).
    #[arg(long, default_value = "bare")]
    run_id: String,
    #[command(flatten)]
    goose: GooseConfiguration,
}

struct Counters {
    next: AtomicU64,
    requests: AtomicU64,
    ok: AtomicU64,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let mut config = args.goose;
    config.no_print_metrics = true;
    let run_id: Arc<str> = args.run_id.into();
    let counters = Arc::new(Counters {
        next: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        ok: AtomicU64::new(0),
    });
    let c = counters.clone();
    let transaction: TransactionFunction = Arc::new(move |user| {
        let c = c.clone();
        let run_id = run_id.clone();
        Box::pin(async move {
            let n = c.next.fetch_add(1, Ordering::Relaxed) + 1;
            let order = format!("{run_id}-{n:06}");
            let body =
                format!("amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}");
            let rb = user
                .get_request_builder(&GooseMethod::Post, "/v1/payment_intents")?
                .header("content-type", "application/x-www-form-urlencoded")
                .header("authorization", "Bearer sk_test_fauxpay_load")
                .header("idempotency-key", format!("{order}-k"))
                .body(body)
                .timeout(Duration::from_secs(2));
            let request = GooseRequest::builder()
                .method(GooseMethod::Post)
                .path("/v1/payment_intents")
                .set_request_builder(rb)
                .build();
            let goose = user.request(request).await?;
            c.requests.fetch_add(1, Ordering::Relaxed);
            if let Ok(resp) = goose.response {
                let ok = resp.status().is_success();
                if resp.bytes().await.is_ok() && ok {
                    c.ok.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        })
    });
    let started = Instant::now();
    let attack = GooseAttack::initialize_with_config(config)
        .expect("goose configuration")
        .register_scenario(
            scenario!("checkout").register_transaction(Transaction::new(transaction).set_name("checkout")),
        )
        .execute()
        .await;
    let duration = started.elapsed();
    if let Err(e) = attack {
        eprintln!("bare-goose: {e}");
        std::process::exit(1);
    }
    println!(
        "{}",
        serde_json::json!({
            "requests": counters.requests.load(Ordering::Relaxed),
            "ok": counters.ok.load(Ordering::Relaxed),
            "duration_secs": duration.as_secs_f64(),
        })
    );
}
