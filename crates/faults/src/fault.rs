//! The faults themselves: [`When`] a fault acts relative to the charge's commit, and the
//! [`Fault`] kinds with their parameters and their short human labels (`error 503
//! after_commit`), as the ledger and the request log show them.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

/// Whether a fault acts before the charge commits (nothing charged, nothing stored: safe
/// to retry) or after it (the money moved and the client is left in doubt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    #[default]
    BeforeCommit,
    AfterCommit,
}

impl When {
    /// The schema's spelling: `before_commit` or `after_commit`.
    pub fn as_str(self) -> &'static str {
        match self {
            When::BeforeCommit => "before_commit",
            When::AfterCommit => "after_commit",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<When> {
        match s {
            "before_commit" => Some(When::BeforeCommit),
            "after_commit" => Some(When::AfterCommit),
            _ => None,
        }
    }
}

impl fmt::Display for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one non-latency fault acting on a request.
///
/// `RateLimit` and `Decline` always act before the commit (nothing is charged, a 429 is
/// never stored); `SlowBody` dribbles the real response, so it acts after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// Close the connection without sending one byte of a response.
    DropResponse { when: When },
    /// Reset the connection (RST).
    Reset { when: When },
    /// Hold the request open with no response for `hang` (or until the client goes away).
    Hang {
        when: When,
        #[serde(serialize_with = "ser_duration")]
        hang: Duration,
    },
    /// A 5xx (500, 502, 503 or 504) with a Stripe-shaped body.
    Error { when: When, status: u16 },
    /// 429 with `Retry-After`.
    RateLimit {
        #[serde(serialize_with = "ser_duration")]
        retry_after: Duration,
    },
    /// A 402 card error.
    Decline {
        code: String,
        decline_code: String,
        message: String,
    },
    /// The response dribbled over `duration`.
    SlowBody {
        #[serde(serialize_with = "ser_duration")]
        duration: Duration,
    },
}

/// Every rule kind of the schema, in the order the error messages list them.
pub(crate) const KINDS: &[&str] = &[
    "latency",
    "drop_response",
    "reset",
    "hang",
    "error",
    "rate_limit",
    "decline",
    "slow_body",
];

/// The kinds that take a `when`.
pub(crate) const KINDS_WITH_WHEN: &[&str] = &["latency", "drop_response", "reset", "hang", "error"];

/// `latency, drop_response, reset, hang and error`, for messages.
pub(crate) fn kinds_with_when() -> String {
    let (last, rest) = KINDS_WITH_WHEN.split_last().unwrap_or((&"", &[]));
    format!("{} and {last}", rest.join(", "))
}

/// The 5xx statuses an `error` fault may answer with.
pub(crate) const ERROR_STATUSES: &[u16] = &[500, 502, 503, 504];

/// The kinds of [`Fault`], without their parameters: what fault counters are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    DropResponse,
    Reset,
    Hang,
    Error,
    RateLimit,
    Decline,
    SlowBody,
}

impl FaultKind {
    /// The schema's kind name (`drop_response`, `rate_limit`, …): a stable metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::DropResponse => "drop_response",
            FaultKind::Reset => "reset",
            FaultKind::Hang => "hang",
            FaultKind::Error => "error",
            FaultKind::RateLimit => "rate_limit",
            FaultKind::Decline => "decline",
            FaultKind::SlowBody => "slow_body",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Fault {
    /// Which kind of fault this is.
    pub fn fault_kind(&self) -> FaultKind {
        match self {
            Fault::DropResponse { .. } => FaultKind::DropResponse,
            Fault::Reset { .. } => FaultKind::Reset,
            Fault::Hang { .. } => FaultKind::Hang,
            Fault::Error { .. } => FaultKind::Error,
            Fault::RateLimit { .. } => FaultKind::RateLimit,
            Fault::Decline { .. } => FaultKind::Decline,
            Fault::SlowBody { .. } => FaultKind::SlowBody,
        }
    }

    /// The schema's kind name (`drop_response`, `rate_limit`, …).
    pub fn kind(&self) -> &'static str {
        self.fault_kind().as_str()
    }

    /// When the fault acts: as configured for the kinds that have a `when`; before the
    /// commit for `rate_limit` and `decline`; after it for `slow_body`.
    pub fn when(&self) -> When {
        match self {
            Fault::DropResponse { when } | Fault::Reset { when } | Fault::Hang { when, .. } => *when,
            Fault::Error { when, .. } => *when,
            Fault::RateLimit { .. } | Fault::Decline { .. } => When::BeforeCommit,
            Fault::SlowBody { .. } => When::AfterCommit,
        }
    }

    /// A `decline` with Stripe's default message for its `decline_code`.
    pub fn decline(code: &str, decline_code: &str, message: Option<&str>) -> Fault {
        Fault::Decline {
            code: code.to_string(),
            decline_code: decline_code.to_string(),
            message: message.map_or_else(
                || default_decline_message(code, decline_code).to_string(),
                str::to_string,
            ),
        }
    }
}

impl fmt::Display for Fault {
    /// `drop_response after_commit`, `hang 10s before_commit`, `error 503 after_commit`,
    /// `rate_limit retry_after=1s`, `decline card_declined/insufficient_funds`, `slow_body 2s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::DropResponse { when } => write!(f, "drop_response {when}"),
            Fault::Reset { when } => write!(f, "reset {when}"),
            Fault::Hang { when, hang } => write!(f, "hang {} {when}", short_duration(*hang)),
            Fault::Error { when, status } => write!(f, "error {status} {when}"),
            Fault::RateLimit { retry_after } => write!(f, "rate_limit retry_after={}", short_duration(*retry_after)),
            Fault::Decline { code, decline_code, .. } => write!(f, "decline {code}/{decline_code}"),
            Fault::SlowBody { duration } => write!(f, "slow_body {}", short_duration(*duration)),
        }
    }
}

/// Stripe's customer-facing message for a decline.
pub(crate) fn default_decline_message(code: &str, decline_code: &str) -> &'static str {
    match (code, decline_code) {
        ("expired_card", _) | (_, "expired_card") => "Your card has expired.",
        ("incorrect_cvc", _) | (_, "incorrect_cvc") => "Your card's security code is incorrect.",
        ("processing_error", _) | (_, "processing_error") => {
            "An error occurred while processing your card. Try again in a little bit."
        }
        (_, "insufficient_funds") => "Your card has insufficient funds.",
        _ => "Your card was declined.",
    }
}

/// A compact duration for labels: `0ms`, `120ms`, `1.5s`, `30s`.
pub(crate) fn short_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        let s = format!("{:.3}", d.as_secs_f64());
        format!("{}s", s.trim_end_matches('0'))
    }
}

/// Serializes a duration the way the schema spells it (`1s 500ms`), so it parses back.
pub(crate) fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_duration(*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_and_stable() {
        assert_eq!(
            Fault::DropResponse {
                when: When::AfterCommit
            }
            .to_string(),
            "drop_response after_commit"
        );
        assert_eq!(
            Fault::Error {
                when: When::BeforeCommit,
                status: 503
            }
            .to_string(),
            "error 503 before_commit"
        );
        let hang = Fault::Hang {
            when: When::AfterCommit,
            hang: Duration::from_millis(1500),
        };
        assert_eq!(hang.to_string(), "hang 1.5s after_commit");
        assert_eq!(
            Fault::RateLimit {
                retry_after: Duration::from_secs(2)
            }
            .to_string(),
            "rate_limit retry_after=2s"
        );
        assert_eq!(
            Fault::SlowBody {
                duration: Duration::from_millis(250)
            }
            .to_string(),
            "slow_body 250ms"
        );
        let d = Fault::decline("card_declined", "insufficient_funds", None);
        assert_eq!(d.to_string(), "decline card_declined/insufficient_funds");
    }

    #[test]
    fn when_follows_the_kind() {
        assert_eq!(
            Fault::Reset {
                when: When::AfterCommit
            }
            .when(),
            When::AfterCommit
        );
        assert_eq!(
            Fault::RateLimit {
                retry_after: Duration::ZERO
            }
            .when(),
            When::BeforeCommit
        );
        assert_eq!(
            Fault::SlowBody {
                duration: Duration::ZERO
            }
            .when(),
            When::AfterCommit
        );
        assert_eq!(
            Fault::decline("card_declined", "generic_decline", None).when(),
            When::BeforeCommit
        );
        assert_eq!(When::parse("after_commit"), Some(When::AfterCommit));
        assert_eq!(When::parse("later"), None);
    }

    #[test]
    fn decline_messages_default_by_code() {
        let Fault::Decline { message, .. } = Fault::decline("card_declined", "insufficient_funds", None) else {
            unreachable!()
        };
        assert_eq!(message, "Your card has insufficient funds.");
        let Fault::Decline { message, .. } = Fault::decline("card_declined", "generic_decline", Some("No.")) else {
            unreachable!()
        };
        assert_eq!(message, "No.");
    }

    #[test]
    fn short_durations() {
        assert_eq!(short_duration(Duration::ZERO), "0ms");
        assert_eq!(short_duration(Duration::from_millis(999)), "999ms");
        assert_eq!(short_duration(Duration::from_secs(30)), "30s");
        assert_eq!(short_duration(Duration::from_millis(1250)), "1.25s");
    }

    #[test]
    fn faults_serialize_with_their_kind() {
        let j = serde_json::to_value(Fault::Hang {
            when: When::AfterCommit,
            hang: Duration::from_secs(5),
        })
        .unwrap();
        assert_eq!(
            j,
            serde_json::json!({"kind": "hang", "when": "after_commit", "hang": "5s"})
        );
    }
}
