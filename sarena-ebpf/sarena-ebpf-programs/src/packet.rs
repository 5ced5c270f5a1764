//! Bounds-checked access to the frame.

use core::mem;

use aya_ebpf::programs::TcContext;
use sarena_common::DropReason;

/// Bytes made linear before parsing: Ethernet and the larger of the largest
/// IPv4 header with the first 8 bytes of the L4 header (ports, or ICMP type
/// to identifier), and the IPv6 header with a neighbour solicitation and its
/// link-layer address option (IPv6 extension headers are read with a
/// helper, wherever they are).
const PULL_LEN: u32 = max(14 + 60 + 8, 14 + 40 + 32);

const fn max(a: u32, b: u32) -> u32 {
    if a > b { a } else { b }
}

/// Ifindex of the device the frame is on.
#[inline(always)]
pub fn ifindex(ctx: &TcContext) -> u32 {
    // SAFETY: `skb` is the context pointer the kernel passed in; reading a
    // field of `__sk_buff` is what every TC program does.
    unsafe { (*ctx.skb.skb).ifindex }
}

/// Makes the first bytes of the frame directly accessible when they are not
/// (non-linear skb); a frame whose head already holds them (or all of it)
/// costs no helper call. Failure is harmless: the bounds checks reject the
/// access.
#[inline(always)]
pub fn pull_headers(ctx: &TcContext) {
    let want = if ctx.len() < PULL_LEN {
        ctx.len()
    } else {
        PULL_LEN
    };
    let linear = ctx.data_end().saturating_sub(ctx.data());
    if (linear as u32) < want {
        let _ = ctx.pull_data(want);
    }
}

/// A pointer to a `T` at `offset`, or `reason` when the frame is too short.
#[inline(always)]
pub fn ptr_at<T>(ctx: &TcContext, offset: usize, reason: DropReason) -> Result<*mut T, DropReason> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + offset + mem::size_of::<T>() > end {
        return Err(reason);
    }
    Ok((start + offset) as *mut T)
}

/// The `T` at `offset`: read directly when the frame's linear part holds it,
/// with `bpf_skb_load_bytes` otherwise; `None` past the end of the frame.
/// `T` must be at least 2 bytes: `offset` may vary, and the check for one
/// byte compiles to `start + offset < end`, from which the verifier learns
/// nothing.
#[inline(always)]
pub fn read<T: Copy>(ctx: &TcContext, offset: usize) -> Option<T> {
    let start = ctx.data();
    if start + offset + mem::size_of::<T>() <= ctx.data_end() {
        // SAFETY: bounds-checked against data_end just above; the frame
        // holds no alignment guarantee, hence the unaligned read.
        return Some(unsafe { core::ptr::read_unaligned((start + offset) as *const T) });
    }
    ctx.load(offset).ok()
}

/// TC verdicts as the programs return them. The bindings' integer type
/// differs between targets, hence the casts in one place.
#[allow(clippy::unnecessary_cast)]
pub mod verdict {
    use aya_ebpf::bindings::{TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT};

    /// Continue: to the host stack (ingress) or out of the device (egress).
    pub const OK: i32 = TC_ACT_OK as i32;
    /// Drop.
    pub const SHOT: i32 = TC_ACT_SHOT as i32;
    /// What the redirect helpers return on success.
    pub const REDIRECT: i64 = TC_ACT_REDIRECT as i64;
}
