//! Start-up reconciliation: what the kernel has (filters on every device,
//! map entries, pins of earlier versions) brought in line with the registry.
//!
//! `AyaDataplane::reconcile_programs` runs six phases in order, one named
//! call each, every one returning what the next needs:
//!
//! 1. `live_endpoints`: the endpoints whose host veth still exists (the
//!    others are skipped: the registry's GC removes them);
//! 2. `scan_filters`: Sarena's filters on every device,
//!    queried before the dataplane's lock is taken;
//! 3. `shape_host_roots`: the root qdiscs the limits need,
//!    set before the programs (see `shaping.rs`);
//! 4. `swap_programs`, under the dataplane's lock: filters
//!    and entries the registry does not know removed, the entries of every
//!    endpoint to swap written; then, endpoint by endpoint, its counters carried over from an older generation when its
//!    hooks run other code (see `upgrade.rs`), its entries written and its
//!    filters replaced (kill point `first-swap` after the first swap);
//! 5. `shape_pod_sides`: the pod sides of egress limits
//!    checked, replaced when they run other code, removed where limits went;
//! 6. `retire_earlier_versions`, once every endpoint runs
//!    this release's programs (kill point `swapped`): the tcx links of
//!    earlier versions dropped, an older generation's pins removed and the
//!    mark written.

use std::collections::{BTreeMap, BTreeSet};

use super::attach::host_ifindex;
use super::error::BpfError;
use super::fault::KillPoint;
use super::pins::{self, PinnedAttachment};
use super::tc::{self, TcAttachment};
use super::{AyaDataplane, BandwidthState, State};
use crate::api::Endpoint;
use crate::dataplane::{DataplaneError, ReconcileReport};

/// Sarena's filters as found on the devices, split by whom they serve.
struct Found {
    /// Filters on the devices of live endpoints, by ifindex.
    current: BTreeMap<u32, Vec<TcAttachment>>,
    /// Filters of this dataplane on any other device, by ifname.
    foreign: Vec<(String, Vec<TcAttachment>)>,
}

impl Found {
    /// The filters found on `endpoint`'s host veth.
    fn on(&self, endpoint: &Endpoint) -> &[TcAttachment] {
        self.current
            .get(&endpoint.spec.host_ifindex)
            .map_or(&[][..], Vec::as_slice)
    }
}

/// What phase 4 leaves for phases 5 and 6.
struct Swapped {
    /// Each live endpoint's pacing entry as it was before phase 4, in the
    /// order of the live endpoints (what its pod side was set up for).
    pacing_before: Vec<Option<BandwidthState>>,
    /// How many endpoints had their programs replaced.
    swapped: usize,
}

/// Phase 4's counts, endpoint by endpoint.
#[derive(Default)]
struct Tally {
    /// Endpoints whose programs were replaced.
    swapped: usize,
    /// Endpoints whose counters were carried over from an older generation.
    carried: usize,
}

impl AyaDataplane {
    /// The eBPF half of [`Dataplane::reconcile`](crate::dataplane::Dataplane::reconcile):
    /// removes filters and entries the registry does not know (or knows with
    /// another ifindex), attaches what is missing or runs other code, then
    /// drops the tcx links of an earlier version. Endpoints whose host veth
    /// no longer exists are skipped (the registry's GC removes them). The
    /// phases: see the module docs.
    pub(super) async fn reconcile_programs(
        &self,
        endpoints: &[Endpoint],
        report: &mut ReconcileReport,
    ) -> Result<(), DataplaneError> {
        let live = live_endpoints(endpoints);
        let found = self.scan_filters(&live).await?;
        self.shape_host_roots(&live).await?;
        let swapped = self.swap_programs(&live, &found, report)?;
        self.shape_pod_sides(&live, swapped.pacing_before).await?;
        self.retire_earlier_versions(swapped.swapped)
    }

    /// Phase 2: Sarena's filters on every device of this netns, over the
    /// dataplane's netlink handle. Filters of another dataplane (another pin
    /// dir: other maps) are not ours and are ignored.
    async fn scan_filters(&self, live: &[Endpoint]) -> Result<Found, DataplaneError> {
        let our_maps = self.lock().map_ids.clone();
        let live_ifindexes: BTreeSet<u32> = live.iter().map(|e| e.spec.host_ifindex).collect();
        let ours_by_id = programs_using(&our_maps);
        let handle = self.host_netlink().await?;
        let mut found = Found {
            current: BTreeMap::new(),
            foreign: Vec::new(),
        };
        for (ifindex, ifname) in interfaces() {
            let ours: Vec<TcAttachment> = tc::query(&handle, ifindex)
                .await?
                .into_iter()
                .filter(|a| ours_by_id.contains(&a.program_id))
                .collect();
            if live_ifindexes.contains(&ifindex) {
                found.current.insert(ifindex, ours);
            } else if !ours.is_empty() {
                found.foreign.push((ifname, ours));
            }
        }
        Ok(found)
    }

    /// Phase 3: the root qdisc of every live endpoint's host veth, before
    /// any program that paces frames into it (see `shaping.rs`).
    async fn shape_host_roots(&self, live: &[Endpoint]) -> Result<(), DataplaneError> {
        for endpoint in live {
            self.shape_host_root(endpoint).await?;
        }
        Ok(())
    }

    /// Phase 4, under the dataplane's lock: removes what the registry does
    /// not know, then brings every live endpoint in line
    /// ([`AyaDataplane::swap_endpoint`]).
    /// The endpoints that fail are reported together, once the others are
    /// done.
    fn swap_programs(
        &self,
        live: &[Endpoint],
        found: &Found,
        report: &mut ReconcileReport,
    ) -> Result<Swapped, DataplaneError> {
        let mut tally = Tally::default();
        let mut pacing_before = Vec::with_capacity(live.len());
        {
            let mut state = self.lock();
            report
                .removed
                .extend(remove_stale(&mut state, live, &found.foreign)?);
            // The entries of every endpoint to swap before any filter is
            // replaced: a swapped pod's new programs then find every other
            // pod in their maps (one not yet written would be left to the
            // host stack, which may have no route to it). A failure here is
            // reported by the endpoint's own turn below.
            for endpoint in live {
                let same =
                    host_ifindex(&endpoint.spec.host_ifname) == Some(endpoint.spec.host_ifindex);
                if same && !state.runs_ours(endpoint, found.on(endpoint)) {
                    let _ = state.maps.write(endpoint);
                }
            }
            let mut errors = Vec::new();
            for endpoint in live {
                pacing_before.push(state.pacing.get(endpoint.spec.host_ifindex)?);
                let filters = found.on(endpoint);
                if let Err(e) =
                    self.swap_endpoint(&mut state, endpoint, filters, &mut tally, report)
                {
                    errors.push(e);
                }
            }
            BpfError::collect("reconcile", self.pin_dir.display().to_string(), errors)?;
        }
        if tally.carried > 0 {
            tracing::info!(
                endpoints = tally.carried,
                "reconcile: counters carried over from an earlier generation's map"
            );
        }
        Ok(Swapped {
            pacing_before,
            swapped: tally.swapped,
        })
    }

    /// Phase 4 for one live endpoint whose device has the filters `filters`:
    /// when its hooks do not run this dataplane's programs, its counters are
    /// carried over from an older generation's map first (the old programs count
    /// into it until the kernel runs the new ones, see `upgrade.rs`); then its
    /// entries and filters ([`State::attach`]). A swap is counted in `tally`
    /// (the first one is the kill point `first-swap`), an attach in `report`.
    fn swap_endpoint(
        &self,
        state: &mut State,
        endpoint: &Endpoint,
        filters: &[TcAttachment],
        tally: &mut Tally,
        report: &mut ReconcileReport,
    ) -> Result<(), BpfError> {
        let swap = !state.runs_ours(endpoint, filters);
        if swap {
            let State { upgrade, maps, .. } = &mut *state;
            match upgrade.carry_counters(maps, endpoint) {
                Ok(true) => tally.carried += 1,
                Ok(false) => {}
                // The fast path matters more than the counters.
                Err(error) => {
                    tracing::warn!(ifname = %endpoint.spec.host_ifname, error = %crate::error_chain(&error),
                    "reconcile: counters not carried over")
                }
            }
        }
        if state.attach(endpoint, filters)? {
            report.attached.push(endpoint.spec.host_ifname.clone());
            if swap {
                tally.swapped += 1;
                if tally.swapped == 1 {
                    self.kill_at.kill_if(KillPoint::FirstSwap);
                }
            }
        }
        Ok(())
    }

    /// Phase 5: the pod sides of egress limits, checked against
    /// `pacing_before` (the live endpoints' pacing entries before phase 4):
    /// replaced when they run other code (an upgrade), removed where limits
    /// went.
    async fn shape_pod_sides(
        &self,
        live: &[Endpoint],
        pacing_before: Vec<Option<BandwidthState>>,
    ) -> Result<(), DataplaneError> {
        for (endpoint, before) in live.iter().zip(pacing_before) {
            self.shape_pod_side(endpoint, before, true).await?;
        }
        Ok(())
    }

    /// Phase 6, once every endpoint runs this release's programs (`swapped`
    /// of them were replaced): the tcx links of earlier versions dropped,
    /// then an older generation's pins removed and the mark written
    /// (`Upgrade::finish`).
    fn retire_earlier_versions(&self, swapped: usize) -> Result<(), DataplaneError> {
        if swapped > 0 {
            self.kill_at.kill_if(KillPoint::Swapped);
        }
        for ifname in self.remove_legacy_links()? {
            tracing::info!(%ifname, "reconcile: replaced a tcx link of an earlier version");
        }
        self.lock().upgrade.finish(&self.pin_dir, self.kill_at)?;
        Ok(())
    }

    /// Detaches and unpins every tcx link an earlier version pinned (called
    /// once the filters that replace them are in place).
    fn remove_legacy_links(&self) -> Result<Vec<String>, DataplaneError> {
        let mut removed = Vec::new();
        for link in self.pinned_links()? {
            self.unpin(&link)?;
            removed.push(link.ifname);
        }
        Ok(removed)
    }

    fn unpin(&self, link: &PinnedAttachment) -> Result<(), DataplaneError> {
        let path = pins::links_dir(&self.pin_dir).join(link.file_name());
        pins::detach_and_unpin(&path).map_err(|source| DataplaneError::Io {
            call: "detach link",
            path,
            source,
        })
    }
}

/// Phase 1: the endpoints whose host veth exists with the registry's
/// ifindex; the others are logged and left out.
fn live_endpoints(endpoints: &[Endpoint]) -> Vec<Endpoint> {
    endpoints
        .iter()
        .filter(|e| {
            let present = host_ifindex(&e.spec.host_ifname) == Some(e.spec.host_ifindex);
            if !present {
                tracing::warn!(ifname = %e.spec.host_ifname, "reconcile: host veth gone, not attaching");
            }
            present
        })
        .cloned()
        .collect()
}

/// Removes whatever the registry does not know: filters on other devices
/// (but `to_network` and `from_network` on the node's own devices, which
/// [`AyaDataplane::ensure_network_hooks`] manages: removing them here would
/// leave the host-routing map without the programs that keep both
/// directions of a cross-node flow on one path), map entries and counters;
/// returns what was removed (ifnames and pod addresses), sorted.
fn remove_stale(
    state: &mut State,
    endpoints: &[Endpoint],
    foreign: &[(String, Vec<TcAttachment>)],
) -> Result<Vec<String>, BpfError> {
    let mut removed = BTreeSet::new();
    for (ifname, attachments) in foreign {
        for attachment in attachments {
            if super::network_hook::is_network_hook(&attachment.program) {
                continue;
            }
            tc::detach(ifname, attachment.direction)?;
            removed.insert(ifname.clone());
        }
    }
    removed.extend(state.maps.remove_unknown(endpoints)?);
    let mut errors = Vec::new();
    state.reconcile_policy(endpoints, &mut errors);
    BpfError::collect("remove stale policy entries", "the policy map", errors)?;
    state.pacing.remove_unknown(endpoints)?;
    Ok(removed.into_iter().collect())
}

/// The ids of the loaded programs that use one of `maps`.
pub(super) fn programs_using(maps: &BTreeSet<u32>) -> BTreeSet<u32> {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .filter(|info| {
            let used = info.map_ids().ok().flatten().unwrap_or_default();
            used.iter().any(|id| maps.contains(id))
        })
        .map(|info| info.id())
        .collect()
}

/// Every interface of this network namespace, by ifindex (none when the
/// kernel cannot list them).
pub(super) fn interfaces() -> Vec<(u32, String)> {
    match nix::net::if_::if_nameindex() {
        Ok(list) => list
            .iter()
            .map(|i| (i.index(), i.name().to_string_lossy().into_owned()))
            .collect(),
        Err(error) => {
            tracing::warn!(error = %crate::error_chain(&error), "if_nameindex");
            Vec::new()
        }
    }
}
