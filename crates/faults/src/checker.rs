//! The validation toolkit: a [`Checker`] collects [`Diagnostic`]s while typed readers
//! (strings, numbers, durations, tables) take values out of a [`Node`] tree, each mistake
//! becoming one line that names the field and what was expected. No schema knowledge
//! lives here; `parse` says which fields exist.

use std::time::Duration;

use super::error::Diagnostic;
use super::tree::{Node, Value};

/// Longest duration any profile field takes (`key_ttl`, a window's `start` and
/// `duration`); fields that hold a request have tighter bounds (see `parse`).
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Collects the mistakes found in one source.
pub(crate) struct Checker {
    source: String,
    pub diagnostics: Vec<Diagnostic>,
}

/// A table being read, with its field path (`rules[0].match`) and line.
pub(crate) struct Table<'n> {
    pub path: String,
    pub line: Option<u32>,
    pub entries: &'n [(String, Node)],
}

impl<'n> Table<'n> {
    pub fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, n)| n)
    }

    /// The full path of one of its fields.
    pub fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

/// `parent.key`, or `key` at the root.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Checker {
    pub fn new(source: &str) -> Self {
        Checker {
            source: source.to_string(),
            diagnostics: Vec::new(),
        }
    }

    pub fn error(&mut self, line: Option<u32>, field: &str, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            source: self.source.clone(),
            line,
            field: field.to_string(),
            message: message.into(),
        });
    }

    fn type_error(&mut self, node: &Node, field: &str, expected: &str) {
        self.error(
            node.line,
            field,
            format!("expected {expected}, got {}", node.describe()),
        );
    }

    /// Reads a table.
    pub fn table<'n>(&mut self, node: &'n Node, path: &str) -> Option<Table<'n>> {
        match &node.value {
            Value::Table(entries) => Some(Table {
                path: path.to_string(),
                line: node.line,
                entries,
            }),
            _ => {
                self.type_error(node, path, "a table");
                None
            }
        }
    }

    /// Reports every field of `table` not in `allowed`.
    pub fn only(&mut self, table: &Table, allowed: &[&str]) {
        for (key, node) in table.entries {
            if !allowed.contains(&key.as_str()) {
                self.unknown(table, key, node, allowed);
            }
        }
    }

    /// Reports one unknown field, suggesting the closest allowed one.
    pub fn unknown(&mut self, table: &Table, key: &str, node: &Node, allowed: &[&str]) {
        let hint = closest(key, allowed)
            .map(|c| format!(" (did you mean `{c}`?)"))
            .unwrap_or_default();
        let message = format!("unknown field, expected one of {}{hint}", allowed.join(", "));
        self.error(node.line, &table.field(key), message);
    }

    /// A required field: reports it missing at the table's line.
    pub fn require<'n>(&mut self, table: &Table<'n>, key: &str, expected: &str) -> Option<&'n Node> {
        let node = table.get(key);
        if node.is_none() {
            self.error(table.line, &table.field(key), format!("missing, expected {expected}"));
        }
        node
    }

    pub fn string<'n>(&mut self, node: &'n Node, field: &str) -> Option<&'n str> {
        match &node.value {
            Value::Str(s) => Some(s),
            _ => {
                self.type_error(node, field, "a string");
                None
            }
        }
    }

    pub fn nonempty_string<'n>(&mut self, node: &'n Node, field: &str) -> Option<&'n str> {
        let s = self.string(node, field)?;
        if s.trim().is_empty() {
            self.error(node.line, field, "expected a non-empty string");
            return None;
        }
        Some(s)
    }

    /// An integer in `min..=max`; `expected` describes the range.
    pub fn integer_in(&mut self, node: &Node, field: &str, min: i64, max: i64, expected: &str) -> Option<i64> {
        let i = match node.value {
            Value::Int(i) => i,
            _ => {
                self.type_error(node, field, expected);
                return None;
            }
        };
        if !(min..=max).contains(&i) {
            self.error(node.line, field, format!("expected {expected}, got {i}"));
            return None;
        }
        Some(i)
    }

    /// A finite number (integer or float) in `min..=max`.
    pub fn number_in(&mut self, node: &Node, field: &str, min: f64, max: f64) -> Option<f64> {
        let expected = format!("a number between {min} and {max}");
        let x = match node.value {
            Value::Float(x) => x,
            Value::Int(i) => i as f64,
            _ => {
                self.type_error(node, field, &expected);
                return None;
            }
        };
        if !x.is_finite() || x < min || x > max {
            self.error(node.line, field, format!("expected {expected}, got {x}"));
            return None;
        }
        Some(x)
    }

    /// A humantime duration string (`250ms`, `2s`, `1m 30s`), zero or more.
    pub fn duration(&mut self, node: &Node, field: &str) -> Option<Duration> {
        self.duration_within(node, field, MAX_DURATION)
    }

    /// A non-negative duration of at most `max`.
    pub fn duration_within(&mut self, node: &Node, field: &str, max: Duration) -> Option<Duration> {
        let Value::Str(s) = &node.value else {
            self.type_error(node, field, "a duration string such as \"250ms\" or \"2s\"");
            return None;
        };
        let text = s.trim();
        if text.starts_with('-') {
            self.error(node.line, field, format!("expected a non-negative duration, got {s:?}"));
            return None;
        }
        match humantime::parse_duration(text) {
            Ok(d) if d > max => {
                self.error(
                    node.line,
                    field,
                    format!(
                        "expected a duration of at most {}, got {s:?}",
                        humantime::format_duration(max)
                    ),
                );
                None
            }
            Ok(d) => Some(d),
            Err(_) => {
                self.error(
                    node.line,
                    field,
                    format!("expected a duration such as \"250ms\" or \"2s\", got {s:?}"),
                );
                None
            }
        }
    }

    /// A duration greater than zero.
    pub fn positive_duration(&mut self, node: &Node, field: &str) -> Option<Duration> {
        self.positive_duration_within(node, field, MAX_DURATION)
    }

    /// A duration greater than zero and at most `max`.
    pub fn positive_duration_within(&mut self, node: &Node, field: &str, max: Duration) -> Option<Duration> {
        let d = self.duration_within(node, field, max)?;
        if d.is_zero() {
            self.error(
                node.line,
                field,
                format!("expected a duration greater than zero, got {:?}", text(node)),
            );
            return None;
        }
        Some(d)
    }
}

fn text(node: &Node) -> &str {
    match &node.value {
        Value::Str(s) => s,
        _ => "",
    }
}

/// The candidate within a small edit distance of `word`, if any.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let len = word.chars().count();
    let limit = (len / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, _)| *d <= limit && *d < len)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance over chars, counting an adjacent transposition as one edit (optimal
/// string alignment), so `nmae` is one edit from `name`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(value: Value) -> Node {
        Node { line: Some(4), value }
    }

    fn first(c: &Checker) -> String {
        c.diagnostics[0].to_string()
    }

    #[test]
    fn durations_reject_negative_unparsable_and_non_strings() {
        let mut c = Checker::new("x.toml");
        assert_eq!(
            c.duration(&node(Value::Str("1m 30s".into())), "d"),
            Some(Duration::from_secs(90))
        );
        assert_eq!(c.duration(&node(Value::Str("-5s".into())), "d"), None);
        assert_eq!(first(&c), "x.toml:4: d: expected a non-negative duration, got \"-5s\"");
        assert_eq!(c.duration(&node(Value::Str("soon".into())), "d"), None);
        assert_eq!(
            c.diagnostics[1].message,
            "expected a duration such as \"250ms\" or \"2s\", got \"soon\""
        );
        assert_eq!(c.duration(&node(Value::Int(5)), "d"), None);
        assert_eq!(
            c.diagnostics[2].message,
            "expected a duration string such as \"250ms\" or \"2s\", got integer 5"
        );
        assert_eq!(c.positive_duration(&node(Value::Str("0s".into())), "d"), None);
        assert_eq!(
            c.diagnostics[3].message,
            "expected a duration greater than zero, got \"0s\""
        );
        assert_eq!(c.duration(&node(Value::Str("1000000000h".into())), "d"), None);
        assert_eq!(
            c.diagnostics[4].message,
            "expected a duration of at most 30days, got \"1000000000h\""
        );
        assert_eq!(
            c.duration_within(&node(Value::Str("11m".into())), "d", Duration::from_secs(600)),
            None
        );
        assert_eq!(
            c.diagnostics[5].message,
            "expected a duration of at most 10m, got \"11m\""
        );
    }

    #[test]
    fn numbers_check_range_and_type() {
        let mut c = Checker::new("x.toml");
        assert_eq!(c.number_in(&node(Value::Int(1)), "p", 0.0, 1.0), Some(1.0));
        assert_eq!(c.number_in(&node(Value::Float(1.5)), "p", 0.0, 1.0), None);
        assert_eq!(first(&c), "x.toml:4: p: expected a number between 0 and 1, got 1.5");
        assert_eq!(c.number_in(&node(Value::Float(f64::NAN)), "p", 0.0, 1.0), None);
        assert_eq!(c.number_in(&node(Value::Bool(true)), "p", 0.0, 1.0), None);
        assert_eq!(
            c.diagnostics[2].message,
            "expected a number between 0 and 1, got boolean true"
        );
        assert_eq!(
            c.integer_in(&node(Value::Int(0)), "n", 1, 9, "an integer of at least 1"),
            None
        );
        assert_eq!(c.diagnostics[3].message, "expected an integer of at least 1, got 0");
        assert_eq!(c.integer_in(&node(Value::Float(2.0)), "n", 1, 9, "an integer"), None);
        assert_eq!(c.diagnostics[4].message, "expected an integer, got number 2");
    }

    #[test]
    fn strings_and_tables() {
        let mut c = Checker::new("x.toml");
        assert_eq!(c.nonempty_string(&node(Value::Str("a".into())), "s"), Some("a"));
        assert_eq!(c.nonempty_string(&node(Value::Str(" ".into())), "s"), None);
        assert!(c.table(&node(Value::Array(vec![])), "t").is_none());
        assert_eq!(c.diagnostics[1].message, "expected a table, got an array");
    }

    #[test]
    fn unknown_fields_are_listed_with_a_suggestion() {
        let entries = vec![("probabilty".to_string(), node(Value::Float(0.5)))];
        let t = Table {
            path: "rules[0]".into(),
            line: Some(2),
            entries: &entries,
        };
        let mut c = Checker::new("x.toml");
        c.only(&t, &["kind", "probability"]);
        assert_eq!(
            first(&c),
            "x.toml:4: rules[0].probabilty: unknown field, expected one of kind, probability (did you mean `probability`?)"
        );
        assert!(c.require(&t, "kind", "a fault kind").is_none());
        assert_eq!(
            c.diagnostics[1].to_string(),
            "x.toml:2: rules[0].kind: missing, expected a fault kind"
        );
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        assert_eq!(closest("dropp", &["drop_response", "reset"]), None);
        assert_eq!(closest("rest", &["drop_response", "reset"]), Some("reset"));
        assert_eq!(closest("zzz", &["a", "b"]), None);
        assert_eq!(closest("x", &["max"]), None);
        assert_eq!(closest("nmae", &["name", "seed"]), Some("name"));
        assert_eq!(closest("kind", &["min", "max"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("probabilty", "probability"), 1);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }
}
