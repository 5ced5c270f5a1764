//! ADD over what an earlier ADD of the same attachment left: a stale link
//! and its endpoint (replaced, the allocation and pod MAC kept), or an
//! endpoint whose link is gone (replaced at registration).

use mockall::Sequence;

use super::*;
use crate::api::{ApiErrorKind, DaemonError, MockDaemon};
use crate::cni::ErrorCode;
use crate::links::{MockLinks, VethPair};
use crate::plugin::test_support::*;

/// A repeated ADD: the stale link is there, and the endpoint of the ADD that
/// made it is unregistered (allocation kept) before the same steps as always;
/// `pod_mac` is what the new veth must get.
fn repeated_add(req: &AddRequest, pod_mac: &'static str) -> (MockDaemon, MockLinks) {
    let mut seq = Sequence::new();
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(true));
    // The config is fetched alongside the stale check.
    d.expect_config()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(config()));
    d.expect_unregister_endpoint()
        .withf(|a| a == &att())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            let mut ep = endpoint();
            ep.spec.pod_mac = "02:aa:00:00:00:01".parse().unwrap();
            Ok(Some(ep))
        });
    let requested = req.requested_ips.clone();
    d.expect_allocate()
        .withf(move |r| r.owner == att() && r.requested == requested)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(allocation()));
    l.expect_create_veth()
        .withf(move |s| s.pod_mac.map(|m| m.to_string()).as_deref() == Some(pod_mac))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|s| {
            Ok(VethPair {
                pod_mac: s.pod_mac.unwrap(),
                ..pair()
            })
        });
    l.expect_configure_pod()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _| Ok(()));
    d.expect_create_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|r| Ok(endpoint_from(&r)));
    d.expect_release().never();
    d.expect_delete_endpoint().never();
    (d, l)
}

#[tokio::test]
async fn repeated_add_keeps_the_address_and_the_previous_pod_mac() {
    let req = AddRequest {
        requested_ips: vec![],
        requested_mac: None,
        ..add_req()
    };
    let (d, l) = repeated_add(&req, "02:aa:00:00:00:01");
    let result = add(&d, &l, None, &req).await.unwrap();
    assert_eq!(result.ips[0].address, "10.0.10.30/24".parse().unwrap());
    assert_eq!(
        result.interfaces[1].mac.as_deref(),
        Some("02:aa:00:00:00:01")
    );
}

#[tokio::test]
async fn repeated_add_with_mac_gets_that_mac() {
    let (d, l) = repeated_add(&add_req(), POD_MAC);
    let result = add(&d, &l, None, &add_req()).await.unwrap();
    assert_eq!(result.interfaces[1].mac.as_deref(), Some(POD_MAC));
}

#[tokio::test]
async fn repeated_add_asking_for_another_address_releases_the_kept_one_first() {
    let mut seq = Sequence::new();
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(true));
    d.expect_config().returning(|| Ok(config()));
    d.expect_unregister_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            let mut ep = endpoint();
            ep.spec.addresses = vec!["10.0.10.99/24".parse().unwrap()];
            Ok(Some(ep))
        });
    d.expect_release()
        .withf(|a| a == &att())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(true));
    d.expect_allocate()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(allocation()));
    l.expect_create_veth().returning(|_| Ok(pair()));
    l.expect_configure_pod().returning(|_, _, _| Ok(()));
    d.expect_create_endpoint()
        .returning(|r| Ok(endpoint_from(&r)));
    let result = add(&d, &l, None, &add_req()).await.unwrap();
    assert_eq!(result.ips[0].address, "10.0.10.30/24".parse().unwrap());
}

#[tokio::test]
async fn a_stale_link_without_an_endpoint_is_a_fresh_add() {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(true));
    d.expect_config().returning(|| Ok(config()));
    d.expect_unregister_endpoint()
        .times(1)
        .returning(|_| Ok(None));
    d.expect_release().never();
    d.expect_allocate().returning(|_| Ok(allocation()));
    l.expect_create_veth()
        .withf(|s| s.pod_mac.map(|m| m.to_string()).as_deref() == Some(POD_MAC))
        .returning(|_| Ok(pair()));
    l.expect_configure_pod().returning(|_, _, _| Ok(()));
    d.expect_create_endpoint()
        .returning(|r| Ok(endpoint_from(&r)));
    add(&d, &l, None, &add_req()).await.unwrap();
}

#[tokio::test]
async fn stale_endpoint_that_cannot_be_removed_fails_before_allocation() {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link()
        .times(1)
        .returning(|_, _| Ok(true));
    d.expect_config().times(1).returning(|| Ok(config()));
    d.expect_unregister_endpoint()
        .times(1)
        .returning(|_| Err(unreachable()));
    d.expect_allocate().never();
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::RemoveStaleEndpoint));
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}

/// Mocks for an ADD that gets as far as registration (no stale link).
fn up_to_registration(seq: &mut Sequence) -> (MockDaemon, MockLinks) {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link()
        .times(1)
        .in_sequence(seq)
        .returning(|_, _| Ok(false));
    d.expect_config()
        .times(1)
        .in_sequence(seq)
        .returning(|| Ok(config()));
    d.expect_allocate()
        .times(1)
        .in_sequence(seq)
        .returning(|_| Ok(allocation()));
    l.expect_create_veth()
        .times(1)
        .in_sequence(seq)
        .returning(|_| Ok(pair()));
    l.expect_configure_pod()
        .times(1)
        .in_sequence(seq)
        .returning(|_, _, _| Ok(()));
    (d, l)
}

fn conflict() -> DaemonError {
    DaemonError::api(ApiErrorKind::Conflict, "an endpoint already exists")
}

#[tokio::test]
async fn an_endpoint_left_without_its_link_is_replaced_at_registration() {
    let mut seq = Sequence::new();
    let (mut d, l) = up_to_registration(&mut seq);
    d.expect_create_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Err(conflict()));
    d.expect_unregister_endpoint()
        .withf(|a| a == &att())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            let mut ep = endpoint();
            ep.spec.host_ifindex = 41;
            Ok(Some(ep))
        });
    d.expect_create_endpoint()
        .withf(|r| r.spec.host_ifindex == 42)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|r| Ok(endpoint_from(&r)));
    d.expect_release().never();
    d.expect_delete_endpoint().never();
    add(&d, &l, None, &add_req()).await.unwrap();
}

#[tokio::test]
async fn a_conflict_without_an_endpoint_to_replace_stands_and_rolls_back() {
    let mut seq = Sequence::new();
    let (mut d, mut l) = up_to_registration(&mut seq);
    d.expect_create_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Err(conflict()));
    d.expect_unregister_endpoint()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(None));
    l.expect_remove_host_link()
        .withf(|n| n == host())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(true));
    d.expect_release()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(true));
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::RegisterEndpoint));
    assert_eq!(e.to_cni().code, ErrorCode::Daemon);
}
