//! A load test's checkout as loaded: the template's request (the payment step's, for a
//! multi-step template) and, when it has `[[step]]`s, its flow. Loads a bundled template
//! by name or a TOML file, one request or many.

use crate::error::ConfigError;
use crate::steps::{self, Flow, FlowFile, StepKind};
use crate::template::{self, Names, Template};

/// A template and its flow.
#[derive(Debug, Clone)]
pub struct Plan {
    pub template: Template,
    /// With `[[step]]`s: the steps around the template's request (the payment step).
    pub flow: Option<Flow>,
}

impl Plan {
    /// A bundled template by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Self, ConfigError> {
        Self::load_with(name_or_path, &[])
    }

    /// [`Plan::load`], its placeholders also taking `columns` (a feeder's), which come
    /// first in every payment's captured values.
    pub fn load_with(name_or_path: &str, columns: &[String]) -> Result<Self, ConfigError> {
        let (file, text) = template::source(name_or_path)?;
        Self::parse_with(&file, &text, columns)
    }

    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        Self::parse_with(file, text, &[])
    }

    pub fn parse_with(file: &str, text: &str, columns: &[String]) -> Result<Self, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| template::toml_error(file, text, e))?;
        if !table.contains_key("step") {
            let index: Vec<u16> = (0..columns.len() as u16).collect();
            let names = Names {
                before: columns,
                index: &index,
                later: &[],
            };
            return Ok(Self {
                template: Template::parse_with(file, text, &names)?,
                flow: None,
            });
        }
        let f: FlowFile = toml::from_str(text).map_err(|e| template::toml_error(file, text, e))?;
        let steps::Compiled { payment: p, flow } = steps::compile(file, &f, columns)?;
        let names = Names {
            before: &p.before,
            index: &p.index,
            later: &p.later,
        };
        let field = flow
            .steps
            .iter()
            .position(|s| matches!(s.kind, StepKind::Payment))
            .map(|i| format!("step {} ({})", i + 1, flow.steps[i].name))
            .unwrap_or_default();
        let template = Template::request(
            file,
            &field,
            &p.method,
            &p.path,
            Some(p.format),
            Some(&p.body),
            &p.headers,
            &names,
        )?
        .into_payment_step(file, &f.name, p.payment_id, f.fulfillment.as_ref())?;
        let mut flow = flow;
        // The payment step is not sent without the values it uses.
        if let Some(step) = flow.steps.iter_mut().find(|s| matches!(s.kind, StepKind::Payment)) {
            step.needs = template.captures_used();
        }
        Ok(Self {
            template,
            flow: Some(flow),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Values;

    #[test]
    fn a_feeders_columns_are_placeholders_of_one_request_and_of_every_step() {
        let one = r#"
name = "mine"
method = "POST"
path = "/pay/{{shop}}"
format = "form"
body = "card={{payment_method}}&order={{order_id}}"
"#;
        let columns = ["payment_method".to_string(), "shop".to_string()];
        let plan = Plan::parse_with("mine.toml", one, &columns).unwrap();
        let captures = [Some("pm_card_visa".to_string()), Some("eu-1".to_string())];
        let values = Values {
            order_id: "o-1",
            amount: 100,
            currency: "usd",
            idempotency_key: None,
            payment_method: "pm_card_visa",
            api_key: "",
            captures: &captures,
        };
        assert_eq!(plan.template.render(&values).path, "/pay/eu-1");
        // Without the feeder, the column is an unknown placeholder.
        let e = Plan::parse("mine.toml", one).unwrap_err().to_string();
        assert!(e.contains("unknown placeholder {{shop}}"), "{e}");
        // In a flow, the columns come first and every step may use them.
        let flow = r#"
name = "steps"
[[step]]
name = "pay"
payment = true
path = "/pay/{{shop}}"
format = "form"
body = "order={{order_id}}"
capture = { id = "/id" }
[[step]]
path = "/shops/{{shop}}/orders/{{id}}"
"#;
        let plan = Plan::parse_with("steps.toml", flow, &columns).unwrap();
        assert_eq!(plan.flow.unwrap().names, ["payment_method", "shop", "id"]);
    }
}
