//! Forced faults, for targeted tests: a request names its own fault in a `Fauxpay-Fault`
//! header (`error; status=503; when=after_commit`) or through a magic payment method
//! (`pm_fault_drop_after_commit`) that a target API forwards unchanged. Both yield a
//! [`Decision`] whose `rule` is `None`; the values are checked by the profile schema's
//! own rules, so the messages read the same.
//!
//! Header grammar: one or more items separated by `,`; an item is a kind followed by
//! `; key=value` parameters. Parameters per kind: `latency` takes `value` (a fixed
//! duration, required) and `when`; `drop_response` and `reset` take `when`; `hang` takes
//! `hang` (default 30s) and `when`; `error` takes `status` (default 500) and `when`;
//! `rate_limit` takes `retry_after` (default 1s); `decline` takes `code`, `decline_code`
//! and `message`; `slow_body` takes `duration` (default 2s). Latencies add up; at most one
//! item may be a non-latency fault. `when` defaults to `before_commit`.

use super::checker::Checker;
use super::engine::Decision;
use super::fault::{kinds_with_when, When, KINDS, KINDS_WITH_WHEN};
use super::parse::rule;
use super::profile::Action;
use super::sample::Stream;
use super::tree::{Node, Value};

/// The magic payment methods, each charging `pm_card_visa` with a forced fault.
pub const FORCED_PAYMENT_METHODS: &[(&str, &str)] = &[
    (
        "pm_fault_drop_after_commit",
        "charges, then closes the connection without a response byte (`drop_response; when=after_commit`)",
    ),
    (
        "pm_fault_drop_before_commit",
        "closes the connection without a response byte; nothing charged (`drop_response`)",
    ),
    (
        "pm_fault_reset_after_commit",
        "charges, then resets the connection (`reset; when=after_commit`)",
    ),
    (
        "pm_fault_reset_before_commit",
        "resets the connection; nothing charged (`reset`)",
    ),
    (
        "pm_fault_hang_after_commit",
        "charges, then holds the request 30s with no response (`hang; hang=30s; when=after_commit`)",
    ),
    (
        "pm_fault_hang_before_commit",
        "holds the request 30s with no response; nothing charged (`hang; hang=30s`)",
    ),
    (
        "pm_fault_error_after_commit",
        "charges, then answers (and stores) a 500 (`error; status=500; when=after_commit`)",
    ),
    (
        "pm_fault_error_before_commit",
        "answers a 500; nothing charged or stored (`error; status=500`)",
    ),
    (
        "pm_fault_rate_limit",
        "answers 429 with `Retry-After: 1`; nothing charged or stored (`rate_limit; retry_after=1s`)",
    ),
    (
        "pm_fault_slow_body",
        "charges, then dribbles the response over 2s (`slow_body; duration=2s`)",
    ),
];

/// The card every magic payment method charges.
const UNDERLYING_CARD: &str = "pm_card_visa";

/// The `Fauxpay-Fault` header equivalent of a magic payment method.
fn header_for(payment_method: &str) -> Option<&'static str> {
    Some(match payment_method {
        "pm_fault_drop_after_commit" => "drop_response; when=after_commit",
        "pm_fault_drop_before_commit" => "drop_response; when=before_commit",
        "pm_fault_reset_after_commit" => "reset; when=after_commit",
        "pm_fault_reset_before_commit" => "reset; when=before_commit",
        "pm_fault_hang_after_commit" => "hang; hang=30s; when=after_commit",
        "pm_fault_hang_before_commit" => "hang; hang=30s; when=before_commit",
        "pm_fault_error_after_commit" => "error; status=500; when=after_commit",
        "pm_fault_error_before_commit" => "error; status=500; when=before_commit",
        "pm_fault_rate_limit" => "rate_limit; retry_after=1s",
        "pm_fault_slow_body" => "slow_body; duration=2s",
        _ => return None,
    })
}

/// The forced decision of a magic payment method, and the card to charge instead of it.
pub fn forced_by_payment_method(payment_method: &str) -> Option<(Decision, &'static str)> {
    let decision = parse_forced(header_for(payment_method)?).ok()?;
    Some((decision, UNDERLYING_CARD))
}

/// The parameters each kind takes in a header, and the defaults filled in when absent.
fn params_of(kind: &str) -> (&'static [&'static str], &'static [(&'static str, &'static str)]) {
    match kind {
        "latency" => (&["value", "when"], &[("distribution", "fixed")]),
        "drop_response" | "reset" => (&["when"], &[]),
        "hang" => (&["hang", "when"], &[("hang", "30s")]),
        "error" => (&["status", "when"], &[]),
        "rate_limit" => (&["retry_after"], &[]),
        "decline" => (&["code", "decline_code", "message"], &[]),
        "slow_body" => (&["duration"], &[("duration", "2s")]),
        _ => (&[], &[]),
    }
}

/// Longest `Fauxpay-Fault` header accepted, in bytes.
pub const MAX_FORCED_HEADER_BYTES: usize = 1024;
/// Most items (`,`-separated faults and latencies) in one `Fauxpay-Fault` header.
pub const MAX_FORCED_ITEMS: usize = 16;

/// Parses a `Fauxpay-Fault` header value into a forced decision (`rule` is `None`).
/// Linear in the header's length, which is capped at [`MAX_FORCED_HEADER_BYTES`] (and
/// [`MAX_FORCED_ITEMS`] items) before anything else is looked at.
pub fn parse_forced(header_value: &str) -> Result<Decision, String> {
    if header_value.len() > MAX_FORCED_HEADER_BYTES {
        return Err(format!(
            "the header is {} bytes long, expected at most {MAX_FORCED_HEADER_BYTES}",
            header_value.len()
        ));
    }
    if header_value.split(',').count() > MAX_FORCED_ITEMS {
        return Err(format!("expected at most {MAX_FORCED_ITEMS} comma-separated items"));
    }
    let mut decision = Decision::default();
    for item in header_value.split(',') {
        match parse_item(item)? {
            Action::Latency { when, latency } => {
                // Always a fixed distribution here: the sample is its value (the stream
                // is not read, so it is seeded with nothing that costs to hash).
                let value = latency.sample(&mut Stream::new(0, "", 0, 0));
                match when {
                    When::BeforeCommit => decision.latency_before += value,
                    When::AfterCommit => decision.latency_after += value,
                }
            }
            Action::Fault(fault) => {
                if let Some(first) = &decision.fault {
                    return Err(format!("more than one fault: {first} and {fault}"));
                }
                decision.fault = Some(fault);
            }
        }
    }
    Ok(decision)
}

fn parse_item(item: &str) -> Result<Action, String> {
    let mut parts = item.split(';').map(str::trim);
    let kind = parts.next().unwrap_or_default();
    if kind.is_empty() {
        return Err(format!("expected a fault kind, one of {}", KINDS.join(", ")));
    }
    let (allowed, defaults) = params_of(kind);
    let known = KINDS.contains(&kind);
    let mut entries = vec![("kind".to_string(), node(Value::Str(kind.to_string())))];
    for part in parts.filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(format!("expected key=value after `;`, got {part:?}"));
        };
        let (key, value) = (key.trim(), value.trim());
        if known && !allowed.contains(&key) {
            if key == "when" && !KINDS_WITH_WHEN.contains(&kind) {
                return Err(format!("{kind} takes no `when` (only {} do)", kinds_with_when()));
            }
            let expected = if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            };
            return Err(format!("unknown parameter `{key}` for {kind}, expected {expected}"));
        }
        let value = match value.parse::<i64>() {
            Ok(i) if key == "status" => Value::Int(i),
            _ => Value::Str(value.to_string()),
        };
        entries.push((key.to_string(), node(value)));
    }
    for (key, value) in defaults {
        if !entries.iter().any(|(k, _)| k == key) {
            entries.push((key.to_string(), node(Value::Str(value.to_string()))));
        }
    }
    let mut c = Checker::new("Fauxpay-Fault");
    let parsed = rule(&mut c, &node(Value::Table(entries)), "");
    match (parsed, c.diagnostics.first()) {
        (Some(r), None) => Ok(r.action),
        (_, Some(d)) => Err(format!("{}: {}", d.field, d.message)),
        (None, None) => Err(format!("invalid fault {item:?}")),
    }
}

fn node(value: Value) -> Node {
    Node { line: None, value }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Fault;

    fn fault(header: &str) -> Fault {
        let d = parse_forced(header).unwrap();
        assert_eq!(d.rule, None);
        d.fault.unwrap()
    }

    #[test]
    fn headers_name_every_kind() {
        assert_eq!(
            fault("drop_response; when=after_commit"),
            Fault::DropResponse {
                when: When::AfterCommit
            }
        );
        assert_eq!(
            fault("drop_response"),
            Fault::DropResponse {
                when: When::BeforeCommit
            }
        );
        assert_eq!(
            fault("hang; hang=5s"),
            Fault::Hang {
                when: When::BeforeCommit,
                hang: Duration::from_secs(5)
            }
        );
        assert_eq!(
            fault("hang"),
            Fault::Hang {
                when: When::BeforeCommit,
                hang: Duration::from_secs(30)
            }
        );
        assert_eq!(
            fault(" error ; status=503 ;when=after_commit"),
            Fault::Error {
                when: When::AfterCommit,
                status: 503
            }
        );
        assert_eq!(
            fault("error"),
            Fault::Error {
                when: When::BeforeCommit,
                status: 500
            }
        );
        assert_eq!(
            fault("rate_limit; retry_after=2s"),
            Fault::RateLimit {
                retry_after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            fault("decline; decline_code=insufficient_funds"),
            Fault::decline("card_declined", "insufficient_funds", None)
        );
        assert_eq!(
            fault("slow_body; duration=1s"),
            Fault::SlowBody {
                duration: Duration::from_secs(1)
            }
        );
        assert_eq!(
            fault("reset; when=after_commit"),
            Fault::Reset {
                when: When::AfterCommit
            }
        );
    }

    #[test]
    fn latency_is_forced_as_a_decision() {
        let d = parse_forced("latency; value=200ms; when=after_commit").unwrap();
        assert_eq!(d.latency_after, Duration::from_millis(200));
        assert_eq!(d.fault, None);
        assert_eq!(d.label().unwrap(), "latency 200ms after_commit");
        let d = parse_forced("latency; value=100ms, latency; value=50ms, drop_response; when=after_commit").unwrap();
        assert_eq!(d.latency_before, Duration::from_millis(150));
        assert_eq!(d.label().unwrap(), "drop_response after_commit (forced), latency 150ms");
    }

    #[test]
    fn bad_headers_say_what_was_expected() {
        let err = |h: &str| parse_forced(h).unwrap_err();
        assert!(err("dropp").starts_with("kind: unknown fault kind \"dropp\", expected one of latency"));
        assert_eq!(
            err("error; status=501"),
            "status: expected one of 500, 502, 503, 504, got 501"
        );
        assert_eq!(
            err("hang; hang=-1s"),
            "hang: expected a non-negative duration, got \"-1s\""
        );
        assert_eq!(
            err("hang; when=later"),
            "when: expected before_commit or after_commit, got \"later\""
        );
        assert_eq!(
            err("rate_limit; when=after_commit"),
            "rate_limit takes no `when` (only latency, drop_response, reset, hang and error do)"
        );
        assert_eq!(
            err("error; probability=1"),
            "unknown parameter `probability` for error, expected status, when"
        );
        assert_eq!(err("reset; hard"), "expected key=value after `;`, got \"hard\"");
        assert_eq!(
            err("latency"),
            "value: missing, expected a duration: the \"fixed\" distribution needs value"
        );
        assert_eq!(
            err("latency; value=1s; distribution=normal"),
            "unknown parameter `distribution` for latency, expected value, when"
        );
        assert!(err("reset, drop_response").starts_with("more than one fault"));
        assert!(err("").starts_with("expected a fault kind"));
        assert!(err(&"latency; value=1ms,".repeat(17)).starts_with("expected at most 16"));
        assert!(err(&"x".repeat(MAX_FORCED_HEADER_BYTES + 1)).contains("expected at most 1024"));
    }

    #[test]
    fn a_huge_header_is_refused_by_its_length_before_any_parsing() {
        // 380 KB used to take seconds (the whole header was hashed once per item): it is
        // refused on its byte count alone, before a single item is read.
        let huge = "latency; value=1ms,".repeat(20_000);
        assert!(parse_forced(&huge).unwrap_err().contains("expected at most 1024"));
        let many = vec!["latency; value=1ms"; MAX_FORCED_ITEMS].join(",");
        assert_eq!(parse_forced(&many).unwrap().latency_before, Duration::from_millis(16));
    }

    #[test]
    fn every_magic_payment_method_resolves() {
        for (pm, description) in FORCED_PAYMENT_METHODS {
            let (decision, card) = forced_by_payment_method(pm).unwrap_or_else(|| panic!("{pm}"));
            assert_eq!(card, "pm_card_visa");
            let fault = decision.fault.unwrap();
            let after = pm.ends_with("_after_commit") || *pm == "pm_fault_slow_body";
            assert_eq!(fault.when() == When::AfterCommit, after, "{pm}");
            assert!(description.contains(fault.kind()), "{pm}: {description}");
        }
        let (d, _) = forced_by_payment_method("pm_fault_hang_before_commit").unwrap();
        assert_eq!(
            d.fault,
            Some(Fault::Hang {
                when: When::BeforeCommit,
                hang: Duration::from_secs(30)
            })
        );
        let (d, _) = forced_by_payment_method("pm_fault_error_after_commit").unwrap();
        assert_eq!(
            d.fault,
            Some(Fault::Error {
                when: When::AfterCommit,
                status: 500
            })
        );
        assert!(forced_by_payment_method("pm_card_visa").is_none());
        assert!(forced_by_payment_method("pm_fault_nope").is_none());
    }
}
