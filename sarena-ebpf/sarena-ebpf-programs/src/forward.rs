//! Pod → pod forwarding on this node.

use aya_ebpf::{helpers::generated::bpf_redirect, programs::TcContext};
use network_types::{eth::EthHdr, ip::Ipv4Hdr};
use sarena_common::{DropReason, ENDPOINT_F_ACTIVE, EndpointKey};

use crate::{
    SARENA_ENDPOINTS, antispoof, arp, bandwidth, counters, flows,
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

/// IPv4 from one of the pod's own addresses: to another local endpoint
/// straight into that pod, unless the host stack handled the flow; anything
/// else to the host stack. Any other source is dropped.
#[inline(always)]
fn try_ipv4(ctx: &TcContext, ifindex: u32) -> Result<i32, DropReason> {
    let eth: *mut EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    let ip: *mut Ipv4Hdr = ptr_at(ctx, EthHdr::LEN, DropReason::MalformedIpv4)?;
    // SAFETY: both pointers were bounds-checked against data_end above.
    let (eth, ip) = unsafe { (&mut *eth, &mut *ip) };
    if ip.vihl >> 4 != 4 || ip.vihl & 0x0f < 5 {
        return Err(DropReason::MalformedIpv4);
    }
    if antispoof::pod_address(ip.src_addr, ifindex).is_none() {
        return Err(DropReason::SpoofedSource);
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
    // A flow the host stack handled stays there, in both directions; one
    // whose flow cannot be told (fragments, ICMP errors) goes there too.
    match flows::key_of(ctx, ip) {
        Some(key) if !flows::handled_by_host(&key) => {}
        Some(_) => {
            counters::host_stack_flow(ifindex);
            return Ok(verdict::OK);
        }
        None => return Ok(verdict::OK),
    }

    eth.dst_addr = dst.pod_mac;
    eth.src_addr = dst.host_mac;
    decrement_ttl(ip);

    counters::redirected(ifindex);
    counters::to_pod(dst.ifindex, ctx.len());
    // Straight into the pod's netns (through its host veth's egress when
    // traffic to it is paced); when the peer redirect is refused, out of the
    // destination's host veth instead.
    let action = bandwidth::redirect(ctx, &dst);
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

/// Frames the host stack sends to the pod: counted, the flow recorded when it
/// comes from another pod of this node, and passed.
#[inline(always)]
pub fn try_to_container(ctx: &TcContext) -> Result<i32, i32> {
    let ifindex = ifindex(ctx);
    counters::to_pod(ifindex, ctx.len());
    record_host_flow(ctx, ifindex);
    Ok(verdict::OK)
}

/// Records the flow of an IPv4 frame the host stack delivers to the pod
/// behind `ifindex` from another pod of this node (whose answer
/// `from_container` could otherwise redirect). Frames from elsewhere are not
/// recorded: their answers never take the redirect, and they would only
/// crowd the map.
#[inline(always)]
fn record_host_flow(ctx: &TcContext, ifindex: u32) {
    pull_headers(ctx);
    let Ok(eth) = ptr_at::<EthHdr>(ctx, 0, DropReason::MalformedEthernet) else {
        return;
    };
    // SAFETY: bounds-checked above.
    if u16::from_be(unsafe { (*eth).ether_type }) != ETH_P_IP {
        return;
    }
    let Ok(ip) = ptr_at::<Ipv4Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv4) else {
        return;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &*ip };
    if ip.vihl >> 4 != 4 || ip.vihl & 0x0f < 5 {
        return;
    }
    let Some(src) = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(ip.src_addr)) else {
        return;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    if unsafe { (*src).ifindex } == ifindex {
        // The pod itself (hairpin): its answers go to itself, never redirected.
        return;
    }
    if let Some(key) = flows::key_of(ctx, ip) {
        flows::record(&key, ifindex);
    }
}
