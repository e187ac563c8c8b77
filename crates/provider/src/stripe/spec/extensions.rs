//! fauxpay's declared additions to Stripe's spec: parameters fauxpay models that the
//! public spec leaves out. Each is grafted into the spec before it is compiled, with
//! Stripe's own schema for the same thing taken from elsewhere in the spec, so the
//! parameter is typed and checked like any other (not silently accepted), and docs/api.md
//! lists it. A parameter of a later API version the spec has no schema for at all
//! (`ui_mode` on a Checkout Session) takes a schema written here.

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
    /// The schema it takes.
    pub schema: Source,
    /// Why fauxpay needs it.
    pub why: &'static str,
}

/// Where an added parameter's schema comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// Stripe's own schema elsewhere in the spec: a JSON pointer, and that schema's `title`.
    Stripe { pointer: &'static str, title: &'static str },
    /// A schema written here (JSON), for a parameter of a later API version that the spec
    /// has no schema for.
    Written(&'static str),
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
        schema: Source::Stripe {
            pointer: CARD_DETAILS,
            title: "card_details_params",
        },
        why: RAW_CARD,
    },
    Extension {
        verb: Verb::Post,
        path: "/v1/payment_intents/{intent}/confirm",
        param: "payment_method_data[card]",
        schema: Source::Stripe {
            pointer: CARD_DETAILS,
            title: "card_details_params",
        },
        why: RAW_CARD,
    },
    Extension {
        verb: Verb::Post,
        path: "/v1/checkout/sessions",
        param: "ui_mode",
        schema: Source::Written(r#"{"type":"string","enum":["custom","embedded","hosted"],"maxLength":5000}"#),
        why: "Stripe's later API versions choose the page a Checkout Session uses; fauxpay serves the hosted page (ui_mode=hosted) and refuses the two that need Stripe.js with a 400 naming ui_mode.",
    },
];

/// Grafts every extension into `doc` (an OpenAPI document); an extension that no longer
/// fits (its source schema moved, or the spec now has the parameter) is an error.
pub fn apply(doc: &mut Value) -> Result<(), String> {
    for ext in EXTENSIONS {
        let source = match ext.schema {
            Source::Stripe { pointer, title } => doc
                .pointer(pointer)
                .filter(|s| s.get("title").and_then(Value::as_str) == Some(title))
                .cloned()
                .ok_or_else(|| format!("extension {}: no schema {title} at {pointer}", ext.param))?,
            Source::Written(json) => serde_json::from_str(json)
                .map_err(|e| format!("extension {}: its schema is not JSON: {e}", ext.param))?,
        };
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
