//! Setting up each cross-node path: two node netns joined by an underlay
//! veth pair, a client pod on the first node and a server pod on the
//! second, made by the contender's own plugin, and the nodes routed to each
//! other's pods the way the contender does it. Everything is torn down on
//! drop (pods first, then the nodes, which take the underlay along).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sarena_common::peers::{FROM_NETWORK_PROG, NodeCounters};
use sarena_common::policy::TO_NETWORK_PROG;
use sarena_common::{FROM_CONTAINER_PROG, TO_CONTAINER_PROG};
use sarena_core::cluster::{ClusterNode, ClusterView, RoutingMode};
use serde::{Deserialize, Serialize};

use super::topology::{self, UNDERLAY_MTU};
use crate::BenchError;
use crate::dataplane::embedded::EmbeddedNode;
use crate::dataplane::paths::{Endpoints, mtu_of};
use crate::dataplane::prog_stats::NamedPrograms;
use crate::dataplane::raw_veth::RawVethPair;
use crate::dataplane::rr;
use crate::node::{Bins, Contender, NodeNetns, Pod};

/// The programs whose cost per run the eBPF paths report.
pub const PROGRAMS: [&str; 4] = [
    FROM_CONTAINER_PROG,
    TO_NETWORK_PROG,
    FROM_NETWORK_PROG,
    TO_CONTAINER_PROG,
];

/// A cross-node path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrossKind {
    /// The two node netns talking over the underlay directly (the floor).
    Underlay,
    /// Sarena embedded, eBPF dataplane, `routing = "native"`.
    SarenaEbpfNative,
    /// Sarena embedded, eBPF dataplane, `routing = "vxlan"`.
    SarenaEbpfVxlan,
    /// The same VXLAN nodes with eBPF host routing off (no peer pod CIDRs
    /// in the programs' map): the host stack forwards into and out of the
    /// VXLAN device, as before issue 27. What the direct path is measured
    /// against.
    SarenaEbpfVxlanHostStack,
    /// sarena-cni + sarena-daemon, kernel dataplane; native routes.
    SarenaKernel,
    /// Reference ptp + host-local with a route per peer pod subnet through
    /// the host stack (flannel host-gw's model).
    HostGw,
}

impl CrossKind {
    /// Every path, in report order.
    pub const ALL: [CrossKind; 6] = [
        CrossKind::Underlay,
        CrossKind::SarenaEbpfNative,
        CrossKind::SarenaEbpfVxlan,
        CrossKind::SarenaEbpfVxlanHostStack,
        CrossKind::SarenaKernel,
        CrossKind::HostGw,
    ];

    /// The name used in tables.
    pub fn label(self) -> &'static str {
        match self {
            CrossKind::Underlay => "underlay (node ↔ node)",
            CrossKind::SarenaEbpfNative => "Sarena eBPF, native routing",
            CrossKind::SarenaEbpfVxlan => "Sarena eBPF, VXLAN",
            CrossKind::SarenaEbpfVxlanHostStack => "Sarena eBPF, VXLAN via the host stack",
            CrossKind::SarenaKernel => "Sarena kernel, native routing",
            CrossKind::HostGw => "ptp + host-local + routes (host-gw)",
        }
    }

    /// The name in crossnode.json and `--paths`.
    pub fn name(self) -> &'static str {
        match self {
            CrossKind::Underlay => "underlay",
            CrossKind::SarenaEbpfNative => "sarena-ebpf-native",
            CrossKind::SarenaEbpfVxlan => "sarena-ebpf-vxlan",
            CrossKind::SarenaEbpfVxlanHostStack => "sarena-ebpf-vxlan-host-stack",
            CrossKind::SarenaKernel => "sarena-kernel",
            CrossKind::HostGw => "host-gw",
        }
    }

    /// Whether the path's eBPF programs route to and from the other node
    /// directly (its counters prove the direct path).
    pub fn is_direct(self) -> bool {
        matches!(
            self,
            CrossKind::SarenaEbpfNative | CrossKind::SarenaEbpfVxlan
        )
    }

    /// The path's underlay link index (`10.97.<i>.0/24`), and its pod subnet
    /// numbers: the embedded nodes' `10.<n>.0.0/24`, the plugin nodes'
    /// `10.<150 + n>.0.0/16`.
    fn numbers(self) -> (u8, [u8; 2]) {
        match self {
            CrossKind::Underlay => (0, [0, 0]),
            CrossKind::SarenaEbpfNative => (1, [71, 72]),
            CrossKind::SarenaEbpfVxlan => (2, [73, 74]),
            CrossKind::SarenaEbpfVxlanHostStack => (5, [75, 76]),
            CrossKind::SarenaKernel => (3, [60, 61]),
            CrossKind::HostGw => (4, [62, 63]),
        }
    }
}

/// Two plugin nodes with a pod each (deleted before the nodes go).
#[derive(Debug)]
pub struct PluginNodes {
    pods: [Pod; 2],
    nodes: [NodeNetns; 2],
}

impl Drop for PluginNodes {
    fn drop(&mut self) {
        for (node, pod) in self.nodes.iter().zip(&self.pods) {
            node.del_or_warn(pod);
        }
    }
}

/// What keeps a path alive.
#[derive(Debug)]
pub enum CrossSetup {
    /// The underlay alone.
    Raw(#[allow(dead_code, reason = "held for its Drop")] RawVethPair),
    /// Two embedded Sarena nodes (client's first).
    Embedded(Box<[EmbeddedNode; 2]>),
    /// Two plugin nodes.
    Plugin(#[allow(dead_code, reason = "held for its Drop")] Box<PluginNodes>),
}

/// A cross-node path ready to be measured.
#[derive(Debug)]
pub struct CrossPath {
    /// Which path.
    pub kind: CrossKind,
    /// The client (on the first node) and the server (on the second).
    pub endpoints: Endpoints,
    /// The server's `eth0` MTU.
    pub mtu: Option<u32>,
    /// The two node netns (client's first).
    pub nodes: [PathBuf; 2],
    /// The eBPF paths' programs on both nodes (client's first).
    pub programs: Option<[NamedPrograms; 2]>,
    /// Nodes and pods (dropped last).
    pub setup: CrossSetup,
}

impl CrossPath {
    /// Both nodes' eBPF host-routing counters (the eBPF paths only).
    pub fn counters(&self) -> Option<Result<[NodeCounters; 2], BenchError>> {
        match &self.setup {
            CrossSetup::Embedded(nodes) => Some(
                nodes[0]
                    .node_counters()
                    .and_then(|a| Ok([a, nodes[1].node_counters()?])),
            ),
            _ => None,
        }
    }
}

fn cluster_node(name: &str, underlay: Ipv4Addr, subnet: u8) -> ClusterNode {
    ClusterNode {
        name: name.into(),
        uid: format!("{name}-uid"),
        internal_ips: vec![IpAddr::V4(underlay)],
        pod_cidrs: vec![EmbeddedNode::pod_cidr(subnet)],
    }
}

/// Two embedded Sarena nodes in `routing`, a pod on each; on a path that
/// is not [`CrossKind::is_direct`], the programs route nothing to or from
/// the peer directly.
fn embedded(kind: CrossKind, routing: RoutingMode) -> Result<CrossPath, BenchError> {
    let (pair, subnets) = kind.numbers();
    // VXLAN's 50 bytes of headers come out of the pods' MTU, as the daemon
    // does in Kubernetes mode (`session_mtu`).
    let mtu = (routing == RoutingMode::Vxlan).then_some(UNDERLAY_MTU - 50);
    let mut a = EmbeddedNode::start_with(&format!("{} node a", kind.label()), subnets[0], mtu)?;
    let mut b = EmbeddedNode::start_with(&format!("{} node b", kind.label()), subnets[1], mtu)?;
    let nodes = [
        a.node_netns().path().to_owned(),
        b.node_netns().path().to_owned(),
    ];
    let underlay = topology::link_nodes(&nodes[0], &nodes[1], pair)?;
    let members = [
        cluster_node("a", underlay[0], subnets[0]),
        cluster_node("b", underlay[1], subnets[1]),
    ];
    for (node, (local, peer)) in [&a, &b].into_iter().zip([(0, 1), (1, 0)]) {
        node.join_cluster(
            ClusterView {
                local_name: members[local].name.clone(),
                local: Some(members[local].clone()),
                peers: vec![members[peer].clone()],
            },
            routing,
        )?;
        if !kind.is_direct() {
            node.host_stack_routing()?;
        }
    }
    a.add_pod("xn-client")?;
    b.add_pod("xn-server")?;
    let (client, server) = (&a.pods()[0], &b.pods()[0]);
    let server_ip = server.ip.ok_or_else(|| BenchError::Verify {
        what: format!("{}: the server pod got no IPv4 address", kind.label()),
    })?;
    let endpoints = Endpoints {
        client_ns: client.netns.path().to_owned(),
        server_ns: server.netns.path().to_owned(),
        server_ip,
        cluster_ip: None,
        fixed_rr_port: None,
    };
    let mtu = mtu_of(server.netns.name());
    let programs = [a.pin_dir(), b.pin_dir()].map(|dir| NamedPrograms::find(dir, &PROGRAMS));
    let [pa, pb] = programs;
    Ok(CrossPath {
        kind,
        endpoints,
        mtu,
        nodes,
        programs: Some([pa?, pb?]),
        setup: CrossSetup::Embedded(Box::new([a, b])),
    })
}

/// Two nodes of `contender` (a daemon each for Sarena), a pod on each, a
/// route on each node to the other's pod subnet through the underlay.
fn plugin(kind: CrossKind, contender: Contender, bins: &Bins) -> Result<CrossPath, BenchError> {
    let (pair, indexes) = kind.numbers();
    let a = NodeNetns::start(contender, indexes[0], bins)?;
    let b = NodeNetns::start(contender, indexes[1], bins)?;
    let nodes = [a.netns_path().to_owned(), b.netns_path().to_owned()];
    let underlay = topology::link_nodes(&nodes[0], &nodes[1], pair)?;
    topology::route_via(&nodes[0], b.subnet(), underlay[1])?;
    topology::route_via(&nodes[1], a.subnet(), underlay[0])?;
    let pods = [Pod::new("xn-client")?, Pod::new("xn-server")?];
    let both = PluginNodes {
        pods,
        nodes: [a, b],
    };
    both.nodes[0].add_ok(&both.pods[0])?;
    let added = both.nodes[1].add_ok(&both.pods[1])?;
    let server_ip = added.ip.map(IpAddr::V4).ok_or_else(|| BenchError::Verify {
        what: format!(
            "{}: ADD of the server pod gave no IPv4 address",
            kind.label()
        ),
    })?;
    let endpoints = Endpoints {
        client_ns: both.pods[0].netns_path().to_owned(),
        server_ns: both.pods[1].netns_path().to_owned(),
        server_ip,
        cluster_ip: None,
        fixed_rr_port: None,
    };
    let mtu = mtu_of(both.pods[1].netns_name());
    Ok(CrossPath {
        kind,
        endpoints,
        mtu,
        nodes,
        programs: None,
        setup: CrossSetup::Plugin(Box::new(both)),
    })
}

/// Sets up `kind` and checks that a TCP round trip works over it.
pub fn prepare(kind: CrossKind, bins: &Bins) -> Result<CrossPath, BenchError> {
    let path = match kind {
        CrossKind::Underlay => {
            let pair = RawVethPair::new(false)?;
            let nodes = [
                pair.client_netns().to_owned(),
                pair.server_netns().to_owned(),
            ];
            CrossPath {
                kind,
                endpoints: Endpoints {
                    client_ns: nodes[0].clone(),
                    server_ns: nodes[1].clone(),
                    server_ip: RawVethPair::server_ip(false),
                    cluster_ip: None,
                    fixed_rr_port: None,
                },
                mtu: Some(crate::dataplane::raw_veth::MTU),
                nodes,
                programs: None,
                setup: CrossSetup::Raw(pair),
            }
        }
        CrossKind::SarenaEbpfNative => embedded(kind, RoutingMode::Native)?,
        CrossKind::SarenaEbpfVxlan => embedded(kind, RoutingMode::Vxlan)?,
        CrossKind::SarenaEbpfVxlanHostStack => embedded(kind, RoutingMode::Vxlan)?,
        CrossKind::SarenaKernel => plugin(kind, Contender::SarenaKernel, bins)?,
        CrossKind::HostGw => plugin(kind, Contender::PtpHostLocal, bins)?,
    };
    rr::measure(&path.endpoints, Duration::from_millis(100), None)?;
    Ok(path)
}

/// The node netns of `path` as paths (for the firewall and the counters).
pub fn node_paths(path: &CrossPath) -> [&Path; 2] {
    [path.nodes[0].as_path(), path.nodes[1].as_path()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_json_names() {
        for kind in CrossKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::Value::String(kind.name().into()));
            let back: CrossKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, kind);
        }
    }
}
