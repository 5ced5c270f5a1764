//! A pod may only speak as itself: the source of what it sends must be one
//! of its own addresses, registered in the endpoint maps with its veth.

use sarena_common::{DropReason, EndpointInfo, EndpointKey, link_local};

use crate::{SARENA_ENDPOINTS, SARENA_VETHS, endpoint6};

/// The endpoint entry of `addr` when it is one of the IPv4 addresses of the
/// pod behind the host veth `ifindex`; `None` for any other address.
#[inline(always)]
pub fn pod_address(addr: [u8; 4], ifindex: u32) -> Option<EndpointInfo> {
    let entry = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(addr))?;
    // SAFETY: a map value pointer returned by the lookup helper.
    let entry = unsafe { *entry };
    (entry.ifindex == ifindex).then_some(entry)
}

/// The endpoint entry of `addr` when it is one of the IPv6 addresses of the
/// pod behind the host veth `ifindex`; `None` for any other address.
#[inline(always)]
pub fn pod_address6(addr: [u8; 16], ifindex: u32) -> Option<EndpointInfo> {
    let entry = endpoint6(&addr)?;
    // SAFETY: a map value pointer returned by the lookup helper.
    let entry = unsafe { *entry };
    (entry.ifindex == ifindex).then_some(entry)
}

/// What an IPv6 source address the pod used is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Source6 {
    /// One of the pod's own addresses; its entry's flags.
    Pod(u32),
    /// The pod's own link-local address ([`is_own_link_local`]): it names
    /// the pod's end of its own veth, the only other end of which is the
    /// host, and the kernel never forwards a packet with such a source off
    /// the link. Neighbour discovery uses it; the programs never redirect it.
    LinkLocal,
    /// `::`: duplicate-address detection and MLD before the pod has an
    /// address. Only ICMPv6 may use it.
    Unspecified,
}

/// Whether `addr` is in `fe80::/10`.
#[inline(always)]
pub fn is_link_local(addr: &[u8; 16]) -> bool {
    addr[0] == 0xfe && addr[1] & 0xc0 == 0x80
}

/// Whether `addr` is the link-local address of the pod behind `ifindex`:
/// the EUI-64 address of its MAC ([`sarena_common::link_local`]), the only
/// one the plugin gives the pod's interface (the kernel's own generation is
/// off there), with the MAC from the veth's entry. Any other
/// link-local address would be one more neighbour the node learns on the
/// pod's word: a pod that could use them all could fill the node's IPv6
/// neighbour table. `false` when the veth has no entry.
#[inline(always)]
pub fn is_own_link_local(addr: &[u8; 16], ifindex: u32) -> bool {
    let Some(veth) = SARENA_VETHS.get_ptr(ifindex) else {
        return false;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    *addr == link_local(unsafe { (*veth).pod_mac })
}

/// Classifies the source `addr` of an IPv6 packet from the pod behind
/// `ifindex`; any address that is not the pod's (another pod's, an
/// outsider's, a multicast one, a link-local one but its own) is
/// [`DropReason::SpoofedSourceIpv6`].
#[inline(always)]
pub fn source6(addr: &[u8; 16], ifindex: u32) -> Result<Source6, DropReason> {
    if *addr == [0; 16] {
        Ok(Source6::Unspecified)
    } else if is_link_local(addr) {
        if is_own_link_local(addr, ifindex) {
            Ok(Source6::LinkLocal)
        } else {
            Err(DropReason::SpoofedSourceIpv6)
        }
    } else if let Some(entry) = pod_address6(*addr, ifindex) {
        Ok(Source6::Pod(entry.flags))
    } else {
        Err(DropReason::SpoofedSourceIpv6)
    }
}
