//! NetworkPolicy enforcement (see `sarena_common::policy` for the maps).
//!
//! An endpoint is checked only in the directions its
//! [`EndpointInfo`](sarena_common::EndpointInfo) flags isolate; one that no
//! policy selects costs the flag test. A packet passes a check when it
//! answers a flow recorded in the endpoint's answerable-flows table, when
//! its peer is this node (or, entering, a translated address: conntrack's
//! reverse NAT), or when an allow entry covers its peer identity, protocol
//! and destination port. A packet that leaves or enters an endpoint with
//! any isolation bit records the direction of its answer in that
//! endpoint's table, so replies pass both ends; one a rule allowed also
//! records its own flow, so the flow's later packets pass on that one
//! lookup (an established flow outlives a policy change, as with the
//! kernel dataplane's conntrack).
//!
//! A pod's packet to an address the host stack may translate (a Service's,
//! this node's) is not judged in `from_container`: it is marked
//! ([`MARK_EGRESS_DEFERRED`]) and judged after translation, in
//! `to_container` (a local pod) or `to_network` (leaving the node).
//!
//! The checks are subprograms (`#[inline(never)]`) shared by both families
//! and every hook, with scalar and stack-pointer arguments only.

use aya_ebpf::{
    btf_maps::{HashOfMaps, LruHashMap},
    helpers::bpf_ktime_get_ns,
    macros::{btf_map, map},
    maps::{LpmTrie, lpm_trie::Key},
    programs::TcContext,
};
use network_types::{
    eth::EthHdr,
    ip::{Ipv4Hdr, Ipv6Hdr},
};
use sarena_common::{
    DropReason, EndpointInfo, EndpointKey, FlowKey, MAX_ENDPOINTS,
    policy::{
        DIRECTION_EGRESS, DIRECTION_INGRESS, ENDPOINT_F_EGRESS_ISOLATED,
        ENDPOINT_F_INGRESS_ISOLATED, IDENTITY_ANY, IDENTITY_HOST, IDENTITY_WORLD,
        IPCACHE_F_TRANSLATED, IpcacheValue, MARK_EGRESS_DEFERRED, MAX_IPCACHE_ENTRIES,
        MAX_POLICY_ENTRIES, MAX_POLICY_FLOWS_PER_ENDPOINT, POLICY_FLOW_REFRESH_NS,
        POLICY_FLOW_TIMEOUT_NS, POLICY_PREFIX_FULL, PolicyFlow, PolicyValue,
    },
};

use crate::{
    NO_PREALLOC, SARENA_ENDPOINTS, counters, endpoint6, exthdr,
    flows::{self, IPPROTO_ICMP, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP, IcmpEcho},
    lpm::{self, AddrKey},
    packet::{ptr_at, read, verdict},
};

/// Either isolation bit.
pub const ISOLATED: u32 = ENDPOINT_F_INGRESS_ISOLATED | ENDPOINT_F_EGRESS_ISOLATED;

/// Address prefix → identity (`sarena_common::policy::IpcacheKey`, see
/// [`AddrKey`]).
#[map(name = "SARENA_IPCACHE")]
static SARENA_IPCACHE: LpmTrie<AddrKey, IpcacheValue> =
    LpmTrie::pinned(MAX_IPCACHE_ENTRIES, NO_PREALLOC);

/// Allow entries (`sarena_common::policy::PolicyKey` without its prefix
/// length: ifindex, direction, identity, protocol, port, big-endian).
#[map(name = "SARENA_POLICY")]
static SARENA_POLICY: LpmTrie<[u8; 12], PolicyValue> =
    LpmTrie::pinned(MAX_POLICY_ENTRIES, NO_PREALLOC);

/// Host ifindex → the endpoint's answerable flows (inner maps created by
/// user space at attach; pinned by path, like the host-stack flows map).
#[btf_map(name = "SARENA_POLICY_FLOWS")]
static SARENA_POLICY_FLOWS: HashOfMaps<
    u32,
    PolicyTable,
    { MAX_ENDPOINTS as usize },
    { NO_PREALLOC as usize },
> = HashOfMaps::new();

/// One endpoint's answerable-flows table.
type PolicyTable = LruHashMap<FlowKey, PolicyFlow, { MAX_POLICY_FLOWS_PER_ENDPOINT as usize }>;

/// What an egress check decided.
pub const PASS: u32 = 0;
/// Drop the packet.
pub const DENY: u32 = 1;
/// Mark it [`MARK_EGRESS_DEFERRED`] and let the host stack translate it.
pub const DEFER: u32 = 2;

/// IPv4 fragment offset bits of the host-order `frags` word.
const IP_OFFSET: u16 = 0x1fff;

/// A packet as the policy sees it: its flow key (its own direction) and
/// the destination port the allow entries are matched against (0 for
/// protocols without ports, ICMP, and fragments after the first).
#[derive(Clone, Copy)]
pub struct Flow {
    /// The packet's direction of the flow.
    pub key: FlowKey,
    /// Destination port, host order.
    pub port: u16,
    /// An ICMP or ICMPv6 error (destination unreachable, fragmentation
    /// needed or packet too big, time exceeded, parameter problem): it
    /// enters an ingress-isolated pod whatever its policies (path MTU
    /// discovery must work); a pod's own errors are judged like the rest.
    pub related: bool,
}

/// ICMP error types (destination unreachable, time exceeded, parameter problem).
const ICMP_ERRORS: [u8; 3] = [3, 11, 12];
/// ICMPv6 error types (destination unreachable, packet too big, time
/// exceeded, parameter problem).
const ICMPV6_ERRORS: [u8; 4] = [1, 2, 3, 4];

/// Ports of a TCP, UDP or SCTP header at `l4`, or an ICMP echo's
/// identifier in both; zeros for anything else. Returns (sport, dport,
/// port, whether it is an ICMP or ICMPv6 error).
#[inline(always)]
fn ports(
    ctx: &TcContext,
    proto: u8,
    l4: usize,
    icmp_echo: [u8; 2],
) -> ([u8; 2], [u8; 2], u16, bool) {
    match proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => match read::<[u8; 4]>(ctx, l4) {
            Some(p) => (
                [p[0], p[1]],
                [p[2], p[3]],
                u16::from_be_bytes([p[2], p[3]]),
                false,
            ),
            None => ([0; 2], [0; 2], 0, false),
        },
        IPPROTO_ICMP | flows::IPPROTO_ICMPV6 => match read::<IcmpEcho>(ctx, l4) {
            Some(icmp) if icmp.kind == icmp_echo[0] || icmp.kind == icmp_echo[1] => {
                (icmp.id, icmp.id, 0, false)
            }
            Some(icmp) => {
                let error = if proto == IPPROTO_ICMP {
                    ICMP_ERRORS.contains(&icmp.kind)
                } else {
                    ICMPV6_ERRORS.contains(&icmp.kind)
                };
                ([0; 2], [0; 2], 0, error)
            }
            None => ([0; 2], [0; 2], 0, false),
        },
        _ => ([0; 2], [0; 2], 0, false),
    }
}

/// The policy's view of an IPv4 packet. Fragments after the first carry no
/// ports: they are matched port-less.
#[inline(always)]
pub fn flow4(ctx: &TcContext, ip: &Ipv4Hdr) -> Flow {
    let (sport, dport, port, related) = if u16::from_be_bytes(ip.frags) & IP_OFFSET != 0 {
        ([0; 2], [0; 2], 0, false)
    } else {
        let l4 = EthHdr::LEN + usize::from(ip.vihl & 0x0f) * 4;
        ports(
            ctx,
            ip.proto,
            l4,
            [flows::ICMP_ECHO_REQUEST, flows::ICMP_ECHO_REPLY],
        )
    };
    Flow {
        key: FlowKey::ipv4(ip.src_addr, ip.dst_addr, sport, dport, ip.proto),
        port,
        related,
    }
}

/// The policy's view of an IPv6 packet whose upper layer is `upper`
/// (fragments are matched port-less).
#[inline(always)]
pub fn flow6(ctx: &TcContext, ip: &Ipv6Hdr, upper: &exthdr::Upper) -> Flow {
    let (sport, dport, port, related) = if upper.fragment {
        ([0; 2], [0; 2], 0, false)
    } else {
        ports(
            ctx,
            upper.proto,
            upper.offset,
            [flows::ICMPV6_ECHO_REQUEST, flows::ICMPV6_ECHO_REPLY],
        )
    };
    Flow {
        key: FlowKey::ipv6(ip.src_addr, ip.dst_addr, sport, dport, upper.proto),
        port,
        related,
    }
}

/// The ipcache entry of `addr` (family `family`); [`IDENTITY_WORLD`] when
/// no prefix covers it.
#[inline(always)]
fn identity(family: u8, addr: &[u8; 16]) -> IpcacheValue {
    match lpm::get(&SARENA_IPCACHE, family, addr) {
        Some(v) => *v,
        None => IpcacheValue {
            identity: IDENTITY_WORLD,
            flags: 0,
        },
    }
}

/// Whether an allow entry of the endpoint `ifindex` covers `peer`
/// (or any peer), `proto` and `port` in `direction`.
#[inline(always)]
fn allowed(ifindex: u32, direction: u8, peer: u32, proto: u8, port: u16) -> bool {
    let key = |identity: u32| {
        let i = ifindex.to_be_bytes();
        let p = identity.to_be_bytes();
        let n = port.to_be_bytes();
        Key::new(
            POLICY_PREFIX_FULL,
            [
                i[0], i[1], i[2], i[3], direction, p[0], p[1], p[2], p[3], proto, n[0], n[1],
            ],
        )
    };
    SARENA_POLICY.get(key(peer)).is_some() || SARENA_POLICY.get(key(IDENTITY_ANY)).is_some()
}

/// The answerable-flows table of the endpoint behind `ifindex`, if any.
#[inline(always)]
fn table(ifindex: u32) -> Option<&'static PolicyTable> {
    // SAFETY: the value is the inner map itself, used only through helpers;
    // user space replaces or removes it only for a detached endpoint.
    unsafe { SARENA_POLICY_FLOWS.get(&ifindex) }
}

/// Whether `key` answers a flow in the table of `ifindex` in `direction`
/// (and the entry has not expired); refreshes the entry.
#[inline(always)]
fn answers(ifindex: u32, key: &FlowKey, direction: u8) -> bool {
    let Some(table) = table(ifindex) else {
        return false;
    };
    let Some(entry) = table.get_ptr_mut(key) else {
        return false;
    };
    // SAFETY: a map value pointer returned by the lookup helper.
    let entry = unsafe { &mut *entry };
    // SAFETY: reading the clock has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let age = now.wrapping_sub(entry.last_seen_ns);
    if entry.direction != direction || age > POLICY_FLOW_TIMEOUT_NS {
        return false;
    }
    if age > POLICY_FLOW_REFRESH_NS {
        entry.last_seen_ns = now;
    }
    true
}

/// Records in the table of `ifindex` that the answer to `key` may pass in
/// `direction` (lookup first; insert when missing, refresh otherwise).
#[inline(always)]
fn remember(ifindex: u32, key: &FlowKey, direction: u8) {
    record(ifindex, &key.reversed(), direction);
}

/// Records in the table of `ifindex` that `key` itself, allowed by a rule,
/// may pass again in `direction`: an allowed flow's later packets cost one
/// lookup, not the identity and rule lookups (like conntrack's
/// `established`, which the kernel dataplane relies on).
#[inline(always)]
fn remember_as(ifindex: u32, key: &FlowKey, direction: u8) {
    record(ifindex, key, direction);
}

/// Records `answer` as passing `direction` in the table of `ifindex`.
#[inline(always)]
fn record(ifindex: u32, answer: &FlowKey, direction: u8) {
    let Some(table) = table(ifindex) else {
        return;
    };
    // SAFETY: reading the clock has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(entry) = table.get_ptr_mut(answer) {
        // SAFETY: a map value pointer returned by the lookup helper; racing
        // at worst with another refresh.
        let entry = unsafe { &mut *entry };
        if entry.direction == direction
            && now.wrapping_sub(entry.last_seen_ns) <= POLICY_FLOW_REFRESH_NS
        {
            return;
        }
        entry.direction = direction;
        entry.last_seen_ns = now;
        return;
    }
    // SAFETY: `PolicyFlow` is 16 bytes of integers (no padding, any bit
    // pattern valid): `last_seen_ns`, then `direction` and its 7 zero
    // bytes as one word. Written as a struct, the zero bytes on their own
    // are a `memset` call (bpf-linker lowers every one to a byte loop).
    let entry = unsafe {
        core::mem::transmute::<[u64; 2], PolicyFlow>([
            now,
            u64::from_ne_bytes([direction, 0, 0, 0, 0, 0, 0, 0]),
        ])
    };
    // A failed insert (out of memory) leaves the flow unrecorded: its
    // answers are judged by the entries alone. A full table evicts its
    // least recently used entry.
    let _ = table.insert(answer, entry, 0);
}

/// The packet `key` (destination port `port`) leaves the endpoint behind
/// `ifindex` whose flags are `flags`: [`PASS`], [`DENY`] or (unless
/// `translated`, the check after the host stack's translation) [`DEFER`].
#[inline(never)]
pub fn leave(key: &FlowKey, port: u16, ifindex: u32, flags: u32, translated: bool) -> u32 {
    if answers(ifindex, key, DIRECTION_EGRESS) {
        return PASS;
    }
    if flags & ENDPOINT_F_EGRESS_ISOLATED != 0 {
        let peer = identity(key.family, &key.daddr);
        if peer.flags & IPCACHE_F_TRANSLATED != 0 && !translated {
            return DEFER;
        }
        if peer.identity != IDENTITY_HOST
            && !allowed(ifindex, DIRECTION_EGRESS, peer.identity, key.proto, port)
        {
            return DENY;
        }
        // The flow's next packets this way pass on one lookup.
        remember_as(ifindex, key, DIRECTION_EGRESS);
    }
    remember(ifindex, key, DIRECTION_INGRESS);
    PASS
}

/// The packet `key` (destination port `port`) enters the endpoint behind
/// `ifindex` whose flags are `flags`: `true` when it may.
#[inline(never)]
pub fn enter(key: &FlowKey, port: u16, ifindex: u32, flags: u32) -> bool {
    if answers(ifindex, key, DIRECTION_INGRESS) {
        return true;
    }
    if flags & ENDPOINT_F_INGRESS_ISOLATED != 0 {
        let peer = identity(key.family, &key.saddr);
        if peer.identity == IDENTITY_HOST || peer.flags & IPCACHE_F_TRANSLATED != 0 {
            // This node (kubelet's probes), or a translated reply.
            return true;
        }
        if !allowed(ifindex, DIRECTION_INGRESS, peer.identity, key.proto, port) {
            return false;
        }
        remember_as(ifindex, key, DIRECTION_INGRESS);
    }
    remember(ifindex, key, DIRECTION_EGRESS);
    true
}

/// Sets [`MARK_EGRESS_DEFERRED`] on the packet.
#[inline(always)]
pub fn defer(ctx: &TcContext) {
    // SAFETY: the context pointer the kernel passed in; `mark` is writable
    // from TC programs.
    unsafe { (*ctx.skb.skb).mark |= MARK_EGRESS_DEFERRED };
}

/// Whether the packet carries [`MARK_EGRESS_DEFERRED`]; clears it.
#[inline(always)]
fn take_deferred(ctx: &TcContext) -> bool {
    // SAFETY: the context pointer the kernel passed in.
    let skb = unsafe { &mut *ctx.skb.skb };
    if skb.mark & MARK_EGRESS_DEFERRED == 0 {
        return false;
    }
    skb.mark &= !MARK_EGRESS_DEFERRED;
    true
}

/// The endpoint entry of a flow's source address; zeroes when no local
/// endpoint has it.
#[inline(always)]
fn source_endpoint(key: &FlowKey) -> EndpointInfo {
    let entry = if key.family == sarena_common::FLOW_FAMILY_IPV4 {
        let addr = [key.saddr[0], key.saddr[1], key.saddr[2], key.saddr[3]];
        SARENA_ENDPOINTS.get_ptr(EndpointKey::new(addr))
    } else {
        endpoint6(&key.saddr)
    };
    match entry {
        // SAFETY: a map value pointer returned by the lookup helper.
        Some(entry) => unsafe { *entry },
        None => EndpointInfo::default(),
    }
}

/// The deferred egress check of a packet carrying [`MARK_EGRESS_DEFERRED`]
/// (the mark is cleared): its sender's egress against the translated
/// destination. `false` (counted on the sender) when it is denied.
#[inline(always)]
pub fn deferred(ctx: &TcContext, flow: &Flow) -> bool {
    if !take_deferred(ctx) {
        return true;
    }
    let src = source_endpoint(&flow.key);
    if src.flags & ENDPOINT_F_EGRESS_ISOLATED == 0 {
        return true;
    }
    if leave(&flow.key, flow.port, src.ifindex, src.flags, true) == DENY {
        counters::dropped(
            ctx,
            src.ifindex,
            DIRECTION_EGRESS,
            DropReason::PolicyDeniedEgress,
        );
        return false;
    }
    true
}

/// What the host stack delivers to the pod behind `ifindex` (to its
/// address, whose endpoint entry is `dst`, zeroes when it has none): the
/// deferred egress check of its sender, then the pod's own ingress check.
/// A verdict.
#[inline(always)]
pub fn to_pod(ctx: &TcContext, flow: &Flow, ifindex: u32, dst: EndpointInfo) -> i32 {
    if !deferred(ctx, flow) {
        return verdict::SHOT;
    }
    if dst.ifindex != ifindex || dst.flags & ISOLATED == 0 || flow.related {
        return verdict::OK;
    }
    if enter(&flow.key, flow.port, ifindex, dst.flags) {
        verdict::OK
    } else {
        counters::dropped(
            ctx,
            ifindex,
            DIRECTION_INGRESS,
            DropReason::PolicyDeniedIngress,
        );
        verdict::SHOT
    }
}

/// `to_network`: a packet leaving the node. Only one marked
/// [`MARK_EGRESS_DEFERRED`] is looked at (and the mark cleared).
#[inline(always)]
pub fn to_network(ctx: &TcContext) -> i32 {
    // SAFETY: the context pointer the kernel passed in.
    if unsafe { (*ctx.skb.skb).mark } & MARK_EGRESS_DEFERRED == 0 {
        return verdict::OK;
    }
    crate::packet::pull_headers(ctx);
    let Ok(eth) = ptr_at::<EthHdr>(ctx, 0, DropReason::MalformedEthernet) else {
        let _ = take_deferred(ctx);
        return verdict::OK;
    };
    // SAFETY: bounds-checked above.
    let ether_type = u16::from_be(unsafe { (*eth).ether_type });
    let flow = match ether_type {
        crate::forward::ETH_P_IP => {
            let Ok(ip) = ptr_at::<Ipv4Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv4) else {
                let _ = take_deferred(ctx);
                return verdict::OK;
            };
            // SAFETY: bounds-checked above.
            flow4(ctx, unsafe { &*ip })
        }
        crate::forward::ETH_P_IPV6 => {
            let Ok(ip) = ptr_at::<Ipv6Hdr>(ctx, EthHdr::LEN, DropReason::MalformedIpv6) else {
                let _ = take_deferred(ctx);
                return verdict::OK;
            };
            // SAFETY: bounds-checked above.
            let ip = unsafe { &*ip };
            let upper =
                crate::ipv6::packet_end(ctx, ip).and_then(|end| exthdr::upper(ctx, ip, end).ok());
            let Some(upper) = upper else {
                let _ = take_deferred(ctx);
                return verdict::OK;
            };
            flow6(ctx, ip, &upper)
        }
        _ => {
            let _ = take_deferred(ctx);
            return verdict::OK;
        }
    };
    if deferred(ctx, &flow) {
        verdict::OK
    } else {
        verdict::SHOT
    }
}

/// Whether the packet carries [`MARK_EGRESS_DEFERRED`] (left as it is).
#[inline(always)]
pub fn deferred_mark(ctx: &TcContext) -> bool {
    // SAFETY: the context pointer the kernel passed in.
    unsafe { (*ctx.skb.skb).mark & MARK_EGRESS_DEFERRED != 0 }
}
