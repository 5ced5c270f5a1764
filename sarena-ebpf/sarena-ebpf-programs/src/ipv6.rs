//! IPv6 from a pod: validation, the source check, neighbour discovery, and
//! pod → pod forwarding on this node; and the flows `to_container` records.

use aya_ebpf::programs::TcContext;
use network_types::{eth::EthHdr, ip::Ipv6Hdr};
use sarena_common::{DropReason, ENDPOINT_F_ACTIVE};

use crate::{
    antispoof::{self, Source6},
    counters::{self, Counters},
    endpoint6, exthdr,
    flows::{self, IPPROTO_ICMPV6},
    forward, ndp,
    packet::{ptr_at, read, verdict},
    peer, policy,
};
use sarena_common::events::DIRECTION_INGRESS;

/// Where the IPv6 payload starts.
const PAYLOAD: usize = EthHdr::LEN + Ipv6Hdr::LEN;

/// IPv6 from the pod behind `ifindex` (its counters `sender`). Malformed
/// packets, and sources that are not the pod's ([`antispoof::source6`])
/// are dropped; neighbour discovery goes to [`ndp`]. A packet from one of
/// the pod's addresses to another local endpoint goes straight into that
/// pod, unless the host stack handled its flow or it carries extension
/// headers; everything else (link-local, multicast, elsewhere, expiring)
/// goes to the host stack.
#[inline(always)]
pub fn try_ipv6(ctx: &TcContext, ifindex: u32, sender: Counters) -> Result<i32, DropReason> {
    sender.ipv6_from_pod();
    let eth: *mut EthHdr = ptr_at(ctx, 0, DropReason::MalformedEthernet)?;
    let ip: *mut Ipv6Hdr = ptr_at(ctx, EthHdr::LEN, DropReason::MalformedIpv6)?;
    // SAFETY: both pointers were bounds-checked against data_end above.
    let (eth, ip) = unsafe { (&mut *eth, &mut *ip) };
    let end = packet_end(ctx, ip).ok_or(DropReason::MalformedIpv6)?;
    let upper = exthdr::upper(ctx, ip, end)?;
    let source = antispoof::source6(&ip.src_addr, ifindex)?;
    if upper.proto == IPPROTO_ICMPV6 {
        // Type, code and checksum: every ICMPv6 message has them. (Reading
        // the type alone would compile to a bounds check the verifier
        // cannot use.)
        let head: [u8; 4] = read(ctx, upper.offset).ok_or(DropReason::MalformedIpv6)?;
        let kind = head[0];
        if ndp::is_ndp(kind) {
            if upper.extended {
                // RFC 6980 forbids fragmented neighbour discovery; other
                // extension headers serve no purpose on a veth and would
                // carry a forged advertisement past the checks.
                return Err(DropReason::MalformedNdp);
            }
            return ndp::try_ndp(ctx, ifindex, eth, ip, kind, source, end - PAYLOAD);
        }
    } else if source == Source6::Unspecified {
        return Err(DropReason::SpoofedSourceIpv6);
    }
    let Source6::Pod(flags) = source else {
        // Link-local and unspecified sources never leave the link.
        return Ok(verdict::OK);
    };
    if flags & policy::ISOLATED != 0 {
        let flow = policy::flow6(ctx, ip, &upper);
        match policy::leave(&flow.key, flow.port, ifindex, flags, false) {
            policy::PASS => {}
            policy::DEFER => {
                policy::defer(ctx);
                return Ok(verdict::OK);
            }
            _ => return Err(DropReason::PolicyDeniedEgress),
        }
    }
    let Some(dst) = endpoint6(&ip.dst_addr) else {
        return peer::to_peer6(ctx, eth, ip, &upper, ifindex, sender);
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let dst = unsafe { *dst };
    if dst.flags & ENDPOINT_F_ACTIVE == 0
        || dst.ifindex == ifindex
        || ip.hop_limit <= 1
        || upper.extended
    {
        // Hairpin, not ready, expiring (the host stack sends time exceeded)
        // or with extension headers (the host stack processes them).
        return Ok(verdict::OK);
    }
    match flows::key_of6(ctx, ip, &upper) {
        Some(key) if !flows::handled_by_host(&key, ifindex, dst.ifindex) => {}
        Some(_) => {
            sender.host_stack_flow();
            return Ok(verdict::OK);
        }
        None => return Ok(verdict::OK),
    }
    if dst.flags & policy::ISOLATED != 0 {
        let flow = policy::flow6(ctx, ip, &upper);
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
    ip.hop_limit -= 1;
    sender.ipv6_redirected();
    forward::into_pod(ctx, eth, sender, &dst)
}

/// Where the packet ends by its payload length, or `None` when the version
/// is not 6 or the payload length runs past the frame. (A payload length of
/// 0 on a frame too big for one is a BIG TCP packet: it ends with the frame.)
#[inline(always)]
pub fn packet_end(ctx: &TcContext, ip: &Ipv6Hdr) -> Option<usize> {
    if ip.vcf[0] >> 4 != 6 {
        return None;
    }
    let frame = ctx.len() as usize;
    let payload = usize::from(u16::from_be_bytes(ip.payload_len));
    if payload == 0 && frame > PAYLOAD + usize::from(u16::MAX) {
        return Some(frame);
    }
    let end = PAYLOAD + payload;
    (end <= frame).then_some(end)
}

/// Whether a frame the host stack delivers is the link's own business,
/// never a NetworkPolicy's: from a link-local address (only the host and
/// the pod share the link), or neighbour discovery (the programs' own
/// advertisements, sent back out of the veth, among them).
#[inline(always)]
fn link_traffic(ctx: &TcContext, ip: &Ipv6Hdr, upper: Option<&exthdr::Upper>) -> bool {
    if antispoof::is_link_local(&ip.src_addr) {
        return true;
    }
    let Some(upper) = upper else {
        return false;
    };
    if upper.proto != IPPROTO_ICMPV6 {
        return false;
    }
    read::<[u8; 4]>(ctx, upper.offset).is_some_and(|head| ndp::is_ndp(head[0]))
}

/// An IPv6 frame the host stack delivers to the pod behind `ifindex`:
/// NetworkPolicy (the deferred egress check of a local sender, the pod's
/// ingress; see [`policy::to_pod`]), then the flow recorded when it comes
/// from another pod of this node or a peer's pod, as
/// [`crate::ipv4::to_container`] does
/// for IPv4. A verdict. (A frame from a local pod passed that pod's
/// `from_container`, so its header chain parses here too.)
#[inline(always)]
pub fn to_container(ctx: &TcContext, ifindex: u32) -> i32 {
    let Ok(ip) = ptr_at::<Ipv6Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv6) else {
        return verdict::OK;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &*ip };
    let Some(end) = packet_end(ctx, ip) else {
        return verdict::OK;
    };
    let upper = exthdr::upper(ctx, ip, end).ok();
    let dst = endpoint6(&ip.dst_addr)
        // SAFETY: a map value pointer returned by the lookup helper.
        .map(|p| unsafe { *p })
        // Zeroes when absent (ifindex 0 is no device's): an `Option` of it
        // leaves registers undefined that the verifier will not read.
        .unwrap_or_default();
    if (policy::deferred_mark(ctx) || dst.flags & policy::ISOLATED != 0)
        && !link_traffic(ctx, ip, upper.as_ref())
    {
        let Some(upper) = upper else {
            // A chain the policy cannot read into a checked pod.
            counters::dropped(
                ctx,
                ifindex,
                DIRECTION_INGRESS,
                DropReason::MalformedIpv6Ext,
            );
            return verdict::SHOT;
        };
        let flow = policy::flow6(ctx, ip, &upper);
        let action = policy::to_pod(ctx, &flow, ifindex, dst);
        if action != verdict::OK {
            return action;
        }
    }
    let Some(src) = endpoint6(&ip.src_addr) else {
        // From a peer's pod through the host stack: the flow stays there.
        if peer::peer_pod6(&ip.src_addr)
            && let Some(upper) = upper
            && let Some(key) = flows::key_of6(ctx, ip, &upper)
        {
            peer::recorded(flows::record_peer(&key, ifindex));
        }
        return verdict::OK;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let from = unsafe { (*src).ifindex };
    if from == ifindex {
        return verdict::OK;
    }
    if let Some(upper) = upper
        && let Some(key) = flows::key_of6(ctx, ip, &upper)
    {
        flows::record(&key, from, ifindex);
    }
    verdict::OK
}
