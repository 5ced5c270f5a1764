use std::path::PathBuf;

use super::*;
use crate::api::{DaemonError, Endpoint, MockDaemon};
use crate::cni::result::{Interface, IpConfig};
use crate::cni::{CniResult, ErrorCode, Version};
use crate::links::{MockLinks, PodIfaceState};
use crate::plugin::test_support::*;

fn prev() -> CniResult {
    CniResult {
        interfaces: vec![
            Interface {
                name: host(),
                mac: Some(HOST_MAC.into()),
                ..Default::default()
            },
            Interface {
                name: "eth0".into(),
                mac: Some(POD_MAC.into()),
                mtu: Some(MTU),
                sandbox: Some(NETNS.into()),
                ..Default::default()
            },
        ],
        ips: vec![IpConfig {
            address: "10.0.10.30/24".parse().unwrap(),
            gateway: Some("10.0.0.7".parse().unwrap()),
            interface: Some(1),
        }],
        routes: routes().iter().map(Route::from).collect(),
        dns: Default::default(),
    }
}

fn req(prev_result: CniResult) -> CheckRequest {
    CheckRequest {
        attachment: att(),
        netns: PathBuf::from(NETNS),
        prev_result,
        version: Version::V1_1_0,
        bandwidth: None,
    }
}

fn pod_state() -> PodIfaceState {
    PodIfaceState {
        mac: POD_MAC.to_uppercase().parse().unwrap(),
        addresses: vec![
            "10.0.10.30/24".parse().unwrap(),
            "fe80::1/64".parse().unwrap(),
        ],
        routes: routes(),
        up: true,
    }
}

/// Mocks answering with `ep` and `pod` (`None`: that call must not happen).
fn mocks(
    ep: Option<Option<Endpoint>>,
    pod: Option<Option<PodIfaceState>>,
    host_index: Option<Option<u32>>,
) -> (MockDaemon, MockLinks) {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    if let Some(ep) = ep {
        d.expect_endpoint()
            .withf(|a| a == &att())
            .times(1)
            .return_once(move |_| Ok(ep));
    }
    if let Some(pod) = pod {
        l.expect_inspect_pod()
            .times(1)
            .return_once(move |_, _| Ok(pod));
    }
    if let Some(idx) = host_index {
        l.expect_host_link_index()
            .withf(|n| n == host())
            .times(1)
            .return_once(move |_| Ok(idx));
    }
    (d, l)
}

async fn mismatch(d: MockDaemon, l: MockLinks, r: CheckRequest) -> (String, String) {
    let e = check(&d, &l, &r).await.unwrap_err();
    let cni = e.to_cni();
    assert_eq!(cni.code, ErrorCode::CheckFailed, "{e}");
    (cni.msg, cni.details)
}

#[tokio::test]
async fn matching_state_passes() {
    let (d, l) = mocks(
        Some(Some(endpoint())),
        Some(Some(pod_state())),
        Some(Some(42)),
    );
    check(&d, &l, &req(prev())).await.unwrap();
}

#[tokio::test]
async fn unregistered_endpoint_differs() {
    let (d, l) = mocks(Some(None), None, None);
    let (msg, _) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: endpoint at the daemon differs");
}

#[tokio::test]
async fn endpoint_with_other_addresses_differs() {
    let mut ep = endpoint();
    ep.spec.addresses = vec!["10.0.10.31/24".parse().unwrap()];
    let (d, l) = mocks(Some(Some(ep)), None, None);
    let (msg, details) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: endpoint addresses at the daemon differs");
    assert!(
        details.contains("expected 10.0.10.30/24, found 10.0.10.31/24"),
        "{details}"
    );
}

#[tokio::test]
async fn endpoint_with_other_pod_mac_differs() {
    let mut ep = endpoint();
    ep.spec.pod_mac = "02:00:00:00:00:01".parse().unwrap();
    let (d, l) = mocks(Some(Some(ep)), None, None);
    let (msg, _) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: endpoint pod MAC at the daemon differs");
}

#[tokio::test]
async fn missing_pod_interface_differs() {
    let (d, l) = mocks(Some(Some(endpoint())), Some(None), None);
    let (msg, _) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: pod interface eth0 differs");
}

#[tokio::test]
async fn pod_mac_differs() {
    let mut pod = pod_state();
    pod.mac = "02:00:00:00:00:01".parse().unwrap();
    let (d, l) = mocks(Some(Some(endpoint())), Some(Some(pod)), None);
    let (msg, details) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: pod interface MAC differs");
    assert!(details.contains("found 02:00:00:00:00:01"), "{details}");
}

#[tokio::test]
async fn pod_address_missing_differs() {
    let mut pod = pod_state();
    pod.addresses = vec!["fe80::1/64".parse().unwrap()];
    let (d, l) = mocks(Some(Some(endpoint())), Some(Some(pod)), None);
    let (msg, _) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: pod interface addresses differs");
}

#[tokio::test]
async fn pod_interface_down_differs() {
    let mut pod = pod_state();
    pod.up = false;
    let (d, l) = mocks(Some(Some(endpoint())), Some(Some(pod)), None);
    let (msg, _) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: pod interface state differs");
}

#[tokio::test]
async fn missing_route_differs() {
    let mut pod = pod_state();
    pod.routes.pop();
    let (d, l) = mocks(Some(Some(endpoint())), Some(Some(pod)), None);
    let (msg, details) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, "CHECK: pod routes differs");
    assert!(details.contains("0.0.0.0/0 via 10.0.0.7"), "{details}");
}

#[tokio::test]
async fn missing_host_link_differs() {
    let (d, l) = mocks(Some(Some(endpoint())), Some(Some(pod_state())), Some(None));
    let (msg, _) = mismatch(d, l, req(prev())).await;
    assert_eq!(msg, format!("CHECK: host link {} differs", host()));
}

#[tokio::test]
async fn other_sandbox_differs_without_asking_anyone() {
    let mut p = prev();
    p.interfaces[1].sandbox = Some("/var/run/netns/other".into());
    let (d, l) = mocks(None, None, None);
    let (msg, _) = mismatch(d, l, req(p)).await;
    assert_eq!(msg, "CHECK: sandbox (CNI_NETNS) differs");
}

#[tokio::test]
async fn prev_result_without_our_interface_differs() {
    let mut p = prev();
    p.interfaces[1].name = "net1".into();
    let (d, l) = mocks(None, None, None);
    let (msg, _) = mismatch(d, l, req(p)).await;
    assert_eq!(msg, "CHECK: prevResult interfaces differs");
}

#[tokio::test]
async fn prev_result_with_another_host_name_differs() {
    let mut p = prev();
    p.interfaces[0].name = "lxc000000000000".into();
    let (d, l) = mocks(None, None, None);
    let (msg, _) = mismatch(d, l, req(p)).await;
    assert_eq!(msg, "CHECK: host interface name differs");
}

#[tokio::test]
async fn unreachable_daemon_is_try_again_later() {
    let mut d = MockDaemon::new();
    d.expect_endpoint()
        .times(1)
        .returning(|_| Err(unreachable()));
    let e = check(&d, &MockLinks::new(), &req(prev()))
        .await
        .unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
    let _: Option<DaemonError> = None;
}

#[tokio::test]
async fn unopenable_netns_is_unknown_container() {
    let mut d = MockDaemon::new();
    d.expect_endpoint()
        .times(1)
        .returning(|_| Ok(Some(endpoint())));
    let mut l = MockLinks::new();
    l.expect_inspect_pod()
        .times(1)
        .returning(|_, _| Err(netns_gone()));
    let e = check(&d, &l, &req(prev())).await.unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::UnknownContainer);
}
