//! Registry tests: configuration, every operation, leases, GC, reopen.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::api::{
    AllocateRequest, Allocation, ApiErrorKind, Daemon, DaemonError, EndpointCreate, EndpointSpec,
    GcRequest, Inspect as _, PodRef,
};
use crate::ipam::IpamError;

fn owner(c: &str) -> Attachment {
    Attachment {
        container_id: c.into(),
        ifname: "eth0".into(),
    }
}

fn req(c: &str) -> AllocateRequest {
    AllocateRequest {
        owner: owner(c),
        pod: PodRef::default(),
        requested: vec![],
        pool: None,
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn small_config(cidr: &str, lease: u64) -> NodeConfig {
    let text =
        format!("lease_seconds = {lease}\n[[ipam.pools]]\nname = \"p\"\ncidrs = [\"{cidr}\"]\n");
    NodeConfig::from_toml_str(&text).unwrap()
}

fn ep_req(alloc: &Allocation) -> EndpointCreate {
    EndpointCreate {
        spec: EndpointSpec::for_tests(
            alloc.owner.clone(),
            &format!("lxc{}", alloc.owner.container_id),
            alloc.addresses.iter().map(|a| a.address).collect(),
        ),
    }
}

/// The node's own error inside a [`DaemonError`] from the node.
fn node_error(e: DaemonError) -> NodeError {
    match e {
        DaemonError::Local { source, .. } => match source.downcast::<NodeError>() {
            Ok(e) => *e,
            Err(other) => panic!("not a node error: {other}"),
        },
        other => panic!("not a node error: {other}"),
    }
}

/// A node with a settable clock.
fn node_at(dir: &Path, config: NodeConfig) -> (Registry, Arc<AtomicU64>) {
    let now = Arc::new(AtomicU64::new(1_000));
    let clock_now = now.clone();
    let node = Registry::open_with_clock(
        dir,
        config,
        Arc::new(move || clock_now.load(Ordering::SeqCst)),
    )
    .unwrap();
    (node, now)
}

#[test]
fn default_config_toml_is_the_default() {
    let parsed = NodeConfig::from_toml_str(DEFAULT_CONFIG_TOML).unwrap();
    assert_eq!(parsed, NodeConfig::default());
    assert_eq!(
        NodeConfig::from_toml_str("").unwrap(),
        NodeConfig::default(),
        "every key optional"
    );
    let d = NodeConfig::default();
    assert_eq!(
        (d.mtu, d.dataplane, d.masquerade, d.lease_seconds),
        (None, crate::dataplane::DataplaneMode::Ebpf, None, 180)
    );
    assert_eq!(d.daemon_config().mtu, 1500, "unresolved: 1500");
    let alloc = Allocator::new(&d.ipam).unwrap();
    assert_eq!(alloc.pools()[0].cidrs[0].gateway, ip("10.200.0.1"));
}

#[test]
fn config_errors_name_the_field() {
    let invalid = |text: &str| match NodeConfig::from_toml_str(text).unwrap_err() {
        ConfigError::Invalid { field, .. } => field,
        other => crate::error_chain(&other),
    };
    assert_eq!(invalid("mtu = 100"), "mtu");
    assert_eq!(
        invalid("mtu = 1000\n[[ipam.pools]]\nname='a'\ncidrs=['fd00::/64']"),
        "mtu"
    );
    assert_eq!(
        invalid("[[ipam.pools]]\nname='a'\ncidrs=['10.0.0.0/24']\nreserved=['nope']"),
        "ipam.pools[0].reserved[0]"
    );
    assert!(invalid("dataplane = 'xdp'").contains("dataplane"));
    assert!(invalid("colour = 1").contains("colour"));
    assert!(invalid("[[ipam.pools]]\nname='a'\ncidrs=['10.0.0.0/33']").contains("cidrs"));
    let k = NodeConfig::from_toml_str("dataplane = 'kernel'\nmasquerade = true").unwrap();
    assert_eq!(k.daemon_config().dataplane, "kernel");
    assert!(k.masquerade_enabled());
}

#[test]
fn masquerading_is_on_by_default_in_kubernetes_mode_only() {
    let plain = NodeConfig::default();
    assert!(!plain.masquerade_enabled());
    assert!(!plain.node_network().unwrap().masquerade);
    let k8s = NodeConfig::from_toml_str(
        "[kubernetes]
enabled = true
",
    )
    .unwrap();
    assert!(k8s.masquerade_enabled());
    let off = NodeConfig::from_toml_str(
        "masquerade = false
[kubernetes]
enabled = true
",
    )
    .unwrap();
    assert!(!off.masquerade_enabled(), "an explicit setting wins");
    let cfg = NodeConfig::from_toml_str(
        "masquerade = true
cluster_cidrs = ['10.244.0.0/16']
no_masquerade = ['192.168.0.0/16']
",
    )
    .unwrap();
    let network = cfg.node_network().unwrap();
    assert!(network.masquerade);
    let exempt: Vec<String> = network.exempt.iter().map(|n| n.to_string()).collect();
    assert_eq!(exempt, ["10.244.0.0/16", "192.168.0.0/16"]);
    let err = NodeConfig::from_toml_str("no_masquerade = ['10.0.0.0/40']").unwrap_err();
    assert!(crate::error_chain(&err).contains("no_masquerade"), "{err}");
}

#[tokio::test]
async fn allocate_is_idempotent_and_durable_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (node, clock) = node_at(dir.path(), NodeConfig::default());
    let at = |t| clock.store(t, Ordering::SeqCst);
    at(1_000);
    let a = node.allocate(req("c1")).await.unwrap();
    assert_eq!(a.addresses[0].address.to_string(), "10.200.0.2/16");
    assert_eq!(a.lease_expires_at, Some(1_180));
    assert_eq!(a.routes.len(), 2);
    assert_eq!(a.routes[0].dst.to_string(), "10.200.0.1/32");
    assert_eq!(a.routes[1].dst.to_string(), "0.0.0.0/0");
    assert_eq!(a.routes[1].gw, Some(ip("10.200.0.1")));
    at(2_000);
    let again = node.allocate(req("c1")).await.unwrap();
    assert_eq!(again.addresses, a.addresses, "same owner, same addresses");
    assert_eq!(
        again.lease_expires_at,
        Some(2_180),
        "a retried ADD renews the lease"
    );
    at(1_001);
    let b = node.allocate(req("c2")).await.unwrap();
    assert_eq!(b.addresses[0].address.to_string(), "10.200.0.3/16");
    at(1_002);
    node.allocate(req("c3")).await.unwrap();
    assert!(node.release(owner("c2")).await.unwrap());
    drop(node);
    let (node, clock) = node_at(dir.path(), NodeConfig::default());
    assert_eq!(node.open_report().allocations, 2);
    clock.store(3_000, Ordering::SeqCst);
    assert_eq!(
        node.allocate(req("c1")).await.unwrap().addresses,
        a.addresses
    );
    let c = node.allocate(req("c4")).await.unwrap();
    assert_eq!(
        c.addresses[0].address.to_string(),
        "10.200.0.5/16",
        "resumes after the latest"
    );
}

#[tokio::test]
async fn static_requests_conflicts_and_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let (node, clock) = node_at(dir.path(), NodeConfig::default());
    clock.store(1, Ordering::SeqCst);
    let mut r = req("c1");
    r.requested = vec![ip("10.200.5.5")];
    assert_eq!(
        node.allocate(r.clone()).await.unwrap().addresses[0]
            .address
            .to_string(),
        "10.200.5.5/16"
    );
    let mut other = req("c2");
    other.requested = vec![ip("10.200.5.5")];
    let err = node_error(node.allocate(other).await.unwrap_err());
    assert!(
        matches!(&err, NodeError::AddressOwned { owner, .. } if *owner == super::tests::owner("c1"))
    );
    assert_eq!(err.kind(), ApiErrorKind::Conflict);
    r.requested = vec![ip("10.200.5.6")];
    assert!(matches!(
        node.allocate(r).await.map_err(node_error),
        Err(NodeError::AllocationMismatch { .. })
    ));
    let mut gw = req("c3");
    gw.requested = vec![ip("10.200.0.1")];
    assert_eq!(
        node_error(node.allocate(gw).await.unwrap_err()).kind(),
        ApiErrorKind::BadRequest
    );
    let mut empty = req("");
    empty.owner.container_id = " ".into();
    assert_eq!(
        node_error(node.allocate(empty).await.unwrap_err()).kind(),
        ApiErrorKind::BadRequest
    );
    let mut named = req("c4");
    named.pool = Some("nope".into());
    assert_eq!(
        node_error(node.allocate(named).await.unwrap_err()).kind(),
        ApiErrorKind::BadRequest
    );
    assert_eq!(
        node.ipam_state().await.unwrap().allocations.len(),
        1,
        "failures left nothing"
    );
}

#[tokio::test]
async fn node_errors_keep_their_source_and_answer_as_api_errors() {
    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), small_config("10.0.0.0/30", 180)).unwrap();
    node.allocate(req("c1")).await.unwrap();
    let err = node.allocate(req("c2")).await.unwrap_err();
    let Some(source) = err.local_source::<NodeError>() else {
        panic!("not a node error: {err:?}");
    };
    assert!(
        matches!(source, NodeError::Ipam(IpamError::Exhausted { .. })),
        "{err:?}"
    );
    let chained = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(
        chained,
        Some(source.to_string()),
        "the node error is the source"
    );
    let body = err.to_body();
    assert_eq!(body.kind, ApiErrorKind::PoolExhausted);
    assert_eq!(body.message, crate::error_chain(source));
    assert_eq!(
        crate::error_chain(&err),
        crate::error_chain(&DaemonError::api(body.kind, body.message)),
        "reads as the same answer over the wire would"
    );
}

#[tokio::test]
async fn exhausted_pool_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), small_config("10.0.0.0/30", 180)).unwrap();
    node.allocate(req("c1")).await.unwrap();
    let err = node.allocate(req("c2")).await.unwrap_err();
    assert_eq!(err.kind(), Some(ApiErrorKind::PoolExhausted));
    assert!(crate::error_chain(&err).contains("\"p\""), "{err}");
    assert!(node.release(owner("c1")).await.unwrap());
    assert!(!node.release(owner("c1")).await.unwrap(), "double release");
    node.allocate(req("c2")).await.unwrap();
}

#[tokio::test]
async fn endpoint_lifecycle_through_the_trait() {
    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    assert!(node.health().await.unwrap().ready);
    assert_eq!(node.config().await.unwrap().mtu, 1500);
    let a = node.allocate(req("c1")).await.unwrap();
    let missing = node
        .create_endpoint(ep_req(&node.allocate(req("c2")).await.unwrap()))
        .await;
    assert!(missing.is_ok());
    let mut wrong = ep_req(&a);
    wrong.spec.addresses = vec!["10.200.9.9/16".parse().unwrap()];
    assert_eq!(
        node.create_endpoint(wrong).await.unwrap_err().kind(),
        Some(ApiErrorKind::Conflict)
    );
    let mut none = ep_req(&a);
    none.spec.owner = owner("ghost");
    assert_eq!(
        node.create_endpoint(none).await.unwrap_err().kind(),
        Some(ApiErrorKind::NotFound)
    );
    let ep = node.create_endpoint(ep_req(&a)).await.unwrap();
    assert_eq!(
        node.create_endpoint(ep_req(&a)).await.unwrap(),
        ep,
        "idempotent"
    );
    let mut changed = ep_req(&a);
    changed.spec.host_ifindex = 99;
    assert_eq!(
        node.create_endpoint(changed).await.unwrap_err().kind(),
        Some(ApiErrorKind::Conflict)
    );
    assert_eq!(node.endpoint(owner("c1")).await.unwrap(), Some(ep.clone()));
    assert_eq!(node.endpoints().await.unwrap().len(), 2);
    let state = node.ipam_state().await.unwrap();
    let rec = state
        .allocations
        .iter()
        .find(|r| r.owner == owner("c1"))
        .unwrap();
    assert_eq!(rec.lease_expires_at, None, "endpoint cleared the lease");
    assert_eq!(state.pools[0].allocated, 2);
    assert_eq!(
        node.release(owner("c1")).await.unwrap_err().kind(),
        Some(ApiErrorKind::Conflict)
    );
    assert!(node.delete_endpoint(owner("c1")).await.unwrap());
    assert!(!node.delete_endpoint(owner("c1")).await.unwrap());
    assert_eq!(node.endpoint(owner("c1")).await.unwrap(), None);
    assert_eq!(node.ipam_state().await.unwrap().pools[0].allocated, 1);
    node.allocate(req("c3")).await.unwrap();
    assert!(
        node.delete_endpoint(owner("c3")).await.unwrap(),
        "bare allocation released too"
    );
}

#[tokio::test]
async fn leases_expire_only_without_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (node, clock) = node_at(dir.path(), small_config("10.0.0.0/24", 100));
    let at = |t| clock.store(t, Ordering::SeqCst);
    at(1_000);
    let a = node.allocate(req("bare")).await.unwrap();
    let b = node.allocate(req("held")).await.unwrap();
    at(1_010);
    node.create_endpoint(ep_req(&b)).await.unwrap();
    at(1_050);
    node.allocate(req("late")).await.unwrap();
    assert_eq!(node.expire_leases(1_099).unwrap(), Vec::<Attachment>::new());
    assert_eq!(node.expire_leases(1_100).unwrap(), vec![owner("bare")]);
    assert!(node.expire_leases(1_100).unwrap().is_empty());
    at(1_100);
    drop(node);
    let (node, _) = node_at(dir.path(), small_config("10.0.0.0/24", 100));
    assert_eq!(
        node.expire_leases(10_000).unwrap(),
        vec![owner("late")],
        "lease survives reopen"
    );
    assert!(node.endpoint(owner("held")).await.unwrap().is_some());
    let snap = node.ipam_state().await.unwrap();
    assert_eq!(snap.allocations.len(), 1);
    assert!(
        !snap
            .allocations
            .iter()
            .any(|r| r.address == a.addresses[0].address.addr())
    );
    let zero = tempfile::tempdir().unwrap();
    let (node, clock) = node_at(zero.path(), small_config("10.0.0.0/24", 0));
    clock.store(5, Ordering::SeqCst);
    assert_eq!(
        node.allocate(req("x")).await.unwrap().lease_expires_at,
        None
    );
    assert!(
        node.expire_leases(u64::MAX).unwrap().is_empty(),
        "0 disables expiry"
    );
}

#[tokio::test]
async fn gc_removes_everything_not_listed() {
    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    for c in ["keep-ep", "drop-ep", "keep-bare", "drop-bare"] {
        let a = node.allocate(req(c)).await.unwrap();
        if c.ends_with("ep") {
            node.create_endpoint(ep_req(&a)).await.unwrap();
        }
    }
    let report = node
        .gc(GcRequest {
            valid: vec![owner("keep-ep"), owner("keep-bare")],
        })
        .await
        .unwrap();
    assert_eq!(report.endpoints_removed, vec![owner("drop-ep")]);
    assert_eq!(report.allocations_released, vec![owner("drop-bare")]);
    drop(node);
    let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    let owners: HashSet<Attachment> = node
        .ipam_state()
        .await
        .unwrap()
        .allocations
        .into_iter()
        .map(|r| r.owner)
        .collect();
    assert_eq!(
        owners,
        [owner("keep-ep"), owner("keep-bare")].into_iter().collect()
    );
    assert_eq!(node.endpoints().await.unwrap().len(), 1);
}

#[tokio::test]
async fn allocations_outside_new_pools_are_kept_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (node, clock) = node_at(dir.path(), small_config("10.0.0.0/24", 100));
    clock.store(1, Ordering::SeqCst);
    let a = node.allocate(req("old")).await.unwrap();
    drop(node);
    let (node, clock) = node_at(dir.path(), small_config("10.1.0.0/24", 100));
    let report = node.open_report();
    assert_eq!(report.outside_pools.len(), 1);
    assert_eq!(report.outside_pools[0].1, a.addresses[0].address.addr());
    clock.store(2, Ordering::SeqCst);
    assert_eq!(
        node.allocate(req("old")).await.unwrap().addresses,
        a.addresses,
        "kept"
    );
    assert!(node.delete_endpoint(owner("old")).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_allocations_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), small_config("10.0.0.0/26", 180)).unwrap();
    let tasks: Vec<_> = (0..80)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move { node.allocate(req(&format!("c{i}"))).await })
        })
        .collect();
    let mut seen = HashSet::new();
    let (mut ok, mut exhausted) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(a) => {
                ok += 1;
                assert!(seen.insert(a.addresses[0].address.addr()));
            }
            Err(e) => {
                assert_eq!(e.kind(), Some(ApiErrorKind::PoolExhausted));
                exhausted += 1;
            }
        }
    }
    assert_eq!(
        (ok, exhausted),
        (61, 19),
        "a /26 has 61 usable addresses besides the gateway"
    );
}

#[test]
fn config_file_is_loaded_and_missing_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sarena.toml");
    std::fs::write(&path, "mtu = 9000\nlease_seconds = 30\n").unwrap();
    let cfg = NodeConfig::load(&path).unwrap();
    assert_eq!((cfg.mtu, cfg.lease_seconds), (Some(9000), 30));
    let missing = dir.path().join("nope.toml");
    let err = NodeConfig::load(&missing).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Read { path, .. } if *path == missing),
        "{err}"
    );
}

#[tokio::test]
async fn new_pods_get_the_mtu_set_at_run_time() {
    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), small_config("10.0.0.0/30", 180)).unwrap();
    assert_eq!(node.config().await.unwrap().mtu, 1500, "unset: the default");
    assert_eq!(node.set_mtu(9000), 1500, "returns the one before");
    assert_eq!(node.mtu(), 9000);
    assert_eq!(
        node.config().await.unwrap().mtu,
        9000,
        "what the plugin reads"
    );
}
