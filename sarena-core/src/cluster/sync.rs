//! [`PeerSync`]: peer routing over the kernel's tables ([`RouteTable`],
//! [`Overlay`]), in either routing mode.
//!
//! Order per sync: in `vxlan` mode the filter in front of the device (only
//! the peers' underlay addresses reach it, [`VxlanFilter`]), the device, then new FDB and neighbour
//! entries (a route's next hop resolves the moment the route exists); then
//! every missing or changed route is replaced in place (`ip route replace`:
//! no moment without a route); then stale routes go, and after them stale
//! neighbour and FDB entries. A restarted daemon finds its routes in place
//! and changes nothing that is still wanted, so traffic never gaps. Until
//! the local Node is known, `vxlan` mode leaves the overlay as it is.
//! Native mode removes the device of an earlier `vxlan` run, then its filter.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ipnet::IpNet;

use super::config::{KubernetesConfig, VXLAN_DEVICE};
use super::error::ClusterError;
use super::pools::pod_mtu;
use super::routes::{PeerRoute, native_routes};
use super::traits::{Overlay, PeerRouting, RouteTable};
use super::types::{ClusterView, RoutingMode};
use super::vxlan::{VxlanDevice, overlay_state};
use super::vxlan_filter::VxlanFilter;

/// What one [`PeerRouting::sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Entries added or replaced (`route …`, `fdb …`, `neigh …`).
    pub changed: Vec<String>,
    /// Stale entries removed.
    pub removed: Vec<String>,
    /// Peers or podCIDRs not routed, and why.
    pub skipped: Vec<String>,
    /// Entries that failed, with the error.
    pub failed: Vec<String>,
    /// Whether the overlay was left alone (`vxlan` before the local Node is known).
    pub deferred: bool,
}

/// Peer routing in the mode of a [`KubernetesConfig`].
pub struct PeerSync {
    config: KubernetesConfig,
    /// The configured MTU; `None`: the underlay's.
    mtu: Option<u32>,
    routes: Arc<dyn RouteTable>,
    overlay: Arc<dyn Overlay>,
    /// Whether native mode already removed a VXLAN device of an earlier run.
    overlay_cleared: AtomicBool,
}

impl std::fmt::Debug for PeerSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSync")
            .field("config", &self.config)
            .field("mtu", &self.mtu)
            .finish_non_exhaustive()
    }
}

impl PeerSync {
    /// Peer routing per `config`, with `mtu` the configured MTU (the
    /// VXLAN device gets it, else the underlay's, less the overhead).
    pub fn new(
        config: KubernetesConfig,
        mtu: Option<u32>,
        routes: Arc<dyn RouteTable>,
        overlay: Arc<dyn Overlay>,
    ) -> Self {
        PeerSync {
            config,
            mtu,
            routes,
            overlay,
            overlay_cleared: AtomicBool::new(false),
        }
    }

    /// The routes `view` asks for, after setting up the overlay in `vxlan`
    /// mode; `None` when the overlay must wait for the local Node.
    async fn prepare(
        &self,
        view: &ClusterView,
        report: &mut SyncReport,
    ) -> Result<Option<(Vec<PeerRoute>, Option<Stale>)>, ClusterError> {
        match self.config.routing {
            RoutingMode::Native => {
                if !self.overlay_cleared.load(Ordering::Relaxed) {
                    if self.overlay.remove_device(VXLAN_DEVICE).await? {
                        report.removed.push(format!("device {VXLAN_DEVICE}"));
                    }
                    // After the device: never a device without its filter.
                    self.overlay.remove_filter().await?;
                    self.overlay_cleared.store(true, Ordering::Relaxed);
                }
                Ok(Some((native_routes(view, &mut report.skipped), None)))
            }
            RoutingMode::Vxlan => {
                let Some(local) = &view.local else {
                    return Ok(None);
                };
                let Some(local_ip) = local.underlay_ip() else {
                    report
                        .skipped
                        .push(format!("node {} has no InternalIP", local.name));
                    return Ok(None);
                };
                let underlay = self
                    .overlay
                    .underlay(local_ip, self.config.underlay.clone())
                    .await?;
                let base = self.mtu.unwrap_or(underlay.mtu);
                let mtu = pod_mtu(base, RoutingMode::Vxlan, Some(local_ip));
                let Some(device) = VxlanDevice::for_node(
                    local,
                    self.config.vxlan_vni,
                    self.config.vxlan_port,
                    underlay.index,
                    mtu,
                ) else {
                    return Ok(None);
                };
                // The filter first: the device never runs without it.
                let filter = VxlanFilter {
                    port: self.config.vxlan_port,
                    underlay: underlay.name.clone(),
                    peers: overlay_state(view, local_ip, underlay.index, &mut Vec::new())
                        .fdb
                        .into_iter()
                        .map(|e| e.dst)
                        .collect(),
                };
                self.overlay.ensure_filter(&filter).await?;
                let ifindex = self.overlay.ensure_device(&device).await?;
                let state = overlay_state(view, local_ip, ifindex, &mut report.skipped);
                // sorted, for lookups (the state's own entries are sorted)
                let mut present_fdb = self.overlay.fdb(ifindex).await?;
                present_fdb.sort();
                let mut present_neigh = self.overlay.neighbours(ifindex).await?;
                present_neigh.sort();
                for entry in state
                    .fdb
                    .iter()
                    .filter(|e| present_fdb.binary_search(e).is_err())
                {
                    let what = format!("fdb {} dst {}", entry.mac, entry.dst);
                    note(report, what, self.overlay.replace_fdb(ifindex, entry).await);
                }
                for entry in state
                    .neighbours
                    .iter()
                    .filter(|e| present_neigh.binary_search(e).is_err())
                {
                    let what = format!("neigh {} lladdr {}", entry.ip, entry.mac);
                    note(
                        report,
                        what,
                        self.overlay.replace_neighbour(ifindex, entry).await,
                    );
                }
                let stale = Stale {
                    ifindex,
                    fdb: present_fdb
                        .into_iter()
                        .filter(|e| state.fdb.binary_search(e).is_err())
                        .collect(),
                    neighbours: present_neigh
                        .into_iter()
                        .filter(|e| state.neighbours.binary_search(e).is_err())
                        .collect(),
                };
                Ok(Some((state.routes, Some(stale))))
            }
        }
    }
}

impl PeerSync {
    /// Replaces `old` (same destination, if any) by `route` in place. The
    /// kernel refuses to replace some IPv6 routes by one of another kind
    /// (a gateway route by an `onlink` one: EINVAL, as on a switch from
    /// native to vxlan routing); then the old route goes first.
    async fn replace(
        &self,
        route: &PeerRoute,
        old: Option<&PeerRoute>,
    ) -> Result<(), ClusterError> {
        match (self.routes.replace_route(route).await, old) {
            (Ok(()), _) => Ok(()),
            (Err(e), Some(old)) => {
                tracing::debug!(
                    "replacing {old} by {route} in place failed ({}); removing it first",
                    crate::error_chain(&e)
                );
                self.routes.delete_route(old).await?;
                self.routes.replace_route(route).await
            }
            (Err(e), None) => Err(e),
        }
    }
}

/// Overlay entries to remove once the routes through them are gone.
struct Stale {
    ifindex: u32,
    fdb: Vec<super::vxlan::FdbEntry>,
    neighbours: Vec<super::vxlan::NeighbourEntry>,
}

/// Records `what` as changed, or as failed with the error.
fn note(report: &mut SyncReport, what: String, result: Result<(), ClusterError>) {
    match result {
        Ok(()) => report.changed.push(what),
        Err(e) => report
            .failed
            .push(format!("{what}: {}", crate::error_chain(&e))),
    }
}

/// Records `what` as removed, or as failed with the error.
fn note_removed(report: &mut SyncReport, what: String, result: Result<(), ClusterError>) {
    match result {
        Ok(()) => report.removed.push(what),
        Err(e) => report
            .failed
            .push(format!("{what}: {}", crate::error_chain(&e))),
    }
}

#[async_trait]
impl PeerRouting for PeerSync {
    async fn sync(&self, view: &ClusterView) -> Result<SyncReport, ClusterError> {
        let mut report = SyncReport::default();
        let Some((wanted, stale)) = self.prepare(view, &mut report).await? else {
            report.deferred = true;
            return Ok(report);
        };
        let present = self.routes.peer_routes().await?;
        // by destination: a thousand peers are a lookup each, not a scan
        let mut by_dst: HashMap<IpNet, Vec<&PeerRoute>> = HashMap::with_capacity(present.len());
        for p in &present {
            by_dst.entry(p.dst).or_default().push(p);
        }
        for route in &wanted {
            let same_dst = by_dst
                .get(&route.dst)
                .map(Vec::as_slice)
                .unwrap_or_default();
            if !same_dst.iter().any(|p| route.is_met_by(p)) {
                let result = self.replace(route, same_dst.first().copied()).await;
                note(&mut report, format!("route {route}"), result);
            }
        }
        let wanted_dsts: HashSet<IpNet> = wanted.iter().map(|w| w.dst).collect();
        for route in &present {
            if !wanted_dsts.contains(&route.dst) {
                let result = self.routes.delete_route(route).await;
                note_removed(&mut report, format!("route {route}"), result);
            }
        }
        if let Some(stale) = stale {
            for entry in &stale.neighbours {
                let result = self.overlay.delete_neighbour(stale.ifindex, entry).await;
                note_removed(
                    &mut report,
                    format!("neigh {} lladdr {}", entry.ip, entry.mac),
                    result,
                );
            }
            for entry in &stale.fdb {
                let result = self.overlay.delete_fdb(stale.ifindex, entry).await;
                note_removed(
                    &mut report,
                    format!("fdb {} dst {}", entry.mac, entry.dst),
                    result,
                );
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
