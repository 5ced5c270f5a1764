use mockall::Sequence;

use super::*;
use crate::api::{ApiErrorKind, DaemonError, MockDaemon};
use crate::cni::ErrorCode;
use crate::links::MockLinks;
use crate::plugin::test_support::*;

/// Where ADD is made to fail; `Never` means it succeeds. Declared in step order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum At {
    Stale,
    Config,
    Allocate,
    Veth,
    Configure,
    Register,
    Never,
}

/// Mocks for an ADD that fails at `fail`: every step before it answers, the step
/// itself fails, later steps must not be called (except the concurrent partner of
/// the failing step: config with the stale check, registration with the pod's
/// configuration); and exactly the rollbacks that are due are expected, after
/// the failure and in order (veth, then endpoint or address).
fn mocks(fail: At, register_error: fn() -> DaemonError) -> (MockDaemon, MockLinks) {
    let mut seq = Sequence::new();
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link()
        .withf(|netns, ifname| netns == std::path::Path::new(NETNS) && ifname == "eth0")
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_, _| {
            if fail == At::Stale {
                Err(netns_gone())
            } else {
                Ok(false)
            }
        });
    if fail >= At::Stale {
        d.expect_config()
            .times(1)
            .in_sequence(&mut seq)
            .returning(move || {
                if fail == At::Config {
                    Err(unreachable())
                } else {
                    Ok(config())
                }
            });
    }
    if fail >= At::Allocate {
        d.expect_allocate()
            .withf(|r| {
                r.owner == att()
                    && r.pod.namespace.as_deref() == Some("default")
                    && r.pod.name.as_deref() == Some("web")
                    && r.requested == vec!["10.0.10.30".parse::<std::net::IpAddr>().unwrap()]
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_| {
                if fail == At::Allocate {
                    Err(DaemonError::api(ApiErrorKind::PoolExhausted, "full"))
                } else {
                    Ok(allocation())
                }
            });
    }
    if fail >= At::Veth {
        l.expect_create_veth()
            .withf(|s| {
                s.host_ifname == host()
                    && s.netns == std::path::Path::new(NETNS)
                    && s.pod_ifname == "eth0"
                    && s.mtu == MTU
                    && s.pod_mac.map(|m| m.to_string()).as_deref() == Some(POD_MAC)
                    && !s.host_ipv6
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_| {
                if fail == At::Veth {
                    Err(netlink("link add"))
                } else {
                    Ok(pair())
                }
            });
    }
    if fail >= At::Configure {
        l.expect_configure_pod()
            .withf(|netns, ifname, c| {
                netns == std::path::Path::new(NETNS)
                    && ifname == "eth0"
                    && c.addresses == vec!["10.0.10.30/24".parse::<ipnet::IpNet>().unwrap()]
                    && c.routes == routes()
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_, _, _| {
                if fail == At::Configure {
                    Err(netlink("addr add"))
                } else {
                    Ok(())
                }
            });
    }
    if fail >= At::Configure {
        d.expect_create_endpoint()
            .withf(|r| {
                r.spec.owner == att()
                    && r.spec.host_ifname == host()
                    && r.spec.host_ifindex == 42
                    && r.spec.host_mac.to_string() == HOST_MAC
                    && r.spec.pod_mac.to_string() == POD_MAC
                    && r.spec.netns == NETNS
                    && r.spec.addresses == vec!["10.0.10.30/24".parse::<ipnet::IpNet>().unwrap()]
            })
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |r| {
                if fail == At::Register {
                    Err(register_error())
                } else {
                    Ok(endpoint_from(&r))
                }
            });
    }
    if fail != At::Never {
        if fail > At::Veth {
            l.expect_remove_host_link()
                .withf(|n| n == host())
                .times(1)
                .in_sequence(&mut seq)
                .returning(|_| Ok(true));
        }
        let registered = fail == At::Configure;
        if registered || (fail == At::Register && outcome_unknown(&register_error())) {
            d.expect_delete_endpoint()
                .withf(|a| a == &att())
                .times(1)
                .in_sequence(&mut seq)
                .returning(|_| Ok(true));
        } else if fail > At::Allocate {
            d.expect_release()
                .withf(|a| a == &att())
                .times(1)
                .in_sequence(&mut seq)
                .returning(|_| Ok(true));
        }
    }
    (d, l)
}

fn internal() -> DaemonError {
    DaemonError::api(ApiErrorKind::Internal, "db")
}

#[tokio::test]
async fn add_runs_the_steps_in_order_and_builds_the_result() {
    let (d, l) = mocks(At::Never, internal);
    let result = add(&d, &l, None, &add_req()).await.unwrap();

    assert_eq!(result.interfaces.len(), 2);
    assert_eq!(result.interfaces[0].name, host());
    assert_eq!(result.interfaces[0].mac.as_deref(), Some(HOST_MAC));
    assert_eq!(result.interfaces[0].sandbox, None);
    assert_eq!(result.interfaces[1].name, "eth0");
    assert_eq!(result.interfaces[1].mac.as_deref(), Some(POD_MAC));
    assert_eq!(result.interfaces[1].sandbox.as_deref(), Some(NETNS));
    assert_eq!(result.interfaces[1].mtu, Some(MTU));
    assert_eq!(result.ips.len(), 1);
    assert_eq!(result.ips[0].address, "10.0.10.30/24".parse().unwrap());
    assert_eq!(result.ips[0].gateway, Some("10.0.0.7".parse().unwrap()));
    assert_eq!(result.ips[0].interface, Some(1));
    let routes: Vec<_> = result.routes.iter().map(|r| (r.dst, r.gw, r.mtu)).collect();
    assert_eq!(
        routes,
        vec![
            ("10.0.0.7/32".parse().unwrap(), None, None),
            (
                "0.0.0.0/0".parse().unwrap(),
                Some("10.0.0.7".parse().unwrap()),
                Some(MTU)
            ),
        ]
    );
    assert_eq!(result.dns, Default::default());
}

#[tokio::test]
async fn invalid_request_touches_nothing() {
    let (d, l) = (MockDaemon::new(), MockLinks::new());
    let mut req = add_req();
    req.attachment.container_id = "-bad".into();
    let e = add(&d, &l, None, &req).await.unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::InvalidEnvironment);
    let mut req = add_req();
    req.netns = std::path::PathBuf::new();
    let e = add(&d, &l, None, &req).await.unwrap_err().to_cni();
    assert!(e.msg.contains("CNI_NETNS"), "{}", e.msg);
}

#[tokio::test]
async fn unopenable_netns_fails_before_the_daemon_is_asked() {
    let (d, l) = mocks(At::Stale, internal);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::RemoveStaleLink));
    assert_eq!(e.to_cni().code, ErrorCode::UnknownContainer);
}

#[tokio::test]
async fn daemon_config_failure_allocates_nothing() {
    let (d, l) = mocks(At::Config, internal);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::DaemonConfig));
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}

#[tokio::test]
async fn allocation_failure_releases_nothing() {
    let (d, l) = mocks(At::Allocate, internal);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::Allocate));
    assert_eq!(e.to_cni().code, ErrorCode::Daemon);
}

#[tokio::test]
async fn allocation_with_unknown_outcome_is_released() {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate().times(1).returning(|_| {
        Err(DaemonError::Transport {
            method: "POST".into(),
            path: "/v1/ipam/allocate".into(),
            source: "timed out".into(),
        })
    });
    d.expect_release()
        .withf(|a| a == &att())
        .times(1)
        .returning(|_| Ok(true));
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::Allocate));
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}

#[tokio::test]
async fn veth_failure_releases_the_address_only() {
    let (d, l) = mocks(At::Veth, internal);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::CreateVeth));
    assert_eq!(e.to_cni().code, ErrorCode::Kernel);
}

#[tokio::test]
async fn a_pod_with_an_ipv6_address_keeps_ipv6_on_its_host_end() {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate().returning(|_| {
        let mut a = allocation();
        a.addresses.push(crate::api::AllocatedAddress {
            address: "fd00:10::30/64".parse().unwrap(),
            gateway: "fe80::1".parse().unwrap(),
            pool: "default6".into(),
        });
        Ok(a)
    });
    l.expect_create_veth()
        .withf(|s| s.host_ipv6)
        .times(1)
        .returning(|_| Err(netlink("link add")));
    d.expect_release().times(1).returning(|_| Ok(true));
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::CreateVeth));
}

#[tokio::test]
async fn pod_config_failure_removes_the_veth_then_releases() {
    let (d, l) = mocks(At::Configure, internal);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::ConfigurePod));
}

#[tokio::test]
async fn refused_registration_removes_the_veth_and_releases_the_address() {
    let (d, l) = mocks(At::Register, internal);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::RegisterEndpoint));
    assert_eq!(e.to_cni().code, ErrorCode::Daemon);
}

#[tokio::test]
async fn cleanup_failures_do_not_mask_the_original_error() {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate().returning(|_| Ok(allocation()));
    l.expect_create_veth().returning(|_| Ok(pair()));
    l.expect_configure_pod()
        .returning(|_, _, _| Err(netlink("route add")));
    d.expect_create_endpoint()
        .returning(|r| Ok(endpoint_from(&r)));
    l.expect_remove_host_link()
        .times(1)
        .returning(|_| Err(netlink("link del")));
    d.expect_delete_endpoint()
        .times(1)
        .returning(|_| Err(internal()));
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.step(), Some(Step::ConfigurePod));
    assert!(crate::error_chain(&e).contains("route add"), "{e}");
}

#[tokio::test]
async fn unreachable_release_is_queued_for_replay() {
    let dir = tempfile::tempdir().unwrap();
    let q = DeleteQueue::new(dir.path());
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate().returning(|_| Ok(allocation()));
    l.expect_create_veth()
        .returning(|_| Err(netlink("link add")));
    d.expect_release()
        .times(1)
        .returning(|_| Err(unreachable()));
    add(&d, &l, Some(&q), &add_req()).await.unwrap_err();
    assert_eq!(q.pending().unwrap(), vec![att()]);
}

#[tokio::test]
async fn queued_deletion_of_the_same_attachment_blocks_add() {
    let dir = tempfile::tempdir().unwrap();
    let q = DeleteQueue::new(dir.path());
    q.enqueue(&att()).unwrap();
    let (d, l) = (MockDaemon::new(), MockLinks::new());
    let e = add(&d, &l, Some(&q), &add_req()).await.unwrap_err();
    assert!(matches!(e, PluginError::DeletionPending { .. }));
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}

#[tokio::test]
async fn unreachable_daemon_at_registration_releases_the_address() {
    let (d, l) = mocks(At::Register, unreachable);
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}

#[tokio::test]
async fn transport_failure_at_registration_deletes_the_maybe_created_endpoint() {
    let (d, l) = mocks(At::Register, || DaemonError::Transport {
        method: "POST".into(),
        path: "/v1/endpoint/create".into(),
        source: "timed out".into(),
    });
    let e = add(&d, &l, None, &add_req()).await.unwrap_err();
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
}
