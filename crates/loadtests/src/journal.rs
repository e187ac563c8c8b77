//! The journal: every attempt and every final outcome, as JSON lines, written off the
//! request path.
//!
//! Load-test tasks hand finished payments to [`Journal::record`], which only queues them
//! (no clone, no wake-up: the writer is never parked in a receive); a dedicated thread
//! drains the queue every 20 ms, serialises each payment into `journal.jsonl` through a
//! buffered writer (flushed at each drain, a payment's lines whole, so a run that is
//! killed leaves whole lines) and keeps it. [`Journal::finish`] flushes, reports any write
//! error and hands the payments back for reconciliation. [`read`] reads a saved journal
//! back (`fauxpay report reconcile`).
//!
//! Keeping the payments costs ~550 B of memory a checkout while the run goes. Dropping
//! each once written and reading the file back at the end was measured: the attack ran
//! +4.4k instructions a checkout (the frees, on this thread), the end +11.8k, and no
//! faster (see bench/notes.md, 2026-12-07).

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
                // A payment's lines, whole, before they go to the file.
                let mut lines = Vec::with_capacity(1 << 10);
                let mut kept = Vec::new();
                let mut result = Ok(());
                loop {
                    let mut wrote = false;
                    let open = loop {
                        match rx.try_recv() {
                            Ok(p) => {
                                if result.is_ok() {
                                    lines.clear();
                                    result = write_payment(&mut lines, &p).and_then(|()| out.write_all(&lines));
                                    wrote = true;
                                }
                                kept.push(p);
                            }
                            Err(mpsc::TryRecvError::Empty) => break true,
                            Err(mpsc::TryRecvError::Disconnected) => break false,
                        }
                    };
                    // Whole payments reach the file at every drain: a run killed or quit
                    // leaves a journal of whole lines, a drain behind.
                    if wrote && result.is_ok() {
                        result = out.flush();
                    }
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

/// Reads a saved `journal.jsonl` back into its payments (`fauxpay report reconcile`):
/// each payment's attempt lines, then its outcome line. A damaged line
/// is refused, naming it. Read a line at a time, each into its typed fields.
pub fn read(path: &Path) -> Result<Vec<PaymentRecord>, LoadError> {
    let file = File::open(path).map_err(|e| LoadError::io(path, e))?;
    let mut input = std::io::BufReader::with_capacity(1 << 16, file);
    let bad = |n: usize, why: String| LoadError::Report {
        path: format!("{}:{}", path.display(), n + 1),
        reason: why,
    };
    let mut attempts: std::collections::HashMap<String, Vec<AttemptRecord>> = Default::default();
    let mut steps: std::collections::HashMap<String, Vec<crate::steps::StepRecord>> = Default::default();
    let mut payments = Vec::new();
    let mut text = String::new();
    for n in 0.. {
        text.clear();
        if std::io::BufRead::read_line(&mut input, &mut text).map_err(|e| LoadError::io(path, e))? == 0 {
            break;
        }
        if text.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(&text).map_err(|e| bad(n, damaged(&text, e)))?;
        let order = line.order_id.ok_or_else(|| bad(n, "no order_id".into()))?;
        let missing = |name: &str| bad(n, format!("{name}: missing"));
        match line.kind {
            Kind::Attempt => {
                let attempt = line.attempt.ok_or_else(|| missing("attempt"))?;
                attempts.entry(order).or_default().push(attempt);
            }
            Kind::Step => {
                let step = line.step.ok_or_else(|| missing("step"))?;
                steps.entry(order).or_default().push(step);
            }
            Kind::Outcome => payments.push(PaymentRecord {
                steps: steps.remove(&order).unwrap_or_default(),
                attempts: attempts.remove(&order).unwrap_or_default(),
                expect: line.expect,
                amount: line.amount.ok_or_else(|| missing("amount"))?,
                behaviour: line.behaviour.ok_or_else(|| missing("behaviour"))?,
                outcome: line.outcome.ok_or_else(|| missing("outcome"))?,
                e2e_us: line.e2e_us.ok_or_else(|| missing("e2e_us"))?,
                order_id: order,
            }),
        }
    }
    Ok(payments)
}

/// One line of the journal as [`read`] takes it: its `type` says which fields it must
/// have (fields it does not use are ignored).
#[derive(serde::Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Kind,
    order_id: Option<String>,
    attempt: Option<AttemptRecord>,
    step: Option<crate::steps::StepRecord>,
    amount: Option<u64>,
    behaviour: Option<crate::mix::Behaviour>,
    outcome: Option<crate::client::Outcome>,
    e2e_us: Option<u64>,
    expect: Option<crate::client::Outcome>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Attempt,
    Step,
    Outcome,
}

/// Why a line that is not a journal line is refused: its `type`, its `order_id`, or the
/// first field whose value is not of its kind.
fn damaged(text: &str, e: serde_json::Error) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return e.to_string();
    };
    if !matches!(v["type"].as_str(), Some("attempt" | "step" | "outcome")) {
        return "neither an attempt, a step nor an outcome line".into();
    }
    if !v["order_id"].is_string() {
        return "no order_id".into();
    }
    fn fits<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> bool {
        v.is_null() || serde_json::from_value::<T>(v.clone()).is_ok()
    }
    type Fits = fn(&serde_json::Value) -> bool;
    let fields: [(&str, Fits); 7] = [
        ("attempt", fits::<AttemptRecord>),
        ("step", fits::<crate::steps::StepRecord>),
        ("amount", fits::<u64>),
        ("behaviour", fits::<crate::mix::Behaviour>),
        ("outcome", fits::<crate::client::Outcome>),
        ("e2e_us", fits::<u64>),
        ("expect", fits::<crate::client::Outcome>),
    ];
    match fields.iter().find(|(name, fits)| !fits(&v[*name])) {
        Some((name, _)) => format!("{name}: {e}"),
        None => e.to_string(),
    }
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

    /// A fresh folder for a test's journal, and the journal's path in it.
    fn scratch(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("fauxpay-journal-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.jsonl");
        (dir, path)
    }

    #[test]
    fn writes_attempts_then_the_outcome() {
        let (dir, path) = scratch("lines");
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

    fn payment(n: u32) -> PaymentRecord {
        PaymentRecord {
            order_id: format!("r-{n}"),
            amount: 100 + u64::from(n),
            behaviour: if n % 2 == 0 {
                Behaviour::RetrySameKey
            } else {
                Behaviour::DoubleSubmit
            },
            outcome: [Outcome::Ok, Outcome::Fail, Outcome::Info][n as usize % 3],
            e2e_us: 10 * u64::from(n),
            steps: (0..n % 3)
                .map(|i| crate::steps::StepRecord {
                    name: format!("step-{i}"),
                    status: (i != 1).then_some(200),
                    start_us: u64::from(i),
                    elapsed_us: 5,
                    sends: i + 1,
                })
                .collect(),
            expect: (n % 4 == 0).then_some(Outcome::Fail),
            attempts: (1..=n % 4)
                .map(|a| AttemptRecord {
                    n: a,
                    key: (a != 2).then(|| format!("k-{n}-\"{a}\"")),
                    start_us: u64::from(a),
                    elapsed_us: 7,
                    result: match a {
                        3 => AttemptResult::Failed {
                            kind: crate::client::FailureKind::Reset,
                        },
                        _ => AttemptResult::Answer {
                            status: 200,
                            payment_id: (a == 1).then(|| format!("pi_{n}")),
                            replayed: a == 2,
                            retry_after: None,
                            should_retry: None,
                        },
                    },
                })
                .collect(),
        }
    }

    /// A journal read back (`fauxpay report reconcile`) holds the payments recorded, as the
    /// run kept them.
    #[test]
    fn a_journal_reads_back_every_payment_as_recorded_and_in_order() {
        let (dir, path) = scratch("back");
        let j = Journal::create(&path).unwrap();
        let recorded: Vec<PaymentRecord> = (0..200).map(payment).collect();
        for p in &recorded {
            j.record(p.clone());
        }
        let kept = j.finish().unwrap();
        let back = read(&path).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&recorded).unwrap()
        );
        assert_eq!(
            serde_json::to_value(&kept).unwrap(),
            serde_json::to_value(&recorded).unwrap()
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_damaged_line_is_refused_naming_its_line_and_field() {
        let (dir, path) = scratch("damaged");
        let good = r#"{"amount":1,"attempts":0,"behaviour":"no-key","e2e_us":1,"order_id":"o","outcome":"ok","type":"outcome"}"#;
        for (line, why) in [
            ("not json", "expected ident"),
            (
                r#"{"type":"refund","order_id":"o"}"#,
                "neither an attempt, a step nor an outcome line",
            ),
            (r#"{"type":"outcome","order_id":7}"#, "no order_id"),
            (r#"{"type":"attempt","order_id":"o"}"#, "attempt: missing"),
            (
                r#"{"type":"attempt","order_id":"o","attempt":{"n":"one"}}"#,
                "attempt: ",
            ),
            (
                r#"{"type":"outcome","order_id":"o","amount":1,"behaviour":"no-key","outcome":"ok"}"#,
                "e2e_us: missing",
            ),
            (
                r#"{"type":"outcome","order_id":"o","amount":-1,"behaviour":"no-key","outcome":"ok","e2e_us":1}"#,
                "amount: ",
            ),
            (
                r#"{"type":"outcome","order_id":"o","amount":1,"behaviour":"clumsy","outcome":"ok","e2e_us":1}"#,
                "behaviour: ",
            ),
        ] {
            std::fs::write(&path, format!("{good}\n\n{line}\n{good}\n")).unwrap();
            let e = read(&path).unwrap_err().to_string();
            assert!(e.contains("journal.jsonl:3"), "{line}: {e}");
            assert!(e.contains(why), "{line}: {e}");
        }
        std::fs::write(&path, format!("{good}\n{good}\n")).unwrap();
        assert_eq!(read(&path).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Lines of payments written apart (not the journal's own order) still gather by order
    /// id, each payment's in the order read.
    #[test]
    fn lines_written_apart_gather_by_order_id() {
        let (dir, path) = scratch("apart");
        let attempt = |order: &str, n: u32| {
            format!(
                r#"{{"attempt":{{"elapsed_us":1,"key":"k","n":{n},"payment_id":null,"replayed":false,"result":"answer","start_us":{n},"status":200}},"behaviour":"retry-same-key","order_id":"{order}","type":"attempt"}}"#
            )
        };
        let step = |order: &str, name: &str| {
            format!(
                r#"{{"order_id":"{order}","step":{{"name":"{name}","status":200,"start_us":0,"elapsed_us":1,"sends":1}},"type":"step"}}"#
            )
        };
        let outcome = |order: &str| {
            format!(
                r#"{{"amount":1,"attempts":2,"behaviour":"retry-same-key","e2e_us":1,"order_id":"{order}","outcome":"ok","type":"outcome"}}"#
            )
        };
        let lines = [
            attempt("a", 1),
            step("a", "cart"),
            attempt("b", 1),
            attempt("a", 2),
            step("b", "cart"),
            outcome("a"),
            attempt("b", 2),
            step("b", "read"),
            outcome("b"),
            outcome("c"),
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let payments = read(&path).unwrap();
        let summary: Vec<(String, Vec<u32>, Vec<String>)> = payments
            .iter()
            .map(|p| {
                (
                    p.order_id.clone(),
                    p.attempts.iter().map(|a| a.n).collect(),
                    p.steps.iter().map(|s| s.name.clone()).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("a".to_string(), vec![1, 2], vec!["cart".to_string()]),
                (
                    "b".to_string(),
                    vec![1, 2],
                    vec!["cart".to_string(), "read".to_string()]
                ),
                ("c".to_string(), vec![], vec![]),
            ]
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
