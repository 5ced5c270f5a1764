//! Per-endpoint counters. Entries are created by user space at attach time;
//! a missing entry (endpoint not managed by Sarena) is simply not counted.

use aya_ebpf::programs::TcContext;
use sarena_common::{DropReason, EndpointCounters};

use crate::{SARENA_COUNTERS, events};

/// One endpoint's counters (this CPU's), looked up once. `from_container`
/// counts several things of the same sender per frame (the frame, its
/// family, its redirect or its drop), and every lookup of the per-CPU hash
/// is a helper call that hashes the key again: it looks its sender's up
/// once ([`Counters::of`]) and counts through that.
#[derive(Clone, Copy)]
pub struct Counters(Option<*mut EndpointCounters>);

impl Counters {
    /// The counters of the endpoint behind the host veth `ifindex` (none
    /// when it has no entry: nothing is counted then).
    #[inline(always)]
    pub fn of(ifindex: u32) -> Self {
        Counters(SARENA_COUNTERS.get_ptr_mut(ifindex))
    }

    #[inline(always)]
    fn with(self, f: impl FnOnce(&mut EndpointCounters)) {
        if let Some(c) = self.0 {
            // SAFETY: a per-CPU value, only touched by this CPU while the
            // program runs.
            f(unsafe { &mut *c });
        }
    }

    /// A frame the pod sent.
    #[inline(always)]
    pub fn sent(self, len: u32) {
        self.with(|c| {
            c.from_pod_packets += 1;
            c.from_pod_bytes += u64::from(len);
        });
    }

    /// A frame delivered to the pod.
    #[inline(always)]
    pub fn to_pod(self, len: u32) {
        self.with(|c| {
            c.to_pod_packets += 1;
            c.to_pod_bytes += u64::from(len);
        });
    }

    /// A frame from the pod redirected into another pod or out of the node.
    #[inline(always)]
    pub fn redirected(self) {
        self.with(|c| c.redirected_packets += 1);
    }

    /// A frame from the pod to another local pod left to the host stack
    /// because the host stack handled its flow.
    #[inline(always)]
    pub fn host_stack_flow(self) {
        self.with(|c| c.host_stack_flow_packets += 1);
    }

    /// A new host-stack flow recorded for traffic to the pod.
    #[inline(always)]
    pub fn host_flow_recorded(self) {
        self.with(|c| c.host_flows_recorded += 1);
    }

    /// A new host-stack flow started by the pod (an entry in its own flows
    /// table).
    #[inline(always)]
    pub fn host_flow_started(self) {
        self.with(|c| c.host_flows_started += 1);
    }

    /// An ARP request from the pod answered by the program.
    #[inline(always)]
    pub fn arp_reply(self) {
        self.with(|c| c.arp_replies += 1);
    }

    /// A neighbour solicitation from the pod answered by the program.
    #[inline(always)]
    pub fn ndp_reply(self) {
        self.with(|c| c.ndp_replies += 1);
    }

    /// An IPv6 frame the pod sent (also counted by [`Counters::sent`]).
    #[inline(always)]
    pub fn ipv6_from_pod(self) {
        self.with(|c| c.ipv6_from_pod_packets += 1);
    }

    /// An IPv6 frame from the pod redirected into another pod (also counted
    /// by [`Counters::redirected`]).
    #[inline(always)]
    pub fn ipv6_redirected(self) {
        self.with(|c| c.ipv6_redirected_packets += 1);
    }

    /// A frame dropped on the endpoint's veth (counted here only; see
    /// [`dropped`] for the node's count and the event).
    #[inline(always)]
    pub fn dropped(self, reason: DropReason) {
        self.with(|c| {
            // The index is a constant per call site; `get_mut` keeps the
            // access bounds-checked for the verifier.
            if let Some(d) = c.drops.get_mut(reason as usize) {
                *d += 1;
            }
        });
    }
}

/// A frame delivered to the pod behind `ifindex`.
#[inline(always)]
pub fn to_pod(ifindex: u32, len: u32) {
    Counters::of(ifindex).to_pod(len);
}

/// A frame dropped on the endpoint behind `ifindex` in `direction`
/// (`sarena_common::events::DIRECTION_*`): counted on the endpoint and the
/// node, and an event when drop events are on ([`events`]).
#[inline(always)]
pub fn dropped(ctx: &TcContext, ifindex: u32, direction: u8, reason: DropReason) {
    Counters::of(ifindex).dropped(reason);
    events::dropped(ctx, ifindex, direction, reason);
}
