//! The floor every veth-based CNI is compared with: one veth pair straight
//! between two network namespaces, no host in between.
//!
//! ```sh
//! ip netns add A; ip netns add B
//! ip link add name eth0 netns A mtu 1500 type veth peer name eth0 netns B mtu 1500
//! ip -n A addr add 10.99.0.1/24 dev eth0; ip -n B addr add 10.99.0.2/24 dev eth0
//! ip -n A link set eth0 up; ip -n B link set eth0 up
//! ```
//!
//! Over IPv6 the addresses are `fd00:99::1/64` and `fd00:99::2/64`, added
//! `nodad` (usable at once, like Sarena's pods').

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use crate::BenchError;
use crate::node::{Netns, run_cmd, unique_name};

/// The client side's address (both namespaces are private, so it clashes
/// with nothing).
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
/// The server side's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
/// The client side's IPv6 address.
pub const CLIENT_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 1);
/// The server side's IPv6 address.
pub const SERVER_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 2);
/// The pair's MTU: the same as the pods' on the nodes.
pub const MTU: u32 = 1500;

/// A veth pair named `ifname` at both ends, one end in the netns named
/// `a`, the other in `b`, both with `mtu`.
pub fn veth_between(a: &str, b: &str, ifname: &str, mtu: u32) -> Result<(), BenchError> {
    let mtu = mtu.to_string();
    run_cmd(
        "ip",
        &[
            "link", "add", "name", ifname, "netns", a, "mtu", &mtu, "type", "veth", "peer", "name",
            ifname, "netns", b, "mtu", &mtu,
        ],
    )
    .map(drop)
}

/// Two namespaces joined by one veth pair (`eth0` in each); both removed on
/// drop, which removes the pair.
#[derive(Debug)]
pub struct RawVethPair {
    client: Netns,
    server: Netns,
}

impl RawVethPair {
    /// Creates two fresh namespaces and the pair between them, with IPv4
    /// addresses or (`ipv6`) IPv6 ones.
    pub fn new(ipv6: bool) -> Result<RawVethPair, BenchError> {
        let client = Netns::create(&unique_name("dp-raw-client"))?;
        let server = Netns::create(&unique_name("dp-raw-server"))?;
        veth_between(client.name(), server.name(), "eth0", MTU)?;
        let addresses = if ipv6 {
            [
                (&client, format!("{CLIENT_IP6}/64")),
                (&server, format!("{SERVER_IP6}/64")),
            ]
        } else {
            [
                (&client, format!("{CLIENT_IP}/24")),
                (&server, format!("{SERVER_IP}/24")),
            ]
        };
        for (ns, cidr) in addresses {
            let mut args = vec!["-n", ns.name(), "addr", "add", &cidr, "dev", "eth0"];
            if ipv6 {
                args.push("nodad");
            }
            run_cmd("ip", &args)?;
            run_cmd("ip", &["-n", ns.name(), "link", "set", "eth0", "up"])?;
        }
        Ok(RawVethPair { client, server })
    }

    /// The server's address over IPv4 or (`ipv6`) IPv6.
    pub fn server_ip(ipv6: bool) -> IpAddr {
        if ipv6 {
            IpAddr::V6(SERVER_IP6)
        } else {
            IpAddr::V4(SERVER_IP)
        }
    }

    /// The client namespace's path.
    pub fn client_netns(&self) -> &Path {
        self.client.path()
    }

    /// The server namespace's path.
    pub fn server_netns(&self) -> &Path {
        self.server.path()
    }
}
