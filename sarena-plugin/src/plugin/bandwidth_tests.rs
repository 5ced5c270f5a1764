use super::*;
use crate::api::{BandwidthStatus, EndpointStats, MockDaemon};
use crate::cni::chain::ChainCheck;
use crate::links::MockLinks;
use crate::plugin::add::add;
use crate::plugin::test_support::*;

fn limits() -> BandwidthLimits {
    BandwidthLimits {
        ingress_rate: 80_000_000,
        ingress_burst: 800_000,
        egress_rate: 50_000_000,
        egress_burst: 500_000,
    }
}

fn config_of(dataplane: &str) -> DaemonConfig {
    DaemonConfig {
        dataplane: dataplane.into(),
        ..config()
    }
}

/// A conf dir holding the network `net` chaining `types`.
fn conf_dir(types: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let plugins: Vec<_> = types
        .iter()
        .map(|t| serde_json::json!({ "type": t }))
        .collect();
    let conf = serde_json::json!({"cniVersion": "1.0.0", "name": "net", "plugins": plugins});
    std::fs::write(dir.path().join("10-net.conflist"), conf.to_string()).unwrap();
    dir
}

fn chained(dir: &tempfile::TempDir) -> Option<ChainCheck> {
    Some(ChainCheck {
        conf_dir: dir.path().to_owned(),
        network: "net".into(),
        plugin_type: "sarena-cni".into(),
    })
}

fn refusal(e: PluginError) -> String {
    let cni = e.to_cni();
    assert_eq!(cni.code, ErrorCode::InvalidConfig, "{cni:?}");
    cni.msg
}

#[test]
fn limits_on_the_kernel_dataplane_are_refused_naming_the_alternative() {
    let req = AddRequest {
        bandwidth: Some(limits()),
        ..add_req()
    };
    let msg = refusal(check_add(&req, &config_of("kernel")).unwrap_err());
    assert!(msg.contains("eBPF dataplane only"), "{msg}");
    assert!(msg.contains("the kernel dataplane"), "{msg}");
    assert!(msg.contains("reference `bandwidth` plugin"), "{msg}");
    check_add(&req, &config_of("ebpf")).unwrap();
    check_add(&add_req(), &config_of("kernel")).unwrap();
}

#[test]
fn the_reference_plugin_after_sarena_is_refused_on_ebpf_only() {
    let dir = conf_dir(&["sarena-cni", "bandwidth", "portmap"]);
    let req = AddRequest {
        chain_check: chained(&dir),
        ..add_req()
    };
    let msg = refusal(check_add(&req, &config_of("ebpf")).unwrap_err());
    assert!(msg.contains("10-net.conflist"), "{msg}");
    assert!(
        msg.contains("declare \"capabilities\": {\"bandwidth\": true} on the sarena-cni entry"),
        "{msg}"
    );
    // The kernel dataplane has no qdisc of its own: the plugin works there.
    check_add(&req, &config_of("kernel")).unwrap();
    // Without the reference plugin, or without a check, nothing is refused.
    let clean = conf_dir(&["sarena-cni", "portmap"]);
    let req = AddRequest {
        chain_check: chained(&clean),
        ..add_req()
    };
    check_add(&req, &config_of("ebpf")).unwrap();
    check_add(&add_req(), &config_of("ebpf")).unwrap();
}

#[tokio::test]
async fn add_refuses_before_allocating_anything() {
    let dir = conf_dir(&["sarena-cni", "bandwidth"]);
    let req = AddRequest {
        chain_check: chained(&dir),
        ..add_req()
    };
    let mut d = MockDaemon::new();
    d.expect_config().times(1).returning(|| Ok(config()));
    d.expect_allocate().never();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    l.expect_create_veth().never();
    let msg = refusal(add(&d, &l, None, &req).await.unwrap_err());
    assert!(
        msg.contains("chains the reference `bandwidth` plugin"),
        "{msg}"
    );
}

fn limited_endpoint(limits: Option<BandwidthLimits>) -> Endpoint {
    let mut ep = endpoint();
    ep.spec.bandwidth = limits;
    ep
}

/// A daemon answering `GET /stats/endpoints/…` with `status` (`None`: the
/// call must not happen).
fn daemon(status: Option<Option<BandwidthStatus>>) -> MockDaemon {
    let mut d = MockDaemon::new();
    match status {
        None => {
            d.expect_endpoint_stats_of().never();
        }
        Some(status) => {
            d.expect_endpoint_stats_of()
                .withf(|a| a == &att())
                .times(1)
                .return_once(move |_| {
                    Ok(Some(EndpointStats {
                        endpoint: limited_endpoint(Some(limits())),
                        counters: None,
                        bandwidth: status,
                    }))
                });
        }
    }
    d
}

async fn check_mismatch(
    d: MockDaemon,
    want: Option<BandwidthLimits>,
    ep: Endpoint,
) -> (String, String) {
    let e = check_limits(&d, &att(), want, &ep).await.unwrap_err();
    let cni = e.to_cni();
    assert_eq!(cni.code, ErrorCode::CheckFailed, "{e}");
    (cni.msg, cni.details)
}

#[tokio::test]
async fn unlimited_endpoints_ask_the_daemon_nothing_more() {
    check_limits(&daemon(None), &att(), None, &endpoint())
        .await
        .unwrap();
}

#[tokio::test]
async fn limits_in_place_pass() {
    let status = BandwidthStatus {
        enforced: Some(limits()),
        problems: vec![],
    };
    let ep = limited_endpoint(Some(limits()));
    check_limits(&daemon(Some(Some(status))), &att(), Some(limits()), &ep)
        .await
        .unwrap();
}

#[tokio::test]
async fn other_limits_at_the_daemon_differ() {
    let (msg, details) = check_mismatch(daemon(None), Some(limits()), endpoint()).await;
    assert_eq!(msg, "CHECK: bandwidth limits at the daemon differs");
    assert!(details.contains("found none"), "{details}");
    let fewer = BandwidthLimits {
        egress_rate: 0,
        egress_burst: 0,
        ..limits()
    };
    let (_, details) =
        check_mismatch(daemon(None), Some(fewer), limited_endpoint(Some(limits()))).await;
    assert!(details.contains("egress unlimited"), "{details}");
    // Limits that went away must be gone at the daemon too.
    let (_, details) = check_mismatch(daemon(None), None, limited_endpoint(Some(limits()))).await;
    assert!(details.contains("expected none"), "{details}");
}

#[tokio::test]
async fn shaping_missing_in_the_dataplane_differs() {
    let ep = limited_endpoint(Some(limits()));
    let broken = BandwidthStatus {
        enforced: Some(limits()),
        problems: vec!["the root qdisc of lxc1 is tbf 1:, not Sarena's fq".into()],
    };
    let (msg, details) =
        check_mismatch(daemon(Some(Some(broken))), Some(limits()), ep.clone()).await;
    assert_eq!(msg, "CHECK: bandwidth shaping in the dataplane differs");
    assert!(details.contains("tbf 1:"), "{details}");
    // A daemon (or dataplane) that reports nothing cannot vouch for it.
    let (_, details) = check_mismatch(daemon(Some(None)), Some(limits()), ep.clone()).await;
    assert!(details.contains("not reported by the daemon"), "{details}");
    let empty = BandwidthStatus::default();
    let (msg, _) = check_mismatch(daemon(Some(Some(empty))), Some(limits()), ep).await;
    assert_eq!(msg, "CHECK: bandwidth limits in the dataplane differs");
}
