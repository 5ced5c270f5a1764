use super::*;
use crate::api::{ApiErrorKind, EndpointSpec, MockNodeApi};
use crate::dataplane::{DataplaneError, DataplaneMode, MockDataplane};
use crate::node::MockVethLedger;
use mockall::Sequence;

fn create() -> EndpointCreate {
    let owner = Attachment {
        container_id: "c1".into(),
        ifname: "eth0".into(),
    };
    EndpointCreate {
        spec: EndpointSpec::for_tests(
            owner,
            "lxc0123456789ab",
            vec!["10.200.0.5/16".parse().unwrap()],
        ),
    }
}

fn endpoint() -> Endpoint {
    create().into_endpoint(1)
}

fn wrap(registry: MockNodeApi, mut dataplane: MockDataplane) -> WithDataplane {
    dataplane.expect_mode().return_const(DataplaneMode::Kernel);
    WithDataplane::new(Arc::new(registry), Arc::new(dataplane))
}

#[tokio::test]
async fn create_attaches_before_committing() {
    let mut seq = Sequence::new();
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    dataplane
        .expect_attach()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    registry
        .expect_create_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(endpoint()));
    dataplane.expect_detach().never();
    let daemon = wrap(registry, dataplane);
    assert_eq!(daemon.create_endpoint(create()).await.unwrap(), endpoint());
}

#[tokio::test]
async fn failed_attach_registers_nothing_and_detaches_what_it_did() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    dataplane.expect_attach().returning(|_| {
        Err(DataplaneError::Netlink(crate::NetlinkError::new(
            "route add",
            "x",
            rtnetlink::Error::RequestFailed,
        )))
    });
    dataplane
        .expect_detach()
        .times(1)
        .withf(|e| e.spec.host_ifname == "lxc0123456789ab")
        .returning(|_| Ok(()));
    registry.expect_create_endpoint().never();
    let err = wrap(registry, dataplane)
        .create_endpoint(create())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ApiErrorKind::Internal));
    let Some(AttachError {
        host_ifname,
        source,
    }) = err.local_source::<AttachError>()
    else {
        panic!("not an attach error: {err:?}");
    };
    assert_eq!(host_ifname, "lxc0123456789ab");
    let chained = std::error::Error::source(&err)
        .and_then(std::error::Error::source)
        .map(ToString::to_string);
    assert_eq!(
        chained,
        Some(source.to_string()),
        "the dataplane's error is the source"
    );
    let body = err.to_body();
    assert_eq!(body.kind, ApiErrorKind::Internal);
    assert!(
        body.message.starts_with("attaching lxc0123456789ab: "),
        "{}",
        body.message
    );
}

#[tokio::test]
async fn failed_commit_detaches_again() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    dataplane.expect_attach().returning(|_| Ok(()));
    registry
        .expect_create_endpoint()
        .returning(|_| Err(DaemonError::api(ApiErrorKind::Conflict, "no allocation")));
    dataplane.expect_detach().times(1).returning(|_| Ok(()));
    let err = wrap(registry, dataplane)
        .create_endpoint(create())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(ApiErrorKind::Conflict));
}

#[tokio::test]
async fn delete_detaches_what_existed_and_tolerates_detach_errors() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    registry
        .expect_endpoint()
        .returning(|_| Ok(Some(endpoint())));
    registry.expect_delete_endpoint().returning(|_| Ok(true));
    dataplane.expect_detach().times(1).returning(|_| {
        Err(DataplaneError::Netlink(crate::NetlinkError::new(
            "route del",
            "x",
            rtnetlink::Error::RequestFailed,
        )))
    });
    assert!(
        wrap(registry, dataplane)
            .delete_endpoint(create().spec.owner)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn delete_of_unknown_endpoint_detaches_nothing() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    registry.expect_endpoint().returning(|_| Ok(None));
    registry.expect_delete_endpoint().returning(|_| Ok(false));
    dataplane.expect_detach().never();
    assert!(
        !wrap(registry, dataplane)
            .delete_endpoint(create().spec.owner)
            .await
            .unwrap()
    );
}

fn owed() -> OwedRemoval {
    let ep = endpoint();
    OwedRemoval {
        host_ifname: ep.spec.host_ifname,
        host_ifindex: ep.spec.host_ifindex,
    }
}

/// A oneshot that a mock's action fires (once), for the background task.
fn signal() -> (
    impl Fn() + Send + Sync + 'static,
    tokio::sync::oneshot::Receiver<()>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    let fire = move || {
        if let Some(tx) = tx.lock().unwrap().take() {
            let _ = tx.send(());
        }
    };
    (fire, rx)
}

async fn fired(rx: tokio::sync::oneshot::Receiver<()>) {
    tokio::time::timeout(std::time::Duration::from_secs(5), rx)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn delete_with_veth_records_the_removal_then_removes_by_index_then_settles() {
    let mut seq = Sequence::new();
    let (registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    let mut ledger = MockVethLedger::new();
    let mut links = crate::links::MockLinks::new();
    ledger
        .expect_delete_owing_removal()
        .withf(|o| *o == create().spec.owner)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok((true, Some(endpoint()))));
    dataplane
        .expect_detach()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    let (index, name) = (owed().host_ifindex, owed().host_ifname);
    links
        .expect_remove_host_link_index()
        .withf(move |i, n| *i == index && n == name)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(true));
    let (settled, rx) = signal();
    ledger
        .expect_settle_removals()
        .withf(|done| *done == vec![owed()])
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_| {
            settled();
            Ok(())
        });
    let wrapped = wrap(registry, dataplane).with_veth_removal(Arc::new(links), Arc::new(ledger));
    let answer = wrapped
        .delete_endpoint_and_veth(create().spec.owner)
        .await
        .unwrap();
    assert_eq!(
        answer,
        Deleted {
            deleted: true,
            veth_removal: true
        }
    );
    fired(rx).await;
}

#[tokio::test]
async fn a_removal_that_fails_stays_owed_and_a_foreign_link_is_settled() {
    let (registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    dataplane.expect_detach().returning(|_| Ok(()));
    let mut ledger = MockVethLedger::new();
    ledger
        .expect_delete_owing_removal()
        .returning(|_| Ok((true, Some(endpoint()))));
    let mut links = crate::links::MockLinks::new();
    let (failed, failed_rx) = signal();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    links
        .expect_remove_host_link_index()
        .times(2)
        .returning(move |_, n| {
            if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                failed();
                Err(LinkError::Netlink(crate::NetlinkError::from_errno(
                    "link del",
                    n,
                    libc::EBUSY,
                )))
            } else {
                Err(LinkError::NotOurs {
                    ifname: n.to_string(),
                    group: 0,
                })
            }
        });
    let (settled, settled_rx) = signal();
    // Only the second (foreign) one is settled.
    ledger
        .expect_settle_removals()
        .withf(|done| *done == vec![owed()])
        .times(1)
        .returning(move |_| {
            settled();
            Ok(())
        });
    let wrapped = wrap(registry, dataplane).with_veth_removal(Arc::new(links), Arc::new(ledger));
    wrapped
        .delete_endpoint_and_veth(create().spec.owner)
        .await
        .unwrap();
    fired(failed_rx).await;
    wrapped
        .delete_endpoint_and_veth(create().spec.owner)
        .await
        .unwrap();
    fired(settled_rx).await;
}

#[tokio::test]
async fn delete_with_veth_of_an_unknown_endpoint_leaves_the_links_to_the_caller() {
    let (registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    let mut ledger = MockVethLedger::new();
    ledger
        .expect_delete_owing_removal()
        .returning(|_| Ok((false, None)));
    ledger.expect_settle_removals().never();
    dataplane.expect_detach().never();
    let mut links = crate::links::MockLinks::new();
    links.expect_remove_host_link_index().never();
    let answer = wrap(registry, dataplane)
        .with_veth_removal(Arc::new(links), Arc::new(ledger))
        .delete_endpoint_and_veth(create().spec.owner)
        .await
        .unwrap();
    assert!(!answer.veth_removal && !answer.deleted, "{answer:?}");
}

#[tokio::test]
async fn gc_detaches_removed_endpoints_only() {
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    let mut kept = endpoint();
    kept.spec.owner = Attachment {
        container_id: "c2".into(),
        ifname: "eth0".into(),
    };
    kept.spec.host_ifname = "lxcffffffffffff".into();
    let listed = vec![endpoint(), kept];
    registry
        .expect_endpoints()
        .returning(move || Ok(listed.clone()));
    registry.expect_gc().returning(|_| {
        Ok(GcReport {
            endpoints_removed: vec![create().spec.owner],
            allocations_released: vec![],
        })
    });
    dataplane
        .expect_detach()
        .withf(|e| e.spec.owner.container_id == "c1")
        .times(1)
        .returning(|_| Ok(()));
    let report = wrap(registry, dataplane)
        .gc(GcRequest::default())
        .await
        .unwrap();
    assert_eq!(report.endpoints_removed.len(), 1);
}

#[tokio::test]
async fn unregister_detaches_what_it_removed_and_keeps_the_allocation() {
    let mut seq = Sequence::new();
    let (mut registry, mut dataplane) = (MockNodeApi::new(), MockDataplane::new());
    registry
        .expect_unregister_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(Some(endpoint())));
    dataplane
        .expect_detach()
        .withf(|e| *e == endpoint())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    registry.expect_delete_endpoint().never();
    registry.expect_release().never();
    let removed = wrap(registry, dataplane)
        .unregister_endpoint(create().spec.owner)
        .await
        .unwrap();
    assert_eq!(removed, Some(endpoint()));
}
