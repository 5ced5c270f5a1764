//! The floor every veth-based CNI is compared with: one veth pair straight
//! between two network namespaces, no host in between.
//!
//! ```sh
//! ip netns add A; ip netns add B
//! ip link add name eth0 netns A mtu 1500 type veth peer name eth0 netns B mtu 1500
//! ip -n A addr add 10.99.0.1/24 dev eth0; ip -n B addr add 10.99.0.2/24 dev eth0
//! ip -n A link set eth0 up; ip -n B link set eth0 up
//! ```

use std::net::Ipv4Addr;
use std::path::Path;

use crate::BenchError;
use crate::node::{Netns, run_cmd, unique_name};

/// The client side's address (both namespaces are private, so it clashes
/// with nothing).
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
/// The server side's address.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
/// The pair's MTU: the same as the pods' on the nodes.
pub const MTU: u32 = 1500;

/// Two namespaces joined by one veth pair (`eth0` in each); both removed on
/// drop, which removes the pair.
#[derive(Debug)]
pub struct RawVethPair {
    client: Netns,
    server: Netns,
}

impl RawVethPair {
    /// Creates two fresh namespaces and the pair between them.
    pub fn new() -> Result<RawVethPair, BenchError> {
        let client = Netns::create(&unique_name("dp-raw-client"))?;
        let server = Netns::create(&unique_name("dp-raw-server"))?;
        let mtu = MTU.to_string();
        run_cmd(
            "ip",
            &[
                "link",
                "add",
                "name",
                "eth0",
                "netns",
                client.name(),
                "mtu",
                &mtu,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                server.name(),
                "mtu",
                &mtu,
            ],
        )?;
        for (ns, ip) in [(&client, CLIENT_IP), (&server, SERVER_IP)] {
            let cidr = format!("{ip}/24");
            run_cmd(
                "ip",
                &["-n", ns.name(), "addr", "add", &cidr, "dev", "eth0"],
            )?;
            run_cmd("ip", &["-n", ns.name(), "link", "set", "eth0", "up"])?;
        }
        Ok(RawVethPair { client, server })
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
