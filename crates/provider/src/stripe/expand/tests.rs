//! Expansion without HTTP: paths checked against each endpoint's shape, replies expanded
//! from the tables, and the tables and shapes held to Stripe's spec.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::tables::{Expandable, Kind, Target};
use super::*;
use crate::fault_injection::attempt::Attempt;
use crate::resources::endpoints;
use crate::stripe::ids::RequestId;
use crate::stripe::spec::schema::SPEC_JSON;
use crate::test_support::{form, payments};

fn plan(verb: Verb, path: &str, query: &str) -> Result<Expansion, ApiError> {
    Expansion::plan(verb, path, &form(query))
}

/// The error of a refused plan: its message and param.
fn refused(verb: Verb, path: &str, query: &str) -> (String, Option<String>) {
    let e = plan(verb, path, query).expect_err(query);
    assert_eq!(e.status.code(), 400);
    assert!(!e.executed, "refused before the operation runs");
    (e.message.to_string(), e.param.clone())
}

/// The tree of a plan, as `name(children)` text, for comparing.
fn tree(e: &Expansion) -> String {
    fn write(nodes: &[Node], out: &mut String) {
        for (i, n) in nodes.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&n.name);
            if !n.children.is_empty() {
                out.push('(');
                write(&n.children, out);
                out.push(')');
            }
        }
    }
    let mut out = String::new();
    write(&e.nodes, &mut out);
    out
}

#[test]
fn shapes_follow_the_last_resource_in_the_path() {
    use Shape::*;
    for (verb, path, shape) in [
        (Verb::Post, "/v1/payment_intents", One(Kind::PaymentIntent)),
        (Verb::Get, "/v1/payment_intents", List(Kind::PaymentIntent)),
        (Verb::Get, "/v1/payment_intents/search", List(Kind::PaymentIntent)),
        (Verb::Get, "/v1/payment_intents/{id}", One(Kind::PaymentIntent)),
        (Verb::Post, "/v1/payment_intents/{id}/confirm", One(Kind::PaymentIntent)),
        (Verb::Get, "/v1/charges/search", List(Kind::Charge)),
        (Verb::Post, "/v1/refunds", One(Kind::Refund)),
        (Verb::Delete, "/v1/customers/{id}", One(Kind::Customer)),
        (
            Verb::Get,
            "/v1/customers/{id}/payment_methods",
            List(Kind::PaymentMethod),
        ),
        (Verb::Post, "/v1/payment_methods/{id}/attach", One(Kind::PaymentMethod)),
    ] {
        assert_eq!(Shape::of(verb, path), Some(shape), "{verb:?} {path}");
    }
    assert_eq!(Shape::of(Verb::Get, "/v1/nothing_here"), None);
    assert_eq!(Shape::of(Verb::Get, "/__fauxpay/ledger"), None);
}

#[test]
fn without_expand_the_plan_is_empty() {
    for query in ["", "amount=100", "expand[]=", "expand[]=invoice&expand[]=review"] {
        let p = plan(Verb::Post, "/v1/payment_intents", query).unwrap();
        assert!(p.is_empty(), "{query}");
    }
    // Accepted fields with nothing to expand are still checked: a typo is refused.
    refused(Verb::Post, "/v1/payment_intents", "expand[]=invoice&expand[]=invoce");
}

#[test]
fn paths_become_one_tree() {
    let p = plan(
        Verb::Get,
        "/v1/payment_intents/{id}",
        "expand[]=latest_charge&expand[]=customer&expand[]=latest_charge.payment_intent&expand[]=latest_charge.payment_intent.customer&expand[]=customer",
    )
    .unwrap();
    assert!(!p.is_empty());
    assert_eq!(tree(&p), "latest_charge(payment_intent(customer)) customer");
    let steps: Vec<Step> = p.nodes.iter().map(|n| n.step).collect();
    assert_eq!(steps, [Step::Resolve(Kind::Charge), Step::Resolve(Kind::Customer)]);
    // JSON bodies and indexed form lists read the same.
    let json = Expansion::plan(
        Verb::Post,
        "/v1/refunds",
        &Params::from_json(br#"{"expand":["charge.customer","payment_intent"]}"#).unwrap(),
    )
    .unwrap();
    assert_eq!(tree(&json), "charge(customer) payment_intent");
    let indexed = plan(
        Verb::Post,
        "/v1/refunds",
        "expand[1]=payment_intent&expand[0]=charge.customer",
    )
    .unwrap();
    assert_eq!(tree(&indexed), "charge(customer) payment_intent");
}

#[test]
fn lists_expand_through_data() {
    let p = plan(
        Verb::Get,
        "/v1/payment_intents",
        "expand[]=data.latest_charge.payment_intent&expand[]=data.customer",
    )
    .unwrap();
    assert_eq!(tree(&p), "data(latest_charge(payment_intent) customer)");
    assert_eq!(p.nodes[0].step, Step::Descend);
    let search = plan(
        Verb::Get,
        "/v1/charges/search",
        "expand[]=data.refunds.data.payment_intent",
    )
    .unwrap();
    assert_eq!(tree(&search), "data(refunds(data(payment_intent)))");
    assert_eq!(
        search.nodes[0].children[0].step,
        Step::Include(tables::Included::ChargeRefunds)
    );
    // An item's field without `data.`: Stripe's hint.
    let (message, param) = refused(Verb::Get, "/v1/payment_intents", "expand[]=customer");
    assert_eq!(
        message,
        "This property cannot be expanded (customer). You may want to try expanding 'data.customer' instead."
    );
    assert_eq!(param.as_deref(), Some("expand[0]"));
    let (message, _) = refused(
        Verb::Get,
        "/v1/payment_intents",
        "expand[]=latest_charge.payment_intent",
    );
    assert!(message.ends_with("You may want to try expanding 'data.latest_charge.payment_intent' instead."));
    // No hint for what the items cannot expand either.
    let (message, _) = refused(Verb::Get, "/v1/payment_intents", "expand[]=foo");
    assert_eq!(message, "This property cannot be expanded (foo).");
    let (message, _) = refused(Verb::Get, "/v1/payment_intents", "expand[]=latest_charge.foo");
    assert_eq!(message, "This property cannot be expanded (latest_charge.foo).");
    // `data` names nothing on one object.
    refused(Verb::Get, "/v1/payment_intents/{id}", "expand[]=data.customer");
}

#[test]
fn unknown_paths_are_stripes_400_naming_the_entry() {
    for (verb, path, query, message, param) in [
        (
            Verb::Get,
            "/v1/payment_intents/{id}",
            "expand[]=foo",
            "foo",
            "expand[0]",
        ),
        (
            Verb::Get,
            "/v1/payment_intents/{id}",
            "expand[]=customer&expand[]=latest_charge.foo",
            "latest_charge.foo",
            "expand[1]",
        ),
        (
            Verb::Post,
            "/v1/refunds",
            "expand[]=charge.payment_intent.latest_charge.nope",
            "charge.payment_intent.latest_charge.nope",
            "expand[0]",
        ),
        // Not expandable: a plain field, or an id Stripe does not expand there.
        (Verb::Get, "/v1/charges/{id}", "expand[]=amount", "amount", "expand[0]"),
        (
            Verb::Get,
            "/v1/charges/{id}",
            "expand[]=payment_method",
            "payment_method",
            "expand[0]",
        ),
        (
            Verb::Get,
            "/v1/customers/{id}",
            "expand[]=invoice_settings.footer",
            "invoice_settings.footer",
            "expand[0]",
        ),
        (
            Verb::Get,
            "/v1/customers/{id}",
            "expand[]=default_payment_method",
            "default_payment_method",
            "expand[0]",
        ),
        (
            Verb::Get,
            "/v1/charges/{id}",
            "expand[]=.customer",
            ".customer",
            "expand[0]",
        ),
        (
            Verb::Get,
            "/v1/charges/{id}",
            "expand[]=customer.",
            "customer.",
            "expand[0]",
        ),
    ] {
        let (got, got_param) = refused(verb, path, query);
        assert_eq!(got, format!("This property cannot be expanded ({message})."), "{query}");
        assert_eq!(got_param.as_deref(), Some(param), "{query}");
    }
    // Below a field fauxpay accepts without modelling, nothing is checked.
    plan(Verb::Get, "/v1/charges/{id}", "expand[]=balance_transaction.source").unwrap();
}

#[test]
fn paths_have_at_most_four_levels() {
    plan(
        Verb::Get,
        "/v1/payment_intents",
        "expand[]=data.latest_charge.payment_intent.customer",
    )
    .unwrap();
    let (message, param) = refused(
        Verb::Get,
        "/v1/payment_intents",
        "expand[]=data.latest_charge.payment_intent.latest_charge.customer",
    );
    assert_eq!(
        message,
        "You cannot expand more than 4 levels of a property. Property: data.latest_charge.payment_intent.latest_charge.customer"
    );
    assert_eq!(param.as_deref(), Some("expand[0]"));
}

// ---- Expanding replies -------------------------------------------------------------

fn attempt() -> Attempt {
    Attempt::plain(RequestId::generate(), None)
}

/// Runs `reply` through the plan of `query` for `verb path`, as JSON.
fn expanded(p: &Payments, verb: Verb, path: &str, query: &str, reply: Reply) -> Value {
    plan(verb, path, query).unwrap().apply(p, reply).json()
}

/// A customer with a saved card as its default, and an intent charged to that card.
fn customer_and_payment(p: &Payments) -> (Value, Value) {
    let cus = p
        .create_customer(&form(
            "email=jenny@example.com&payment_method=pm_card_visa&invoice_settings[default_payment_method]=pm_card_visa",
        ), &attempt())
        .unwrap()
        .json();
    let pm = cus["invoice_settings"]["default_payment_method"]
        .as_str()
        .unwrap()
        .to_string();
    let pi = p
        .create_intent(
            &form(&format!(
                "amount=2000&currency=usd&confirm=true&customer={}&payment_method={pm}",
                cus["id"].as_str().unwrap()
            )),
            &attempt(),
        )
        .unwrap()
        .json();
    (cus, pi)
}

#[test]
fn an_intent_expands_its_charge_customer_and_payment_method() {
    let p = payments();
    let (cus, pi) = customer_and_payment(&p);
    let reply = p.retrieve_intent(pi["id"].as_str().unwrap()).unwrap();
    let plain = reply.clone().json();
    let v = expanded(
        &p,
        Verb::Get,
        "/v1/payment_intents/{id}",
        "expand[]=latest_charge&expand[]=customer&expand[]=payment_method",
        reply,
    );
    assert_eq!(v["latest_charge"]["object"], "charge");
    assert_eq!(v["latest_charge"]["id"], plain["latest_charge"]);
    assert_eq!(
        v["latest_charge"]["customer"], cus["id"],
        "a charge carries its intent's customer"
    );
    assert_eq!(v["customer"], cus);
    assert_eq!(v["payment_method"]["object"], "payment_method");
    assert_eq!(v["payment_method"]["id"], plain["payment_method"]);
    assert_eq!(v["payment_method"]["customer"], cus["id"]);
    // Everything else is the plain object.
    let mut rest = v.clone();
    for f in ["latest_charge", "customer", "payment_method"] {
        rest[f] = plain[f].clone();
    }
    assert_eq!(rest, plain);
}

#[test]
fn nested_paths_expand_inside_expanded_objects() {
    let p = payments();
    let (cus, pi) = customer_and_payment(&p);
    let reply = p.retrieve_intent(pi["id"].as_str().unwrap()).unwrap();
    let v = expanded(
        &p,
        Verb::Get,
        "/v1/payment_intents/{id}",
        "expand[]=latest_charge.payment_intent.customer&expand[]=latest_charge.customer.invoice_settings.default_payment_method",
        reply,
    );
    let charge = &v["latest_charge"];
    assert_eq!(charge["payment_intent"]["id"], pi["id"]);
    // The intent inside the charge: its own charge stays an id.
    assert_eq!(charge["payment_intent"]["latest_charge"], charge["id"]);
    assert_eq!(charge["payment_intent"]["customer"]["email"], "jenny@example.com");
    let default = &charge["customer"]["invoice_settings"]["default_payment_method"];
    assert_eq!(default["object"], "payment_method");
    assert_eq!(default["id"], cus["invoice_settings"]["default_payment_method"]);
    assert_eq!(v["customer"], cus["id"], "not asked for: still an id");
}

#[test]
fn a_test_payment_method_paid_with_directly_expands_from_its_card() {
    let p = payments();
    let pi = p
        .create_intent(
            &form("amount=500&currency=usd&confirm=true&payment_method=pm_card_mastercard"),
            &attempt(),
        )
        .unwrap();
    let plain = pi.clone().json();
    let v = expanded(&p, Verb::Post, "/v1/payment_intents", "expand[]=payment_method", pi);
    let pm = &v["payment_method"];
    assert_eq!(pm["id"], plain["payment_method"]);
    assert_eq!(pm["card"]["brand"], "mastercard");
    assert_eq!(pm["card"]["last4"], "4444");
    assert_eq!(pm["created"], plain["created"]);
    assert_eq!(pm["customer"], Value::Null);
    // The same object each time.
    let again = expanded(
        &p,
        Verb::Get,
        "/v1/payment_intents/{id}",
        "expand[]=payment_method",
        p.retrieve_intent(plain["id"].as_str().unwrap()).unwrap(),
    );
    assert_eq!(&again["payment_method"], pm);
}

#[test]
fn null_fields_stay_null_and_accepted_fields_are_left_alone() {
    let p = payments();
    let pi = p.create_intent(&form("amount=500&currency=usd"), &attempt()).unwrap();
    let plain = pi.clone().json();
    let v = expanded(
        &p,
        Verb::Post,
        "/v1/payment_intents",
        "expand[]=latest_charge.customer&expand[]=customer&expand[]=payment_method&expand[]=invoice",
        pi,
    );
    assert_eq!(v, plain);
    // A charge's balance transaction: an id fauxpay has no object for.
    let ch = p
        .create_charge(&form("amount=500&currency=usd&source=tok_visa"), &attempt())
        .unwrap();
    let plain = ch.clone().json();
    let v = expanded(
        &p,
        Verb::Post,
        "/v1/charges",
        "expand[]=balance_transaction&expand[]=payment_intent",
        ch,
    );
    assert_eq!(v, plain);
    assert!(v["balance_transaction"].as_str().unwrap().starts_with("txn_"));
}

#[test]
fn a_deleted_customer_expands_as_stripes_deleted_object() {
    let p = payments();
    let cus = p
        .create_customer(&form("email=a@example.com"), &attempt())
        .unwrap()
        .json();
    let id = cus["id"].as_str().unwrap();
    let pi = p
        .create_intent(&form(&format!("amount=500&currency=usd&customer={id}")), &attempt())
        .unwrap();
    p.delete_customer(id, &attempt()).unwrap();
    let v = expanded(&p, Verb::Post, "/v1/payment_intents", "expand[]=customer", pi);
    assert_eq!(v["customer"], json!({"id": id, "object": "customer", "deleted": true}));
}

#[test]
fn refunds_expand_their_charge_and_intent_and_charges_include_their_refunds() {
    let p = payments();
    let (_, pi) = customer_and_payment(&p);
    let charge = pi["latest_charge"].as_str().unwrap();
    let first = p
        .create_refund(&form(&format!("charge={charge}&amount=500")), &attempt())
        .unwrap();
    let v = expanded(
        &p,
        Verb::Post,
        "/v1/refunds",
        "expand[]=charge&expand[]=payment_intent.latest_charge",
        first.clone(),
    );
    assert_eq!(v["charge"]["id"], charge);
    assert_eq!(v["charge"]["amount_refunded"], 500);
    assert_eq!(v["payment_intent"]["id"], pi["id"]);
    assert_eq!(v["payment_intent"]["latest_charge"]["id"], charge);
    let second = p
        .create_refund(&form(&format!("charge={charge}&amount=700")), &attempt())
        .unwrap()
        .json();
    // A charge's refunds: left out unless expanded, then a list, newest first.
    let reply = p.retrieve_charge(charge).unwrap();
    assert!(reply.clone().json().get("refunds").is_none());
    let v = expanded(
        &p,
        Verb::Get,
        "/v1/charges/{id}",
        "expand[]=refunds.data.payment_intent",
        reply,
    );
    let refunds = &v["refunds"];
    assert_eq!(refunds["object"], "list");
    assert_eq!(refunds["url"], format!("/v1/charges/{charge}/refunds"));
    assert_eq!(refunds["has_more"], false);
    let ids: Vec<&Value> = refunds["data"].as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [&second["id"], &first.json()["id"]]);
    assert_eq!(refunds["data"][0]["payment_intent"]["id"], pi["id"]);
}

#[test]
fn lists_and_search_results_expand_every_item() {
    let p = payments();
    let (cus, _) = customer_and_payment(&p);
    p.create_intent(
        &form("amount=700&currency=usd&confirm=true&payment_method=pm_card_visa"),
        &attempt(),
    )
    .unwrap();
    let list = p.list_intents(&form("limit=10")).unwrap();
    let v = expanded(
        &p,
        Verb::Get,
        "/v1/payment_intents",
        "expand[]=data.customer&expand[]=data.latest_charge",
        list,
    );
    assert_eq!(v["object"], "list");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["customer"], Value::Null);
    assert_eq!(data[0]["latest_charge"]["amount"], 700);
    assert_eq!(data[1]["customer"]["id"], cus["id"]);
    assert_eq!(data[1]["latest_charge"]["amount"], 2000);
    let found = p.search_charges(&form("query=amount%3A2000")).unwrap();
    let v = expanded(
        &p,
        Verb::Get,
        "/v1/charges/search",
        "expand[]=data.customer&expand[]=data.payment_intent",
        found,
    );
    assert_eq!(v["object"], "search_result");
    assert_eq!(v["data"][0]["customer"]["email"], "jenny@example.com");
    assert_eq!(v["data"][0]["payment_intent"]["amount"], 2000);
    // A customer's payment methods, with their customer.
    let cards = p
        .list_customer_payment_methods(cus["id"].as_str().unwrap(), &form("type=card"))
        .unwrap();
    let v = expanded(
        &p,
        Verb::Get,
        "/v1/customers/{id}/payment_methods",
        "expand[]=data.customer",
        cards,
    );
    assert_eq!(v["data"][0]["customer"]["id"], cus["id"]);
}

// ---- The tables and shapes against Stripe's spec -----------------------------------

fn spec() -> Value {
    serde_json::from_slice(SPEC_JSON).unwrap()
}

/// The schema a `$ref` names (`#/components/schemas/charge` → `charge`).
fn ref_name(v: &Value) -> Option<&str> {
    v.get("$ref")?.as_str()?.strip_prefix("#/components/schemas/")
}

/// Checks `table` against the spec's schema `name`.
fn check_table(doc: &Value, name: &str, table: &Expandable, kinds: &BTreeSet<&str>) {
    let schema = &doc["components"]["schemas"][name];
    let spec_names: BTreeSet<&str> = schema["x-expandableFields"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} has no x-expandableFields"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let ours: Vec<&str> = table
        .fields
        .iter()
        .map(|(n, _)| *n)
        .chain(table.accepted.iter().copied())
        .collect();
    let ours_set: BTreeSet<&str> = ours.iter().copied().collect();
    assert_eq!(ours.len(), ours_set.len(), "{name}: a name listed twice");
    assert_eq!(
        ours_set, spec_names,
        "{name}: the table is not the spec's x-expandableFields"
    );
    for (field, target) in table.fields {
        let property = &schema["properties"][field];
        match target {
            Target::Object(kind) => {
                assert!(
                    property.get("x-expansionResources").is_some(),
                    "{name}.{field} is not an id reference in the spec"
                );
                let alternatives: Vec<&str> = property["anyOf"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(ref_name)
                    .collect();
                assert!(
                    alternatives.contains(&kind.schema()),
                    "{name}.{field} does not expand to {} ({alternatives:?})",
                    kind.schema()
                );
            }
            Target::Inner(inner) => {
                let inner_name = ref_name(property).unwrap_or_else(|| panic!("{name}.{field} is not a $ref"));
                check_table(doc, inner_name, inner, kinds);
            }
            Target::Included(list) => {
                assert_eq!(property["type"], "object", "{name}.{field}");
                assert_eq!(
                    property["properties"]["object"]["enum"],
                    json!(["list"]),
                    "{name}.{field}"
                );
                assert_eq!(
                    ref_name(&property["properties"]["data"]["items"]),
                    Some(list.kind().schema()),
                    "{name}.{field}"
                );
                assert!(
                    !schema["required"].as_array().unwrap().contains(&json!(field)),
                    "{name}.{field} is sent without expansion"
                );
            }
        }
    }
    // No id of an object fauxpay keeps is left unexpanded.
    for field in table.accepted {
        let property = &schema["properties"][field];
        if property.get("x-expansionResources").is_none() {
            continue;
        }
        for alt in property["anyOf"].as_array().unwrap() {
            if let Some(target) = ref_name(alt) {
                assert!(
                    !kinds.contains(target),
                    "{name}.{field} names a {target}, which fauxpay keeps: expand it"
                );
            }
        }
    }
}

#[test]
fn every_table_is_the_specs_expandable_fields() {
    let doc = spec();
    let kinds: BTreeSet<&str> = Kind::ALL.iter().map(|k| k.schema()).collect();
    for kind in Kind::ALL {
        assert_eq!(Kind::of_resource(kind.resource()), Some(*kind));
        check_table(&doc, kind.schema(), kind.expandable(), &kinds);
    }
}

#[test]
fn every_endpoints_shape_is_the_response_the_spec_declares() {
    let doc = spec();
    let paths = doc["paths"].as_object().unwrap();
    for e in endpoints() {
        let shape_of = crate::stripe::spec::schema::shape;
        let (spec_path, ops) = paths
            .iter()
            .find(|(p, _)| shape_of(p) == shape_of(e.path))
            .unwrap_or_else(|| panic!("{e:?} is not in the spec"));
        let op = &ops[e.verb.as_str().to_ascii_lowercase()];
        let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
        // One object (retrieving a customer may answer the deleted one), or a list.
        let one: BTreeSet<&str> = std::iter::once(schema)
            .chain(schema["anyOf"].as_array().into_iter().flatten())
            .filter_map(ref_name)
            .map(|name| name.trim_start_matches("deleted_"))
            .collect();
        let declared = match one.len() {
            1 => format!("one {}", one.first().unwrap()),
            _ => format!(
                "list of {}",
                ref_name(&schema["properties"]["data"]["items"]).unwrap_or_else(|| panic!("{spec_path}: {schema}"))
            ),
        };
        let ours = match Shape::of(e.verb, e.path) {
            Some(Shape::One(k)) => format!("one {}", k.schema()),
            Some(Shape::List(k)) => format!("list of {}", k.schema()),
            None => "nothing".into(),
        };
        assert_eq!(ours, declared, "{e:?}");
    }
}
