//! Pod bandwidth limits: earliest-departure-time pacing.
//!
//! A limited pod's pacers (`sarena_common::Pacer`, one per direction, in `SARENA_BANDWIDTH`
//! under its host veth's ifindex) give each frame its departure time in
//! `skb->tstamp`; the `fq` qdisc of the device it leaves through holds it
//! until then. See `sarena_common::BandwidthState` for where each direction
//! is paced, and why unlimited pods pay nothing: they have no entry, no
//! `fq`, and neither of these programs runs for them; `from_container`
//! tests one flag bit it has already loaded.
//!
//! A pod with an egress limit is also policed on the host side: [`police`]
//! runs first in `from_container`, with the same token bucket under the
//! pod's policer key (`sarena_common::policer_key`), where the pod cannot
//! remove it.
//!
//! The pacer's `next_ns` is read and written without atomics: two CPUs
//! pacing the same pod at the same instant may both start from the same
//! value and let one frame through early. The window is a few instructions
//! against the tens of microseconds between frames at the rates pacing is
//! for, and the error never accumulates (the next frame sees the later
//! value).

use aya_ebpf::{
    helpers::{
        bpf_ktime_get_ns,
        generated::{bpf_redirect, bpf_redirect_peer, bpf_skb_set_tstamp},
    },
    programs::TcContext,
};
use sarena_common::{
    Departure, DropReason, ENDPOINT_F_INGRESS_PACED, EndpointInfo, REDIRECT_MARK, policer_key,
};

use crate::{SARENA_BANDWIDTH, counters, packet::verdict};
use sarena_common::events::{DIRECTION_EGRESS, DIRECTION_INGRESS};

/// `BPF_SKB_TSTAMP_DELIVERY_MONO` (`BPF_SKB_CLOCK_MONOTONIC` since 6.11):
/// the frame's `tstamp` is a `CLOCK_MONOTONIC` delivery time. The bindings
/// keep it in an anonymous enum module, hence the copy.
const TSTAMP_DELIVERY_MONO: u32 = 1;

/// Redirects a frame to the local endpoint `dst`: straight into the pod
/// (`bpf_redirect_peer`), or, when traffic to it is paced, out of its host
/// veth (`bpf_redirect` to the device's egress, where `fq` and
/// `to_container_bw` sit), marked as redirected. Returns the helper's
/// verdict (`TC_ACT_REDIRECT` on success).
#[inline(always)]
pub fn redirect(ctx: &TcContext, dst: &EndpointInfo) -> i64 {
    if dst.flags & ENDPOINT_F_INGRESS_PACED != 0 {
        // SAFETY: the context pointer the kernel passed in; `mark` is
        // writable from TC programs.
        unsafe { (*ctx.skb.skb).mark = REDIRECT_MARK };
        // SAFETY: plain helper call; it only records the target device.
        return unsafe { bpf_redirect(dst.ifindex, 0) };
    }
    // SAFETY: as above.
    unsafe { bpf_redirect_peer(dst.ifindex, 0) }
}

/// Whether `from_container` redirected this frame here (see [`redirect`]);
/// clears the mark, which is nobody else's business.
#[inline(always)]
pub fn take_redirect_mark(ctx: &TcContext) -> bool {
    // SAFETY: the context pointer the kernel passed in.
    let skb = unsafe { &mut *ctx.skb.skb };
    if skb.mark != REDIRECT_MARK {
        return false;
    }
    skb.mark = 0;
    true
}

/// Which of a pod's two pacers applies.
#[derive(Clone, Copy)]
pub enum Way {
    /// Traffic to the pod.
    ToPod,
    /// Traffic from the pod.
    FromPod,
}

impl Way {
    /// The direction from the pod's point of view, as events name it.
    #[inline(always)]
    fn direction(self) -> u8 {
        match self {
            Way::ToPod => DIRECTION_INGRESS,
            Way::FromPod => DIRECTION_EGRESS,
        }
    }
}

/// Paces a frame of the pod behind the host veth `ifindex` in direction
/// `way` (see `sarena_common::Pacer::schedule`): `TC_ACT_OK`, its departure
/// time set when it must wait, or `TC_ACT_SHOT` (counted as
/// [`DropReason::RateLimited`]) when it would wait beyond the pacer's
/// horizon. A pod without an entry, or without a limit in that direction,
/// is not paced.
#[inline(always)]
pub fn pace(ctx: &TcContext, ifindex: u32, way: Way) -> i32 {
    match schedule(ctx, ifindex, way) {
        Departure::Now => verdict::OK,
        Departure::At(at) => {
            set_departure(ctx, at);
            verdict::OK
        }
        Departure::Drop => {
            counters::dropped(ctx, ifindex, way.direction(), DropReason::RateLimited);
            verdict::SHOT
        }
    }
}

/// Polices a frame the pod behind the host veth `ifindex` sent, on that
/// veth's ingress: `false` (counted as [`DropReason::RateLimited`]) when it
/// is beyond the bucket of the pod's host-side policer, `true` otherwise and
/// for a pod without one. A policer has no horizon, so its bucket never
/// holds a frame: it passes or drops.
#[inline(always)]
pub fn police(ctx: &TcContext, ifindex: u32) -> bool {
    match schedule(ctx, policer_key(ifindex), Way::FromPod) {
        Departure::Now | Departure::At(_) => true,
        Departure::Drop => {
            counters::dropped(ctx, ifindex, DIRECTION_EGRESS, DropReason::RateLimited);
            false
        }
    }
}

/// The token bucket step for this frame with `way`'s pacer of the
/// [`SARENA_BANDWIDTH`] entry `key`; [`Departure::Now`] without one.
#[inline(always)]
fn schedule(ctx: &TcContext, key: u32, way: Way) -> Departure {
    let Some(state) = SARENA_BANDWIDTH.get_ptr_mut(key) else {
        return Departure::Now;
    };
    // SAFETY: a map value pointer returned by the lookup helper; the
    // unsynchronised update is discussed in the module docs.
    let pacer = unsafe {
        match way {
            Way::ToPod => &mut (*state).ingress,
            Way::FromPod => &mut (*state).egress,
        }
    };
    // SAFETY: reading the clock has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    pacer.schedule(now, u64::from(ctx.len()))
}

/// Sets the frame's delivery time to `at` unless it already carries a later
/// one (TCP's own pacing), as a `CLOCK_MONOTONIC` delivery time: `fq` holds
/// it until then, and the stack neither clears it on a netns crossing nor
/// takes it for a receive timestamp.
#[inline(always)]
fn set_departure(ctx: &TcContext, at: u64) {
    // SAFETY: the context pointer the kernel passed in.
    let skb = unsafe { &*ctx.skb.skb };
    if skb.tstamp_type == TSTAMP_DELIVERY_MONO as u8 && skb.tstamp >= at {
        return;
    }
    // SAFETY: plain helper call on the frame being processed. It refuses
    // frames that are neither IPv4 nor IPv6 (ARP): those leave unpaced.
    let _ = unsafe { bpf_skb_set_tstamp(ctx.skb.skb, at, TSTAMP_DELIVERY_MONO) };
}
