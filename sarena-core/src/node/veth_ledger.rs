//! [`VethLedger`]: the durable record of veth pairs whose removal the daemon
//! owes, kept by the [`Registry`] in its store.
//!
//! [`WithDataplane`](super::WithDataplane) deletes an endpoint and records its
//! veth's removal in one transaction before DEL is answered, removes the link
//! afterwards and then settles the record; whatever a SIGKILL leaves owed is
//! removed at the next start ([`WithDataplane::start_up`](super::WithDataplane::start_up)).

use async_trait::async_trait;

use super::Registry;
use crate::api::{Attachment, DaemonError, Endpoint};
pub use crate::store::OwedRemoval;

/// Veth removals owed, durably.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait VethLedger: Send + Sync {
    /// Deletes `owner`'s endpoint and allocation (as
    /// [`Daemon::delete_endpoint`](crate::api::Daemon::delete_endpoint)) and
    /// records its veth's removal as owed, atomically; returns whether
    /// anything existed and the endpoint that did.
    async fn delete_owing_removal(
        &self,
        owner: Attachment,
    ) -> Result<(bool, Option<Endpoint>), DaemonError>;
    /// Every removal still owed.
    async fn owed_removals(&self) -> Result<Vec<OwedRemoval>, DaemonError>;
    /// Forgets removals that are done (their links are gone).
    async fn settle_removals(&self, done: Vec<OwedRemoval>) -> Result<(), DaemonError>;
}

#[async_trait]
impl VethLedger for Registry {
    async fn delete_owing_removal(
        &self,
        owner: Attachment,
    ) -> Result<(bool, Option<Endpoint>), DaemonError> {
        self.blocking(move |n| n.delete_endpoint_owing(&owner))
            .await
    }

    async fn owed_removals(&self) -> Result<Vec<OwedRemoval>, DaemonError> {
        Ok(self
            .inner
            .store
            .owed_removals()
            .map_err(super::NodeError::from)?)
    }

    async fn settle_removals(&self, done: Vec<OwedRemoval>) -> Result<(), DaemonError> {
        self.blocking(move |n| Ok(n.store.settle_removals(&done)?))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::EndpointSpec;
    use crate::api::{AllocateRequest, Daemon, EndpointCreate, Inspect as _, PodRef};
    use crate::node::NodeConfig;

    fn owner(cid: &str) -> Attachment {
        Attachment {
            container_id: cid.into(),
            ifname: "eth0".into(),
        }
    }

    async fn allocate(node: &Registry, cid: &str) -> Vec<ipnet::IpNet> {
        let alloc = node
            .allocate(AllocateRequest {
                owner: owner(cid),
                pod: PodRef::default(),
                requested: vec![],
                pool: None,
            })
            .await
            .unwrap();
        alloc.addresses.iter().map(|a| a.address).collect()
    }

    #[tokio::test]
    async fn deleting_an_endpoint_owes_its_veth_durably_a_bare_allocation_owes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
        let addresses = allocate(&node, "c1").await;
        let endpoint = node
            .create_endpoint(EndpointCreate {
                spec: EndpointSpec {
                    owner: owner("c1"),
                    pod: PodRef::default(),
                    host_ifname: "lxc0123456789ab".into(),
                    host_ifindex: 7,
                    host_mac: "02:00:00:00:00:01".parse().unwrap(),
                    pod_mac: "02:00:00:00:00:02".parse().unwrap(),
                    addresses,
                    netns: "/var/run/netns/x".into(),
                    bandwidth: None,
                    identity: Default::default(),
                },
            })
            .await
            .unwrap();
        allocate(&node, "c2").await;

        assert_eq!(
            node.delete_owing_removal(owner("c1")).await.unwrap(),
            (true, Some(endpoint))
        );
        assert_eq!(
            node.delete_owing_removal(owner("c2")).await.unwrap(),
            (true, None)
        );
        assert_eq!(
            node.delete_owing_removal(owner("c3")).await.unwrap(),
            (false, None)
        );
        assert!(node.ipam_state().await.unwrap().allocations.is_empty());
        let owed = vec![OwedRemoval {
            host_ifname: "lxc0123456789ab".into(),
            host_ifindex: 7,
        }];
        // As a SIGKILL leaves it: the record is still there after a reopen.
        drop(node);
        let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
        assert_eq!(node.owed_removals().await.unwrap(), owed);
        node.settle_removals(owed).await.unwrap();
        assert!(node.owed_removals().await.unwrap().is_empty());
    }
}
