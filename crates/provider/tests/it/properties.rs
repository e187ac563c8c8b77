//! Property tests of the parsers a request (or an operator) reaches: the form/bracket
//! parser and JSON bodies, the search query language, and fault profiles. Whatever the
//! input, they answer (no panic); their canonical forms are stable; a form and the JSON
//! of the same tree are one request.

use std::collections::BTreeMap;

use fauxpay_faults as faults;
use fauxpay_provider::stripe::params::Params;
use fauxpay_provider::stripe::search::{Clause, Field, Op, Query};
use proptest::prelude::*;

/// A parameter tree: objects keyed by plain names, string leaves.
#[derive(Debug, Clone)]
enum Tree {
    Leaf(String),
    Object(BTreeMap<String, Tree>),
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = "[^\u{0}]{0,12}".prop_map(Tree::Leaf);
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop::collection::btree_map("[a-z_]{1,6}", inner, 1..4).prop_map(Tree::Object)
    })
}

fn top() -> impl Strategy<Value = BTreeMap<String, Tree>> {
    prop::collection::btree_map("[a-z_]{1,6}", tree(), 0..6)
}

fn encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The form body of a tree in Stripe's bracket notation (`a[b][c]=v`).
fn form_of(top: &BTreeMap<String, Tree>) -> String {
    fn walk(name: String, t: &Tree, out: &mut Vec<String>) {
        match t {
            Tree::Leaf(v) => out.push(format!("{}={}", encode(&name), encode(v))),
            Tree::Object(m) => {
                for (k, v) in m {
                    walk(format!("{name}[{k}]"), v, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (k, v) in top {
        walk(k.clone(), v, &mut out);
    }
    out.join("&")
}

fn json_of(top: &BTreeMap<String, Tree>) -> serde_json::Value {
    fn of(t: &Tree) -> serde_json::Value {
        match t {
            Tree::Leaf(v) => serde_json::Value::String(v.clone()),
            Tree::Object(m) => m.iter().map(|(k, v)| (k.clone(), of(v))).collect(),
        }
    }
    top.iter().map(|(k, v)| (k.clone(), of(v))).collect()
}

fn clause() -> impl Strategy<Value = Clause> {
    let field = prop_oneof![
        "[a-z_][a-z0-9_.]{0,10}".prop_map(Field::Named),
        "[^\u{0}]{1,10}".prop_map(Field::Metadata),
    ];
    let op = prop_oneof![Just(Op::Eq), Just(Op::Gt), Just(Op::Lt), Just(Op::Gte), Just(Op::Lte)];
    (field, any::<bool>(), op, "[^\u{0}]{0,12}").prop_map(|(field, negated, op, value)| Clause {
        field,
        negated,
        op,
        value,
    })
}

fn query() -> impl Strategy<Value = Query> {
    (prop::collection::vec(clause(), 1..=10), any::<bool>()).prop_map(|(clauses, any)| Query {
        any: any && clauses.len() > 1,
        clauses,
    })
}

proptest! {
    // A fixed seed, so that a run is repeatable; PROPTEST_RNG_SEED=N explores another.
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_RNG_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_261_206),
        ),
        ..ProptestConfig::default()
    })]

    #[test]
    fn forms_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Params::from_form(&body);
    }

    #[test]
    fn bracket_soup_never_panics(body in "[a-z\\[\\]=&%0-9+]{0,200}") {
        if let Ok(p) = Params::from_form(body.as_bytes()) {
            // The canonical form is a function of the tree.
            prop_assert_eq!(p.canonical(), p.clone().canonical());
        }
    }

    #[test]
    fn json_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Params::from_json(&body);
    }

    #[test]
    fn a_form_and_its_json_are_one_request(top in top()) {
        let form = Params::from_form(form_of(&top).as_bytes()).unwrap();
        let json = Params::from_json(&serde_json::to_vec(&json_of(&top)).unwrap()).unwrap();
        prop_assert_eq!(form.canonical(), json.canonical());
    }

    #[test]
    fn params_round_trip_through_the_data_dirs_json(top in top()) {
        // The data dir keeps a request's parameters as `Params::to_json`; recovery reads
        // them back with `from_json` and must run the same request.
        let form = Params::from_form(form_of(&top).as_bytes()).unwrap();
        let back = Params::from_json(&serde_json::to_vec(&form.to_json()).unwrap()).unwrap();
        prop_assert_eq!(back.to_json(), form.to_json());
        let json = Params::from_json(&serde_json::to_vec(&json_of(&top)).unwrap()).unwrap();
        let back = Params::from_json(&serde_json::to_vec(&json.to_json()).unwrap()).unwrap();
        prop_assert_eq!(back.canonical(), json.canonical());
    }

    #[test]
    fn reordered_form_fields_are_one_request(top in top(), seed in any::<u64>()) {
        let body = form_of(&top);
        let mut pairs: Vec<&str> = body.split('&').collect();
        // A deterministic shuffle from the seed.
        let mut s = seed | 1;
        for i in (1..pairs.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            pairs.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let a = Params::from_form(body.as_bytes()).unwrap();
        let b = Params::from_form(pairs.join("&").as_bytes()).unwrap();
        prop_assert_eq!(a.canonical(), b.canonical());
    }

    #[test]
    fn search_queries_never_panic(input in "\\PC{0,80}") {
        if let Ok(q) = Query::parse(&input) {
            // A parsed query's canonical text reads back as the same query.
            prop_assert_eq!(Query::parse(&q.to_string()).unwrap(), q);
        }
    }

    #[test]
    fn search_shaped_soup_never_panics(input in "[-a-z_ :'\"\\[\\]<>=\\\\ANDOR]{0,80}") {
        if let Ok(q) = Query::parse(&input) {
            prop_assert_eq!(Query::parse(&q.to_string()).unwrap(), q);
        }
    }

    #[test]
    fn canonical_queries_round_trip(q in query()) {
        let text = q.to_string();
        let parsed = Query::parse(&text).unwrap();
        prop_assert_eq!(parsed.to_string(), text);
        prop_assert_eq!(parsed, q);
    }

    #[test]
    fn profile_text_never_panics(text in "\\PC{0,300}") {
        let _ = faults::parse_profile("p.toml", &text);
        let _ = faults::parse_profile_json("p.json", &text);
    }

    #[test]
    fn profile_shaped_text_never_panics(
        kind in "(hang|error|latency|drop_response|reset|rate_limit|slow_body|decline|x)",
        key in "(hang|status|duration|retry_after|value|first_attempts|probability|when|distribution|cap)",
        value in "(\"[0-9]{1,12}(ms|s|m|h|days|years)\"|[0-9]{1,20}|-?[0-9.]{1,6}|\"[a-z_]{0,12}\")",
    ) {
        let text = format!("name = \"p\"\ndescription = \"d\"\nseed = 1\n[[rules]]\nkind = \"{kind}\"\n{key} = {value}\n");
        let _ = faults::parse_profile("p.toml", &text);
        let _ = faults::parse_forced(&format!("{kind}; {key}={}", value.trim_matches('"')));
    }

    #[test]
    fn profiles_round_trip_through_their_json(
        hang_ms in 1u64..=600_000,
        retry_s in 0u64..=3600,
        p in 0.0f64..=1.0,
        first in 1u32..=1000,
        seed in 0u64..=i64::MAX as u64,
    ) {
        let text = format!(
            "name = \"p\"\ndescription = \"d\"\nseed = {seed}\n\
             [[rules]]\nkind = \"hang\"\nhang = \"{hang_ms}ms\"\nprobability = {p:?}\nfirst_attempts = {first}\n\
             [[rules]]\nkind = \"rate_limit\"\nretry_after = \"{retry_s}s\"\n"
        );
        let profile = faults::parse_profile("p.toml", &text).unwrap();
        let json = serde_json::to_string(&profile).unwrap();
        let again = faults::parse_profile_json("p.json", &json).unwrap();
        prop_assert_eq!(&again, &profile);
        // And the canonical JSON is stable.
        prop_assert_eq!(serde_json::to_string(&again).unwrap(), json);
    }
}

#[test]
fn every_bundled_profile_round_trips_through_its_json() {
    for (name, _) in faults::bundled::BUNDLED {
        let profile = faults::bundled::load(name).unwrap();
        let json = serde_json::to_string(&profile).unwrap();
        assert_eq!(faults::parse_profile_json(name, &json).unwrap(), profile, "{name}");
    }
}
