//! The JSON of the netavark plugin API 1.0.0, Sarena's own types for it:
//! the network config (`create`'s input and output, part of `setup`'s and
//! `teardown`'s input), the per-container input of `setup` and `teardown`,
//! the status block `setup` prints, `info`'s answer and the error object.
//!
//! Field names are netavark's (`src/network/types.rs` of netavark 1.6 and
//! later). Fields Sarena does not read are kept as they came
//! ([`Network::other`]), so that `create` hands back everything podman sent.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The plugin API version Sarena speaks (`info`'s `api_version`).
pub const API_VERSION: &str = "1.0.0";

/// A network config, as podman stores it and netavark passes it on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// The network's name (set by podman; `create` must not change it).
    pub name: String,
    /// The network's id (set by podman; `create` must not change it).
    pub id: String,
    /// The driver: the plugin's file name in the plugin directory.
    pub driver: String,
    /// The host interface of a bridge network; Sarena has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface: Option<String>,
    /// The network's subnets; `create` fills them in from the daemon's pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<Subnet>>,
    /// Whether one of the subnets is IPv6.
    #[serde(default)]
    pub ipv6_enabled: bool,
    /// A network without a route out (not supported by Sarena).
    #[serde(default)]
    pub internal: bool,
    /// aardvark-dns for the network (netavark runs it for bridge networks
    /// only; not supported by Sarena).
    #[serde(default)]
    pub dns_enabled: bool,
    /// IPAM options: `driver` says who hands out addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam_options: Option<BTreeMap<String, String>>,
    /// Driver options (`podman network create -o KEY=VALUE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<BTreeMap<String, String>>,
    /// Static routes (not supported by Sarena).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<Value>>,
    /// DNS servers for aardvark-dns (not supported by Sarena).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_dns_servers: Option<Vec<IpAddr>>,
    /// Every other field (`created`, `labels`, fields of later API
    /// versions), kept as it came.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One subnet of a network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subnet {
    /// The subnet.
    pub subnet: IpNet,
    /// Its gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// A range to lease addresses from (not supported by Sarena: the
    /// daemon's pool decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_range: Option<Value>,
}

/// `setup`'s and `teardown`'s input: the container and one of its networks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkPluginExec {
    /// The container's id (64 hex digits from podman).
    pub container_id: String,
    /// The container's name.
    pub container_name: String,
    /// The container's port mappings (not supported by Sarena).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_mappings: Option<Vec<PortMapping>>,
    /// The network.
    pub network: Network,
    /// The container's options on this network.
    pub network_options: PerNetworkOptions,
}

/// A container's options on one network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerNetworkOptions {
    /// The interface's name in the container (`eth0`, …).
    pub interface_name: String,
    /// Addresses asked for (`podman run --ip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_ips: Option<Vec<IpAddr>>,
    /// The interface's MAC asked for (`podman run --mac-address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_mac: Option<String>,
    /// DNS names of the container; the API asks a network without DNS to
    /// ignore them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aliases: Option<Vec<String>>,
    /// Per-container driver options (none supported by Sarena).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<BTreeMap<String, String>>,
}

/// One port mapping (`podman run -p`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortMapping {
    /// The container's port.
    pub container_port: u16,
    /// The host's address (empty: all).
    #[serde(default)]
    pub host_ip: String,
    /// The host's port.
    pub host_port: u16,
    /// `tcp`, `udp`, `sctp` or a comma-separated list.
    #[serde(default)]
    pub protocol: String,
    /// How many consecutive ports.
    #[serde(default)]
    pub range: u16,
}

/// What `setup` prints: the container's interface on the network.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusBlock {
    /// Search domains for the container's `/etc/resolv.conf`.
    #[serde(default)]
    pub dns_search_domains: Option<Vec<String>>,
    /// Name servers for the container's `/etc/resolv.conf`.
    #[serde(default)]
    pub dns_server_ips: Option<Vec<IpAddr>>,
    /// The interfaces made in the container, by name.
    #[serde(default)]
    pub interfaces: Option<BTreeMap<String, NetInterface>>,
}

/// One interface in a [`StatusBlock`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetInterface {
    /// Its MAC address.
    pub mac_address: String,
    /// Its addresses, each with its subnet's prefix and gateway.
    #[serde(default)]
    pub subnets: Option<Vec<NetAddress>>,
}

/// One address of a [`NetInterface`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetAddress {
    /// The address with its prefix length.
    pub ipnet: IpNet,
    /// The gateway.
    #[serde(default)]
    pub gateway: Option<IpAddr>,
}

/// What `info` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// The plugin's version.
    pub version: String,
    /// [`API_VERSION`].
    pub api_version: String,
    /// What the plugin is.
    pub description: String,
}

/// What a failed subcommand prints (with exit code 1); netavark shows
/// `error` to the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// The message.
    pub error: String,
}
