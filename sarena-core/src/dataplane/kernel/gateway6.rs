//! The pods' IPv6 gateway in kernel mode: [`POD_IPV6_GATEWAY`] on each
//! IPv6 pod's host veth, so the host answers the pod's neighbour
//! solicitations for it and routes what the pod sends through it.
//!
//! Why an address, not proxy NDP: the kernel's proxy NDP answers only for
//! addresses listed one by one per interface, and the pods only ever ask
//! for their gateway (their prefix is not on-link, see
//! `links::rtnl::ipv6`); a link-local address is scoped to its interface,
//! so every veth can carry the same one. It goes with the veth.

use rtnetlink::Handle;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};

use crate::dataplane::{DataplaneError, POD_IPV6_GATEWAY};
use crate::netlink::{NetlinkError, errno};
use crate::sysctl;

/// IPv6 on for the host veth `ifname` (index `oif`), and
/// `ip addr add fe80::1/64 dev IFNAME nodad` (already there is fine).
pub(crate) async fn add(handle: &Handle, ifname: &str, oif: u32) -> Result<(), DataplaneError> {
    // A host whose `default.disable_ipv6` is 1 creates veths without IPv6.
    sysctl::write(&sysctl::ipv6_conf(ifname, "disable_ipv6"), "0")?;
    let mut request = handle.address().add(oif, POD_IPV6_GATEWAY.into(), 64);
    // No duplicate-address detection: the address is usable at once, and it
    // is the same on every veth by design.
    request
        .message_mut()
        .attributes
        .push(AddressAttribute::Flags(AddressFlags::Nodad));
    match request.execute().await {
        Ok(()) => Ok(()),
        Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
        Err(e) => Err(NetlinkError::new("addr add", POD_IPV6_GATEWAY, e).into()),
    }
}
