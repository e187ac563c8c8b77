use std::sync::Arc;

use super::*;
use crate::parse_profile;

const HEAD: &str = "name = \"t\"\ndescription = \"d\"\nseed = 9\n";

fn engine(rest: &str) -> FaultEngine {
    FaultEngine::new(parse_profile("t.toml", &format!("{HEAD}{rest}")).unwrap())
}

fn empty() -> &'static BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    &EMPTY
}

fn facts(identity: &str) -> RequestFacts<'_> {
    RequestFacts {
        identity,
        attempt: 1,
        method: "POST",
        path: "/v1/payment_intents",
        amount: Some(1000),
        payment_method: Some("pm_card_visa"),
        metadata: empty(),
        since_active: Duration::from_secs(1),
    }
}

fn fires(e: &FaultEngine, f: &RequestFacts) -> bool {
    e.decide(f).fault.is_some()
}

fn frequency(e: &FaultEngine, n: usize) -> f64 {
    let hits = (0..n).filter(|i| fires(e, &facts(&format!("key_{i}")))).count();
    hits as f64 / n as f64
}

const CHAOS: &str = r#"
[latency]
distribution = "lognormal"
median = "40ms"
sigma = 0.5
[[rules]]
kind = "latency"
probability = 0.5
when = "after_commit"
distribution = "uniform"
min = "1ms"
max = "100ms"
[[rules]]
kind = "drop_response"
probability = 0.2
when = "after_commit"
[[rules]]
kind = "error"
probability = 0.2
status = 503
"#;

#[test]
fn the_same_inputs_give_the_same_decision() {
    let e = engine(CHAOS);
    for i in 0..200 {
        let id = format!("key_{i}");
        assert_eq!(e.decide(&facts(&id)), e.decide(&facts(&id)));
        assert_eq!(
            e.decide(&facts(&id)),
            engine(CHAOS).decide(&facts(&id)),
            "a fresh engine agrees"
        );
    }
}

#[test]
fn order_and_threads_do_not_matter() {
    let e = Arc::new(engine(CHAOS));
    let ids: Vec<String> = (0..10_000).map(|i| format!("idem_{i}")).collect();
    let forward: Vec<Decision> = ids.iter().map(|id| e.decide(&facts(id))).collect();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (e, ids) = (Arc::clone(&e), ids.clone());
            std::thread::spawn(move || {
                // Each thread walks its own interleaving, backwards.
                let mut out: Vec<(usize, Decision)> = (0..ids.len())
                    .rev()
                    .filter(|i| i % 4 == t)
                    .map(|i| (i, e.decide(&facts(&ids[i]))))
                    .collect();
                out.reverse();
                out
            })
        })
        .collect();
    let mut other: Vec<(usize, Decision)> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    other.sort_by_key(|(i, _)| *i);
    assert_eq!(other.len(), forward.len());
    for (i, d) in other {
        assert_eq!(d, forward[i], "identity {}", ids[i]);
    }
    assert!(forward.iter().any(|d| d.fault.is_some()) && forward.iter().any(|d| d.fault.is_none()));
}

#[test]
fn seeds_identities_and_attempts_change_the_rolls() {
    let a = engine("[[rules]]\nkind = \"reset\"\nprobability = 0.5\n");
    let b = FaultEngine::new(Profile {
        seed: 10,
        ..a.profile().clone()
    });
    let pattern = |e: &FaultEngine, attempt: u32| -> Vec<bool> {
        (0..64)
            .map(|i| {
                fires(
                    e,
                    &RequestFacts {
                        attempt,
                        ..facts(&format!("k{i}"))
                    },
                )
            })
            .collect()
    };
    assert_ne!(pattern(&a, 1), pattern(&b, 1));
    assert_ne!(pattern(&a, 1), pattern(&a, 2));
}

#[test]
fn probability_zero_never_and_one_always_fires() {
    let never = engine("[[rules]]\nkind = \"reset\"\nprobability = 0\n");
    let always = engine("[[rules]]\nkind = \"reset\"\nprobability = 1\n");
    for i in 0..5000 {
        let id = format!("k{i}");
        assert!(!fires(&never, &facts(&id)));
        assert!(fires(&always, &facts(&id)));
    }
}

#[test]
fn observed_frequency_follows_the_probability() {
    let f = frequency(
        &engine("[[rules]]\nkind = \"drop_response\"\nprobability = 0.3\n"),
        20_000,
    );
    assert!((f - 0.3).abs() < 0.02, "{f}");
    // Rules roll independently: two rules of 0.5 fire together 75% of the time.
    let f = frequency(
        &engine("[[rules]]\nkind = \"reset\"\nprobability = 0.5\n[[rules]]\nkind = \"reset\"\nprobability = 0.5\n"),
        20_000,
    );
    assert!((f - 0.75).abs() < 0.02, "{f}");
}

#[test]
fn the_first_firing_fault_rule_wins_and_latency_rules_still_add() {
    let e = engine(
        "[[rules]]\nkind = \"reset\"\nprobability = 0\n[[rules]]\nkind = \"error\"\nstatus = 502\nwhen = \"after_commit\"\n\
         [[rules]]\nkind = \"hang\"\nhang = \"1s\"\n[[rules]]\nkind = \"latency\"\ndistribution = \"fixed\"\nvalue = \"30ms\"\n\
         when = \"after_commit\"\n",
    );
    let d = e.decide(&facts("k"));
    assert_eq!(
        d.fault,
        Some(Fault::Error {
            when: When::AfterCommit,
            status: 502
        })
    );
    assert_eq!(d.rule, Some(1));
    assert_eq!(d.latency_before, Duration::ZERO);
    assert_eq!(d.latency_after, Duration::from_millis(30));
    assert_eq!(
        d.label().unwrap(),
        "error 502 after_commit (rule 1), latency 30ms after_commit"
    );
}

#[test]
fn first_attempts_fail_then_succeed() {
    let e = engine("[[rules]]\nkind = \"error\"\nstatus = 503\nfirst_attempts = 2\n");
    let at = |attempt| {
        fires(
            &e,
            &RequestFacts {
                attempt,
                ..facts("order-1")
            },
        )
    };
    assert_eq!([1, 2, 3, 4].map(at), [true, true, false, false]);
}

#[test]
fn windows_bound_a_rule_in_time() {
    let e = engine("[[rules]]\nkind = \"error\"\n[rules.window]\nstart = \"10s\"\nduration = \"30s\"\n");
    let at = |secs: f64| {
        fires(
            &e,
            &RequestFacts {
                since_active: Duration::from_secs_f64(secs),
                ..facts("k")
            },
        )
    };
    assert_eq!(
        [0.0, 9.999, 10.0, 25.0, 39.999, 40.0, 100.0].map(at),
        [false, false, true, true, true, false, false]
    );
    let open = engine("[[rules]]\nkind = \"error\"\nwindow = { start = \"5s\" }\n");
    assert!(fires(
        &open,
        &RequestFacts {
            since_active: Duration::from_secs(1_000_000),
            ..facts("k")
        }
    ));
    assert!(!fires(
        &open,
        &RequestFacts {
            since_active: Duration::from_secs(4),
            ..facts("k")
        }
    ));
}

#[test]
fn match_fields_all_have_to_match() {
    let e = engine(
        "[[rules]]\nkind = \"reset\"\n[rules.match]\nmethod = \"POST\"\npath = \"/v1/payment_intents*\"\n\
         amount = { min = 100, max = 5000 }\npayment_method = \"pm_card_visa\"\nmetadata = { tier = \"gold\" }\n",
    );
    let gold = BTreeMap::from([
        ("tier".to_string(), "gold".to_string()),
        ("x".to_string(), "y".to_string()),
    ]);
    let silver = BTreeMap::from([("tier".to_string(), "silver".to_string())]);
    let base = RequestFacts {
        metadata: &gold,
        ..facts("k")
    };
    assert!(fires(&e, &base));
    assert!(fires(
        &e,
        &RequestFacts {
            method: "post",
            path: "/v1/payment_intents/pi_1/confirm",
            ..base
        }
    ));
    assert!(fires(
        &e,
        &RequestFacts {
            amount: Some(100),
            ..base
        }
    ));
    assert!(fires(
        &e,
        &RequestFacts {
            amount: Some(5000),
            ..base
        }
    ));
    assert!(!fires(&e, &RequestFacts { method: "GET", ..base }));
    assert!(!fires(
        &e,
        &RequestFacts {
            path: "/v1/charges",
            ..base
        }
    ));
    assert!(!fires(
        &e,
        &RequestFacts {
            amount: Some(99),
            ..base
        }
    ));
    assert!(!fires(
        &e,
        &RequestFacts {
            amount: Some(5001),
            ..base
        }
    ));
    assert!(!fires(&e, &RequestFacts { amount: None, ..base }));
    assert!(!fires(
        &e,
        &RequestFacts {
            payment_method: Some("pm_card_mastercard"),
            ..base
        }
    ));
    assert!(!fires(
        &e,
        &RequestFacts {
            payment_method: None,
            ..base
        }
    ));
    assert!(!fires(
        &e,
        &RequestFacts {
            metadata: &silver,
            ..base
        }
    ));
    assert!(!fires(
        &e,
        &RequestFacts {
            metadata: empty(),
            ..base
        }
    ));
    let exact = engine("[[rules]]\nkind = \"reset\"\nmatch = { path = \"/v1/refunds\" }\n");
    assert!(fires(
        &exact,
        &RequestFacts {
            path: "/v1/refunds",
            ..base
        }
    ));
    assert!(!fires(
        &exact,
        &RequestFacts {
            path: "/v1/refunds/re_1",
            ..base
        }
    ));
}

#[test]
fn latency_lands_before_or_after_the_commit_within_its_cap() {
    let e = engine(
        "[latency]\ndistribution = \"uniform\"\nmin = \"10ms\"\nmax = \"20ms\"\n[[rules]]\nkind = \"latency\"\n\
         when = \"after_commit\"\ndistribution = \"lognormal\"\nmedian = \"1s\"\nsigma = 2\ncap = \"1500ms\"\n",
    );
    for i in 0..2000 {
        let d = e.decide(&facts(&format!("k{i}")));
        assert!(
            (Duration::from_millis(10)..=Duration::from_millis(20)).contains(&d.latency_before),
            "{d:?}"
        );
        assert!(d.latency_after <= Duration::from_millis(1500), "{d:?}");
        assert_eq!(d.fault, None);
        assert!(d.label().unwrap().starts_with("latency "));
    }
}

#[test]
fn labels_describe_what_acted() {
    assert_eq!(Decision::default().label(), None);
    let d = Decision {
        latency_before: Duration::from_millis(120),
        ..Decision::default()
    };
    assert_eq!(d.label().unwrap(), "latency 120ms");
    let d = Decision {
        fault: Some(Fault::DropResponse {
            when: When::AfterCommit,
        }),
        rule: Some(2),
        ..Decision::default()
    };
    assert_eq!(d.label().unwrap(), "drop_response after_commit (rule 2)");
    let d = Decision {
        latency_before: Duration::from_millis(5),
        latency_after: Duration::from_secs(1),
        fault: Some(Fault::Error {
            when: When::AfterCommit,
            status: 503,
        }),
        rule: None,
    };
    assert_eq!(
        d.label().unwrap(),
        "error 503 after_commit (forced), latency 5ms + 1s after_commit"
    );
}

#[test]
fn a_happy_profile_decides_nothing_but_latency() {
    let e = FaultEngine::new(crate::bundled::load("happy").unwrap());
    assert_eq!(e.profile().name, "happy");
    for i in 0..1000 {
        let d = e.decide(&facts(&format!("k{i}")));
        assert_eq!((d.fault, d.rule, d.latency_after), (None, None, Duration::ZERO));
    }
}
