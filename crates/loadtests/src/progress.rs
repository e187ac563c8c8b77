//! The live progress line: elapsed time, attempts per second, payments done, and the
//! anomalies a client can already see (unresolved payments, inconsistent replays).
//! On a terminal it redraws one line every second; in CI logs (not a TTY) it prints a
//! new line every five seconds instead, so logs stay readable.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{AttemptResult, Outcome, PaymentRecord};

/// Counters updated by the load-test tasks.
#[derive(Default)]
pub struct Counters {
    pub attempts: AtomicU64,
    pub payments: AtomicU64,
    pub unresolved: AtomicU64,
    pub failed: AtomicU64,
    pub replays: AtomicU64,
    /// Start times of the open model (`--rate`) that found every user busy.
    pub dropped: AtomicU64,
    /// Iterations of `--scenario`s without a payment step.
    pub browsed: AtomicU64,
}

impl Counters {
    pub fn add(&self, p: &PaymentRecord) {
        self.attempts.fetch_add(p.attempts.len() as u64, Ordering::Relaxed);
        self.payments.fetch_add(1, Ordering::Relaxed);
        match p.outcome {
            Outcome::Info => {
                self.unresolved.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Fail => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Ok => {}
        }
        let replays = p
            .attempts
            .iter()
            .filter(|a| matches!(a.result, AttemptResult::Answer { replayed: true, .. }))
            .count();
        self.replays.fetch_add(replays as u64, Ordering::Relaxed);
    }

    pub fn line(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64().max(0.001);
        let attempts = self.attempts.load(Ordering::Relaxed);
        let dropped = match self.dropped.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(", {n} dropped"),
        };
        let browsed = match self.browsed.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(", {n} browse runs"),
        };
        format!(
            "[{:>6.1}s] {attempts} attempts ({:.1}/s), {} payments done, {} failed, {} unresolved, {} replays{dropped}{browsed}",
            secs,
            attempts as f64 / secs,
            self.payments.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.unresolved.load(Ordering::Relaxed),
            self.replays.load(Ordering::Relaxed),
        )
    }
}

/// Prints progress until the returned sender is dropped or signalled; `label` (e.g. the
/// demo's merchant) starts each line, and off a terminal a labelled run prints only its
/// final line. Elapsed time counts from what `started` says when each line is printed
/// (the open model's schedule starts after its users are launched, as its summary counts).
pub fn spawn(
    counters: Arc<Counters>,
    started: impl Fn() -> Instant + Send + 'static,
    label: Option<String>,
) -> tokio::sync::oneshot::Sender<()> {
    let label = label.map(|l| format!("{l} ")).unwrap_or_default();
    let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
    let tty = std::io::stderr().is_terminal();
    let periodic = tty || label.is_empty();
    let every = if tty {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(5)
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                _ = tick.tick(), if periodic => {
                    let line = format!("{label}{}", counters.line(started().elapsed()));
                    let mut err = std::io::stderr().lock();
                    let _ = if tty { write!(err, "\r{line}\x1b[K") } else { writeln!(err, "{line}") };
                    let _ = err.flush();
                }
                _ = &mut rx => {
                    let line = counters.line(started().elapsed());
                    if tty {
                        let _ = writeln!(std::io::stderr(), "\r{label}{line}\x1b[K");
                    } else if !label.is_empty() {
                        let _ = writeln!(std::io::stderr(), "{label}{line}");
                    }
                    return;
                }
            }
        }
    });
    tx
}
