//! Bandwidth limits on the eBPF dataplane: what the pacing map holds for an
//! endpoint, and which program runs on its host veth's egress.
//!
//! See `sarena_common::BandwidthState` for where each direction is paced
//! and [`super::shaping`] for the order in which the pieces are put in
//! place. The same token bucket works in one of two [`ShapingMode`]s,
//! depending on the kernel:
//!
//! - [`ShapingMode::Paced`] (the kernel has `sch_fq`): a frame beyond the
//!   bucket gets a departure time and `fq` holds it until then: shaping,
//!   with TCP in the pod slowed by its own small queues rather than losses.
//!   A frame is never scheduled more than the horizon ahead (dropped
//!   instead): [`BASE_HORIZON_NS`], or twice the time the largest frame
//!   takes at the rate when that is longer, at most [`MAX_HORIZON_NS`]
//!   (below `fq`'s own 10 s horizon). That bounds the queue.
//! - [`ShapingMode::Policed`] (no `sch_fq`, e.g. kernels built for the
//!   reference plugin's tbf and ifb): nothing can hold a frame, so a frame
//!   beyond the bucket is dropped. TCP only reaches the rate through a
//!   policer whose bucket absorbs its bursts, so the bucket is at least
//!   [`POLICER_MIN_BUCKET_NS`] of traffic at the rate (measured: 1 % of the
//!   rate with a 10 ms bucket, 92 % with 200 ms, 97–104 % from 250 ms on).
//!
//! In both, the CNI burst is honoured up to [`MAX_BURST_NS`] of traffic at
//! the rate: the kubelet's runtimes send 2^31-1 bits (about 268 MB)
//! whatever the pod asked for, which would leave a pod idle for a while
//! unlimited for its next several seconds.
//!
//! An egress limit also gets a host-side policer (see
//! `sarena_common::BandwidthState`): the pod-side pacer lives in the pod's
//! netns, where the pod may remove it, so the limit is enforced on the host
//! veth's ingress as well. Its bucket is the [`ShapingMode::Policed`]
//! bucket plus [`HOST_POLICER_SLACK_NS`], in both modes: deeper than the
//! pod-side pacer's, so what the pacer let through passes it even when the
//! frames arrive bunched.

use aya::maps::{HashMap as BpfHashMap, Map, MapData};
use sarena_common::{
    BANDWIDTH_MAP, BandwidthState, ENDPOINT_F_INGRESS_PACED, NSEC_PER_SEC, POLICER_KEY_BIT, Pacer,
    TO_CONTAINER_BW_PROG, TO_CONTAINER_PROG, policer_key,
};

use super::error::{BpfError, is_not_found};
use super::maps::map_error;
use crate::api::{BandwidthLimits, Endpoint};

/// Credit an idle bucket may gather, as time at the rate (1 s).
pub const MAX_BURST_NS: u64 = NSEC_PER_SEC;
/// [`ShapingMode::Paced`]: the least a limited direction may queue (25 ms,
/// the latency the reference plugin gives its tbf qdiscs).
pub const BASE_HORIZON_NS: u64 = 25_000_000;
/// [`ShapingMode::Paced`]: the most a limited direction may queue (5 s).
pub const MAX_HORIZON_NS: u64 = 5 * NSEC_PER_SEC;
/// [`ShapingMode::Policed`]: the smallest bucket, as time at the rate (250 ms).
pub const POLICER_MIN_BUCKET_NS: u64 = 250_000_000;
/// What the host-side policer's bucket holds beyond the pod-side pacer's
/// (50 ms at the rate): room for frames the pacer spaced that reach the
/// host veth closer together.
pub const HOST_POLICER_SLACK_NS: u64 = 50_000_000;
/// The largest frame the horizon must let through: a 64 KiB GSO frame.
const MAX_FRAME_BYTES: u64 = 65_536 + 14;

/// How the token bucket enforces a limit on this kernel (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapingMode {
    /// Frames beyond the bucket wait in `fq` until their departure time.
    Paced,
    /// Frames beyond the bucket are dropped (the kernel has no `fq`).
    Policed,
}

impl ShapingMode {
    /// `paced` or `policed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShapingMode::Paced => "paced",
            ShapingMode::Policed => "policed",
        }
    }
}

/// The pacer of one direction limited to `rate` bits/s with `burst` bits.
fn pacer(rate: u64, burst: u64, mode: ShapingMode) -> Pacer {
    if rate == 0 {
        return Pacer::default();
    }
    let mut pacer = Pacer::new(rate, burst, 0);
    match mode {
        ShapingMode::Paced => {
            pacer.burst_ns = pacer.burst_ns.min(MAX_BURST_NS);
            let largest = (MAX_FRAME_BYTES * 8).saturating_mul(NSEC_PER_SEC) / rate;
            pacer.horizon_ns = largest
                .saturating_mul(2)
                .clamp(BASE_HORIZON_NS, MAX_HORIZON_NS);
        }
        ShapingMode::Policed => {
            pacer.burst_ns = pacer.burst_ns.clamp(POLICER_MIN_BUCKET_NS, MAX_BURST_NS);
        }
    }
    pacer
}

/// The pacing map value for `limits` in `mode`; `None` when they limit nothing.
pub(super) fn state(limits: Option<&BandwidthLimits>, mode: ShapingMode) -> Option<BandwidthState> {
    let limits = limits.and_then(|l| l.nonzero())?;
    Some(BandwidthState {
        ingress: pacer(limits.ingress_rate, limits.ingress_burst, mode),
        egress: pacer(limits.egress_rate, limits.egress_burst, mode),
    })
}

/// The host-side policer entry for `limits` (keyed by
/// `sarena_common::policer_key`); `None` when they do not limit egress.
pub(super) fn policer(limits: Option<&BandwidthLimits>) -> Option<BandwidthState> {
    let limits = limits.filter(|l| l.limits_egress())?;
    let mut egress = pacer(
        limits.egress_rate,
        limits.egress_burst,
        ShapingMode::Policed,
    );
    egress.burst_ns += HOST_POLICER_SLACK_NS;
    Some(BandwidthState {
        ingress: Pacer::default(),
        egress,
    })
}

/// The limits a pacing map value enforces, as the CNI would state them
/// (bursts as capped; read back for CHECK).
pub(super) fn limits_of(state: &BandwidthState) -> BandwidthLimits {
    let burst = |p: &Pacer| {
        let bits = u128::from(p.burst_ns) * u128::from(p.rate_bps) / u128::from(NSEC_PER_SEC);
        u64::try_from(bits).unwrap_or(u64::MAX)
    };
    BandwidthLimits {
        ingress_rate: state.ingress.rate_bps,
        ingress_burst: burst(&state.ingress),
        egress_rate: state.egress.rate_bps,
        egress_burst: burst(&state.egress),
    }
}

/// `limits` as the dataplane enforces them in `mode` (bursts bounded as the
/// module docs say, rounded as the pacer stores them).
pub fn as_enforced(limits: &BandwidthLimits, mode: ShapingMode) -> Option<BandwidthLimits> {
    state(Some(limits), mode).map(|s| limits_of(&s))
}

/// Whether `a` and `b` hold the same settings (rates, bursts, horizons),
/// whatever the state of their buckets.
pub(super) fn same_settings(a: &BandwidthState, b: &BandwidthState) -> bool {
    let settings = |p: &Pacer| (p.rate_bps, p.burst_ns, p.horizon_ns);
    settings(&a.ingress) == settings(&b.ingress) && settings(&a.egress) == settings(&b.egress)
}

/// Whether traffic to `endpoint` is paced on its host veth.
pub(super) fn paces_ingress(endpoint: &Endpoint) -> bool {
    endpoint.spec.bandwidth.is_some_and(|l| l.limits_ingress())
}

/// Whether traffic from `endpoint` is paced on its own interface.
pub(super) fn paces_egress(endpoint: &Endpoint) -> bool {
    endpoint.spec.bandwidth.is_some_and(|l| l.limits_egress())
}

/// The `EndpointInfo` flag bits `endpoint`'s limits call for.
pub(super) fn entry_flags(endpoint: &Endpoint) -> u32 {
    if paces_ingress(endpoint) {
        ENDPOINT_F_INGRESS_PACED
    } else {
        0
    }
}

/// The program on the egress hook of `endpoint`'s host veth.
pub(super) fn egress_program(endpoint: &Endpoint) -> &'static str {
    if paces_ingress(endpoint) {
        TO_CONTAINER_BW_PROG
    } else {
        TO_CONTAINER_PROG
    }
}

/// `SARENA_BANDWIDTH` (host ifindex → pacers), as pinned.
pub(super) struct PacingMap(BpfHashMap<MapData, u32, BandwidthState>);

impl PacingMap {
    /// Takes the map out of the loaded object.
    pub(super) fn take(ebpf: &mut aya::Ebpf) -> Result<Self, BpfError> {
        let map: Map = ebpf
            .take_map(BANDWIDTH_MAP)
            .ok_or(BpfError::NoMap { map: BANDWIDTH_MAP })?;
        BpfHashMap::try_from(map)
            .map(PacingMap)
            .map_err(map_error("open map", BANDWIDTH_MAP))
    }

    /// The pacers of `host_ifindex`, if it has any.
    pub(super) fn get(&self, host_ifindex: u32) -> Result<Option<BandwidthState>, BpfError> {
        self.entry(host_ifindex)
    }

    /// The host-side policer of `host_ifindex`, if it has one.
    pub(super) fn policer(&self, host_ifindex: u32) -> Result<Option<BandwidthState>, BpfError> {
        self.entry(policer_key(host_ifindex))
    }

    fn entry(&self, key: u32) -> Result<Option<BandwidthState>, BpfError> {
        match self.0.get(&key, 0) {
            Ok(state) => Ok(Some(state)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(map_error("read pacers", key)(e)),
        }
    }

    /// Makes `endpoint`'s entries (its pacers, and its host-side policer)
    /// match its limits in `mode`: written (with fresh buckets) when missing
    /// or for other limits, removed when it has none. Returns the pacers'
    /// entry that was there before; `changed` is set when something was
    /// written or removed.
    pub(super) fn write(
        &mut self,
        endpoint: &Endpoint,
        mode: ShapingMode,
        changed: &mut bool,
    ) -> Result<Option<BandwidthState>, BpfError> {
        let ifindex = endpoint.spec.host_ifindex;
        let limits = endpoint.spec.bandwidth.as_ref();
        self.sync(endpoint, policer_key(ifindex), policer(limits), changed)?;
        self.sync(endpoint, ifindex, state(limits, mode), changed)
    }

    /// Makes the entry `key` of `endpoint` hold `want` (its settings; a
    /// fresh bucket when written); returns what it held before.
    fn sync(
        &mut self,
        endpoint: &Endpoint,
        key: u32,
        want: Option<BandwidthState>,
        changed: &mut bool,
    ) -> Result<Option<BandwidthState>, BpfError> {
        let before = self.entry(key)?;
        match (&before, &want) {
            (Some(b), Some(w)) if same_settings(b, w) => {}
            (_, Some(w)) => {
                self.0
                    .insert(key, *w, 0)
                    .map_err(map_error("insert pacers", &endpoint.spec.host_ifname))?;
                *changed = true;
            }
            (Some(_), None) => {
                self.remove_key(key)?;
                *changed = true;
            }
            (None, None) => {}
        }
        Ok(before)
    }

    /// Removes the entries of `host_ifindex` (pacers and policer); missing
    /// ones are fine.
    pub(super) fn remove(&mut self, host_ifindex: u32) -> Result<(), BpfError> {
        self.remove_key(policer_key(host_ifindex))?;
        self.remove_key(host_ifindex)
    }

    fn remove_key(&mut self, key: u32) -> Result<(), BpfError> {
        match self.0.remove(&key) {
            Err(e) if !is_not_found(&e) => Err(map_error("remove pacers", key)(e)),
            _ => Ok(()),
        }
    }

    /// Every key of the map, sorted (host ifindexes and policer keys).
    pub(super) fn keys(&self) -> Vec<u32> {
        let mut keys: Vec<u32> = self.0.keys().filter_map(Result::ok).collect();
        keys.sort_unstable();
        keys
    }

    /// Removes the entries (pacers and policers) of interfaces no endpoint
    /// in `endpoints` has.
    pub(super) fn remove_unknown(&mut self, endpoints: &[Endpoint]) -> Result<(), BpfError> {
        for key in self.keys() {
            let ifindex = key & !POLICER_KEY_BIT;
            if !endpoints.iter().any(|e| e.spec.host_ifindex == ifindex) {
                self.remove_key(key)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(ingress: (u64, u64), egress: (u64, u64)) -> BandwidthLimits {
        BandwidthLimits {
            ingress_rate: ingress.0,
            ingress_burst: ingress.1,
            egress_rate: egress.0,
            egress_burst: egress.1,
        }
    }

    use ShapingMode::{Paced, Policed};

    #[test]
    fn each_direction_gets_its_rate_burst_and_horizon() {
        let state = state(Some(&limits((80_000_000, 800_000), (50_000_000, 0))), Paced).unwrap();
        assert_eq!(state.ingress.rate_bps, 80_000_000);
        assert_eq!(state.ingress.burst_ns, 10_000_000);
        assert_eq!(state.ingress.horizon_ns, BASE_HORIZON_NS);
        assert_eq!(state.egress.rate_bps, 50_000_000);
        assert_eq!(state.egress.burst_ns, 0);
        assert_eq!(state.ingress.next_ns, 0);
        assert_eq!(
            limits_of(&state),
            limits((80_000_000, 800_000), (50_000_000, 0))
        );
    }

    #[test]
    fn a_policer_has_no_horizon_and_a_bucket_tcp_can_live_with() {
        let small = limits((80_000_000, 800_000), (50_000_000, 0));
        let state = state(Some(&small), Policed).unwrap();
        for p in [state.ingress, state.egress] {
            assert_eq!(p.horizon_ns, 0);
            assert_eq!(p.burst_ns, POLICER_MIN_BUCKET_NS);
        }
        assert_eq!(
            as_enforced(&small, Policed).unwrap(),
            limits((80_000_000, 20_000_000), (50_000_000, 12_500_000))
        );
        // A burst between the bounds is kept as it is.
        let half = limits((10_000_000, 5_000_000), (0, 0));
        assert_eq!(as_enforced(&half, Policed).unwrap(), half);
    }

    #[test]
    fn an_unlimited_direction_has_an_empty_pacer_and_no_limits_no_entry() {
        for mode in [Paced, Policed] {
            let state = state(Some(&limits((0, 0), (1_000_000, 10_000))), mode).unwrap();
            assert_eq!(state.ingress, Pacer::default());
            assert_eq!(super::state(Some(&BandwidthLimits::default()), mode), None);
            assert_eq!(super::state(None, mode), None);
        }
    }

    #[test]
    fn the_kubelets_burst_is_capped_at_one_second() {
        let k8s = limits((10_000_000, i32::MAX as u64), (0, 0));
        for mode in [Paced, Policed] {
            assert_eq!(
                state(Some(&k8s), mode).unwrap().ingress.burst_ns,
                MAX_BURST_NS
            );
            assert_eq!(
                as_enforced(&k8s, mode).unwrap(),
                limits((10_000_000, 10_000_000), (0, 0))
            );
        }
    }

    #[test]
    fn slow_rates_get_room_for_two_large_frames_up_to_five_seconds() {
        // 1 Mbit/s: a 64 KiB frame takes ~524 ms.
        let state = state(Some(&limits((1_000_000, 0), (1_000, 0))), Paced).unwrap();
        assert_eq!(state.ingress.horizon_ns, 2 * 65_550 * 8 * 1_000);
        assert_eq!(state.egress.horizon_ns, MAX_HORIZON_NS);
    }

    #[test]
    fn the_host_side_policer_is_deeper_than_the_pod_side_pacer() {
        let small = limits((80_000_000, 800_000), (50_000_000, 0));
        let p = policer(Some(&small)).unwrap();
        assert_eq!(p.ingress, Pacer::default());
        assert_eq!(p.egress.rate_bps, 50_000_000);
        assert_eq!(p.egress.horizon_ns, 0);
        assert_eq!(
            p.egress.burst_ns,
            POLICER_MIN_BUCKET_NS + HOST_POLICER_SLACK_NS
        );
        for mode in [Paced, Policed] {
            for burst in [0, 10_000_000, 50_000_000, u64::MAX] {
                let l = limits((0, 0), (50_000_000, burst));
                let pod_side = state(Some(&l), mode).unwrap().egress;
                let host_side = policer(Some(&l)).unwrap().egress;
                assert!(host_side.burst_ns > pod_side.burst_ns, "{mode:?} {burst}");
            }
        }
        assert_eq!(policer(Some(&limits((5, 5), (0, 0)))), None);
        assert_eq!(policer(None), None);
    }

    #[test]
    fn the_egress_hook_runs_the_paced_program_only_for_ingress_limits() {
        let mut ep = super::super::entries::tests::endpoint("lxc1", 9, &["10.1.0.5/24"]);
        assert_eq!(egress_program(&ep), TO_CONTAINER_PROG);
        assert_eq!(entry_flags(&ep), 0);
        ep.spec.bandwidth = Some(limits((0, 0), (5, 5)));
        assert_eq!(egress_program(&ep), TO_CONTAINER_PROG);
        assert!(paces_egress(&ep) && !paces_ingress(&ep));
        ep.spec.bandwidth = Some(limits((5, 5), (0, 0)));
        assert_eq!(egress_program(&ep), TO_CONTAINER_BW_PROG);
        assert_eq!(entry_flags(&ep), ENDPOINT_F_INGRESS_PACED);
    }
}
