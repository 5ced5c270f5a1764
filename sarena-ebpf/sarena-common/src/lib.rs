//! Map layouts shared by Sarena's eBPF programs and user space.
//!
//! Every type is `#[repr(C)]` with explicit padding so that kernel and user
//! space agree byte for byte. With the `user` feature the types implement
//! `aya::Pod` so they can be used as map keys and values from user space.
//!
//! A pinned map's name names its layout: see [`layouts`] for the rule, every
//! layout any release pinned and the generations; [`v1`] holds the layouts
//! of generation 1 that later ones migrate from.
#![no_std]

mod bandwidth;
pub mod events;
pub mod layouts;
mod link_local;
pub mod peers;
pub mod policy;
pub mod v1;

pub use bandwidth::*;
pub use link_local::link_local;

/// Name of the endpoint map: [`EndpointKey`] (IPv4) → [`EndpointInfo`] (hash, pinned).
pub const ENDPOINTS_MAP: &str = "SARENA_ENDPOINTS";
/// Name of the IPv6 endpoint map: [`Endpoint6Key`] → [`EndpointInfo`] (hash, pinned).
/// A map of its own, so the IPv4 map's layout and pins stay as they were.
pub const ENDPOINTS6_MAP: &str = "SARENA_ENDPOINTS6";
/// Name of the veths map: host ifindex (`u32`) → [`EndpointInfo`] (hash,
/// pinned): the MACs of each attached endpoint, for answers to frames whose
/// source names no address entry (link-local neighbour solicitations).
pub const VETHS_MAP: &str = "SARENA_VETHS";
/// Name of the counters map: host ifindex (`u32`) → [`EndpointCounters`]
/// (per-CPU hash, not preallocated, pinned). `_V2`: generation 1 pinned
/// 80-byte counters as `SARENA_COUNTERS` ([`v1::COUNTERS_MAP_V1`]).
pub const COUNTERS_MAP: &str = "SARENA_COUNTERS_V2";
/// Name of the host-stack flows map: host ifindex (`u32`) → that endpoint's
/// own flows table, an LRU hash [`FlowKey`] → [`FlowState`] of
/// [`MAX_HOST_FLOWS_PER_ENDPOINT`] entries (hash of maps, pinned; the inner
/// maps are created by user space at attach). See [`FlowKey`] for what it
/// records, and whose table an entry goes into. `_V2`: generation 2 pinned
/// one node-wide LRU hash as `SARENA_HOST_FLOWS`
/// ([`layouts::HOST_FLOWS_MAP_G2`]), which any pod could flood.
pub const HOST_FLOWS_MAP: &str = "SARENA_HOST_FLOWS_V2";
/// Name of the program on the ingress of each pod's host-side veth.
pub const FROM_CONTAINER_PROG: &str = "from_container";
/// Name of the program on the egress of each pod's host-side veth.
pub const TO_CONTAINER_PROG: &str = "to_container";
/// Capacity of each endpoint map (pod addresses of one family on one node).
pub const MAX_ENDPOINTS: u32 = 16384;
/// Capacity of each endpoint's own flows table in the host-stack flows map
/// ([`HOST_FLOWS_MAP`]): the flows between two pods of this node that the
/// host stack handled (Services, hostPort, NodePort) and that this endpoint
/// started, at once. When it is full, the endpoint's own least recently used
/// entry is evicted: a pod that starts more such flows can only push out its
/// own, never another pod's. Each table is preallocated (an LRU hash cannot
/// be otherwise): 241 KiB of kernel memory per endpoint (sarena-ebpf/README.md).
pub const MAX_HOST_FLOWS_PER_ENDPOINT: u32 = 2048;
/// `to_container` rewrites an entry's [`FlowState::last_seen_ns`] at most this
/// often (nanoseconds), so a busy flow costs a lookup per packet, not a write.
pub const HOST_FLOW_REFRESH_NS: u64 = 1_000_000_000;

/// Key of the endpoint map: an IPv4 pod address.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EndpointKey {
    /// The address octets in network order, as they appear in the packet.
    pub addr: [u8; 4],
}

impl EndpointKey {
    /// Key for the address `a.b.c.d` given as its four octets.
    pub const fn new(addr: [u8; 4]) -> Self {
        EndpointKey { addr }
    }
}

/// Key of the IPv6 endpoint map: an IPv6 pod address.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Endpoint6Key {
    /// The address octets in network order, as they appear in the packet.
    pub addr: [u8; 16],
}

impl Endpoint6Key {
    /// Key for the address given as its sixteen octets.
    pub const fn new(addr: [u8; 16]) -> Self {
        Endpoint6Key { addr }
    }
}

/// Value of both endpoint maps: where a pod address lives on this node.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointInfo {
    /// Ifindex of the pod's host-side veth.
    pub ifindex: u32,
    /// `ENDPOINT_F_*` bits.
    pub flags: u32,
    /// MAC of the pod's interface (destination MAC of frames into the pod).
    pub pod_mac: [u8; 6],
    /// MAC of the host-side veth (source MAC of frames into the pod, answer to ARP).
    pub host_mac: [u8; 6],
}

/// [`EndpointInfo::flags`]: the endpoint is set up and may receive redirected traffic.
pub const ENDPOINT_F_ACTIVE: u32 = 1;

/// [`EndpointInfo::flags`]: the endpoint's programs send its traffic for
/// other nodes' pods straight to the network (`from_container` with eBPF
/// host routing), so `from_network` may deliver their answers straight in.
/// (Bits 1 to 3: [`ENDPOINT_F_INGRESS_PACED`] and the isolation bits of
/// [`policy`].) A daemon of an earlier release rewrites every entry without
/// it at start (and its programs never send to the network directly), so
/// after a downgrade the `from_network` left on the uplink delivers
/// nothing and both directions go through the host stack again.
pub const ENDPOINT_F_PEER_ROUTED: u32 = 1 << 4;

/// Why a program dropped a frame (index into [`EndpointCounters::drops`]).
///
/// With the `user` feature, `DropReason::iter()` lists every reason and
/// `<&'static str>::from(reason)` names it in snake case (`malformed_ipv4`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "names", derive(strum::EnumIter, strum::IntoStaticStr))]
#[cfg_attr(feature = "names", strum(serialize_all = "snake_case"))]
pub enum DropReason {
    /// Shorter than an Ethernet header.
    MalformedEthernet = 0,
    /// Truncated IPv4 header, bad version or header length.
    MalformedIpv4 = 1,
    /// Truncated or unexpected ARP packet for IPv4 over Ethernet.
    MalformedArp = 2,
    /// A packet could not be rewritten (store or redirect helper failed).
    RewriteFailed = 3,
    /// An IPv4 packet whose source is not one of the sending pod's addresses.
    SpoofedSource = 4,
    /// An ARP packet whose sender address is not one of the sending pod's
    /// addresses (gratuitous ARP for another address included).
    SpoofedArp = 5,
    /// Truncated IPv6 header, bad version, or a payload length beyond the
    /// end of the frame.
    MalformedIpv6 = 6,
    /// An IPv6 extension header that runs past the end of the packet, a
    /// Hop-by-Hop header anywhere but first, or a chain longer than the
    /// programs walk ([`MAX_IPV6_EXT_HEADERS`]).
    MalformedIpv6Ext = 7,
    /// An IPv6 packet whose source is neither one of the sending pod's
    /// addresses nor its own link-local address (the EUI-64 one of its MAC,
    /// the only one the plugin gives it), nor `::` for neighbour discovery
    /// and MLD.
    SpoofedSourceIpv6 = 8,
    /// Neighbour discovery claiming an address that is not the pod's (an
    /// advertisement or a duplicate-address probe for another address, its
    /// own link-local one excepted), or a router advertisement or redirect
    /// from a pod.
    SpoofedNdp = 9,
    /// A neighbour solicitation or advertisement that is truncated, or whose
    /// hop limit is not 255 or code not 0 (RFC 4861 7.1).
    MalformedNdp = 10,
    /// A frame of a bandwidth-limited pod that would have waited longer than
    /// its pacer's horizon (see [`Pacer`]), or, from an egress-limited pod,
    /// beyond its host-side policer's bucket.
    RateLimited = 11,
    /// An ARP packet for anything but IPv4 over Ethernet: a hardware type
    /// other than Ethernet (IEEE 802, type 6, which Linux accepts on
    /// Ethernet devices too, included) or a protocol type other than IPv4.
    UnsupportedArp = 12,
    /// A frame from a pod whose EtherType is none of IPv4, IPv6 and ARP
    /// (LLDP, EAPOL, PPPoE, MPLS, an 802.3 length), or that carries a VLAN
    /// tag.
    UnsupportedEtherType = 13,
    /// A packet into an endpoint whose ingress a NetworkPolicy isolates,
    /// that no allow entry of its ([`policy::POLICY_MAP`]) covers and that
    /// answers no flow it opened. Also what an entry missing because the
    /// map was full costs (the daemon counts the entries it could not write).
    PolicyDeniedIngress = 14,
    /// A packet out of an endpoint whose egress a NetworkPolicy isolates,
    /// that no allow entry of its covers and that answers no flow opened
    /// towards it.
    PolicyDeniedEgress = 15,
}

/// Number of [`DropReason`]s in use.
pub const DROP_REASONS: usize = 16;
/// Slots in [`EndpointCounters::drops`]: room for later reasons without a
/// new counters layout.
pub const DROP_SLOTS: usize = 16;
// Every reason has its slot.
const _: () = assert!(DROP_REASONS <= DROP_SLOTS);

/// Spare `u64` slots in [`EndpointCounters`] for later counters. There were
/// 4; the IPv6 counters took 3 of them and `host_flows_started` the last, so
/// the layout (and the size of the pinned counters map's values) stayed the
/// same. Later counters need a new layout.
pub const SPARE_COUNTERS: usize = 0;

/// How many IPv6 extension headers the programs walk before they give up on
/// a packet ([`DropReason::MalformedIpv6Ext`]).
pub const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Per-endpoint counters, one value per CPU (user space sums them).
///
/// The packet, byte and redirect counters cover both families; the `ipv6_*`
/// ones are the IPv6 share of them (IPv4's is the difference).
///
/// With the `user` feature it serializes with serde under its field names,
/// which are the names readers (the daemon's API, its metrics) show.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "names", derive(serde::Serialize))]
pub struct EndpointCounters {
    /// Frames received from the pod (ingress of the host veth).
    pub from_pod_packets: u64,
    /// Bytes received from the pod.
    pub from_pod_bytes: u64,
    /// Frames delivered to the pod (redirected by eBPF or sent by the host stack).
    pub to_pod_packets: u64,
    /// Bytes delivered to the pod.
    pub to_pod_bytes: u64,
    /// Frames from this pod redirected straight into another local pod.
    pub redirected_packets: u64,
    /// ARP requests from this pod answered by the program.
    pub arp_replies: u64,
    /// Frames from this pod to another local pod that went to the host stack
    /// instead of being redirected, because the host stack handled their flow
    /// (found in the host-stack flows map).
    pub host_stack_flow_packets: u64,
    /// Host-stack flows recorded by `to_container` for traffic to this pod
    /// (new entries in the host-stack flows map).
    pub host_flows_recorded: u64,
    /// Neighbour solicitations from this pod answered by the program.
    pub ndp_replies: u64,
    /// IPv6 frames received from the pod (counted in `from_pod_packets` too).
    pub ipv6_from_pod_packets: u64,
    /// IPv6 frames from this pod redirected into another local pod (counted
    /// in `redirected_packets` too).
    pub ipv6_redirected_packets: u64,
    /// Host-stack flows this pod started (its frames the host stack
    /// delivered to another local pod, not as an answer): new entries in its
    /// own flows table, which holds [`MAX_HOST_FLOWS_PER_ENDPOINT`]. Past
    /// that many, each new one evicted one of this pod's own older entries
    /// (or an entry of a flow it started is missing: a flood of its own).
    pub host_flows_started: u64,
    /// Reserved for later counters (none left).
    pub spare: [u64; SPARE_COUNTERS],
    /// Frames dropped, by [`DropReason`] (slots past [`DROP_REASONS`] are zero).
    pub drops: [u64; DROP_SLOTS],
}

impl EndpointCounters {
    /// Adds `other` field by field (summing per-CPU values).
    pub fn add(&mut self, other: &EndpointCounters) {
        self.from_pod_packets += other.from_pod_packets;
        self.from_pod_bytes += other.from_pod_bytes;
        self.to_pod_packets += other.to_pod_packets;
        self.to_pod_bytes += other.to_pod_bytes;
        self.redirected_packets += other.redirected_packets;
        self.arp_replies += other.arp_replies;
        self.host_stack_flow_packets += other.host_stack_flow_packets;
        self.host_flows_recorded += other.host_flows_recorded;
        self.ndp_replies += other.ndp_replies;
        self.ipv6_from_pod_packets += other.ipv6_from_pod_packets;
        self.ipv6_redirected_packets += other.ipv6_redirected_packets;
        self.host_flows_started += other.host_flows_started;
        for (d, o) in self.spare.iter_mut().zip(other.spare.iter()) {
            *d += *o;
        }
        for (d, o) in self.drops.iter_mut().zip(other.drops.iter()) {
            *d += *o;
        }
    }

    /// All drops, whatever the reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// The drops counted under `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops.get(reason as usize).copied().unwrap_or(0)
    }
}

/// [`FlowKey::family`] of an IPv4 flow (addresses in the first 4 bytes).
pub const FLOW_FAMILY_IPV4: u8 = 4;
/// [`FlowKey::family`] of an IPv6 flow.
pub const FLOW_FAMILY_IPV6: u8 = 6;

/// Key of the host-stack flows map: one direction of a flow, as the packet
/// carries it (addresses and ports in network order).
///
/// The map holds the flows between two pods of this node that the host stack
/// handled: `to_container` sees only what the host stack delivers to a pod
/// (peer-redirected frames skip it), and records the direction the pod will
/// answer in (source and destination swapped). `from_container`, before it
/// redirects a frame to a local pod, looks the frame up: a hit means the
/// host stack handled the flow (DNAT by kube-proxy or portmap, masquerade, a
/// firewall's decision), so this frame goes to the host stack too and
/// conntrack sees both directions.
///
/// Whose table an entry goes into (the flows map holds one LRU table per
/// endpoint, [`MAX_HOST_FLOWS_PER_ENDPOINT`] entries each): the table of the
/// pod that *started* the flow, the sender of the frame the host stack
/// delivered. A frame that answers a flow the receiving pod started (its key
/// is in the receiver's own table) records nothing. So the only entries in a
/// pod's table are flows whose first frame it sent itself: another pod
/// cannot fill it, not even by making it answer (a SYN to a closed port
/// draws a reset, which is an answer). A frame is looked up in the table of
/// its destination (the destination started the flow: the entry has the
/// frame's own direction) and in its sender's (the sender started it: the
/// entry has the answer direction, the frame's reversed).
///
/// Ports: TCP, UDP and SCTP their ports; ICMP echo the identifier in both
/// ([`FlowKey::sport`] = [`FlowKey::dport`], so the key of the request
/// reversed is the key of the reply); any other protocol 0. One layout for
/// both families (IPv4 in the first 4 bytes of each address, the rest zero).
///
/// Aligned to 8 (its 40 bytes and their order are unchanged): the eBPF
/// target has no unaligned stores, so an align-1 key was built, copied and
/// reversed on the programs' stack one byte at a time; aligned, it takes
/// whole words.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// Source address.
    pub saddr: [u8; 16],
    /// Destination address.
    pub daddr: [u8; 16],
    /// Source port (network order), or the ICMP echo identifier.
    pub sport: [u8; 2],
    /// Destination port (network order), or the ICMP echo identifier.
    pub dport: [u8; 2],
    /// IP protocol number.
    pub proto: u8,
    /// [`FLOW_FAMILY_IPV4`] or [`FLOW_FAMILY_IPV6`].
    pub family: u8,
    /// Zero.
    pub pad: [u8; 2],
}

impl FlowKey {
    /// The key of an IPv4 flow.
    pub const fn ipv4(
        saddr: [u8; 4],
        daddr: [u8; 4],
        sport: [u8; 2],
        dport: [u8; 2],
        proto: u8,
    ) -> Self {
        FlowKey {
            saddr: ipv4_field(saddr),
            daddr: ipv4_field(daddr),
            sport,
            dport,
            proto,
            family: FLOW_FAMILY_IPV4,
            pad: [0; 2],
        }
    }

    /// The key of an IPv6 flow.
    pub const fn ipv6(
        saddr: [u8; 16],
        daddr: [u8; 16],
        sport: [u8; 2],
        dport: [u8; 2],
        proto: u8,
    ) -> Self {
        FlowKey {
            saddr,
            daddr,
            sport,
            dport,
            proto,
            family: FLOW_FAMILY_IPV6,
            pad: [0; 2],
        }
    }

    /// The other direction of the same flow.
    pub const fn reversed(&self) -> Self {
        FlowKey {
            saddr: self.daddr,
            daddr: self.saddr,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
            family: self.family,
            pad: [0; 2],
        }
    }
}

/// An IPv4 address as a 16-byte key field: its 4 bytes, then zeros.
///
/// Built as one 128-bit value (little-endian both ways, so the bytes are the
/// same on any host) rather than by writing 4 bytes into a zeroed array:
/// for the eBPF programs, LLVM turns such zeroing into a call of a byte-loop
/// `memset` subprogram (bpf-linker has it lower every memset to a call),
/// which was a third of `from_container`'s time; a whole value is stored
/// with plain word stores instead.
#[inline(always)]
pub const fn ipv4_field(addr: [u8; 4]) -> [u8; 16] {
    (u32::from_le_bytes(addr) as u128).to_le_bytes()
}

/// Value of the host-stack flows map.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowState {
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) when the host stack last
    /// delivered a frame of this flow, at [`HOST_FLOW_REFRESH_NS`] granularity.
    pub last_seen_ns: u64,
    /// Ifindex of the host veth the host stack delivered the flow on.
    pub ifindex: u32,
    /// Reserved; zero.
    pub flags: u32,
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain `#[repr(C)]` data without implicit padding or pointers;
    // every bit pattern is valid.
    unsafe impl aya::Pod for super::EndpointKey {}
    // SAFETY: as above (16 octets).
    unsafe impl aya::Pod for super::Endpoint6Key {}
    // SAFETY: as above (4 + 4 + 6 + 6 = 20 bytes, alignment 4, no padding).
    unsafe impl aya::Pod for super::EndpointInfo {}
    // SAFETY: as above (only u64 fields).
    unsafe impl aya::Pod for super::EndpointCounters {}
    // SAFETY: as above (16 + 16 + 2 + 2 + 1 + 1 + 2 = 40 bytes, alignment 8).
    unsafe impl aya::Pod for super::FlowKey {}
    // SAFETY: as above (8 + 4 + 4 = 16 bytes, alignment 8).
    unsafe impl aya::Pod for super::FlowState {}
    // SAFETY: as above (4 + 4 bytes).
    unsafe impl aya::Pod for super::layouts::PinsMark {}
    // SAFETY: as above (one u32).
    unsafe impl aya::Pod for super::peers::PeerPodsValue {}
    // SAFETY: as above (only u64 fields).
    unsafe impl aya::Pod for super::peers::NodeCounters {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(core::mem::size_of::<EndpointKey>(), 4);
        assert_eq!(core::mem::size_of::<Endpoint6Key>(), 16);
        assert_eq!(core::mem::size_of::<EndpointInfo>(), 20);
        assert_eq!(
            core::mem::size_of::<EndpointCounters>(),
            8 * (12 + SPARE_COUNTERS + DROP_SLOTS)
        );
        // The size pinned maps were created with: the IPv6 counters live in
        // what were spare slots.
        assert_eq!(core::mem::size_of::<EndpointCounters>(), 224);
        assert_eq!(core::mem::offset_of!(EndpointCounters, drops), 96);
        assert_eq!(core::mem::size_of::<FlowKey>(), 40);
        assert_eq!(core::mem::align_of::<FlowKey>(), 8);
        assert_eq!(core::mem::offset_of!(FlowKey, daddr), 16);
        assert_eq!(core::mem::offset_of!(FlowKey, sport), 32);
        assert_eq!(core::mem::offset_of!(FlowKey, pad), 38);
        assert_eq!(core::mem::size_of::<FlowState>(), 16);
        assert_eq!(core::mem::size_of::<peers::PeerPodsValue>(), 4);
        assert_eq!(core::mem::size_of::<peers::NodeCounters>(), 128);
    }

    #[test]
    fn the_last_drop_reason_is_counted_by_drop_reasons() {
        assert_eq!(DropReason::PolicyDeniedEgress as usize, DROP_REASONS - 1);
        assert_eq!(DropReason::UnsupportedEtherType as usize, 13);
        // Reasons keep their slots across versions (pinned counters).
        assert_eq!(DropReason::SpoofedArp as usize, 5);
        assert_eq!(DropReason::MalformedNdp as usize, 10);
        assert_eq!(DropReason::RateLimited as usize, 11);
        assert_eq!(DropReason::UnsupportedArp as usize, 12);
    }

    #[test]
    fn a_reversed_flow_key_is_the_answer_direction() {
        let request = FlowKey::ipv4([10, 0, 0, 1], [10, 0, 0, 2], [0x9c, 0x40], [0, 80], 6);
        let reply = request.reversed();
        assert_eq!(reply.saddr[..4], [10, 0, 0, 2]);
        assert_eq!(reply.daddr[..4], [10, 0, 0, 1]);
        assert_eq!(reply.sport, [0, 80]);
        assert_eq!(reply.dport, [0x9c, 0x40]);
        assert_eq!(reply.proto, 6);
        assert_eq!(reply.family, FLOW_FAMILY_IPV4);
        assert_eq!(reply.saddr[4..], [0; 12]);
        assert_eq!(reply.reversed(), request);
        // ICMP echo: the identifier in both ports, so request and reply meet.
        let echo = FlowKey::ipv4([10, 0, 0, 1], [10, 0, 0, 2], [0, 7], [0, 7], 1);
        assert_eq!(echo.reversed().sport, echo.sport);
    }

    #[test]
    fn an_ipv4_key_field_is_the_address_then_zeros() {
        let mut want = [0u8; 16];
        want[..4].copy_from_slice(&[10, 1, 2, 254]);
        assert_eq!(ipv4_field([10, 1, 2, 254]), want);
        let key = FlowKey::ipv4([10, 1, 2, 254], [192, 168, 0, 1], [1, 2], [3, 4], 17);
        assert_eq!(key.saddr, want);
        assert_eq!(key.daddr[..4], [192, 168, 0, 1]);
        assert_eq!(key.daddr[4..], [0; 12]);
        assert_eq!((key.sport, key.dport, key.proto), ([1, 2], [3, 4], 17));
        assert_eq!((key.family, key.pad), (FLOW_FAMILY_IPV4, [0; 2]));
    }

    #[test]
    fn an_ipv6_flow_key_holds_whole_addresses_and_its_family() {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = 2;
        let mut b = a;
        b[15] = 3;
        let request = FlowKey::ipv6(a, b, [0x9c, 0x40], [0, 80], 6);
        assert_eq!(request.family, FLOW_FAMILY_IPV6);
        let reply = request.reversed();
        assert_eq!((reply.saddr, reply.daddr), (b, a));
        assert_eq!((reply.sport, reply.dport), ([0, 80], [0x9c, 0x40]));
        assert_eq!(reply.family, FLOW_FAMILY_IPV6);
        // The same addresses of the other family are another flow.
        let v4 = FlowKey::ipv4([0xfd, 0, 0, 0], [0xfd, 0, 0, 0], [0; 2], [0; 2], 6);
        assert_ne!(v4.family, request.family);
    }

    #[test]
    fn counters_add_sums_every_field() {
        let mut a = EndpointCounters {
            from_pod_packets: 1,
            host_stack_flow_packets: 4,
            ..Default::default()
        };
        a.drops[0] = 1;
        a.drops[3] = 2;
        let mut b = EndpointCounters {
            from_pod_packets: 2,
            to_pod_bytes: 5,
            host_stack_flow_packets: 1,
            host_flows_recorded: 7,
            ..Default::default()
        };
        b.drops[1] = 1;
        b.drops[3] = 1;
        b.drops[DropReason::SpoofedSource as usize] = 9;
        b.host_flows_started = 2;
        b.ndp_replies = 3;
        b.ipv6_from_pod_packets = 4;
        b.ipv6_redirected_packets = 5;
        a.ndp_replies = 1;
        a.add(&b);
        assert_eq!(a.ndp_replies, 4);
        assert_eq!(a.ipv6_from_pod_packets, 4);
        assert_eq!(a.ipv6_redirected_packets, 5);
        assert_eq!(a.from_pod_packets, 3);
        assert_eq!(a.to_pod_bytes, 5);
        assert_eq!(a.host_stack_flow_packets, 5);
        assert_eq!(a.host_flows_recorded, 7);
        assert_eq!(a.host_flows_started, 2);
        assert_eq!(a.drops[..5], [1, 1, 0, 3, 9]);
        assert_eq!(a.dropped(DropReason::SpoofedSource), 9);
        assert_eq!(a.total_drops(), 14);
    }
}
