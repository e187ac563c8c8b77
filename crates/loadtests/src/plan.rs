//! A load test's checkout as loaded: the template's request (the payment step's, for a
//! multi-step template) and, when it has `[[step]]`s, its flow. Loads a bundled template
//! by name or a TOML file, one request or many; as a `--scenario`, also a flow without a
//! payment step (one that only browses).

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

/// A scenario's template as loaded: one that pays, or a flow that only browses (no
/// payment step: it adds load and latency, and nothing to reconcile).
#[derive(Debug, Clone)]
pub enum Loaded {
    Pays(Box<Plan>),
    Browses { name: String, flow: Flow },
}

impl Loaded {
    /// The template's `name`.
    pub fn name(&self) -> &str {
        match self {
            Loaded::Pays(p) => &p.template.name,
            Loaded::Browses { name, .. } => name,
        }
    }

    /// Its steps' names (none for a one-request template).
    pub fn step_names(&self) -> Vec<&str> {
        let flow = match self {
            Loaded::Pays(p) => p.flow.as_ref(),
            Loaded::Browses { flow, .. } => Some(flow),
        };
        flow.map(|f| f.steps.iter().map(|s| s.name.as_str()).collect())
            .unwrap_or_default()
    }
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
        match Self::parse_any(file, text, columns)? {
            Loaded::Pays(plan) => Ok(*plan),
            Loaded::Browses { .. } => Err(ConfigError::new(
                file,
                "step",
                "exactly one step with payment = true (the request whose retries, keys and --mix apply; a flow without one runs only as a --scenario beside one that pays)",
            )),
        }
    }

    /// A scenario's template: a bundled one by name, or a TOML file, with or without a
    /// payment step.
    pub fn load_scenario(name_or_path: &str, columns: &[String]) -> Result<Loaded, ConfigError> {
        let (file, text) = template::source(name_or_path)?;
        Self::parse_any(&file, &text, columns)
    }

    pub fn parse_any(file: &str, text: &str, columns: &[String]) -> Result<Loaded, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| template::toml_error(file, text, e))?;
        if !table.contains_key("step") {
            let index: Vec<u16> = (0..columns.len() as u16).collect();
            let names = Names {
                before: columns,
                index: &index,
                later: &[],
            };
            return Ok(Loaded::Pays(Box::new(Self {
                template: Template::parse_with(file, text, &names)?,
                flow: None,
            })));
        }
        let f: FlowFile = toml::from_str(text).map_err(|e| template::toml_error(file, text, e))?;
        let steps::Compiled { payment, flow } = steps::compile(file, &f, columns)?;
        let Some(p) = payment else {
            if f.fulfillment.is_some() {
                return Err(ConfigError::new(
                    file,
                    "fulfillment",
                    "a payment step (a flow without one pays no order to probe)",
                ));
            }
            return Ok(Loaded::Browses { name: f.name, flow });
        };
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
        Ok(Loaded::Pays(Box::new(Self {
            template,
            flow: Some(flow),
        })))
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
