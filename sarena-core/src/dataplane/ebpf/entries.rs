//! What the maps should hold for an endpoint, derived from the registry's record.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use sarena_common::{ENDPOINT_F_ACTIVE, EndpointInfo, EndpointKey};

use crate::api::Endpoint;

/// The endpoint map entries of `endpoint`: one per IPv4 address.
pub fn endpoint_entries(endpoint: &Endpoint) -> Vec<(EndpointKey, EndpointInfo)> {
    let info = EndpointInfo {
        ifindex: endpoint.host_ifindex,
        flags: ENDPOINT_F_ACTIVE | super::bandwidth::entry_flags(endpoint),
        pod_mac: endpoint.pod_mac.octets(),
        host_mac: endpoint.host_mac.octets(),
    };
    ipv4_addresses(&endpoint.addresses)
        .map(|a| (EndpointKey::new(a.octets()), info))
        .collect()
}

/// The IPv4 addresses among `addresses` (the programs forward IPv4 only;
/// IPv6 goes through the host stack).
pub fn ipv4_addresses(addresses: &[IpNet]) -> impl Iterator<Item = Ipv4Addr> + '_ {
    addresses.iter().filter_map(|net| match net.addr() {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::api::{Attachment, PodRef};

    pub(crate) fn endpoint(ifname: &str, ifindex: u32, addrs: &[&str]) -> Endpoint {
        Endpoint {
            owner: Attachment {
                container_id: format!("c-{ifname}"),
                ifname: "eth0".into(),
            },
            pod: PodRef::default(),
            host_ifname: ifname.into(),
            host_ifindex: ifindex,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "0a:00:00:00:00:02".parse().unwrap(),
            addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            netns: "/var/run/netns/x".into(),
            created_at: 0,
            bandwidth: None,
        }
    }

    #[test]
    fn one_entry_per_ipv4_address_and_ipv6_is_skipped() {
        let ep = endpoint("lxc1", 9, &["10.1.0.5/24", "fd00::5/64", "10.2.0.5/24"]);
        let entries = endpoint_entries(&ep);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0.addr, [10, 1, 0, 5]);
        assert_eq!(entries[1].0.addr, [10, 2, 0, 5]);
        let info = entries[0].1;
        assert_eq!(info.ifindex, 9);
        assert_eq!(info.host_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(info.pod_mac, [0x0a, 0, 0, 0, 0, 2]);
        assert_eq!(info.flags, ENDPOINT_F_ACTIVE);
    }
}
