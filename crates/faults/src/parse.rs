//! The profile schema: reads a TOML (or JSON) profile into a [`Profile`], checking every
//! field — unknown fields, bad kinds, probabilities outside `0..=1`, negative durations,
//! a `when` on a kind that has none, fields of another kind — and reporting each mistake
//! as one line naming the source, line, field and what was expected.

use std::collections::BTreeMap;
use std::time::Duration;

use super::checker::{closest, join, Checker, Table};
use super::error::ProfileError;
use super::fault::{kinds_with_when, Fault, When, ERROR_STATUSES, KINDS, KINDS_WITH_WHEN};
use super::profile::{
    Action, AmountRange, DeliveryFault, Distribution, Forgery, Latency, Match, Profile, Rule, WebhookRule, Window,
    MAX_COPIES, WEBHOOK_KINDS,
};
use super::tree::{self, Node, Value};

/// Parses and validates a TOML profile; `source` labels the errors (usually the path).
pub fn parse_profile(source: &str, text: &str) -> Result<Profile, ProfileError> {
    let root = tree::from_toml(source, text).map_err(ProfileError::single)?;
    check_tree(source, &root)
}

/// Parses and validates a JSON profile (same schema; its errors carry no line).
pub fn parse_profile_json(source: &str, text: &str) -> Result<Profile, ProfileError> {
    let root = tree::from_json(source, text).map_err(ProfileError::single)?;
    check_tree(source, &root)
}

/// JSON when the text starts with `{`, else TOML.
pub fn parse_profile_text(source: &str, text: &str) -> Result<Profile, ProfileError> {
    if text.trim_start().starts_with('{') {
        parse_profile_json(source, text)
    } else {
        parse_profile(source, text)
    }
}

/// Reads and validates a document tree (from TOML, JSON, or the typed builder).
pub(crate) fn check_tree(source: &str, root: &Node) -> Result<Profile, ProfileError> {
    let mut c = Checker::new(source);
    let profile = profile(&mut c, root);
    match (ProfileError::from_diagnostics(c.diagnostics), profile) {
        (None, Some(p)) => Ok(p),
        (Some(e), _) => Err(e),
        (None, None) => Err(ProfileError::whole_source(source, "invalid profile")),
    }
}

const TOP_FIELDS: &[&str] = &["name", "description", "seed", "key_ttl", "latency", "rules", "webhooks"];
const RULE_FIELDS: &[&str] = &["kind", "probability", "when", "first_attempts", "match", "window"];
pub(crate) const LATENCY_FIELDS: &[&str] = &[
    "distribution",
    "value",
    "min",
    "max",
    "mean",
    "stddev",
    "median",
    "sigma",
    "cap",
];
const DISTRIBUTIONS: &[(&str, &[&str])] = &[
    ("fixed", &["value"]),
    ("uniform", &["min", "max"]),
    ("normal", &["mean", "stddev"]),
    ("lognormal", &["median", "sigma"]),
];
const MATCH_FIELDS: &[&str] = &["method", "path", "amount", "payment_method", "metadata"];
const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
const MAX_SIGMA: f64 = 10.0;
/// Longest a fault may hold one request: `hang`, a `slow_body` duration, and every
/// latency parameter (`value`, `min`, `max`, `mean`, `stddev`, `median`, `cap`).
pub const MAX_HOLD: Duration = Duration::from_secs(600);
/// Largest `retry_after` (sent as `Retry-After` in whole seconds).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// Largest `first_attempts`.
pub const MAX_FIRST_ATTEMPTS: u32 = 1_000;
/// Most rules in one profile.
pub const MAX_RULES: usize = 256;

/// `Some(None)` for an absent optional field, `None` for an invalid one.
pub(crate) fn optional<T>(read: Option<Option<T>>) -> Option<Option<T>> {
    read.map_or(Some(None), |v| v.map(Some))
}

fn profile(c: &mut Checker, root: &Node) -> Option<Profile> {
    let t = c.table(root, "")?;
    c.only(&t, TOP_FIELDS);
    let name = c
        .require(&t, "name", "a string")
        .and_then(|n| c.nonempty_string(n, "name"));
    let description = c
        .require(&t, "description", "a string")
        .and_then(|n| c.string(n, "description"));
    let seed = c
        .require(&t, "seed", "a non-negative integer")
        .and_then(|n| c.integer_in(n, "seed", 0, i64::MAX, "a non-negative integer"));
    let key_ttl = optional(t.get("key_ttl").map(|n| c.positive_duration(n, "key_ttl")));
    let latency = optional(t.get("latency").map(|n| {
        let lt = c.table(n, "latency")?;
        c.only(&lt, LATENCY_FIELDS);
        latency(c, &lt)
    }));
    let rules = match t.get("rules") {
        None => Some(Vec::new()),
        Some(Node {
            value: Value::Array(items),
            line,
        }) if items.len() > MAX_RULES => {
            c.error(
                *line,
                "rules",
                format!("expected at most {MAX_RULES} rules, got {}", items.len()),
            );
            None
        }
        Some(Node {
            value: Value::Array(items),
            ..
        }) => {
            let rules: Vec<Option<Rule>> = items
                .iter()
                .enumerate()
                .map(|(i, item)| rule(c, item, &format!("rules[{i}]")))
                .collect();
            rules.into_iter().collect()
        }
        Some(n) => {
            c.error(
                n.line,
                "rules",
                format!("expected an array of tables ([[rules]]), got {}", n.describe()),
            );
            None
        }
    };
    let webhooks = match t.get("webhooks") {
        None => Some(Vec::new()),
        Some(Node {
            value: Value::Array(items),
            ..
        }) => {
            let rules: Vec<Option<WebhookRule>> = items
                .iter()
                .enumerate()
                .map(|(i, item)| webhook_rule(c, item, &format!("webhooks[{i}]")))
                .collect();
            rules.into_iter().collect()
        }
        Some(n) => {
            c.error(
                n.line,
                "webhooks",
                format!("expected an array of tables ([[webhooks]]), got {}", n.describe()),
            );
            None
        }
    };
    Some(Profile {
        name: name?.to_string(),
        description: description?.to_string(),
        seed: u64::try_from(seed?).ok()?,
        key_ttl: key_ttl?,
        latency: latency?,
        rules: rules?,
        webhooks: webhooks?,
    })
}

/// The distribution fields of a `[latency]` table or a latency rule (other fields are the
/// caller's business).
pub(crate) fn latency(c: &mut Checker, t: &Table) -> Option<Latency> {
    let names: Vec<&str> = DISTRIBUTIONS.iter().map(|(n, _)| *n).collect();
    let expected = format!("a distribution, one of {}", names.join(", "));
    let dist_field = t.field("distribution");
    let name_node = c.require(t, "distribution", &expected)?;
    let name = c.string(name_node, &dist_field)?;
    let Some((name, params)) = DISTRIBUTIONS.iter().find(|(n, _)| *n == name) else {
        let hint = closest(name, &names)
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        c.error(
            name_node.line,
            &dist_field,
            format!(
                "unknown distribution {name:?}, expected one of {}{hint}",
                names.join(", ")
            ),
        );
        return None;
    };
    let mut ok = true;
    for (key, node) in t.entries {
        let owner = DISTRIBUTIONS.iter().find(|(_, p)| p.contains(&key.as_str()));
        if let Some((other, _)) = owner.filter(|(o, _)| o != name) {
            let message = format!(
                "not a field of the {name:?} distribution ({key} belongs to {other}), expected {} and optionally cap",
                params.join(" and ")
            );
            c.error(node.line, &t.field(key), message);
            ok = false;
        }
    }
    let needs = format!("a duration: the {name:?} distribution needs {}", params.join(" and "));
    let dur = |c: &mut Checker, key: &str| {
        c.require(t, key, &needs)
            .and_then(|n| c.duration_within(n, &t.field(key), MAX_HOLD))
    };
    let distribution = match *name {
        "fixed" => Some(Distribution::Fixed {
            value: dur(c, "value")?,
        }),
        "uniform" => {
            let (min, max) = (dur(c, "min"), dur(c, "max"));
            let (min, max) = (min?, max?);
            if min > max {
                let node = t.get("max")?;
                let got = humantime::format_duration(max);
                let message = format!(
                    "expected a duration not less than min ({}), got {got}",
                    humantime::format_duration(min)
                );
                c.error(node.line, &t.field("max"), message);
                return None;
            }
            Some(Distribution::Uniform { min, max })
        }
        "normal" => {
            let (mean, stddev) = (dur(c, "mean"), dur(c, "stddev"));
            Some(Distribution::Normal {
                mean: mean?,
                stddev: stddev?,
            })
        }
        _ => {
            let median = dur(c, "median");
            let sigma = c
                .require(t, "sigma", &format!("a number between 0 and {MAX_SIGMA}"))
                .and_then(|n| c.number_in(n, &t.field("sigma"), 0.0, MAX_SIGMA));
            Some(Distribution::LogNormal {
                median: median?,
                sigma: sigma?,
            })
        }
    };
    let cap = optional(
        t.get("cap")
            .map(|n| c.positive_duration_within(n, &t.field("cap"), MAX_HOLD)),
    );
    ok.then_some(Latency {
        distribution: distribution?,
        cap: cap?,
    })
}

/// The fields only rules of `kind` take.
fn kind_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "latency" => LATENCY_FIELDS,
        "hang" => &["hang"],
        "error" => &["status"],
        "rate_limit" => &["retry_after"],
        "decline" => &["code", "decline_code", "message"],
        "slow_body" => &["duration"],
        _ => &[],
    }
}

/// The kind a kind-specific field belongs to.
fn field_owner(key: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| kind_fields(k).contains(&key))
}

pub(crate) fn rule(c: &mut Checker, node: &Node, path: &str) -> Option<Rule> {
    let t = c.table(node, path)?;
    let kinds = KINDS.join(", ");
    let kind_node = c.require(&t, "kind", &format!("a fault kind, one of {kinds}"));
    let kind = kind_node.and_then(|n| c.string(n, &t.field("kind")));
    let kind = match (kind_node, kind) {
        (Some(n), Some(k)) if !KINDS.contains(&k) => {
            let hint = closest(k, KINDS)
                .map(|c| format!(" (did you mean `{c}`?)"))
                .unwrap_or_default();
            c.error(
                n.line,
                &t.field("kind"),
                format!("unknown fault kind {k:?}, expected one of {kinds}{hint}"),
            );
            None
        }
        (_, k) => k,
    };
    check_rule_fields(c, &t, kind);
    let probability = optional(
        t.get("probability")
            .map(|n| c.number_in(n, &t.field("probability"), 0.0, 1.0)),
    );
    let takes_when = kind.is_some_and(|k| KINDS_WITH_WHEN.contains(&k));
    let when = match t.get("when") {
        Some(n) if takes_when => when(c, n, &t.field("when")),
        _ => Some(When::BeforeCommit),
    };
    let first_attempts = optional(t.get("first_attempts").map(|n| {
        let expected = format!("a whole number of attempts, from 1 to {MAX_FIRST_ATTEMPTS}");
        c.integer_in(
            n,
            &t.field("first_attempts"),
            1,
            i64::from(MAX_FIRST_ATTEMPTS),
            &expected,
        )
        .map(|i| i as u32)
    }));
    let matches = optional(t.get("match").map(|n| matcher(c, n, &t.field("match"))));
    let window = optional(t.get("window").map(|n| window(c, n, &t.field("window"))));
    let action = action(c, &t, kind?, when?);
    Some(Rule {
        action: action?,
        probability: probability?.unwrap_or(1.0),
        first_attempts: first_attempts?,
        matches: matches?.unwrap_or_default(),
        window: window?,
    })
}

/// Reports unknown fields, fields of another kind, and a `when` on a kind without one.
fn check_rule_fields(c: &mut Checker, t: &Table, kind: Option<&str>) {
    let Some(kind) = kind else {
        // The kind is unknown: only fields that no kind takes can be reported.
        let all: Vec<&str> = RULE_FIELDS
            .iter()
            .chain(KINDS.iter().flat_map(|k| kind_fields(k)))
            .copied()
            .collect();
        for (key, node) in t.entries {
            if !all.contains(&key.as_str()) {
                c.unknown(t, key, node, &all);
            }
        }
        return;
    };
    let takes_when = KINDS_WITH_WHEN.contains(&kind);
    let allowed: Vec<&str> = RULE_FIELDS
        .iter()
        .filter(|f| takes_when || **f != "when")
        .chain(kind_fields(kind))
        .copied()
        .collect();
    for (key, node) in t.entries {
        if allowed.contains(&key.as_str()) {
            continue;
        }
        let field = t.field(key);
        if key == "when" {
            let message = format!("kind {kind:?} takes no `when` (only {} do)", kinds_with_when());
            c.error(node.line, &field, message);
        } else if let Some(owner) = field_owner(key) {
            let message = format!(
                "not a field of {kind:?} rules ({key} belongs to {owner}), expected one of {}",
                allowed.join(", ")
            );
            c.error(node.line, &field, message);
        } else {
            c.unknown(t, key, node, &allowed);
        }
    }
}

fn when(c: &mut Checker, node: &Node, field: &str) -> Option<When> {
    let s = c.string(node, field)?;
    let w = When::parse(s);
    if w.is_none() {
        c.error(
            node.line,
            field,
            format!("expected before_commit or after_commit, got {s:?}"),
        );
    }
    w
}

/// The kind-specific fields of a rule, as its action.
fn action(c: &mut Checker, t: &Table, kind: &str, when: When) -> Option<Action> {
    let fault = match kind {
        "latency" => return latency(c, t).map(|latency| Action::Latency { when, latency }),
        "drop_response" => Fault::DropResponse { when },
        "reset" => Fault::Reset { when },
        "hang" => {
            let n = c.require(t, "hang", "a duration such as \"10s\" (how long to hold the request)")?;
            Fault::Hang {
                when,
                hang: c.positive_duration_within(n, &t.field("hang"), MAX_HOLD)?,
            }
        }
        "error" => {
            let statuses = ERROR_STATUSES.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
            let status = match t.get("status") {
                None => 500,
                Some(n) => status(c, n, &t.field("status"), &statuses)?,
            };
            Fault::Error { when, status }
        }
        "rate_limit" => {
            let retry_after = match t.get("retry_after") {
                None => Duration::from_secs(1),
                Some(n) => c.duration_within(n, &t.field("retry_after"), MAX_RETRY_AFTER)?,
            };
            Fault::RateLimit { retry_after }
        }
        "decline" => {
            let mut text = |key: &str| optional(t.get(key).map(|n| c.nonempty_string(n, &t.field(key))));
            let (code, decline_code, message) = (text("code"), text("decline_code"), text("message"));
            let code = code?.unwrap_or("card_declined");
            Fault::decline(code, decline_code?.unwrap_or("generic_decline"), message?)
        }
        _ => {
            let n = c.require(t, "duration", "a duration such as \"2s\" (how long the body takes)")?;
            Fault::SlowBody {
                duration: c.positive_duration_within(n, &t.field("duration"), MAX_HOLD)?,
            }
        }
    };
    Some(Action::Fault(fault))
}

fn status(c: &mut Checker, node: &Node, field: &str, statuses: &str) -> Option<u16> {
    let expected = format!("one of {statuses}");
    let i = c.integer_in(node, field, 0, i64::from(u16::MAX), &expected);
    match i.and_then(|i| ERROR_STATUSES.iter().copied().find(|s| i64::from(*s) == i)) {
        Some(s) => Some(s),
        None => {
            if let Some(i) = i {
                c.error(node.line, field, format!("expected {expected}, got {i}"));
            }
            None
        }
    }
}

fn matcher(c: &mut Checker, node: &Node, path: &str) -> Option<Match> {
    let t = c.table(node, path)?;
    c.only(&t, MATCH_FIELDS);
    let method = optional(t.get("method").map(|n| {
        let field = t.field("method");
        let m = c.string(n, &field)?.to_ascii_uppercase();
        if !METHODS.contains(&m.as_str()) {
            c.error(
                n.line,
                &field,
                format!("expected an HTTP method, one of {}, got {m:?}", METHODS.join(", ")),
            );
            return None;
        }
        Some(m)
    }));
    let path_pattern = optional(t.get("path").map(|n| {
        let field = t.field("path");
        let p = c.string(n, &field)?;
        let star = p.find('*');
        if !p.starts_with('/') || star.is_some_and(|i| i != p.len() - 1) {
            let message = format!("expected a path starting with '/', ending in '*' to match a prefix, got {p:?}");
            c.error(n.line, &field, message);
            return None;
        }
        Some(p.to_string())
    }));
    let amount = optional(t.get("amount").map(|n| amount(c, n, &t.field("amount"))));
    let payment_method = optional(
        t.get("payment_method")
            .map(|n| c.nonempty_string(n, &t.field("payment_method")).map(str::to_string)),
    );
    let metadata = optional(t.get("metadata").map(|n| metadata(c, n, &t.field("metadata"))));
    Some(Match {
        method: method?,
        path: path_pattern?,
        amount: amount?,
        payment_method: payment_method?,
        metadata: metadata?.unwrap_or_default(),
    })
}

/// `{ min = 100, max = 5000 }` (either bound optional), or one integer for an exact amount.
fn amount(c: &mut Checker, node: &Node, path: &str) -> Option<AmountRange> {
    const EXPECTED: &str = "a non-negative integer amount";
    if let Value::Int(_) = node.value {
        let exact = c.integer_in(node, path, 0, i64::MAX, EXPECTED)? as u64;
        return Some(AmountRange {
            min: Some(exact),
            max: Some(exact),
        });
    }
    let t = c.table(node, path)?;
    c.only(&t, &["min", "max"]);
    let mut bound = |key: &str| {
        optional(
            t.get(key)
                .map(|n| c.integer_in(n, &t.field(key), 0, i64::MAX, EXPECTED)),
        )
    };
    let (min, max) = (bound("min")?, bound("max")?);
    if let (Some(lo), Some(hi)) = (min, max) {
        if lo > hi {
            let line = t.get("max").and_then(|n| n.line);
            c.error(
                line,
                &t.field("max"),
                format!("expected an amount not less than min ({lo}), got {hi}"),
            );
            return None;
        }
    }
    Some(AmountRange {
        min: min.map(|m| m as u64),
        max: max.map(|m| m as u64),
    })
}

fn metadata(c: &mut Checker, node: &Node, path: &str) -> Option<BTreeMap<String, String>> {
    let t = c.table(node, path)?;
    let mut map = BTreeMap::new();
    let mut ok = true;
    for (key, value) in t.entries {
        match c.string(value, &join(path, key)) {
            Some(v) => {
                map.insert(key.clone(), v.to_string());
            }
            None => ok = false,
        }
    }
    ok.then_some(map)
}

fn window(c: &mut Checker, node: &Node, path: &str) -> Option<Window> {
    let t = c.table(node, path)?;
    c.only(&t, &["start", "duration"]);
    let start = optional(t.get("start").map(|n| c.duration(n, &t.field("start"))));
    let duration = optional(t.get("duration").map(|n| c.positive_duration(n, &t.field("duration"))));
    Some(Window {
        start: start?.unwrap_or(Duration::ZERO),
        duration: duration?,
    })
}

const WEBHOOK_FIELDS: &[&str] = &["kind", "probability", "first_attempts", "match"];

fn webhook_kind_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "duplicate" => &["copies", "gap"],
        "delay" => LATENCY_FIELDS,
        "bad_signature" => &["how", "retry"],
        _ => &[],
    }
}

/// Reads one `[[webhooks]]` table (`path` is `webhooks[i]`).
pub(crate) fn webhook_rule(c: &mut Checker, node: &Node, path: &str) -> Option<WebhookRule> {
    let t = c.table(node, path)?;
    let kinds = WEBHOOK_KINDS.join(", ");
    let kind_node = c.require(&t, "kind", &format!("a delivery fault kind, one of {kinds}"))?;
    let kind = c.string(kind_node, &t.field("kind"))?;
    if !WEBHOOK_KINDS.contains(&kind) {
        let hint = closest(kind, WEBHOOK_KINDS)
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        c.error(
            kind_node.line,
            &t.field("kind"),
            format!("unknown delivery fault kind {kind:?}, expected one of {kinds}{hint}"),
        );
        return None;
    }
    let allowed: Vec<&str> = WEBHOOK_FIELDS
        .iter()
        .chain(webhook_kind_fields(kind))
        .copied()
        .collect();
    c.only(&t, &allowed);
    let probability = optional(
        t.get("probability")
            .map(|n| c.number_in(n, &t.field("probability"), 0.0, 1.0)),
    );
    let first_attempts = optional(t.get("first_attempts").map(|n| {
        let expected = "a whole number of attempts, at least 1";
        c.integer_in(n, &t.field("first_attempts"), 1, i64::from(u32::MAX), expected)
            .map(|i| i as u32)
    }));
    let event = optional(t.get("match").map(|n| {
        let m = c.table(n, &t.field("match"))?;
        c.only(&m, &["event"]);
        let Some(e) = m.get("event") else {
            return Some(None);
        };
        let field = m.field("event");
        let pattern = c.nonempty_string(e, &field)?;
        let star = pattern.find('*');
        let valid = match star {
            None => true,
            Some(i) => i == pattern.len() - 1 && (pattern == "*" || pattern.ends_with(".*")),
        };
        if !valid {
            c.error(
                e.line,
                &field,
                format!("expected an event type such as \"payment_intent.succeeded\" or a prefix such as \"payment_intent.*\", got {pattern:?}"),
            );
            return None;
        }
        Some(Some(pattern.to_string()))
    }));
    let fault = match kind {
        "duplicate" => {
            let copies = optional(t.get("copies").map(|n| {
                let expected = format!("a number of copies between 2 and {MAX_COPIES}");
                c.integer_in(n, &t.field("copies"), 2, i64::from(MAX_COPIES), &expected)
                    .map(|i| i as u32)
            }));
            let gap = optional(t.get("gap").map(|n| c.duration(n, &t.field("gap"))));
            Some(DeliveryFault::Duplicate {
                copies: copies?.unwrap_or(2),
                gap: gap?.unwrap_or(Duration::ZERO),
            })
        }
        "delay" => latency(c, &t).map(|latency| DeliveryFault::Delay { latency }),
        "lose_ack" => Some(DeliveryFault::LoseAck),
        "drop" => Some(DeliveryFault::Drop),
        _ => {
            let how_node = c.require(&t, "how", "wrong_secret or stale_timestamp");
            let how = how_node.and_then(|n| {
                let field = t.field("how");
                match c.string(n, &field)? {
                    "wrong_secret" => Some(Forgery::WrongSecret),
                    "stale_timestamp" => Some(Forgery::StaleTimestamp),
                    other => {
                        c.error(
                            n.line,
                            &field,
                            format!("expected wrong_secret or stale_timestamp, got {other:?}"),
                        );
                        None
                    }
                }
            });
            let retry = optional(t.get("retry").map(|n| match &n.value {
                super::tree::Value::Bool(b) => Some(*b),
                _ => {
                    c.error(
                        n.line,
                        &t.field("retry"),
                        format!("expected true or false, got {}", n.describe()),
                    );
                    None
                }
            }));
            let (how, retry) = (how, retry);
            Some(DeliveryFault::BadSignature {
                how: how?,
                retry: retry?.unwrap_or(true),
            })
        }
    };
    Some(WebhookRule {
        fault: fault?,
        probability: probability?.unwrap_or(1.0),
        first_attempts: first_attempts?,
        event: event?.flatten(),
    })
}

#[cfg(test)]
mod tests;
