//! IPv4 from a pod: the source check, and pod → pod forwarding on this node.

use aya_ebpf::programs::TcContext;
use network_types::{eth::EthHdr, ip::Ipv4Hdr};
use sarena_common::{DropReason, ENDPOINT_F_ACTIVE, EndpointKey};

use crate::{
    SARENA_ENDPOINTS, antispoof,
    counters::{self, Counters},
    flows, forward,
    packet::{ptr_at, verdict},
    peer, policy,
};
use sarena_common::events::DIRECTION_INGRESS;

/// IPv4 from one of the pod's own addresses: to another local endpoint
/// straight into that pod, to a peer's pod straight to its node (see
/// [`peer`]), unless the host stack handled the flow; anything else to the
/// host stack. Any other source is dropped. `sender`: the pod's counters.
#[inline(always)]
pub fn try_ipv4(ctx: &TcContext, ifindex: u32, sender: Counters) -> Result<i32, DropReason> {
    let eth: *mut EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    let ip: *mut Ipv4Hdr = ptr_at(ctx, EthHdr::LEN, DropReason::MalformedIpv4)?;
    // SAFETY: both pointers were bounds-checked against data_end above.
    let (eth, ip) = unsafe { (&mut *eth, &mut *ip) };
    if !well_formed(ip) {
        return Err(DropReason::MalformedIpv4);
    }
    let Some(src) = antispoof::pod_address(ip.src_addr, ifindex) else {
        return Err(DropReason::SpoofedSource);
    };
    if src.flags & policy::ISOLATED != 0 {
        let flow = policy::flow4(ctx, ip);
        match policy::leave(&flow.key, flow.port, ifindex, src.flags, false) {
            policy::PASS => {}
            policy::DEFER => {
                policy::defer(ctx);
                return Ok(verdict::OK);
            }
            _ => return Err(DropReason::PolicyDeniedEgress),
        }
    }
    let Some(dst) = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(ip.dst_addr)) else {
        return peer::to_peer4(ctx, eth, ip, ifindex, sender);
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
        Some(key) if !flows::handled_by_host(&key, ifindex, dst.ifindex) => {}
        Some(_) => {
            sender.host_stack_flow();
            return Ok(verdict::OK);
        }
        None => return Ok(verdict::OK),
    }
    if dst.flags & policy::ISOLATED != 0 {
        let flow = policy::flow4(ctx, ip);
        if !policy::enter(&flow.key, flow.port, dst.ifindex, dst.flags) {
            counters::dropped(
                ctx,
                dst.ifindex,
                DIRECTION_INGRESS,
                DropReason::PolicyDeniedIngress,
            );
            return Ok(verdict::SHOT);
        }
    }
    decrement_ttl(ip);
    forward::into_pod(ctx, eth, sender, &dst)
}

/// Version 4 and a header of at least 20 bytes.
#[inline(always)]
pub fn well_formed(ip: &Ipv4Hdr) -> bool {
    ip.vihl >> 4 == 4 && ip.vihl & 0x0f >= 5
}

/// TTL minus one with the header checksum updated incrementally (RFC 1624):
/// the TTL is the high byte of its 16-bit word, so the checksum gains 0x0100.
#[inline(always)]
pub fn decrement_ttl(ip: &mut Ipv4Hdr) {
    let sum = u32::from(u16::from_be_bytes(ip.check)) + 0x0100;
    let sum = (sum & 0xffff) + (sum >> 16);
    ip.check = (sum as u16).to_be_bytes();
    ip.ttl -= 1;
}

/// An IPv4 frame the host stack delivers to the pod behind `ifindex`:
/// NetworkPolicy first (the deferred egress check of a local sender, the
/// pod's ingress; see [`policy::to_pod`]), then, when it comes from
/// another pod of this node or a peer's pod, its flow recorded (whose
/// answer `from_container` could otherwise redirect). Frames from
/// elsewhere are not recorded: their answers never take a redirect, and
/// they would only crowd the map. A verdict.
#[inline(always)]
pub fn to_container(ctx: &TcContext, ifindex: u32) -> i32 {
    let Ok(ip) = ptr_at::<Ipv4Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv4) else {
        return verdict::OK;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &*ip };
    if !well_formed(ip) {
        return verdict::OK;
    }
    let dst = SARENA_ENDPOINTS
        .get_ptr(EndpointKey::new(ip.dst_addr))
        // SAFETY: a map value pointer returned by the lookup helper.
        .map(|p| unsafe { *p })
        // Zeroes when absent (ifindex 0 is no device's): an `Option` of it
        // leaves registers undefined that the verifier will not read.
        .unwrap_or_default();
    if policy::deferred_mark(ctx) || dst.flags & policy::ISOLATED != 0 {
        let flow = policy::flow4(ctx, ip);
        let action = policy::to_pod(ctx, &flow, ifindex, dst);
        if action != verdict::OK {
            return action;
        }
    }
    let Some(src) = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(ip.src_addr)) else {
        // From a peer's pod through the host stack: the flow stays there.
        if peer::peer_pod4(ip.src_addr)
            && let Some(key) = flows::key_of(ctx, ip)
        {
            peer::recorded(flows::record_peer(&key, ifindex));
        }
        return verdict::OK;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let from = unsafe { (*src).ifindex };
    if from == ifindex {
        // The pod itself (hairpin): its answers go to itself, never redirected.
        return verdict::OK;
    }
    if let Some(key) = flows::key_of(ctx, ip) {
        flows::record(&key, from, ifindex);
    }
    verdict::OK
}
