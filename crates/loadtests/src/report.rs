//! Reports: the versioned `report.json`, its merge, the gates, and the renderings
//! (terminal summary, `report.md` for a CI step summary, `junit.xml` with one test case
//! per gate); `report.html` is `report_html`'s, from the report and its [`Timeline`].
//!
//! A [`Report`] carries counts, anomalies with examples, and latency histograms
//! serialised whole, so [`Report::merge`] of reports written by several load generators
//! against one provider gives the same counts and percentiles as one combined run.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::LoadError;
use crate::fulfillment::FulfillmentReport;
use crate::latency::{Latency, Percentiles};
use crate::mix::Behaviour;
use crate::open::OpenReport;
use crate::reconcile::{Anomalies, AnomalyKind, BehaviourCounts, Example, Outcomes};
use crate::timeline::Timeline;

/// Version of `report.json`; bumped on any incompatible change.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// One load generator's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub run_id: String,
    pub target: String,
    pub provider: String,
    pub template: String,
    /// `--scenario` as written, when the run had scenarios (`template` then names them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    pub mix: String,
    /// The seed of the run's random choices (behaviours, amounts, jitter).
    pub seed: u64,
    pub started_ms: u64,
    pub duration_secs: f64,
    pub payments: u64,
    /// The signal that stopped the run's users early (`Ctrl-C` or `SIGTERM`), if one did:
    /// the counts then cover the checkouts that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
}

/// What a report concludes (exit codes: [`crate::run::exit_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunVerdict {
    /// Every gate held over a run that ran as asked (or a person stopped with Ctrl-C): 0.
    Held,
    /// A gate failed: 1.
    Failed,
    /// Every gate held, but SIGTERM cut a run short: 143.
    CutShort,
    /// The provider's ledger could not be read after the run, so the anomalies are
    /// unknown (every anomaly gate fails as `unknown`): 4.
    Unknown,
}

impl RunVerdict {
    /// How the reports word it.
    pub fn words(self) -> &'static str {
        match self {
            RunVerdict::Held => "every gate held",
            RunVerdict::Failed => "a gate failed",
            RunVerdict::CutShort => "run cut short by SIGTERM",
            RunVerdict::Unknown => "anomalies unknown: the ledger could not be read",
        }
    }
}

/// The gates' thresholds (`None`: not gated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub max_double_charges: u64,
    pub max_lost: u64,
    pub max_phantom: u64,
    pub max_amount_mismatch: u64,
    pub max_inconsistent_replays: u64,
    pub max_unresolved: Option<u64>,
    pub max_p99_ms: Option<f64>,
    /// Open model (`--rate`): most start times dropped.
    #[serde(default)]
    pub max_dropped: Option<u64>,
    /// Set (default 0) when the template has a fulfilment probe.
    #[serde(default)]
    pub max_double_fulfillments: Option<u64>,
    #[serde(default)]
    pub max_missed_fulfillments: Option<u64>,
    /// Set (default 0) when a `--data` feeder says what its cards should do.
    #[serde(default)]
    pub max_unexpected_charges: Option<u64>,
    /// `--gate` expressions (latency percentiles per step, the error rate, the achieved
    /// rate), as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<String>,
}

impl Thresholds {
    /// The most anomalies of `kind` a run may have; `None` when the kind is not gated.
    pub fn max(&self, kind: AnomalyKind) -> Option<u64> {
        match kind {
            AnomalyKind::DoubleCharge => Some(self.max_double_charges),
            AnomalyKind::Lost => Some(self.max_lost),
            AnomalyKind::Phantom => Some(self.max_phantom),
            AnomalyKind::AmountMismatch => Some(self.max_amount_mismatch),
            AnomalyKind::InconsistentReplay => Some(self.max_inconsistent_replays),
            AnomalyKind::Unresolved => self.max_unresolved,
            AnomalyKind::DoubleFulfillment => self.max_double_fulfillments,
            AnomalyKind::MissedFulfillment => self.max_missed_fulfillments,
            AnomalyKind::UnexpectedCharge => self.max_unexpected_charges,
        }
    }
}

/// What a gate holds to: a count of anomalies, the end-to-end p99, or a `--gate`
/// expression. Written as its name (`"double charges"`, `"payment p99"`, the expression)
/// in `report.json`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GateName {
    Anomaly(AnomalyKind),
    PaymentP99,
    /// Open model: start times dropped because every user was busy.
    Dropped,
    /// A `--gate` expression (`p95(checkout) < 800ms`).
    Slo(String),
}

impl GateName {
    pub const ALL: [GateName; 11] = [
        Self::Anomaly(AnomalyKind::DoubleCharge),
        Self::Anomaly(AnomalyKind::Lost),
        Self::Anomaly(AnomalyKind::Phantom),
        Self::Anomaly(AnomalyKind::AmountMismatch),
        Self::Anomaly(AnomalyKind::InconsistentReplay),
        Self::Anomaly(AnomalyKind::Unresolved),
        Self::Anomaly(AnomalyKind::DoubleFulfillment),
        Self::Anomaly(AnomalyKind::MissedFulfillment),
        Self::Anomaly(AnomalyKind::UnexpectedCharge),
        Self::PaymentP99,
        Self::Dropped,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            Self::Anomaly(kind) => kind.name(),
            Self::PaymentP99 => "payment p99",
            Self::Dropped => "dropped checkouts",
            Self::Slo(text) => text,
        }
    }
}

impl fmt::Display for GateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for GateName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for GateName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = Cow::<'de, str>::deserialize(d)?;
        if let Some(g) = Self::ALL.into_iter().find(|g| g.as_str() == name) {
            return Ok(g);
        }
        match crate::slo::Slo::parse(&name) {
            Ok(_) => Ok(Self::Slo(name.into_owned())),
            Err(_) => Err(serde::de::Error::custom(format!("unknown gate {name:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub name: GateName,
    pub value: String,
    pub threshold: String,
    pub passed: bool,
    pub examples: Vec<Example>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    pub attempt: Percentiles,
    pub payment: Percentiles,
    /// HdrHistogram V2-deflate, base64, in microseconds.
    pub attempt_histogram: String,
    pub payment_histogram: String,
    /// A multi-step template's steps, by name (the payment step's are its attempts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, StepLatency>,
    /// With `--scenario`: each scenario, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<ScenarioReport>,
}

/// One `--scenario` of a run: its weight, its iterations, how many went through (the
/// payment told `ok`; a browse flow's every step answered), its steps and its end-to-end
/// latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioReport {
    pub name: String,
    pub weight: u32,
    /// Whether it is the scenario that pays (the others only browse).
    pub pays: bool,
    pub runs: u64,
    pub ok: u64,
    pub steps: Vec<String>,
    pub latency: Percentiles,
    pub histogram: String,
}

impl ScenarioReport {
    pub fn new(s: &crate::scenarios::Scenario, tally: &crate::scenarios::Tally) -> Self {
        Self {
            name: s.name.clone(),
            weight: s.weight,
            pays: s.browse.is_none(),
            runs: tally.runs,
            ok: tally.ok,
            steps: s.steps.clone(),
            latency: tally.latency.percentiles(),
            histogram: tally.latency.to_base64(),
        }
    }

    /// Combines the same scenario of two merged runs.
    fn merge(&mut self, other: &ScenarioReport) -> Result<(), String> {
        let mut h = Latency::from_base64(&self.histogram)?;
        h.merge(&Latency::from_base64(&other.histogram)?);
        self.runs += other.runs;
        self.ok += other.ok;
        self.latency = h.percentiles();
        self.histogram = h.to_base64();
        Ok(())
    }
}

/// One step's latency: its percentiles and its histogram (as the others are kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLatency {
    pub latency: Percentiles,
    pub histogram: String,
}

fn step_latencies(steps: &BTreeMap<String, Latency>) -> BTreeMap<String, StepLatency> {
    steps
        .iter()
        .map(|(name, l)| {
            (
                name.clone(),
                StepLatency {
                    latency: l.percentiles(),
                    histogram: l.to_base64(),
                },
            )
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub fauxpay_version: String,
    pub runs: Vec<RunInfo>,
    pub payments: u64,
    pub attempts: u64,
    pub duration_secs: f64,
    pub attempts_per_sec: f64,
    pub outcomes: Outcomes,
    pub anomalies: Anomalies,
    pub by_behaviour: BTreeMap<Behaviour, BehaviourCounts>,
    pub unknown_orders: u64,
    /// Attempts whose answer was longer than 1 MiB, so not read (counted as failed
    /// attempts); absent from reports written before it existed.
    #[serde(default)]
    pub answers_cut: u64,
    pub latency: LatencyReport,
    pub thresholds: Thresholds,
    pub gates: Vec<Gate>,
    /// The open model's counts, achieved rate and honest latency (`--rate` runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenReport>,
    /// The run second by second (absent from reports written before it existed).
    #[serde(default)]
    pub timeline: Timeline,
    /// The fulfilment probe's findings (only when the template has a probe); the counts
    /// are in `anomalies`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fulfillment: Option<FulfillmentReport>,
    /// Why the provider's ledger could not be read after the run, when it could not: the
    /// anomalies are then unknown (not zero), every anomaly gate fails as "unknown", and
    /// `fauxpay report reconcile` can judge the saved journal later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_unread: Option<String>,
}

impl crate::slo::Measures for Report {
    fn histogram(&self, of: &str) -> Option<&str> {
        match of {
            // The open model counts from each checkout's intended start, as --max-p99
            // does (no coordinated omission).
            "payment" => Some(
                self.open
                    .as_ref()
                    .map_or(&self.latency.payment_histogram, |o| &o.latency_from_intended_histogram),
            ),
            "attempt" => Some(&self.latency.attempt_histogram),
            name => self.latency.steps.get(name).map(|s| &s.histogram).or_else(|| {
                self.latency
                    .scenarios
                    .iter()
                    .find(|s| s.name == name)
                    .map(|s| &s.histogram)
            }),
        }
        .map(String::as_str)
    }

    fn outcomes(&self) -> (u64, u64) {
        let o = &self.outcomes;
        (o.ok, o.fail + o.info)
    }

    fn scenario_outcomes(&self, name: &str) -> Option<(u64, u64)> {
        let s = self.latency.scenarios.iter().find(|s| s.name == name)?;
        Some((s.ok, s.runs.saturating_sub(s.ok)))
    }

    fn rate(&self) -> Option<f64> {
        let open = self.open.as_ref()?;
        let asked = open.scheduled as f64 / open.run_time_secs.max(f64::EPSILON);
        Some(if asked > 0.0 {
            open.achieved_per_sec / asked
        } else {
            0.0
        })
    }
}

/// What a run measured, before gates.
pub struct Measured {
    pub run: RunInfo,
    pub attempts: u64,
    pub outcomes: Outcomes,
    pub anomalies: Anomalies,
    pub by_behaviour: BTreeMap<Behaviour, BehaviourCounts>,
    pub unknown_orders: u64,
    pub answers_cut: u64,
    pub attempt_latency: Latency,
    pub payment_latency: Latency,
    /// A multi-step template's steps' latencies, by name.
    pub step_latency: BTreeMap<String, Latency>,
    /// With `--scenario`: each scenario's figures.
    pub scenarios: Vec<ScenarioReport>,
    pub fulfillment: Option<FulfillmentReport>,
}

impl Report {
    pub fn new(m: Measured, thresholds: Thresholds) -> Self {
        let duration = m.run.duration_secs;
        let mut r = Report {
            schema_version: REPORT_SCHEMA_VERSION,
            fauxpay_version: env!("CARGO_PKG_VERSION").to_string(),
            payments: m.outcomes.total(),
            attempts: m.attempts,
            duration_secs: duration,
            attempts_per_sec: if duration > 0.0 {
                m.attempts as f64 / duration
            } else {
                0.0
            },
            runs: vec![m.run],
            outcomes: m.outcomes,
            anomalies: m.anomalies,
            by_behaviour: m.by_behaviour,
            unknown_orders: m.unknown_orders,
            answers_cut: m.answers_cut,
            latency: LatencyReport {
                attempt: m.attempt_latency.percentiles(),
                payment: m.payment_latency.percentiles(),
                attempt_histogram: m.attempt_latency.to_base64(),
                payment_histogram: m.payment_latency.to_base64(),
                steps: step_latencies(&m.step_latency),
                scenarios: m.scenarios,
            },
            thresholds,
            gates: Vec::new(),
            open: None,
            timeline: Timeline::default(),
            fulfillment: m.fulfillment,
            ledger_unread: None,
        };
        r.gates = r.evaluate();
        r
    }

    /// The report of a run whose ledger could not be read (`why`): its anomalies unknown.
    pub fn ledger_unread(mut self, why: String) -> Self {
        self.ledger_unread = Some(why);
        self.gates = self.evaluate();
        self
    }

    /// Adds an open-model run's section, and gates on it.
    pub fn with_open(mut self, open: OpenReport) -> Self {
        self.open = Some(open);
        self.gates = self.evaluate();
        self
    }

    /// The end-to-end p99 the gate holds to: from the intended start in the open model.
    fn gated_p99_ms(&self) -> f64 {
        self.open
            .as_ref()
            .map_or(self.latency.payment.p99_ms, |o| o.latency_from_intended.p99_ms)
    }

    /// Whether the fulfilment anomalies were judged (a probe ran after the deliveries).
    pub fn fulfillment_checked(&self) -> bool {
        self.fulfillment.as_ref().is_some_and(|f| f.checked)
    }

    /// Every gate, evaluated against this report's numbers.
    pub fn evaluate(&self) -> Vec<Gate> {
        let t = &self.thresholds;
        let mut gates: Vec<Gate> = AnomalyKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let max = t.max(kind)?;
                let a = self.anomalies.get(kind);
                if self.ledger_unread.is_some() {
                    // Without the ledger nothing was judged: unknown, and no pass.
                    return Some(Gate {
                        name: GateName::Anomaly(kind),
                        value: "unknown".into(),
                        threshold: format!("≤ {max}"),
                        passed: false,
                        examples: Vec::new(),
                    });
                }
                let fulfillment = matches!(kind, AnomalyKind::DoubleFulfillment | AnomalyKind::MissedFulfillment);
                if fulfillment && !self.fulfillment_checked() {
                    // Gated explicitly, but nothing could be judged: that is no pass.
                    return Some(Gate {
                        name: GateName::Anomaly(kind),
                        value: "not checked".into(),
                        threshold: format!("≤ {max}"),
                        passed: false,
                        examples: Vec::new(),
                    });
                }
                Some(Gate {
                    name: GateName::Anomaly(kind),
                    value: a.count.to_string(),
                    threshold: format!("≤ {max}"),
                    passed: a.count <= max,
                    examples: a.examples.clone(),
                })
            })
            .collect();
        if let Some(max) = t.max_p99_ms {
            let p99 = self.gated_p99_ms();
            gates.push(Gate {
                name: GateName::PaymentP99,
                value: format!("{p99:.1} ms"),
                threshold: format!("≤ {max:.1} ms"),
                passed: p99 <= max,
                examples: Vec::new(),
            });
        }
        for text in &t.slo {
            let name = GateName::Slo(text.clone());
            match crate::slo::Slo::parse(text) {
                Ok(slo) => {
                    let (value, passed) = match slo.value(self) {
                        Some((v, shown)) => (shown, slo.holds(v)),
                        None => ("not measured".to_string(), false),
                    };
                    gates.push(Gate {
                        name,
                        value,
                        threshold: slo.threshold(),
                        passed,
                        examples: Vec::new(),
                    });
                }
                Err(why) => gates.push(Gate {
                    name,
                    value: why,
                    threshold: "a valid expression".into(),
                    passed: false,
                    examples: Vec::new(),
                }),
            }
        }
        if let Some(max) = t.max_dropped {
            let dropped = self.open.as_ref().map_or(0, |o| o.dropped);
            gates.push(Gate {
                name: GateName::Dropped,
                value: dropped.to_string(),
                threshold: format!("≤ {max}"),
                passed: dropped <= max,
                examples: Vec::new(),
            });
        }
        gates
    }

    pub fn passed(&self) -> bool {
        self.gates.iter().all(|g| g.passed)
    }

    /// Combines reports of load generators run against one provider (thresholds from the
    /// first report). Runs are taken as concurrent: the duration is the longest one.
    pub fn merge(reports: &[Report]) -> Result<Report, String> {
        let (first, rest) = reports.split_first().ok_or("nothing to merge")?;
        let mut out = first.clone();
        let mut attempt_h = Latency::from_base64(&first.latency.attempt_histogram)?;
        let mut payment_h = Latency::from_base64(&first.latency.payment_histogram)?;
        let mut steps_h: BTreeMap<String, Latency> = BTreeMap::new();
        for r in reports {
            for (name, step) in &r.latency.steps {
                let h = Latency::from_base64(&step.histogram)?;
                steps_h.entry(name.clone()).or_default().merge(&h);
            }
        }
        for r in rest {
            if r.schema_version != REPORT_SCHEMA_VERSION {
                return Err(format!(
                    "report schema version {} (expected {REPORT_SCHEMA_VERSION})",
                    r.schema_version
                ));
            }
            out.runs.extend(r.runs.iter().cloned());
            out.payments += r.payments;
            out.attempts += r.attempts;
            out.duration_secs = out.duration_secs.max(r.duration_secs);
            out.outcomes.merge(&r.outcomes);
            out.anomalies.merge(&r.anomalies);
            for (b, c) in &r.by_behaviour {
                let e = out.by_behaviour.entry(*b).or_default();
                e.payments += c.payments;
                e.double_charges += c.double_charges;
            }
            out.unknown_orders += r.unknown_orders;
            if out.ledger_unread.is_none() {
                out.ledger_unread = r.ledger_unread.clone();
            }
            out.answers_cut += r.answers_cut;
            let t = &mut out.thresholds;
            t.max_double_fulfillments = t.max_double_fulfillments.or(r.thresholds.max_double_fulfillments);
            t.max_missed_fulfillments = t.max_missed_fulfillments.or(r.thresholds.max_missed_fulfillments);
            t.max_unexpected_charges = t.max_unexpected_charges.or(r.thresholds.max_unexpected_charges);
            out.fulfillment = match (out.fulfillment.take(), &r.fulfillment) {
                (Some(mut a), Some(b)) => {
                    a.merge(b);
                    Some(a)
                }
                (None, None) => None,
                (a, b) => a.or_else(|| b.clone()).map(|mut f| {
                    f.checked = false;
                    f.note = Some("some merged runs had no fulfilment probe".into());
                    f
                }),
            };
            attempt_h.merge(&Latency::from_base64(&r.latency.attempt_histogram)?);
            payment_h.merge(&Latency::from_base64(&r.latency.payment_histogram)?);
            for theirs in &r.latency.scenarios {
                match out.latency.scenarios.iter_mut().find(|s| s.name == theirs.name) {
                    Some(mine) => mine.merge(theirs)?,
                    None => out.latency.scenarios.push(theirs.clone()),
                }
            }
            match (&mut out.open, &r.open) {
                (Some(mine), Some(theirs)) => mine.merge(theirs)?,
                (None, None) => {}
                _ => return Err("an open-model (--rate) run cannot merge with a closed-model one".into()),
            }
        }
        out.attempts_per_sec = if out.duration_secs > 0.0 {
            out.attempts as f64 / out.duration_secs
        } else {
            0.0
        };
        out.timeline = Timeline::merge(reports.iter().map(|r| &r.timeline))?;
        out.latency = LatencyReport {
            attempt: attempt_h.percentiles(),
            payment: payment_h.percentiles(),
            attempt_histogram: attempt_h.to_base64(),
            payment_histogram: payment_h.to_base64(),
            steps: step_latencies(&steps_h),
            scenarios: std::mem::take(&mut out.latency.scenarios),
        };
        out.gates = out.evaluate();
        Ok(out)
    }

    pub fn read(path: &Path) -> Result<Report, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::io(path, e))?;
        let r: Report = serde_json::from_str(&text).map_err(|e| LoadError::Report {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if r.schema_version != REPORT_SCHEMA_VERSION {
            return Err(LoadError::Report {
                path: path.display().to_string(),
                reason: format!("schema version {} (expected {REPORT_SCHEMA_VERSION})", r.schema_version),
            });
        }
        Ok(r)
    }

    fn title(&self) -> String {
        let ids: Vec<&str> = self.runs.iter().map(|r| r.run_id.as_str()).collect();
        let first = &self.runs[0];
        format!(
            "run {} against {} (template {}, mix {})",
            ids.join("+"),
            first.target,
            first.template,
            first.mix
        )
    }

    /// The terminal summary.
    pub fn summary(&self) -> String {
        let o = &self.outcomes;
        let a = &self.anomalies;
        let mut s = String::new();
        let _ = writeln!(s, "fauxpay load: {}", self.title());
        let _ = writeln!(
            s,
            "  payments    {} (ok {}, fail {}, info {})  attempts {} in {:.1} s ({:.1}/s)",
            self.payments, o.ok, o.fail, o.info, self.attempts, self.duration_secs, self.attempts_per_sec
        );
        for line in self.stopped_early() {
            let _ = writeln!(s, "  stopped     early: {line}");
        }
        let intended = self.open.as_ref().map(|o| ("intended", &o.latency_from_intended));
        let steps = self.latency.steps.iter().map(|(name, s)| (name.as_str(), &s.latency));
        for (label, p) in [("attempt", &self.latency.attempt), ("payment", &self.latency.payment)]
            .into_iter()
            .chain(intended)
            .chain(steps)
        {
            let _ = writeln!(
                s,
                "  {label:<11} p50 {:.1} ms  p90 {:.1} ms  p99 {:.1} ms  p99.9 {:.1} ms  max {:.1} ms",
                p.p50_ms, p.p90_ms, p.p99_ms, p.p999_ms, p.max_ms
            );
        }
        for sc in &self.latency.scenarios {
            let p = &sc.latency;
            let _ = writeln!(
                s,
                "  scenario    {} (weight {}{}): {} runs, {} went through; p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
                sc.name,
                sc.weight,
                if sc.pays { ", pays" } else { "" },
                sc.runs,
                sc.ok,
                p.p50_ms,
                p.p99_ms,
                p.max_ms
            );
        }
        if let Some(o) = &self.open {
            s.push_str(&o.summary());
        }
        if self.answers_cut > 0 {
            let _ = writeln!(
                s,
                "  cut         {} answers longer than {} bytes were not read (counted as failed attempts)",
                self.answers_cut,
                crate::body::MAX_ANSWER_BYTES
            );
        }
        match &self.ledger_unread {
            // Without the ledger there are no anomaly counts to show: zeros would lie.
            Some(why) => {
                let _ = writeln!(
                    s,
                    "  anomalies   UNKNOWN: the provider's ledger could not be read ({why}); `fauxpay report reconcile DIR --provider URL` judges the saved journal later"
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  anomalies   double charges {} ({} extra charges, {} extra), lost {}, phantom {}, amount mismatches {}, inconsistent replays {}, unresolved {} ({} charged)",
                    a.double_charges.count,
                    a.extra_charges,
                    money(a.extra_amount),
                    a.lost.count,
                    a.phantom.count,
                    a.amount_mismatch.count,
                    a.inconsistent_replay.count,
                    a.unresolved.count,
                    a.unresolved_charged
                );
                if self.thresholds.max_unexpected_charges.is_some() {
                    let _ = writeln!(
                        s,
                        "  expected    cards expected to decline but charged {}; expected to pay but declined {}",
                        a.unexpected_charges.count, a.unexpected_declines
                    );
                }
                let by: Vec<String> = self
                    .by_behaviour
                    .iter()
                    .map(|(b, c)| format!("{b} {} payments / {} double-charged", c.payments, c.double_charges))
                    .collect();
                let _ = writeln!(s, "  by client   {}", by.join("; "));
            }
        }
        if let Some(line) = self.fulfillment_line() {
            let _ = writeln!(s, "  fulfilment  {line}");
        }
        for g in &self.gates {
            let _ = writeln!(
                s,
                "  {} {} = {} ({})",
                if g.passed { "PASS" } else { "FAIL" },
                g.name,
                g.value,
                g.threshold
            );
            if !g.passed {
                for e in g.examples.iter().take(3) {
                    let _ = writeln!(s, "         {}", e.story);
                }
            }
        }
        let _ = writeln!(
            s,
            "  result      {}",
            match self.verdict() {
                RunVerdict::Unknown => "unknown: the ledger could not be read (exit 4)",
                RunVerdict::CutShort =>
                    "every gate held over the part that ran, but SIGTERM cut the run short (exit 143)",
                verdict => verdict.words(),
            }
        );
        s
    }

    /// Whether SIGTERM (a deadline, an eviction, `docker stop`) stopped a run of this
    /// report early: then it is not a pass, whatever its gates say of the part that ran.
    pub fn terminated(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.stopped_by.as_deref() == Some(crate::interrupt::SIGTERM_NAME))
    }

    /// The report's verdict, as the summary, `report.md`, `report.html` and the exit code
    /// take it.
    pub fn verdict(&self) -> RunVerdict {
        if self.ledger_unread.is_some() {
            RunVerdict::Unknown
        } else if !self.passed() {
            RunVerdict::Failed
        } else if self.terminated() {
            RunVerdict::CutShort
        } else {
            RunVerdict::Held
        }
    }

    /// One line for each run a signal stopped early.
    pub fn stopped_early(&self) -> Vec<String> {
        self.runs
            .iter()
            .filter_map(|r| {
                let by = r.stopped_by.as_deref()?;
                Some(format!(
                    "{by} stopped run {}, which ran {:.1} s; the counts cover the checkouts that ran",
                    r.run_id, r.duration_secs
                ))
            })
            .collect()
    }

    /// One line on fulfilment: the probe, the two anomalies, the deliveries; or why it was
    /// not checked. `None` without a probe.
    pub fn fulfillment_line(&self) -> Option<String> {
        let f = self.fulfillment.as_ref()?;
        if !f.checked {
            return Some(format!(
                "not checked ({}): {}",
                f.probe,
                f.note.as_deref().unwrap_or("no reason recorded")
            ));
        }
        let a = &self.anomalies;
        let mut line = format!(
            "{} orders probed ({}): double fulfillments {} ({} extra), missed {}, probe failures {}; webhook deliveries {} delivered, {} failed{}",
            f.probed,
            f.probe,
            a.double_fulfillments.count,
            a.extra_fulfillments,
            a.missed_fulfillments.count,
            f.probe_failures,
            f.deliveries_delivered,
            f.deliveries_failed,
            if f.drained { "" } else { " (the queue had not drained)" }
        );
        if let Some(e) = f.probe_failure_examples.first() {
            line.push_str(&format!("; first probe failure: {e}"));
        }
        Some(line)
    }

    /// `report.md`, short enough for `$GITHUB_STEP_SUMMARY`.
    pub fn markdown(&self) -> String {
        let o = &self.outcomes;
        let mut s = String::new();
        let verdict = self.verdict();
        let _ = writeln!(
            s,
            "## fauxpay load: {} {}\n",
            verdict.words(),
            if verdict == RunVerdict::Held { "✅" } else { "❌" }
        );
        let _ = writeln!(s, "{}\n", self.title());
        for line in self.stopped_early() {
            let _ = writeln!(s, "Stopped early: {line}.\n");
        }
        let _ = writeln!(s, "| gate | value | threshold | result |\n|---|---|---|---|");
        for g in &self.gates {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                g.name,
                g.value,
                g.threshold,
                if g.passed { "pass" } else { "**FAIL**" }
            );
        }
        let _ = writeln!(
            s,
            "\n| payments | ok | fail | info | attempts | attempts/s | extra charges | extra amount | unresolved (charged) |\n|---|---|---|---|---|---|---|---|---|"
        );
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} ({}) |",
            self.payments,
            o.ok,
            o.fail,
            o.info,
            self.attempts,
            self.attempts_per_sec,
            self.anomalies.extra_charges,
            money(self.anomalies.extra_amount),
            self.anomalies.unresolved.count,
            self.anomalies.unresolved_charged
        );
        if let Some(line) = self.fulfillment_line() {
            let _ = writeln!(s, "\nFulfilment: {}", line.replace('|', "\\|"));
        }
        if let Some(why) = &self.ledger_unread {
            let _ = writeln!(
                s,
                "\n**Anomalies unknown**: the provider's ledger could not be read after the run ({why}). `fauxpay report reconcile DIR --provider URL` judges the saved journal once it can be."
            );
        }
        if self.answers_cut > 0 {
            let _ = writeln!(
                s,
                "\n{} answers were longer than {} bytes and were cut, unread (each counted as a failed attempt).",
                self.answers_cut,
                crate::body::MAX_ANSWER_BYTES
            );
        }
        let _ = writeln!(
            s,
            "\n| latency | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|"
        );
        let steps: Vec<(String, &Percentiles)> = self
            .latency
            .steps
            .iter()
            .map(|(name, s)| (format!("step `{name}`"), &s.latency))
            .collect();
        for (label, p) in [
            ("attempt", &self.latency.attempt),
            ("payment (end to end)", &self.latency.payment),
        ]
        .into_iter()
        .chain(
            self.open
                .as_ref()
                .map(|o| ("payment from its intended start", &o.latency_from_intended)),
        )
        .chain(steps.iter().map(|(l, p)| (l.as_str(), *p)))
        {
            let _ = writeln!(
                s,
                "| {label} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
                p.p50_ms, p.p90_ms, p.p99_ms, p.p999_ms, p.max_ms
            );
        }
        if !self.latency.scenarios.is_empty() {
            let _ = writeln!(
                s,
                "\n| scenario | weight | runs | went through | steps | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|---|---|---|"
            );
            for sc in &self.latency.scenarios {
                let p = &sc.latency;
                let _ = writeln!(
                    s,
                    "| {}{} | {} | {} | {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
                    sc.name,
                    if sc.pays { " (pays)" } else { "" },
                    sc.weight,
                    sc.runs,
                    sc.ok,
                    sc.steps.join(", "),
                    p.p50_ms,
                    p.p90_ms,
                    p.p99_ms,
                    p.p999_ms,
                    p.max_ms
                );
            }
        }
        if let Some(o) = &self.open {
            s.push_str(&o.markdown());
        }
        for g in self.gates.iter().filter(|g| !g.passed && !g.examples.is_empty()) {
            let _ = writeln!(s, "\n<details><summary>{}: examples</summary>\n", g.name);
            for e in &g.examples {
                let _ = writeln!(s, "- `{}`", e.story.replace('`', "'"));
            }
            let _ = writeln!(s, "\n</details>");
        }
        s
    }

    /// `junit.xml`: one test case per gate.
    pub fn junit(&self) -> String {
        // A run SIGTERM cut short is one more failed case: the gates judged only part of it.
        let cut_short = self.terminated().then(|| self.stopped_early().join("\n"));
        let extra = usize::from(cut_short.is_some());
        let cases = self.gates.len() + extra;
        let failures = self.gates.iter().filter(|g| !g.passed).count() + extra;
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            s,
            "<testsuites name=\"fauxpay load\" tests=\"{cases}\" failures=\"{failures}\">\n  <testsuite name=\"{}\" tests=\"{cases}\" failures=\"{failures}\" errors=\"0\" time=\"{:.3}\">",
            xml(&format!("fauxpay load {}", self.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>().join("+"))),
            self.duration_secs
        );
        if let Some(lines) = cut_short {
            let _ = writeln!(
                s,
                "    <testcase classname=\"fauxpay.run\" name=\"the run ran as asked\">\n      <failure message=\"cut short by SIGTERM\">{}</failure>\n    </testcase>",
                xml(&lines)
            );
        }
        for g in &self.gates {
            let _ = write!(
                s,
                "    <testcase classname=\"fauxpay.gates\" name=\"{} {}\"",
                xml(g.name.as_str()),
                xml(&g.threshold)
            );
            if g.passed {
                s.push_str("/>\n");
            } else {
                let detail: Vec<String> = g.examples.iter().map(|e| e.story.clone()).collect();
                let _ = writeln!(
                    s,
                    ">\n      <failure message=\"{} = {} ({})\">{}</failure>\n    </testcase>",
                    xml(g.name.as_str()),
                    xml(&g.value),
                    xml(&g.threshold),
                    xml(&detail.join("\n"))
                );
            }
        }
        s.push_str("  </testsuite>\n</testsuites>\n");
        s
    }
}

fn money(minor: u64) -> String {
    format!("{}.{:02}", minor / 100, minor % 100)
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::Anomaly;

    pub(crate) fn sample(run_id: &str, double: u64, latencies_ms: &[u64]) -> Report {
        let mut attempt = Latency::default();
        let mut payment = Latency::default();
        for ms in latencies_ms {
            attempt.record(ms * 1000);
            payment.record(ms * 2000);
        }
        let anomalies = Anomalies {
            double_charges: Anomaly {
                count: double,
                examples: vec![Example {
                    order_id: format!("{run_id}-1"),
                    story: "order <x> & co".into(),
                }],
            },
            extra_charges: double,
            extra_amount: double * 2000,
            ..Anomalies::default()
        };
        Report::new(
            Measured {
                run: RunInfo {
                    scenario: None,
                    run_id: run_id.into(),
                    target: "http://127.0.0.1:1".into(),
                    provider: "http://127.0.0.1:2".into(),
                    template: "stripe".into(),
                    mix: "retry-new-key=1".into(),
                    seed: 1,
                    started_ms: 0,
                    duration_secs: 10.0,
                    payments: 100,
                    stopped_by: None,
                },
                attempts: 120,
                outcomes: Outcomes {
                    ok: 100,
                    fail: 0,
                    info: 0,
                },
                anomalies,
                by_behaviour: BTreeMap::new(),
                unknown_orders: 0,
                answers_cut: 0,
                attempt_latency: attempt,
                payment_latency: payment,
                step_latency: Default::default(),
                scenarios: Vec::new(),
                fulfillment: None,
            },
            Thresholds {
                max_double_charges: 0,
                max_lost: 0,
                max_phantom: 0,
                max_amount_mismatch: 0,
                max_inconsistent_replays: 0,
                max_unresolved: None,
                max_p99_ms: Some(1000.0),
                max_dropped: None,
                max_double_fulfillments: None,
                max_missed_fulfillments: None,
                max_unexpected_charges: None,
                slo: Vec::new(),
            },
        )
    }

    #[test]
    fn gates_pass_and_fail() {
        assert!(sample("a", 0, &[10]).passed());
        let failed = sample("a", 2, &[10]);
        assert!(!failed.passed());
        assert!(failed.summary().contains("FAIL double charges = 2 (≤ 0)"));
        assert!(failed.markdown().contains("| double charges | 2 | ≤ 0 | **FAIL** |"));
        assert!(!sample("a", 0, &[900]).passed(), "p99 of 1800 ms is over 1000 ms");
    }

    #[test]
    fn merge_adds_counts_and_histograms() {
        let a = sample("a", 1, &[10, 20, 30]);
        let b = sample("b", 2, &[40, 50]);
        let m = Report::merge(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(m.payments, 200);
        assert_eq!(m.attempts, 240);
        assert_eq!(m.anomalies.double_charges.count, 3);
        assert_eq!(m.anomalies.extra_amount, 6000);
        assert_eq!(m.latency.attempt.count, 5);
        assert_eq!(m.runs.len(), 2);
        assert!((m.latency.attempt.max_ms - 50.0).abs() < 0.1);
        assert_eq!(m.attempts_per_sec, 24.0);
    }

    #[test]
    fn merged_scenarios_add_their_runs_and_histograms_and_gate_by_name() {
        let with = |run: &str, runs: u64, ok: u64, ms: u64| {
            let mut r = sample(run, 0, &[10]);
            let mut tally = crate::scenarios::Tally::default();
            for i in 0..runs {
                tally.record(i < ok, ms * 1000);
            }
            let browse = crate::scenarios::Scenario {
                name: "browse".into(),
                weight: 1,
                browse: Some(crate::steps::Flow {
                    steps: Vec::new(),
                    names: Vec::new(),
                    ok: None,
                    fail: None,
                }),
                steps: vec!["home".into()],
            };
            r.latency.scenarios = vec![ScenarioReport::new(&browse, &tally)];
            r
        };
        let m = Report::merge(&[with("a", 10, 9, 5), with("b", 30, 30, 50)]).unwrap();
        let s = &m.latency.scenarios[0];
        assert_eq!((s.runs, s.ok, s.latency.count), (40, 39, 40));
        assert!((s.latency.max_ms - 50.0).abs() < 0.1, "{}", s.latency.max_ms);
        use crate::slo::{Measures, Slo};
        assert_eq!(m.scenario_outcomes("browse"), Some((39, 1)));
        let gate = Slo::parse("error_rate(browse) < 5%").unwrap();
        assert_eq!(gate.value(&m).unwrap().1, "2.50%");
        let p50 = Slo::parse("p50(browse) < 1s").unwrap();
        assert!(
            p50.value(&m).unwrap().0 > 40.0,
            "the merged histogram: most runs took 50 ms"
        );
        assert_eq!(m.scenario_outcomes("checkout"), None);
    }

    #[test]
    fn gate_names_are_written_as_before_and_read_back() {
        let mut r = sample("a", 1, &[10]);
        r.thresholds.max_unresolved = Some(3);
        r.gates = r.evaluate();
        let names: Vec<&str> = r.gates.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "double charges",
                "lost charges",
                "phantom charges",
                "amount mismatches",
                "inconsistent replays",
                "unresolved payments",
                "payment p99"
            ]
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["gates"][0]["name"], "double charges");
        assert_eq!(json["gates"][6]["name"], "payment p99");
        let back: Report = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        let bad = serde_json::from_str::<GateName>("\"doubled charges\"").unwrap_err();
        assert!(bad.to_string().contains("unknown gate \"doubled charges\""), "{bad}");
    }

    #[test]
    fn a_run_sigterm_cut_short_is_not_a_pass_and_every_report_says_so() {
        let mut r = sample("a", 0, &[10]);
        assert_eq!(r.verdict(), RunVerdict::Held);
        assert_eq!(crate::run::exit_code(&r), 0);
        // Ctrl-C, a person's: said, and the gates' code kept.
        r.runs[0].stopped_by = Some("Ctrl-C".into());
        assert_eq!((r.verdict(), crate::run::exit_code(&r)), (RunVerdict::Held, 0));
        assert!(r
            .summary()
            .contains("stopped     early: Ctrl-C stopped run a, which ran 10.0 s"));
        assert!(r.junit().contains("failures=\"0\""));
        r.runs[0].stopped_by = Some("SIGTERM".into());
        assert_eq!((r.verdict(), crate::run::exit_code(&r)), (RunVerdict::CutShort, 143));
        assert!(r.markdown().starts_with("## fauxpay load: run cut short by SIGTERM ❌"));
        let junit = r.junit();
        // Every gate's case and one for the run, which failed.
        let cases = format!("tests=\"{}\" failures=\"1\"", r.gates.len() + 1);
        assert!(junit.contains(&cases), "{junit}");
        assert!(junit.contains("<failure message=\"cut short by SIGTERM\">SIGTERM stopped run a, which ran 10.0 s"));
        // A gate that failed still says so, with 1.
        let mut failed = sample("b", 1, &[10]);
        failed.runs[0].stopped_by = Some("SIGTERM".into());
        assert_eq!(
            (failed.verdict(), crate::run::exit_code(&failed)),
            (RunVerdict::Failed, 1)
        );
        // An unread ledger is its own verdict (not "a gate failed"), and exits 4.
        let unread = sample("d", 0, &[10]).ledger_unread("the provider is gone".into());
        assert_eq!(
            (unread.verdict(), crate::run::exit_code(&unread)),
            (RunVerdict::Unknown, 4)
        );
        assert!(unread
            .markdown()
            .starts_with("## fauxpay load: anomalies unknown: the ledger could not be read ❌"));
        assert!(unread
            .summary()
            .contains("  result      unknown: the ledger could not be read (exit 4)"));
        // A report from before `stopped_by` existed reads as a run no signal stopped.
        let mut old: serde_json::Value = serde_json::to_value(sample("c", 0, &[10])).unwrap();
        old["runs"][0].as_object_mut().unwrap().remove("stopped_by");
        let old: Report = serde_json::from_value(old).unwrap();
        assert_eq!(
            (old.runs[0].stopped_by.clone(), old.verdict()),
            (None, RunVerdict::Held)
        );
    }

    #[test]
    fn junit_is_escaped_and_counts_failures() {
        let x = sample("a", 1, &[10]).junit();
        assert!(x.contains("failures=\"1\""));
        assert!(x.contains("order &lt;x&gt; &amp; co"));
        assert!(!x.contains("<x>"));
    }
}
