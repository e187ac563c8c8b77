//! Errors of the load generator, by what went wrong: bad configuration (exit 2), an
//! unreachable target or provider (exit 3), a ledger that cannot be read (exit 4), or a
//! failure while running or reporting.

/// A configuration mistake, as one line: where, which field, what was expected
/// (`checkout.toml: path: expected …`; a command-line flag is its own field:
/// `--users: expected …`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{source_name}: {}expected {expected}", field_prefix(field.as_deref()))]
pub struct ConfigError {
    pub source_name: String,
    /// The field in the source; `None` for a command-line flag, which is its own field.
    pub field: Option<String>,
    pub expected: String,
}

impl ConfigError {
    pub fn new(source: &str, field: &str, expected: impl Into<String>) -> Self {
        Self {
            source_name: source.to_string(),
            field: Some(field.to_string()),
            expected: expected.into(),
        }
    }

    /// A mistake in the value of a command-line flag such as `--users`.
    pub fn flag(flag: &str, expected: impl Into<String>) -> Self {
        Self {
            source_name: flag.to_string(),
            field: None,
            expected: expected.into(),
        }
    }
}

fn field_prefix(field: Option<&str>) -> String {
    field.map(|f| format!("{f}: ")).unwrap_or_default()
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{what} is unreachable at {url}: {reason}")]
    Unreachable {
        what: &'static str,
        url: String,
        reason: String,
    },
    #[error("the provider's ledger could not be read: {0}")]
    Ledger(String),
    #[error("the load test failed: {0}")]
    Goose(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a fauxpay report: {reason}")]
    Report { path: String, reason: String },
    #[error("cannot merge: {0}")]
    Merge(String),
}

impl LoadError {
    /// The process exit code this error maps to.
    pub fn exit_code(&self) -> u8 {
        match self {
            LoadError::Config(_) | LoadError::Report { .. } => 2,
            LoadError::Unreachable { .. } => 3,
            LoadError::Ledger(_) => 4,
            _ => 2,
        }
    }

    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        LoadError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConfigError;

    #[test]
    fn a_file_names_its_field_and_a_flag_is_its_own_field() {
        let file = ConfigError::new("checkout.toml", "path", "a path starting with '/'");
        assert_eq!(
            file.to_string(),
            "checkout.toml: path: expected a path starting with '/'"
        );
        let flag = ConfigError::flag("--users", "the most checkouts in flight");
        assert_eq!(flag.to_string(), "--users: expected the most checkouts in flight");
    }
}
