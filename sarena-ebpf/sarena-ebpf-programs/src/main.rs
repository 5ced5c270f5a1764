//! Sarena's TC programs, attached (cls_bpf on clsact) to each pod's host-side veth.
//!
//! - [`from_container`] (ingress): frames the pod sends. Those beyond the
//!   pod's egress limit are dropped first (see [`bandwidth`]). IPv4, IPv6, ARP
//!   and neighbour discovery whose source is not one of the pod's addresses
//!   (or its own link-local one) are dropped (see [`antispoof`]), and so are
//!   frames of any other EtherType, VLAN-tagged frames, and ARP for
//!   anything but IPv4 over Ethernet. ARP requests and neighbour solicitations for
//!   any address but the pod's own are answered with the host end's MAC
//!   ([`arp`], [`ndp`]); IPv4 and IPv6 to another local endpoint are forwarded
//!   straight into that pod, and to another node's pod straight out of the
//!   device the FIB names ([`peer`]), unless the host stack handled their
//!   flow (see [`flows`]); everything else goes on to the host stack. NetworkPolicy
//!   ([`policy`]) judges the pod's egress before any path, and the local
//!   destination's ingress right before the redirect.
//! - [`to_container`] (egress): frames the host stack sends to the pod;
//!   counted, judged by NetworkPolicy (the deferred egress check of a local
//!   sender, the pod's ingress; dropped when denied), flows from other
//!   local pods recorded, and passed.
//! - [`to_network`] (egress of the node's vxlan device and uplink): the
//!   flows the host stack sends to other nodes' pods recorded, and the
//!   deferred egress check of pods' translated packets leaving the node.
//! - [`from_network`] (ingress of the same devices): other nodes' pods'
//!   packets for local pods straight into them ([`peer`]).
//! - [`to_container_bw`] (egress, in place of `to_container` for a pod
//!   whose incoming traffic is limited) and [`pod_egress`] (egress of the
//!   pod's own interface, for a pod whose outgoing traffic is limited): see
//!   [`bandwidth`].
//!
//! Map layouts live in `sarena-common`, shared with the loader in sarena-core.
#![no_std]
#![no_main]

mod antispoof;
mod arp;
mod bandwidth;
mod counters;
mod events;
mod exthdr;
mod fib;
mod flows;
mod forward;
mod ipv4;
mod ipv6;
mod lpm;
mod ndp;
mod packet;
mod peer;
mod policy;

use aya_ebpf::{
    Global,
    btf_maps::{HashOfMaps, LruHashMap},
    macros::{btf_map, classifier, map},
    maps::{HashMap, PerCpuHashMap},
    programs::TcContext,
};
use counters::Counters;
use packet::verdict;
use sarena_common::events::DIRECTION_EGRESS;
use sarena_common::{
    BandwidthState, Endpoint6Key, EndpointCounters, EndpointInfo, EndpointKey, FlowKey, FlowState,
    MAX_ENDPOINTS, MAX_HOST_FLOWS_PER_ENDPOINT, MAX_PACED_ENDPOINTS,
};

/// IPv4 pod address → where it lives (filled by user space, pinned).
#[map(name = "SARENA_ENDPOINTS")]
static SARENA_ENDPOINTS: HashMap<EndpointKey, EndpointInfo> = HashMap::pinned(MAX_ENDPOINTS, 0);

/// IPv6 pod address → where it lives (filled by user space, pinned).
#[map(name = "SARENA_ENDPOINTS6")]
static SARENA_ENDPOINTS6: HashMap<Endpoint6Key, EndpointInfo> = HashMap::pinned(MAX_ENDPOINTS, 0);

/// The [`SARENA_ENDPOINTS6`] entry of `addr` (a pointer to the map's value).
///
/// The key is built in place, the address copied straight into it from
/// wherever it is (the packet, mostly): moved in by value, it takes a
/// detour through a temporary that LLVM folds into a call of a byte-loop
/// `memmove` subprogram (the copy's source, a packet pointer, might be the
/// key for all LLVM knows).
#[inline(always)]
fn endpoint6(addr: &[u8; 16]) -> Option<*const EndpointInfo> {
    let mut key = core::mem::MaybeUninit::<Endpoint6Key>::uninit();
    // SAFETY: the key's only field is written whole before it is read.
    let key = unsafe {
        core::ptr::copy_nonoverlapping(addr, &raw mut (*key.as_mut_ptr()).addr, 1);
        key.assume_init_ref()
    };
    SARENA_ENDPOINTS6.get_ptr(key)
}

/// `BPF_F_NO_PREALLOC`: entries are allocated when user space inserts them.
const NO_PREALLOC: u32 = sarena_common::layouts::NO_PREALLOC;

/// Host veth ifindex → its endpoint's MACs (filled by user space at attach,
/// pinned): what the neighbour-discovery responder answers with when the
/// solicitation comes from a link-local address, which no address entry
/// names, and the pod's MAC, whose EUI-64 link-local address is the only
/// one the pod may use. Not preallocated, like the counters.
#[map(name = "SARENA_VETHS")]
static SARENA_VETHS: HashMap<u32, EndpointInfo> = HashMap::pinned(MAX_ENDPOINTS, NO_PREALLOC);

/// Host veth ifindex → counters (entries created by user space, pinned).
/// Not preallocated: a preallocated per-CPU map of this size would take
/// `MAX_ENDPOINTS` × 224 bytes × CPUs (235 MB on 64 CPUs) whatever the
/// number of pods; this one grows with the pods actually attached. `_V2`: a
/// pin's name names its layout (`sarena_common::layouts`), and generation 1
/// pinned 80-byte counters as `SARENA_COUNTERS`.
#[map(name = "SARENA_COUNTERS_V2")]
static SARENA_COUNTERS: PerCpuHashMap<u32, EndpointCounters> =
    PerCpuHashMap::pinned(MAX_ENDPOINTS, NO_PREALLOC);

/// Each endpoint's own flows table: the pod ↔ pod flows the host stack
/// handled that this endpoint started (host ifindex → an LRU hash of
/// [`MAX_HOST_FLOWS_PER_ENDPOINT`] entries; see [`flows`]). The inner maps
/// are created by user space when it attaches an endpoint, and the outer
/// map is pinned by path (a BTF map: the legacy map definitions cannot
/// describe an inner map). Shared by all CPUs: the two directions of a flow
/// may run on different ones.
#[btf_map(name = "SARENA_HOST_FLOWS_V2")]
static SARENA_HOST_FLOWS: HashOfMaps<
    u32,
    FlowTable,
    { MAX_ENDPOINTS as usize },
    { NO_PREALLOC as usize },
> = HashOfMaps::new();

/// One endpoint's flows table (the inner maps of [`SARENA_HOST_FLOWS`]).
type FlowTable = LruHashMap<FlowKey, FlowState, { MAX_HOST_FLOWS_PER_ENDPOINT as usize }>;

/// Host veth ifindex → the pod's bandwidth pacers, and its policer key →
/// its host-side egress policer (entries created by user space for limited
/// pods only, pinned; not preallocated).
#[map(name = "SARENA_BANDWIDTH")]
static SARENA_BANDWIDTH: HashMap<u32, BandwidthState> =
    HashMap::pinned(MAX_PACED_ENDPOINTS, NO_PREALLOC);

/// The host veth ifindex of the pod whose interface [`pod_egress`] is
/// attached to: set by user space when it loads that pod's instance.
#[unsafe(no_mangle)]
static POD_HOST_IFINDEX: Global<u32> = Global::new(0);

/// Ingress of a pod's host-side veth: what the pod sends.
#[classifier]
pub fn from_container(ctx: TcContext) -> i32 {
    let ifindex = packet::ifindex(&ctx);
    // The sender's counters, looked up once for all this frame counts.
    let sender = Counters::of(ifindex);
    sender.sent(ctx.len());
    // The egress limit, where the pod cannot remove it: before any path.
    if !bandwidth::police(&ctx, ifindex) {
        return verdict::SHOT;
    }
    match forward::try_from_container(&ctx, ifindex, sender) {
        Ok(action) => {
            events::from_pod(&ctx, ifindex, action);
            action
        }
        Err(reason) => {
            sender.dropped(reason);
            events::dropped(&ctx, ifindex, DIRECTION_EGRESS, reason);
            verdict::SHOT
        }
    }
}

/// Egress of a pod's host-side veth: what the host stack sends to the pod.
#[classifier]
pub fn to_container(ctx: TcContext) -> i32 {
    forward::try_to_container(&ctx)
}

/// Egress of an ingress-limited pod's host-side veth (instead of
/// [`to_container`]): what the host stack sends to the pod, as there, and
/// what `from_container` redirected to it from other local pods (marked,
/// already counted); both paced.
#[classifier]
pub fn to_container_bw(ctx: TcContext) -> i32 {
    if !bandwidth::take_redirect_mark(&ctx) && forward::try_to_container(&ctx) != verdict::OK {
        return verdict::SHOT;
    }
    bandwidth::pace(&ctx, packet::ifindex(&ctx), bandwidth::Way::ToPod)
}

/// Egress of an egress-limited pod's own interface, in the pod's netns:
/// everything the pod sends, paced. One instance per pod (see
/// [`POD_HOST_IFINDEX`]).
#[classifier]
pub fn pod_egress(ctx: TcContext) -> i32 {
    bandwidth::pace(&ctx, POD_HOST_IFINDEX.load(), bandwidth::Way::FromPod)
}

/// Egress of the node's network devices (the vxlan device, the uplink):
/// what `from_container` sent straight to a peer's pod passes (its mark
/// cleared); the flow of a pod's packet the host stack sends to a peer's
/// pod is recorded ([`peer`]); the deferred NetworkPolicy egress check of
/// a pod's packet the host stack translated (see [`policy`]). Nothing is
/// changed on the way but Sarena's own mark bits.
#[classifier]
pub fn to_network(ctx: TcContext) -> i32 {
    if peer::leaving(&ctx) {
        return packet::verdict::OK;
    }
    policy::to_network(&ctx)
}

/// Ingress of the node's network devices (the uplink, the vxlan device):
/// a peer pod's packet for a local pod goes straight into it (see
/// [`peer`]); everything else passes untouched.
#[classifier]
pub fn from_network(ctx: TcContext) -> i32 {
    peer::from_network(&ctx)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any reachable panic; this is never called.
    loop {}
}
