//! The node's network settings in `GET /daemon/status` ([`NetworkStatus`]):
//! the pods' MTU and where it came from, and egress masquerading. Field
//! names are stable (`sarena status -o json` prints them as they are).

use std::fmt;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The `network` part of [`super::DaemonStatus`]; each half is absent until
/// the daemon knows it (Kubernetes mode: until the first session opens).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkStatus {
    /// The MTU new pods get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<MtuStatus>,
    /// Egress masquerading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masquerade: Option<MasqueradeStatus>,
    /// Kubernetes mode: the peers whose Node objects are not trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<PeersStatus>,
    /// `vxlan` routing: what the filter in front of the VXLAN device dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vxlan_filter: Option<VxlanFilterStatus>,
}

/// Peers rejected for their Node objects (an `InternalIP` or podCIDR
/// Sarena must not route to): not routed, no FDB entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeersStatus {
    /// The peers rejected now, by name.
    #[serde(default)]
    pub rejected: Vec<RejectedPeerStatus>,
    /// Rejections since the daemon started, by reason (each counted when
    /// the peer's Node object starts being rejected for it).
    #[serde(default)]
    pub rejections: std::collections::BTreeMap<String, u64>,
}

/// One rejected peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedPeerStatus {
    /// The Node's name.
    pub node: String,
    /// The reason (`own_address`, `pod_cidr_outside_cluster`, …).
    pub reason: String,
    /// The address or podCIDR at fault.
    pub detail: String,
}

/// The VXLAN filter's drop counter (packets to the VXLAN port from
/// anything but a current peer through the underlay).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VxlanFilterStatus {
    /// Packets dropped since the filter was created.
    pub dropped_packets: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
}

/// Where the MTU the pods' is derived from came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MtuSource {
    /// The configuration's `mtu`.
    Configured,
    /// The uplink's MTU (the device holding the node's address, or the
    /// default route's).
    Uplink,
    /// Neither: no `mtu` configured and no uplink found; 1500.
    Default,
}

/// The pods' MTU in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MtuStatus {
    /// The MTU new pods get (veth and routes).
    pub mtu: u32,
    /// Where `base` came from.
    pub source: MtuSource,
    /// The MTU the pods' is derived from: the configured one, the uplink's, or 1500.
    pub base: u32,
    /// The uplink device when `source` is `uplink`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink: Option<String>,
    /// What the routing mode's encapsulation takes (`base - mtu`; 0 without one).
    #[serde(default)]
    pub overhead: u32,
}

impl fmt::Display for MtuStatus {
    /// `8950 (uplink eth0 9000 - 50 encapsulation)`, `1500 (configured)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (", self.mtu)?;
        match (self.source, &self.uplink) {
            (MtuSource::Uplink, Some(device)) => write!(f, "uplink {device} {}", self.base)?,
            (MtuSource::Uplink, None) => write!(f, "uplink {}", self.base)?,
            (MtuSource::Configured, _) => write!(f, "configured {}", self.base)?,
            (MtuSource::Default, _) => write!(f, "default {}, no uplink found", self.base)?,
        }
        if self.overhead > 0 {
            write!(f, " - {} encapsulation", self.overhead)?;
        }
        write!(f, ")")
    }
}

/// Egress masquerading: traffic from the pods to anywhere but `exempt`
/// leaves with the node's address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasqueradeStatus {
    /// Whether it is on.
    pub enabled: bool,
    /// Destinations never masqueraded: this node's pools, the cluster's pod
    /// CIDRs, the nodes' addresses and the configured `no_masquerade`,
    /// merged.
    #[serde(default)]
    pub exempt: Vec<IpNet>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mtu_says_where_it_came_from() {
        let mut s = MtuStatus {
            mtu: 8950,
            source: MtuSource::Uplink,
            base: 9000,
            uplink: Some("eth0".into()),
            overhead: 50,
        };
        assert_eq!(s.to_string(), "8950 (uplink eth0 9000 - 50 encapsulation)");
        (s.mtu, s.source, s.base, s.uplink, s.overhead) =
            (1500, MtuSource::Configured, 1500, None, 0);
        assert_eq!(s.to_string(), "1500 (configured 1500)");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["source"], "configured");
    }
}
