//! The open model's schedule: when each checkout is meant to start (`--rate`,
//! `--arrivals`, `--run-time`, `--generators`).
//!
//! A [`Rate`] is fixed (`200/s`) or a linear ramp over the run (`50/s..400/s`). The
//! [`Schedule`] turns it into start offsets from the run's start by inverting the expected
//! count of arrivals Λ(t) = ∫ rate: the k-th of `uniform` arrivals is at Λ⁻¹(k), and
//! `poisson` arrivals at Λ⁻¹ of a seeded unit-rate Poisson process (time rescaling, so a
//! ramp stays a ramp). Pure and deterministic: the same flags and seed give the same
//! offsets, which is what the unit tests hold it to.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// The most checkouts per second one `--rate` may ask for.
pub const MAX_RATE: f64 = 1_000_000.0;

/// Checkouts started per second: fixed, or a linear ramp over the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Fixed(f64),
    Ramp { from: f64, to: f64 },
}

impl Rate {
    /// This generator's share when `n` generators split the rate.
    pub fn share(self, n: u32) -> Rate {
        let n = f64::from(n.max(1));
        match self {
            Rate::Fixed(r) => Rate::Fixed(r / n),
            Rate::Ramp { from, to } => Rate::Ramp {
                from: from / n,
                to: to / n,
            },
        }
    }

    /// The rate `fraction` (0 to 1) of the way through the run.
    pub fn at(self, fraction: f64) -> f64 {
        match self {
            Rate::Fixed(r) => r,
            Rate::Ramp { from, to } => from + (to - from) * fraction.clamp(0.0, 1.0),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Fixed(r) => write!(f, "{r}/s"),
            Rate::Ramp { from, to } => write!(f, "{from}/s..{to}/s"),
        }
    }
}

/// Parses `--rate`: `N/s` or `N/m` (N may be a decimal), or `FROM..TO` of those.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    const EXPECTED: &str = "expected N/s (such as 200/s), N/m, or a ramp FROM..TO (such as 50/s..400/s)";
    let one = |x: &str| -> Result<f64, String> {
        let x = x.trim();
        let (n, per) = x.split_once('/').ok_or_else(|| format!("'{x}': {EXPECTED}"))?;
        let secs = match per.trim() {
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            _ => return Err(format!("'{x}': {EXPECTED}")),
        };
        let n: f64 = n.trim().parse().map_err(|_| format!("'{x}': {EXPECTED}"))?;
        let r = n / secs;
        if !r.is_finite() || !(0.0..=MAX_RATE).contains(&r) {
            return Err(format!("'{x}': expected a rate from 0 to {MAX_RATE}/s"));
        }
        Ok(r)
    };
    match s.split_once("..") {
        Some((a, b)) => {
            let (from, to) = (one(a)?, one(b)?);
            if from == 0.0 && to == 0.0 {
                return Err("a ramp from 0/s to 0/s starts nothing".into());
            }
            Ok(Rate::Ramp { from, to })
        }
        None => match one(s)? {
            r if r > 0.0 => Ok(Rate::Fixed(r)),
            _ => Err("expected a rate above 0/s".into()),
        },
    }
}

/// How start times are spread: evenly, or as a seeded Poisson process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Exactly 1/rate apart (k6's constant- and ramping-arrival-rate executors).
    #[default]
    Uniform,
    /// Exponential gaps with the rate as mean (independent users), seeded by --seed.
    Poisson,
}

impl fmt::Display for Arrivals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arrivals::Uniform => "uniform",
            Arrivals::Poisson => "poisson",
        })
    }
}

/// The start offsets of a run's checkouts.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub rate: Rate,
    pub duration: Duration,
    pub arrivals: Arrivals,
    pub seed: u64,
}

impl Schedule {
    fn secs(&self) -> f64 {
        self.duration.as_secs_f64()
    }

    /// Λ(t): the expected number of arrivals in the first `t` seconds.
    pub fn expected_by(&self, t: f64) -> f64 {
        let t = t.clamp(0.0, self.secs());
        match self.rate {
            Rate::Fixed(r) => r * t,
            Rate::Ramp { from, to } => from * t + (to - from) * t * t / (2.0 * self.secs()),
        }
    }

    /// The expected number of arrivals over the whole run.
    pub fn expected(&self) -> f64 {
        self.expected_by(self.secs())
    }

    /// Λ⁻¹(x): the time by which `x` arrivals are expected (x ≤ Λ(T)).
    fn time_of(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        match self.rate {
            Rate::Fixed(r) => x / r,
            Rate::Ramp { from, to } => {
                let a = (to - from) / (2.0 * self.secs());
                if a == 0.0 {
                    return x / from;
                }
                // The positive root of a·t² + from·t − x, in the form that keeps its
                // precision when `a` is small (and works for a ramp down, a < 0).
                let disc = (from * from + 4.0 * a * x).max(0.0);
                2.0 * x / (from + disc.sqrt())
            }
        }
    }

    /// Start offsets from the run's start, in order, all before the run's end.
    pub fn offsets(&self) -> impl Iterator<Item = Duration> + Send + 'static {
        let s = self.clone();
        let end = s.secs();
        let total = s.expected();
        let mut rng = StdRng::seed_from_u64(s.seed ^ 0xA7A1_5EED_0000_0001);
        let mut k = 0u64;
        let mut x = 0.0f64;
        std::iter::from_fn(move || {
            x = match s.arrivals {
                Arrivals::Uniform => k as f64,
                // Exp(1) gaps: a unit-rate Poisson process, mapped through Λ⁻¹.
                Arrivals::Poisson => x - (1.0 - rng.random::<f64>()).ln(),
            };
            k += 1;
            if x >= total {
                return None;
            }
            let t = s.time_of(x);
            (t < end).then(|| Duration::from_secs_f64(t))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(rate: &str, secs: u64, arrivals: Arrivals, seed: u64) -> Schedule {
        Schedule {
            rate: parse_rate(rate).unwrap(),
            duration: Duration::from_secs(secs),
            arrivals,
            seed,
        }
    }

    fn per_second(s: &Schedule) -> Vec<u64> {
        let mut counts = vec![0u64; s.duration.as_secs() as usize];
        for t in s.offsets() {
            counts[t.as_secs() as usize] += 1;
        }
        counts
    }

    #[test]
    fn rates_parse_and_refuse() {
        assert_eq!(parse_rate("200/s").unwrap(), Rate::Fixed(200.0));
        assert_eq!(parse_rate(" 0.5/s").unwrap(), Rate::Fixed(0.5));
        assert_eq!(parse_rate("600/m").unwrap(), Rate::Fixed(10.0));
        assert_eq!(parse_rate("50/s..400/s").unwrap(), Rate::Ramp { from: 50.0, to: 400.0 });
        assert_eq!(parse_rate("0/s..10/s").unwrap(), Rate::Ramp { from: 0.0, to: 10.0 });
        for bad in [
            "200",
            "200/h",
            "x/s",
            "0/s",
            "-5/s",
            "0/s..0/s",
            "inf/s",
            "2000000/s",
            "NaN/s",
        ] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_rate("400/s").unwrap().share(4), Rate::Fixed(100.0));
        assert_eq!(parse_rate("50/s..400/s").unwrap().to_string(), "50/s..400/s");
    }

    #[test]
    fn a_fixed_uniform_rate_starts_exactly_that_many_every_second() {
        let s = schedule("200/s", 10, Arrivals::Uniform, 1);
        assert_eq!(per_second(&s), vec![200; 10]);
        let first: Vec<Duration> = s.offsets().take(3).collect();
        assert_eq!(
            first,
            [0, 5, 10].map(Duration::from_millis).to_vec(),
            "1/rate apart from the start"
        );
        // A rate below one a second still lands where it should.
        let slow = schedule("0.5/s", 10, Arrivals::Uniform, 1);
        assert_eq!(slow.offsets().count(), 5);
        assert_eq!(slow.offsets().nth(1), Some(Duration::from_secs(2)));
        // A share of a rate split across generators.
        let mut share = schedule("400/s", 3, Arrivals::Uniform, 1);
        share.rate = share.rate.share(4);
        assert_eq!(per_second(&share), vec![100; 3]);
    }

    #[test]
    fn a_ramp_rises_linearly_and_totals_its_area() {
        let s = schedule("50/s..400/s", 10, Arrivals::Uniform, 1);
        let counts = per_second(&s);
        // Second i has rate 50 + 35·(i + 0.5) on average: 67.5, 102.5, … 382.5.
        for (i, c) in counts.iter().enumerate() {
            let expected = 50.0 + 35.0 * (i as f64 + 0.5);
            assert!((*c as f64 - expected).abs() <= 1.0, "second {i}: {c} vs {expected}");
        }
        assert!(counts.windows(2).all(|w| w[1] > w[0]), "{counts:?}");
        assert_eq!(s.offsets().count(), 2250, "(50 + 400) / 2 × 10 s");
        // A ramp down mirrors it; a ramp from zero starts slowly.
        let down = per_second(&schedule("400/s..50/s", 10, Arrivals::Uniform, 1));
        assert!(down.windows(2).all(|w| w[1] < w[0]), "{down:?}");
        assert_eq!(down.iter().sum::<u64>(), 2250);
        let from_zero = per_second(&schedule("0/s..100/s", 10, Arrivals::Uniform, 1));
        assert_eq!(from_zero.iter().sum::<u64>(), 500);
        assert!(from_zero[0] <= 6 && from_zero[9] >= 94, "{from_zero:?}");
    }

    #[test]
    fn poisson_arrivals_are_seeded_and_average_the_rate() {
        let s = schedule("200/s", 50, Arrivals::Poisson, 42);
        let a: Vec<Duration> = s.offsets().collect();
        let b: Vec<Duration> = s.offsets().collect();
        assert_eq!(a, b, "same seed, same schedule");
        let other: Vec<Duration> = schedule("200/s", 50, Arrivals::Poisson, 43).offsets().collect();
        assert_ne!(a, other, "another seed, another schedule");
        // 10 000 expected; a Poisson count's standard deviation is 100.
        assert!((a.len() as f64 - 10_000.0).abs() < 400.0, "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]), "in order");
        // Gaps are exponential: their mean is 1/rate and their spread as wide as the mean.
        let gaps: Vec<f64> = a.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((mean - 0.005).abs() < 0.0003, "mean gap {mean}");
        assert!((sd / mean - 1.0).abs() < 0.05, "coefficient of variation {}", sd / mean);
        // A Poisson ramp keeps the ramp's shape.
        let ramp = per_second(&schedule("0/s..400/s", 20, Arrivals::Poisson, 5));
        let (early, late): (u64, u64) = (ramp[..10].iter().sum(), ramp[10..].iter().sum());
        assert!(late > 2 * early, "{early} then {late}");
        assert!(((early + late) as f64 - 4000.0).abs() < 300.0, "{}", early + late);
    }
}
