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
        let (file, text) = template::source(name_or_path)?;
        Self::parse(&file, &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| template::toml_error(file, text, e))?;
        if !table.contains_key("step") {
            return Ok(Self {
                template: Template::parse(file, text)?,
                flow: None,
            });
        }
        let f: FlowFile = toml::from_str(text).map_err(|e| template::toml_error(file, text, e))?;
        let steps::Compiled { payment: p, flow } = steps::compile(file, &f)?;
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
        Ok(Self {
            template,
            flow: Some(flow),
        })
    }
}
