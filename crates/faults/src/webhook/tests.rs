use std::time::Duration;

use crate::{
    parse_profile, parse_profile_text, DeliveryDecision, DeliveryFacts, DeliveryFault, FaultEngine, Forgery, Profile,
};

const PROFILE: &str = r#"name = "w"
description = "webhook faults"
seed = 7

[[webhooks]]
kind = "duplicate"
copies = 3
gap = "50ms"
[webhooks.match]
event = "payment_intent.succeeded"

[[webhooks]]
kind = "delay"
probability = 0.5
distribution = "fixed"
value = "200ms"

[[webhooks]]
kind = "lose_ack"
probability = 0.3
first_attempts = 1
[webhooks.match]
event = "charge.*"

[[webhooks]]
kind = "bad_signature"
how = "stale_timestamp"
retry = false
"#;

fn facts<'a>(event_id: &'a str, event_type: &'a str, attempt: u32) -> DeliveryFacts<'a> {
    DeliveryFacts {
        event_id,
        event_type,
        endpoint: "we_1",
        attempt,
    }
}

#[test]
fn parses_every_kind_and_round_trips_through_json_and_toml() {
    let p = parse_profile("w.toml", PROFILE).unwrap();
    assert_eq!(p.webhooks.len(), 4);
    assert_eq!(
        p.webhooks[0].fault,
        DeliveryFault::Duplicate {
            copies: 3,
            gap: Duration::from_millis(50)
        }
    );
    assert_eq!(p.webhooks[0].event.as_deref(), Some("payment_intent.succeeded"));
    assert_eq!(p.webhooks[2].first_attempts, Some(1));
    assert_eq!(
        p.webhooks[3].fault,
        DeliveryFault::BadSignature {
            how: Forgery::StaleTimestamp,
            retry: false
        }
    );
    assert_eq!(parse_profile_text("j", &p.to_json()).unwrap(), p);
    assert_eq!(parse_profile("t", &p.to_toml().unwrap()).unwrap(), p);
}

#[test]
fn mistakes_are_one_line_each_with_the_line_number() {
    let text = "name = \"x\"\ndescription = \"\"\nseed = 1\n\n[[webhooks]]\nkind = \"duplicat\"\n\n[[webhooks]]\nkind = \"duplicate\"\ncopies = 1\nstatus = 500\n\n[[webhooks]]\nkind = \"bad_signature\"\nhow = \"forged\"\n[webhooks.match]\nevent = \"payment_*\"\n";
    let e = parse_profile("p.toml", text).unwrap_err().lines().join("\n");
    for needle in [
        "p.toml:6: webhooks[0].kind: unknown delivery fault kind \"duplicat\"",
        "did you mean `duplicate`?",
        "p.toml:10: webhooks[1].copies",
        "p.toml:11: webhooks[1].status",
        "p.toml:15: webhooks[2].how: expected wrong_secret or stale_timestamp",
        "p.toml:17: webhooks[2].match.event",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
}

#[test]
fn decisions_are_pure_functions_of_seed_event_endpoint_and_attempt() {
    let engine = FaultEngine::new(parse_profile("w.toml", PROFILE).unwrap());
    let ids: Vec<String> = (0..200).map(|i| format!("evt_{i}")).collect();
    let run = |attempt: u32| -> Vec<DeliveryDecision> {
        ids.iter()
            .map(|id| engine.decide_delivery(&facts(id, "charge.succeeded", attempt)))
            .collect()
    };
    let first = run(1);
    assert_eq!(first, run(1), "same inputs, same decisions");
    let lost = first
        .iter()
        .filter(|d| matches!(d.fault, Some((DeliveryFault::LoseAck, 2))))
        .count();
    assert!((30..=90).contains(&lost), "about 30% lose their ack: {lost}");
    assert!(first.iter().any(|d| d.delay == Duration::from_millis(200)));
    assert!(first.iter().any(|d| d.delay.is_zero()));
    // After the first attempt, lose_ack no longer applies: the next rule (bad_signature) acts.
    assert!(run(2)
        .iter()
        .all(|d| matches!(d.fault, Some((DeliveryFault::BadSignature { .. }, 3)))));
    let pi = engine.decide_delivery(&facts("evt_x", "payment_intent.succeeded", 1));
    assert!(matches!(
        pi.fault,
        Some((DeliveryFault::Duplicate { copies: 3, .. }, 0))
    ));
    assert!(pi
        .label()
        .unwrap()
        .starts_with("duplicate ×3 gap 50ms (webhook rule 0)"));
    let other = FaultEngine::new(Profile {
        seed: 8,
        ..engine.profile().clone()
    });
    let reseeded: Vec<_> = ids
        .iter()
        .map(|id| other.decide_delivery(&facts(id, "charge.succeeded", 1)))
        .collect();
    assert_ne!(first, reseeded, "another seed, other rolls");
}
