use super::*;
use crate::api::Attachment;

fn att() -> Attachment {
    Attachment {
        container_id: "c1".into(),
        ifname: "eth0".into(),
    }
}

fn unreachable() -> DaemonError {
    DaemonError::Unreachable {
        endpoint: "/run/sarena/sarena.sock".into(),
        source: "connection refused".into(),
    }
}

#[test]
fn unreachable_daemon_on_add_is_try_again_later() {
    let e = PluginError::daemon(Step::Allocate, &att(), unreachable()).to_cni();
    assert_eq!(e.code, ErrorCode::TryAgainLater);
    assert!(e.msg.contains("allocate an address"), "{}", e.msg);
    assert!(e.details.contains("c1/eth0"), "{}", e.details);
}

#[test]
fn unreachable_or_failing_daemon_on_status_is_50() {
    let e = PluginError::Daemon {
        step: Step::Health,
        attachment: None,
        source: unreachable(),
    };
    assert_eq!(e.to_cni().code, ErrorCode::PluginNotAvailable);
    let e = PluginError::Daemon {
        step: Step::Health,
        attachment: None,
        source: DaemonError::api(ApiErrorKind::Internal, "boom"),
    };
    assert_eq!(e.to_cni().code, ErrorCode::PluginNotAvailable);
    let e = PluginError::NotReady {
        message: "starting".into(),
    }
    .to_cni();
    assert_eq!(e.code, ErrorCode::PluginNotAvailable);
    assert!(e.msg.contains("starting"));
}

#[test]
fn pool_exhausted_is_daemon_error_with_clear_message() {
    let src = DaemonError::api(ApiErrorKind::PoolExhausted, "pool default is full");
    let e = PluginError::daemon(Step::Allocate, &att(), src).to_cni();
    assert_eq!(e.code, ErrorCode::Daemon);
    assert!(e.msg.contains("pool is exhausted"), "{}", e.msg);
    assert!(e.details.contains("pool default is full"), "{}", e.details);
}

#[test]
fn unavailable_and_transport_are_transient() {
    let e = DaemonError::api(ApiErrorKind::Unavailable, "restarting");
    assert_eq!(
        PluginError::daemon(Step::DaemonConfig, &att(), e)
            .to_cni()
            .code,
        ErrorCode::TryAgainLater
    );
    let e = DaemonError::Transport {
        method: "POST".into(),
        path: "/v1/ipam/allocate".into(),
        source: "timed out".into(),
    };
    assert_eq!(
        PluginError::daemon(Step::Allocate, &att(), e).to_cni().code,
        ErrorCode::TryAgainLater
    );
}

#[test]
fn an_unavailable_daemon_s_reason_is_in_the_message() {
    let e = DaemonError::api(
        ApiErrorKind::Unavailable,
        "node n1 has no spec.podCIDRs yet",
    );
    let e = PluginError::daemon(Step::DaemonConfig, &att(), e).to_cni();
    assert_eq!(e.code, ErrorCode::TryAgainLater);
    assert!(
        e.msg
            .contains("cannot get the daemon config now: node n1 has no spec.podCIDRs yet"),
        "{}",
        e.msg
    );
}

#[test]
fn invalid_endpoint_is_invalid_config_naming_the_field() {
    let e = DaemonError::InvalidEndpoint {
        endpoint: "ftp://x".into(),
        reason: "scheme".into(),
    };
    let e = PluginError::daemon(Step::DaemonConfig, &att(), e).to_cni();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
    assert!(e.msg.starts_with("daemon-endpoint"), "{}", e.msg);
}

#[test]
fn netns_unopenable_is_unknown_container_naming_cni_netns() {
    let src = LinkError::Netns {
        path: "/var/run/netns/gone".into(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    };
    let e = PluginError::link(Step::RemoveStaleLink, &att(), src).to_cni();
    assert_eq!(e.code, ErrorCode::UnknownContainer);
    assert!(e.msg.starts_with("CNI_NETNS"), "{}", e.msg);
}

#[test]
fn link_failure_is_kernel_error() {
    let src = LinkError::Netlink(crate::NetlinkError::from_errno(
        "link add",
        "lxc1",
        libc::EEXIST,
    ));
    let e = PluginError::link(Step::CreateVeth, &att(), src).to_cni();
    assert_eq!(e.code, ErrorCode::Kernel);
    assert!(e.details.contains("EEXIST"));
}

#[test]
fn check_mismatch_is_102_naming_what_differs() {
    let e = PluginError::CheckMismatch {
        attachment: att(),
        what: "pod interface MAC".into(),
        expected: "aa".into(),
        found: "bb".into(),
    }
    .to_cni();
    assert_eq!(e.code, ErrorCode::CheckFailed);
    assert_eq!(e.msg, "CHECK: pod interface MAC differs");
    assert!(e.details.contains("expected aa, found bb"), "{}", e.details);
}

#[test]
fn several_uses_first_code_and_lists_all() {
    let a = PluginError::link(
        Step::RemoveHostLink,
        &att(),
        LinkError::Netlink(crate::NetlinkError::from_errno(
            "link del",
            "lxc1",
            libc::EPERM,
        )),
    );
    let b = PluginError::daemon(
        Step::DeleteEndpoint,
        &att(),
        DaemonError::api(ApiErrorKind::Internal, "db"),
    );
    let e = PluginError::collect(Some(&att()), vec![a, b])
        .unwrap_err()
        .to_cni();
    assert_eq!(e.code, ErrorCode::Kernel);
    assert!(e.msg.contains("1 more"), "{}", e.msg);
    assert!(
        e.details.contains("EPERM") && e.details.contains("db"),
        "{}",
        e.details
    );
    assert!(PluginError::collect(None, vec![]).is_ok());
}

#[test]
fn invalid_passes_the_cni_error_through() {
    let src = CniError::new(ErrorCode::InvalidConfig, "prevResult: not allowed");
    assert_eq!(PluginError::Invalid(src.clone()).to_cni(), src);
}
