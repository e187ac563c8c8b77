//! An error and its causes on one line, for logs and error messages that must say why
//! (`error sending request: connection reset by peer`), shared by the provider's webhook
//! client and the reference merchants' Stripe gateway.

/// `e`, then each of its sources, joined by `": "`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_follows_its_error() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "reset by peer",
        ));
        assert_eq!(error_chain(&e), "outer: reset by peer");
        assert_eq!(error_chain(&e.0), "reset by peer");
    }
}
