//! Profile errors as their users read them: each mistake is one [`Diagnostic`] line,
//! `{source}:{line}: {field}: {what was expected}`, and a [`ProfileError`] carries every
//! mistake found in one profile (at least one), in file order.

use std::fmt;

/// One mistake in a profile, printed on one line:
/// `fault-profiles/x.toml:7: rules[0].probability: expected a number between 0 and 1, got 1.5`.
///
/// `line` is absent for sources without positions (JSON, a missing file); `field` is
/// empty for mistakes that belong to no field (a TOML syntax error, an unreadable file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub source: String,
    pub line: Option<u32>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why a profile was rejected: every mistake found, in file order.
///
/// `Display` prints the first mistake, on one line; [`ProfileError::lines`] gives them
/// all (a CLI prints each and exits 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.diagnostics[0])]
pub struct ProfileError {
    diagnostics: Vec<Diagnostic>,
}

impl ProfileError {
    /// An error of the given mistakes, sorted by line; `None` when there are none.
    pub fn from_diagnostics(mut diagnostics: Vec<Diagnostic>) -> Option<Self> {
        diagnostics.sort_by_key(|d| d.line.unwrap_or(0));
        (!diagnostics.is_empty()).then_some(ProfileError { diagnostics })
    }

    /// One mistake.
    pub fn single(diagnostic: Diagnostic) -> Self {
        ProfileError {
            diagnostics: vec![diagnostic],
        }
    }

    /// A single mistake that belongs to no line or field (e.g. an unreadable file).
    pub fn whole_source(source: &str, message: impl Into<String>) -> Self {
        ProfileError {
            diagnostics: vec![Diagnostic {
                source: source.to_string(),
                line: None,
                field: String::new(),
                message: message.into(),
            }],
        }
    }

    /// Every mistake, in file order (never empty).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// Every mistake as its printed line.
    pub fn lines(&self) -> Vec<String> {
        self.diagnostics.iter().map(ToString::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(line: Option<u32>, field: &str) -> Diagnostic {
        Diagnostic {
            source: "x.toml".into(),
            line,
            field: field.into(),
            message: "expected a string".into(),
        }
    }

    #[test]
    fn a_diagnostic_is_one_line_with_optional_parts() {
        assert_eq!(diag(Some(3), "name").to_string(), "x.toml:3: name: expected a string");
        assert_eq!(diag(None, "name").to_string(), "x.toml: name: expected a string");
        assert_eq!(diag(Some(1), "").to_string(), "x.toml:1: expected a string");
    }

    #[test]
    fn errors_sort_by_line_and_display_the_first() {
        let e = ProfileError::from_diagnostics(vec![diag(Some(9), "b"), diag(Some(2), "a")]).unwrap();
        assert_eq!(e.to_string(), "x.toml:2: a: expected a string");
        assert_eq!(
            e.lines(),
            ["x.toml:2: a: expected a string", "x.toml:9: b: expected a string"]
        );
        assert!(ProfileError::from_diagnostics(Vec::new()).is_none());
    }

    #[test]
    fn whole_source_errors_name_only_the_source() {
        let e = ProfileError::whole_source("nope.toml", "cannot read: not found");
        assert_eq!(e.to_string(), "nope.toml: cannot read: not found");
        assert_eq!(e.diagnostics().len(), 1);
    }
}
