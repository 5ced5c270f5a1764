//! The pod interface's IPv6 set-up: usable the moment ADD returns (and the
//! host end's `addrgenmode none`, [`no_address_generation`]).
//!
//! Duplicate-address detection would keep every IPv6 address `tentative`
//! for a second or two after it is added (the kernel neither sends from nor
//! answers for a tentative address). The addresses come from IPAM, which
//! hands each out once, and the link has only the pod and the host, so
//! there is nothing to detect: every address is added `nodad`. The kernel's
//! own link-local address would be tentative too, so its generation is
//! turned off (`addrgenmode none`) and the EUI-64 one is added `nodad`
//! instead, the same address the kernel would have chosen.
//!
//! The pool's prefix is not on-link (`noprefixroute`): the pod sends all
//! IPv6 through its default route, via the link-local gateway the host end
//! answers for, as it would behind a real IPv6 router that advertises its
//! prefix without the on-link flag. Its neighbour discovery then only ever
//! asks for the gateway.

use std::net::Ipv6Addr;

use ipnet::{IpNet, Ipv6Net};
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
use rtnetlink::packet_route::link::{AfSpecInet6, AfSpecUnspec, In6AddrGenMode, LinkAttribute};
use rtnetlink::{Handle, LinkUnspec};

use crate::links::LinkError;
use crate::mac::MacAddr;
use crate::netlink::{NetlinkError, errno};

/// The EUI-64 link-local address of the interface with `mac` (RFC 4291
/// appendix A): what the kernel would generate, and what Sarena gives the
/// pod interface (the rule lives in `sarena_common`, which the eBPF
/// programs check a pod's link-local source with).
pub fn link_local(mac: MacAddr) -> Ipv6Addr {
    Ipv6Addr::from(sarena_common::link_local(mac.octets()))
}

/// The flags an address of the pod interface is added with.
pub(super) fn address_flags(address: &IpNet) -> Option<AddressFlags> {
    match address {
        IpNet::V4(_) => None,
        IpNet::V6(_) => Some(AddressFlags::Nodad | AddressFlags::Noprefixroute),
    }
}

/// `ip link set IFNAME addrgenmode none`, then `ip addr add LL/64 dev
/// IFNAME nodad` with the EUI-64 address of `mac`. Before the link goes up,
/// so the kernel never generates its own.
pub(super) async fn prepare(
    handle: &Handle,
    index: u32,
    ifname: &str,
    mac: MacAddr,
) -> Result<(), LinkError> {
    no_address_generation(handle, index, ifname).await?;
    let address = IpNet::V6(Ipv6Net::new_assert(link_local(mac), 64));
    add_address(handle, index, ifname, &address, Some(AddressFlags::Nodad)).await
}

/// `ip link set IFNAME addrgenmode none`: the kernel generates no link-local
/// address (nor its routes, nor duplicate-address detection and router
/// solicitations for it) when the link's carrier comes up. Effective only
/// before then: the carrier of a veth comes up with its second end.
/// (The kernel refuses it in the request that creates the link.)
pub(super) async fn no_address_generation(
    handle: &Handle,
    index: u32,
    ifname: &str,
) -> Result<(), NetlinkError> {
    let mode =
        LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::AddrGenMode(
            In6AddrGenMode::None,
        )])]);
    let message = LinkUnspec::new_with_index(index)
        .append_extra_attribute(mode)
        .build();
    handle
        .link()
        .set(message)
        .execute()
        .await
        .map_err(|e| NetlinkError::new("link set addrgenmode none", ifname, e))
}

/// `ip addr add ADDRESS dev IFNAME [flags]`; an address already there is fine.
pub(super) async fn add_address(
    handle: &Handle,
    index: u32,
    ifname: &str,
    address: &IpNet,
    flags: Option<AddressFlags>,
) -> Result<(), LinkError> {
    let mut request = handle
        .address()
        .add(index, address.addr(), address.prefix_len());
    if let Some(flags) = flags {
        request
            .message_mut()
            .attributes
            .push(AddressAttribute::Flags(flags));
    }
    match request.execute().await {
        Ok(()) => Ok(()),
        Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
        Err(e) => Err(NetlinkError::new("addr add", ifname, e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_local_address_is_the_eui64_of_the_mac() {
        let mac: MacAddr = "0a:58:0a:f4:00:02".parse().unwrap();
        assert_eq!(
            link_local(mac),
            "fe80::858:aff:fef4:2".parse::<Ipv6Addr>().unwrap()
        );
        // The universal/local bit flips both ways.
        let mac: MacAddr = "00:11:22:33:44:55".parse().unwrap();
        assert_eq!(
            link_local(mac),
            "fe80::211:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn only_ipv6_addresses_are_nodad_and_off_link() {
        assert_eq!(address_flags(&"10.0.0.2/24".parse().unwrap()), None);
        let flags = address_flags(&"fd00:1::2/64".parse().unwrap()).unwrap();
        assert!(flags.contains(AddressFlags::Nodad));
        assert!(flags.contains(AddressFlags::Noprefixroute));
    }
}
