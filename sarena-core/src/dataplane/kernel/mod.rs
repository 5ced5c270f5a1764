//! [`KernelDataplane`]: pod traffic forwarded by the kernel's routing table.
//!
//! - `setup`: forwarding on; the gateway addresses live on a host-only veth
//!   pair (`sarena_host` ↔ `sarena_net` by default), so the host answers ARP for them on
//!   every pod's veth; egress masquerading of the pools (nftables, see
//!   `masquerade`; the cluster's networks arrive as a
//!   [`super::NodeUpdate::ClusterNetworks`]).
//! - `attach`: `proxy_arp` on the pod's host veth (pods with an on-link prefix
//!   reach each other through the host), the link-local IPv6 gateway on it
//!   for pods with IPv6 (`gateway6`), and a host route per pod address
//!   (`ip route replace ADDR/32|ADDR/128 dev lxc… proto 90`).
//! - `detach` / `reconcile`: remove or restore those routes, told apart from
//!   everyone else's by their route protocol ([`routes::SARENA_ROUTE_PROTOCOL`]).
//! - Anti-spoofing (every step above): what a pod sends must come from one
//!   of its own addresses (nftables, see `antispoof`).

mod antispoof;
mod gateway6;
mod masquerade;
pub(crate) mod nft;
mod nft_elements;
mod policy;
mod policy_ranges;
pub mod routes;
pub mod teardown;

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use ipnet::IpNet;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
use rtnetlink::{Handle, LinkUnspec, LinkVeth};

use super::ebpf::EndpointCounters;
use super::{
    ClusterNetworks, Dataplane, DataplaneError, DataplaneMode, EndpointReports, NodeNetwork,
    ReconcileReport, UpdateOutcome,
};
use crate::api::{BandwidthStatus, Endpoint, HostRoutingStatus, ProgramsStatus};
use crate::host_ledger::HostLedger;
use crate::netlink::{self, NetlinkError};
use crate::policy::CompiledPolicy;
use crate::sysctl;
use masquerade::Masquerade;
use policy::KernelPolicy;
use routes::PodRoute;

/// Names of the node-global objects the kernel dataplane owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelNames {
    /// The host-only device that carries the gateway addresses.
    pub gateway_device: String,
    /// Its veth peer.
    pub gateway_peer: String,
    /// The nftables table (in families `ip` and `ip6`) for masquerading.
    pub nft_table: String,
}

impl Default for KernelNames {
    fn default() -> Self {
        KernelNames {
            gateway_device: "sarena_host".into(),
            gateway_peer: "sarena_net".into(),
            nft_table: "sarena".into(),
        }
    }
}

/// The kernel-routing dataplane. Create inside a tokio runtime.
#[derive(Debug, Clone)]
pub struct KernelDataplane {
    handle: Handle,
    names: KernelNames,
    /// Guard each pod's source addresses with nftables (off when the eBPF
    /// programs do it).
    antispoof: bool,
    /// What the masquerading tables are made of; held while `nft` runs, so
    /// the kernel's tables follow the order of the changes.
    masquerade: Arc<tokio::sync::Mutex<Masquerade>>,
    /// Enforce NetworkPolicy with nftables (off when the eBPF programs do it).
    enforce_policy: bool,
    /// What the policy table is made of; held while `nft` runs, like `masquerade`.
    policy: Arc<tokio::sync::Mutex<KernelPolicy>>,
    /// Where node-wide sysctl writes are recorded first (none: unrecorded).
    ledger: Option<HostLedger>,
}

impl KernelDataplane {
    /// Opens a netlink socket in the host netns; default object names.
    pub fn new() -> Result<Self, DataplaneError> {
        Self::with_names(KernelNames::default())
    }

    /// Like [`KernelDataplane::new`] with other object names (tests, several daemons).
    pub fn with_names(names: KernelNames) -> Result<Self, DataplaneError> {
        let handle = netlink::host_handle().map_err(|source| DataplaneError::Socket { source })?;
        Ok(KernelDataplane {
            handle,
            names,
            antispoof: true,
            masquerade: Arc::default(),
            enforce_policy: true,
            policy: Arc::default(),
            ledger: None,
        })
    }

    /// Records every node-wide sysctl this dataplane overwrites (forwarding)
    /// in `ledger` before writing it, so an uninstall can put it back.
    pub fn with_ledger(mut self, ledger: HostLedger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Leaves source-address checks to someone else: for the eBPF
    /// dataplane's host stack, whose programs drop forged frames before the
    /// host stack sees them. ADD then runs no `nft` (3–5 ms per attach), and
    /// `setup` removes the anti-spoofing tables an earlier kernel-mode run
    /// may have left.
    pub fn without_antispoof(mut self) -> Self {
        self.antispoof = false;
        self
    }

    /// Leaves NetworkPolicy to someone else: for the eBPF dataplane's host
    /// stack, whose programs enforce it. `setup` then removes the policy
    /// table an earlier kernel-mode run may have left, and nothing else
    /// touches it.
    pub fn without_policy(mut self) -> Self {
        self.enforce_policy = false;
        self
    }

    /// The policy table's name.
    fn policy_table(&self) -> String {
        policy::table_name(&self.names.nft_table)
    }

    /// Makes the policy table what the policy state asks (after `change`
    /// to it), under the lock so the kernel follows the order of changes.
    /// Before the engine's first state: an attached endpoint is isolated
    /// both ways when a policy was enforced before this start.
    async fn update_policy(
        &self,
        change: impl FnOnce(&mut KernelPolicy),
        attached: Option<u32>,
    ) -> Result<(), DataplaneError> {
        if !self.enforce_policy {
            return Ok(());
        }
        let table = self.policy_table();
        let mut p = self.policy.lock().await;
        change(&mut p);
        let script = match (p.script(&table), attached) {
            (Some(script), _) => script,
            (None, Some(ifindex)) if p.enforced_before => {
                policy::fail_closed_script(&table, ifindex)
            }
            (None, _) => return Ok(()),
        };
        nft::run_off_worker(script).await
    }

    /// NetworkPolicy compiled anew: in effect when this returns.
    pub(crate) async fn set_policy(
        &self,
        compiled: Arc<CompiledPolicy>,
    ) -> Result<UpdateOutcome, DataplaneError> {
        if !self.enforce_policy {
            return Ok(UpdateOutcome::Ignored);
        }
        self.update_policy(|p| p.set_compiled(compiled), None)
            .await?;
        Ok(UpdateOutcome::Applied)
    }

    async fn ensure_gateway_device(&self, gateways: &[IpAddr]) -> Result<(), DataplaneError> {
        let (device, peer) = (
            self.names.gateway_device.as_str(),
            self.names.gateway_peer.as_str(),
        );
        let index = match self.link_index(device).await? {
            Some(index) => index,
            None => {
                let message = LinkVeth::new(device, peer)
                    .link_group(crate::links::LINK_GROUP)
                    .up()
                    .build();
                match self.handle.link().add(message).execute().await {
                    Ok(()) => {}
                    Err(e) if netlink::errno(&e) == Some(libc::EEXIST) => {}
                    Err(e) => return Err(NetlinkError::new("link add", device, e).into()),
                }
                self.link_index(device)
                    .await?
                    .ok_or_else(|| DataplaneError::NoLink {
                        ifname: device.into(),
                        reason: "the gateway device vanished after creation",
                    })?
            }
        };
        for name in [device, peer] {
            if let Some(i) = self.link_index(name).await? {
                self.handle
                    .link()
                    .set(LinkUnspec::new_with_index(i).up().build())
                    .execute()
                    .await
                    .map_err(|e| NetlinkError::new("link set up", name, e))?;
            }
        }
        for gateway in gateways {
            let prefix = if gateway.is_ipv4() { 32 } else { 128 };
            let mut request = self.handle.address().add(index, *gateway, prefix);
            if gateway.is_ipv6() {
                // Usable at once, not after duplicate-address detection.
                request
                    .message_mut()
                    .attributes
                    .push(AddressAttribute::Flags(AddressFlags::Nodad));
            }
            match request.execute().await {
                Ok(()) => {}
                Err(e) if netlink::errno(&e) == Some(libc::EEXIST) => {}
                Err(e) => return Err(NetlinkError::new("addr add", gateway, e).into()),
            }
        }
        Ok(())
    }

    /// Removes the node-global objects: the gateway pair (only if it
    /// carries Sarena's mark, [`crate::links::LINK_GROUP`]) and the nftables
    /// tables (per-pod routes go with their veths); the same code as the
    /// uninstall's, [`teardown::remove_host_stack`]. For tests.
    pub async fn teardown(&self) -> Result<(), DataplaneError> {
        for line in teardown::remove_host_stack_named(&self.names, false).await? {
            tracing::info!("{line}");
        }
        Ok(())
    }

    /// Takes `networks` as the cluster's (never masqueraded); in effect at
    /// once when masquerading is on, else remembered for when it is.
    pub(crate) async fn set_cluster_networks(
        &self,
        networks: &ClusterNetworks,
    ) -> Result<UpdateOutcome, DataplaneError> {
        let mut m = self.masquerade.lock().await;
        m.cluster = Some(networks.destinations());
        masquerade::apply_cluster(&self.names.nft_table, &m).await?;
        Ok(if m.enabled {
            UpdateOutcome::Applied
        } else {
            UpdateOutcome::Ignored
        })
    }

    /// The ifindexes of Sarena's links: those in its link group, and the
    /// host veths of `endpoints` (release 0.1.0's were unmarked).
    async fn sarenas_links(
        &self,
        endpoints: &[Endpoint],
    ) -> Result<std::collections::BTreeSet<u32>, DataplaneError> {
        let links = netlink::all_links(&self.handle).await?;
        Ok(links
            .iter()
            .filter(|l| netlink::link_group(l) == crate::links::LINK_GROUP)
            .map(|l| l.header.index)
            .chain(endpoints.iter().map(|e| e.spec.host_ifindex))
            .collect())
    }

    async fn link_index(&self, name: &str) -> Result<Option<u32>, DataplaneError> {
        Ok(netlink::link_index(&self.handle, name).await?)
    }

    /// The routes an endpoint should have, or `None` when its host veth is gone.
    async fn wanted(&self, endpoint: &Endpoint) -> Result<Option<Vec<PodRoute>>, DataplaneError> {
        let Some(oif) = self.link_index(&endpoint.spec.host_ifname).await? else {
            return Ok(None);
        };
        Ok(Some(
            endpoint
                .spec
                .addresses
                .iter()
                .map(|a| PodRoute {
                    dst: host_prefix(a.addr()),
                    oif,
                })
                .collect(),
        ))
    }
}

/// `ADDR/32` or `ADDR/128`.
fn host_prefix(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}

/// Routes keep no per-endpoint state: no programs, no counters, no shaping.
#[async_trait]
impl EndpointReports for KernelDataplane {
    async fn programs_status(
        &self,
        _endpoints: &[Endpoint],
    ) -> Result<Option<ProgramsStatus>, DataplaneError> {
        Ok(None)
    }

    async fn bandwidth_status(
        &self,
        _endpoint: &Endpoint,
    ) -> Result<Option<BandwidthStatus>, DataplaneError> {
        Ok(None)
    }

    fn endpoint_counters(
        &self,
        _endpoint: &Endpoint,
    ) -> Result<Option<EndpointCounters>, DataplaneError> {
        Ok(None)
    }

    /// Everything goes through the host stack here.
    fn host_routing(&self) -> Result<Option<HostRoutingStatus>, DataplaneError> {
        Ok(None)
    }
}

#[async_trait]
impl Dataplane for KernelDataplane {
    fn mode(&self) -> DataplaneMode {
        DataplaneMode::Kernel
    }

    async fn setup(&self, node: &NodeNetwork) -> Result<(), DataplaneError> {
        let ledger = self.ledger.as_ref();
        super::write_node_sysctl(ledger, "net/ipv4/ip_forward", "1")?;
        if node.pools.iter().any(|p| matches!(p, IpNet::V6(_))) {
            super::write_node_sysctl(ledger, "net/ipv6/conf/all/forwarding", "1")?;
        }
        self.ensure_gateway_device(&node.gateways).await?;
        {
            let mut m = self.masquerade.lock().await;
            (m.enabled, m.pools, m.exempt) =
                (node.masquerade, node.pools.clone(), node.exempt.clone());
            masquerade::apply(&self.names.nft_table, &m).await?;
        }
        if self.enforce_policy {
            // Kept as it is (kernel state, enforced through the restart)
            // until the engine's first state.
            let before = policy::exists(&self.policy_table()).await;
            self.policy.lock().await.enforced_before = before;
        } else {
            nft::run_off_worker(policy::remove_script(&self.policy_table())).await?;
        }
        if self.antispoof {
            antispoof::setup(&self.names.nft_table).await
        } else {
            antispoof::remove(&self.names.nft_table).await
        }
    }

    async fn attach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        super::pod_veth::check_pod_veth(&self.handle, endpoint).await?;
        let Some(wanted) = self.wanted(endpoint).await? else {
            return Err(DataplaneError::NoLink {
                ifname: endpoint.spec.host_ifname.clone(),
                reason: "the endpoint's host veth does not exist",
            });
        };
        sysctl::write(
            &sysctl::ipv4_conf(&endpoint.spec.host_ifname, "proxy_arp"),
            "1",
        )?;
        if let Some(route) = wanted.iter().find(|r| r.dst.addr().is_ipv6()) {
            gateway6::add(&self.handle, &endpoint.spec.host_ifname, route.oif).await?;
        }
        if self.antispoof {
            antispoof::guard(&self.names.nft_table, endpoint).await?;
        }
        // Before the routes: nothing reaches the pod before its policy.
        self.update_policy(|p| p.attached(endpoint), Some(endpoint.spec.host_ifindex))
            .await?;
        for route in &wanted {
            routes::add(&self.handle, route).await?;
        }
        Ok(())
    }

    /// Deletes the endpoint's routes by destination *and* its veth's ifindex
    /// (a newer endpoint's route to the same address stays); one request per
    /// address, whatever the number of pods on the node.
    async fn detach(&self, endpoint: &Endpoint) -> Result<(), DataplaneError> {
        for address in &endpoint.spec.addresses {
            let route = PodRoute {
                dst: host_prefix(address.addr()),
                oif: endpoint.spec.host_ifindex,
            };
            routes::remove(&self.handle, &route).await?;
        }
        if self.antispoof {
            antispoof::unguard(&self.names.nft_table, endpoint);
        }
        self.update_policy(|p| p.detached(endpoint), None).await
    }

    async fn reconcile(&self, endpoints: &[Endpoint]) -> Result<ReconcileReport, DataplaneError> {
        let mut report = ReconcileReport::default();
        let mut wanted = Vec::new();
        let mut live = Vec::new();
        for endpoint in endpoints {
            match self.wanted(endpoint).await? {
                Some(routes) => {
                    wanted.extend(routes.into_iter().map(|r| (r, endpoint)));
                    live.push(endpoint.clone());
                }
                None => {
                    tracing::warn!(host_ifname = %endpoint.spec.host_ifname, "endpoint's host veth is missing")
                }
            }
        }
        let present = routes::list(&self.handle).await?;
        let ours = self.sarenas_links(endpoints).await?;
        for route in &present {
            // A route of Sarena's protocol on another's device is left:
            // whoever made it, it is not Sarena's to remove.
            if !wanted.iter().any(|(w, _)| w == route) && ours.contains(&route.oif) {
                routes::remove(&self.handle, route).await?;
                report.removed.push(route.dst.to_string());
            }
        }
        for (route, endpoint) in &wanted {
            if !present.contains(route) {
                self.attach(endpoint).await?;
                report.attached.push(endpoint.spec.host_ifname.clone());
            }
        }
        report.attached.dedup();
        self.update_policy(|p| p.set_endpoints(&live), None).await?;
        if self.antispoof {
            antispoof::reconcile(&self.names.nft_table, &live).await?;
        }
        Ok(report)
    }
}
