//! Validation of container ids, interface names and network names: the one
//! home of these rules. The CNI checks here return CNI errors; the daemon API
//! (`crate::api`) applies the same rules to its path segments and bodies
//! through [`is_container_id`] and [`ifname_problem`].

use super::error::{CniError, ErrorCode};
use super::version::truncate;

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const MAX_IFNAME_LEN: usize = 15;

/// True when `s` matches `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`: the rule for
/// container ids and network names.
///
/// ```
/// use sarena_plugin::cni::validate::is_container_id;
/// assert!(is_container_id("abc-123_x.y"));
/// assert!(!is_container_id("-abc"));
/// ```
pub fn is_container_id(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Which characters an interface name may not hold besides `/`, `:` and
/// whitespace (which no rule allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfnameChars {
    /// `CNI_IFNAME` as the CNI spec states it: control characters other than
    /// whitespace pass.
    Cni,
    /// The daemon API: control characters are refused too.
    NoControl,
}

/// The rule an interface name breaks; its `Display` is a phrase for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IfnameProblem {
    /// The name is empty.
    #[error("must not be empty")]
    Empty,
    /// The name is longer than [`MAX_IFNAME_LEN`] bytes.
    #[error("longer than {MAX_IFNAME_LEN} bytes")]
    TooLong,
    /// The name is `.` or `..`.
    #[error("must not be \".\" or \"..\"")]
    Dots,
    /// The name holds a character the rule forbids.
    #[error("{}", match .0 {
        IfnameChars::Cni => "must not contain '/', ':' or whitespace",
        IfnameChars::NoControl => "must not contain '/', ':', whitespace or control characters",
    })]
    Forbidden(IfnameChars),
}

/// Which rule `name` breaks as an interface name: 1 to [`MAX_IFNAME_LEN`]
/// bytes, not `.` or `..`, none of the characters `chars` forbids. `None`
/// when it is valid.
///
/// ```
/// use sarena_plugin::cni::validate::{IfnameChars, IfnameProblem, ifname_problem};
/// assert_eq!(ifname_problem("eth0", IfnameChars::Cni), None);
/// assert_eq!(ifname_problem("a\u{1}b", IfnameChars::Cni), None);
/// assert_eq!(
///     ifname_problem("a\u{1}b", IfnameChars::NoControl),
///     Some(IfnameProblem::Forbidden(IfnameChars::NoControl))
/// );
/// ```
pub fn ifname_problem(name: &str, chars: IfnameChars) -> Option<IfnameProblem> {
    let forbidden = |c: char| {
        c == '/'
            || c == ':'
            || c.is_whitespace()
            || (chars == IfnameChars::NoControl && c.is_control())
    };
    if name.is_empty() {
        Some(IfnameProblem::Empty)
    } else if name.len() > MAX_IFNAME_LEN {
        Some(IfnameProblem::TooLong)
    } else if name == "." || name == ".." {
        Some(IfnameProblem::Dots)
    } else if name.chars().any(forbidden) {
        Some(IfnameProblem::Forbidden(chars))
    } else {
        None
    }
}

/// Checks a container id (`CNI_CONTAINERID`): it must match
/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`. Error 4 naming `CNI_CONTAINERID` otherwise.
///
/// ```
/// use sarena_plugin::cni::validate::container_id;
/// assert!(container_id("abc-123_x.y").is_ok());
/// assert!(container_id("-abc").is_err());
/// ```
pub fn container_id(s: &str) -> Result<(), CniError> {
    if is_container_id(s) {
        return Ok(());
    }
    Err(CniError::new(
        ErrorCode::InvalidEnvironment,
        format!(
            "invalid CNI_CONTAINERID {:?}: must start with a letter or digit, followed by \
             letters, digits, '_', '.' or '-'",
            truncate(s)
        ),
    ))
}

/// Checks an interface name (`CNI_IFNAME`): 1–15 bytes, not `.` or `..`, and
/// no `/`, `:` or whitespace. Error 4 naming `CNI_IFNAME` otherwise.
///
/// ```
/// use sarena_plugin::cni::validate::interface_name;
/// assert!(interface_name("eth0").is_ok());
/// assert!(interface_name("a-name-that-is-too-long").is_err());
/// ```
pub fn interface_name(s: &str) -> Result<(), CniError> {
    match ifname_problem(s, IfnameChars::Cni) {
        None => Ok(()),
        Some(why) => Err(CniError::new(
            ErrorCode::InvalidEnvironment,
            format!("invalid CNI_IFNAME {:?}: {why}", truncate(s)),
        )),
    }
}

/// Checks a network name (the config's `name`): same rule as a container id.
/// Error 7 (invalid config) naming `name` otherwise.
///
/// ```
/// use sarena_plugin::cni::validate::network_name;
/// assert!(network_name("sarena").is_ok());
/// assert!(network_name("../etc").is_err());
/// ```
pub fn network_name(s: &str) -> Result<(), CniError> {
    if is_container_id(s) {
        return Ok(());
    }
    Err(CniError::new(
        ErrorCode::InvalidConfig,
        format!(
            "invalid network config field `name` {:?}: must start with a letter or digit, \
             followed by letters, digits, '_', '.' or '-'",
            truncate(s)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_id_accepts_the_spec_charset() {
        for ok in [
            "a",
            "Z",
            "0",
            "abc123",
            "a_b.c-d",
            "9-",
            "A.",
            "x__",
            &"f".repeat(64),
        ] {
            assert!(container_id(ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn container_id_rejects_with_code_4_naming_variable() {
        for bad in [
            "", "-a", "_a", ".a", "a b", "a/b", "a:b", "é", "aé", "a\n", "a+b", "a\0",
        ] {
            let err = container_id(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidEnvironment, "{bad:?}");
            assert!(err.msg.contains("CNI_CONTAINERID"), "{}", err.msg);
        }
    }

    #[test]
    fn interface_name_accepts_valid_names() {
        for ok in [
            "eth0",
            "e",
            "...",
            ".a",
            "a.",
            "123456789012345",
            "net-1_x",
            "é",
        ] {
            assert!(interface_name(ok).is_ok(), "{ok:?}");
        }
    }

    #[test]
    fn interface_name_rejects_with_code_4_naming_variable() {
        let cases = [
            ("", "empty"),
            ("1234567890123456", "longer"),
            ("ééééééééé", "longer"), // 18 bytes, 9 chars
            (".", "\"..\""),
            ("..", "\"..\""),
            ("a/b", "'/'"),
            ("a:b", "':'"),
            ("a b", "whitespace"),
            ("a\tb", "whitespace"),
            ("eth0\n", "whitespace"),
            ("a\u{a0}b", "whitespace"),
        ];
        for (bad, why) in cases {
            let err = interface_name(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidEnvironment, "{bad:?}");
            assert!(err.msg.contains("CNI_IFNAME"), "{}", err.msg);
            assert!(err.msg.contains(why), "{bad:?}: {}", err.msg);
        }
    }

    #[test]
    fn ifname_rules_differ_only_in_control_characters() {
        for name in ["eth0", "", ".", "a/b", "a b", "x".repeat(16).as_str()] {
            assert_eq!(
                ifname_problem(name, IfnameChars::Cni).is_some(),
                ifname_problem(name, IfnameChars::NoControl).is_some(),
                "{name:?}"
            );
        }
        for control in ["a\u{1}b", "a\u{7f}", "\u{0}"] {
            assert!(interface_name(control).is_ok(), "{control:?}");
            assert_eq!(
                ifname_problem(control, IfnameChars::NoControl),
                Some(IfnameProblem::Forbidden(IfnameChars::NoControl)),
                "{control:?}"
            );
        }
    }

    #[test]
    fn network_name_uses_id_charset_and_code_7() {
        assert!(network_name("sarena").is_ok());
        assert!(network_name("k8s-pod-network.v1_2").is_ok());
        for bad in ["", "-net", "net/work", "net work", "../x", "ü"] {
            let err = network_name(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidConfig, "{bad:?}");
            assert!(err.msg.contains("`name`"), "{}", err.msg);
        }
    }
}
