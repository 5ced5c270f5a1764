//! eBPF host routing to and from the pods of other nodes (see
//! `sarena_common::peers`).
//!
//! - Out: [`to_peer4`] and [`to_peer6`], from `from_container`, send a
//!   packet for a peer's pod straight out of the device the kernel's FIB
//!   names, MACs from the FIB (or through the kernel's neighbour
//!   resolution when the next hop has no entry yet). Whatever the FIB does
//!   not resolve — no route, forwarding off, a packet too big for the
//!   device — goes to the host stack, which answers as it always did.
//! - In: [`from_network`], on the ingress of the uplink and the VXLAN
//!   device, delivers a peer pod's packet for an active local endpoint
//!   straight into the pod, after the pod's NetworkPolicy ingress check.
//!   Any other packet (to the node, to a Service, from outside the
//!   cluster) passes untouched.
//! - The Services rule, on both nodes: a flow the host stack handled
//!   (translated it, or might have) stays on the host stack both ways. The
//!   host stack's own deliveries into a pod from a peer's pod
//!   (`to_container`) and its own sends from a pod to a peer's pod
//!   ([`to_network`]) are recorded in the local pod's flows table
//!   ([`flows::record_peer`]); both directions look there first.

use core::mem::MaybeUninit;

use aya_ebpf::{
    bindings::{
        BPF_FIB_LKUP_RET_NO_NEIGH, BPF_FIB_LKUP_RET_SUCCESS, bpf_fib_lookup as FibParams,
        bpf_redir_neigh, bpf_redir_neigh__bindgen_ty_1,
    },
    helpers::generated::{bpf_fib_lookup, bpf_redirect, bpf_redirect_neigh},
    macros::map,
    maps::{LpmTrie, PerCpuArray},
    programs::TcContext,
};
use network_types::{
    eth::EthHdr,
    ip::{Ipv4Hdr, Ipv6Hdr},
};
use sarena_common::{
    DropReason, ENDPOINT_F_ACTIVE, ENDPOINT_F_PEER_ROUTED, EndpointInfo, EndpointKey,
    FLOW_FAMILY_IPV6,
    peers::{MARK_TO_PEER, MAX_PEER_POD_CIDRS, NodeCounters, PeerPodsValue},
};

use crate::{
    NO_PREALLOC, SARENA_ENDPOINTS,
    counters::{self, Counters},
    endpoint6, events, exthdr, fib, flows,
    forward::{self, ETH_P_IP, ETH_P_IPV6},
    ipv4, ipv6,
    lpm::{self, AddrKey},
    packet::{ptr_at, pull_headers, verdict},
    policy,
};
use sarena_common::events::{DIRECTION_INGRESS, PATH_PEER};

/// The other nodes' pod CIDRs (keyed as the ipcache, see [`AddrKey`]).
#[map(name = "SARENA_PEER_PODS")]
static SARENA_PEER_PODS: LpmTrie<AddrKey, PeerPodsValue> =
    LpmTrie::pinned(MAX_PEER_POD_CIDRS, NO_PREALLOC);

/// What host routing did on this node (one entry).
#[map(name = "SARENA_NODE_COUNTERS")]
static SARENA_NODE_COUNTERS: PerCpuArray<NodeCounters> = PerCpuArray::pinned(1, 0);

/// `AF_INET`.
const AF_INET: u8 = 2;
/// `AF_INET6`.
const AF_INET6: u8 = 10;
/// `PACKET_HOST`: a frame addressed to this host's MAC.
const PACKET_HOST: u32 = 0;

#[inline(always)]
fn count(f: impl FnOnce(&mut NodeCounters)) {
    if let Some(c) = SARENA_NODE_COUNTERS.get_ptr_mut(0) {
        // SAFETY: a per-CPU value, only touched by this CPU while the program runs.
        f(unsafe { &mut *c });
    }
}

/// Whether the IPv4 address is in a peer's pod CIDR.
#[inline(always)]
pub fn peer_pod4(addr: [u8; 4]) -> bool {
    lpm::get4(&SARENA_PEER_PODS, addr).is_some()
}

/// Whether the IPv6 address is in a peer's pod CIDR.
#[inline(always)]
pub fn peer_pod6(addr: &[u8; 16]) -> bool {
    lpm::get(&SARENA_PEER_PODS, FLOW_FAMILY_IPV6, addr).is_some()
}

/// An IPv4 packet from the pod behind `ifindex` (its counters `sender`) to
/// no local endpoint: to a peer's pod straight out of the FIB's device;
/// anything else, and any flow the host stack handled, to the host stack.
/// The caller judged the pod's egress policy.
#[inline(always)]
pub fn to_peer4(
    ctx: &TcContext,
    eth: &mut EthHdr,
    ip: &mut Ipv4Hdr,
    ifindex: u32,
    sender: Counters,
) -> Result<i32, DropReason> {
    if !peer_pod4(ip.dst_addr) || ip.ttl <= 1 {
        return Ok(verdict::OK);
    }
    let Some(key) = flows::key_of(ctx, ip) else {
        return Ok(verdict::OK);
    };
    if flows::peer_flow_handled(&key.reversed(), ifindex) {
        count(|c| c.to_peer_host_flow += 1);
        return Ok(verdict::OK);
    }
    let mut slot = MaybeUninit::uninit();
    let fib = fib::params(
        &mut slot,
        AF_INET,
        ip.proto,
        ifindex,
        u32::from_ne_bytes([ip.tos, 0, 0, 0]),
        [u32::from_ne_bytes(ip.src_addr), 0, 0, 0],
        [u32::from_ne_bytes(ip.dst_addr), 0, 0, 0],
    );
    let Some(rc) = route(ctx, fib, ifindex) else {
        return Ok(verdict::OK);
    };
    ipv4::decrement_ttl(ip);
    send(ctx, eth, sender, fib, rc)
}

/// An IPv6 packet from the pod behind `ifindex` to no local endpoint, as
/// [`to_peer4`]; one with extension headers goes to the host stack.
#[inline(always)]
pub fn to_peer6(
    ctx: &TcContext,
    eth: &mut EthHdr,
    ip: &mut Ipv6Hdr,
    upper: &exthdr::Upper,
    ifindex: u32,
    sender: Counters,
) -> Result<i32, DropReason> {
    if !peer_pod6(&ip.dst_addr) || ip.hop_limit <= 1 || upper.extended {
        return Ok(verdict::OK);
    }
    let Some(key) = flows::key_of6(ctx, ip, upper) else {
        return Ok(verdict::OK);
    };
    if flows::peer_flow_handled(&key.reversed(), ifindex) {
        count(|c| c.to_peer_host_flow += 1);
        return Ok(verdict::OK);
    }
    let mut slot = MaybeUninit::uninit();
    let fib = fib::params(
        &mut slot,
        AF_INET6,
        upper.proto,
        ifindex,
        u32::from_ne_bytes([ip.vcf[0] & 0x0f, ip.vcf[1], ip.vcf[2], ip.vcf[3]]),
        words(&ip.src_addr),
        words(&ip.dst_addr),
    );
    let Some(rc) = route(ctx, fib, ifindex) else {
        return Ok(verdict::OK);
    };
    ip.hop_limit -= 1;
    send(ctx, eth, sender, fib, rc)
}

/// An IPv6 address as the FIB's four network-order words.
#[inline(always)]
fn words(a: &[u8; 16]) -> [u32; 4] {
    [
        u32::from_ne_bytes([a[0], a[1], a[2], a[3]]),
        u32::from_ne_bytes([a[4], a[5], a[6], a[7]]),
        u32::from_ne_bytes([a[8], a[9], a[10], a[11]]),
        u32::from_ne_bytes([a[12], a[13], a[14], a[15]]),
    ]
}

/// The FIB lookup of the packet from the pod behind `ifindex`, as if
/// forwarded from its veth: the lookup's result when the packet can go
/// out of another device directly (next hop resolved, or to be resolved
/// by the kernel); `None` (counted when the FIB did not resolve) when the
/// host stack must handle it.
#[inline(always)]
fn route(ctx: &TcContext, fib: &mut FibParams, ifindex: u32) -> Option<i64> {
    // SAFETY: the context pointer the kernel passed in and a stack struct
    // of the size given.
    let rc = unsafe {
        bpf_fib_lookup(
            ctx.skb.skb as *mut _,
            fib,
            core::mem::size_of::<FibParams>() as i32,
            0,
        )
    };
    if rc != i64::from(BPF_FIB_LKUP_RET_SUCCESS) && rc != i64::from(BPF_FIB_LKUP_RET_NO_NEIGH) {
        count(|c| c.to_peer_fib_fallback += 1);
        return None;
    }
    (fib.ifindex != ifindex).then_some(rc)
}

/// Sends the packet out of the FIB's device: MACs rewritten and redirected
/// when the FIB resolved the next hop (`rc` success), through the kernel's
/// neighbour resolution to the FIB's next hop otherwise; counted on the
/// `sender`. Marked [`MARK_TO_PEER`] for `to_network`.
#[inline(always)]
fn send(
    ctx: &TcContext,
    eth: &mut EthHdr,
    sender: Counters,
    fib: &FibParams,
    rc: i64,
) -> Result<i32, DropReason> {
    // SAFETY: the context pointer the kernel passed in; `mark` is writable
    // from TC programs.
    unsafe { (*ctx.skb.skb).mark |= MARK_TO_PEER };
    sender.redirected();
    let action = if rc == i64::from(BPF_FIB_LKUP_RET_SUCCESS) {
        eth.src_addr = fib.smac;
        eth.dst_addr = fib.dmac;
        count(|c| c.to_peer_redirected += 1);
        // SAFETY: plain helper call; it only records the target device.
        unsafe { bpf_redirect(fib.ifindex, 0) }
    } else {
        count(|c| c.to_peer_neigh += 1);
        // Built only here: most packets find their next hop resolved. The
        // next hop is of the FIB's family (an IPv4 route through an IPv6
        // gateway, RFC 5549, comes back as `AF_INET6` and that gateway).
        // SAFETY: the FIB wrote the next hop into the destination's field.
        let nh = unsafe {
            if fib.family == AF_INET {
                bpf_redir_neigh__bindgen_ty_1 {
                    ipv4_nh: fib.__bindgen_anon_4.ipv4_dst,
                }
            } else {
                bpf_redir_neigh__bindgen_ty_1 {
                    ipv6_nh: fib.__bindgen_anon_4.ipv6_dst,
                }
            }
        };
        let mut neigh = bpf_redir_neigh {
            nh_family: u32::from(fib.family),
            __bindgen_anon_1: nh,
        };
        // SAFETY: a stack struct of the size given.
        unsafe {
            bpf_redirect_neigh(
                fib.ifindex,
                &mut neigh,
                core::mem::size_of::<bpf_redir_neigh>() as i32,
                0,
            )
        }
    };
    if action == verdict::REDIRECT {
        Ok(action as i32)
    } else {
        Err(DropReason::RewriteFailed)
    }
}

/// `from_network`: a frame arriving from the network on the uplink or the
/// VXLAN device. A peer pod's IPv4 or IPv6 packet for an active local
/// endpoint goes straight into the pod (its ingress policy first); every
/// other frame passes to the host stack untouched. A verdict.
#[inline(always)]
pub fn from_network(ctx: &TcContext) -> i32 {
    // SAFETY: the context pointer the kernel passed in.
    if unsafe { (*ctx.skb.skb).pkt_type } != PACKET_HOST {
        return verdict::OK;
    }
    pull_headers(ctx);
    let Ok(eth) = ptr_at::<EthHdr>(ctx, 0, DropReason::MalformedEthernet) else {
        return verdict::OK;
    };
    // SAFETY: bounds-checked above.
    let eth = unsafe { &mut *eth };
    match u16::from_be(eth.ether_type) {
        ETH_P_IP => from_peer4(ctx, eth),
        ETH_P_IPV6 => from_peer6(ctx, eth),
        _ => verdict::OK,
    }
}

/// An IPv4 packet from the network (see [`from_network`]).
#[inline(always)]
fn from_peer4(ctx: &TcContext, eth: &mut EthHdr) -> i32 {
    let Ok(ip) = ptr_at::<Ipv4Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv4) else {
        return verdict::OK;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &mut *ip };
    if !ipv4::well_formed(ip) || ip.ttl <= 1 {
        return verdict::OK;
    }
    let Some(dst) = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(ip.dst_addr)) else {
        return verdict::OK;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let dst = unsafe { *dst };
    if !deliverable(&dst) || !peer_pod4(ip.src_addr) {
        return verdict::OK;
    }
    let Some(key) = flows::key_of(ctx, ip) else {
        return verdict::OK;
    };
    if flows::peer_flow_handled(&key, dst.ifindex) {
        count(|c| c.from_peer_host_flow += 1);
        return verdict::OK;
    }
    if dst.flags & policy::ISOLATED != 0 {
        let flow = policy::flow4(ctx, ip);
        if !policy::enter(&flow.key, flow.port, dst.ifindex, dst.flags) {
            return denied(ctx, &dst);
        }
    }
    ipv4::decrement_ttl(ip);
    deliver(ctx, eth, &dst)
}

/// An IPv6 packet from the network (see [`from_network`]); one with
/// extension headers passes to the host stack.
#[inline(always)]
fn from_peer6(ctx: &TcContext, eth: &mut EthHdr) -> i32 {
    let Ok(ip) = ptr_at::<Ipv6Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv6) else {
        return verdict::OK;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &mut *ip };
    if ip.hop_limit <= 1 {
        return verdict::OK;
    }
    let Some(dst) = endpoint6(&ip.dst_addr) else {
        return verdict::OK;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let dst = unsafe { *dst };
    if !deliverable(&dst) || !peer_pod6(&ip.src_addr) {
        return verdict::OK;
    }
    let Some(end) = ipv6::packet_end(ctx, ip) else {
        return verdict::OK;
    };
    let Ok(upper) = exthdr::upper(ctx, ip, end) else {
        return verdict::OK;
    };
    if upper.extended {
        return verdict::OK;
    }
    let Some(key) = flows::key_of6(ctx, ip, &upper) else {
        return verdict::OK;
    };
    if flows::peer_flow_handled(&key, dst.ifindex) {
        count(|c| c.from_peer_host_flow += 1);
        return verdict::OK;
    }
    if dst.flags & policy::ISOLATED != 0 {
        let flow = policy::flow6(ctx, ip, &upper);
        if !policy::enter(&flow.key, flow.port, dst.ifindex, dst.flags) {
            return denied(ctx, &dst);
        }
    }
    ip.hop_limit -= 1;
    deliver(ctx, eth, &dst)
}

/// Whether `from_network` may deliver into the endpoint: active, and
/// written by a daemon whose programs route to peers directly
/// (`ENDPOINT_F_PEER_ROUTED`; see there for downgrades).
#[inline(always)]
fn deliverable(dst: &EndpointInfo) -> bool {
    let want = ENDPOINT_F_ACTIVE | ENDPOINT_F_PEER_ROUTED;
    dst.flags & want == want
}

/// A peer pod's packet the local pod's ingress policy denies: dropped,
/// counted on the pod and the node.
#[inline(always)]
fn denied(ctx: &TcContext, dst: &EndpointInfo) -> i32 {
    counters::dropped(
        ctx,
        dst.ifindex,
        DIRECTION_INGRESS,
        DropReason::PolicyDeniedIngress,
    );
    count(|c| c.from_peer_policy_denied += 1);
    verdict::SHOT
}

/// Into the local pod `dst` (see [`forward::deliver`]); counted on the node.
#[inline(always)]
fn deliver(ctx: &TcContext, eth: &mut EthHdr, dst: &EndpointInfo) -> i32 {
    match forward::deliver(ctx, eth, dst) {
        Ok(action) => {
            count(|c| c.from_peer_redirected += 1);
            events::into_pod(ctx, dst.ifindex, PATH_PEER);
            action
        }
        // The redirect was refused: the host stack forwards it.
        Err(_) => verdict::OK,
    }
}

/// `to_network`'s part: a packet leaving the node. One `from_container`
/// sent straight here carries [`MARK_TO_PEER`] (cleared; `true`); one the
/// host stack forwarded from a local pod to a peer's pod has its flow
/// recorded in the pod's table, so the answer comes back through the host
/// stack too (`false`).
#[inline(always)]
pub fn leaving(ctx: &TcContext) -> bool {
    // SAFETY: the context pointer the kernel passed in.
    let skb = unsafe { &mut *ctx.skb.skb };
    if skb.mark & MARK_TO_PEER != 0 {
        skb.mark &= !MARK_TO_PEER;
        return true;
    }
    pull_headers(ctx);
    let Ok(eth) = ptr_at::<EthHdr>(ctx, 0, DropReason::MalformedEthernet) else {
        return false;
    };
    // SAFETY: bounds-checked above.
    match u16::from_be(unsafe { (*eth).ether_type }) {
        ETH_P_IP => leaving4(ctx),
        ETH_P_IPV6 => leaving6(ctx),
        _ => {}
    }
    false
}

#[inline(always)]
fn leaving4(ctx: &TcContext) {
    let Ok(ip) = ptr_at::<Ipv4Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv4) else {
        return;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &*ip };
    if !ipv4::well_formed(ip) {
        return;
    }
    let Some(src) = SARENA_ENDPOINTS.get_ptr(EndpointKey::new(ip.src_addr)) else {
        return;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let local = unsafe { (*src).ifindex };
    if !peer_pod4(ip.dst_addr) {
        return;
    }
    if let Some(key) = flows::key_of(ctx, ip) {
        recorded(flows::record_peer(&key.reversed(), local));
    }
}

#[inline(always)]
fn leaving6(ctx: &TcContext) {
    let Ok(ip) = ptr_at::<Ipv6Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv6) else {
        return;
    };
    // SAFETY: bounds-checked above.
    let ip = unsafe { &*ip };
    let Some(src) = endpoint6(&ip.src_addr) else {
        return;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let local = unsafe { (*src).ifindex };
    if !peer_pod6(&ip.dst_addr) {
        return;
    }
    let Some(end) = ipv6::packet_end(ctx, ip) else {
        return;
    };
    let Ok(upper) = exthdr::upper(ctx, ip, end) else {
        return;
    };
    if let Some(key) = flows::key_of6(ctx, ip, &upper) {
        recorded(flows::record_peer(&key.reversed(), local));
    }
}

/// Counts a newly recorded peer flow.
#[inline(always)]
pub fn recorded(new: bool) {
    if new {
        count(|c| c.peer_flows_recorded += 1);
    }
}
