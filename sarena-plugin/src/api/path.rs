//! Route paths of the daemon API and the rules for the `{container_id}` and
//! `{ifname}` path segments, shared by the client and the server.
//!
//! Every path segment the client builds is percent-encoded, so any string the
//! runtime hands over reaches the daemon intact; the daemon decodes it and
//! validates it with [`validate_attachment`], answering `400 bad_request`
//! rather than routing on garbage. The rules themselves live in
//! [`crate::cni::validate`]; the API's interface-name rule also refuses
//! control characters.

use std::fmt::Write as _;

use super::API_BASE;
use super::types::Attachment;
use crate::cni::validate::{IfnameChars, IfnameProblem, ifname_problem, is_container_id};

/// Largest request body the daemon accepts (bytes); larger bodies get `413`.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Why a container id or interface name is rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// The container id is empty or has characters outside `[a-zA-Z0-9_.-]`
    /// (or does not start with a letter or digit).
    #[error("invalid container id {value:?}: must match ^[a-zA-Z0-9][a-zA-Z0-9_.\\-]*$")]
    ContainerId {
        /// What was given.
        value: String,
    },
    /// The interface name breaks the kernel's rules.
    #[error("invalid interface name {value:?}: {reason}")]
    Ifname {
        /// What was given.
        value: String,
        /// Which rule it breaks.
        reason: IfnameProblem,
    },
    /// A path segment is not valid percent-encoded UTF-8.
    #[error("invalid percent-encoding in path segment {segment:?}")]
    Encoding {
        /// The raw segment.
        segment: String,
    },
}

/// Checks a container id: `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
pub fn validate_container_id(id: &str) -> Result<(), SegmentError> {
    if is_container_id(id) {
        Ok(())
    } else {
        Err(SegmentError::ContainerId {
            value: id.to_owned(),
        })
    }
}

/// Checks an interface name: 1 to 15 bytes, not `.` or `..`, no `/`, `:`,
/// whitespace or control characters ([`IfnameChars::NoControl`]).
pub fn validate_ifname(name: &str) -> Result<(), SegmentError> {
    match ifname_problem(name, IfnameChars::NoControl) {
        Some(reason) => Err(SegmentError::Ifname {
            value: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks both halves of an [`Attachment`].
pub fn validate_attachment(owner: &Attachment) -> Result<(), SegmentError> {
    validate_container_id(&owner.container_id)?;
    validate_ifname(&owner.ifname)
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes a percent-encoded path segment into UTF-8.
pub fn decode_segment(segment: &str) -> Result<String, SegmentError> {
    let err = || SegmentError::Encoding {
        segment: segment.to_owned(),
    };
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(err)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(err());
            }
            let hex = std::str::from_utf8(hex).map_err(|_| err())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| err())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| err())
}

/// `/v1/ipam/allocations/{container_id}/{ifname}`, segments encoded.
pub fn allocation_path(owner: &Attachment) -> String {
    owner_path("/ipam/allocations", owner)
}

/// `/v1/endpoints/{container_id}/{ifname}`, segments encoded.
pub fn endpoint_path(owner: &Attachment) -> String {
    owner_path("/endpoints", owner)
}

/// `/v1/stats/endpoints/{container_id}/{ifname}`, segments encoded.
pub fn endpoint_stats_path(owner: &Attachment) -> String {
    owner_path("/stats/endpoints", owner)
}

/// The prefixes of the per-attachment routes (before `/{container_id}/{ifname}`).
const OWNER_ROUTES: [&str; 3] = ["/ipam/allocations", "/endpoints", "/stats/endpoints"];

/// The route of `path`, for naming a call (the plugin's phases): the query
/// dropped, and an attachment's segments as `{attachment}`.
pub fn route_of(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    for prefix in OWNER_ROUTES {
        let route = format!("{API_BASE}{prefix}/");
        if path.starts_with(&route) {
            return format!("{route}{{attachment}}");
        }
    }
    path.to_owned()
}

fn owner_path(prefix: &str, owner: &Attachment) -> String {
    format!(
        "{API_BASE}{prefix}/{}/{}",
        encode_segment(&owner.container_id),
        encode_segment(&owner.ifname)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids() {
        for ok in ["a", "0", "abc-DEF_1.2", "f00d".repeat(16).as_str()] {
            assert_eq!(validate_container_id(ok), Ok(()), "{ok}");
        }
        for bad in ["", "-a", ".a", "_a", "a/b", "a b", "a%b", "é", "a:b"] {
            assert!(validate_container_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ifnames() {
        for ok in ["eth0", "net1", "a", "x".repeat(15).as_str(), "a.b-c_d@e"] {
            assert_eq!(validate_ifname(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "a\tb",
            "x".repeat(16).as_str(),
        ] {
            assert!(validate_ifname(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        for s in ["eth0", "a/b", "a b%c", "é:ü?#", "", "..", "~x"] {
            assert_eq!(decode_segment(&encode_segment(s)).unwrap(), s);
        }
        assert_eq!(encode_segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn decode_rejects_bad_escapes() {
        for bad in ["%", "%2", "%zz", "a%G1", "%FF%FE", "%+1"] {
            assert!(decode_segment(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_encode_segments() {
        let owner = Attachment {
            container_id: "c1".into(),
            ifname: "a/b".into(),
        };
        assert_eq!(allocation_path(&owner), "/v1/ipam/allocations/c1/a%2Fb");
        assert_eq!(endpoint_path(&owner), "/v1/endpoints/c1/a%2Fb");
        assert_eq!(endpoint_stats_path(&owner), "/v1/stats/endpoints/c1/a%2Fb");
    }

    #[test]
    fn routes_name_calls_without_the_attachment_or_query() {
        let owner = Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into(),
        };
        assert_eq!(
            route_of(&format!("{}?veth=remove", endpoint_path(&owner))),
            "/v1/endpoints/{attachment}"
        );
        assert_eq!(
            route_of(&allocation_path(&owner)),
            "/v1/ipam/allocations/{attachment}"
        );
        assert_eq!(
            route_of(&endpoint_stats_path(&owner)),
            "/v1/stats/endpoints/{attachment}"
        );
        assert_eq!(route_of("/v1/endpoints"), "/v1/endpoints");
        assert_eq!(route_of("/v1/daemon/config"), "/v1/daemon/config");
    }
}
