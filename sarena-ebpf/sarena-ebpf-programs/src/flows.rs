//! The host-stack flows map: which pod ↔ pod flows the host stack handled.
//!
//! `to_container` records every flow the host stack delivers to a pod from
//! another pod of this node; `from_container` looks a frame up before
//! redirecting it to a local pod and leaves it to the host stack on a hit.
//! So a flow the host stack translated (kube-proxy's or portmap's DNAT, a
//! masquerade) is translated back by conntrack, and only flows that never
//! touched the host stack take the redirect. See `sarena_common::FlowKey`
//! for the key.
//!
//! Each endpoint has a table of its own (an LRU hash of
//! `MAX_HOST_FLOWS_PER_ENDPOINT` entries), and a flow is recorded in the
//! table of the pod that started it: the sender of a frame the host stack
//! delivered, unless that frame answers a flow the receiver started. A pod
//! that starts more flows than its table holds evicts its own least recently
//! used ones, never another pod's (issue 25: one node-wide table let any pod
//! flood out every other pod's idle Service flows).
//!
//! A flow between a local pod and a peer's pod (another node's, see
//! `peer`) has a single entry, in the local pod's table, in the direction
//! into the local pod: the host stack's deliveries into the pod record it
//! (`to_container`), and so do its sends from the pod to the network
//! (`to_network`); the programs' direct paths both ways look it up.
//!
//! Failure modes are lopsided on purpose: an entry too many (a stale one, an
//! address reused by a new pod) only sends a flow through the host stack,
//! which forwards it correctly; an entry missing for a translated flow would
//! break it. Hence: anything whose flow cannot be told (fragments of either
//! family, truncated L4 headers, ICMP and ICMPv6 other than echo) goes to
//! the host stack without a lookup, and entries are never removed by the
//! programs; a table evicts its least recently used entry when it is full.

use aya_ebpf::{helpers::bpf_ktime_get_ns, programs::TcContext};
use network_types::{
    eth::EthHdr,
    ip::{Ipv4Hdr, Ipv6Hdr},
};
use sarena_common::{DropReason, FlowKey, FlowState, HOST_FLOW_REFRESH_NS};

use crate::{
    FlowTable, SARENA_HOST_FLOWS,
    counters::Counters,
    exthdr::Upper,
    packet::{ptr_at, read},
};

/// IP protocol number.
pub const IPPROTO_ICMP: u8 = 1;
/// ICMPv6's protocol number.
pub const IPPROTO_ICMPV6: u8 = 58;
/// ICMPv6 echo request.
pub const ICMPV6_ECHO_REQUEST: u8 = 128;
/// ICMPv6 echo reply.
pub const ICMPV6_ECHO_REPLY: u8 = 129;
/// IP protocol number.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number.
pub const IPPROTO_SCTP: u8 = 132;
/// ICMP echo reply.
pub const ICMP_ECHO_REPLY: u8 = 0;
/// ICMP echo request.
pub const ICMP_ECHO_REQUEST: u8 = 8;
/// More-fragments flag and fragment offset, in the host-order `frags` word.
const IP_MF_OFFSET: u16 = 0x3fff;

/// The first bytes of an ICMP or ICMPv6 header: type, code, checksum, identifier.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IcmpEcho {
    /// Type.
    pub kind: u8,
    code: u8,
    check: [u8; 2],
    /// Echo identifier.
    pub id: [u8; 2],
}

/// The key of the frame's own direction, or `None` when its flow cannot be
/// told from this frame (fragments, truncated L4 header, ICMP errors and
/// other non-echo ICMP): such frames go to the host stack.
#[inline(always)]
pub fn key_of(ctx: &TcContext, ip: &Ipv4Hdr) -> Option<FlowKey> {
    if u16::from_be_bytes(ip.frags) & IP_MF_OFFSET != 0 {
        return None;
    }
    let l4 = EthHdr::LEN + usize::from(ip.vihl & 0x0f) * 4;
    let (sport, dport) = match ip.proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
            let ports: *const [u8; 4] = ptr_at(ctx, l4, DropReason::MalformedIpv4).ok()?;
            // SAFETY: bounds-checked against data_end by ptr_at.
            let ports = unsafe { *ports };
            ([ports[0], ports[1]], [ports[2], ports[3]])
        }
        IPPROTO_ICMP => {
            let icmp: *const IcmpEcho = ptr_at(ctx, l4, DropReason::MalformedIpv4).ok()?;
            // SAFETY: as above.
            let icmp = unsafe { &*icmp };
            if icmp.kind != ICMP_ECHO_REQUEST && icmp.kind != ICMP_ECHO_REPLY {
                return None;
            }
            (icmp.id, icmp.id)
        }
        _ => ([0; 2], [0; 2]),
    };
    Some(FlowKey::ipv4(
        ip.src_addr,
        ip.dst_addr,
        sport,
        dport,
        ip.proto,
    ))
}

/// The key of an IPv6 frame's own direction, its upper layer at `upper`, or
/// `None` when its flow cannot be told from this frame (fragments, a
/// truncated upper-layer header, ICMPv6 other than echo).
#[inline(always)]
pub fn key_of6(ctx: &TcContext, ip: &Ipv6Hdr, upper: &Upper) -> Option<FlowKey> {
    if upper.fragment {
        return None;
    }
    let (sport, dport) = match upper.proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
            let ports: [u8; 4] = read(ctx, upper.offset)?;
            ([ports[0], ports[1]], [ports[2], ports[3]])
        }
        IPPROTO_ICMPV6 => {
            let icmp: IcmpEcho = read(ctx, upper.offset)?;
            if icmp.kind != ICMPV6_ECHO_REQUEST && icmp.kind != ICMPV6_ECHO_REPLY {
                return None;
            }
            (icmp.id, icmp.id)
        }
        _ => ([0; 2], [0; 2]),
    };
    Some(FlowKey::ipv6(
        ip.src_addr,
        ip.dst_addr,
        sport,
        dport,
        upper.proto,
    ))
}

/// The flows table of the endpoint behind `ifindex`, if it has one (user
/// space creates it before it attaches the programs).
#[inline(always)]
fn table(ifindex: u32) -> Option<&'static FlowTable> {
    // SAFETY: the value is the inner map itself, used only through helpers;
    // user space replaces or removes it only for a detached endpoint.
    unsafe { SARENA_HOST_FLOWS.get(&ifindex) }
}

/// Whether the host stack handled the flow of the frame `key` (its own
/// direction) that the pod behind `from` sends to the pod behind `to`: in
/// `to`'s table when `to` started the flow (the entry is this frame's
/// direction), in `from`'s when `from` started it (the entry is the answer
/// direction, this frame's reversed).
#[inline(always)]
pub fn handled_by_host(key: &FlowKey, from: u32, to: u32) -> bool {
    if let Some(table) = table(to)
        && table.get_ptr(key).is_some()
    {
        return true;
    }
    match table(from) {
        Some(table) => table.get_ptr(key.reversed()).is_some(),
        None => false,
    }
}

/// The host stack delivered a frame of `key` (its own direction) from the
/// pod behind `from` to the pod behind `to`. An answer to a flow `to`
/// started (found in `to`'s table) refreshes that entry; any other frame
/// belongs to a flow `from` started, recorded (the direction `to` answers
/// in) in `from`'s table. A lookup or two per frame; a write only for a new
/// flow or once per [`HOST_FLOW_REFRESH_NS`].
#[inline(always)]
pub fn record(key: &FlowKey, from: u32, to: u32) {
    // SAFETY: reading the clock has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(table) = table(to)
        && let Some(state) = table.get_ptr_mut(key)
    {
        refresh(state, now);
        return;
    }
    let Some(table) = table(from) else {
        return;
    };
    let answer = key.reversed();
    match table.get_ptr_mut(answer) {
        Some(state) => refresh(state, now),
        None => {
            let state = FlowState {
                last_seen_ns: now,
                ifindex: to,
                flags: 0,
            };
            // A failed insert (out of memory) leaves the flow unrecorded;
            // nothing better can be done from here. A full table evicts its
            // own least recently used entry.
            if table.insert(answer, state, 0).is_ok() {
                Counters::of(to).host_flow_recorded();
                Counters::of(from).host_flow_started();
            }
        }
    }
}

/// Whether the host stack handled the flow between the local pod behind
/// `local` and a peer's pod (another node's), `into_local` being the
/// flow's direction into the local pod: such flows have one entry, in the
/// local pod's table, whoever started them.
#[inline(always)]
pub fn peer_flow_handled(into_local: &FlowKey, local: u32) -> bool {
    match table(local) {
        Some(table) => table.get_ptr(into_local).is_some(),
        None => false,
    }
}

/// The host stack handled a packet of a flow between the local pod behind
/// `local` and a peer's pod (delivered it into the pod, or sent it from
/// the pod to the network): records or refreshes `into_local` (the flow's
/// direction into the local pod) in the pod's table. `true` for a new entry.
#[inline(always)]
pub fn record_peer(into_local: &FlowKey, local: u32) -> bool {
    let Some(table) = table(local) else {
        return false;
    };
    // SAFETY: reading the clock has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(state) = table.get_ptr_mut(into_local) {
        refresh(state, now);
        return false;
    }
    let state = FlowState {
        last_seen_ns: now,
        // No local device: the other end is on another node.
        ifindex: 0,
        flags: 0,
    };
    if table.insert(into_local, state, 0).is_ok() {
        Counters::of(local).host_flow_recorded();
        return true;
    }
    false
}

/// Sets an entry's last-seen time, at most once per [`HOST_FLOW_REFRESH_NS`].
#[inline(always)]
fn refresh(state: *mut FlowState, now: u64) {
    // SAFETY: a map value pointer returned by the lookup helper; an aligned
    // u64 store, racing at worst with another refresh.
    let state = unsafe { &mut *state };
    if now.wrapping_sub(state.last_seen_ns) > HOST_FLOW_REFRESH_NS {
        state.last_seen_ns = now;
    }
}
