//! The journal: every attempt and every final outcome, as JSON lines, written off the
//! request path.
//!
//! Load-test tasks hand finished payments to [`Journal::record`], which only queues them
//! (no clone, no wake-up: the writer is never parked in a receive); a dedicated thread
//! drains the queue a few times a second, serialises each payment into `journal.jsonl`
//! through a buffered writer and keeps it. [`Journal::finish`] flushes, reports any write
//! error and hands the payments back for reconciliation.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::client::{AttemptRecord, AttemptResult, PaymentRecord};
use crate::error::LoadError;

/// How often the writer drains the queue.
const DRAIN_EVERY: Duration = Duration::from_millis(20);

pub struct Journal {
    tx: Option<mpsc::Sender<PaymentRecord>>,
    writer: Option<JoinHandle<(Vec<PaymentRecord>, std::io::Result<()>)>>,
    path: PathBuf,
}

impl Journal {
    pub fn create(path: &Path) -> Result<Self, LoadError> {
        let file = File::create(path).map_err(|e| LoadError::io(path, e))?;
        let (tx, rx) = mpsc::channel::<PaymentRecord>();
        let writer = std::thread::Builder::new()
            .name("fauxpay-journal".into())
            .spawn(move || {
                let mut out = BufWriter::with_capacity(1 << 16, file);
                let mut kept = Vec::new();
                let mut result = Ok(());
                loop {
                    let open = loop {
                        match rx.try_recv() {
                            Ok(p) => {
                                if result.is_ok() {
                                    result = write_payment(&mut out, &p);
                                }
                                kept.push(p);
                            }
                            Err(mpsc::TryRecvError::Empty) => break true,
                            Err(mpsc::TryRecvError::Disconnected) => break false,
                        }
                    };
                    if !open {
                        break;
                    }
                    std::thread::sleep(DRAIN_EVERY);
                }
                if result.is_ok() {
                    result = out.flush();
                }
                (kept, result)
            })
            .map_err(|e| LoadError::io(path, e))?;
        Ok(Self {
            tx: Some(tx),
            writer: Some(writer),
            path: path.to_path_buf(),
        })
    }

    /// Queues a finished payment for writing.
    pub fn record(&self, payment: PaymentRecord) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(payment);
        }
    }

    /// Closes the journal, waits for the writer to flush, and returns every payment
    /// recorded, in the order recorded.
    pub fn finish(mut self) -> Result<Vec<PaymentRecord>, LoadError> {
        drop(self.tx.take());
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok((payments, Ok(())))) => Ok(payments),
            Some(Ok((_, Err(e)))) => Err(LoadError::io(&self.path, e)),
            Some(Err(_)) => Err(LoadError::io(
                &self.path,
                std::io::Error::other("journal writer panicked"),
            )),
            None => Ok(Vec::new()),
        }
    }
}

/// One attempt line: `{"attempt": {...}, "behaviour", "order_id", "type": "attempt"}`.
struct AttemptLine<'a>(&'a PaymentRecord, &'a AttemptRecord);

/// An attempt's fields in sorted order, its result flattened in.
struct AttemptFields<'a>(&'a AttemptRecord);

/// The outcome line.
struct OutcomeLine<'a>(&'a PaymentRecord);

impl Serialize for AttemptLine<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("attempt", &AttemptFields(self.1))?;
        m.serialize_entry("behaviour", &self.0.behaviour)?;
        m.serialize_entry("order_id", &self.0.order_id)?;
        m.serialize_entry("type", "attempt")?;
        m.end()
    }
}

impl Serialize for AttemptFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("elapsed_us", &a.elapsed_us)?;
        m.serialize_entry("key", &a.key)?;
        match &a.result {
            AttemptResult::Answer {
                status,
                payment_id,
                replayed,
                ..
            } => {
                m.serialize_entry("n", &a.n)?;
                m.serialize_entry("payment_id", payment_id)?;
                m.serialize_entry("replayed", replayed)?;
                m.serialize_entry("result", "answer")?;
                m.serialize_entry("start_us", &a.start_us)?;
                m.serialize_entry("status", status)?;
            }
            AttemptResult::Failed { kind } => {
                m.serialize_entry("kind", kind)?;
                m.serialize_entry("n", &a.n)?;
                m.serialize_entry("result", "failed")?;
                m.serialize_entry("start_us", &a.start_us)?;
            }
        }
        m.end()
    }
}

impl Serialize for OutcomeLine<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("amount", &p.amount)?;
        m.serialize_entry("attempts", &p.attempts.len())?;
        m.serialize_entry("behaviour", &p.behaviour)?;
        m.serialize_entry("e2e_us", &p.e2e_us)?;
        if let Some(expect) = &p.expect {
            m.serialize_entry("expect", expect)?;
        }
        m.serialize_entry("order_id", &p.order_id)?;
        m.serialize_entry("outcome", &p.outcome)?;
        m.serialize_entry("type", "outcome")?;
        m.end()
    }
}

/// Reads a saved `journal.jsonl` back into its payments (`fauxpay report reconcile`): each
/// payment's attempt lines, then its outcome line. A damaged line is refused, naming it.
pub fn read(path: &Path) -> Result<Vec<PaymentRecord>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
    let bad = |n: usize, why: String| LoadError::Report {
        path: format!("{}:{}", path.display(), n + 1),
        reason: why,
    };
    let mut attempts: std::collections::HashMap<String, Vec<AttemptRecord>> = Default::default();
    let mut steps: std::collections::HashMap<String, Vec<crate::steps::StepRecord>> = Default::default();
    let mut payments = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| bad(n, e.to_string()))?;
        let order = v["order_id"]
            .as_str()
            .ok_or_else(|| bad(n, "no order_id".into()))?
            .to_string();
        match v["type"].as_str() {
            Some("attempt") => {
                let a: AttemptRecord =
                    serde_json::from_value(v["attempt"].clone()).map_err(|e| bad(n, format!("attempt: {e}")))?;
                attempts.entry(order).or_default().push(a);
            }
            Some("step") => {
                let step = serde_json::from_value(v["step"].clone()).map_err(|e| bad(n, format!("step: {e}")))?;
                steps.entry(order).or_default().push(step);
            }
            Some("outcome") => {
                fn field<T: serde::de::DeserializeOwned>(v: &serde_json::Value, name: &str) -> Result<T, String> {
                    serde_json::from_value(v[name].clone()).map_err(|e| format!("{name}: {e}"))
                }
                payments.push(PaymentRecord {
                    steps: steps.remove(&order).unwrap_or_default(),
                    expect: serde_json::from_value(v["expect"].clone()).map_err(|e| bad(n, format!("expect: {e}")))?,
                    attempts: attempts.remove(&order).unwrap_or_default(),
                    order_id: order,
                    amount: field(&v, "amount").map_err(|e| bad(n, e))?,
                    behaviour: field(&v, "behaviour").map_err(|e| bad(n, e))?,
                    outcome: field(&v, "outcome").map_err(|e| bad(n, e))?,
                    e2e_us: field(&v, "e2e_us").map_err(|e| bad(n, e))?,
                });
            }
            _ => return Err(bad(n, "neither an attempt, a step nor an outcome line".into())),
        }
    }
    Ok(payments)
}

/// A multi-step flow's step line: `{"order_id", "step": {...}, "type": "step"}`.
#[derive(Serialize)]
struct StepLine<'a> {
    order_id: &'a str,
    step: &'a crate::steps::StepRecord,
    #[serde(rename = "type")]
    kind: &'static str,
}

fn write_payment(out: &mut impl Write, p: &PaymentRecord) -> std::io::Result<()> {
    for a in &p.attempts {
        serde_json::to_writer(&mut *out, &AttemptLine(p, a))?;
        out.write_all(b"\n")?;
    }
    for step in &p.steps {
        let line = StepLine {
            order_id: &p.order_id,
            step,
            kind: "step",
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    serde_json::to_writer(&mut *out, &OutcomeLine(p))?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{AttemptRecord, AttemptResult, Outcome};
    use crate::mix::Behaviour;

    #[test]
    fn writes_attempts_then_the_outcome() {
        let dir = std::env::temp_dir().join(format!("fauxpay-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.jsonl");
        let j = Journal::create(&path).unwrap();
        j.record(PaymentRecord {
            order_id: "r-1".into(),
            amount: 100,
            behaviour: Behaviour::RetrySameKey,
            outcome: Outcome::Ok,
            e2e_us: 10,
            steps: Vec::new(),
            expect: None,
            attempts: vec![
                AttemptRecord {
                    n: 1,
                    key: Some("k".into()),
                    start_us: 0,
                    elapsed_us: 10,
                    result: AttemptResult::Answer {
                        status: 200,
                        payment_id: Some("pi_1".into()),
                        replayed: false,
                        retry_after: None,
                        should_retry: None,
                    },
                },
                AttemptRecord {
                    n: 2,
                    key: None,
                    start_us: 12,
                    elapsed_us: 2_000_000,
                    result: AttemptResult::Failed {
                        kind: crate::client::FailureKind::Timeout,
                    },
                },
            ],
        });
        let payments = j.finish().unwrap();
        assert_eq!(payments.len(), 1);
        let text = std::fs::read_to_string(&path).unwrap();
        // Byte for byte what the journal always wrote (`json!` with sorted keys).
        let p = &payments[0];
        let mut expected = String::new();
        for a in &p.attempts {
            let line =
                serde_json::json!({"type": "attempt", "order_id": p.order_id, "behaviour": p.behaviour, "attempt": a});
            expected.push_str(&format!("{line}\n"));
        }
        let line = serde_json::json!({
            "type": "outcome",
            "order_id": p.order_id,
            "amount": p.amount,
            "behaviour": p.behaviour,
            "outcome": p.outcome,
            "attempts": p.attempts.len(),
            "e2e_us": p.e2e_us,
        });
        expected.push_str(&format!("{line}\n"));
        assert_eq!(text, expected);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["attempt"]["status"], 200);
        assert_eq!(lines[0]["attempt"]["payment_id"], "pi_1");
        assert_eq!(lines[1]["attempt"]["kind"], "timeout");
        assert_eq!(lines[2]["outcome"], "ok");
        std::fs::remove_dir_all(&dir).ok();
    }
}
