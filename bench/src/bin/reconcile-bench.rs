//! Times reconciliation at scale: 1,000,000 logical payments (what the journal holds)
//! joined with their ledger, streamed as JSON lines in the provider's schema v1.
//!
//! Builds the synthetic payments and the ledger text first (not timed), with a few
//! anomalies mixed in (double charges, lost and phantom charges), then times feeding the
//! ledger through `LedgerView::add_line` in stream-sized chunks (as `fetch_ledger` does
//! with the HTTP body) plus `reconcile(...)`, and prints one JSON line with the seconds.
//! Apart from those, it writes the payments to a journal (not timed) and times reading it
//! back (`journal_read_secs`), as `fauxpay report reconcile` does before it reconciles.
//!
//! Usage: `reconcile-bench [PAYMENTS] [CHUNK_BYTES]` (defaults 1000000, 16384).

#![deny(unsafe_code)]

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

use fauxpay_loadtests::client::{AttemptRecord, AttemptResult, Outcome, PaymentRecord};
use fauxpay_loadtests::journal::Journal;
use fauxpay_loadtests::ledger::{LedgerView, ProviderRequest, RequestOutcome};
use fauxpay_loadtests::mix::Behaviour;
use fauxpay_loadtests::reconcile::reconcile;

/// A deterministic 24-character alphanumeric suffix, like the provider's ids.
fn suffix(n: u64, salt: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
    (0..24)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % 62) as usize] as char
        })
        .collect()
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let n: u64 = argv.next().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let chunk: usize = argv.next().and_then(|s| s.parse().ok()).unwrap_or(16 * 1024);
    let run = "rbench1";

    // ---- synthetic data (not timed) ----
    let t_build = Instant::now();
    let mut payments = Vec::with_capacity(n as usize);
    let mut ledger = String::with_capacity(n as usize * 400);
    let mut seq = 0u64;
    for i in 1..=n {
        let order = format!("{run}-{i:06}");
        let key = format!("{order}-k");
        let pi = format!("pi_{}", suffix(i, 1));
        // 1 in 1000 double-charged, 1 in 2000 lost, 1 in 2000 phantom.
        let charges = if i % 1000 == 0 {
            2
        } else if i % 2000 == 1 {
            0
        } else {
            1
        };
        let outcome = if i % 2000 == 3 { Outcome::Fail } else { Outcome::Ok };
        payments.push(PaymentRecord {
            order_id: order.clone(),
            amount: 2000,
            behaviour: Behaviour::RetrySameKey,
            outcome,
            e2e_us: 900,
            steps: Vec::new(),
            expect: None,
            attempts: vec![AttemptRecord {
                n: 1,
                key: Some(key.clone()),
                start_us: i * 50,
                elapsed_us: 900,
                result: AttemptResult::Answer {
                    status: if outcome == Outcome::Ok { 200 } else { 402 },
                    payment_id: (outcome == Outcome::Ok).then(|| pi.clone()),
                    replayed: false,
                    retry_after: None,
                    should_retry: None,
                },
            }],
        });
        for c in 0..charges {
            seq += 1;
            let _ = writeln!(
                ledger,
                r#"{{"schema_version":1,"seq":{seq},"id":"ch_{}","kind":"charge","amount":2000,"currency":"usd","status":"succeeded","payment_intent":"{pi}","charge":null,"idempotency_key":"{key}","correlation_id":"{order}","request_id":"req_{}","fault":null,"duplicate":{},"created_ms":{}}}"#,
                suffix(i, 2 + c),
                suffix(i, 9 + c),
                c > 0,
                1_767_225_600_000u64 + i,
            );
        }
    }
    // The provider's request log is a ring of 16,384: the newest requests of the run.
    let mut requests: HashMap<String, Vec<ProviderRequest>> = HashMap::new();
    for i in n.saturating_sub(16_383)..=n {
        requests
            .entry(format!("{run}-{i:06}"))
            .or_default()
            .push(ProviderRequest {
                attempt: 1,
                idempotency_key: Some(format!("{run}-{i:06}-k")),
                correlation_id: Some(format!("{run}-{i:06}")),
                fault: None,
                outcome: RequestOutcome::Status(200),
                committed_status: Some(200),
                object: Some(format!("pi_{}", suffix(i, 1))),
            });
    }
    let build_secs = t_build.elapsed().as_secs_f64();
    let bytes = ledger.into_bytes();

    // ---- timed: stream the ledger in chunks, then reconcile ----
    let t0 = Instant::now();
    let mut view = LedgerView::default();
    let mut pending: Vec<u8> = Vec::new();
    for piece in bytes.chunks(chunk) {
        view.feed(&mut pending, piece).expect("ledger line");
    }
    view.finish(&mut pending).expect("ledger line");
    let ledger_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let r = reconcile(&payments, &view, &requests);
    let reconcile_secs = t1.elapsed().as_secs_f64();
    let total = t0.elapsed().as_secs_f64();

    assert_eq!(r.outcomes.total(), n);

    // ---- timed apart: what `fauxpay report reconcile` reads before it reconciles ----
    // The journal as a run writes it (`Journal`), read back (`journal::read`) from the page
    // cache, as just after a run.
    let dir = std::env::temp_dir().join(format!("fauxpay-reconcile-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let path = dir.join("journal.jsonl");
    let journal = Journal::create(&path).expect("journal.jsonl");
    for p in &payments {
        journal.record(p.clone());
    }
    drop(journal.finish().expect("the journal written"));
    let journal_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    let t2 = Instant::now();
    let back = fauxpay_loadtests::journal::read(&path).expect("the journal read back");
    let journal_read_secs = t2.elapsed().as_secs_f64();
    assert_eq!(back.len(), payments.len());
    drop(back);
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "{}",
        serde_json::json!({
            "payments": n,
            "ledger_records": view.records,
            "ledger_bytes": bytes.len(),
            "double_charges": r.anomalies.double_charges.count,
            "lost": r.anomalies.lost.count,
            "phantom": r.anomalies.phantom.count,
            "build_secs": build_secs,
            "ledger_secs": ledger_secs,
            "reconcile_secs": reconcile_secs,
            "seconds": total,
            "journal_bytes": journal_bytes,
            "journal_read_secs": journal_read_secs,
        })
    );
}
