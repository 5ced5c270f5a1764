//! Per-endpoint counters. Entries are created by user space at attach time;
//! a missing entry (endpoint not managed by Sarena) is simply not counted.

use sarena_common::DropReason;

use crate::SARENA_COUNTERS;

#[inline(always)]
fn with(ifindex: u32, f: impl FnOnce(&mut sarena_common::EndpointCounters)) {
    if let Some(c) = SARENA_COUNTERS.get_ptr_mut(ifindex) {
        // SAFETY: a per-CPU value, only touched by this CPU while the program runs.
        f(unsafe { &mut *c });
    }
}

/// A frame sent by the pod behind `ifindex`.
#[inline(always)]
pub fn from_pod(ifindex: u32, len: u32) {
    with(ifindex, |c| {
        c.from_pod_packets += 1;
        c.from_pod_bytes += u64::from(len);
    });
}

/// A frame delivered to the pod behind `ifindex`.
#[inline(always)]
pub fn to_pod(ifindex: u32, len: u32) {
    with(ifindex, |c| {
        c.to_pod_packets += 1;
        c.to_pod_bytes += u64::from(len);
    });
}

/// A frame from the pod behind `ifindex` redirected into another pod.
#[inline(always)]
pub fn redirected(ifindex: u32) {
    with(ifindex, |c| c.redirected_packets += 1);
}

/// A frame from the pod behind `ifindex` to another local pod left to the
/// host stack because the host stack handled its flow.
#[inline(always)]
pub fn host_stack_flow(ifindex: u32) {
    with(ifindex, |c| c.host_stack_flow_packets += 1);
}

/// A new host-stack flow recorded for traffic to the pod behind `ifindex`.
#[inline(always)]
pub fn host_flow_recorded(ifindex: u32) {
    with(ifindex, |c| c.host_flows_recorded += 1);
}

/// A new host-stack flow started by the pod behind `ifindex` (an entry in
/// its own flows table).
#[inline(always)]
pub fn host_flow_started(ifindex: u32) {
    with(ifindex, |c| c.host_flows_started += 1);
}

/// An ARP request from the pod behind `ifindex` answered by the program.
#[inline(always)]
pub fn arp_reply(ifindex: u32) {
    with(ifindex, |c| c.arp_replies += 1);
}

/// A neighbour solicitation from the pod behind `ifindex` answered by the program.
#[inline(always)]
pub fn ndp_reply(ifindex: u32) {
    with(ifindex, |c| c.ndp_replies += 1);
}

/// An IPv6 frame sent by the pod behind `ifindex` (also counted by [`from_pod`]).
#[inline(always)]
pub fn ipv6_from_pod(ifindex: u32) {
    with(ifindex, |c| c.ipv6_from_pod_packets += 1);
}

/// An IPv6 frame from the pod behind `ifindex` redirected into another pod
/// (also counted by [`redirected`]).
#[inline(always)]
pub fn ipv6_redirected(ifindex: u32) {
    with(ifindex, |c| c.ipv6_redirected_packets += 1);
}

/// A frame dropped on the interface `ifindex`.
#[inline(always)]
pub fn dropped(ifindex: u32, reason: DropReason) {
    with(ifindex, |c| {
        // The index is a constant per call site; `get_mut` keeps the access
        // bounds-checked for the verifier.
        if let Some(d) = c.drops.get_mut(reason as usize) {
            *d += 1;
        }
    });
}
