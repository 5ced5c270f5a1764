//! [`error_chain`]: an error and its causes on one line, for users and logs.

/// `error: cause: cause…`: each error's message, outermost first. Messages
/// here describe only their own context and never print their source, so
/// every cause appears once.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("middle")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn every_cause_is_appended_in_order() {
        let e = Outer(Middle(std::io::Error::other("root")));
        assert_eq!(e.to_string(), "outer");
        assert_eq!(error_chain(&e), "outer: middle: root");
    }

    #[test]
    fn a_cause_is_appended_even_when_its_text_repeats() {
        // No de-duplication by text: a cause that says what its parent said
        // is still a cause of its own.
        let e = Outer(Middle(std::io::Error::other("middle")));
        assert_eq!(error_chain(&e), "outer: middle: middle");
    }
}
