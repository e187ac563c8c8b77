//! fauxpay's declared additions to Stripe's spec: parameters fauxpay models that the
//! public spec leaves out. Each is grafted into the spec before it is compiled, with
//! Stripe's own schema for the same thing taken from elsewhere in the spec, so the
//! parameter is typed and checked like any other (not silently accepted), and docs/api.md
//! lists it.

use serde_json::Value;

use crate::resources::endpoint::Verb;

/// One added parameter.
#[derive(Debug, Clone, Copy)]
pub struct Extension {
    pub verb: Verb,
    /// Stripe's path of the endpoint that gains the parameter.
    pub path: &'static str,
    /// Where the parameter goes, in bracket notation (`payment_method_data[card]`).
    pub param: &'static str,
    /// A JSON pointer to the Stripe schema it takes, and that schema's `title`.
    pub schema_from: &'static str,
    pub schema_title: &'static str,
    /// Why fauxpay needs it.
    pub why: &'static str,
}

/// `POST /v1/payment_methods`' `card[…]` card details (number, exp_month, exp_year, cvc).
const CARD_DETAILS: &str = "/paths/~1v1~1payment_methods/post/requestBody/content/application~1x-www-form-urlencoded/schema/properties/card/anyOf/0";

const RAW_CARD: &str = "A raw test card number on a payment intent, as Stripe accepts it from accounts with raw card data access (the public spec omits it); the schema is Stripe's own card details from POST /v1/payment_methods.";

/// Every extension.
pub const EXTENSIONS: &[Extension] = &[
    Extension {
        verb: Verb::Post,
        path: "/v1/payment_intents",
        param: "payment_method_data[card]",
        schema_from: CARD_DETAILS,
        schema_title: "card_details_params",
        why: RAW_CARD,
    },
    Extension {
        verb: Verb::Post,
        path: "/v1/payment_intents/{intent}/confirm",
        param: "payment_method_data[card]",
        schema_from: CARD_DETAILS,
        schema_title: "card_details_params",
        why: RAW_CARD,
    },
];

/// Grafts every extension into `doc` (an OpenAPI document); an extension that no longer
/// fits (its source schema moved, or the spec now has the parameter) is an error.
pub fn apply(doc: &mut Value) -> Result<(), String> {
    for ext in EXTENSIONS {
        let source = doc
            .pointer(ext.schema_from)
            .filter(|s| s.get("title").and_then(Value::as_str) == Some(ext.schema_title))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "extension {}: no schema {} at {}",
                    ext.param, ext.schema_title, ext.schema_from
                )
            })?;
        let method = match ext.verb {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Delete => "delete",
        };
        let body = format!(
            "/paths/{}/{method}/requestBody/content/application~1x-www-form-urlencoded/schema",
            ext.path.replace('~', "~0").replace('/', "~1")
        );
        let mut node = doc
            .pointer_mut(&body)
            .ok_or_else(|| format!("extension {}: no {method} {} in the spec", ext.param, ext.path))?;
        let names: Vec<&str> = ext.param.split('[').map(|s| s.trim_end_matches(']')).collect();
        let Some((last, parents)) = names.split_last() else {
            continue;
        };
        for name in parents {
            node = node
                .get_mut("properties")
                .and_then(|p| p.get_mut(*name))
                .ok_or_else(|| format!("extension {}: {} has no {name}", ext.param, ext.path))?;
        }
        let properties = node
            .get_mut("properties")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| format!("extension {}: not an object in {}", ext.param, ext.path))?;
        if properties.contains_key(*last) {
            return Err(format!(
                "extension {}: the spec already has it on {}; remove the extension",
                ext.param, ext.path
            ));
        }
        properties.insert((*last).to_string(), source);
    }
    Ok(())
}
