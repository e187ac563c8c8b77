use super::*;
use crate::{bundled, parse_forced, parse_profile, parse_profile_text, Decision, Forgery, WebhookRule};

/// The TOML parser's profile for a `[[rules]]`/`[latency]` text under the builder's
/// defaults (`name = "x"`, empty description, seed 0).
fn parsed(rest: &str) -> Profile {
    let text = format!("name = \"x\"\ndescription = \"\"\nseed = 0\n{rest}");
    parse_profile("x.toml", &text).unwrap_or_else(|e| panic!("{}", e.lines().join("\n")))
}

fn built(b: ProfileBuilder) -> Profile {
    b.build().unwrap_or_else(|e| panic!("{}", e.lines().join("\n")))
}

fn x() -> ProfileBuilder {
    Profile::builder("x")
}

#[test]
fn every_kind_builds_what_its_toml_parses() {
    let cases: Vec<(RuleBuilder<Timed>, &str)> = vec![
        (
            Rule::latency(Distribution::uniform(ms(10), ms(20)).cap(ms(15))).after_commit(),
            "kind = \"latency\"\nwhen = \"after_commit\"\ndistribution = \"uniform\"\nmin = \"10ms\"\nmax = \"20ms\"\ncap = \"15ms\"",
        ),
        (
            Rule::latency(Distribution::fixed(ms(50))),
            "kind = \"latency\"\ndistribution = \"fixed\"\nvalue = \"50ms\"",
        ),
        (Rule::drop_response(), "kind = \"drop_response\""),
        (
            Rule::drop_response().after_commit(),
            "kind = \"drop_response\"\nwhen = \"after_commit\"",
        ),
        (
            Rule::reset().after_commit().before_commit(),
            "kind = \"reset\"\nwhen = \"before_commit\"",
        ),
        (
            Rule::hang(secs(5)).when(When::AfterCommit),
            "kind = \"hang\"\nhang = \"5s\"\nwhen = \"after_commit\"",
        ),
        (Rule::error(500), "kind = \"error\""),
        (
            Rule::error(503).after_commit(),
            "kind = \"error\"\nstatus = 503\nwhen = \"after_commit\"",
        ),
    ];
    for (rule, toml) in cases {
        assert_eq!(built(x().rule(rule)), parsed(&format!("[[rules]]\n{toml}\n")), "{toml}");
    }
    let untimed: Vec<(RuleBuilder<Untimed>, &str)> = vec![
        (Rule::rate_limit(secs(1)), "kind = \"rate_limit\""),
        (
            Rule::rate_limit(ms(2500)),
            "kind = \"rate_limit\"\nretry_after = \"2.5s\"",
        ),
        (Rule::decline("generic_decline"), "kind = \"decline\""),
        (
            Rule::decline("insufficient_funds"),
            "kind = \"decline\"\ndecline_code = \"insufficient_funds\"",
        ),
        (
            Rule::fault(Fault::decline("expired_card", "expired_card", Some("Nope."))),
            "kind = \"decline\"\ncode = \"expired_card\"\ndecline_code = \"expired_card\"\nmessage = \"Nope.\"",
        ),
        (Rule::slow_body(ms(1500)), "kind = \"slow_body\"\nduration = \"1500ms\""),
        (
            Rule::fault(Fault::hang(When::AfterCommit, secs(3))),
            "kind = \"hang\"\nhang = \"3s\"\nwhen = \"after_commit\"",
        ),
    ];
    for (rule, toml) in untimed {
        assert_eq!(built(x().rule(rule)), parsed(&format!("[[rules]]\n{toml}\n")), "{toml}");
    }
}

#[test]
fn every_option_and_matcher_builds_what_its_toml_parses() {
    let b = Profile::builder("x")
        .description("all of it")
        .seed(42)
        .key_ttl(secs(5))
        .latency(Distribution::lognormal(ms(40), 0.5).cap(secs(1)))
        .rule(
            Rule::drop_response()
                .after_commit()
                .probability(0.05)
                .first_attempts(2)
                .method("post")
                .path("/v1/payment_intents*")
                .amount(100..=5000)
                .payment_method("pm_card_visa")
                .metadata("tier", "gold")
                .metadata("region", "eu")
                .window(secs(10), secs(30)),
        )
        .rule(Rule::rate_limit(secs(2)).amount(100_000..).window_from(ms(1500)))
        .rule(Rule::latency(Distribution::normal(secs(1), ms(100))).amount(..=500))
        .rule(Rule::reset().amount(2000..=2000).probability(0.0))
        .rule(Rule::error(502).amount(10..20).method("GET"));
    let toml = r#"
name = "x"
description = "all of it"
seed = 42
key_ttl = "5s"

[latency]
distribution = "lognormal"
median = "40ms"
sigma = 0.5
cap = "1s"

[[rules]]
kind = "drop_response"
probability = 0.05
when = "after_commit"
first_attempts = 2
[rules.match]
method = "POST"
path = "/v1/payment_intents*"
amount = { min = 100, max = 5000 }
payment_method = "pm_card_visa"
metadata = { tier = "gold", region = "eu" }
[rules.window]
start = "10s"
duration = "30s"

[[rules]]
kind = "rate_limit"
retry_after = "2s"
[rules.match]
amount = { min = 100000 }
[rules.window]
start = "1500ms"

[[rules]]
kind = "latency"
distribution = "normal"
mean = "1s"
stddev = "100ms"
[rules.match]
amount = { max = 500 }

[[rules]]
kind = "reset"
probability = 0
[rules.match]
amount = 2000

[[rules]]
kind = "error"
status = 502
[rules.match]
method = "GET"
amount = { min = 10, max = 19 }
"#;
    assert_eq!(built(b), parse_profile("x.toml", toml).unwrap());
}

#[test]
fn the_bundled_profiles_rebuild_equal_to_their_files() {
    let payment_intents = |r: RuleBuilder<Timed>| r.method("POST").path("/v1/payment_intents*");
    let default_latency = Distribution::lognormal(ms(40), 0.4).cap(ms(500));
    let rebuilt = [
        Profile::builder("happy")
            .description("A healthy provider: no added latency, no faults (the baseline).")
            .seed(1),
        Profile::builder("flaky-network")
            .description("Lognormal latency and ~5% of requests dropped or reset, before and after the commit.")
            .seed(42)
            .latency(Distribution::lognormal(ms(40), 0.5).cap(secs(1)))
            .rule(Rule::drop_response().before_commit().probability(0.015))
            .rule(Rule::drop_response().after_commit().probability(0.015))
            .rule(Rule::reset().before_commit().probability(0.01))
            .rule(Rule::reset().after_commit().probability(0.01)),
        Profile::builder("lost-responses")
            .description("20% of POST /v1/payment_intents* succeed, then lose their response (dropped after the commit).")
            .seed(7)
            .latency(default_latency.clone())
            .rule(payment_intents(Rule::drop_response().after_commit().probability(0.2))),
        Profile::builder("slow-provider")
            .description("Heavy-tailed latency (median 300ms, capped at 8s), slow after-commit answers and a few 10s hangs.")
            .seed(1337)
            .latency(Distribution::lognormal(ms(300), 0.8).cap(secs(8)))
            .rule(Rule::latency(Distribution::uniform(ms(500), secs(3))).after_commit().probability(0.2))
            .rule(payment_intents(Rule::hang(secs(10)).after_commit().probability(0.03))),
        Profile::builder("ambiguous-errors")
            .description("5xx after the commit (500/502/504, 15% in all) mixed with honest 503s before it (5%).")
            .seed(500)
            .latency(default_latency.clone())
            .rule(payment_intents(Rule::error(500).after_commit().probability(0.08)))
            .rule(payment_intents(Rule::error(502).after_commit().probability(0.04)))
            .rule(payment_intents(Rule::error(504).after_commit().probability(0.03)))
            .rule(Rule::error(503).before_commit().probability(0.05)),
        Profile::builder("outage-window")
            .description("From 10s to 30s after activation: 80% 503s before the commit and 10% drops after it.")
            .seed(2024)
            .latency(default_latency.clone())
            .rule(Rule::error(503).probability(0.8).window(secs(10), secs(20)))
            .rule(payment_intents(
                Rule::drop_response()
                    .after_commit()
                    .probability(0.1)
                    .window(secs(10), secs(20)),
            )),
        Profile::builder("rate-limited")
            .description("25% of requests get 429 Retry-After: 1s; 10% of payments are throttled on their first 2 attempts.")
            .seed(429)
            .latency(Distribution::lognormal(ms(30), 0.3).cap(ms(300)))
            .rule(
                Rule::rate_limit(secs(2))
                    .probability(0.1)
                    .first_attempts(2)
                    .method("POST")
                    .path("/v1/payment_intents*"),
            )
            .rule(Rule::rate_limit(secs(1)).probability(0.25)),
        Profile::builder("declines")
            .description("About 10% of payments declined (insufficient funds, do not honor, expired), half of those over 1000.00.")
            .seed(402)
            .latency(Distribution::lognormal(ms(50), 0.4).cap(ms(500)))
            .rule(Rule::decline("insufficient_funds").probability(0.5).method("POST").amount(100_000..))
            .rule(Rule::decline("insufficient_funds").probability(0.05).method("POST"))
            .rule(Rule::decline("do_not_honor").probability(0.03).method("POST"))
            .rule(
                Rule::fault(Fault::decline("expired_card", "expired_card", None))
                    .probability(0.02)
                    .method("POST"),
            ),
        Profile::builder("key-expiry")
            .description("Idempotency keys expire after 5s; 10% of charges lose their answer and 15% hang 8s after the commit.")
            .seed(86400)
            .key_ttl(secs(5))
            .latency(default_latency)
            .rule(payment_intents(Rule::hang(secs(8)).after_commit().probability(0.15)))
            .rule(payment_intents(Rule::drop_response().after_commit().probability(0.1))),
        Profile::builder("chaos")
            .description("All fault kinds at moderate rates, a 10s outage at 20s, and fail-first-attempt payments.")
            .seed(666)
            .latency(Distribution::lognormal(ms(50), 0.7).cap(secs(3)))
            .rule(Rule::error(503).before_commit().probability(0.7).window(secs(20), secs(10)))
            .rule(payment_intents(Rule::reset().before_commit().probability(0.05).first_attempts(1)))
            .rule(
                Rule::latency(Distribution::normal(ms(800), ms(300)).cap(secs(2)))
                    .after_commit()
                    .probability(0.1),
            )
            .rule(Rule::drop_response().before_commit().probability(0.03))
            .rule(payment_intents(Rule::drop_response().after_commit().probability(0.05)))
            .rule(Rule::reset().after_commit().probability(0.02))
            .rule(Rule::hang(secs(5)).after_commit().probability(0.02))
            .rule(Rule::error(500).after_commit().probability(0.04))
            .rule(Rule::error(502).before_commit().probability(0.02))
            .rule(Rule::rate_limit(secs(1)).probability(0.05))
            .rule(
                Rule::decline("insufficient_funds")
                    .probability(0.03)
                    .method("POST")
                    .path("/v1/payment_intents*"),
            )
            .rule(Rule::slow_body(ms(1500)).probability(0.03))
            .webhook(WebhookRule::delay(Distribution::uniform(ms(100), secs(1))).probability(0.1))
            .webhook(WebhookRule::duplicate(2).probability(0.05))
            .webhook(WebhookRule::lose_ack().probability(0.03).first_attempts(1))
            .webhook(WebhookRule::drop_delivery().probability(0.03).first_attempts(1))
            .webhook(
                WebhookRule::bad_signature(Forgery::WrongSecret)
                    .probability(0.02)
                    .first_attempts(1),
            ),
        Profile::builder("duplicate-webhooks")
            .description("Every payment_intent.succeeded delivered twice at once, 30% of events delayed 0.5-2s, 20% of first deliveries' acks lost.")
            .seed(1212)
            .webhook(WebhookRule::delay(Distribution::uniform(ms(500), secs(2))).probability(0.3))
            .webhook(WebhookRule::lose_ack().probability(0.2).first_attempts(1))
            .webhook(WebhookRule::duplicate(2).event("payment_intent.succeeded")),
    ];
    assert_eq!(rebuilt.len(), bundled::BUNDLED.len(), "one per bundled profile");
    for builder in rebuilt {
        let profile = built(builder);
        let from_file = bundled::load(&profile.name).unwrap();
        assert_eq!(profile, from_file, "{}", profile.name);
    }
}

#[test]
fn text_round_trips_through_the_parser() {
    let mut profiles = bundled::all().unwrap();
    profiles.push(built(
        x().seed(u64::try_from(i64::MAX).unwrap())
            .rule(Rule::fault(Fault::decline(
                "card_declined",
                "generic_decline",
                Some("No, thanks."),
            )))
            .rule(Rule::latency(Distribution::fixed(Duration::new(1, 2))).metadata("a b", "c\"d")),
    ));
    for p in profiles {
        let json = p.to_json();
        assert!(json.starts_with('{'), "{json}");
        assert_eq!(parse_profile_text("json", &json).unwrap(), p, "{json}");
        let toml = p.to_toml().unwrap();
        assert_eq!(parse_profile_text("toml", &toml).unwrap(), p, "{toml}");
    }
}

/// The builder's mistakes against the same mistakes written in TOML: the same field and
/// message, only the source (and the line TOML has) differ.
#[test]
#[allow(clippy::reversed_empty_ranges)] // an empty amount range is one of the mistakes
fn build_reports_what_the_parser_reports() {
    let cases: Vec<(ProfileBuilder, &str)> = vec![
        (
            x().rule(Rule::drop_response().probability(1.5)),
            "[[rules]]\nkind = \"drop_response\"\nprobability = 1.5\n",
        ),
        (
            x().rule(Rule::error(418).after_commit()),
            "[[rules]]\nkind = \"error\"\nstatus = 418\nwhen = \"after_commit\"\n",
        ),
        (x().rule(Rule::hang(Duration::ZERO)), "[[rules]]\nkind = \"hang\"\nhang = \"0s\"\n"),
        (
            x().rule(Rule::slow_body(Duration::ZERO)),
            "[[rules]]\nkind = \"slow_body\"\nduration = \"0s\"\n",
        ),
        (
            x().latency(Distribution::uniform(ms(20), ms(10))),
            "[latency]\ndistribution = \"uniform\"\nmin = \"20ms\"\nmax = \"10ms\"\n",
        ),
        (
            x().latency(Distribution::lognormal(ms(20), 11.0).cap(Duration::ZERO)),
            "[latency]\ndistribution = \"lognormal\"\nmedian = \"20ms\"\nsigma = 11.0\ncap = \"0s\"\n",
        ),
        (
            x().rule(Rule::reset().method("FETCH").path("v1/*x").payment_method(" ").amount(10..=5)),
            "[[rules]]\nkind = \"reset\"\n[rules.match]\nmethod = \"FETCH\"\npath = \"v1/*x\"\npayment_method = \" \"\namount = { min = 10, max = 5 }\n",
        ),
        (
            x().rule(Rule::rate_limit(secs(1)).first_attempts(0).window(secs(1), Duration::ZERO)),
            "[[rules]]\nkind = \"rate_limit\"\nretry_after = \"1s\"\nfirst_attempts = 0\n[rules.window]\nstart = \"1s\"\nduration = \"0s\"\n",
        ),
        (
            x().rule(Rule::fault(Fault::decline("", "x", Some("m")))),
            "[[rules]]\nkind = \"decline\"\ncode = \"\"\ndecline_code = \"x\"\nmessage = \"m\"\n",
        ),
        (x().key_ttl(Duration::ZERO), "key_ttl = \"0s\"\n"),
    ];
    for (builder, toml) in cases {
        let from_builder = builder.build().unwrap_err();
        let text = format!("name = \"x\"\ndescription = \"\"\nseed = 0\n{toml}");
        let from_toml = parse_profile("x.toml", &text).unwrap_err();
        let said = |e: &ProfileError| -> Vec<(String, String)> {
            let mut d: Vec<_> = e
                .diagnostics()
                .iter()
                .map(|d| (d.field.clone(), d.message.clone()))
                .collect();
            d.sort();
            d
        };
        assert_eq!(said(&from_builder), said(&from_toml), "{toml}");
        assert!(from_builder
            .diagnostics()
            .iter()
            .all(|d| d.source == "Profile::builder(\"x\")" && d.line.is_none()));
    }
    let e = Profile::builder(" ").build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "Profile::builder(\" \"): name: expected a non-empty string"
    );
    let e = x().rule(Rule::drop_response().probability(1.5)).build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "Profile::builder(\"x\"): rules[0].probability: expected a number between 0 and 1, got 1.5"
    );
}

#[test]
fn amount_ranges_take_any_range_syntax() {
    let amount = |r: RuleBuilder<Timed>| r.rule.matches.amount.unwrap();
    let range = |min, max| AmountRange { min, max };
    assert_eq!(amount(Rule::reset().amount(..)), range(None, None));
    assert_eq!(amount(Rule::reset().amount(5..)), range(Some(5), None));
    assert_eq!(amount(Rule::reset().amount(..5)), range(None, Some(4)));
    assert_eq!(amount(Rule::reset().amount(..=5)), range(None, Some(5)));
    assert_eq!(amount(Rule::reset().amount(3..5)), range(Some(3), Some(4)));
    assert_eq!(amount(Rule::reset().amount(7..=7)), range(Some(7), Some(7)));
    assert!(x().rule(Rule::reset().amount(..0)).build().is_err(), "an empty range");
}

fn forced(fault: Option<Fault>, before: Duration, after: Duration) -> Decision {
    Decision {
        latency_before: before,
        latency_after: after,
        fault,
        rule: None,
    }
}

#[test]
fn header_values_round_trip_through_parse_forced() {
    let faults = [
        Fault::drop_response(When::AfterCommit),
        Fault::drop_response(When::BeforeCommit),
        Fault::reset(When::AfterCommit),
        Fault::hang(When::BeforeCommit, ms(1500)),
        Fault::error(When::AfterCommit, 503),
        Fault::rate_limit(secs(2)),
        Fault::decline("card_declined", "insufficient_funds", None),
        Fault::decline("expired_card", "expired_card", Some("Too old.")),
        Fault::slow_body(ms(600)),
    ];
    for fault in faults {
        let header = fault.header_value();
        let decision = parse_forced(&header).unwrap_or_else(|e| panic!("{header}: {e}"));
        assert_eq!(
            decision,
            forced(Some(fault.clone()), Duration::ZERO, Duration::ZERO),
            "{header}"
        );
        assert_eq!(ForcedFault::from(fault).header_value(), header);
    }
    let header = ForcedFault::new()
        .latency(ms(100), When::BeforeCommit)
        .latency(ms(50), When::BeforeCommit)
        .latency(ms(200), When::AfterCommit)
        .fault(Fault::reset(When::BeforeCommit));
    assert_eq!(
        parse_forced(&header.header_value()).unwrap(),
        forced(Some(Fault::reset(When::BeforeCommit)), ms(150), ms(200))
    );
    let latency_only = ForcedFault::new().latency(ms(400), When::BeforeCommit).header_value();
    assert_eq!(latency_only, "latency; value=400ms; when=before_commit");
    assert_eq!(
        parse_forced(&latency_only).unwrap(),
        forced(None, ms(400), Duration::ZERO)
    );
}

#[test]
fn header_values_read_as_the_documented_grammar() {
    assert_eq!(
        Fault::drop_response(When::AfterCommit).header_value(),
        "drop_response; when=after_commit"
    );
    assert_eq!(
        Fault::hang(When::AfterCommit, secs(3)).header_value(),
        "hang; hang=3s; when=after_commit"
    );
    assert_eq!(Fault::rate_limit(secs(2)).header_value(), "rate_limit; retry_after=2s");
    assert_eq!(
        Fault::decline("card_declined", "insufficient_funds", None).header_value(),
        "decline; code=card_declined; decline_code=insufficient_funds",
        "Stripe's default message is left out"
    );
    assert_eq!(
        Fault::decline("card_declined", "x", Some("No.")).header_value(),
        "decline; code=card_declined; decline_code=x; message=No."
    );
    assert_eq!(Fault::slow_body(ms(600)).header_value(), "slow_body; duration=600ms");
    assert!(
        parse_forced(&ForcedFault::new().header_value()).is_err(),
        "nothing forced"
    );
    assert!(
        parse_forced(&Fault::error(When::BeforeCommit, 418).header_value()).is_err(),
        "an invalid fault is written as given, for the provider to refuse"
    );
}

#[test]
fn webhook_rules_are_checked_by_the_parser() {
    let e = x().webhook(WebhookRule::duplicate(1)).build().unwrap_err();
    assert!(e.to_string().contains("webhooks[0].copies"), "{e}");
    let e = x()
        .webhook(WebhookRule::lose_ack().event("payment_*"))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("webhooks[0].match.event"), "{e}");
    let p = built(
        x().webhook(
            WebhookRule::bad_signature(Forgery::StaleTimestamp)
                .no_retry()
                .probability(0.5),
        ),
    );
    assert_eq!(
        p.webhooks[0].fault,
        crate::DeliveryFault::BadSignature {
            how: Forgery::StaleTimestamp,
            retry: false
        }
    );
}
