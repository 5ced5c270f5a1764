//! The links backend on its own: a veth pair whose peer is born inside a pod
//! netns under its final name (one RTM_NEWLINK: no temporary name, no move,
//! no rename), with an address and a default route (needs root).
//!
//! Shell equivalent:
//! ```text
//! ip link add lxc… type veth peer name eth0 netns demo
//! ip -n demo addr add 10.99.0.2/24 dev eth0 && ip -n demo link set eth0 up
//! ip -n demo route add 10.99.0.1/32 dev eth0 && ip -n demo route add default via 10.99.0.1
//! ```
//! Run: `ip netns add demo && cargo run -p sarena-examples --example veth -- /var/run/netns/demo`.

use std::path::PathBuf;

use sarena_core::api::RouteSpec;
use sarena_core::links::{Links, PodIfaceConfig, RtnetlinkLinks, VethSpec, host_ifname};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let netns = PathBuf::from(std::env::args().nth(1).ok_or("usage: veth NETNS_PATH")?);
    let links = RtnetlinkLinks::new()?;
    let spec = VethSpec {
        host_ifname: host_ifname("veth-example", "eth0"),
        netns: netns.clone(),
        pod_ifname: "eth0".into(),
        mtu: 1500,
        pod_mac: None,
        host_ipv6: false,
    };
    let pair = links.create_veth(&spec).await?;
    println!(
        "host end {} ({}), pod end eth0 ({})",
        pair.host_ifname, pair.host_mac, pair.pod_mac
    );
    let gateway = "10.99.0.1".parse()?;
    let config = PodIfaceConfig {
        addresses: vec!["10.99.0.2/24".parse()?],
        routes: vec![
            RouteSpec {
                dst: "10.99.0.1/32".parse()?,
                gw: None,
                mtu: None,
            },
            RouteSpec {
                dst: "0.0.0.0/0".parse()?,
                gw: Some(gateway),
                mtu: None,
            },
        ],
    };
    links.configure_pod(&netns, "eth0", &config).await?;
    println!("{:#?}", links.inspect_pod(&netns, "eth0").await?);
    links.remove_host_link(&pair.host_ifname).await?;
    Ok(())
}
