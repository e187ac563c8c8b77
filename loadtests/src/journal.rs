//! The journal: every attempt and every final outcome, as JSON lines, written off the
//! request path.
//!
//! Load-test tasks hand finished payments to [`Journal::record`], which only sends them
//! down a channel; a dedicated thread serialises them into `journal.jsonl` through a
//! buffered writer. [`Journal::finish`] flushes and reports any write error.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use serde_json::json;

use crate::client::PaymentRecord;
use crate::error::LoadError;

pub struct Journal {
    tx: Option<mpsc::Sender<PaymentRecord>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    path: PathBuf,
}

impl Journal {
    pub fn create(path: &Path) -> Result<Self, LoadError> {
        let file = File::create(path).map_err(|e| LoadError::io(path, e))?;
        let (tx, rx) = mpsc::channel::<PaymentRecord>();
        let writer = std::thread::Builder::new()
            .name("fauxpay-journal".into())
            .spawn(move || -> std::io::Result<()> {
                let mut out = BufWriter::with_capacity(1 << 16, file);
                for p in rx {
                    write_payment(&mut out, &p)?;
                }
                out.flush()
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

    /// Closes the journal and waits for the writer to flush.
    pub fn finish(mut self) -> Result<(), LoadError> {
        drop(self.tx.take());
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => Err(LoadError::io(&self.path, e)),
            Some(Err(_)) => Err(LoadError::io(
                &self.path,
                std::io::Error::other("journal writer panicked"),
            )),
            _ => Ok(()),
        }
    }
}

fn write_payment(out: &mut impl Write, p: &PaymentRecord) -> std::io::Result<()> {
    for a in &p.attempts {
        let line = json!({"type": "attempt", "order_id": p.order_id, "behaviour": p.behaviour, "attempt": a});
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    let line = json!({
        "type": "outcome",
        "order_id": p.order_id,
        "amount": p.amount,
        "behaviour": p.behaviour,
        "outcome": p.outcome,
        "attempts": p.attempts.len(),
        "e2e_us": p.e2e_us,
    });
    serde_json::to_writer(&mut *out, &line)?;
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
            attempts: vec![AttemptRecord {
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
            }],
        });
        j.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["attempt"]["status"], 200);
        assert_eq!(lines[0]["attempt"]["payment_id"], "pi_1");
        assert_eq!(lines[1]["outcome"], "ok");
        std::fs::remove_dir_all(&dir).ok();
    }
}
