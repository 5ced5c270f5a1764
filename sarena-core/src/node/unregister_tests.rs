//! `unregister_endpoint`: the endpoint goes, the allocation stays (under a
//! lease), durably.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::api::{AllocateRequest, Daemon, EndpointCreate, EndpointSpec, Inspect as _, PodRef};

fn owner() -> Attachment {
    Attachment {
        container_id: "c1".into(),
        ifname: "eth0".into(),
    }
}

fn open_node(dir: &Path, lease: u64, now: Arc<AtomicU64>) -> Registry {
    let config = NodeConfig::from_toml_str(&format!(
        "lease_seconds = {lease}\n[[ipam.pools]]\nname = \"p\"\ncidrs = [\"10.9.0.0/24\"]\n"
    ))
    .unwrap();
    Registry::open_with_clock(dir, config, Arc::new(move || now.load(Ordering::SeqCst))).unwrap()
}

async fn registered(node: &Registry) -> Endpoint {
    let alloc = node
        .allocate(AllocateRequest {
            owner: owner(),
            pod: PodRef::default(),
            requested: vec![],
            pool: None,
        })
        .await
        .unwrap();
    node.create_endpoint(EndpointCreate {
        spec: EndpointSpec {
            owner: owner(),
            pod: PodRef::default(),
            host_ifname: "lxc0123456789ab".into(),
            host_ifindex: 7,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
            addresses: alloc.addresses.iter().map(|a| a.address).collect(),
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
            identity: Default::default(),
        },
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_endpoint_goes_and_the_address_stays_under_a_lease() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_000));
    let node = open_node(dir.path(), 60, now.clone());
    let endpoint = registered(&node).await;
    let address = endpoint.spec.addresses[0];

    now.store(2_000, Ordering::SeqCst);
    let removed = node.unregister_endpoint(owner()).await.unwrap();
    assert_eq!(removed, Some(endpoint));
    assert_eq!(node.endpoint(owner()).await.unwrap(), None);
    let state = node.ipam_state().await.unwrap();
    assert_eq!(state.allocations.len(), 1);
    assert_eq!(state.allocations[0].lease_expires_at, Some(2_060));
    assert_eq!(node.unregister_endpoint(owner()).await.unwrap(), None);

    // Durable: a restarted node still holds the address for the same owner,
    // and a repeated ADD's allocation gets it back.
    drop(node);
    let node = open_node(dir.path(), 60, now.clone());
    assert_eq!(node.endpoint(owner()).await.unwrap(), None);
    let again = registered(&node).await;
    assert_eq!(again.spec.addresses, vec![address]);
    let state = node.ipam_state().await.unwrap();
    assert_eq!(state.allocations[0].lease_expires_at, None);
}

#[tokio::test]
async fn a_kept_allocation_nobody_claims_expires() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_000));
    let node = open_node(dir.path(), 60, now.clone());
    registered(&node).await;
    node.unregister_endpoint(owner()).await.unwrap();
    assert_eq!(node.expire_leases(1_059).unwrap(), vec![]);
    assert_eq!(node.expire_leases(1_060).unwrap(), vec![owner()]);
    assert!(node.ipam_state().await.unwrap().allocations.is_empty());
}

#[tokio::test]
async fn an_identity_is_recorded_durably_and_a_repeated_add_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(1_000));
    let node = open_node(dir.path(), 60, now.clone());
    let endpoint = registered(&node).await;
    let identity = crate::api::PodIdentity {
        labels: [("app".to_owned(), "web".to_owned())].into(),
        namespace_labels: Default::default(),
    };
    let updated = node.set_identity(&owner(), &identity).unwrap().unwrap();
    assert_eq!(updated.spec.identity, identity);
    // The plugin's repeated ADD (without labels) is the same endpoint: kept as is.
    let again = node
        .create_endpoint(EndpointCreate {
            spec: endpoint.spec.clone(),
        })
        .await
        .unwrap();
    assert_eq!(again.spec.identity, identity);
    drop(node);
    let node = open_node(dir.path(), 60, now);
    let reopened = node.registered_endpoint(&owner()).unwrap().unwrap();
    assert_eq!(reopened.spec.identity, identity);
    let stranger = Attachment {
        container_id: "gone".into(),
        ifname: "eth0".into(),
    };
    assert!(node.set_identity(&stranger, &identity).unwrap().is_none());
}
