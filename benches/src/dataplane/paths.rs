//! Setting up each measured path: two pods on a throwaway node made by the
//! real plugin (Sarena eBPF, Sarena kernel, ptp + host-local), or the raw
//! veth pair. Everything is torn down on drop.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::embedded_check::{self, EmbeddedPath};
use super::raw_veth::{self, RawVethPair};
use super::results::{LIMITED_NEIGHBOUR, PathKind};
use super::rr;
use super::service::{self, KubeProxyRules};
use crate::BenchError;
use crate::node::exec::first_ipv6;
use crate::node::{Bins, NodeNetns, Pod, run_cmd};

/// Where a path's client and server live.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// The client's netns (`/run/netns/...`).
    pub client_ns: PathBuf,
    /// The server's netns.
    pub server_ns: PathBuf,
    /// The server's address (of the path's family).
    pub server_ip: IpAddr,
    /// The ClusterIP the client dials instead of `server_ip` (Service
    /// paths: its rules DNAT it to the server).
    pub cluster_ip: Option<IpAddr>,
    /// The request/response server's port when the path needs a known one
    /// (the embedded policy paths: the policies name it).
    pub fixed_rr_port: Option<u16>,
}

impl Endpoints {
    /// The address the client connects to.
    pub fn dial_ip(&self) -> IpAddr {
        self.cluster_ip.unwrap_or(self.server_ip)
    }

    /// The port the request/response server listens on: the fixed one if
    /// the path has one, the Service's port on a Service path, any free port
    /// otherwise.
    pub fn rr_port(&self) -> u16 {
        if let Some(port) = self.fixed_rr_port {
            port
        } else if self.cluster_ip.is_some() {
            service::RR_PORT
        } else {
            0
        }
    }
}

/// Two pods on one node; the pods are deleted (CNI DEL) before the node
/// goes.
#[derive(Debug)]
pub struct PodPair {
    client: Pod,
    server: Pod,
    /// A third pod, with bandwidth limits ([`PathKind::has_limited_neighbour`]).
    neighbour: Option<Pod>,
    node: NodeNetns,
}

impl PodPair {
    /// The node the pods are on.
    pub fn node(&self) -> &NodeNetns {
        &self.node
    }
}

impl Drop for PodPair {
    fn drop(&mut self) {
        let pods = [
            Some(&self.client),
            Some(&self.server),
            self.neighbour.as_ref(),
        ];
        for pod in pods.into_iter().flatten() {
            self.node.del_or_warn(pod);
        }
    }
}

/// What keeps a path alive.
#[derive(Debug)]
pub enum Setup {
    /// The raw veth pair (held only to be dropped last).
    Raw(#[allow(dead_code, reason = "held for its Drop")] RawVethPair),
    /// Two pods on a node.
    Pods(Box<PodPair>),
    /// Two pods of Sarena embedded in the harness.
    Embedded(Box<EmbeddedPath>),
}

/// A path ready to be measured.
#[derive(Debug)]
pub struct PreparedPath {
    /// Which path.
    pub kind: PathKind,
    /// Client and server.
    pub endpoints: Endpoints,
    /// The server side's `eth0` MTU.
    pub mtu: Option<u32>,
    /// The kube-proxy rules of a Service path (in the node netns, which
    /// takes them along when it goes).
    pub service: Option<KubeProxyRules>,
    /// The namespaces, node and pods (dropped last).
    pub setup: Setup,
}

impl PreparedPath {
    /// The node's pin dir, for the eBPF path.
    pub fn pin_dir(&self) -> Option<&Path> {
        match &self.setup {
            Setup::Pods(p) => p.node().pin_dir(),
            Setup::Embedded(e) => Some(e.node.pin_dir()),
            Setup::Raw(_) => None,
        }
    }

    /// The embedded path's node and policy figures.
    pub fn embedded(&self) -> Option<&EmbeddedPath> {
        match &self.setup {
            Setup::Embedded(e) => Some(e),
            _ => None,
        }
    }
}

/// The MTU in `ip -o link show` output.
pub fn parse_mtu(ip_link: &str) -> Option<u32> {
    let mut words = ip_link.split_whitespace();
    words.find(|w| *w == "mtu")?;
    words.next()?.parse().ok()
}

pub(crate) fn mtu_of(netns_name: &str) -> Option<u32> {
    run_cmd("ip", &["-n", netns_name, "-o", "link", "show", "eth0"])
        .ok()
        .as_deref()
        .and_then(parse_mtu)
}

/// Sets up `kind` (a node with index `node_index` from `bins` for the
/// plugin paths) and checks that a TCP round trip works over it.
pub fn prepare(
    kind: PathKind,
    node_index: u8,
    bins: Option<&Bins>,
) -> Result<PreparedPath, BenchError> {
    let path = match kind.contender() {
        None if kind.is_embedded() => {
            let (endpoints, embedded) = embedded_check::prepare(kind, node_index)?;
            let mtu = embedded
                .node
                .pods()
                .get(1)
                .and_then(|p| mtu_of(p.netns.name()));
            PreparedPath {
                kind,
                endpoints,
                mtu,
                service: None,
                setup: Setup::Embedded(Box::new(embedded)),
            }
        }
        None => {
            let pair = RawVethPair::new(kind.ipv6())?;
            PreparedPath {
                kind,
                endpoints: Endpoints {
                    client_ns: pair.client_netns().to_owned(),
                    server_ns: pair.server_netns().to_owned(),
                    server_ip: RawVethPair::server_ip(kind.ipv6()),
                    cluster_ip: None,
                    fixed_rr_port: None,
                },
                mtu: Some(raw_veth::MTU),
                service: None,
                setup: Setup::Raw(pair),
            }
        }
        Some(contender) => {
            let bins = bins.ok_or_else(|| BenchError::Input {
                what: format!("{}: the binaries were not located", kind.label()),
            })?;
            let node = if kind.ipv6() {
                NodeNetns::start_dual_stack(contender, node_index, bins)?
            } else {
                NodeNetns::start(contender, node_index, bins)?
            };
            let client = Pod::new("dp-client")?;
            let server = Pod::new("dp-server")?;
            let mut pair = PodPair {
                client,
                server,
                neighbour: None,
                node,
            };
            if kind.has_limited_neighbour() {
                pair.neighbour = Some(add_limited_neighbour(&pair.node)?);
            }
            pair.node.add_ok(&pair.client)?;
            let added = pair.node.add_ok(&pair.server)?;
            let server_ip = if kind.ipv6() {
                added.json.as_ref().and_then(first_ipv6).map(IpAddr::V6)
            } else {
                added.ip.map(IpAddr::V4)
            };
            let server_ip = server_ip.ok_or_else(|| BenchError::Verify {
                what: format!(
                    "{}: ADD of the server pod gave no address of the path's family",
                    kind.label()
                ),
            })?;
            let mtu = mtu_of(pair.server.netns_name());
            let service = match (kind.is_service(), server_ip) {
                (false, _) => None,
                (true, IpAddr::V4(v4)) => Some(KubeProxyRules::install(&pair.node, v4)?),
                (true, IpAddr::V6(_)) => {
                    return Err(BenchError::Input {
                        what: format!("{}: Service paths are IPv4 only", kind.label()),
                    });
                }
            };
            PreparedPath {
                kind,
                endpoints: Endpoints {
                    client_ns: pair.client.netns_path().to_owned(),
                    server_ns: pair.server.netns_path().to_owned(),
                    server_ip,
                    cluster_ip: service
                        .as_ref()
                        .map(|s| IpAddr::V4(KubeProxyRules::cluster_ip(s))),
                    fixed_rr_port: None,
                },
                mtu,
                service,
                setup: Setup::Pods(Box::new(pair)),
            }
        }
    };
    // The path must carry a TCP connection before it is measured.
    rr::measure(&path.endpoints, Duration::from_millis(100), None)?;
    Ok(path)
}

/// A pod with [`LIMITED_NEIGHBOUR`]'s limits on `node`, whose CHECK passed
/// (so the daemon reports them in place in the dataplane).
fn add_limited_neighbour(node: &NodeNetns) -> Result<Pod, BenchError> {
    let bandwidth: serde_json::Value =
        serde_json::from_str(LIMITED_NEIGHBOUR).map_err(|source| BenchError::Json {
            what: "the limited pod's runtimeConfig.bandwidth".into(),
            source,
        })?;
    let pod =
        Pod::new("dp-limited")?.with_runtime_config(serde_json::json!({ "bandwidth": bandwidth }));
    node.add_ok(&pod)?;
    // DEL runs when the pair is dropped; here the pod is not in one yet.
    if let Err(e) = node.check_ok(&pod) {
        let _ = node.del(&pod);
        return Err(e);
    }
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_is_read_from_ip_link() {
        let line = "2: eth0@if5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1450 qdisc noqueue state UP \
                    mode DEFAULT group default qlen 1000\\    link/ether 5a:...";
        assert_eq!(parse_mtu(line), Some(1450));
        assert_eq!(parse_mtu("2: eth0: <UP> qdisc noop"), None);
        assert_eq!(parse_mtu("mtu x"), None);
    }
}
