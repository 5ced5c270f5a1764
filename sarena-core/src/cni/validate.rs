//! Validation of container ids, interface names and network names.

use super::error::{CniError, ErrorCode};
use super::version::truncate;

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const MAX_IFNAME_LEN: usize = 15;

/// True when `s` matches `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
fn is_id_like(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks a container id (`CNI_CONTAINERID`): it must match
/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`. Error 4 naming `CNI_CONTAINERID` otherwise.
///
/// ```
/// use sarena_core::cni::validate::container_id;
/// assert!(container_id("abc-123_x.y").is_ok());
/// assert!(container_id("-abc").is_err());
/// ```
pub fn container_id(s: &str) -> Result<(), CniError> {
    if is_id_like(s) {
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
/// use sarena_core::cni::validate::interface_name;
/// assert!(interface_name("eth0").is_ok());
/// assert!(interface_name("a-name-that-is-too-long").is_err());
/// ```
pub fn interface_name(s: &str) -> Result<(), CniError> {
    let problem = if s.is_empty() {
        Some("must not be empty".to_string())
    } else if s.len() > MAX_IFNAME_LEN {
        Some(format!("longer than {MAX_IFNAME_LEN} bytes"))
    } else if s == "." || s == ".." {
        Some("must not be \".\" or \"..\"".to_string())
    } else if s.chars().any(|c| c == '/' || c == ':' || c.is_whitespace()) {
        Some("must not contain '/', ':' or whitespace".to_string())
    } else {
        None
    };
    match problem {
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
/// use sarena_core::cni::validate::network_name;
/// assert!(network_name("sarena").is_ok());
/// assert!(network_name("../etc").is_err());
/// ```
pub fn network_name(s: &str) -> Result<(), CniError> {
    if is_id_like(s) {
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
