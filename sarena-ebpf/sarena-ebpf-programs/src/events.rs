//! Drop and flow events (`sarena_common::events`): every drop is counted
//! node-wide by direction and reason and, when drop events are on, written
//! to the ring buffer with the frame's first bytes; a forwarded frame that
//! the flow mode selects (a new connection, or one frame in N) likewise,
//! with the path it took. Each endpoint's events pass its own limiter
//! first, so one pod's flood only ever costs that pod's events.
//!
//! The cheap part (the configuration's lookup and test) is inlined where a
//! frame is dropped or forwarded; what runs only for an event (the limiter,
//! the copy into the ring buffer) is a subprogram of its own, so each hook
//! carries one copy of it.

use aya_ebpf::{
    bindings::{__sk_buff, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_get_prandom_u32, bpf_ktime_get_ns, generated::bpf_skb_load_bytes},
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::TcContext,
};
use sarena_common::events::{
    DIRECTION_EGRESS, EVENT_DROP, EVENT_FLOW, EVENT_HEAD_BYTES, EVENTS_F_DROPS,
    EVENTS_F_FLOW_WATCH, EVENTS_RING_BYTES, EVENTS_WAKEUP_BYTES, Event, EventLimiter, EventStats,
    EventsConfig, FLOW_MODE_NEW, FLOW_MODE_OFF, FLOW_MODE_SAMPLE, PATH_HOST_STACK,
    PATH_HOST_STACK_FLOW, PATH_LOCAL_POD, PATH_PEER,
};
use sarena_common::{DropReason, EndpointKey, MAX_ENDPOINTS};

use crate::{
    NO_PREALLOC, SARENA_ENDPOINTS, endpoint6,
    forward::{ETH_P_IP, ETH_P_IPV6},
    packet::{ptr_at, verdict},
};

/// The events (see `sarena_common::events::EVENTS_MAP`).
#[map(name = "SARENA_EVENTS")]
static SARENA_EVENTS: RingBuf = RingBuf::pinned(EVENTS_RING_BYTES, 0);

/// What user space switched on (one entry).
#[map(name = "SARENA_EVENTS_CONFIG")]
static SARENA_EVENTS_CONFIG: Array<EventsConfig> = Array::pinned(1, 0);

/// Each endpoint's limiter, made on its first event.
#[map(name = "SARENA_EVENT_LIMITS")]
static SARENA_EVENT_LIMITS: LruHashMap<u32, EventLimiter> = LruHashMap::pinned(MAX_ENDPOINTS, 0);

/// Node-wide drop, flow and event counts (one entry, per CPU).
#[map(name = "SARENA_EVENT_STATS")]
static SARENA_EVENT_STATS: PerCpuArray<EventStats> = PerCpuArray::pinned(1, 0);

/// Endpoints whose flows are watched whatever the node-wide mode.
#[map(name = "SARENA_FLOW_WATCH")]
static SARENA_FLOW_WATCH: HashMap<u32, u32> = HashMap::pinned(MAX_ENDPOINTS, NO_PREALLOC);

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_ICMPV6: u8 = 58;
const ICMP_ECHO_REQUEST: u8 = 8;
const ICMPV6_ECHO_REQUEST: u8 = 128;
const TCP_SYN: u8 = 0x02;
const TCP_ACK: u8 = 0x10;
/// Ethernet header length.
const ETH_LEN: usize = 14;

#[inline(always)]
fn config() -> Option<&'static EventsConfig> {
    SARENA_EVENTS_CONFIG.get(0)
}

#[inline(always)]
fn stats(f: impl FnOnce(&mut EventStats)) {
    if let Some(s) = SARENA_EVENT_STATS.get_ptr_mut(0) {
        // SAFETY: a per-CPU value, only touched by this CPU while the
        // program runs.
        f(unsafe { &mut *s });
    }
}

/// A frame dropped for `reason` on the endpoint behind `ifindex` (0: none
/// of this node's), in `direction` (`DIRECTION_*`): counted, and an event
/// when drop events are on.
#[inline(always)]
pub fn dropped(ctx: &TcContext, ifindex: u32, direction: u8, reason: DropReason) {
    drop_event(ctx.skb.skb, ifindex, direction, reason as u8);
}

#[inline(never)]
fn drop_event(skb: *mut __sk_buff, ifindex: u32, direction: u8, reason: u8) {
    stats(|s| {
        let row = if direction == DIRECTION_EGRESS {
            &mut s.drops[1]
        } else {
            &mut s.drops[0]
        };
        if let Some(d) = row.get_mut(reason as usize) {
            *d += 1;
        }
    });
    let Some(cfg) = config() else {
        return;
    };
    if cfg.flags & EVENTS_F_DROPS == 0 {
        return;
    }
    let ctx = TcContext::new(skb);
    emit(&ctx, cfg, ifindex, EVENT_DROP, direction, reason);
}

/// The flow mode that applies to the endpoint behind `ifindex`:
/// its watch entry's, else the node's. The common case (flow events off
/// everywhere) costs the configuration's lookup.
#[inline(always)]
fn flow_mode(ifindex: u32) -> u32 {
    let Some(cfg) = config() else {
        return FLOW_MODE_OFF;
    };
    if cfg.flags & EVENTS_F_FLOW_WATCH != 0 {
        // SAFETY: a map value pointer returned by the lookup helper.
        if let Some(mode) = SARENA_FLOW_WATCH.get_ptr(ifindex).map(|m| unsafe { *m }) {
            return mode;
        }
    }
    cfg.flow_mode
}

/// `from_container` forwarded the frame of the pod behind `ifindex` with
/// `action`: a flow event when the flow mode selects the frame.
#[inline(always)]
pub fn from_pod(ctx: &TcContext, ifindex: u32, action: i32) {
    let mode = flow_mode(ifindex);
    if mode != FLOW_MODE_OFF {
        from_pod_flow(ctx.skb.skb, ifindex, action, mode);
    }
}

#[inline(never)]
fn from_pod_flow(skb: *mut __sk_buff, ifindex: u32, action: i32, mode: u32) {
    let ctx = TcContext::new(skb);
    if !selected(&ctx, mode) {
        return;
    }
    let local = destination_is_local(&ctx);
    let path = if i64::from(action) == verdict::REDIRECT {
        if local { PATH_LOCAL_POD } else { PATH_PEER }
    } else if local {
        PATH_HOST_STACK_FLOW
    } else {
        PATH_HOST_STACK
    };
    flow(&ctx, ifindex, DIRECTION_EGRESS, path);
}

/// A frame delivered into the pod behind `ifindex` by `path` (`PATH_PEER`
/// from the network, `PATH_HOST_STACK` by the host stack): a flow event
/// when the flow mode selects it.
#[inline(always)]
pub fn into_pod(ctx: &TcContext, ifindex: u32, path: u8) {
    let mode = flow_mode(ifindex);
    if mode != FLOW_MODE_OFF {
        into_pod_flow(ctx.skb.skb, ifindex, path, mode);
    }
}

#[inline(never)]
fn into_pod_flow(skb: *mut __sk_buff, ifindex: u32, path: u8, mode: u32) {
    let ctx = TcContext::new(skb);
    if selected(&ctx, mode) {
        flow(
            &ctx,
            ifindex,
            sarena_common::events::DIRECTION_INGRESS,
            path,
        );
    }
}

/// A selected forwarded frame: counted, then an event.
#[inline(always)]
fn flow(ctx: &TcContext, ifindex: u32, direction: u8, path: u8) {
    stats(|s| {
        let row = if direction == DIRECTION_EGRESS {
            &mut s.flows[1]
        } else {
            &mut s.flows[0]
        };
        if let Some(f) = row.get_mut(path as usize) {
            *f += 1;
        }
    });
    if let Some(cfg) = config() {
        emit(ctx, cfg, ifindex, EVENT_FLOW, direction, path);
    }
}

/// Whether flow mode `mode` selects this frame.
#[inline(always)]
fn selected(ctx: &TcContext, mode: u32) -> bool {
    if mode == FLOW_MODE_NEW {
        return new_connection(ctx);
    }
    if mode == FLOW_MODE_SAMPLE {
        let Some(cfg) = config() else {
            return false;
        };
        if cfg.flow_sample <= 1 {
            return true;
        }
        // SAFETY: plain helper call.
        return unsafe { bpf_get_prandom_u32() } % cfg.flow_sample == 0;
    }
    false
}

/// The two bytes at `offset` of the frame's linear part (the hooks made
/// the headers linear), `None` past it. Direct packet access: the
/// `packet::read` helper fallback returns an `Option` of an array whose
/// `None` LLVM builds from registers the verifier will not read; two bytes,
/// not one, for the reason `packet::read` gives.
#[inline(always)]
fn two_bytes(ctx: &TcContext, offset: usize) -> Option<[u8; 2]> {
    // SAFETY: bounds-checked by `ptr_at` against the linear part's end.
    ptr_at::<[u8; 2]>(ctx, offset, DropReason::MalformedEthernet)
        .ok()
        .map(|b| unsafe { *b })
}

/// The frame's EtherType (host order) and, for IPv4 and IPv6, its upper
/// protocol and where its upper header starts (an IPv6 packet with
/// extension headers names the first of them).
#[inline(always)]
fn upper(ctx: &TcContext) -> Option<(u16, u8, usize)> {
    let eth = ptr_at::<[u8; ETH_LEN]>(ctx, 0, DropReason::MalformedEthernet).ok()?;
    // SAFETY: bounds-checked above.
    let ether_type = u16::from_be_bytes(unsafe { [(*eth)[12], (*eth)[13]] });
    if ether_type == ETH_P_IP {
        let ip = ptr_at::<[u8; 20]>(ctx, ETH_LEN, DropReason::MalformedIpv4).ok()?;
        // SAFETY: bounds-checked above.
        let ip = unsafe { &*ip };
        // a fragment past the first opens nothing
        if ip[6] & 0x1f != 0 || ip[7] != 0 {
            return None;
        }
        Some((ether_type, ip[9], ETH_LEN + usize::from(ip[0] & 0x0f) * 4))
    } else if ether_type == ETH_P_IPV6 {
        let ip = ptr_at::<[u8; 40]>(ctx, ETH_LEN, DropReason::MalformedIpv6).ok()?;
        // SAFETY: bounds-checked above.
        Some((ether_type, unsafe { (*ip)[6] }, ETH_LEN + 40))
    } else {
        None
    }
}

/// Whether the frame opens a connection: a TCP SYN without ACK, or an echo
/// request (ICMP, ICMPv6). An IPv6 packet with extension headers before its
/// upper layer is not looked into.
#[inline(always)]
fn new_connection(ctx: &TcContext) -> bool {
    let Some((_, proto, l4)) = upper(ctx) else {
        return false;
    };
    match proto {
        // the flags are the 14th byte of the TCP header
        IPPROTO_TCP => {
            matches!(two_bytes(ctx, l4 + 12), Some(b) if b[1] & (TCP_SYN | TCP_ACK) == TCP_SYN)
        }
        IPPROTO_ICMP => matches!(two_bytes(ctx, l4), Some(b) if b[0] == ICMP_ECHO_REQUEST),
        IPPROTO_ICMPV6 => matches!(two_bytes(ctx, l4), Some(b) if b[0] == ICMPV6_ECHO_REQUEST),
        _ => false,
    }
}

/// Whether the frame's destination address is a pod of this node.
#[inline(always)]
fn destination_is_local(ctx: &TcContext) -> bool {
    let Some((ether_type, _, _)) = upper(ctx) else {
        return false;
    };
    if ether_type == ETH_P_IP {
        match ptr_at::<[u8; 4]>(ctx, ETH_LEN + 16, DropReason::MalformedIpv4) {
            // SAFETY: bounds-checked by `ptr_at`.
            Ok(dst) => SARENA_ENDPOINTS
                .get_ptr(EndpointKey::new(unsafe { *dst }))
                .is_some(),
            Err(_) => false,
        }
    } else {
        match ptr_at::<[u8; 16]>(ctx, ETH_LEN + 24, DropReason::MalformedIpv6) {
            // SAFETY: bounds-checked by `ptr_at`.
            Ok(dst) => endpoint6(unsafe { &*dst }).is_some(),
            Err(_) => false,
        }
    }
}

/// Whether the endpoint behind `ifindex` may have another event now (its
/// limiter made on its first); one held back is counted.
#[inline(always)]
fn admit(cfg: &EventsConfig, ifindex: u32, now: u64) -> bool {
    if cfg.interval_ns == 0 {
        return true;
    }
    let limiter = match SARENA_EVENT_LIMITS.get_ptr_mut(ifindex) {
        Some(l) => l,
        None => {
            let fresh = EventLimiter {
                next_ns: now,
                lost: 0,
            };
            // Another CPU may have made it meanwhile: either one will do.
            let _ = SARENA_EVENT_LIMITS.insert(ifindex, fresh, 0);
            match SARENA_EVENT_LIMITS.get_ptr_mut(ifindex) {
                Some(l) => l,
                None => return false,
            }
        }
    };
    // SAFETY: a map value pointer returned by the lookup helper. Two CPUs
    // may race on it: the limit is then off by an event, never unbounded.
    let limiter = unsafe { &mut *limiter };
    let next = if limiter.next_ns < now {
        now
    } else {
        limiter.next_ns
    };
    if next - now > cfg.burst_ns {
        limiter.lost += 1;
        return false;
    }
    limiter.next_ns = next + cfg.interval_ns;
    true
}

/// One event into the ring buffer, after the endpoint's limiter; counted
/// whether it got in, was held back, or found the buffer full.
#[inline(always)]
fn emit(ctx: &TcContext, cfg: &EventsConfig, ifindex: u32, kind: u8, direction: u8, code: u8) {
    // SAFETY: plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    if !admit(cfg, ifindex, now) {
        stats(|s| s.lost_rate_limited += 1);
        return;
    }
    let Some(mut entry) = SARENA_EVENTS.reserve::<Event>(0) else {
        stats(|s| s.lost_buffer_full += 1);
        return;
    };
    let event = entry.as_mut_ptr();
    let len = ctx.len();
    let want = if len < EVENT_HEAD_BYTES as u32 {
        len
    } else {
        EVENT_HEAD_BYTES as u32
    };
    // SAFETY: `event` is the ring buffer's reservation of one `Event`,
    // written field by field before it is submitted; the copy is at most
    // `EVENT_HEAD_BYTES` into `head`.
    unsafe {
        (*event).time_ns = now;
        (*event).ifindex = ifindex;
        (*event).packet_len = len;
        (*event).kind = kind;
        (*event).direction = direction;
        (*event).code = code;
        (*event)._pad = 0;
        (*event)._pad2 = 0;
        let copied = want > 0
            && bpf_skb_load_bytes(
                ctx.skb.skb as *const _,
                0,
                (&raw mut (*event).head).cast(),
                want,
            ) == 0;
        (*event).captured = if copied { want as u16 } else { 0 };
    }
    // Wake the reader only once an eighth of the ring waits (it polls
    // meanwhile): a wakeup per event would cost more than the event.
    let flags = if SARENA_EVENTS.query(BPF_RB_AVAIL_DATA as u64) >= EVENTS_WAKEUP_BYTES {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    entry.submit(flags as u64);
    stats(|s| {
        if kind == EVENT_DROP {
            s.drop_events += 1;
        } else {
            s.flow_events += 1;
        }
    });
}
