//! Reconciliation: what the clients were told, joined with what the ledger says happened.
//!
//! Pure and HTTP-free. Each logical payment's outcome (`ok`, `fail`, `info`) meets the
//! captured charges the ledger holds for its order id, and every disagreement becomes an
//! anomaly: a double charge (more than one captured charge), a lost charge (`ok` with
//! none), a phantom charge (`fail` with one), an amount mismatch, an inconsistent replay
//! (one key answered with two different payments), or an unresolved payment (`info`).
//! Each anomaly keeps up to [`MAX_EXAMPLES`] examples with their story: the attempts as
//! the client saw them beside the faults the provider applied.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::client::{AttemptResult, Outcome, PaymentRecord};
use crate::ledger::{LedgerView, ProviderRequest};
use crate::mix::Behaviour;

pub const MAX_EXAMPLES: usize = 10;

/// One anomaly: how often, and a few examples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    pub count: u64,
    pub examples: Vec<Example>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    pub order_id: String,
    pub story: String,
}

impl Anomaly {
    pub(crate) fn add(&mut self, example: impl FnOnce() -> Example) {
        self.count += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(example());
        }
    }

    pub fn merge(&mut self, other: &Anomaly) {
        self.count += other.count;
        let room = MAX_EXAMPLES.saturating_sub(self.examples.len());
        self.examples.extend(other.examples.iter().take(room).cloned());
    }
}

/// The kinds of anomaly, in the order reports list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnomalyKind {
    /// More than one captured charge.
    DoubleCharge,
    /// Told `ok`, no captured charge.
    Lost,
    /// Told `fail`, yet charged.
    Phantom,
    AmountMismatch,
    /// One key answered with two different payments.
    InconsistentReplay,
    /// Never told anything definite (`info`).
    Unresolved,
    /// The target fulfilled the order more than once (a fulfilment probe's count above 1).
    DoubleFulfillment,
    /// Told `ok`, charged, yet the target fulfilled nothing.
    MissedFulfillment,
    /// A card the feeder said should decline (`expect` = `fail`) was charged.
    UnexpectedCharge,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 9] = [
        Self::DoubleCharge,
        Self::Lost,
        Self::Phantom,
        Self::AmountMismatch,
        Self::InconsistentReplay,
        Self::Unresolved,
        Self::DoubleFulfillment,
        Self::MissedFulfillment,
        Self::UnexpectedCharge,
    ];

    /// The name reports and gates give it: `double charges`, `lost charges`, …
    pub fn name(self) -> &'static str {
        match self {
            Self::DoubleCharge => "double charges",
            Self::Lost => "lost charges",
            Self::Phantom => "phantom charges",
            Self::AmountMismatch => "amount mismatches",
            Self::InconsistentReplay => "inconsistent replays",
            Self::Unresolved => "unresolved payments",
            Self::DoubleFulfillment => "double fulfillments",
            Self::MissedFulfillment => "missed fulfillments",
            Self::UnexpectedCharge => "charges of cards expected to decline",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Anomalies {
    /// Orders with more than one captured charge.
    pub double_charges: Anomaly,
    /// Captured charges beyond the first, over all double-charged orders.
    pub extra_charges: u64,
    /// Their amount (smallest currency unit).
    pub extra_amount: u64,
    pub lost: Anomaly,
    pub phantom: Anomaly,
    pub amount_mismatch: Anomaly,
    pub inconsistent_replay: Anomaly,
    pub unresolved: Anomaly,
    /// Unresolved payments for which money did move.
    pub unresolved_charged: u64,
    /// Orders the target fulfilled more than once (only with a fulfilment probe).
    #[serde(default)]
    pub double_fulfillments: Anomaly,
    /// Fulfilments beyond the first, over all doubly fulfilled orders.
    #[serde(default)]
    pub extra_fulfillments: u64,
    /// Orders told ok and charged that the target never fulfilled.
    #[serde(default)]
    pub missed_fulfillments: Anomaly,
    /// Cards the feeder said should decline that were charged (`--data` with `expect`).
    #[serde(default)]
    pub unexpected_charges: Anomaly,
    /// Cards the feeder said should pay that were declined (reported, not an anomaly of
    /// money: no charge was made).
    #[serde(default)]
    pub unexpected_declines: u64,
}

impl Anomalies {
    /// The count and examples of one kind.
    pub fn get(&self, kind: AnomalyKind) -> &Anomaly {
        match kind {
            AnomalyKind::DoubleCharge => &self.double_charges,
            AnomalyKind::Lost => &self.lost,
            AnomalyKind::Phantom => &self.phantom,
            AnomalyKind::AmountMismatch => &self.amount_mismatch,
            AnomalyKind::InconsistentReplay => &self.inconsistent_replay,
            AnomalyKind::Unresolved => &self.unresolved,
            AnomalyKind::DoubleFulfillment => &self.double_fulfillments,
            AnomalyKind::MissedFulfillment => &self.missed_fulfillments,
            AnomalyKind::UnexpectedCharge => &self.unexpected_charges,
        }
    }

    pub fn merge(&mut self, o: &Anomalies) {
        self.double_charges.merge(&o.double_charges);
        self.extra_charges += o.extra_charges;
        self.extra_amount += o.extra_amount;
        self.lost.merge(&o.lost);
        self.phantom.merge(&o.phantom);
        self.amount_mismatch.merge(&o.amount_mismatch);
        self.inconsistent_replay.merge(&o.inconsistent_replay);
        self.unresolved.merge(&o.unresolved);
        self.unresolved_charged += o.unresolved_charged;
        self.double_fulfillments.merge(&o.double_fulfillments);
        self.extra_fulfillments += o.extra_fulfillments;
        self.missed_fulfillments.merge(&o.missed_fulfillments);
        self.unexpected_charges.merge(&o.unexpected_charges);
        self.unexpected_declines += o.unexpected_declines;
    }
}

/// Counts by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
}

impl Outcomes {
    pub fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Ok => self.ok += 1,
            Outcome::Fail => self.fail += 1,
            Outcome::Info => self.info += 1,
        }
    }

    pub fn merge(&mut self, o: &Outcomes) {
        self.ok += o.ok;
        self.fail += o.fail;
        self.info += o.info;
    }

    pub fn total(&self) -> u64 {
        self.ok + self.fail + self.info
    }
}

/// Per client behaviour: how many payments and how many were double-charged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BehaviourCounts {
    pub payments: u64,
    pub double_charges: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reconciliation {
    pub outcomes: Outcomes,
    pub anomalies: Anomalies,
    pub by_behaviour: BTreeMap<Behaviour, BehaviourCounts>,
    /// Charges in the ledger under this run's prefix that no journaled payment explains.
    pub unknown_orders: u64,
    /// Attempts whose answer was longer than the cap, so not read.
    pub answers_cut: u64,
}

/// Joins the journal's payments with the ledger.
pub fn reconcile(
    payments: &[PaymentRecord],
    ledger: &LedgerView,
    requests: &HashMap<String, Vec<ProviderRequest>>,
) -> Reconciliation {
    let mut r = Reconciliation::default();
    let none = Vec::new();
    for p in payments {
        r.outcomes.add(p.outcome);
        let by = r.by_behaviour.entry(p.behaviour).or_default();
        by.payments += 1;
        let charges = ledger.charges.get(&p.order_id).unwrap_or(&none);
        let story = || Example {
            order_id: p.order_id.clone(),
            story: story(p, charges, requests.get(&p.order_id)),
        };
        if charges.len() > 1 {
            by.double_charges += 1;
            r.anomalies.double_charges.add(story);
            r.anomalies.extra_charges += charges.len() as u64 - 1;
            r.anomalies.extra_amount += charges[1..].iter().map(|c| c.amount).sum::<u64>();
        }
        match p.outcome {
            Outcome::Ok if charges.is_empty() => r.anomalies.lost.add(story),
            Outcome::Fail if !charges.is_empty() => r.anomalies.phantom.add(story),
            Outcome::Info => {
                if !charges.is_empty() {
                    r.anomalies.unresolved_charged += 1;
                }
                r.anomalies.unresolved.add(story);
            }
            _ => {}
        }
        // What the feeder said the card would do: a charge of a card that should have
        // declined is an anomaly; a decline of one that should have paid is counted.
        match (p.expect, p.outcome) {
            (Some(Outcome::Fail), _) if !charges.is_empty() => r.anomalies.unexpected_charges.add(story),
            (Some(Outcome::Ok), Outcome::Fail) => r.anomalies.unexpected_declines += 1,
            _ => {}
        }
        if charges.iter().any(|c| c.amount != p.amount) {
            r.anomalies.amount_mismatch.add(story);
        }
        if inconsistent_replay(p) {
            r.anomalies.inconsistent_replay.add(story);
        }
    }
    let mut known: std::collections::HashSet<&str, foldhash::fast::RandomState> =
        std::collections::HashSet::with_capacity_and_hasher(payments.len(), Default::default());
    known.extend(payments.iter().map(|p| p.order_id.as_str()));
    r.unknown_orders = ledger.charges.keys().filter(|k| !known.contains(k.as_str())).count() as u64;
    r.answers_cut = payments
        .iter()
        .flat_map(|p| &p.attempts)
        .filter(|a| {
            matches!(
                a.result,
                crate::client::AttemptResult::Failed {
                    kind: crate::client::FailureKind::TooLarge
                }
            )
        })
        .count() as u64;
    r
}

/// One key answered with two different payment ids.
fn inconsistent_replay(p: &PaymentRecord) -> bool {
    // Most payments have one attempt: nothing to compare, nothing to allocate.
    if p.attempts.len() < 2 {
        return false;
    }
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for a in &p.attempts {
        if let (
            Some(key),
            AttemptResult::Answer {
                status: 200..=299,
                payment_id: Some(id),
                ..
            },
        ) = (&a.key, &a.result)
        {
            if let Some(prev) = seen.insert(key, id) {
                if prev != id {
                    return true;
                }
            }
        }
    }
    false
}

/// "order r1-000042: attempt 1 timed out after 2.0 s; attempt 2 → 200 pi_… (new key) |
/// provider: …; ledger: 2 charges ch_… (drop_response after_commit (rule 0)), ch_…"
pub fn story(
    p: &PaymentRecord,
    charges: &[crate::ledger::LedgerCharge],
    provider: Option<&Vec<ProviderRequest>>,
) -> String {
    let mut s = format!("order {} ({}, {}): ", p.order_id, p.behaviour, outcome_word(p.outcome));
    let mut last_key: Option<&str> = None;
    for (i, a) in p.attempts.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        let secs = a.elapsed_us as f64 / 1e6;
        let _ = match &a.result {
            AttemptResult::Answer {
                status,
                payment_id,
                replayed,
                ..
            } => write!(
                s,
                "attempt {} → {}{}{}",
                a.n,
                status,
                payment_id.as_deref().map(|id| format!(" {id}")).unwrap_or_default(),
                if *replayed { " (replayed)" } else { "" }
            ),
            AttemptResult::Failed { kind } => match kind {
                crate::client::FailureKind::Timeout => write!(s, "attempt {} timed out after {secs:.1} s", a.n),
                crate::client::FailureKind::Reset => write!(s, "attempt {} connection reset", a.n),
                crate::client::FailureKind::Eof => write!(s, "attempt {} connection closed with no answer", a.n),
                crate::client::FailureKind::Connect => write!(s, "attempt {} could not connect", a.n),
                crate::client::FailureKind::TooLarge => write!(
                    s,
                    "attempt {} answered more than {} bytes, which were not read",
                    a.n,
                    crate::body::MAX_ANSWER_BYTES
                ),
                crate::client::FailureKind::Other => write!(s, "attempt {} failed", a.n),
            },
        };
        let key = a.key.as_deref();
        if i > 0 && key != last_key {
            s.push_str(if key.is_some() { " (new key)" } else { " (no key)" });
        }
        last_key = key;
    }
    if let Some(reqs) = provider.filter(|r| !r.is_empty()) {
        s.push_str(" | provider: ");
        let parts: Vec<String> = reqs
            .iter()
            .map(|r| {
                let mut t = format!("attempt {}", r.attempt);
                if let Some(f) = &r.fault {
                    let _ = write!(t, " {f}");
                }
                let _ = write!(t, " → {}", r.outcome);
                if let (Some(c), false) = (r.committed_status, r.outcome.is_status()) {
                    let _ = write!(t, " (committed {c})");
                }
                if let Some(o) = &r.object {
                    let _ = write!(t, " {o}");
                }
                t
            })
            .collect();
        s.push_str(&parts.join("; "));
    }
    let _ = write!(
        s,
        " | ledger: {} captured charge{}",
        charges.len(),
        if charges.len() == 1 { "" } else { "s" }
    );
    for c in charges.iter().take(4) {
        let _ = write!(s, " {}", c.payment_intent.as_deref().unwrap_or(&c.id));
        if let Some(f) = &c.fault {
            let _ = write!(s, " ({f})");
        }
    }
    s
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "client told ok",
        Outcome::Fail => "client told fail",
        Outcome::Info => "client never got a definite answer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{AttemptRecord, FailureKind};
    use crate::ledger::LedgerCharge;

    fn payment(order: &str, outcome: Outcome, attempts: Vec<(Option<&str>, AttemptResult)>) -> PaymentRecord {
        PaymentRecord {
            order_id: order.into(),
            amount: 1000,
            behaviour: Behaviour::RetryNewKey,
            outcome,
            e2e_us: 1,
            steps: Vec::new(),
            expect: None,
            attempts: attempts
                .into_iter()
                .enumerate()
                .map(|(i, (k, result))| AttemptRecord {
                    n: i as u32 + 1,
                    key: k.map(str::to_string),
                    start_us: 0,
                    elapsed_us: 2_000_000,
                    result,
                })
                .collect(),
        }
    }

    fn ok(id: &str) -> AttemptResult {
        AttemptResult::Answer {
            status: 200,
            payment_id: Some(id.into()),
            replayed: false,
            retry_after: None,
            should_retry: None,
        }
    }

    fn charge(id: &str, amount: u64) -> LedgerCharge {
        LedgerCharge {
            id: id.into(),
            amount,
            payment_intent: Some(format!("pi_{id}")),
            idempotency_key: None,
            fault: Some("drop_response after_commit (rule 0)".into()),
        }
    }

    #[test]
    fn each_anomaly_is_found() {
        let payments = vec![
            payment(
                "double",
                Outcome::Ok,
                vec![
                    (
                        Some("k1"),
                        AttemptResult::Failed {
                            kind: FailureKind::Timeout,
                        },
                    ),
                    (Some("k2"), ok("pi_b")),
                ],
            ),
            payment("lost", Outcome::Ok, vec![(Some("k"), ok("pi_x"))]),
            payment(
                "phantom",
                Outcome::Fail,
                vec![(
                    Some("k"),
                    AttemptResult::Answer {
                        status: 402,
                        payment_id: None,
                        replayed: false,
                        retry_after: None,
                        should_retry: None,
                    },
                )],
            ),
            payment(
                "info",
                Outcome::Info,
                vec![(
                    Some("k"),
                    AttemptResult::Failed {
                        kind: FailureKind::Reset,
                    },
                )],
            ),
            payment("mismatch", Outcome::Ok, vec![(Some("k"), ok("pi_m"))]),
            payment(
                "replay",
                Outcome::Ok,
                vec![(Some("k"), ok("pi_1")), (Some("k"), ok("pi_2"))],
            ),
            payment("clean", Outcome::Ok, vec![(Some("k"), ok("pi_c"))]),
        ];
        let mut ledger = LedgerView::default();
        ledger
            .charges
            .insert("double".into(), vec![charge("a", 1000), charge("b", 1000)]);
        ledger.charges.insert("phantom".into(), vec![charge("p", 1000)]);
        ledger.charges.insert("info".into(), vec![charge("i", 1000)]);
        ledger.charges.insert("mismatch".into(), vec![charge("m", 999)]);
        ledger.charges.insert("replay".into(), vec![charge("r", 1000)]);
        ledger.charges.insert("clean".into(), vec![charge("c", 1000)]);
        ledger.charges.insert("stranger".into(), vec![charge("s", 1000)]);
        let r = reconcile(&payments, &ledger, &HashMap::new());
        let a = &r.anomalies;
        assert_eq!(a.double_charges.count, 1);
        assert_eq!((a.extra_charges, a.extra_amount), (1, 1000));
        assert_eq!(a.lost.count, 1);
        assert_eq!(a.lost.examples[0].order_id, "lost");
        assert_eq!(a.phantom.count, 1);
        assert_eq!(a.unresolved.count, 1);
        assert_eq!(a.unresolved_charged, 1);
        assert_eq!(a.amount_mismatch.count, 1);
        assert_eq!(a.inconsistent_replay.count, 1);
        assert_eq!(
            r.outcomes,
            Outcomes {
                ok: 5,
                fail: 1,
                info: 1
            }
        );
        assert_eq!(r.unknown_orders, 1);
        assert_eq!(r.by_behaviour[&Behaviour::RetryNewKey].double_charges, 1);
        let story = &a.double_charges.examples[0].story;
        assert!(story.contains("attempt 1 timed out after 2.0 s"), "{story}");
        assert!(story.contains("attempt 2 → 200 pi_b (new key)"), "{story}");
        assert!(story.contains("drop_response after_commit"), "{story}");
    }

    #[test]
    fn examples_are_capped_and_merge_adds_counts() {
        let payments: Vec<PaymentRecord> = (0..25)
            .map(|i| payment(&format!("o{i}"), Outcome::Ok, vec![(Some("k"), ok("pi"))]))
            .collect();
        let r = reconcile(&payments, &LedgerView::default(), &HashMap::new());
        assert_eq!(r.anomalies.lost.count, 25);
        assert_eq!(r.anomalies.lost.examples.len(), MAX_EXAMPLES);
        let mut merged = r.anomalies.clone();
        merged.merge(&r.anomalies);
        assert_eq!(merged.lost.count, 50);
        assert_eq!(merged.lost.examples.len(), MAX_EXAMPLES);
    }
}
