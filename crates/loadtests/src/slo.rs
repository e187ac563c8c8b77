//! SLO gates beyond the anomaly counts (`fauxpay load --gate EXPR`), in k6's spirit:
//! `p95(checkout) < 800ms`, `p99 < 2s` (a payment, end to end), `error_rate < 1%`,
//! `error_rate(browse) < 5%` (a `--scenario`'s runs that did not go through), `rate >=
//! 99%` (achieved ÷ asked, with `--rate`).
//!
//! A percentile names what it measures: `payment` (end to end, every step and backoff
//! included, from the intended start under `--rate`; the default), `attempt` (each send of the payment step), or a step of a
//! multi-step template by its name (the payment step's name means its attempts). Each gate
//! is a test case in `junit.xml` and a row in `report.md` and `report.html`, named by its
//! expression.

use std::time::Duration;

/// What a gate reads of a run (a report gives it).
pub trait Measures {
    /// The latency histogram (HdrHistogram, base64) of `of`: `payment` (from the intended
    /// start under `--rate`), `attempt`, or a step by its name.
    fn histogram(&self, of: &str) -> Option<&str>;
    /// Payments told `ok`, and the others (`fail` and `info`).
    fn outcomes(&self) -> (u64, u64);
    /// With `--scenario`: scenario `name`'s runs that went through, and the others.
    fn scenario_outcomes(&self, name: &str) -> Option<(u64, u64)>;
    /// Under `--rate`: the achieved rate ÷ the asked one.
    fn rate(&self) -> Option<f64>;
}

/// What a gate measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// A latency percentile (0–100) of `of`.
    Percentile { q: f64, of: String },
    /// Payments not told `ok` ÷ payments; with a scenario's name, its runs that did not
    /// go through ÷ its runs.
    ErrorRate(Option<String>),
    /// The open model's achieved rate ÷ the asked rate.
    Rate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::Lt => value < bound,
            Op::Le => value <= bound,
            Op::Gt => value > bound,
            Op::Ge => value >= bound,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "≤",
            Op::Gt => ">",
            Op::Ge => "≥",
        }
    }
}

/// One `--gate`: a metric, a comparison and a bound (milliseconds for a percentile, a
/// fraction for a rate).
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    pub bound: f64,
}

const EXPECTED: &str =
    "an expression such as 'p95(checkout) < 800ms', 'p99 < 2s', 'error_rate < 1%', 'error_rate(browse) < 5%' or 'rate >= 99%'";

impl Slo {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{EXPECTED}, got '{text}' ({why})");
        let at = text
            .find(['<', '>'])
            .ok_or_else(|| bad("no comparison (<, <=, >, >=)"))?;
        let (left, rest) = text.split_at(at);
        let (op, right) = match rest {
            r if r.starts_with("<=") => (Op::Le, &r[2..]),
            r if r.starts_with(">=") => (Op::Ge, &r[2..]),
            r if r.starts_with('<') => (Op::Lt, &r[1..]),
            r => (Op::Gt, &r[1..]),
        };
        let (left, right) = (left.trim(), right.trim());
        let metric = match left {
            "error_rate" => Metric::ErrorRate(None),
            e if e.starts_with("error_rate(") => {
                let of = e["error_rate(".len()..]
                    .strip_suffix(')')
                    .ok_or_else(|| bad("an unclosed '('"))?
                    .trim();
                if of.is_empty() {
                    return Err(bad("a scenario's name in error_rate(…)"));
                }
                Metric::ErrorRate(Some(of.to_string()))
            }
            "rate" => Metric::Rate,
            p if p.starts_with('p') => {
                let (q, of) = match p[1..].split_once('(') {
                    Some((q, of)) => (
                        q.trim(),
                        of.strip_suffix(')').ok_or_else(|| bad("an unclosed '('"))?.trim(),
                    ),
                    None => (&p[1..], "payment"),
                };
                let q: f64 = match q {
                    "999" => 99.9,
                    q => q
                        .parse()
                        .map_err(|_| bad("a percentile such as p50, p95, p99 or p999"))?,
                };
                if !(0.0..=100.0).contains(&q) || of.is_empty() {
                    return Err(bad("a percentile from p0 to p100 of a named step"));
                }
                Metric::Percentile { q, of: of.to_string() }
            }
            _ => {
                return Err(bad(
                    "an unknown metric (pNN, pNN(step), error_rate, error_rate(scenario), rate)",
                ))
            }
        };
        let bound = match metric {
            Metric::Percentile { .. } => humantime::parse_duration(right)
                .map(|d: Duration| d.as_secs_f64() * 1000.0)
                .map_err(|_| bad("a duration such as 800ms or 2s after the comparison"))?,
            Metric::ErrorRate(_) | Metric::Rate => match right.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                None => right.parse::<f64>(),
            }
            .ok()
            .filter(|f| f.is_finite() && (0.0..=1.0).contains(f))
            .ok_or_else(|| bad("a share such as 1% or 0.01 after the comparison"))?,
        };
        Ok(Self {
            text: text.trim().to_string(),
            metric,
            op,
            bound,
        })
    }

    /// The latency this gate reads, when it is a percentile (to check it exists).
    pub fn measures(&self) -> Option<&str> {
        match &self.metric {
            Metric::Percentile { of, .. } => Some(of),
            _ => None,
        }
    }

    /// The scenario an `error_rate(NAME)` reads (to check it exists).
    pub fn scenario(&self) -> Option<&str> {
        match &self.metric {
            Metric::ErrorRate(Some(name)) => Some(name),
            _ => None,
        }
    }

    /// What a run measured for this gate, and how it reads; `None` when the run has no
    /// such number (an unknown step, `rate` without `--rate`).
    pub fn value(&self, run: &impl Measures) -> Option<(f64, String)> {
        match &self.metric {
            Metric::Percentile { q, of } => {
                let h = crate::latency::Latency::from_base64(run.histogram(of)?).ok()?;
                let ms = h.quantile_ms(q / 100.0);
                Some((ms, format!("{ms:.1} ms")))
            }
            Metric::ErrorRate(of) => {
                let (ok, not_ok) = match of {
                    None => run.outcomes(),
                    Some(name) => run.scenario_outcomes(name)?,
                };
                let total = ok + not_ok;
                let rate = if total == 0 { 0.0 } else { not_ok as f64 / total as f64 };
                Some((rate, format!("{:.2}%", rate * 100.0)))
            }
            Metric::Rate => {
                let achieved = run.rate()?;
                Some((achieved, format!("{:.2}%", achieved * 100.0)))
            }
        }
    }

    /// The bound as a gate's threshold reads.
    pub fn threshold(&self) -> String {
        match self.metric {
            Metric::Percentile { .. } => format!("{} {:.1} ms", self.op.as_str(), self.bound),
            _ => {
                let percent = format!("{:.4}", self.bound * 100.0);
                let percent = percent.trim_end_matches('0').trim_end_matches('.');
                format!("{} {percent}%", self.op.as_str())
            }
        }
    }

    /// Whether `value` passes.
    pub fn holds(&self, value: f64) -> bool {
        self.op.holds(value, self.bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_parse_as_k6_writes_them() {
        let p95 = Slo::parse("p95(checkout) < 800ms").unwrap();
        assert_eq!(
            p95.metric,
            Metric::Percentile {
                q: 95.0,
                of: "checkout".into()
            }
        );
        assert_eq!((p95.op, p95.bound), (Op::Lt, 800.0));
        assert_eq!(p95.threshold(), "< 800.0 ms");
        let p99 = Slo::parse("p99<=2s").unwrap();
        assert_eq!(p99.measures(), Some("payment"));
        assert_eq!((p99.op, p99.bound), (Op::Le, 2000.0));
        assert_eq!(
            Slo::parse("p999 < 1s").unwrap().metric,
            Metric::Percentile {
                q: 99.9,
                of: "payment".into()
            }
        );
        assert_eq!(Slo::parse("error_rate < 7%").unwrap().threshold(), "< 7%");
        assert_eq!(Slo::parse("p95 (checkout) < 1s").unwrap().measures(), Some("checkout"));
        let errors = Slo::parse("error_rate < 1%").unwrap();
        assert_eq!((errors.metric.clone(), errors.bound), (Metric::ErrorRate(None), 0.01));
        let browse = Slo::parse("error_rate(browse) < 5%").unwrap();
        assert_eq!(browse.metric, Metric::ErrorRate(Some("browse".into())));
        assert_eq!(browse.scenario(), Some("browse"));
        assert!(errors.holds(0.005) && !errors.holds(0.01));
        let rate = Slo::parse("rate >= 0.99").unwrap();
        assert_eq!((rate.metric, rate.op, rate.bound), (Metric::Rate, Op::Ge, 0.99));
        for bad in [
            "p95(checkout)",
            "p95(checkout < 1s",
            "q95 < 1s",
            "p101 < 1s",
            "p95 < fast",
            "error_rate < 150%",
            "error_rate < lots",
            "error_rate(browse < 1%",
            "error_rate() < 1%",
        ] {
            let e = Slo::parse(bad).unwrap_err();
            assert!(
                e.starts_with("an expression such as") && e.contains(&format!("got '{bad}' (")),
                "{e}"
            );
        }
    }
}
