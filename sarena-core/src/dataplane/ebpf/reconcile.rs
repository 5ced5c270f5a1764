//! Start-up reconciliation: what the kernel has (filters on every device,
//! map entries, pins of earlier versions) brought in line with the registry.

use std::collections::{BTreeMap, BTreeSet};

use super::attach::host_ifindex;
use super::error::BpfError;
use super::pins::{self, PinnedAttachment};
use super::tc::{self, TcAttachment};
use super::upgrade::KillPoint;
use super::{AyaDataplane, State};
use crate::api::Endpoint;
use crate::dataplane::{DataplaneError, ReconcileReport};
use crate::netlink;

/// Sarena's filters as found on the devices, split by whom they serve.
struct Found {
    /// Filters on the devices of live endpoints, by ifindex.
    current: BTreeMap<u32, Vec<TcAttachment>>,
    /// Filters of this dataplane on any other device, by ifname.
    foreign: Vec<(String, Vec<TcAttachment>)>,
}

impl AyaDataplane {
    /// The eBPF half of [`Dataplane::reconcile`](crate::dataplane::Dataplane::reconcile):
    /// removes filters and entries the registry does not know (or knows with
    /// another ifindex), attaches what is missing or runs other code, then
    /// drops the tcx links of an earlier version. Endpoints whose host veth
    /// no longer exists are skipped (the registry's GC removes them).
    pub(super) async fn reconcile_programs(
        &self,
        endpoints: &[Endpoint],
        report: &mut ReconcileReport,
    ) -> Result<(), DataplaneError> {
        let live: Vec<Endpoint> = endpoints
            .iter()
            .filter(|e| {
                let present = host_ifindex(&e.spec.host_ifname) == Some(e.spec.host_ifindex);
                if !present {
                    tracing::warn!(ifname = %e.spec.host_ifname, "reconcile: host veth gone, not attaching");
                }
                present
            })
            .cloned()
            .collect();

        // What the kernel has, queried before taking the lock; the root
        // qdiscs the limits need, set before the programs (see shaping.rs).
        let our_maps = self.lock().map_ids.clone();
        let found = scan_filters(&live, &our_maps).await?;
        for endpoint in &live {
            self.shape_host_root(endpoint).await?;
        }

        let mut before = Vec::with_capacity(live.len());
        let (mut swapped, mut carried) = (0, 0);
        {
            let mut state = self.lock();
            report
                .removed
                .extend(remove_stale(&mut state, &live, &found.foreign)?);
            let mut errors = Vec::new();
            for endpoint in &live {
                let filters = found
                    .current
                    .get(&endpoint.spec.host_ifindex)
                    .map_or(&[][..], Vec::as_slice);
                before.push(state.pacing.get(endpoint.spec.host_ifindex)?);
                let swap = !state.runs_ours(endpoint, filters);
                if swap {
                    // Before the swap: the old programs count into the old
                    // map until the kernel runs the new ones (see upgrade.rs).
                    let State { upgrade, maps, .. } = &mut *state;
                    match upgrade.carry_counters(maps, endpoint) {
                        Ok(true) => carried += 1,
                        Ok(false) => {}
                        // The fast path matters more than the counters.
                        Err(error) => tracing::warn!(ifname = %endpoint.spec.host_ifname, %error,
                            "reconcile: counters not carried over"),
                    }
                }
                match state.attach(endpoint, filters) {
                    Ok(true) => {
                        report.attached.push(endpoint.spec.host_ifname.clone());
                        swapped += usize::from(swap);
                        if swapped == 1 && swap {
                            state.upgrade.kill_if(KillPoint::FirstSwap);
                        }
                    }
                    Ok(false) => {}
                    Err(e) => errors.push(e),
                }
            }
            BpfError::collect("reconcile", self.pin_dir.display().to_string(), errors)?;
        }
        if carried > 0 {
            tracing::info!(
                endpoints = carried,
                "reconcile: counters carried over from an earlier generation's map"
            );
        }
        // Pod sides of egress limits: checked, replaced when they run other
        // code (an upgrade), removed where limits went.
        for (endpoint, before) in live.iter().zip(before) {
            self.shape_pod_side(endpoint, before, true).await?;
        }
        if swapped > 0 {
            self.lock().upgrade.kill_if(KillPoint::Swapped);
        }
        for ifname in self.remove_legacy_links()? {
            tracing::info!(%ifname, "reconcile: replaced a tcx link of an earlier version");
        }
        // Every endpoint runs this release's programs now.
        self.lock().upgrade.finish(&self.pin_dir)?;
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

/// Sarena's filters on every device of this netns. Filters of another
/// dataplane (another pin dir: other maps) are not ours and are ignored.
async fn scan_filters(
    live: &[Endpoint],
    our_maps: &BTreeSet<u32>,
) -> Result<Found, DataplaneError> {
    let live_ifindexes: BTreeSet<u32> = live.iter().map(|e| e.spec.host_ifindex).collect();
    let ours_by_id = programs_using(our_maps);
    let handle = netlink::host_handle().map_err(|source| DataplaneError::Socket { source })?;
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

/// Removes whatever the registry does not know: filters on other devices,
/// map entries and counters; returns what was removed (ifnames and pod
/// addresses), sorted.
fn remove_stale(
    state: &mut State,
    endpoints: &[Endpoint],
    foreign: &[(String, Vec<TcAttachment>)],
) -> Result<Vec<String>, BpfError> {
    let mut removed = BTreeSet::new();
    for (ifname, attachments) in foreign {
        for attachment in attachments {
            tc::detach(ifname, attachment.direction)?;
            removed.insert(ifname.clone());
        }
    }
    removed.extend(state.maps.remove_unknown(endpoints)?);
    state.pacing.remove_unknown(endpoints)?;
    Ok(removed.into_iter().collect())
}

/// The ids of the loaded programs that use one of `maps`.
fn programs_using(maps: &BTreeSet<u32>) -> BTreeSet<u32> {
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
fn interfaces() -> Vec<(u32, String)> {
    match nix::net::if_::if_nameindex() {
        Ok(list) => list
            .iter()
            .map(|i| (i.index(), i.name().to_string_lossy().into_owned()))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "if_nameindex");
            Vec::new()
        }
    }
}
