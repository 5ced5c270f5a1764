//! [`error_chain`]: an error and its causes on one line, for logs.

/// `error: cause: cause…`, skipping causes whose text their parent already
/// spells out (most errors here print their source; aya's verifier log sits
/// further down the chain).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
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
    #[error("middle: {0}")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn causes_are_appended_once() {
        let e = Outer(Middle(std::io::Error::other("root")));
        assert_eq!(error_chain(&e), "outer: middle: root");
    }
}
