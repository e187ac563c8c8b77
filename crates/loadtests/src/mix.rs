//! Client behaviours and their mix: how each logical payment's client retries.
//!
//! `retry-same-key` is a correct client; `retry-new-key` mints a new key per attempt (the
//! classic bug); `double-submit` sends two concurrent requests with one key (a double
//! click); `no-key` sends none. A [`Mix`] weights them (`retry-same-key=80,double-submit=20`)
//! and picks one per payment from the payment's own random draw, so a seeded run assigns
//! the same behaviours whatever the concurrency.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    RetrySameKey,
    RetryNewKey,
    DoubleSubmit,
    NoKey,
}

impl Behaviour {
    pub const ALL: [Behaviour; 4] = [Self::RetrySameKey, Self::RetryNewKey, Self::DoubleSubmit, Self::NoKey];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::RetrySameKey => "retry-same-key",
            Self::RetryNewKey => "retry-new-key",
            Self::DoubleSubmit => "double-submit",
            Self::NoKey => "no-key",
        }
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Behaviours with integer weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix(Vec<(Behaviour, u32)>);

impl Mix {
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let mut out: Vec<(Behaviour, u32)> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part.split_once('=').unwrap_or((part, "1"));
            let b = Behaviour::ALL
                .into_iter()
                .find(|b| b.as_str() == name.trim())
                .ok_or_else(|| {
                    ConfigError::new(
                        "--mix",
                        name.trim(),
                        "a behaviour among retry-same-key, retry-new-key, double-submit, no-key",
                    )
                })?;
            let w: u32 = weight.trim().parse().map_err(|_| {
                ConfigError::new("--mix", name.trim(), format!("a whole-number weight, got '{weight}'"))
            })?;
            if out.iter().any(|(x, _)| *x == b) {
                return Err(ConfigError::new("--mix", name.trim(), "each behaviour once"));
            }
            if w > 0 {
                out.push((b, w));
            }
        }
        if out.is_empty() {
            return Err(ConfigError::flag(
                "--mix",
                "at least one behaviour with a weight above 0",
            ));
        }
        Ok(Self(out))
    }

    /// The behaviour for a payment whose uniform draw is `u` in `[0, 1)`.
    pub fn pick(&self, u: f64) -> Behaviour {
        let total: u32 = self.0.iter().map(|(_, w)| w).sum();
        let mut target = (u * f64::from(total)) as u32;
        for (b, w) in &self.0 {
            if target < *w {
                return *b;
            }
            target -= w;
        }
        self.0[self.0.len() - 1].0
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(b, w)| format!("{b}={w}")).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_picks_by_weight() {
        let m = Mix::parse("retry-same-key=80, double-submit=10,retry-new-key=10").unwrap();
        assert_eq!(m.pick(0.0), Behaviour::RetrySameKey);
        assert_eq!(m.pick(0.79), Behaviour::RetrySameKey);
        assert_eq!(m.pick(0.85), Behaviour::DoubleSubmit);
        assert_eq!(m.pick(0.999), Behaviour::RetryNewKey);
        assert_eq!(m.to_string(), "retry-same-key=80,double-submit=10,retry-new-key=10");
        assert_eq!(Mix::parse("no-key").unwrap().pick(0.5), Behaviour::NoKey);
    }

    #[test]
    fn bad_mixes_are_config_errors() {
        for bad in ["", "retry=1", "retry-same-key=x", "no-key=0", "no-key=1,no-key=2"] {
            assert!(Mix::parse(bad).is_err(), "{bad}");
        }
    }
}
