//! CNI specification versions.

use std::fmt;

use super::error::{CniError, ErrorCode};

/// A CNI spec version Sarena speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// 0.1.0 (also what a config without `cniVersion` means).
    V0_1_0,
    /// 0.2.0.
    V0_2_0,
    /// 0.3.0.
    V0_3_0,
    /// 0.3.1.
    V0_3_1,
    /// 0.4.0: adds CHECK.
    V0_4_0,
    /// 1.0.0.
    V1_0_0,
    /// 1.1.0: adds STATUS and GC.
    V1_1_0,
}

impl Version {
    /// Every version Sarena supports, oldest first (the VERSION answer's `supportedVersions`).
    pub const ALL: [Version; 7] = [
        Version::V0_1_0,
        Version::V0_2_0,
        Version::V0_3_0,
        Version::V0_3_1,
        Version::V0_4_0,
        Version::V1_0_0,
        Version::V1_1_0,
    ];

    /// The newest version Sarena speaks.
    pub const LATEST: Version = Version::V1_1_0;

    /// Parses an exact version string such as `"1.1.0"`.
    ///
    /// An unsupported string is error 1 (incompatible CNI version); its message
    /// names `cniVersion` and lists the supported versions.
    ///
    /// ```
    /// use sarena_plugin::cni::Version;
    /// assert_eq!(Version::parse("0.4.0").unwrap(), Version::V0_4_0);
    /// assert_eq!(Version::parse("2.0.0").unwrap_err().code.as_u32(), 1);
    /// ```
    pub fn parse(s: &str) -> Result<Version, CniError> {
        Version::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                CniError::new(
                    ErrorCode::IncompatibleVersion,
                    format!(
                        "unsupported cniVersion {:?}; supported versions: {}",
                        truncate(s),
                        Version::ALL.map(Version::as_str).join(", ")
                    ),
                )
            })
    }

    /// The version as written in JSON, e.g. `"0.3.1"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V0_1_0 => "0.1.0",
            Version::V0_2_0 => "0.2.0",
            Version::V0_3_0 => "0.3.0",
            Version::V0_3_1 => "0.3.1",
            Version::V0_4_0 => "0.4.0",
            Version::V1_0_0 => "1.0.0",
            Version::V1_1_0 => "1.1.0",
        }
    }

    /// True for 1.0.0 and later (the result format without `ips[].version`).
    pub fn is_1x(self) -> bool {
        self >= Version::V1_0_0
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Version {
    type Err = CniError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s)
    }
}

/// The answer to `CNI_COMMAND=VERSION`: echoes the `cniVersion` of the input
/// and lists every supported version.
///
/// ```
/// let v = sarena_plugin::cni::version::version_answer("1.1.0");
/// assert_eq!(v["supportedVersions"].as_array().unwrap().len(), 7);
/// ```
pub fn version_answer(cni_version: &str) -> serde_json::Value {
    serde_json::json!({
        "cniVersion": cni_version,
        "supportedVersions": Version::ALL.map(Version::as_str),
    })
}

/// Reads just the `cniVersion` of a stdin document, without validating the
/// rest: what VERSION echoes, and what an error answer for an unparsable
/// config should carry.
///
/// Empty (or blank) input, and a missing, `null` or empty `cniVersion`, give
/// `Ok(None)`; the string is returned unvalidated. Input that is not a JSON
/// object, or a `cniVersion` that is not a string, is error 6.
///
/// ```
/// use sarena_plugin::cni::version::decode_cni_version;
/// assert_eq!(decode_cni_version(br#"{"cniVersion":"1.0.0"}"#).unwrap().as_deref(), Some("1.0.0"));
/// assert_eq!(decode_cni_version(b"").unwrap(), None);
/// ```
pub fn decode_cni_version(stdin: &[u8]) -> Result<Option<String>, CniError> {
    if stdin.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let decode = |msg: &str| CniError::new(ErrorCode::Decode, msg.to_string());
    let value: serde_json::Value = serde_json::from_slice(stdin).map_err(|e| {
        decode("failed to decode cniVersion from stdin").with_details(e.to_string())
    })?;
    let serde_json::Value::Object(map) = value else {
        return Err(decode("stdin is not a JSON object"));
    };
    match map.get("cniVersion") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(decode("`cniVersion` is not a string")),
    }
}

/// Shortens untrusted input echoed in an error message.
pub(crate) fn truncate(s: &str) -> &str {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_supported_version_and_round_trips() {
        for v in Version::ALL {
            assert_eq!(Version::parse(v.as_str()).unwrap(), v);
            assert_eq!(v.to_string(), v.as_str());
            assert_eq!(v.as_str().parse::<Version>().unwrap(), v);
        }
        let strs: Vec<_> = Version::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(
            strs,
            [
                "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"
            ]
        );
    }

    #[test]
    fn versions_are_ordered_oldest_first() {
        for pair in Version::ALL.windows(2) {
            assert!(pair[0] < pair[1]);
        }
        assert_eq!(Version::LATEST, Version::V1_1_0);
        assert!(Version::V1_0_0.is_1x() && Version::V1_1_0.is_1x());
        assert!(!Version::V0_4_0.is_1x());
    }

    #[test]
    fn unsupported_version_is_error_1_naming_cni_version_and_listing_supported() {
        for bad in [
            "", "1.2.0", "0.5.0", "1.0", "v1.0.0", " 1.0.0", "1.0.0 ", "2.0.0",
        ] {
            let err = Version::parse(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::IncompatibleVersion, "{bad:?}");
            assert!(err.msg.contains("cniVersion"), "{}", err.msg);
            for v in Version::ALL {
                assert!(err.msg.contains(v.as_str()), "{}", err.msg);
            }
        }
    }

    #[test]
    fn long_bad_version_is_truncated_in_message() {
        let long = "é".repeat(100);
        let err = Version::parse(&long).unwrap_err();
        assert!(err.msg.len() < 250, "{}", err.msg);
    }

    #[test]
    fn decode_cni_version_reads_only_the_version() {
        let got = decode_cni_version(br#"{"cniVersion":"0.3.1","name":1}"#).unwrap();
        assert_eq!(got.as_deref(), Some("0.3.1"));
        let got = decode_cni_version(br#"{"cniVersion":"7.7.7"}"#).unwrap();
        assert_eq!(got.as_deref(), Some("7.7.7"));
        for none in [
            &b""[..],
            b"  \n",
            b"{}",
            br#"{"cniVersion":null}"#,
            br#"{"cniVersion":""}"#,
        ] {
            assert_eq!(decode_cni_version(none).unwrap(), None);
        }
        for bad in [&b"{"[..], b"[]", b"\"1.0.0\"", br#"{"cniVersion":1}"#] {
            assert_eq!(decode_cni_version(bad).unwrap_err().code, ErrorCode::Decode);
        }
    }

    #[test]
    fn version_answer_echoes_input_and_lists_all() {
        let v = version_answer("0.4.0");
        assert_eq!(v["cniVersion"], "0.4.0");
        assert_eq!(
            v["supportedVersions"],
            serde_json::json!([
                "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"
            ])
        );
        assert_eq!(v.as_object().unwrap().len(), 2);
    }
}
