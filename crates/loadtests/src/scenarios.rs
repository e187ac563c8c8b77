//! Weighted scenarios in one run (`--scenario checkout=80,browse=20`): which templates
//! run, at what weights, and which one each iteration runs. Exactly one scenario pays (a
//! template with a payment step, or a one-request template); the others are flows
//! without a payment step that add load and latency (a catalogue, an account page).
//!
//! The choice is a pure function of the run's seed and the iteration's number, drawn
//! from a generator of its own, so the same seed runs the same scenarios in the same
//! iterations under `--users 1` and `--users 32`, and a run without `--scenario` draws
//! exactly what it drew before scenarios existed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::ConfigError;
use crate::latency::Latency;
use crate::steps::Flow;

/// Most scenarios in one run.
pub const MAX_SCENARIOS: usize = 16;
/// The largest weight of one scenario.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// One `--scenario TEMPLATE=WEIGHT` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighted {
    /// A bundled template's name or a TOML file's path.
    pub template: String,
    pub weight: u32,
}

/// Parses every `--scenario` (each may list several, comma-separated).
pub fn parse(specs: &[String]) -> Result<Vec<Weighted>, ConfigError> {
    let mut out: Vec<Weighted> = Vec::new();
    for spec in specs.iter().flat_map(|s| s.split(',')).map(str::trim) {
        let bad = |why: &str| {
            ConfigError::flag(
                "--scenario",
                format!("TEMPLATE=WEIGHT, e.g. checkout.toml=80,browse.toml=20 ({why}), got '{spec}'"),
            )
        };
        let (template, weight) = spec.rsplit_once('=').ok_or_else(|| bad("no '='"))?;
        let template = template.trim();
        if template.is_empty() {
            return Err(bad("no template"));
        }
        let weight: u32 = weight
            .trim()
            .parse()
            .ok()
            .filter(|w| (1..=MAX_WEIGHT).contains(w))
            .ok_or_else(|| bad(&format!("a whole weight from 1 to {MAX_WEIGHT}")))?;
        if out.iter().any(|w| w.template == template) {
            return Err(bad("a template named twice"));
        }
        out.push(Weighted {
            template: template.to_string(),
            weight,
        });
    }
    if out.len() > MAX_SCENARIOS {
        return Err(ConfigError::flag(
            "--scenario",
            format!("at most {MAX_SCENARIOS} scenarios, got {}", out.len()),
        ));
    }
    Ok(out)
}

/// Picks an iteration's scenario by weight.
#[derive(Debug, Clone)]
pub struct Picker {
    /// Each scenario's upper bound in `0..total`.
    bounds: Vec<u64>,
}

impl Picker {
    pub fn new(weights: impl IntoIterator<Item = u32>) -> Self {
        let mut total = 0u64;
        let bounds = weights
            .into_iter()
            .map(|w| {
                total += u64::from(w);
                total
            })
            .collect();
        Self { bounds }
    }

    /// The scenario (its index) of iteration `index` of a run seeded `seed`.
    pub fn pick(&self, seed: u64, index: u64) -> usize {
        let total = self.bounds.last().copied().unwrap_or(0);
        if self.bounds.len() < 2 || total == 0 {
            return 0;
        }
        // A generator apart from the payment's, salted, so the payment's draws do not move.
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5CE7_A210 ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let r = rng.random_range(0..total);
        self.bounds.iter().position(|b| r < *b).unwrap_or(0)
    }
}

/// One scenario of a run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its template's `name`.
    pub name: String,
    pub weight: u32,
    /// A flow without a payment step; `None` for the scenario that pays (the run's
    /// template and flow).
    pub browse: Option<Flow>,
    /// Its steps' names.
    pub steps: Vec<String>,
}

/// A run's scenarios, as `--scenario` gave them, and how each iteration picks one.
#[derive(Debug)]
pub struct Scenarios {
    pub list: Vec<Scenario>,
    picker: Picker,
    /// Each iteration's number within its scenario, as far as asked (iteration numbers
    /// start at 1).
    ordinals: std::sync::Mutex<Ordinals>,
}

#[derive(Debug, Default)]
struct Ordinals {
    /// By iteration number - 1.
    of: Vec<u32>,
    /// Iterations so far, by scenario.
    counts: Vec<u32>,
}

impl Scenarios {
    pub fn new(list: Vec<Scenario>) -> Self {
        let picker = Picker::new(list.iter().map(|s| s.weight));
        Self {
            ordinals: std::sync::Mutex::new(Ordinals {
                of: Vec::new(),
                counts: vec![0; list.len()],
            }),
            list,
            picker,
        }
    }

    /// The scenario (its index) iteration `index` runs.
    pub fn pick(&self, seed: u64, index: u64) -> usize {
        self.picker.pick(seed, index)
    }

    /// Iteration `index`'s number within its scenario (from 1): payment *n* of the run,
    /// whatever the browse runs between, takes a feeder's row *n*. A pure function of
    /// the seed and the index (computed once for every iteration up to it).
    pub fn ordinal(&self, seed: u64, index: u64) -> u64 {
        let index = index.max(1);
        let mut o = self.ordinals.lock().unwrap_or_else(|e| e.into_inner());
        while (o.of.len() as u64) < index {
            let next = o.of.len() as u64 + 1;
            let s = self.pick(seed, next);
            o.counts[s] += 1;
            let n = o.counts[s];
            o.of.push(n);
        }
        u64::from(o.of[(index - 1) as usize])
    }

    /// How many of iterations 1 to `iterations` pay (those run by the scenario without a
    /// flow of its own).
    pub fn paying_among(&self, seed: u64, iterations: u64) -> u64 {
        (1..=iterations)
            .filter(|i| self.list[self.pick(seed, *i)].browse.is_none())
            .count() as u64
    }

    /// `name=weight,…`, as a run's settings show it.
    pub fn describe(&self) -> String {
        self.list
            .iter()
            .map(|s| format!("{}={}", s.name, s.weight))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// What one scenario did in a run: its iterations, how many went through (`ok` for the
/// payment's outcome; every step answered for a browse flow), and its end-to-end latency.
#[derive(Debug, Default)]
pub struct Tally {
    pub runs: u64,
    pub ok: u64,
    pub latency: Latency,
}

impl Tally {
    pub fn record(&mut self, ok: bool, e2e_us: u64) {
        self.runs += 1;
        self.ok += u64::from(ok);
        self.latency.record(e2e_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_templates_with_weights_listed_or_repeated() {
        let w = parse(&["stripe=80, browse.toml=20".into(), "./a=b.toml=5".into()]).unwrap();
        assert_eq!(
            w.iter().map(|w| (w.template.as_str(), w.weight)).collect::<Vec<_>>(),
            [("stripe", 80), ("browse.toml", 20), ("./a=b.toml", 5)]
        );
        for bad in ["stripe", "stripe=0", "stripe=x", "=5", "stripe=1,stripe=2"] {
            let e = parse(&[bad.into()]).unwrap_err().to_string();
            assert!(e.starts_with("--scenario: expected TEMPLATE=WEIGHT"), "{bad}: {e}");
        }
        let many: Vec<String> = (0..17).map(|i| format!("t{i}=1")).collect();
        assert!(parse(&many).unwrap_err().to_string().contains("at most 16"));
    }

    #[test]
    fn each_iteration_is_numbered_within_its_scenario() {
        let scenario = |name: &str, weight, browse: bool| Scenario {
            name: name.into(),
            weight,
            browse: browse.then(|| crate::steps::Flow {
                steps: Vec::new(),
                names: Vec::new(),
                ok: None,
                fail: None,
            }),
            steps: Vec::new(),
        };
        let s = Scenarios::new(vec![scenario("pay", 1, false), scenario("browse", 1, true)]);
        // Asked out of order, as concurrent users ask: the same numbers.
        let late = s.ordinal(5, 40);
        let numbers: Vec<(usize, u64)> = (1..=40).map(|i| (s.pick(5, i), s.ordinal(5, i))).collect();
        assert_eq!(numbers[39].1, late);
        for who in [0, 1] {
            let mine: Vec<u64> = numbers.iter().filter(|(p, _)| *p == who).map(|(_, n)| *n).collect();
            assert_eq!(mine, (1..=mine.len() as u64).collect::<Vec<_>>(), "scenario {who}");
        }
        let paying = numbers.iter().filter(|(p, _)| *p == 0).count() as u64;
        assert_eq!(s.paying_among(5, 40), paying);
    }

    #[test]
    fn picks_follow_the_weights_and_the_seed_alone() {
        let p = Picker::new([80, 20]);
        let picks: Vec<usize> = (1..=10_000).map(|i| p.pick(7, i)).collect();
        let browse = picks.iter().filter(|i| **i == 1).count();
        assert!((1_800..2_200).contains(&browse), "{browse} of 10,000 at 20%");
        // The same seed and index: the same scenario, whoever asks and when.
        assert_eq!(picks, (1..=10_000).map(|i| p.pick(7, i)).collect::<Vec<_>>());
        assert_ne!(picks, (1..=10_000).map(|i| p.pick(8, i)).collect::<Vec<_>>());
        // One scenario: always it.
        assert!((1..100).all(|i| Picker::new([3]).pick(7, i) == 0));
    }
}
