//! `CNI_ARGS`: `KEY=VALUE;KEY=VALUE`.

use std::net::IpAddr;

use ipnet::IpNet;

use super::error::{CniError, ErrorCode};
use super::version::truncate;
use crate::mac::{MacAddr, MacParseError};

/// Parsed `CNI_ARGS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs {
    /// `IgnoreUnknown=1|true`.
    pub ignore_unknown: bool,
    /// `K8S_POD_NAMESPACE`.
    pub pod_namespace: Option<String>,
    /// `K8S_POD_NAME`.
    pub pod_name: Option<String>,
    /// `K8S_POD_UID`.
    pub pod_uid: Option<String>,
    /// `K8S_POD_INFRA_CONTAINER_ID`.
    pub pod_infra_container_id: Option<String>,
    /// `IP=`: requested static addresses (comma separated).
    pub ips: Vec<IpAddr>,
    /// `MAC=`: requested pod-side MAC.
    pub mac: Option<MacAddr>,
    /// Unknown keys that were accepted because of `IgnoreUnknown`.
    pub ignored: Vec<(String, String)>,
}

fn bad_args(msg: String) -> CniError {
    CniError::new(ErrorCode::InvalidEnvironment, msg)
}

impl CniArgs {
    /// Parses `CNI_ARGS`.
    ///
    /// Pairs are separated by `;` (a trailing `;` is tolerated) and each must
    /// hold exactly one `=` and a non-empty key. Understood keys:
    /// `K8S_POD_NAMESPACE`, `K8S_POD_NAME`, `K8S_POD_UID`,
    /// `K8S_POD_INFRA_CONTAINER_ID`, `IP` (comma separated addresses, each
    /// optionally with a `/prefix`, which is dropped), `MAC` (a unicast
    /// 6-octet MAC, normalised to lower-case `aa:bb:cc:dd:ee:ff`) and
    /// `IgnoreUnknown` (`1`/`true`/`0`/`false`, any case, anywhere in the list).
    /// Other keys are an error unless `IgnoreUnknown` is set, in which case they
    /// are collected in [`CniArgs::ignored`]. Empty values leave a field unset.
    ///
    /// Every error has code 4 and names `CNI_ARGS` and the offending key or pair.
    ///
    /// ```
    /// use sarena_plugin::cni::CniArgs;
    /// let a = CniArgs::parse("IgnoreUnknown=1;K8S_POD_NAME=web;FOO=bar").unwrap();
    /// assert_eq!(a.pod_name.as_deref(), Some("web"));
    /// assert!(CniArgs::parse("FOO=bar").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<CniArgs, CniError> {
        let pairs = split_pairs(s)?;
        let mut args = CniArgs::default();
        for &(key, value) in &pairs {
            if key == "IgnoreUnknown" {
                args.ignore_unknown = parse_bool(value)?;
            }
        }
        for (key, value) in pairs {
            let text = (!value.is_empty()).then(|| value.to_string());
            match key {
                "IgnoreUnknown" => {}
                "K8S_POD_NAMESPACE" => args.pod_namespace = text,
                "K8S_POD_NAME" => args.pod_name = text,
                "K8S_POD_UID" => args.pod_uid = text,
                "K8S_POD_INFRA_CONTAINER_ID" => args.pod_infra_container_id = text,
                "IP" => args.ips = parse_ips(value)?,
                "MAC" => {
                    args.mac = if value.is_empty() {
                        None
                    } else {
                        Some(requested_mac(value)?)
                    }
                }
                other if args.ignore_unknown => {
                    args.ignored.push((other.to_string(), value.to_string()));
                }
                other => {
                    return Err(bad_args(format!(
                        "CNI_ARGS: unknown key {:?} (set IgnoreUnknown=1 to ignore it)",
                        truncate(other)
                    )));
                }
            }
        }
        Ok(args)
    }
}

/// Splits into `(key, value)` pairs, checking the `K=V` shape.
fn split_pairs(s: &str) -> Result<Vec<(&str, &str)>, CniError> {
    let trimmed = s.strip_suffix(';').unwrap_or(s);
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    trimmed
        .split(';')
        .map(|pair| {
            let mut parts = pair.split('=');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(key), Some(value), None) if !key.is_empty() => Ok((key, value)),
                _ => Err(bad_args(format!(
                    "CNI_ARGS: invalid pair {:?}: expected exactly one '=' after a non-empty key",
                    truncate(pair)
                ))),
            }
        })
        .collect()
}

fn parse_bool(value: &str) -> Result<bool, CniError> {
    if value == "1" || value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value == "0" || value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(bad_args(format!(
            "CNI_ARGS: IgnoreUnknown must be 1, 0, true or false, got {:?}",
            truncate(value)
        )))
    }
}

/// Parses `IP=a[/p],b[/p]`; the prefix must be valid but is dropped.
fn parse_ips(value: &str) -> Result<Vec<IpAddr>, CniError> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    value
        .split(',')
        .map(|item| {
            parse_ip_maybe_cidr(item).ok_or_else(|| {
                bad_args(format!(
                    "CNI_ARGS: IP: invalid address {:?}",
                    truncate(item)
                ))
            })
        })
        .collect()
}

/// Parses `ip` or `ip/prefix` (a valid prefix length), returning the address.
pub(crate) fn parse_ip_maybe_cidr(s: &str) -> Option<IpAddr> {
    if s.contains('/') {
        s.parse::<IpNet>().ok().map(|net| net.addr())
    } else {
        s.parse::<IpAddr>().ok()
    }
}

/// A `MAC=` value: any [`MacAddr`] text, but unicast and not all-zero.
fn requested_mac(value: &str) -> Result<MacAddr, CniError> {
    let err = |why: &dyn std::fmt::Display| {
        bad_args(format!(
            "CNI_ARGS: MAC: invalid address {:?}: {why}",
            truncate(value)
        ))
    };
    let mac: MacAddr = value.parse().map_err(|e: MacParseError| err(&e.reason))?;
    if !mac.is_unicast() {
        return Err(err(&"multicast address"));
    }
    if mac.is_zero() {
        return Err(err(&"all-zero address"));
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> CniError {
        let e = CniArgs::parse(s).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidEnvironment, "{s:?}");
        assert!(e.msg.contains("CNI_ARGS"), "{}", e.msg);
        e
    }

    #[test]
    fn empty_and_trailing_semicolon() {
        assert_eq!(CniArgs::parse("").unwrap(), CniArgs::default());
        assert_eq!(CniArgs::parse(";").unwrap(), CniArgs::default());
        let a = CniArgs::parse("K8S_POD_NAME=web;").unwrap();
        assert_eq!(a.pod_name.as_deref(), Some("web"));
    }

    #[test]
    fn known_keys_are_understood() {
        let a = CniArgs::parse(
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-abc;K8S_POD_UID=1234-5678;\
             K8S_POD_INFRA_CONTAINER_ID=deadbeef;IP=10.0.0.5/24,fd00::5;MAC=0A:58:0A:F4:00:05",
        )
        .unwrap();
        assert_eq!(a.pod_namespace.as_deref(), Some("default"));
        assert_eq!(a.pod_name.as_deref(), Some("web-abc"));
        assert_eq!(a.pod_uid.as_deref(), Some("1234-5678"));
        assert_eq!(a.pod_infra_container_id.as_deref(), Some("deadbeef"));
        assert_eq!(
            a.ips,
            vec![
                "10.0.0.5".parse::<IpAddr>().unwrap(),
                "fd00::5".parse().unwrap()
            ]
        );
        assert_eq!(
            a.mac.map(|m| m.to_string()).as_deref(),
            Some("0a:58:0a:f4:00:05")
        );
        assert!(!a.ignore_unknown);
        assert!(a.ignored.is_empty());
    }

    #[test]
    fn empty_values_leave_fields_unset() {
        let a = CniArgs::parse("K8S_POD_NAME=;IP=;MAC=").unwrap();
        assert_eq!(a, CniArgs::default());
    }

    #[test]
    fn pair_without_exactly_one_equals_is_rejected_naming_the_pair() {
        for bad in [
            "FOO",
            "A=B=C",
            "K8S_POD_NAME=a;BAR",
            "=x",
            "A=1;;B=2",
            ";A=1",
        ] {
            let e = err(bad);
            assert!(e.msg.contains("invalid pair"), "{bad:?}: {}", e.msg);
        }
        assert!(err("A=B=C").msg.contains("\"A=B=C\""));
    }

    #[test]
    fn unknown_key_is_rejected_naming_it() {
        let e = err("K8S_POD_NAME=web;FOO=bar");
        assert!(e.msg.contains("\"FOO\""), "{}", e.msg);
        // Keys are case-sensitive.
        assert!(err("k8s_pod_name=web").msg.contains("k8s_pod_name"));
    }

    #[test]
    fn ignore_unknown_anywhere_in_any_case() {
        for flag in ["1", "true", "TRUE", "True"] {
            for s in [
                format!("IgnoreUnknown={flag};FOO=bar;K8S_POD_NAME=web"),
                format!("FOO=bar;K8S_POD_NAME=web;IgnoreUnknown={flag}"),
            ] {
                let a = CniArgs::parse(&s).unwrap();
                assert!(a.ignore_unknown);
                assert_eq!(a.ignored, vec![("FOO".to_string(), "bar".to_string())]);
                assert_eq!(a.pod_name.as_deref(), Some("web"));
            }
        }
    }

    #[test]
    fn ignore_unknown_false_still_rejects() {
        for flag in ["0", "false", "FALSE"] {
            let e = err(&format!("IgnoreUnknown={flag};FOO=bar"));
            assert!(e.msg.contains("FOO"));
        }
        assert!(!CniArgs::parse("IgnoreUnknown=0").unwrap().ignore_unknown);
    }

    #[test]
    fn ignore_unknown_with_bad_value_is_rejected() {
        for bad in ["yes", "2", "", "tru"] {
            let e = err(&format!("IgnoreUnknown={bad}"));
            assert!(e.msg.contains("IgnoreUnknown"), "{}", e.msg);
        }
    }

    #[test]
    fn ignore_unknown_does_not_excuse_bad_known_values_or_bad_pairs() {
        assert!(err("IgnoreUnknown=1;IP=nope").msg.contains("IP"));
        assert!(err("IgnoreUnknown=1;A=B=C").msg.contains("invalid pair"));
    }

    #[test]
    fn ip_values_are_validated_and_prefix_stripped() {
        let a = CniArgs::parse("IP=192.168.10.4/24").unwrap();
        assert_eq!(a.ips, vec!["192.168.10.4".parse::<IpAddr>().unwrap()]);
        let a = CniArgs::parse("IP=2001:db8::5/64,10.0.0.1").unwrap();
        assert_eq!(a.ips.len(), 2);
        for bad in [
            "IP=300.1.1.1",
            "IP=10.0.0.1/33",
            "IP=10.0.0.1/",
            "IP=10.0.0.1,",
            "IP=abc",
        ] {
            let e = err(bad);
            assert!(e.msg.contains("IP"), "{}", e.msg);
        }
    }

    #[test]
    fn mac_values_are_validated() {
        let a = CniArgs::parse("MAC=c2-11-22-33-44-55").unwrap();
        assert_eq!(
            a.mac.map(|m| m.to_string()).as_deref(),
            Some("c2:11:22:33:44:55")
        );
        for bad in [
            "MAC=c2:11:22:33:44",
            "MAC=c2:11:22:33:44:55:66",
            "MAC=c2:11:22:33:44:5",
            "MAC=c2:11:22:33:44:5g",
            "MAC=c2:11-22:33:44:55",
            "MAC=c21122334455",
            "MAC=01:00:5e:00:00:01",
            "MAC=00:00:00:00:00:00",
            "MAC=+1:11:22:33:44:55",
        ] {
            let e = err(bad);
            assert!(e.msg.contains("MAC"), "{}", e.msg);
        }
    }

    #[test]
    fn later_duplicate_wins() {
        let a = CniArgs::parse("K8S_POD_NAME=a;K8S_POD_NAME=b").unwrap();
        assert_eq!(a.pod_name.as_deref(), Some("b"));
    }
}
