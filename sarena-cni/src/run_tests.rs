use std::path::Path;
use std::sync::Arc;

use sarena_plugin::api::{
    AllocatedAddress, Allocation, Daemon, DaemonConfig, DaemonError, Endpoint, EndpointSpec,
    MockDaemon, RouteSpec,
};
use sarena_plugin::links::{Links, MockLinks, VethPair};
use serde_json::json;

use super::*;

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| {
        vars.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    }
}

fn attach_vars(command: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", "abc123"),
        ("CNI_NETNS", "/var/run/netns/cni-x"),
        ("CNI_IFNAME", "eth0"),
    ]
}

fn no_backends(_: &NetConf) -> Result<Plugin, CniError> {
    panic!("backends must not be built")
}

fn parse(out: &str) -> Value {
    assert!(out.ends_with('\n'), "{out:?}");
    serde_json::from_str(out).unwrap()
}

fn conf(dir: &Path, extra: Value) -> Vec<u8> {
    let mut c = json!({
        "cniVersion": "1.0.0", "name": "sarena", "type": "sarena-cni",
        "log-file": dir.join("cni.log"),
        "delete-queue-dir": dir.join("queue"),
    });
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    c.to_string().into_bytes()
}

#[test]
fn version_tolerates_empty_stdin_and_builds_no_backends() {
    let (out, code) = run(lookup(&[("CNI_COMMAND", "VERSION")]), b"", no_backends);
    assert_eq!(code, 0);
    let v = parse(&out);
    assert_eq!(v["cniVersion"], "1.1.0");
    assert_eq!(v["supportedVersions"].as_array().unwrap().len(), 7);
    let (out, code) = run(
        lookup(&[("CNI_COMMAND", "VERSION")]),
        br#"{"cniVersion":"0.3.1"}"#,
        no_backends,
    );
    assert_eq!(
        (parse(&out)["cniVersion"].as_str(), code),
        (Some("0.3.1"), 0)
    );
}

#[test]
fn oversized_stdin_is_a_decode_error() {
    let big = vec![b' '; MAX_STDIN + 1];
    let (out, code) = run(lookup(&attach_vars("ADD")), &big, no_backends);
    assert_eq!(code, 1);
    let v = parse(&out);
    assert_eq!(v["code"], 6);
    assert!(v["msg"].as_str().unwrap().starts_with("stdin"), "{v}");
}

#[test]
fn missing_command_is_error_4_in_the_input_version() {
    let (out, code) = run(
        lookup(&[]),
        br#"{"cniVersion":"0.4.0","name":"n"}"#,
        no_backends,
    );
    assert_eq!(code, 1);
    let v = parse(&out);
    assert_eq!(v["code"], 4);
    assert_eq!(v["cniVersion"], "0.4.0");
    assert!(v["msg"].as_str().unwrap().contains("CNI_COMMAND"), "{v}");
}

#[test]
fn backend_errors_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let (out, code) = run(
        lookup(&attach_vars("ADD")),
        &conf(dir.path(), json!({})),
        |_| Err(CniError::new(ErrorCode::Internal, "backend not built yet")),
    );
    assert_eq!(code, 1);
    let v = parse(&out);
    assert_eq!(
        (v["code"].as_u64(), v["cniVersion"].as_str()),
        (Some(999), Some("1.0.0"))
    );
}

fn add_mocks() -> (MockDaemon, MockLinks) {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| {
        Ok(DaemonConfig {
            mtu: 1500,
            dataplane: "ebpf".into(),
        })
    });
    d.expect_allocate().returning(|r| {
        Ok(Allocation {
            owner: r.owner,
            addresses: vec![AllocatedAddress {
                address: "10.0.10.30/24".parse().unwrap(),
                gateway: "10.0.0.7".parse().unwrap(),
                pool: "default".into(),
            }],
            routes: vec![RouteSpec {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: Some("10.0.0.7".parse().unwrap()),
                mtu: None,
            }],
            lease_expires_at: None,
        })
    });
    l.expect_create_veth().returning(|s| {
        Ok(VethPair {
            host_ifname: s.host_ifname.clone(),
            host_ifindex: 7,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_ifname: s.pod_ifname.clone(),
            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
        })
    });
    l.expect_configure_pod().returning(|_, _, _| Ok(()));
    d.expect_create_endpoint().returning(|r| {
        Ok(Endpoint {
            spec: EndpointSpec {
                owner: r.spec.owner,
                pod: r.spec.pod,
                host_ifname: r.spec.host_ifname,
                host_ifindex: r.spec.host_ifindex,
                host_mac: r.spec.host_mac,
                pod_mac: r.spec.pod_mac,
                addresses: r.spec.addresses,
                netns: r.spec.netns,
                bandwidth: None,
                identity: Default::default(),
            },
            created_at: 0,
        })
    });
    (d, l)
}

#[test]
fn add_prints_the_result_and_logs_to_the_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = add_mocks();
    let (out, code) = run(
        lookup(&attach_vars("ADD")),
        &conf(dir.path(), json!({})),
        move |_| {
            Ok(Plugin::new(
                Arc::new(d) as Arc<dyn Daemon>,
                Arc::new(l) as Arc<dyn Links>,
            ))
        },
    );
    assert_eq!(code, 0, "{out}");
    let v = parse(&out);
    assert_eq!(v["cniVersion"], "1.0.0");
    assert_eq!(v["ips"][0]["address"], "10.0.10.30/24");
    assert_eq!(v["interfaces"][1]["mac"], "02:00:00:00:00:02");
    let log = std::fs::read_to_string(dir.path().join("cni.log")).unwrap();
    assert!(log.contains("INFO") && log.contains("ADD done"), "{log}");
    assert!(
        !log.contains("DEBUG"),
        "debug lines without enable-debug: {log}"
    );
}

#[test]
fn enable_debug_logs_debug_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = add_mocks();
    let (_, code) = run(
        lookup(&attach_vars("ADD")),
        &conf(dir.path(), json!({"enable-debug": true})),
        move |_| {
            Ok(Plugin::new(
                Arc::new(d) as Arc<dyn Daemon>,
                Arc::new(l) as Arc<dyn Links>,
            ))
        },
    );
    assert_eq!(code, 0);
    let log = std::fs::read_to_string(dir.path().join("cni.log")).unwrap();
    assert!(log.contains("DEBUG") && log.contains("invoked"), "{log}");
}

#[test]
fn unopenable_log_file_does_not_break_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = add_mocks();
    let bad = json!({"log-file": dir.path().join("missing-dir/cni.log")});
    let (out, code) = run(
        lookup(&attach_vars("ADD")),
        &conf(dir.path(), bad),
        move |_| {
            Ok(Plugin::new(
                Arc::new(d) as Arc<dyn Daemon>,
                Arc::new(l) as Arc<dyn Links>,
            ))
        },
    );
    assert_eq!(code, 0);
    assert_eq!(parse(&out)["ips"][0]["address"], "10.0.10.30/24");
}

#[test]
fn del_with_the_daemon_down_queues_and_succeeds_silently() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint_and_veth().times(1).returning(|_| {
        Err(DaemonError::Unreachable {
            endpoint: "sock".into(),
            source: "refused".into(),
        })
    });
    let mut l = MockLinks::new();
    l.expect_remove_host_link().returning(|_| Ok(false));
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    l.expect_release_netns().return_const(());
    let (out, code) = run(
        lookup(&attach_vars("DEL")),
        &conf(dir.path(), json!({})),
        move |_| {
            Ok(Plugin::new(
                Arc::new(d) as Arc<dyn Daemon>,
                Arc::new(l) as Arc<dyn Links>,
            ))
        },
    );
    assert_eq!((out.as_str(), code), ("", 0));
    let queue = DeleteQueue::new(dir.path().join("queue"));
    assert_eq!(queue.pending().unwrap().len(), 1);
}

#[test]
fn failures_are_printed_in_the_config_version_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = MockDaemon::new();
    d.expect_health().returning(|| {
        Err(DaemonError::Unreachable {
            endpoint: "sock".into(),
            source: "refused".into(),
        })
    });
    let c = conf(dir.path(), json!({"cniVersion": "1.1.0"}));
    let (out, code) = run(lookup(&[("CNI_COMMAND", "STATUS")]), &c, move |_| {
        Ok(Plugin::new(
            Arc::new(d) as Arc<dyn Daemon>,
            Arc::new(MockLinks::new()) as Arc<dyn Links>,
        ))
    });
    assert_eq!(code, 1);
    let v = parse(&out);
    assert_eq!(
        (v["code"].as_u64(), v["cniVersion"].as_str()),
        (Some(50), Some("1.1.0"))
    );
}
