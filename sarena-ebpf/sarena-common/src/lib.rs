//! Map layouts shared by Sarena's eBPF programs and user space.
//!
//! Every type is `#[repr(C)]` with explicit padding so that kernel and user
//! space agree byte for byte. With the `user` feature the types implement
//! `aya::Pod` so they can be used as map keys and values from user space.
#![no_std]

/// Name of the endpoint map: [`EndpointKey`] → [`EndpointInfo`] (hash, pinned).
pub const ENDPOINTS_MAP: &str = "SARENA_ENDPOINTS";
/// Name of the counters map: host ifindex (`u32`) → [`EndpointCounters`] (per-CPU hash, pinned).
pub const COUNTERS_MAP: &str = "SARENA_COUNTERS";
/// Name of the program on the ingress of each pod's host-side veth.
pub const FROM_CONTAINER_PROG: &str = "from_container";
/// Name of the program on the egress of each pod's host-side veth.
pub const TO_CONTAINER_PROG: &str = "to_container";
/// Capacity of the endpoint map (pod addresses on one node).
pub const MAX_ENDPOINTS: u32 = 16384;

/// Key of the endpoint map: an IPv4 pod address.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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

/// Value of the endpoint map: where a pod address lives on this node.
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

/// Why a program dropped a frame (index into [`EndpointCounters::drops`]).
///
/// With the `user` feature, `DropReason::iter()` lists every reason and
/// `<&'static str>::from(reason)` names it in snake case (`malformed_ipv4`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(strum::EnumIter, strum::IntoStaticStr))]
#[cfg_attr(feature = "user", strum(serialize_all = "snake_case"))]
pub enum DropReason {
    /// Shorter than an Ethernet header.
    MalformedEthernet = 0,
    /// Truncated IPv4 header, bad version or header length.
    MalformedIpv4 = 1,
    /// Truncated or unexpected ARP packet for IPv4 over Ethernet.
    MalformedArp = 2,
    /// A packet could not be rewritten (store or redirect helper failed).
    RewriteFailed = 3,
}

/// Number of [`DropReason`]s.
pub const DROP_REASONS: usize = 4;

/// Per-endpoint counters, one value per CPU (user space sums them).
///
/// With the `user` feature it serializes with serde under its field names,
/// which are the names readers (the daemon's API, its metrics) show.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "user", derive(serde::Serialize))]
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
    /// Frames dropped, by [`DropReason`].
    pub drops: [u64; DROP_REASONS],
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
        for (d, o) in self.drops.iter_mut().zip(other.drops.iter()) {
            *d += *o;
        }
    }

    /// All drops, whatever the reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain `#[repr(C)]` data without implicit padding or pointers;
    // every bit pattern is valid.
    unsafe impl aya::Pod for super::EndpointKey {}
    // SAFETY: as above (4 + 4 + 6 + 6 = 20 bytes, alignment 4, no padding).
    unsafe impl aya::Pod for super::EndpointInfo {}
    // SAFETY: as above (only u64 fields).
    unsafe impl aya::Pod for super::EndpointCounters {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(core::mem::size_of::<EndpointKey>(), 4);
        assert_eq!(core::mem::size_of::<EndpointInfo>(), 20);
        assert_eq!(
            core::mem::size_of::<EndpointCounters>(),
            8 * (6 + DROP_REASONS)
        );
    }

    #[test]
    fn counters_add_sums_every_field() {
        let mut a = EndpointCounters {
            from_pod_packets: 1,
            drops: [1, 0, 0, 2],
            ..Default::default()
        };
        let b = EndpointCounters {
            from_pod_packets: 2,
            to_pod_bytes: 5,
            drops: [0, 1, 0, 1],
            ..Default::default()
        };
        a.add(&b);
        assert_eq!(a.from_pod_packets, 3);
        assert_eq!(a.to_pod_bytes, 5);
        assert_eq!(a.drops, [1, 1, 0, 3]);
        assert_eq!(a.total_drops(), 5);
    }
}
