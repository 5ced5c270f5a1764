//! The `bandwidth` capability (CONVENTIONS.md): `runtimeConfig.bandwidth`,
//! which runtimes send to a plugin whose entry declares
//! `"capabilities": {"bandwidth": true}` (Kubernetes: the pod annotations
//! `kubernetes.io/ingress-bandwidth` and `kubernetes.io/egress-bandwidth`).
//!
//! ```json
//! "runtimeConfig": {"bandwidth": {"ingressRate": 80000000, "ingressBurst": 800000,
//!                                 "egressRate": 50000000, "egressBurst": 500000}}
//! ```
//!
//! Rates are bits per second, bursts bits, as for the reference `bandwidth`
//! plugin; a direction with rate 0 (or absent) is not limited. Unlike the
//! reference plugin, a rate without a burst is accepted (pure pacing).

use serde_json::{Map, Value};

use super::config::NetConf;
use super::error::{CniError, ErrorCode};
use crate::api::BandwidthLimits;

/// Largest burst the reference plugin accepts (4 GB, in bits); kept so that
/// a config valid here is valid there and the other way round.
const MAX_BURST_BITS: u64 = (u32::MAX as u64) * 8;

fn invalid(detail: impl std::fmt::Display) -> CniError {
    CniError::new(
        ErrorCode::InvalidConfig,
        format!("invalid network config field `runtimeConfig.bandwidth`: {detail}"),
    )
}

impl NetConf {
    /// The pod's limits from `runtimeConfig.bandwidth`; `None` when absent,
    /// `null` or limiting nothing. Error 7 naming the field for a value that
    /// is not an object of non-negative integers, a burst without its rate,
    /// a burst over 4 GB, or `shapedSubnets`/`unshapedSubnets` (Sarena
    /// shapes all of a pod's traffic or none).
    pub fn bandwidth(&self) -> Result<Option<BandwidthLimits>, CniError> {
        let Some(value) = self
            .runtime_config
            .as_ref()
            .and_then(|rc| rc.get("bandwidth"))
        else {
            return Ok(None);
        };
        let entry = match value {
            Value::Null => return Ok(None),
            Value::Object(entry) => entry,
            _ => return Err(invalid("not an object")),
        };
        for subnets in ["shapedSubnets", "unshapedSubnets"] {
            if entry
                .get(subnets)
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            {
                return Err(invalid(format_args!(
                    "`{subnets}` is not supported: Sarena shapes all of a pod's traffic"
                )));
            }
        }
        let limits = BandwidthLimits {
            ingress_rate: number(entry, "ingressRate")?,
            ingress_burst: number(entry, "ingressBurst")?,
            egress_rate: number(entry, "egressRate")?,
            egress_burst: number(entry, "egressBurst")?,
        };
        for (rate, burst, side) in [
            (limits.ingress_rate, limits.ingress_burst, "ingress"),
            (limits.egress_rate, limits.egress_burst, "egress"),
        ] {
            if rate == 0 && burst != 0 {
                return Err(invalid(format_args!(
                    "`{side}Burst` is set without `{side}Rate`"
                )));
            }
            if burst >= MAX_BURST_BITS {
                return Err(invalid(format_args!(
                    "`{side}Burst` {burst} bit is more than 4 GB"
                )));
            }
        }
        Ok(limits.nonzero())
    }
}

/// `entry[key]` as a non-negative integer; absent or `null` is 0.
fn number(entry: &Map<String, Value>, key: &str) -> Result<u64, CniError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| invalid(format_args!("`{key}` is not a non-negative integer: {v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(bandwidth: Value) -> NetConf {
        let rc = serde_json::json!({ "bandwidth": bandwidth });
        NetConf {
            runtime_config: rc.as_object().cloned(),
            ..NetConf::default()
        }
    }

    fn message(bandwidth: Value) -> String {
        let err = conf(bandwidth).bandwidth().unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        err.msg
    }

    #[test]
    fn all_four_fields_are_read() {
        let got = conf(serde_json::json!({
            "ingressRate": 80_000_000u64, "ingressBurst": 800_000,
            "egressRate": 50_000_000u64, "egressBurst": 500_000
        }))
        .bandwidth()
        .unwrap();
        assert_eq!(
            got,
            Some(BandwidthLimits {
                ingress_rate: 80_000_000,
                ingress_burst: 800_000,
                egress_rate: 50_000_000,
                egress_burst: 500_000,
            })
        );
    }

    #[test]
    fn one_direction_and_a_rate_without_burst_are_fine() {
        let got = conf(serde_json::json!({"egressRate": 1_000_000}))
            .bandwidth()
            .unwrap()
            .unwrap();
        assert!(got.limits_egress() && !got.limits_ingress());
        assert_eq!(got.egress_burst, 0);
    }

    #[test]
    fn absent_null_and_zero_limits_are_none() {
        assert_eq!(NetConf::default().bandwidth().unwrap(), None);
        assert_eq!(conf(Value::Null).bandwidth().unwrap(), None);
        let zero = serde_json::json!({"ingressRate": 0, "egressRate": 0, "shapedSubnets": []});
        assert_eq!(conf(zero).bandwidth().unwrap(), None);
    }

    #[test]
    fn malformed_values_name_the_field() {
        assert!(message(serde_json::json!(5)).contains("not an object"));
        let negative = message(serde_json::json!({"ingressRate": -1}));
        assert!(negative.contains("`ingressRate`"), "{negative}");
        let text = message(serde_json::json!({"egressRate": "10M"}));
        assert!(text.contains("`egressRate`"), "{text}");
        let float = message(serde_json::json!({"egressRate": 1.5}));
        assert!(float.contains("`egressRate`"), "{float}");
        assert!(float.starts_with("invalid network config field `runtimeConfig.bandwidth`"));
    }

    #[test]
    fn a_burst_needs_its_rate_and_stays_under_4_gb() {
        let m = message(serde_json::json!({"ingressBurst": 100}));
        assert!(
            m.contains("`ingressBurst` is set without `ingressRate`"),
            "{m}"
        );
        let m = message(serde_json::json!({"egressRate": 1, "egressBurst": MAX_BURST_BITS}));
        assert!(m.contains("more than 4 GB"), "{m}");
        let just_under = serde_json::json!({"egressRate": 1, "egressBurst": MAX_BURST_BITS - 1});
        assert!(conf(just_under).bandwidth().unwrap().is_some());
    }

    #[test]
    fn subnet_selection_is_refused() {
        let m = message(serde_json::json!({"egressRate": 1, "unshapedSubnets": ["10.0.0.0/8"]}));
        assert!(m.contains("`unshapedSubnets` is not supported"), "{m}");
        let m = message(serde_json::json!({"egressRate": 1, "shapedSubnets": "x"}));
        assert!(m.contains("`shapedSubnets`"), "{m}");
    }
}
