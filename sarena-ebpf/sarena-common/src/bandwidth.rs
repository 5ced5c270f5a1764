//! Pod bandwidth limits: the pacing map's layout and the names and marks the
//! programs and user space share.
//!
//! A limited pod has an entry in [`BANDWIDTH_MAP`], keyed by its host veth's
//! ifindex, with one [`Pacer`] per direction. The programs give each frame an
//! earliest departure time (`skb->tstamp`) from its direction's pacer, and an
//! `fq` qdisc on the device the frame leaves through holds it until then:
//!
//! - to the pod (ingress limit): `fq` as the host veth's root qdisc and
//!   [`TO_CONTAINER_BW_PROG`] on its egress hook; frames redirected from
//!   another local pod reach that hook too (`from_container` redirects to
//!   the veth's egress instead of its peer when the destination carries
//!   [`ENDPOINT_F_INGRESS_PACED`], with [`REDIRECT_MARK`] on them);
//! - from the pod (egress limit), paced: `fq` as the root qdisc of the pod's
//!   own interface, in the pod's netns, and [`POD_EGRESS_PROG`] on its
//!   egress hook, loaded once per pod with [`POD_HOST_IFINDEX_GLOBAL`] set
//!   to the host veth's ifindex (the pod-side device has no name or index
//!   that is unique on the node, and what the pod writes into its frames
//!   cannot be trusted);
//! - from the pod (egress limit), enforced: a policer (a pacer without a
//!   horizon: what is beyond its bucket is dropped) in `from_container`, on
//!   the host veth's ingress, under the key [`policer_key`] of the host
//!   ifindex. The pod side lives in the pod's netns, where a process with
//!   `CAP_NET_ADMIN` can remove it; the host veth's ingress sees every frame
//!   the pod sends, whatever path it takes next (redirected into a local
//!   pod, the host stack, a Service), and the pod cannot reach it. Its bucket
//!   is deeper than the pod-side pacer's, so traffic the pacer let through
//!   passes it; it only drops what a pod sends past (or without) its pacer.
//!
//! On a kernel without `sch_fq` nothing can hold a frame: user space then
//! writes pacers without a horizon and a deeper bucket, and the same
//! programs police (drop what is beyond the bucket) instead of pacing
//! (`ShapingMode` in sarena-core's eBPF dataplane).
//!
//! Unlimited pods have no entry, no `fq` and run neither pacing program;
//! `from_container` looks their policer key up and finds nothing.
//!
//! The policer entries share [`BANDWIDTH_MAP`] with the pacers (same key
//! and value types; the key space is split by [`POLICER_KEY_BIT`], which no
//! ifindex has): its pinned layout is unchanged, an earlier generation's
//! programs never look those keys up, and its daemon removes them as
//! unknown. An egress-limited pod takes two of the map's entries.

/// Name of the pacing map: host ifindex (`u32`) → [`BandwidthState`] (hash,
/// pinned); also [`policer_key`] → the host-side policer of an
/// egress-limited pod (its `egress` pacer, without a horizon).
pub const BANDWIDTH_MAP: &str = "SARENA_BANDWIDTH";

/// The bit that sets a host-side policer's key apart from a pacer's in
/// [`BANDWIDTH_MAP`]: ifindexes are positive `i32`s, so no host ifindex has it.
pub const POLICER_KEY_BIT: u32 = 1 << 31;

/// The [`BANDWIDTH_MAP`] key of the host-side policer of the pod behind the
/// host veth `host_ifindex`.
#[inline(always)]
pub const fn policer_key(host_ifindex: u32) -> u32 {
    host_ifindex | POLICER_KEY_BIT
}
/// Name of the program on the egress of an ingress-limited pod's host veth
/// (in place of `to_container`).
pub const TO_CONTAINER_BW_PROG: &str = "to_container_bw";
/// Name of the program on the egress of an egress-limited pod's own
/// interface, inside the pod's netns.
pub const POD_EGRESS_PROG: &str = "pod_egress";
/// Name of the global that [`POD_EGRESS_PROG`] reads its pod's host veth
/// ifindex from (set at load time, one program instance per pod).
pub const POD_HOST_IFINDEX_GLOBAL: &str = "POD_HOST_IFINDEX";

/// [`EndpointInfo::flags`](crate::EndpointInfo::flags): traffic to this pod
/// is paced on its host veth's egress, so frames redirected to it from
/// another local pod go through that egress (`bpf_redirect`) rather than
/// straight into the pod (`bpf_redirect_peer`).
pub const ENDPOINT_F_INGRESS_PACED: u32 = 2;

/// `skb->mark` of a frame `from_container` redirected to a paced pod's host
/// veth egress, so that [`TO_CONTAINER_BW_PROG`] tells it from a frame
/// the host stack delivers (which it must record in the host-stack flows
/// map). Set only between the two programs, on a path without netfilter,
/// and cleared by the second; marks set by pods never reach the host (a
/// netns crossing clears them). A host firewall rule would have to set this
/// exact value to fool the program.
pub const REDIRECT_MARK: u32 = 0x5a5e_0b01;

/// Capacity of the pacing map (limited pods on one node).
pub const MAX_PACED_ENDPOINTS: u32 = crate::MAX_ENDPOINTS;

/// One direction's token bucket, kept as the time it is empty again.
///
/// A frame of `len` bytes takes `len * 8 * 10^9 / rate_bps` ns of the
/// bucket. Its departure is `max(next_ns, now - burst_ns) + that`: frames
/// within the burst leave at once, later ones are spaced at the rate. A frame
/// whose departure would lie more than `horizon_ns` ahead is dropped (the
/// queue's bound), and does not advance `next_ns`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pacer {
    /// Bits per second; 0 means this direction is not limited.
    pub rate_bps: u64,
    /// How much credit an idle bucket gathers, as time at the rate
    /// (`burst_bits * 10^9 / rate_bps`).
    pub burst_ns: u64,
    /// How far ahead of now a frame may be scheduled.
    pub horizon_ns: u64,
    /// Written by the programs: `bpf_ktime_get_ns` time at which the bucket
    /// is empty again. User space writes 0 (a fresh bucket).
    pub next_ns: u64,
}

/// Nanoseconds per second.
pub const NSEC_PER_SEC: u64 = 1_000_000_000;

/// Frame length [`Pacer::schedule`] counts at most (16 MiB).
const MAX_FRAME_LEN: u64 = 1 << 24;

/// What a [`Pacer`] decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// Within the burst, or no limit: it leaves now.
    Now,
    /// It is held until this `CLOCK_MONOTONIC` time (ns).
    At(u64),
    /// It would wait beyond the horizon: it is dropped.
    Drop,
}

impl Pacer {
    /// The pacer of `rate_bps` bits per second with a burst of `burst_bits`
    /// and `horizon_ns`; `rate_bps` 0 is no limit.
    pub const fn new(rate_bps: u64, burst_bits: u64, horizon_ns: u64) -> Self {
        let burst_ns = match rate_bps {
            0 => 0,
            // u128: burst_bits * 10^9 overflows u64 from 18 Gbit on.
            r => (burst_bits as u128 * NSEC_PER_SEC as u128 / r as u128) as u64,
        };
        Pacer {
            rate_bps,
            burst_ns,
            horizon_ns,
            next_ns: 0,
        }
    }

    /// The token bucket step for a frame of `len` bytes at `now`: when it
    /// may leave. Advances [`Pacer::next_ns`] unless the frame is dropped.
    #[inline(always)]
    pub fn schedule(&mut self, now: u64, len: u64) -> Departure {
        let rate = self.rate_bps;
        if rate == 0 {
            return Departure::Now;
        }
        // No frame is that long (a GSO frame is at most 512 KiB); the bound
        // keeps the product below 2^57.
        let len = if len > MAX_FRAME_LEN {
            MAX_FRAME_LEN
        } else {
            len
        };
        let cost = len * 8 * NSEC_PER_SEC / rate;
        let floor = now.saturating_sub(self.burst_ns);
        let start = if self.next_ns > floor {
            self.next_ns
        } else {
            floor
        };
        let finish = start.saturating_add(cost);
        if finish <= now {
            self.next_ns = finish;
            return Departure::Now;
        }
        if finish - now > self.horizon_ns {
            return Departure::Drop;
        }
        self.next_ns = finish;
        Departure::At(finish)
    }
}

/// Value of the pacing map: both directions of one pod.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BandwidthState {
    /// Traffic to the pod (the CNI `ingressRate`/`ingressBurst`).
    pub ingress: Pacer,
    /// Traffic from the pod (the CNI `egressRate`/`egressBurst`).
    pub egress: Pacer,
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain `#[repr(C)]` data of u64 fields only; every bit pattern is valid.
    unsafe impl aya::Pod for super::Pacer {}
    // SAFETY: as above (two `Pacer`s, 64 bytes, alignment 8).
    unsafe impl aya::Pod for super::BandwidthState {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(core::mem::size_of::<Pacer>(), 32);
        assert_eq!(core::mem::size_of::<BandwidthState>(), 64);
    }

    #[test]
    fn program_names_fit_the_kernels_name_field() {
        // BPF_OBJ_NAME_LEN is 16 with the NUL: longer names come back cut.
        for name in [
            crate::FROM_CONTAINER_PROG,
            crate::TO_CONTAINER_PROG,
            TO_CONTAINER_BW_PROG,
            POD_EGRESS_PROG,
        ] {
            assert!(name.len() <= 15, "{name}");
        }
    }

    #[test]
    fn policer_keys_are_no_ifindex() {
        assert_eq!(policer_key(7), 0x8000_0007);
        assert_eq!(
            policer_key(i32::MAX as u32) & !POLICER_KEY_BIT,
            i32::MAX as u32
        );
        assert!(policer_key(1) > i32::MAX as u32);
    }

    #[test]
    fn the_paced_flag_is_not_the_active_flag() {
        assert_eq!(ENDPOINT_F_INGRESS_PACED & crate::ENDPOINT_F_ACTIVE, 0);
    }

    const T0: u64 = 10 * NSEC_PER_SEC;

    /// `count` frames of `len` bytes arriving `gap_ns` apart from `T0`:
    /// how many left at once, were held, were dropped.
    fn run(pacer: &mut Pacer, count: u64, len: u64, gap_ns: u64) -> (u64, u64, u64) {
        let (mut now_sent, mut held, mut dropped) = (0, 0, 0);
        for i in 0..count {
            match pacer.schedule(T0 + i * gap_ns, len) {
                Departure::Now => now_sent += 1,
                Departure::At(_) => held += 1,
                Departure::Drop => dropped += 1,
            }
        }
        (now_sent, held, dropped)
    }

    #[test]
    fn frames_are_spaced_at_the_rate_after_the_burst() {
        // 8 Mbit/s: a 1000-byte frame takes 1 ms. Burst 4000 bytes.
        let mut p = Pacer::new(8_000_000, 32_000, NSEC_PER_SEC);
        assert_eq!(p.burst_ns, 4_000_000);
        for _ in 0..4 {
            assert_eq!(p.schedule(T0, 1000), Departure::Now);
        }
        assert_eq!(p.schedule(T0, 1000), Departure::At(T0 + 1_000_000));
        assert_eq!(p.schedule(T0, 1000), Departure::At(T0 + 2_000_000));
    }

    #[test]
    fn the_horizon_drops_without_using_the_bucket() {
        // 8 Mbit/s, no burst, 2.5 ms horizon: two frames wait, the third drops.
        let mut p = Pacer::new(8_000_000, 0, 2_500_000);
        assert_eq!(p.schedule(T0, 1000), Departure::At(T0 + 1_000_000));
        assert_eq!(p.schedule(T0, 1000), Departure::At(T0 + 2_000_000));
        assert_eq!(p.schedule(T0, 1000), Departure::Drop);
        assert_eq!(p.next_ns, T0 + 2_000_000);
        // Once the queue drained a little, frames are admitted again.
        assert_eq!(
            p.schedule(T0 + 1_000_000, 1000),
            Departure::At(T0 + 3_000_000)
        );
    }

    #[test]
    fn traffic_below_the_rate_is_never_held() {
        // 1000-byte frames every 2 ms against 8 Mbit/s (1 ms each).
        let mut p = Pacer::new(8_000_000, 8_000, NSEC_PER_SEC);
        assert_eq!(run(&mut p, 100, 1000, 2_000_000), (100, 0, 0));
    }

    #[test]
    fn traffic_above_the_rate_leaves_at_the_rate() {
        // Frames every 0.5 ms against 1 ms each, 2 ms of credit: the first
        // three leave at once (two on credit, the third when its time has
        // come), then every frame is held and departures are 1 ms apart.
        let mut p = Pacer::new(8_000_000, 16_000, NSEC_PER_SEC);
        let (now_sent, held, dropped) = run(&mut p, 1000, 1000, 500_000);
        assert_eq!(dropped, 0);
        assert_eq!(now_sent, 3);
        assert_eq!(held, 997);
        // 1000 frames of 1 ms, 2 of them out of the burst's credit.
        assert_eq!(p.next_ns, T0 + 998 * 1_000_000);
    }

    #[test]
    fn an_idle_bucket_holds_at_most_the_burst() {
        let mut p = Pacer::new(8_000_000, 8_000, NSEC_PER_SEC);
        // After a long silence, 10 frames at once: one burst's worth leaves now.
        p.next_ns = 1;
        assert_eq!(run(&mut p, 10, 1000, 0), (1, 9, 0));
    }

    #[test]
    fn no_rate_means_no_pacing() {
        let mut p = Pacer::new(0, 1000, 0);
        assert_eq!(run(&mut p, 10, 65536, 0), (10, 0, 0));
        assert_eq!(p, Pacer::new(0, 1000, 0));
    }

    #[test]
    fn huge_bursts_and_rates_do_not_overflow() {
        let p = Pacer::new(100_000_000_000, u64::MAX / 2, 1);
        assert_eq!(p.burst_ns, ((u64::MAX / 2) as u128 * 10 / 1000) as u64);
        let mut p = Pacer::new(1, 0, u64::MAX);
        assert_eq!(
            p.schedule(T0, u64::MAX),
            Departure::At(T0 + MAX_FRAME_LEN * 8 * NSEC_PER_SEC)
        );
    }
}
