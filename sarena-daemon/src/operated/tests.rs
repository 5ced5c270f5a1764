//! [`Operated`] over a `MockNodeApi`: what it adds to the status and what it counts.

use ipnet::IpNet;
use sarena_core::api::{ApiErrorKind, Health, IpamState, MockNodeApi};

use super::*;

fn status() -> DaemonStatus {
    let health = Health {
        ready: true,
        message: String::new(),
    };
    DaemonStatus::from_parts(health, "none", &IpamState::default(), 0)
}

#[tokio::test]
async fn status_has_the_queue_and_kubernetes() {
    let dir = tempfile::tempdir().unwrap();
    let queue = DeleteQueue::new(dir.path().join("q"));
    queue
        .enqueue(&Attachment {
            container_id: "gone".into(),
            ifname: "eth0".into(),
        })
        .unwrap();
    let mut inner = MockNodeApi::new();
    inner.expect_status().returning(|| Ok(status()));
    let operated = Operated::new(Arc::new(inner)).with_delete_queue(queue);

    let got = operated.status().await.unwrap();
    assert_eq!(got.version, env!("CARGO_PKG_VERSION"));
    let q = got.delete_queue.unwrap();
    assert_eq!(q.pending, 1);
    assert!(q.dir.ends_with("/q"), "{}", q.dir);
    assert_eq!(got.kubernetes, None);

    let cidr: IpNet = "10.244.1.0/24".parse().unwrap();
    operated.set_kubernetes(Some(KubernetesStatus {
        node_name: "n1".into(),
        pod_cidrs: vec![cidr],
    }));
    let k = operated.status().await.unwrap().kubernetes.unwrap();
    assert_eq!((k.node_name.as_str(), k.pod_cidrs), ("n1", vec![cidr]));
}

#[tokio::test]
async fn operations_are_counted_by_outcome() {
    let mut inner = MockNodeApi::new();
    inner
        .expect_release()
        .returning(|_| Err(DaemonError::api(ApiErrorKind::Conflict, "in use")));
    inner.expect_delete_endpoint_and_veth().returning(|_| {
        Ok(Deleted {
            deleted: false,
            veth_removal: false,
        })
    });
    let metrics = Arc::new(Metrics::new(1));
    let operated = Operated::new(Arc::new(inner)).with_metrics(metrics.clone());
    let owner = Attachment {
        container_id: "c".into(),
        ifname: "eth0".into(),
    };
    assert!(operated.release(owner.clone()).await.is_err());
    assert!(
        !operated
            .delete_endpoint_and_veth(owner)
            .await
            .unwrap()
            .deleted
    );

    let mut probe = MockNodeApi::new();
    probe.expect_status().returning(|| Ok(status()));
    probe.expect_endpoint_stats().returning(|| Ok(vec![]));
    let text = metrics.render(&probe).await.unwrap();
    assert!(
        text.contains(r#"sarena_operations_total{operation="release",outcome="conflict"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"sarena_operations_total{operation="endpoint_delete",outcome="noop"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn unregister_is_passed_through_not_emulated() {
    // The trait's default would delete the endpoint, address and all.
    let mut inner = MockNodeApi::new();
    inner
        .expect_unregister_endpoint()
        .times(1)
        .returning(|_| Ok(None));
    inner.expect_delete_endpoint().never();
    inner.expect_endpoint().never();
    let operated = Operated::new(Arc::new(inner));
    let owner = Attachment {
        container_id: "c1".into(),
        ifname: "eth0".into(),
    };
    assert_eq!(operated.unregister_endpoint(owner).await.unwrap(), None);
}
