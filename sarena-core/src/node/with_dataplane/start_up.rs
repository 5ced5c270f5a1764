//! [`WithDataplane::start_up`]: what a daemon does before it serves, to
//! bring the registry, the host's links and the dataplane back in line after
//! whatever ended the previous run (a SIGKILL, a crash, a node reboot).

use std::collections::BTreeSet;

use super::WithDataplane;
use crate::api::{Attachment, DaemonError, Endpoint};
use crate::dataplane::{DataplaneError, ReconcileReport};
use crate::links::{HostLink, LinkError};

/// What [`WithDataplane::start_up`] repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartUpReport {
    /// Endpoints kept (their host veth is there).
    pub endpoints: usize,
    /// Endpoints whose host veth was gone (after a reboot: all of them),
    /// deleted with their addresses.
    pub stale_endpoints: Vec<Attachment>,
    /// Veth removals a previous run owed, now done (or found done).
    pub owed_removals_done: usize,
    /// Sarena's host links no endpoint owned, removed.
    pub unowned_links_removed: Vec<String>,
    /// What the dataplane's reconciliation changed.
    pub dataplane: ReconcileReport,
}

/// Why [`WithDataplane::start_up`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StartUpError {
    /// The registry could not be read or changed.
    #[error("start-up: the registry")]
    Registry(#[source] DaemonError),
    /// The host's links could not be listed or looked up.
    #[error("start-up: the host's links")]
    Links(#[source] LinkError),
    /// The dataplane could not reconcile.
    #[error("start-up: the dataplane")]
    Dataplane(#[source] DataplaneError),
}

impl WithDataplane {
    /// Brings everything in line before the API is served, in this order:
    ///
    /// 1. endpoints whose host veth (that name *and* ifindex) is gone are
    ///    deleted, freeing their addresses: their pod has no interface left
    ///    (after a node reboot, none has);
    /// 2. veth removals the previous run owed are done and settled;
    /// 3. Sarena's host links (marked, [`crate::links::LINK_GROUP`]) that no
    ///    endpoint owns are removed (an ADD cut short, a removal never
    ///    recorded);
    /// 4. the dataplane reconciles with the endpoints left.
    ///
    /// Without veth removal ([`WithDataplane::with_veth_removal`]) only step 4
    /// runs. Must run before the API is served: an ADD in flight could
    /// otherwise lose its new link to step 3.
    pub async fn start_up(&self) -> Result<StartUpReport, StartUpError> {
        let mut report = StartUpReport::default();
        let mut endpoints = self
            .registry
            .endpoints()
            .await
            .map_err(StartUpError::Registry)?;
        if let Some(veths) = &self.veths {
            endpoints = self.drop_stale(endpoints, &mut report).await?;
            report.owed_removals_done = self.redo_owed().await?;
            let owned: BTreeSet<u32> = endpoints.iter().map(|e| e.spec.host_ifindex).collect();
            let links = veths
                .links
                .list_host_links()
                .await
                .map_err(StartUpError::Links)?;
            for HostLink { ifname, ifindex } in links {
                if owned.contains(&ifindex) {
                    continue;
                }
                match veths.links.remove_host_link_index(ifindex, &ifname).await {
                    Ok(true) => report.unowned_links_removed.push(ifname),
                    Ok(false) | Err(LinkError::NotOurs { .. }) => {}
                    Err(error) => {
                        tracing::warn!(%ifname, error = %crate::error_chain(&error), "cannot remove an unowned link")
                    }
                }
            }
        }
        report.endpoints = endpoints.len();
        report.dataplane = self
            .dataplane
            .reconcile(&endpoints)
            .await
            .map_err(StartUpError::Dataplane)?;
        tracing::info!(
            endpoints = report.endpoints,
            stale_endpoints = report.stale_endpoints.len(),
            owed_removals_done = report.owed_removals_done,
            unowned_links_removed = report.unowned_links_removed.len(),
            attached = report.dataplane.attached.len(),
            removed = report.dataplane.removed.len(),
            "start-up repair done"
        );
        Ok(report)
    }

    /// Step 1: deletes the endpoints whose host veth is gone; returns the others.
    async fn drop_stale(
        &self,
        endpoints: Vec<Endpoint>,
        report: &mut StartUpReport,
    ) -> Result<Vec<Endpoint>, StartUpError> {
        let Some(veths) = &self.veths else {
            return Ok(endpoints);
        };
        let mut live = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let present = veths
                .links
                .host_link_index(&endpoint.spec.host_ifname)
                .await
                .map_err(StartUpError::Links)?;
            if present == Some(endpoint.spec.host_ifindex) {
                live.push(endpoint);
                continue;
            }
            tracing::warn!(owner = ?endpoint.spec.owner, ifname = %endpoint.spec.host_ifname,
                "the endpoint's host veth is gone; deleting the endpoint");
            self.registry
                .delete_endpoint(endpoint.spec.owner.clone())
                .await
                .map_err(StartUpError::Registry)?;
            report.stale_endpoints.push(endpoint.spec.owner);
        }
        Ok(live)
    }

    /// Step 2: removes the links of owed removals and settles them; returns
    /// how many were settled.
    async fn redo_owed(&self) -> Result<usize, StartUpError> {
        let Some(veths) = &self.veths else {
            return Ok(0);
        };
        let owed = veths
            .ledger
            .owed_removals()
            .await
            .map_err(StartUpError::Registry)?;
        let mut done = Vec::with_capacity(owed.len());
        for removal in owed {
            let (ifindex, ifname) = (removal.host_ifindex, &removal.host_ifname);
            match veths.links.remove_host_link_index(ifindex, ifname).await {
                Ok(_) | Err(LinkError::NotOurs { .. }) => done.push(removal),
                Err(error) => {
                    tracing::warn!(%ifname, ifindex, error = %crate::error_chain(&error), "owed veth removal failed again")
                }
            }
        }
        let count = done.len();
        veths
            .ledger
            .settle_removals(done)
            .await
            .map_err(StartUpError::Registry)?;
        Ok(count)
    }
}

#[cfg(test)]
#[path = "start_up_tests.rs"]
mod tests;
