//! `expand[]`: Stripe's replacement, in a response, of the ids it names by the objects
//! they stand for (`expand[]=latest_charge` on a payment intent answers the charge
//! itself), through dotted paths (`latest_charge.payment_intent`) and, on lists and
//! search results, through their `data` (`data.customer`).
//!
//! Two steps around an endpoint's operation, neither knowing HTTP:
//! - [`Expansion::plan`], before the operation (next to the spec check): reads `expand`
//!   and checks every path against what the endpoint answers ([`Shape`]) and the
//!   tables of what each object may expand ([`tables`]). A path Stripe would refuse is
//!   its 400, `This property cannot be expanded (foo).`, with `param` naming the entry
//!   (`expand[0]`); nothing has run, so nothing is charged and the idempotency key stays
//!   free. Without `expand` the plan is empty and costs nothing more.
//! - [`Expansion::apply`], on the operation's reply: the object's JSON with the named
//!   ids replaced by the objects as their retrieve answers them (a deleted customer as
//!   Stripe's deleted object), nested paths expanded inside them. The pipeline stores
//!   what it sends, so a replay under the same idempotency key answers the same bytes.
//!
//! Stripe's rules, as fauxpay reads them: a path has at most four levels
//! (`data.latest_charge.payment_intent.customer`); a list's items are expanded only
//! through `data.…`, and naming an item's field without it gets Stripe's hint (`You may
//! want to try expanding 'data.customer' instead.`); a field that is `null` stays
//! `null`. Fields Stripe can expand and fauxpay has no object for (`balance_transaction`,
//! `invoice`, `application`, …: see [`tables::Expandable::accepted`]) are accepted and
//! left as they are, like the parameters fauxpay accepts without modelling them.

pub mod tables;

use serde_json::Value;

use crate::error::ApiError;
use crate::reply::Reply;
use crate::resources::endpoint::Verb;
use crate::state::payments::Payments;
use crate::stripe::expand::tables::{include, resolve, Expandable, Included, Kind, Target};
use crate::stripe::params::{Kind as ParamKind, Params};

/// The most levels a path may have (`data.latest_charge.payment_intent.customer`).
pub const MAX_DEPTH: usize = 4;

/// What an endpoint answers, as expansion sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One object of this kind.
    One(Kind),
    /// A list or a search result of objects of this kind (their fields under `data.…`).
    List(Kind),
}

impl Shape {
    /// What `verb path` answers: an object of the last resource its path names
    /// (`/v1/payment_intents/{id}/confirm` a payment intent,
    /// `/v1/customers/{id}/payment_methods` payment methods), a list when it is a GET of
    /// that resource's collection or of its search. A unit test holds this to the
    /// response the spec declares for every endpoint fauxpay serves.
    pub fn of(verb: Verb, path: &str) -> Option<Shape> {
        let segments: Vec<&str> = path.strip_prefix("/v1/")?.split('/').collect();
        let (at, kind) = segments
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, s)| Kind::of_resource(s).map(|k| (i, k)))?;
        let list = verb == Verb::Get && matches!(&segments[at + 1..], [] | ["search"]);
        Some(if list { Shape::List(kind) } else { Shape::One(kind) })
    }
}

/// The expansions a request asks for, checked: a tree of the fields to expand.
#[derive(Debug, Default)]
pub struct Expansion {
    nodes: Vec<Node>,
    /// Whether any path expands something (every path may name only accepted fields).
    effective: bool,
}

/// One field of a path, and the fields named below it.
#[derive(Debug)]
struct Node {
    name: Box<str>,
    step: Step,
    children: Vec<Node>,
}

/// What happens at a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// An id, replaced by the object of this kind.
    Resolve(Kind),
    /// A hash, or a list's `data`: its fields (each item's) are expanded in place.
    Descend,
    /// A list Stripe sends only when expanded: added.
    Include(Included),
    /// Accepted, nothing to expand.
    Skip,
}

/// Where a path is, while it is checked.
#[derive(Clone, Copy)]
enum Context {
    /// In an object (or a hash inside one) with these expandable fields.
    Object(&'static Expandable),
    /// In a list of objects of this kind: only `data` goes on.
    List(Kind),
    /// Below an accepted field: fauxpay does not look further.
    Unchecked,
}

impl Expansion {
    /// Reads and checks `expand` for an endpoint answering `verb path` (empty when the
    /// request has no `expand`).
    pub fn plan(verb: Verb, path: &str, params: &Params) -> Result<Expansion, ApiError> {
        let Some(expand) = params.get("expand") else {
            return Ok(Expansion::default());
        };
        let items = match expand.kind() {
            ParamKind::List(items) => items,
            // The spec check refuses a scalar `expand` before this runs.
            _ => {
                return Err(ApiError::invalid_param(
                    "expand",
                    "Invalid array: expand must be a list (e.g. expand[]=value).",
                ))
            }
        };
        let mut plan = Expansion::default();
        if items.is_empty() {
            return Ok(plan);
        }
        let shape = Shape::of(verb, path);
        for (i, item) in items.iter().enumerate() {
            // An empty entry unsets nothing and expands nothing.
            let Some(text) = item.as_text() else { continue };
            plan.add(shape, text).map_err(|message| {
                let param = format!("expand[{i}]");
                ApiError::invalid_request(message, Some(param))
            })?;
        }
        Ok(plan)
    }

    /// Whether there is nothing to expand.
    pub fn is_empty(&self) -> bool {
        !self.effective
    }

    /// Checks `path` against `shape` and adds it to the tree; the error message if it
    /// cannot be expanded.
    fn add(&mut self, shape: Option<Shape>, path: &str) -> Result<(), String> {
        let cannot = || format!("This property cannot be expanded ({path}).");
        if path.split('.').count() > MAX_DEPTH {
            return Err(format!(
                "You cannot expand more than {MAX_DEPTH} levels of a property. Property: {path}"
            ));
        }
        let mut context = match shape {
            Some(Shape::One(kind)) => Context::Object(kind.expandable()),
            Some(Shape::List(kind)) => Context::List(kind),
            None => return Err(cannot()),
        };
        let mut nodes = &mut self.nodes;
        for (depth, name) in path.split('.').enumerate() {
            let (step, next) = match context {
                Context::Unchecked => (Step::Skip, Context::Unchecked),
                Context::List(kind) if name == "data" => (Step::Descend, Context::Object(kind.expandable())),
                Context::List(kind) => {
                    // Stripe's hint when the path names an item's field without `data.`.
                    let on_items = depth == 0 && Expansion::default().add(Some(Shape::One(kind)), path).is_ok();
                    return Err(if on_items {
                        format!("{} You may want to try expanding 'data.{path}' instead.", cannot())
                    } else {
                        cannot()
                    });
                }
                Context::Object(table) => match table.target(name) {
                    None => return Err(cannot()),
                    Some(None) => (Step::Skip, Context::Unchecked),
                    Some(Some(Target::Object(kind))) => (Step::Resolve(kind), Context::Object(kind.expandable())),
                    Some(Some(Target::Inner(inner))) => (Step::Descend, Context::Object(inner)),
                    Some(Some(Target::Included(list))) => (Step::Include(list), Context::List(list.kind())),
                },
            };
            self.effective |= step != Step::Skip;
            let at = match nodes.iter().position(|n| &*n.name == name) {
                Some(at) => at,
                None => {
                    nodes.push(Node {
                        name: name.into(),
                        step,
                        children: Vec::new(),
                    });
                    nodes.len() - 1
                }
            };
            nodes = &mut nodes[at].children;
            context = next;
        }
        Ok(())
    }

    /// `reply` with the planned fields expanded (`reply` itself when there is nothing to
    /// expand).
    pub fn apply(&self, p: &Payments, reply: Reply) -> Reply {
        if !self.effective {
            return reply;
        }
        let mut value = match reply {
            Reply::Json(v) => *v,
            other => other.json(),
        };
        // One of fauxpay's objects, by its tag (a list's tag is `list` or `search_result`).
        let owner = value.get("object").and_then(Value::as_str).and_then(kind_of_object);
        expand(p, &mut value, owner, &self.nodes);
        Reply::Json(Box::new(value))
    }
}

/// Expands `nodes` in `object` (of kind `owner`, when it is one of fauxpay's objects
/// rather than a hash inside one or a list).
fn expand(p: &Payments, object: &mut Value, owner: Option<Kind>, nodes: &[Node]) {
    // The object's own id, for what is found through it (a payment method it paid with,
    // a list it includes).
    let needs_id = nodes
        .iter()
        .any(|n| matches!(n.step, Step::Resolve(Kind::PaymentMethod) | Step::Include(_)));
    let own_id: Option<String> = if needs_id {
        object.get("id").and_then(Value::as_str).map(str::to_owned)
    } else {
        None
    };
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    for node in nodes {
        match node.step {
            Step::Skip => {}
            Step::Descend => match fields.get_mut(&*node.name) {
                Some(Value::Array(items)) => {
                    for item in items {
                        let kind = item.get("object").and_then(Value::as_str).and_then(kind_of_object);
                        expand(p, item, kind, &node.children);
                    }
                }
                Some(inner @ Value::Object(_)) => expand(p, inner, None, &node.children),
                _ => {}
            },
            Step::Resolve(kind) => {
                let Some(field) = fields.get_mut(&*node.name) else {
                    continue;
                };
                if let Value::String(id) = field {
                    let by = owner.zip(own_id.as_deref());
                    if let Some(found) = resolve(p, kind, id, by) {
                        *field = found;
                    }
                }
                if field.is_object() {
                    expand(p, field, Some(kind), &node.children);
                }
            }
            Step::Include(list) => {
                let Some(mut found) = own_id.as_deref().and_then(|id| include(p, list, id)) else {
                    continue;
                };
                expand(p, &mut found, None, &node.children);
                fields.insert(node.name.to_string(), found);
            }
        }
    }
}

/// The kind of an object by its `object` tag.
fn kind_of_object(tag: &str) -> Option<Kind> {
    Kind::ALL.iter().copied().find(|k| k.schema() == tag)
}

#[cfg(test)]
mod tests;
