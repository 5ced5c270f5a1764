//! A pod's bandwidth limits as the API carries them (`bandwidth` in
//! `POST /endpoint/create` and in every endpoint), and what the dataplane
//! reports about them.

use serde::{Deserialize, Serialize};

/// The limits of one pod, in the units of the CNI `bandwidth` capability:
/// rates in bits per second, bursts in bits; 0 means no limit in that
/// direction (a burst without its rate means nothing).
///
/// An endpoint without limits carries none (`bandwidth` absent, never all
/// zeros), so a plugin talking to a daemon that predates limits sends it
/// nothing new for an unlimited pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthLimits {
    /// Traffic to the pod, bits per second.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ingress_rate: u64,
    /// Burst of traffic to the pod, bits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ingress_burst: u64,
    /// Traffic from the pod, bits per second.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub egress_rate: u64,
    /// Burst of traffic from the pod, bits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub egress_burst: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl BandwidthLimits {
    /// Whether traffic to the pod is limited.
    pub fn limits_ingress(&self) -> bool {
        self.ingress_rate > 0
    }

    /// Whether traffic from the pod is limited.
    pub fn limits_egress(&self) -> bool {
        self.egress_rate > 0
    }

    /// `Some(self)` when it limits anything, `None` when it does not.
    pub fn nonzero(self) -> Option<Self> {
        (self.limits_ingress() || self.limits_egress()).then_some(self)
    }
}

impl std::fmt::Display for BandwidthLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = |rate: u64, burst: u64| match rate {
            0 => "unlimited".to_string(),
            r => format!("{r} bit/s (burst {burst} bit)"),
        };
        write!(
            f,
            "ingress {}, egress {}",
            side(self.ingress_rate, self.ingress_burst),
            side(self.egress_rate, self.egress_burst)
        )
    }
}

/// Whether a limited endpoint's shaping is in place in the dataplane
/// (`bandwidth` in `GET /stats/endpoints/{container_id}/{ifname}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BandwidthStatus {
    /// The limits the dataplane enforces for the endpoint (from its pacing
    /// map); `None` when it holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced: Option<BandwidthLimits>,
    /// What is missing or wrong for the endpoint's limits to hold (a qdisc
    /// or program absent, another one in its place); empty when all is in
    /// place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_fields_are_left_out_and_unknown_ones_refused() {
        let limits = BandwidthLimits {
            egress_rate: 50_000_000,
            egress_burst: 5_000_000,
            ..Default::default()
        };
        let json = serde_json::to_value(limits).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"egress_rate": 50_000_000, "egress_burst": 5_000_000})
        );
        assert_eq!(
            serde_json::from_value::<BandwidthLimits>(json).unwrap(),
            limits
        );
        assert!(serde_json::from_value::<BandwidthLimits>(serde_json::json!({"rate": 1})).is_err());
    }

    #[test]
    fn nonzero_is_none_without_a_rate() {
        assert_eq!(BandwidthLimits::default().nonzero(), None);
        let burst_only = BandwidthLimits {
            ingress_burst: 9,
            ..Default::default()
        };
        assert_eq!(burst_only.nonzero(), None);
        let ingress = BandwidthLimits {
            ingress_rate: 1,
            ..Default::default()
        };
        assert_eq!(ingress.nonzero(), Some(ingress));
        assert!(ingress.limits_ingress() && !ingress.limits_egress());
    }

    #[test]
    fn display_names_both_directions() {
        let limits = BandwidthLimits {
            ingress_rate: 80_000_000,
            ingress_burst: 800_000,
            ..Default::default()
        };
        assert_eq!(
            limits.to_string(),
            "ingress 80000000 bit/s (burst 800000 bit), egress unlimited"
        );
    }
}
