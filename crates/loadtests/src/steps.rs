//! Multi-step templates as written and compiled: the `[[step]]`s of a template, each
//! with its request, captures, think time, condition and poll, exactly one of them the
//! payment step, and the `[outcome]` rules (see `flow` for how a flow runs). Also what is
//! kept of a step's run ([`StepRecord`]).

use std::collections::BTreeMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use serde::Deserialize;

use crate::error::ConfigError;
use crate::pointer::Pointer;
use crate::template::{BodyFormat, Names, Template};

/// Where a step is sent: the target under test, or the provider (the customer's browser
/// steps: a confirm with the publishable key, 3-D Secure, a Checkout page's pay).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Base {
    #[default]
    Target,
    Provider,
}

/// Where a captured value is read from an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A JSON pointer into the body (a string as it is, a number or boolean as written).
    Json(Pointer),
    /// A response header.
    Header(reqwest::header::HeaderName),
}

/// One value captured from an answer into the capture at `index`: from the first of
/// its sources the answer has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    pub index: u16,
    pub sources: Vec<Source>,
}

/// Captured values that must match: every named capture must hold one of its values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Condition(Vec<(u16, Vec<String>)>);

impl Condition {
    pub fn holds(&self, captures: &[Option<String>]) -> bool {
        self.0.iter().all(|(i, values)| {
            captures
                .get(usize::from(*i))
                .and_then(|c| c.as_deref())
                .is_some_and(|c| values.iter().any(|v| v == c))
        })
    }
}

/// A wait before a step: fixed, or drawn uniformly from a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Think {
    pub min: Duration,
    pub max: Duration,
}

impl Think {
    pub fn pick(&self, rng: &mut StdRng) -> Duration {
        if self.max <= self.min {
            return self.min;
        }
        let span = (self.max - self.min).as_micros() as u64;
        self.min + Duration::from_micros(rng.random_range(0..=span))
    }
}

/// Repeat a step every `every` until `until` holds, for at most `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll {
    pub every: Duration,
    pub timeout: Duration,
    pub until: Condition,
}

/// A step other than the payment step.
#[derive(Debug, Clone)]
pub struct Request {
    pub base: Base,
    /// The request, as a template's (its payment-id pointers unused).
    pub template: Template,
    pub poll: Option<Poll>,
}

#[derive(Debug, Clone)]
pub enum StepKind {
    /// The template's own request, with keys, retries and the mix.
    Payment,
    Request(Box<Request>),
}

/// One compiled step.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub kind: StepKind,
    pub think: Option<Think>,
    pub when: Option<Condition>,
    pub captures: Vec<Capture>,
    /// The captures its request uses (it is skipped, and the flow ends, without them).
    pub needs: Vec<u16>,
}

/// A multi-step template's steps and outcome rules.
#[derive(Debug, Clone)]
pub struct Flow {
    pub steps: Vec<Step>,
    /// The capture names, by index.
    pub names: Vec<String>,
    pub ok: Option<Condition>,
    pub fail: Option<Condition>,
}

impl Flow {
    /// The payment step's name.
    pub fn payment_step(&self) -> Option<&str> {
        self.steps
            .iter()
            .find(|s| matches!(s.kind, StepKind::Payment))
            .map(|s| s.name.as_str())
    }
}

/// A template with steps, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FlowFile {
    pub name: String,
    pub step: Vec<StepFile>,
    #[serde(default)]
    pub outcome: Option<OutcomeFile>,
    #[serde(default)]
    pub fulfillment: Option<crate::template::ProbeFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepFile {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub payment: bool,
    #[serde(default)]
    pub base: Base,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub format: Option<BodyFormat>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub capture: BTreeMap<String, OneOf>,
    #[serde(default)]
    pub think: Option<String>,
    #[serde(default, rename = "if")]
    pub when: Option<BTreeMap<String, OneOf>>,
    #[serde(default)]
    pub poll: Option<PollFile>,
    #[serde(default)]
    pub payment_id: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOf {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PollFile {
    pub every: String,
    #[serde(default)]
    pub timeout: Option<String>,
    pub until: BTreeMap<String, OneOf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutcomeFile {
    #[serde(default)]
    pub ok: Option<BTreeMap<String, OneOf>>,
    #[serde(default)]
    pub fail: Option<BTreeMap<String, OneOf>>,
}

fn duration(file: &str, field: &str, text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        ConfigError::new(
            file,
            field,
            format!("a duration such as 200ms or 2s, got '{text}' ({e})"),
        )
    })
}

fn think(file: &str, field: &str, text: &str) -> Result<Think, ConfigError> {
    let (min, max) = match text.split_once("..") {
        Some((a, b)) => (duration(file, field, a)?, duration(file, field, b)?),
        None => {
            let d = duration(file, field, text)?;
            (d, d)
        }
    };
    if max < min {
        return Err(ConfigError::new(
            file,
            field,
            format!("a range from low to high, got '{text}'"),
        ));
    }
    if max > Duration::from_secs(600) {
        return Err(ConfigError::new(file, field, "at most 10m"));
    }
    Ok(Think { min, max })
}

/// The captures of every step in order, by name: the index of each name, and for each
/// step the names captured before it.
struct Captures {
    names: Vec<String>,
}

impl Captures {
    fn index(&mut self, name: &str) -> u16 {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i as u16,
            None => {
                self.names.push(name.to_string());
                (self.names.len() - 1) as u16
            }
        }
    }
}

fn condition(
    file: &str,
    field: &str,
    written: &BTreeMap<String, OneOf>,
    known: &[String],
) -> Result<Condition, ConfigError> {
    if written.is_empty() {
        return Err(ConfigError::new(file, field, "at least one captured value to match"));
    }
    let mut out = Vec::new();
    for (name, values) in written {
        let i = known.iter().position(|n| n == name).ok_or_else(|| {
            ConfigError::new(
                file,
                &format!("{field}.{name}"),
                format!(
                    "a value captured by this or an earlier step ({}), got '{name}'",
                    if known.is_empty() {
                        "none yet".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        })?;
        let values = match values {
            OneOf::One(v) => vec![v.clone()],
            OneOf::Many(v) if !v.is_empty() => v.clone(),
            OneOf::Many(_) => {
                return Err(ConfigError::new(
                    file,
                    &format!("{field}.{name}"),
                    "a value or a list of values",
                ))
            }
        };
        out.push((i as u16, values));
    }
    Ok(Condition(out))
}

/// What a flow file compiles into: the payment step's request (the template's own
/// fields; none in a flow that only browses) and the flow.
pub(crate) struct Compiled {
    pub payment: Option<PaymentStep>,
    pub flow: Flow,
}

/// The payment step's request, as written (the template compiles it).
pub(crate) struct PaymentStep {
    pub method: String,
    pub path: String,
    pub format: BodyFormat,
    pub body: String,
    pub headers: BTreeMap<String, String>,
    pub payment_id: Option<Vec<String>>,
    /// The names its placeholders may use.
    pub before: Vec<String>,
    pub index: Vec<u16>,
    pub later: Vec<String>,
}

/// Compiles the steps of `file` (see the module docs for the rules it checks): at most
/// one payment step (a flow without one only browses: see `plan`).
/// `preset`: the names a feeder's columns give, captured before the first step.
pub(crate) fn compile(file: &str, f: &FlowFile, preset: &[String]) -> Result<Compiled, ConfigError> {
    if f.step.is_empty() {
        return Err(ConfigError::new(file, "step", "at least one [[step]]"));
    }
    if f.step.len() > 32 {
        return Err(ConfigError::new(file, "step", "at most 32 steps"));
    }
    let payments: Vec<usize> = (0..f.step.len()).filter(|i| f.step[*i].payment).collect();
    if let [_, second, ..] = payments.as_slice() {
        return Err(ConfigError::new(
            file,
            &format!("step {} ({}).payment", second + 1, step_name(&f.step[*second], *second)),
            "exactly one payment step, and an earlier step already is one",
        ));
    }
    // Capture names in the order steps first capture them.
    let mut all = Captures { names: preset.to_vec() };
    let mut captured_by: Vec<Vec<String>> = Vec::new();
    for s in &f.step {
        captured_by.push(s.capture.keys().cloned().collect());
        for name in s.capture.keys() {
            all.index(name);
        }
    }
    let mut steps = Vec::new();
    let mut payment = None;
    for (i, s) in f.step.iter().enumerate() {
        let name = step_name(s, i);
        if ["payment", "attempt"].contains(&name.as_str())
            || f.step[..i].iter().enumerate().any(|(j, o)| step_name(o, j) == name)
        {
            return Err(ConfigError::new(
                file,
                &format!("step {} ({name}).name", i + 1),
                "a name of its own (not another step's, nor payment or attempt, which --gate reads as the payment's and its attempts' latency)",
            ));
        }
        let field = |f: &str| format!("step {} ({name}).{f}", i + 1);
        let before: Vec<String> = preset
            .iter()
            .chain(captured_by[..i].iter().flatten())
            .cloned()
            .collect::<Vec<_>>();
        let mut before_unique: Vec<String> = Vec::new();
        for n in before {
            if !before_unique.contains(&n) {
                before_unique.push(n);
            }
        }
        let later: Vec<String> = all
            .names
            .iter()
            .filter(|n| !before_unique.contains(n))
            .cloned()
            .collect();
        let index: Vec<u16> = before_unique.iter().map(|n| all.index(n)).collect();
        let path = s.path.clone().ok_or_else(|| {
            ConfigError::new(
                file,
                &field("path"),
                "a path starting with '/' (every step sends a request)",
            )
        })?;
        if !path.starts_with('/') {
            return Err(ConfigError::new(file, &field("path"), "a path starting with '/'"));
        }
        let captures = s
            .capture
            .iter()
            .map(|(cname, written)| {
                let at = field(&format!("capture.{cname}"));
                let written: Vec<&String> = match written {
                    OneOf::One(one) => vec![one],
                    OneOf::Many(many) => many.iter().collect(),
                };
                if written.is_empty() {
                    return Err(ConfigError::new(
                        file,
                        &at,
                        "a JSON pointer or header:NAME, or a list of them",
                    ));
                }
                let sources = written
                    .into_iter()
                    .map(|source| match source.strip_prefix("header:") {
                        Some(h) => reqwest::header::HeaderName::from_bytes(h.trim().as_bytes())
                            .map(Source::Header)
                            .map_err(|_| ConfigError::new(file, &at, "a valid header name after header:")),
                        None => Pointer::rooted(source).map(Source::Json).ok_or_else(|| {
                            ConfigError::new(
                                file,
                                &at,
                                format!("a JSON pointer starting with '/' or header:NAME, got '{source}'"),
                            )
                        }),
                    })
                    .collect::<Result<Vec<_>, ConfigError>>()?;
                Ok(Capture {
                    index: all.index(cname),
                    sources,
                })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        let think = s
            .think
            .as_deref()
            .map(|t| think(file, &field("think"), t))
            .transpose()?;
        let when = s
            .when
            .as_ref()
            .map(|w| condition(file, &field("if"), w, &before_unique))
            .transpose()?;
        let names = Names {
            before: &before_unique,
            index: &index,
            later: &later,
        };
        if s.payment {
            if s.poll.is_some() || s.when.is_some() {
                return Err(ConfigError::new(
                    file,
                    &field(if s.poll.is_some() { "poll" } else { "if" }),
                    "no poll or if on the payment step (it always runs, once, with its retries)",
                ));
            }
            if s.base != Base::Target {
                return Err(ConfigError::new(
                    file,
                    &field("base"),
                    "the target (the payment step is sent to the API under test)",
                ));
            }
            let (Some(format), Some(body)) = (s.format, s.body.clone()) else {
                return Err(ConfigError::new(
                    file,
                    &field(if s.format.is_none() { "format" } else { "body" }),
                    "a format (json or form) and a body on the payment step",
                ));
            };
            payment = Some(PaymentStep {
                method: s.method.clone().unwrap_or_else(|| "POST".into()),
                path,
                format,
                body,
                headers: s.headers.clone(),
                payment_id: s.payment_id.clone(),
                before: before_unique.clone(),
                index: index.clone(),
                later: later.clone(),
            });
            steps.push(Step {
                name,
                kind: StepKind::Payment,
                think,
                when: None,
                captures,
                needs: Vec::new(),
            });
            continue;
        }
        if s.payment_id.is_some() {
            return Err(ConfigError::new(
                file,
                &field("payment_id"),
                "payment_id only on the payment step",
            ));
        }
        let poll = match &s.poll {
            None => None,
            Some(p) => {
                let timeout = p.timeout.as_deref().ok_or_else(|| {
                    ConfigError::new(file, &field("poll.timeout"), "a timeout (a poll must end), such as 10s")
                })?;
                let every = duration(file, &field("poll.every"), &p.every)?;
                let timeout = duration(file, &field("poll.timeout"), timeout)?;
                if every.is_zero() || timeout < every || timeout > Duration::from_secs(600) {
                    return Err(ConfigError::new(
                        file,
                        &field("poll"),
                        "every above zero, and a timeout of at least one period and at most 10m",
                    ));
                }
                // The poll's own captures count for its condition.
                let mut known = before_unique.clone();
                known.extend(s.capture.keys().cloned());
                Some(Poll {
                    every,
                    timeout,
                    until: condition(file, &field("poll.until"), &p.until, &known)?,
                })
            }
        };
        let method = s.method.clone().unwrap_or_else(|| "GET".into());
        let template = Template::request(
            file,
            &format!("step {} ({name})", i + 1),
            &method,
            &path,
            s.format,
            s.body.as_deref(),
            &s.headers,
            &names,
        )?;
        let needs = template.captures_used();
        steps.push(Step {
            name,
            kind: StepKind::Request(Box::new(Request {
                base: s.base,
                template,
                poll,
            })),
            think,
            when,
            captures,
            needs,
        });
    }
    let known = all.names.clone();
    let (ok, fail) = match &f.outcome {
        None => (None, None),
        Some(o) => (
            o.ok.as_ref()
                .map(|c| condition(file, "outcome.ok", c, &known))
                .transpose()?,
            o.fail
                .as_ref()
                .map(|c| condition(file, "outcome.fail", c, &known))
                .transpose()?,
        ),
    };
    Ok(Compiled {
        payment,
        flow: Flow {
            steps,
            names: all.names,
            ok,
            fail,
        },
    })
}

fn step_name(s: &StepFile, i: usize) -> String {
    s.name.clone().unwrap_or_else(|| format!("step{}", i + 1))
}

/// One run of a step other than the payment step, kept in the payment's record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StepRecord {
    pub name: String,
    /// The last answer's status (none: no answer).
    pub status: Option<u16>,
    /// Microseconds since the run started, and from the step's first send to its end.
    pub start_us: u64,
    pub elapsed_us: u64,
    /// Sends (more than one for a poll).
    pub sends: u32,
}
