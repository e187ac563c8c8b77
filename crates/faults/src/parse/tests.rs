use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

const HEAD: &str = "name = \"x\"\ndescription = \"d\"\nseed = 1\n";

/// Every error line for a profile of `HEAD` (3 lines) followed by `rest`.
fn errors(rest: &str) -> Vec<String> {
    match parse_profile("x.toml", &format!("{HEAD}{rest}")) {
        Ok(p) => panic!("expected errors, parsed {p:?}"),
        Err(e) => e.lines(),
    }
}

fn error(rest: &str) -> String {
    let lines = errors(rest);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    lines.into_iter().next().unwrap()
}

fn ok(rest: &str) -> Profile {
    parse_profile("x.toml", &format!("{HEAD}{rest}")).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")))
}

#[test]
fn the_documented_example_parses() {
    let text = r#"
# leading comment
name = "flaky-network"
description = "d"
seed = 42
key_ttl = "2s"

[latency]
distribution = "lognormal"
median = "40ms"
sigma = 0.5
cap = "2s"

[[rules]]
kind = "drop_response"
probability = 0.05
when = "after_commit"
first_attempts = 2
[rules.match]
method = "post"
path = "/v1/payment_intents*"
amount = { min = 100, max = 5000 }
payment_method = "pm_card_visa"
metadata = { tier = "gold" }
[rules.window]
start = "10s"
duration = "30s"
"#;
    let p = parse_profile("x.toml", text).unwrap();
    assert_eq!(p.name, "flaky-network");
    assert_eq!(p.seed, 42);
    assert_eq!(p.key_ttl, Some(Duration::from_secs(2)));
    let latency = p.latency.unwrap();
    assert_eq!(
        latency.distribution,
        Distribution::LogNormal {
            median: Duration::from_millis(40),
            sigma: 0.5
        }
    );
    assert_eq!(latency.cap, Some(Duration::from_secs(2)));
    let rule = &p.rules[0];
    assert_eq!(
        rule.action,
        Action::Fault(Fault::DropResponse {
            when: When::AfterCommit
        })
    );
    assert_eq!(rule.probability, 0.05);
    assert_eq!(rule.first_attempts, Some(2));
    assert_eq!(
        rule.matches,
        Match {
            method: Some("POST".into()),
            path: Some("/v1/payment_intents*".into()),
            amount: Some(AmountRange {
                min: Some(100),
                max: Some(5000)
            }),
            payment_method: Some("pm_card_visa".into()),
            metadata: BTreeMap::from([("tier".to_string(), "gold".to_string())]),
        }
    );
    assert_eq!(
        rule.window,
        Some(Window {
            start: Duration::from_secs(10),
            duration: Some(Duration::from_secs(30))
        })
    );
}

#[test]
fn a_match_implied_by_its_subtables_parses() {
    let p = ok("[[rules]]\nkind = \"reset\"\n[rules.match.metadata]\ntier = \"gold\"\n[rules.match.amount]\nmin = 5\n");
    assert_eq!(
        p.rules[0].matches,
        Match {
            amount: Some(AmountRange {
                min: Some(5),
                max: None
            }),
            metadata: BTreeMap::from([("tier".to_string(), "gold".to_string())]),
            ..Match::default()
        }
    );
    assert_eq!(
        error("[[rules]]\nkind = \"reset\"\n[rules.match.amount]\nmin = -1\n"),
        "x.toml:7: rules[0].match.amount.min: expected a non-negative integer amount, got -1"
    );
}

#[test]
fn defaults_fill_in() {
    let p = ok(
        "[[rules]]\nkind = \"error\"\n[[rules]]\nkind = \"rate_limit\"\n[[rules]]\nkind = \"decline\"\n\
                [[rules]]\nkind = \"reset\"\n[rules.window]\nduration = \"5s\"\n",
    );
    assert!(p.latency.is_none() && p.key_ttl.is_none());
    assert_eq!(p.rules[0].probability, 1.0);
    assert_eq!(
        p.rules[0].action,
        Action::Fault(Fault::Error {
            when: When::BeforeCommit,
            status: 500
        })
    );
    assert_eq!(
        p.rules[1].action,
        Action::Fault(Fault::RateLimit {
            retry_after: Duration::from_secs(1)
        })
    );
    assert_eq!(
        p.rules[2].action,
        Action::Fault(Fault::decline("card_declined", "generic_decline", None))
    );
    assert_eq!(
        p.rules[3].window,
        Some(Window {
            start: Duration::ZERO,
            duration: Some(Duration::from_secs(5))
        })
    );
    assert!(p.rules[3].matches.is_empty());
}

#[test]
fn every_kind_reads_its_own_fields() {
    let p = ok(r#"
[[rules]]
kind = "latency"
when = "after_commit"
distribution = "uniform"
min = "10ms"
max = "20ms"
[[rules]]
kind = "hang"
hang = "5s"
when = "after_commit"
[[rules]]
kind = "error"
status = 504
[[rules]]
kind = "rate_limit"
retry_after = "3s"
[[rules]]
kind = "decline"
code = "expired_card"
decline_code = "expired_card"
message = "Nope."
[[rules]]
kind = "slow_body"
duration = "2s"
[[rules]]
kind = "latency"
distribution = "normal"
mean = "1s"
stddev = "100ms"
[[rules]]
kind = "latency"
distribution = "fixed"
value = "7ms"
"#);
    let ms = Duration::from_millis;
    let kinds: Vec<&Action> = p.rules.iter().map(|r| &r.action).collect();
    assert_eq!(
        kinds[0],
        &Action::Latency {
            when: When::AfterCommit,
            latency: Latency {
                distribution: Distribution::Uniform {
                    min: ms(10),
                    max: ms(20)
                },
                cap: None
            }
        }
    );
    assert_eq!(
        kinds[1],
        &Action::Fault(Fault::Hang {
            when: When::AfterCommit,
            hang: ms(5000)
        })
    );
    assert_eq!(
        kinds[2],
        &Action::Fault(Fault::Error {
            when: When::BeforeCommit,
            status: 504
        })
    );
    assert_eq!(kinds[3], &Action::Fault(Fault::RateLimit { retry_after: ms(3000) }));
    assert_eq!(
        kinds[4],
        &Action::Fault(Fault::decline("expired_card", "expired_card", Some("Nope.")))
    );
    assert_eq!(kinds[5], &Action::Fault(Fault::SlowBody { duration: ms(2000) }));
    let Action::Latency { latency, .. } = kinds[6] else {
        panic!()
    };
    assert_eq!(
        latency.distribution,
        Distribution::Normal {
            mean: ms(1000),
            stddev: ms(100)
        }
    );
    let Action::Latency { latency, .. } = kinds[7] else {
        panic!()
    };
    assert_eq!(latency.distribution, Distribution::Fixed { value: ms(7) });
}

#[test]
fn the_documented_messages() {
    assert_eq!(
        error("\n[[rules]]\nkind = \"drop_response\"\nprobability = 1.5\n"),
        "x.toml:7: rules[0].probability: expected a number between 0 and 1, got 1.5"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"reset\"\n[[rules]]\nkind = \"rate_limit\"\nwhen = \"after_commit\"\n"),
        "x.toml:8: rules[1].when: kind \"rate_limit\" takes no `when` (only latency, drop_response, reset, hang and error do)"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"reset\"\nprobabilty = 0.5\n"),
        "x.toml:6: rules[0].probabilty: unknown field, expected one of kind, probability, when, first_attempts, match, \
         window (did you mean `probability`?)"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"dropp\"\n"),
        "x.toml:5: rules[0].kind: unknown fault kind \"dropp\", expected one of latency, drop_response, reset, hang, \
         error, rate_limit, decline, slow_body"
    );
}

#[test]
fn kind_specific_fields_stay_with_their_kind() {
    assert_eq!(
        error("[[rules]]\nkind = \"error\"\nhang = \"30s\"\n"),
        "x.toml:6: rules[0].hang: not a field of \"error\" rules (hang belongs to hang), expected one of kind, \
         probability, when, first_attempts, match, window, status"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"decline\"\nsigma = 1.0\n"),
        "x.toml:6: rules[0].sigma: not a field of \"decline\" rules (sigma belongs to latency), expected one of kind, \
         probability, first_attempts, match, window, code, decline_code, message"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"hang\"\n"),
        "x.toml:4: rules[0].hang: missing, expected a duration such as \"10s\" (how long to hold the request)"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"slow_body\"\nprobability = 0.5\n"),
        "x.toml:4: rules[0].duration: missing, expected a duration such as \"2s\" (how long the body takes)"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"error\"\nstatus = 501\n"),
        "x.toml:6: rules[0].status: expected one of 500, 502, 503, 504, got 501"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"error\"\nstatus = \"503\"\n"),
        "x.toml:6: rules[0].status: expected one of 500, 502, 503, 504, got string \"503\""
    );
    assert_eq!(
        error("[[rules]]\nkind = \"decline\"\ndecline_code = \"\"\n"),
        "x.toml:6: rules[0].decline_code: expected a non-empty string"
    );
    assert_eq!(error("[[rules]]\nprobability = 1\n"), "x.toml:4: rules[0].kind: missing, expected a fault kind, one of latency, drop_response, reset, hang, error, rate_limit, decline, slow_body");
}

#[test]
fn an_unknown_kind_still_reports_fields_no_kind_takes() {
    let lines = errors("[[rules]]\nkind = \"hangg\"\nhang = \"1s\"\nbogus = 1\n");
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with("x.toml:5: rules[0].kind: unknown fault kind \"hangg\""),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with("(did you mean `hang`?)"), "{}", lines[0]);
    assert!(lines[1].starts_with("x.toml:7: rules[0].bogus: unknown field, expected one of kind, probability"));
}

#[test]
fn durations_must_be_valid_and_not_negative() {
    assert_eq!(
        error("[[rules]]\nkind = \"hang\"\nhang = \"-5s\"\n"),
        "x.toml:6: rules[0].hang: expected a non-negative duration, got \"-5s\""
    );
    assert_eq!(
        error("key_ttl = \"five seconds\"\n"),
        "x.toml:4: key_ttl: expected a duration such as \"250ms\" or \"2s\", got \"five seconds\""
    );
    assert_eq!(
        error("key_ttl = 5\n"),
        "x.toml:4: key_ttl: expected a duration string such as \"250ms\" or \"2s\", got integer 5"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"rate_limit\"\nretry_after = \"-1s\"\n"),
        "x.toml:6: rules[0].retry_after: expected a non-negative duration, got \"-1s\""
    );
    assert_eq!(
        error("key_ttl = \"0s\"\n"),
        "x.toml:4: key_ttl: expected a duration greater than zero, got \"0s\""
    );
}

#[test]
fn durations_and_counts_are_bounded() {
    assert_eq!(
        error("[[rules]]\nkind = \"hang\"\nhang = \"1000000000h\"\n"),
        "x.toml:6: rules[0].hang: expected a duration of at most 10m, got \"1000000000h\""
    );
    assert_eq!(
        error("[[rules]]\nkind = \"rate_limit\"\nretry_after = \"584542046090years\"\n"),
        "x.toml:6: rules[0].retry_after: expected a duration of at most 1h, got \"584542046090years\""
    );
    assert_eq!(
        error("[latency]\ndistribution = \"lognormal\"\nmedian = \"100days\"\nsigma = 1.0\n"),
        "x.toml:6: latency.median: expected a duration of at most 10m, got \"100days\""
    );
    assert_eq!(
        error("[latency]\ndistribution = \"fixed\"\nvalue = \"1s\"\ncap = \"2h\"\n"),
        "x.toml:7: latency.cap: expected a duration of at most 10m, got \"2h\""
    );
    assert_eq!(
        error("[[rules]]\nkind = \"slow_body\"\nduration = \"11m\"\n"),
        "x.toml:6: rules[0].duration: expected a duration of at most 10m, got \"11m\""
    );
    assert_eq!(
        error("key_ttl = \"31days\"\n"),
        "x.toml:4: key_ttl: expected a duration of at most 30days, got \"31days\""
    );
    assert_eq!(
        error("[[rules]]\nkind = \"error\"\nfirst_attempts = 1001\n"),
        "x.toml:6: rules[0].first_attempts: expected a whole number of attempts, from 1 to 1000, got 1001"
    );
    let many = "[[rules]]\nkind = \"error\"\n".repeat(MAX_RULES + 1);
    assert_eq!(error(&many), "x.toml:4: rules: expected at most 256 rules, got 257");
    // At the bounds: accepted.
    ok("key_ttl = \"30days\"\n[[rules]]\nkind = \"hang\"\nhang = \"10m\"\nfirst_attempts = 1000\n");
    // The Fauxpay-Fault header is checked by the same rules.
    assert!(crate::parse_forced("hang; hang=1000000000h")
        .unwrap_err()
        .contains("at most 10m"));
}

#[test]
fn latency_distributions_are_checked() {
    assert_eq!(
        error("[latency]\ndistribution = \"lognormall\"\nmedian = \"1s\"\nsigma = 1\n"),
        "x.toml:5: latency.distribution: unknown distribution \"lognormall\", expected one of fixed, uniform, normal, \
         lognormal (did you mean `lognormal`?)"
    );
    assert_eq!(
        error("[latency]\ndistribution = \"fixed\"\nvalue = \"1s\"\nsigma = 0.5\n"),
        "x.toml:7: latency.sigma: not a field of the \"fixed\" distribution (sigma belongs to lognormal), expected \
         value and optionally cap"
    );
    assert_eq!(
        error("[latency]\ndistribution = \"lognormal\"\nmedian = \"40ms\"\n"),
        "x.toml:4: latency.sigma: missing, expected a number between 0 and 10"
    );
    assert_eq!(
        error("[latency]\ndistribution = \"normal\"\nmean = \"40ms\"\n"),
        "x.toml:4: latency.stddev: missing, expected a duration: the \"normal\" distribution needs mean and stddev"
    );
    assert_eq!(
        error("[latency]\ndistribution = \"uniform\"\nmin = \"40ms\"\nmax = \"10ms\"\n"),
        "x.toml:7: latency.max: expected a duration not less than min (40ms), got 10ms"
    );
    assert_eq!(
        error("[latency]\ndistribution = \"lognormal\"\nmedian = \"40ms\"\nsigma = 11\n"),
        "x.toml:7: latency.sigma: expected a number between 0 and 10, got 11"
    );
    assert_eq!(
        error("[latency]\ndistribution = \"fixed\"\nvalue = \"1s\"\ncap = \"0s\"\n"),
        "x.toml:7: latency.cap: expected a duration greater than zero, got \"0s\""
    );
    assert_eq!(
        error("[latency]\ndistribution = \"fixed\"\nvalue = \"1s\"\nkind = \"latency\"\n"),
        "x.toml:7: latency.kind: unknown field, expected one of distribution, value, min, max, mean, stddev, median, \
         sigma, cap"
    );
    assert_eq!(
        error("[latency]\nvalue = \"1s\"\n"),
        "x.toml:4: latency.distribution: missing, expected a distribution, one of fixed, uniform, normal, lognormal"
    );
    assert_eq!(
        error("[[rules]]\nkind = \"latency\"\ndistribution = \"fixed\"\nvalue = \"1s\"\nhang = \"1s\"\n"),
        "x.toml:8: rules[0].hang: not a field of \"latency\" rules (hang belongs to hang), expected one of kind, \
         probability, when, first_attempts, match, window, distribution, value, min, max, mean, stddev, median, sigma, cap"
    );
}

#[test]
fn matches_and_windows_are_checked() {
    let rule = "[[rules]]\nkind = \"reset\"\n";
    assert_eq!(
        error(&format!("{rule}[rules.match]\nmethod = \"PSOT\"\n")),
        "x.toml:7: rules[0].match.method: expected an HTTP method, one of GET, POST, PUT, PATCH, DELETE, HEAD, \
         OPTIONS, got \"PSOT\""
    );
    assert_eq!(
        error(&format!("{rule}[rules.match]\npath = \"v1/*\"\n")),
        "x.toml:7: rules[0].match.path: expected a path starting with '/', ending in '*' to match a prefix, got \"v1/*\""
    );
    assert_eq!(
        error(&format!("{rule}[rules.match]\npath = \"/v1/*/x\"\n")),
        "x.toml:7: rules[0].match.path: expected a path starting with '/', ending in '*' to match a prefix, got \"/v1/*/x\""
    );
    assert_eq!(
        error(&format!("{rule}[rules.match]\namount = {{ min = 10, max = 5 }}\n")),
        "x.toml:7: rules[0].match.amount.max: expected an amount not less than min (10), got 5"
    );
    assert_eq!(
        error(&format!("{rule}[rules.match]\namount = {{ min = -1 }}\n")),
        "x.toml:7: rules[0].match.amount.min: expected a non-negative integer amount, got -1"
    );
    assert_eq!(
        error(&format!("{rule}[rules.match]\nmetadata = {{ tier = 3 }}\n")),
        "x.toml:7: rules[0].match.metadata.tier: expected a string, got integer 3"
    );
    assert_eq!(
        error(&format!("{rule}[rules.match]\nmethods = \"POST\"\n")),
        "x.toml:7: rules[0].match.methods: unknown field, expected one of method, path, amount, payment_method, \
         metadata (did you mean `method`?)"
    );
    assert_eq!(
        error(&format!("{rule}[rules.window]\nstart = \"1s\"\nend = \"2s\"\n")),
        "x.toml:8: rules[0].window.end: unknown field, expected one of start, duration"
    );
    assert_eq!(
        error(&format!("{rule}window = {{ duration = \"0s\" }}\n")),
        "x.toml:6: rules[0].window.duration: expected a duration greater than zero, got \"0s\""
    );
    assert_eq!(
        error(&format!("{rule}first_attempts = 0\n")),
        "x.toml:6: rules[0].first_attempts: expected a whole number of attempts, from 1 to 1000, got 0"
    );
    let p = ok(&format!("{rule}[rules.match]\namount = 250\n"));
    assert_eq!(
        p.rules[0].matches.amount,
        Some(AmountRange {
            min: Some(250),
            max: Some(250)
        })
    );
}

#[test]
fn the_top_level_is_checked() {
    let lines = parse_profile("x.toml", "# nothing\nnmae = \"x\"\n")
        .unwrap_err()
        .lines();
    assert_eq!(
        lines,
        [
            "x.toml:1: name: missing, expected a string",
            "x.toml:1: description: missing, expected a string",
            "x.toml:1: seed: missing, expected a non-negative integer",
            "x.toml:2: nmae: unknown field, expected one of name, description, seed, key_ttl, latency, rules, webhooks (did you \
             mean `name`?)",
        ]
    );
    assert_eq!(
        error("[rules]\nkind = \"reset\"\n"),
        "x.toml:4: rules: expected an array of tables ([[rules]]), got a table"
    );
    assert_eq!(
        error("latency = 5\n"),
        "x.toml:4: latency: expected a table, got integer 5"
    );
    let e = parse_profile("x.toml", "name = \"x\"\ndescription = 1\nseed = 1.5\n").unwrap_err();
    assert_eq!(
        e.lines(),
        [
            "x.toml:2: description: expected a string, got integer 1",
            "x.toml:3: seed: expected a non-negative integer, got number 1.5"
        ]
    );
}

#[test]
fn all_errors_are_collected_in_line_order_and_display_shows_the_first() {
    let text = format!(
        "{HEAD}[[rules]]\nkind = \"reset\"\nprobability = 2\n\n[[rules]]\nkind = \"nope\"\n\n[latency]\n\
         distribution = \"fixed\"\nvalue = \"-1s\"\n"
    );
    let e = parse_profile("p.toml", &text).unwrap_err();
    let lines = e.lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines[0].starts_with("p.toml:6: rules[0].probability: "));
    assert!(lines[1].starts_with("p.toml:9: rules[1].kind: unknown fault kind \"nope\""));
    assert!(lines[2].starts_with("p.toml:13: latency.value: expected a non-negative duration"));
    assert_eq!(e.to_string(), lines[0]);
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn syntax_errors_have_a_line() {
    let e = parse_profile("x.toml", "name = \"x\"\nseed = \n").unwrap_err();
    let line = e.to_string();
    assert!(line.starts_with("x.toml:2: invalid TOML: "), "{line}");
    assert_eq!(e.diagnostics().len(), 1);
    let e = parse_profile("x.toml", "name = \"x\"\n[[rules]]\nkind = \"reset\"\nkind = \"hang\"\n").unwrap_err();
    assert!(e.to_string().starts_with("x.toml:4: invalid TOML: "), "{e}");
}

#[test]
fn json_profiles_use_the_same_schema() {
    let json = r#"{"name": "j", "description": "d", "seed": 3,
        "rules": [{"kind": "error", "status": 503, "when": "after_commit", "match": {"method": "POST"}}]}"#;
    let p = parse_profile_json("body", json).unwrap();
    assert_eq!(
        p.rules[0].action,
        Action::Fault(Fault::Error {
            when: When::AfterCommit,
            status: 503
        })
    );
    assert_eq!(parse_profile_text("body", json).unwrap(), p);
    let bad = r#"{"name": "j", "description": "d", "seed": 3, "rules": [{"kind": "reset", "probability": 7}]}"#;
    assert_eq!(
        parse_profile_json("body", bad).unwrap_err().to_string(),
        "body: rules[0].probability: expected a number between 0 and 1, got 7"
    );
    assert_eq!(
        parse_profile_json("body", "[1]").unwrap_err().to_string(),
        "body: expected a table, got an array"
    );
    assert!(parse_profile_json("body", "{")
        .unwrap_err()
        .to_string()
        .starts_with("body:1: invalid JSON: "));
    assert_eq!(parse_profile_text("t", HEAD).unwrap().name, "x");
}
