//! A custom address policy plugged in through sarena-core's [`Daemon`]
//! trait: StatefulSet-style pods (`<name>-<ordinal>`) of the `db` namespace
//! always get the same address, `10.252.1.<10 + ordinal>`, from their own
//! pool; every other pod gets the next free address of the default pool.
//!
//! The policy wraps [`Registry`] (IPAM + registry) and only rewrites the
//! allocation request; the node still validates it, keeps it durable and
//! refuses conflicts. The same wrapper can be served by a daemon or handed
//! to [`sarena_core::plugin::Plugin::new`] in process. Needs no privilege.
//!
//! ```text
//! cargo run -p sarena-examples --example custom_ipam
//! ```

use std::net::{IpAddr, Ipv4Addr};

use async_trait::async_trait;
use sarena_core::api::{
    AllocateRequest, Allocation, Attachment, Daemon, DaemonConfig, DaemonError, DaemonStatus,
    Deleted, Endpoint, EndpointCreate, EndpointStats, GcReport, GcRequest, Health, Inspect,
    IpamState, PodRef,
};
use sarena_core::node::{NodeConfig, Registry};

const CONFIG: &str = r#"
dataplane = "none"
[[ipam.pools]]
name = "default"
cidrs = ["10.252.0.0/24"]
[[ipam.pools]]
name = "stateful"
cidrs = ["10.252.1.0/24"]
namespaces = ["db"]
"#;

/// Pins `db/<name>-<n>` to `10.252.1.(10 + n)`; everything else as the node decides.
struct OrdinalAddresses {
    node: Registry,
}

impl OrdinalAddresses {
    fn pinned(pod: &PodRef) -> Option<IpAddr> {
        if pod.namespace.as_deref() != Some("db") {
            return None;
        }
        let (_, ordinal) = pod.name.as_deref()?.rsplit_once('-')?;
        let host = 10u8.checked_add(ordinal.parse().ok()?)?;
        Some(IpAddr::V4(Ipv4Addr::new(10, 252, 1, host)))
    }
}

#[async_trait]
impl Daemon for OrdinalAddresses {
    async fn allocate(&self, mut req: AllocateRequest) -> Result<Allocation, DaemonError> {
        if req.requested.is_empty()
            && let Some(address) = Self::pinned(&req.pod)
        {
            req.requested = vec![address];
        }
        self.node.allocate(req).await
    }
    // Everything else is the node's.
    async fn config(&self) -> Result<DaemonConfig, DaemonError> {
        self.node.config().await
    }
    async fn health(&self) -> Result<Health, DaemonError> {
        self.node.health().await
    }
    async fn release(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.node.release(owner).await
    }
    async fn create_endpoint(&self, req: EndpointCreate) -> Result<Endpoint, DaemonError> {
        self.node.create_endpoint(req).await
    }
    async fn delete_endpoint(&self, owner: Attachment) -> Result<bool, DaemonError> {
        self.node.delete_endpoint(owner).await
    }
    async fn unregister_endpoint(
        &self,
        owner: Attachment,
    ) -> Result<Option<Endpoint>, DaemonError> {
        self.node.unregister_endpoint(owner).await
    }
    async fn endpoint(&self, owner: Attachment) -> Result<Option<Endpoint>, DaemonError> {
        self.node.endpoint(owner).await
    }
    async fn delete_endpoint_and_veth(&self, owner: Attachment) -> Result<Deleted, DaemonError> {
        self.node.delete_endpoint_and_veth(owner).await
    }
    async fn endpoint_stats_of(
        &self,
        owner: Attachment,
    ) -> Result<Option<EndpointStats>, DaemonError> {
        self.node.endpoint_stats_of(owner).await
    }
    async fn gc(&self, req: GcRequest) -> Result<GcReport, DaemonError> {
        self.node.gc(req).await
    }
}

/// The operator's reads (served by a daemon with `sarena` and `/metrics`):
/// all the node's.
#[async_trait]
impl Inspect for OrdinalAddresses {
    async fn endpoints(&self) -> Result<Vec<Endpoint>, DaemonError> {
        self.node.endpoints().await
    }
    async fn ipam_state(&self) -> Result<IpamState, DaemonError> {
        self.node.ipam_state().await
    }
    async fn status(&self) -> Result<DaemonStatus, DaemonError> {
        self.node.status().await
    }
    async fn endpoint_stats(&self) -> Result<Vec<EndpointStats>, DaemonError> {
        self.node.endpoint_stats().await
    }

    async fn policy_endpoints(&self) -> Result<Vec<sarena_core::api::PolicyEndpoint>, DaemonError> {
        self.node.policy_endpoints().await
    }

    async fn policy_explain(
        &self,
        query: sarena_core::api::PolicyQuery,
    ) -> Result<sarena_core::api::PolicyExplanation, DaemonError> {
        self.node.policy_explain(query).await
    }
}

/// The request the plugin's ADD makes for pod `namespace/name` in container `cid`.
fn request(cid: &str, namespace: &str, name: &str) -> AllocateRequest {
    AllocateRequest {
        owner: Attachment {
            container_id: cid.into(),
            ifname: "eth0".into(),
        },
        pod: PodRef {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: None,
        },
        requested: vec![],
        pool: None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let state_dir = std::env::temp_dir().join(format!("sarena-ipam-{}", std::process::id()));
    let node = Registry::open(&state_dir, NodeConfig::from_toml_str(CONFIG)?)?;
    let ipam = OrdinalAddresses { node };

    let pods = [
        ("db", "postgres-0"),
        ("db", "postgres-2"),
        ("web", "frontend-x7k2"),
    ];
    for round in ["first", "again"] {
        for (i, (namespace, name)) in pods.iter().enumerate() {
            let req = request(&format!("{round}-{i}"), namespace, name);
            let owner = req.owner.clone();
            let got = ipam.allocate(req).await?;
            let a = &got.addresses[0];
            println!(
                "{round}: {namespace}/{name} -> {} (pool {})",
                a.address, a.pool
            );
            // The pod goes away (a restart), so the next round can have it back.
            ipam.release(owner).await?;
        }
    }
    // A second pod claiming an ordinal that is taken is refused by the node.
    ipam.allocate(request("holder", "db", "redis-1")).await?;
    match ipam.allocate(request("clash", "db", "mysql-1")).await {
        Ok(got) => println!("db/mysql-1 -> {:?}: not refused!", got.addresses),
        Err(refused) => println!("db/mysql-1 refused: {:?}", refused.kind()),
    }
    drop(ipam);
    std::fs::remove_dir_all(&state_dir)?;
    Ok(())
}
