//! What each hook does with a frame, by EtherType, and the redirect into a
//! local pod that both IP families share.

use aya_ebpf::{helpers::generated::bpf_redirect, programs::TcContext};
use network_types::eth::EthHdr;
use sarena_common::{DropReason, EndpointInfo};

use crate::{
    arp, bandwidth,
    counters::{self, Counters},
    events, ipv4, ipv6,
    packet::{ifindex, ptr_at, pull_headers, verdict},
};
use sarena_common::events::PATH_HOST_STACK;

/// IPv4's EtherType.
pub const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
/// IPv6's EtherType.
pub const ETH_P_IPV6: u16 = 0x86dd;

/// What to do with a frame the pod behind `ifindex` (its counters
/// `sender`) sent. A pod speaks IPv4, IPv6 and ARP, untagged: any other
/// EtherType (LLDP, EAPOL, PPPoE, MPLS, an 802.3 length) and any
/// VLAN-tagged frame is dropped, so what the host stack or a tool on the
/// node would make of it never matters.
#[inline(always)]
pub fn try_from_container(
    ctx: &TcContext,
    ifindex: u32,
    sender: Counters,
) -> Result<i32, DropReason> {
    if vlan_tagged(ctx) {
        return Err(DropReason::UnsupportedEtherType);
    }
    pull_headers(ctx);
    match ether_type(ctx)? {
        ETH_P_ARP => arp::try_arp(ctx, ifindex, sender),
        ETH_P_IP => ipv4::try_ipv4(ctx, ifindex, sender),
        ETH_P_IPV6 => ipv6::try_ipv6(ctx, ifindex, sender),
        _ => Err(DropReason::UnsupportedEtherType),
    }
}

/// Whether the frame carries a VLAN tag (802.1Q or 802.1ad). The kernel
/// takes the outer tag out of the frame into the packet's metadata before
/// the tc hook runs, so the EtherType the program reads is the inner one.
#[inline(always)]
fn vlan_tagged(ctx: &TcContext) -> bool {
    // SAFETY: `skb` is the context pointer the kernel passed in; reading a
    // field of `__sk_buff` is what every TC program does.
    unsafe { (*ctx.skb.skb).vlan_present != 0 }
}

/// Frames the host stack sends to the pod: counted, judged by
/// NetworkPolicy (dropped when denied), the flow recorded when it comes
/// from another pod of this node, and passed. A verdict.
#[inline(always)]
pub fn try_to_container(ctx: &TcContext) -> i32 {
    let ifindex = ifindex(ctx);
    counters::to_pod(ifindex, ctx.len());
    pull_headers(ctx);
    let action = match ether_type(ctx) {
        Ok(ETH_P_IP) => ipv4::to_container(ctx, ifindex),
        Ok(ETH_P_IPV6) => ipv6::to_container(ctx, ifindex),
        _ => verdict::OK,
    };
    if action == verdict::OK {
        events::into_pod(ctx, ifindex, PATH_HOST_STACK);
    }
    action
}

/// The frame's EtherType (host order).
#[inline(always)]
fn ether_type(ctx: &TcContext) -> Result<u16, DropReason> {
    let eth: *const EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    // SAFETY: bounds-checked above.
    Ok(u16::from_be(unsafe { (*eth).ether_type }))
}

/// Sends the frame (its IP header already rewritten) from the pod whose
/// counters are `sender` into the pod `dst`: counted on the sender, then
/// [`deliver`]ed.
#[inline(always)]
pub fn into_pod(
    ctx: &TcContext,
    eth: &mut EthHdr,
    sender: Counters,
    dst: &EndpointInfo,
) -> Result<i32, DropReason> {
    sender.redirected();
    deliver(ctx, eth, dst)
}

/// Sends the frame (its IP header already rewritten) into the pod `dst`:
/// MACs rewritten, counted, then straight into the pod's netns (through
/// its host veth's egress when traffic to it is paced); when the peer
/// redirect is refused, out of the destination's host veth instead.
#[inline(always)]
pub fn deliver(ctx: &TcContext, eth: &mut EthHdr, dst: &EndpointInfo) -> Result<i32, DropReason> {
    eth.dst_addr = dst.pod_mac;
    eth.src_addr = dst.host_mac;
    counters::to_pod(dst.ifindex, ctx.len());
    let action = bandwidth::redirect(ctx, dst);
    if action == verdict::REDIRECT {
        return Ok(action as i32);
    }
    // SAFETY: plain helper call; it only records the target device.
    let action = unsafe { bpf_redirect(dst.ifindex, 0) };
    if action == verdict::REDIRECT {
        Ok(action as i32)
    } else {
        Err(DropReason::RewriteFailed)
    }
}
