//! What the maps should hold for an endpoint, derived from the registry's record.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use sarena_common::{
    ENDPOINT_F_ACTIVE, ENDPOINT_F_PEER_ROUTED, Endpoint6Key, EndpointInfo, EndpointKey,
};

use crate::api::Endpoint;

/// The key of one endpoint map: an address of one family.
pub trait AddressKey: aya::Pod + Ord {
    /// The address it holds.
    fn ip(&self) -> IpAddr;
}

impl AddressKey for EndpointKey {
    fn ip(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self.addr))
    }
}

impl AddressKey for Endpoint6Key {
    fn ip(&self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self.addr))
    }
}

/// What every map entry of `endpoint` says (its veth's entry included),
/// with the isolation bits `isolation` (see `policy.rs`).
pub fn endpoint_info(endpoint: &Endpoint, isolation: u32) -> EndpointInfo {
    EndpointInfo {
        ifindex: endpoint.spec.host_ifindex,
        flags: ENDPOINT_F_ACTIVE
            | ENDPOINT_F_PEER_ROUTED
            | super::bandwidth::entry_flags(endpoint)
            | (isolation & super::policy::POLICY_BITS),
        pod_mac: endpoint.spec.pod_mac.octets(),
        host_mac: endpoint.spec.host_mac.octets(),
    }
}

/// The IPv4 endpoint map entries of `endpoint`: one per IPv4 address.
pub fn ipv4_entries(endpoint: &Endpoint, isolation: u32) -> Vec<(EndpointKey, EndpointInfo)> {
    let info = endpoint_info(endpoint, isolation);
    ipv4_addresses(&endpoint.spec.addresses)
        .map(|a| (EndpointKey::new(a.octets()), info))
        .collect()
}

/// The IPv6 endpoint map entries of `endpoint`: one per IPv6 address.
pub fn ipv6_entries(endpoint: &Endpoint, isolation: u32) -> Vec<(Endpoint6Key, EndpointInfo)> {
    let info = endpoint_info(endpoint, isolation);
    ipv6_addresses(&endpoint.spec.addresses)
        .map(|a| (Endpoint6Key::new(a.octets()), info))
        .collect()
}

/// The IPv4 addresses among `addresses`.
pub fn ipv4_addresses(addresses: &[IpNet]) -> impl Iterator<Item = Ipv4Addr> + '_ {
    addresses.iter().filter_map(|net| match net.addr() {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    })
}

/// The IPv6 addresses among `addresses`.
pub fn ipv6_addresses(addresses: &[IpNet]) -> impl Iterator<Item = Ipv6Addr> + '_ {
    addresses.iter().filter_map(|net| match net.addr() {
        IpAddr::V6(a) => Some(a),
        IpAddr::V4(_) => None,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::api::EndpointSpec;
    use crate::api::{Attachment, PodRef};

    pub(crate) fn endpoint(ifname: &str, ifindex: u32, addrs: &[&str]) -> Endpoint {
        Endpoint {
            spec: EndpointSpec {
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
                bandwidth: None,
                identity: Default::default(),
            },
            created_at: 0,
        }
    }

    #[test]
    fn one_entry_per_address_in_the_map_of_its_family() {
        let ep = endpoint("lxc1", 9, &["10.1.0.5/24", "fd00::5/64", "10.2.0.5/24"]);
        let v4 = ipv4_entries(&ep, 0);
        assert_eq!(v4.len(), 2);
        assert_eq!(v4[0].0.addr, [10, 1, 0, 5]);
        assert_eq!(v4[1].0.addr, [10, 2, 0, 5]);
        let info = v4[0].1;
        assert_eq!(info.ifindex, 9);
        assert_eq!(info.host_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(info.pod_mac, [0x0a, 0, 0, 0, 0, 2]);
        assert_eq!(info.flags, ENDPOINT_F_ACTIVE | ENDPOINT_F_PEER_ROUTED);
        let v6 = ipv6_entries(&ep, 0);
        assert_eq!(v6.len(), 1);
        assert_eq!(v6[0].0.ip(), "fd00::5".parse::<IpAddr>().unwrap());
        assert_eq!(
            v6[0].1, info,
            "both families say the same about the endpoint"
        );
        assert_eq!(endpoint_info(&ep, 0), info);
        let isolated = endpoint_info(
            &ep,
            sarena_common::policy::ENDPOINT_F_INGRESS_ISOLATED | 0x100,
        );
        assert_eq!(
            isolated.flags,
            ENDPOINT_F_ACTIVE
                | ENDPOINT_F_PEER_ROUTED
                | sarena_common::policy::ENDPOINT_F_INGRESS_ISOLATED,
            "only the isolation bits are taken"
        );
    }

    #[test]
    fn an_ipv6_only_endpoint_has_no_ipv4_entry() {
        let ep = endpoint("lxc2", 4, &["fd00:1::7/64"]);
        assert!(ipv4_entries(&ep, 0).is_empty());
        assert_eq!(ipv6_entries(&ep, 0).len(), 1);
    }
}
