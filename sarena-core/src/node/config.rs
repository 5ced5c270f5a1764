//! [`NodeConfig`]: the daemon's configuration file (TOML) and its embedded default.

use std::fmt;
use std::path::{Path, PathBuf};

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};

use crate::api::DaemonConfig;
use crate::cluster::KubernetesConfig;
use crate::dataplane::{DataplaneMode, NodeNetwork};
use crate::ipam::{Allocator, IpamConfig, PoolConfig, PoolConfigError};

/// The configuration the daemon runs with when given none. It works out of the box:
/// one default pool `10.200.0.0/16` (gateway `10.200.0.1`) serving every namespace.
///
/// Every key is optional; this is also the reference of the file format.
pub const DEFAULT_CONFIG_TOML: &str = r#"# Sarena daemon configuration (TOML).

# MTU of both veth ends and of the pod's routes. Default: the uplink's (the
# device holding the node's address in Kubernetes mode, else the default
# route's), less the encapsulation's overhead in `vxlan` routing (50 bytes;
# 70 over an IPv6 underlay). Set, it replaces the uplink's MTU (`vxlan` still
# subtracts its overhead). `sarena status` shows the MTU in use and its source.
# mtu = 1500

# Dataplane: "ebpf" (default), "kernel" (plain kernel routing), or "none"
# (IPAM and endpoint registry only; nothing forwards pod traffic).
dataplane = "ebpf"

# Egress masquerading: traffic from the pods to a destination outside the
# cluster's pod CIDRs leaves with the node's address (nftables `masquerade`).
# Default: on in Kubernetes mode, off otherwise. Never masqueraded: this node's
# pools, `cluster_cidrs`, `no_masquerade` and, in Kubernetes mode, every Node's
# podCIDRs and InternalIPs (kept current as nodes come and go).
# masquerade = true

# The cluster's pod CIDRs. Default: in Kubernetes mode, the union of all
# Nodes' podCIDRs; otherwise none beyond this node's pools. In Kubernetes
# mode they also bound the peers: a Node whose podCIDR lies outside them, or
# whose InternalIP lies inside them, is rejected (not routed). Without them a
# peer's podCIDR may be no wider than this node's.
cluster_cidrs = []

# Further destinations never masqueraded (e.g. a peered VPC).
no_masquerade = []

# Seconds an allocation may live without an endpoint before the daemon releases it
# (an ADD that died between allocate and endpoint/create). 0 disables expiry.
lease_seconds = 180

# Address pools. Each pool has one or more CIDRs (IPv4 and/or IPv6); a pod gets one
# address per family. `gateways` (default: the first usable address of each CIDR) and
# `reserved` (CIDRs, single addresses or "a-b" ranges) are never handed out.
# `namespaces` lists the Kubernetes namespaces a pool serves; exactly one pool has
# none: the default pool, for every other namespace and non-Kubernetes containers.
[[ipam.pools]]
name = "default"
cidrs = ["10.200.0.0/16"]
gateways = ["10.200.0.1"]
reserved = []
namespaces = []

# A per-namespace, dual-stack pool. Its pods get one address of each family in
# one ADD (both or neither); the IPv6 one is routed via the link-local fe80::1,
# which the host end of each pod's veth answers for, so the IPv6 gateway (here
# the default, fd00:201::1) is an address of the host, never a pod's next hop.
# [[ipam.pools]]
# name = "team-a"
# cidrs = ["10.201.0.0/24", "fd00:201::/64"]
# reserved = ["10.201.0.240/28", "fd00:201::100-fd00:201::1ff"]
# namespaces = ["team-a", "team-a-staging"]

# Kubernetes mode (also `sarena-daemon --kubernetes`): the default pool's CIDRs
# become this node's spec.podCIDRs (a configured gateway is kept when it lies in
# them), and the other nodes' podCIDRs are routed. Per-namespace pools still apply.
[kubernetes]
enabled = false
# A kubeconfig file (also --kubeconfig); default: the in-cluster credentials.
# kubeconfig = "/etc/sarena/kubeconfig"
# "native": a route per peer podCIDR via the peer's InternalIP (one L2 segment);
# "vxlan": a kernel VXLAN overlay (any IP underlay; pods' MTU is mtu - 50).
routing = "native"
vxlan_vni = 1
vxlan_port = 8472
# The VXLAN underlay device; default: the one holding this node's InternalIP.
# underlay = "eth0"
"#;

/// Errors in the configuration; each names the offending field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not valid TOML, or a key with the wrong type / an unknown key.
    #[error("invalid daemon configuration")]
    Parse {
        /// The parser's error (it carries the line and key).
        #[source]
        source: toml::de::Error,
    },
    /// The configuration file could not be read.
    #[error("cannot read daemon configuration {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A field has a value the daemon cannot use.
    #[error("invalid daemon configuration: {field} = {value}: {reason}")]
    Invalid {
        /// The field, e.g. `ipam.pools[1].reserved[0]`.
        field: String,
        /// The offending value as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ConfigError {
    /// A [`ConfigError::Invalid`].
    pub fn invalid(
        field: impl Into<String>,
        value: impl fmt::Display,
        reason: impl Into<String>,
    ) -> Self {
        ConfigError::Invalid {
            field: field.into(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

impl From<PoolConfigError> for ConfigError {
    /// A pool error is an invalid field of the daemon's configuration.
    fn from(e: PoolConfigError) -> Self {
        let PoolConfigError {
            field,
            value,
            reason,
        } = e;
        ConfigError::Invalid {
            field,
            value,
            reason,
        }
    }
}

/// The daemon's configuration. See [`DEFAULT_CONFIG_TOML`] for the file format.
///
/// ```
/// use sarena_core::node::NodeConfig;
/// let cfg = NodeConfig::from_toml_str("mtu = 9000\n[[ipam.pools]]\nname = \"p\"\ncidrs = [\"10.9.0.0/24\"]\n")?;
/// assert_eq!(cfg.mtu, Some(9000));
/// assert_eq!(cfg.lease_seconds, 180);
/// # Ok::<(), sarena_core::node::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// MTU of the veth pair and the pod's routes; default (`None`): the
    /// uplink's, less the encapsulation's overhead (see [`crate::uplink`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Dataplane mode (default `ebpf`).
    #[serde(default)]
    pub dataplane: DataplaneMode,
    /// Masquerade pod traffic to destinations outside the cluster's pod
    /// CIDRs; default (`None`): on in Kubernetes mode, off otherwise
    /// ([`NodeConfig::masquerade_enabled`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masquerade: Option<bool>,
    /// The cluster's pod CIDRs (never masqueraded); empty: in Kubernetes
    /// mode, the union of all Nodes' podCIDRs. In Kubernetes mode also the
    /// bounds of the peers' podCIDRs (`cluster::screen_peers`).
    #[serde(default)]
    pub cluster_cidrs: Vec<IpNet>,
    /// Further destinations never masqueraded.
    #[serde(default)]
    pub no_masquerade: Vec<IpNet>,
    /// Seconds an allocation without endpoint lives (default 180; 0: forever).
    #[serde(default = "default_lease_seconds")]
    pub lease_seconds: u64,
    /// Address pools (default: the `10.200.0.0/16` default pool).
    #[serde(default)]
    pub ipam: IpamConfig,
    /// The `[kubernetes]` table (Kubernetes mode; off by default).
    #[serde(default)]
    pub kubernetes: KubernetesConfig,
}

/// The MTU when none is configured and no uplink is found.
pub const DEFAULT_MTU: u32 = 1500;

fn default_lease_seconds() -> u64 {
    180
}

impl Default for IpamConfig {
    fn default() -> Self {
        IpamConfig {
            pools: vec![PoolConfig {
                name: "default".to_owned(),
                cidrs: vec![IpNet::V4(Ipv4Net::new_assert([10, 200, 0, 0].into(), 16))],
                gateways: vec![[10, 200, 0, 1].into()],
                reserved: Vec::new(),
                namespaces: Vec::new(),
            }],
        }
    }
}

impl Default for NodeConfig {
    /// The configuration of [`DEFAULT_CONFIG_TOML`].
    fn default() -> Self {
        NodeConfig {
            mtu: None,
            dataplane: DataplaneMode::default(),
            masquerade: None,
            cluster_cidrs: Vec::new(),
            no_masquerade: Vec::new(),
            lease_seconds: default_lease_seconds(),
            ipam: IpamConfig::default(),
            kubernetes: KubernetesConfig::default(),
        }
    }
}

impl NodeConfig {
    /// Parses and validates a TOML configuration.
    pub fn from_toml_str(text: &str) -> Result<NodeConfig, ConfigError> {
        let cfg: NodeConfig =
            toml::from_str(text).map_err(|source| ConfigError::Parse { source })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads, parses and validates a TOML configuration file.
    pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        NodeConfig::from_toml_str(&text)
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let has_v6 = self
            .ipam
            .pools
            .iter()
            .flat_map(|p| &p.cidrs)
            .any(|c| matches!(c, IpNet::V6(_)));
        let min_mtu = if has_v6 { 1280 } else { 576 };
        if let Some(mtu) = self.mtu
            && !(min_mtu..=65535).contains(&mtu)
        {
            return Err(ConfigError::invalid(
                "mtu",
                mtu,
                format!("must be between {min_mtu} and 65535"),
            ));
        }
        Allocator::new(&self.ipam)?;
        self.kubernetes.validate()
    }

    /// What `GET /daemon/config` serves. The daemon resolves the MTU
    /// before it opens the node state (`mtu` is then set); unset, 1500.
    pub fn daemon_config(&self) -> DaemonConfig {
        DaemonConfig {
            mtu: self.mtu.unwrap_or(DEFAULT_MTU),
            dataplane: self.dataplane.as_str().to_owned(),
        }
    }

    /// Whether pod traffic leaving the cluster's pod CIDRs is masqueraded:
    /// `masquerade` when set, else whether Kubernetes mode is on.
    pub fn masquerade_enabled(&self) -> bool {
        self.masquerade.unwrap_or(self.kubernetes.enabled)
    }

    /// The configured destinations never masqueraded: `cluster_cidrs` and
    /// `no_masquerade`.
    pub fn masquerade_exempt(&self) -> Vec<IpNet> {
        self.cluster_cidrs
            .iter()
            .chain(&self.no_masquerade)
            .copied()
            .collect()
    }

    /// What the dataplane needs: every pool's gateways and CIDRs, and
    /// masquerading (the switch and the configured exemptions).
    pub fn node_network(&self) -> Result<NodeNetwork, ConfigError> {
        let allocator = Allocator::new(&self.ipam)?;
        let mut network = NodeNetwork {
            masquerade: self.masquerade_enabled(),
            exempt: self.masquerade_exempt(),
            ..NodeNetwork::default()
        };
        for pool in allocator.pools() {
            for cidr in &pool.cidrs {
                network.gateways.push(cidr.gateway);
                network.pools.push(cidr.net);
            }
        }
        Ok(network)
    }
}
