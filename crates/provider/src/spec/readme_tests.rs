//! README's table of parameters per endpoint (what fauxpay reads, what it accepts from
//! Stripe's spec and ignores) is generated here from the compiled spec, so it stays true:
//! the test fails when README differs, printing the table to paste
//! (`FAUXPAY_WRITE_README=1` writes it in place).

use super::schema::{spec, ObjectRule, Schema};
use crate::endpoint::{Endpoint, Verb};

/// What a refund made under its charge's path reads (both of Stripe's forms).
const CHARGE_REFUND: &[&str] = &["amount", "expand", "metadata", "payment_intent", "reason"];

/// What fauxpay's rules read, per endpoint; inside a hash, only the keys named here have
/// an effect (`metadata` is read whole). A setup intent reads `payment_method_data` to
/// refuse it (fauxpay sets up cards, which Stripe's spec does not let it carry). Everything else Stripe's spec lists is accepted,
/// type-checked and ignored.
const MODELLED: &[(Verb, &str, &[&str])] = &[
    (
        Verb::Post,
        "/v1/payment_intents",
        &[
            "amount",
            "automatic_payment_methods[enabled]",
            "capture_method",
            "confirm",
            "currency",
            "customer",
            "description",
            "expand",
            "metadata",
            "off_session",
            "payment_method",
            "payment_method_data[card][number]",
            "receipt_email",
            "return_url",
            "setup_future_usage",
            "statement_descriptor",
            "statement_descriptor_suffix",
            "transfer_group",
        ],
    ),
    (
        Verb::Get,
        "/v1/payment_intents",
        &["customer", "ending_before", "expand", "limit", "starting_after"],
    ),
    (
        Verb::Get,
        "/v1/payment_intents/search",
        &["expand", "limit", "page", "query"],
    ),
    (Verb::Get, "/v1/payment_intents/{id}", &["expand"]),
    (
        Verb::Post,
        "/v1/payment_intents/{id}",
        &[
            "amount",
            "capture_method",
            "currency",
            "customer",
            "description",
            "expand",
            "metadata",
            "payment_method",
            "receipt_email",
            "setup_future_usage",
            "statement_descriptor",
            "statement_descriptor_suffix",
            "transfer_group",
        ],
    ),
    (
        Verb::Post,
        "/v1/payment_intents/{id}/confirm",
        &[
            "capture_method",
            "expand",
            "off_session",
            "payment_method",
            "payment_method_data[card][number]",
            "return_url",
            "setup_future_usage",
        ],
    ),
    (
        Verb::Post,
        "/v1/payment_intents/{id}/capture",
        &["amount_to_capture", "expand"],
    ),
    (
        Verb::Post,
        "/v1/payment_intents/{id}/cancel",
        &["cancellation_reason", "expand"],
    ),
    (
        Verb::Post,
        "/v1/charges",
        &[
            "amount",
            "capture",
            "currency",
            "description",
            "expand",
            "metadata",
            "source",
        ],
    ),
    (
        Verb::Get,
        "/v1/charges",
        &["ending_before", "expand", "limit", "payment_intent", "starting_after"],
    ),
    (Verb::Get, "/v1/charges/search", &["expand", "limit", "page", "query"]),
    (Verb::Get, "/v1/charges/{id}", &["expand"]),
    (Verb::Post, "/v1/charges/{id}", &["description", "expand", "metadata"]),
    (Verb::Post, "/v1/charges/{id}/capture", &["amount", "expand"]),
    (
        Verb::Post,
        "/v1/refunds",
        &["amount", "charge", "expand", "metadata", "payment_intent", "reason"],
    ),
    (
        Verb::Get,
        "/v1/refunds",
        &[
            "charge",
            "ending_before",
            "expand",
            "limit",
            "payment_intent",
            "starting_after",
        ],
    ),
    (Verb::Get, "/v1/refunds/{id}", &["expand"]),
    (Verb::Post, "/v1/refunds/{id}", &["expand", "metadata"]),
    (Verb::Post, "/v1/charges/{id}/refund", CHARGE_REFUND),
    (Verb::Post, "/v1/charges/{id}/refunds", CHARGE_REFUND),
    (
        Verb::Get,
        "/v1/charges/{id}/refunds",
        &["ending_before", "expand", "limit", "starting_after"],
    ),
    (Verb::Get, "/v1/charges/{id}/refunds/{sub}", &["expand"]),
    (Verb::Post, "/v1/charges/{id}/refunds/{sub}", &["expand", "metadata"]),
    (
        Verb::Post,
        "/v1/customers",
        &[
            "description",
            "email",
            "expand",
            "invoice_settings[default_payment_method]",
            "metadata",
            "name",
            "payment_method",
            "phone",
        ],
    ),
    (
        Verb::Get,
        "/v1/customers",
        &["created", "email", "ending_before", "expand", "limit", "starting_after"],
    ),
    (Verb::Get, "/v1/customers/search", &["expand", "limit", "page", "query"]),
    (Verb::Get, "/v1/customers/{id}", &["expand"]),
    (
        Verb::Post,
        "/v1/customers/{id}",
        &[
            "description",
            "email",
            "expand",
            "invoice_settings[default_payment_method]",
            "metadata",
            "name",
            "phone",
        ],
    ),
    (Verb::Delete, "/v1/customers/{id}", &[]),
    (
        Verb::Get,
        "/v1/customers/{id}/payment_methods",
        &["ending_before", "expand", "limit", "starting_after", "type"],
    ),
    (Verb::Get, "/v1/customers/{id}/payment_methods/{sub}", &["expand"]),
    (
        Verb::Post,
        "/v1/payment_methods",
        &[
            "billing_details",
            "card[cvc]",
            "card[exp_month]",
            "card[exp_year]",
            "card[number]",
            "card[token]",
            "expand",
            "metadata",
            "type",
        ],
    ),
    (
        Verb::Get,
        "/v1/payment_methods",
        &["customer", "ending_before", "expand", "limit", "starting_after", "type"],
    ),
    (Verb::Get, "/v1/payment_methods/{id}", &["expand"]),
    (
        Verb::Post,
        "/v1/payment_methods/{id}",
        &[
            "billing_details",
            "card[exp_month]",
            "card[exp_year]",
            "expand",
            "metadata",
        ],
    ),
    (Verb::Post, "/v1/payment_methods/{id}/attach", &["customer", "expand"]),
    (Verb::Post, "/v1/payment_methods/{id}/detach", &["expand"]),
    (
        Verb::Post,
        "/v1/setup_intents",
        &[
            "confirm",
            "customer",
            "description",
            "expand",
            "metadata",
            "payment_method",
            "payment_method_data",
            "payment_method_types",
            "return_url",
            "usage",
        ],
    ),
    (
        Verb::Get,
        "/v1/setup_intents",
        &[
            "created",
            "customer",
            "ending_before",
            "expand",
            "limit",
            "payment_method",
            "starting_after",
        ],
    ),
    (Verb::Get, "/v1/setup_intents/{id}", &["expand"]),
    (
        Verb::Post,
        "/v1/setup_intents/{id}",
        &[
            "customer",
            "description",
            "expand",
            "metadata",
            "payment_method",
            "payment_method_data",
            "payment_method_types",
        ],
    ),
    (
        Verb::Post,
        "/v1/setup_intents/{id}/confirm",
        &["expand", "payment_method", "payment_method_data", "return_url"],
    ),
    (
        Verb::Post,
        "/v1/setup_intents/{id}/cancel",
        &["cancellation_reason", "expand"],
    ),
    (
        Verb::Get,
        "/v1/events",
        &[
            "created",
            "delivery_success",
            "ending_before",
            "expand",
            "limit",
            "starting_after",
            "type",
            "types",
        ],
    ),
    (Verb::Get, "/v1/events/{id}", &["expand"]),
    (
        Verb::Post,
        "/v1/webhook_endpoints",
        &["connect", "description", "enabled_events", "expand", "metadata", "url"],
    ),
    (
        Verb::Get,
        "/v1/webhook_endpoints",
        &["ending_before", "expand", "limit", "starting_after"],
    ),
    (Verb::Get, "/v1/webhook_endpoints/{id}", &["expand"]),
    (
        Verb::Post,
        "/v1/webhook_endpoints/{id}",
        &["description", "disabled", "enabled_events", "expand", "metadata", "url"],
    ),
    (Verb::Delete, "/v1/webhook_endpoints/{id}", &[]),
];

const START: &str = "<!-- spec-params:start (generated by src/provider/spec/readme_tests.rs) -->";
const END: &str = "<!-- spec-params:end -->";

fn served() -> impl Iterator<Item = &'static Endpoint> {
    crate::api::endpoints()
}

/// Whether Stripe's schema has the parameter `name` (bracket notation) under `rule`.
fn knows(rule: &ObjectRule, name: &str) -> bool {
    let mut steps = name.split('[').map(|s| s.trim_end_matches(']'));
    let Some(first) = steps.next() else {
        return false;
    };
    let mut schema = rule.property(first);
    for step in steps {
        schema = schema.and_then(|s| child(s, step));
    }
    schema.is_some()
}

fn child<'s>(schema: &'s Schema, name: &str) -> Option<&'s Schema> {
    match schema {
        Schema::Object(o) => o.property(name).or(o.additional.as_deref()),
        Schema::AnyOf(a) => a.alternatives.iter().find_map(|alt| child(alt, name)),
        _ => None,
    }
}

fn table() -> String {
    let mut out = String::from(
        "| endpoint | fauxpay reads | Stripe's other parameters: accepted, checked, ignored |\n|---|---|---|\n",
    );
    for (verb, path, reads) in MODELLED {
        let Some(op) = spec().operation(*verb, path) else {
            continue;
        };
        let top: Vec<&str> = reads.iter().map(|r| r.split('[').next().unwrap_or(r)).collect();
        let ignored: Vec<String> = op
            .params
            .names()
            .filter(|n| !top.contains(n))
            .map(|n| format!("`{n}`"))
            .collect();
        let reads: Vec<String> = reads.iter().map(|r| format!("`{r}`")).collect();
        let cell = |v: Vec<String>| if v.is_empty() { "—".to_string() } else { v.join(", ") };
        out.push_str(&format!(
            "| `{} {}` | {} | {} |\n",
            verb.as_str(),
            path,
            cell(reads),
            cell(ignored)
        ));
    }
    out
}

#[test]
fn every_served_endpoint_has_a_row_and_every_row_names_what_stripe_knows() {
    for e in served() {
        assert!(
            MODELLED.iter().any(|(v, p, _)| *v == e.verb && *p == e.path),
            "{e:?} has no row in MODELLED"
        );
    }
    for (verb, path, reads) in MODELLED {
        assert!(
            served().any(|e| e.verb == *verb && e.path == *path),
            "{verb:?} {path} is not served"
        );
        let op = spec()
            .operation(*verb, path)
            .unwrap_or_else(|| panic!("{path} not in the spec"));
        for name in *reads {
            assert!(knows(&op.params, name), "{verb:?} {path}: Stripe's spec has no {name}");
        }
    }
}

#[test]
fn readme_lists_the_parameters_of_every_endpoint() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let expected = format!("{START}\n{}{END}", table());
    let (Some(start), Some(end)) = (readme.find(START), readme.find(END)) else {
        panic!("README.md has no {START} … {END} block; put this there:\n{expected}");
    };
    let current = &readme[start..end + END.len()];
    if current != expected {
        if std::env::var_os("FAUXPAY_WRITE_README").is_some() {
            std::fs::write(path, readme.replace(current, &expected)).unwrap();
        } else {
            panic!("README.md's parameter table is stale (FAUXPAY_WRITE_README=1 rewrites it):\n{expected}");
        }
    }
}
