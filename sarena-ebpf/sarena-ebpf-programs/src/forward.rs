//! Pod → pod forwarding on this node.

use aya_ebpf::{
    helpers::generated::{bpf_redirect, bpf_redirect_peer},
    programs::TcContext,
};
use network_types::{eth::EthHdr, ip::Ipv4Hdr};
use sarena_common::{DropReason, ENDPOINT_F_ACTIVE, EndpointKey};

use crate::{
    SARENA_ENDPOINTS, arp, counters,
    packet::{ifindex, ptr_at, pull_headers, verdict},
};

const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;

/// What to do with a frame the pod behind `ifindex` sent.
#[inline(always)]
pub fn try_from_container(ctx: &TcContext, ifindex: u32) -> Result<i32, DropReason> {
    pull_headers(ctx);
    let eth: *mut EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    // SAFETY: bounds-checked above.
    let ether_type = u16::from_be(unsafe { (*eth).ether_type });
    match ether_type {
        ETH_P_ARP => arp::try_arp(ctx, ifindex),
        ETH_P_IP => try_ipv4(ctx, ifindex),
        _ => Ok(verdict::OK),
    }
}

/// IPv4 to another local endpoint goes straight into that pod; anything else
/// to the host stack.
#[inline(always)]
fn try_ipv4(ctx: &TcContext, ifindex: u32) -> Result<i32, DropReason> {
    let eth: *mut EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    let ip: *mut Ipv4Hdr = ptr_at(ctx, EthHdr::LEN, DropReason::MalformedIpv4)?;
    // SAFETY: both pointers were bounds-checked against data_end above.
    let (eth, ip) = unsafe { (&mut *eth, &mut *ip) };
    if ip.vihl >> 4 != 4 || ip.vihl & 0x0f < 5 {
        return Err(DropReason::MalformedIpv4);
    }
    let Some(dst) = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(ip.dst_addr)) else {
        return Ok(verdict::OK);
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let dst = unsafe { *dst };
    if dst.flags & ENDPOINT_F_ACTIVE == 0 || dst.ifindex == ifindex || ip.ttl <= 1 {
        // Hairpin, not ready, or expiring: the host stack handles it (and
        // sends ICMP time exceeded where due).
        return Ok(verdict::OK);
    }

    eth.dst_addr = dst.pod_mac;
    eth.src_addr = dst.host_mac;
    decrement_ttl(ip);

    counters::redirected(ifindex);
    counters::to_pod(dst.ifindex, ctx.len());
    // Straight into the pod's netns; when the peer redirect is refused, out
    // of the destination's host veth instead.
    // SAFETY: plain helper calls; they only record the target device.
    let action = unsafe { bpf_redirect_peer(dst.ifindex, 0) };
    if action == verdict::REDIRECT {
        return Ok(action as i32);
    }
    // SAFETY: as above.
    let action = unsafe { bpf_redirect(dst.ifindex, 0) };
    if action == verdict::REDIRECT {
        Ok(action as i32)
    } else {
        Err(DropReason::RewriteFailed)
    }
}

/// TTL minus one with the header checksum updated incrementally (RFC 1624):
/// the TTL is the high byte of its 16-bit word, so the checksum gains 0x0100.
#[inline(always)]
fn decrement_ttl(ip: &mut Ipv4Hdr) {
    let sum = u32::from(u16::from_be_bytes(ip.check)) + 0x0100;
    let sum = (sum & 0xffff) + (sum >> 16);
    ip.check = (sum as u16).to_be_bytes();
    ip.ttl -= 1;
}

/// Frames the host stack sends to the pod: counted and passed.
#[inline(always)]
pub fn try_to_container(ctx: &TcContext) -> Result<i32, i32> {
    counters::to_pod(ifindex(ctx), ctx.len());
    Ok(verdict::OK)
}
