//! Layouts of generation 1 (release 0.1.0, commit 86d6440) that later
//! generations no longer pin, kept so that the loader can carry their
//! contents over (see [`crate::layouts`]). Frozen: never edit a field here.

use crate::{DropReason, EndpointCounters};

/// Generation 1's counters map: host ifindex (`u32`) → [`EndpointCountersV1`]
/// (per-CPU hash, preallocated, [`crate::MAX_ENDPOINTS`] entries).
pub const COUNTERS_MAP_V1: &str = "SARENA_COUNTERS";

/// Drop slots of [`EndpointCountersV1`]: one per reason it knew
/// ([`DropReason::MalformedEthernet`] to [`DropReason::RewriteFailed`],
/// the same indices as today).
pub const DROP_SLOTS_V1: usize = 4;

/// Generation 1's per-endpoint counters (80 bytes), one value per CPU.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointCountersV1 {
    /// Frames received from the pod.
    pub from_pod_packets: u64,
    /// Bytes received from the pod.
    pub from_pod_bytes: u64,
    /// Frames delivered to the pod.
    pub to_pod_packets: u64,
    /// Bytes delivered to the pod.
    pub to_pod_bytes: u64,
    /// Frames redirected straight into another local pod.
    pub redirected_packets: u64,
    /// ARP requests answered by the program.
    pub arp_replies: u64,
    /// Frames dropped, by reason (0 to 3).
    pub drops: [u64; DROP_SLOTS_V1],
}

impl From<EndpointCountersV1> for EndpointCounters {
    /// Every counter generation 1 had, in the field of the same name (drop
    /// reasons keep their index); the counters it did not have start at zero.
    fn from(old: EndpointCountersV1) -> Self {
        let mut new = EndpointCounters {
            from_pod_packets: old.from_pod_packets,
            from_pod_bytes: old.from_pod_bytes,
            to_pod_packets: old.to_pod_packets,
            to_pod_bytes: old.to_pod_bytes,
            redirected_packets: old.redirected_packets,
            arp_replies: old.arp_replies,
            ..EndpointCounters::default()
        };
        for (slot, count) in new.drops.iter_mut().zip(old.drops) {
            *slot = count;
        }
        new
    }
}

impl From<EndpointCounters> for EndpointCountersV1 {
    /// What generation 1 can hold of today's counters (a downgrade): the
    /// fields it had, and the drops of the reasons it knew.
    fn from(new: EndpointCounters) -> Self {
        let mut old = EndpointCountersV1 {
            from_pod_packets: new.from_pod_packets,
            from_pod_bytes: new.from_pod_bytes,
            to_pod_packets: new.to_pod_packets,
            to_pod_bytes: new.to_pod_bytes,
            redirected_packets: new.redirected_packets,
            arp_replies: new.arp_replies,
            drops: [0; DROP_SLOTS_V1],
        };
        for (slot, count) in old.drops.iter_mut().zip(new.drops) {
            *slot = count;
        }
        old
    }
}

// Generation 1's reasons kept their slots.
const _: () = assert!(DropReason::RewriteFailed as usize == DROP_SLOTS_V1 - 1);

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain `#[repr(C)]` u64 fields, no padding; any bits are valid.
    unsafe impl aya::Pod for super::EndpointCountersV1 {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v1_layout_is_80_bytes() {
        assert_eq!(core::mem::size_of::<EndpointCountersV1>(), 80);
        assert_eq!(core::mem::offset_of!(EndpointCountersV1, drops), 48);
    }

    #[test]
    fn v1_counters_land_in_the_fields_of_their_name() {
        let old = EndpointCountersV1 {
            from_pod_packets: 1,
            from_pod_bytes: 2,
            to_pod_packets: 3,
            to_pod_bytes: 4,
            redirected_packets: 5,
            arp_replies: 6,
            drops: [7, 8, 9, 10],
        };
        let new = EndpointCounters::from(old);
        assert_eq!(
            (new.from_pod_packets, new.from_pod_bytes, new.to_pod_packets),
            (1, 2, 3)
        );
        assert_eq!(
            (new.to_pod_bytes, new.redirected_packets, new.arp_replies),
            (4, 5, 6)
        );
        assert_eq!(new.dropped(DropReason::MalformedEthernet), 7);
        assert_eq!(new.dropped(DropReason::RewriteFailed), 10);
        assert_eq!(new.total_drops(), 34);
        assert_eq!(new.host_stack_flow_packets + new.ndp_replies, 0);
        assert_eq!(new.ipv6_from_pod_packets + new.ipv6_redirected_packets, 0);
    }

    #[test]
    fn a_downgrade_keeps_what_v1_had_and_loses_the_rest() {
        let mut new = EndpointCounters {
            from_pod_packets: 1,
            from_pod_bytes: 2,
            to_pod_packets: 3,
            to_pod_bytes: 4,
            redirected_packets: 5,
            arp_replies: 6,
            ndp_replies: 7,
            ..EndpointCounters::default()
        };
        new.drops[0] = 8;
        new.drops[3] = 9;
        new.drops[4] = 10;
        let old = EndpointCountersV1::from(new);
        assert_eq!(old.drops, [8, 0, 0, 9]);
        assert_eq!(
            (
                old.from_pod_packets,
                old.from_pod_bytes,
                old.to_pod_packets,
                old.to_pod_bytes
            ),
            (1, 2, 3, 4)
        );
        assert_eq!((old.redirected_packets, old.arp_replies), (5, 6));
        // And back: what v1 held comes through unchanged.
        let back = EndpointCounters::from(old);
        assert_eq!(
            (back.from_pod_packets, back.drops[3], back.drops[4]),
            (1, 9, 0)
        );
    }
}
