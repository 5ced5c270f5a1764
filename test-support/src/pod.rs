//! A pod as the plugin would leave it, made directly with `RtnetlinkLinks`:
//! a throwaway netns, a veth pair, an address and routes via the gateway,
//! and the registry entry describing it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;

use ipnet::IpNet;
use sarena_core::api::{AllocatedAddress, Attachment, Endpoint, EndpointSpec, PodRef};
use sarena_core::links::{Links, PodIfaceConfig, RtnetlinkLinks, VethSpec, host_ifname};
use sarena_core::node::{pod_gateway, pod_routes};

use crate::names::unique;
use crate::netns::{HostLinkGuard, TestNetns};

/// One pod: netns, veth pair (host end removed on drop), and its endpoint.
#[derive(Debug)]
pub struct Pod {
    /// The pod's namespace; its interface is `eth0`.
    pub netns: TestNetns,
    /// What the registry would hold for it (container id unique per run).
    pub endpoint: Endpoint,
    _host_link: HostLinkGuard,
}

impl Pod {
    /// A pod with `address` (CIDR, e.g. `10.252.0.10/16`) on `eth0`, a host
    /// route to `gateway` and a default route via it; MTU 1500.
    pub async fn new(links: &RtnetlinkLinks, address: &str, gateway: &str) -> Pod {
        Pod::with_addresses(links, &[(address, gateway)]).await
    }

    /// A pod with `(address, pool gateway)` pairs of either family or both
    /// (e.g. `[("10.252.0.10/24", "10.252.0.1"), ("fd00:252::10/64",
    /// "fd00:252::1")]`) on `eth0`, configured as an ADD would: the
    /// gateways and routes the daemon hands out (`sarena_core::node::pod_routes`:
    /// IPv6 via `fe80::1`); MTU 1500.
    pub async fn with_addresses(links: &RtnetlinkLinks, addresses: &[(&str, &str)]) -> Pod {
        let netns = TestNetns::new();
        let container = unique("ctr");
        let spec = VethSpec {
            host_ifname: host_ifname(&container, "eth0"),
            netns: netns.path(),
            pod_ifname: "eth0".into(),
            mtu: 1500,
            pod_mac: None,
            host_ipv6: addresses.iter().any(|(address, _)| address.contains(':')),
        };
        let guard = HostLinkGuard(spec.host_ifname.clone());
        let pair = links.create_veth(&spec).await.unwrap();
        let allocated: Vec<AllocatedAddress> = addresses
            .iter()
            .map(|(address, gateway)| {
                let address: IpNet = address.parse().unwrap();
                AllocatedAddress {
                    address,
                    gateway: pod_gateway(&address, gateway.parse().unwrap()),
                    pool: "test".into(),
                }
            })
            .collect();
        let addresses: Vec<IpNet> = allocated.iter().map(|a| a.address).collect();
        let config = PodIfaceConfig {
            addresses: addresses.clone(),
            routes: pod_routes(&allocated),
        };
        links
            .configure_pod(&spec.netns, "eth0", &config)
            .await
            .unwrap();
        let endpoint = Endpoint {
            spec: EndpointSpec {
                owner: Attachment {
                    container_id: container,
                    ifname: "eth0".into(),
                },
                pod: PodRef::default(),
                host_ifname: pair.host_ifname,
                host_ifindex: pair.host_ifindex,
                host_mac: pair.host_mac,
                pod_mac: pair.pod_mac,
                addresses,
                netns: spec.netns.display().to_string(),
                bandwidth: None,
                identity: Default::default(),
            },
            created_at: 0,
        };
        Pod {
            netns,
            endpoint,
            _host_link: guard,
        }
    }

    /// The pod `<subnet>.<host>/24` whose gateway is `gateway` (`<subnet>.1`).
    pub async fn in_subnet(links: &RtnetlinkLinks, gateway: &str, host: u8) -> Pod {
        let prefix = gateway.rsplit_once('.').unwrap().0;
        Pod::new(links, &format!("{prefix}.{host}/24"), gateway).await
    }

    /// The pod's (first) IPv4 address.
    pub fn ip(&self) -> Ipv4Addr {
        self.endpoint
            .spec
            .addresses
            .iter()
            .find_map(|a| match a.addr() {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            })
            .unwrap_or_else(|| panic!("{:?}: no IPv4 address", self.endpoint.spec.addresses))
    }

    /// The pod's (first) IPv6 address.
    pub fn ip6(&self) -> Ipv6Addr {
        self.endpoint
            .spec
            .addresses
            .iter()
            .find_map(|a| match a.addr() {
                IpAddr::V6(a) => Some(a),
                IpAddr::V4(_) => None,
            })
            .unwrap_or_else(|| panic!("{:?}: no IPv6 address", self.endpoint.spec.addresses))
    }

    /// The host end of the pod's veth.
    pub fn ifname(&self) -> &str {
        &self.endpoint.spec.host_ifname
    }

    /// `ping` from this pod to `to`; true when every echo was answered.
    pub fn ping(&self, to: &Pod, count: u32) -> bool {
        self.ping_addr(&to.ip().to_string(), count)
    }

    /// `ping` over IPv6 from this pod to `to`; true when every echo was answered.
    pub fn ping6(&self, to: &Pod, count: u32) -> bool {
        self.ping_addr(&to.ip6().to_string(), count)
    }

    /// `ping` from this pod to the address `to` (either family); true when `count` echoes
    /// were answered (sent every 0.2 s, each waited for 1 s) within `count + 2` seconds,
    /// so one lost on a loaded machine is sent again.
    ///
    /// Neighbour entries an earlier failed try left `INCOMPLETE` or `FAILED` are flushed
    /// first: whether the kernel re-probes them within this ping's window
    /// must not decide it (it did not, on this kernel, after a test's
    /// deliberate ping to an unreachable peer).
    pub fn ping_addr(&self, to: &str, count: u32) -> bool {
        let _ = Command::new("ip")
            .args(["netns", "exec", &self.netns.name, "ip", "neigh", "flush"])
            .args(["to", to, "nud", "failed", "nud", "incomplete"])
            .output();
        let out = Command::new("ip")
            .args(["netns", "exec", &self.netns.name, "ping", "-n", "-q"])
            .args(["-c", &count.to_string(), "-i", "0.2", "-W", "1"])
            .args(["-w", &(count + 2).to_string(), to])
            .output()
            .unwrap();
        out.status.success()
    }
}
