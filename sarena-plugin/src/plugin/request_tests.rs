use serde_json::json;

use super::*;
use crate::cni::CniEnv;

fn env(command: &str, extra: &[(&str, &str)]) -> CniEnv {
    let mut vars: Vec<(String, String)> = vec![
        ("CNI_COMMAND".into(), command.into()),
        ("CNI_CONTAINERID".into(), "abc123".into()),
        ("CNI_NETNS".into(), "/var/run/netns/cni-1".into()),
        ("CNI_IFNAME".into(), "eth0".into()),
    ];
    for (k, v) in extra {
        vars.retain(|(key, _)| key != k);
        vars.push((k.to_string(), v.to_string()));
    }
    CniEnv::from_lookup(|k| {
        vars.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    })
    .unwrap()
}

fn conf(v: serde_json::Value) -> NetConf {
    NetConf::parse(v.to_string().as_bytes()).unwrap()
}

fn base() -> serde_json::Value {
    json!({"cniVersion": "1.0.0", "name": "sarena", "type": "sarena-cni"})
}

#[test]
fn add_request_takes_pod_ips_and_mac_from_cni_args() {
    let e = env(
        "ADD",
        &[(
            "CNI_ARGS",
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=u1;IP=10.0.10.5;MAC=02:00:00:00:00:05",
        )],
    );
    let r = AddRequest::from_cni(&e, &conf(base())).unwrap();
    assert_eq!(
        r.attachment,
        Attachment {
            container_id: "abc123".into(),
            ifname: "eth0".into()
        }
    );
    assert_eq!(r.netns, PathBuf::from("/var/run/netns/cni-1"));
    assert_eq!(r.pod.namespace.as_deref(), Some("default"));
    assert_eq!(r.pod.name.as_deref(), Some("web"));
    assert_eq!(r.pod.uid.as_deref(), Some("u1"));
    assert_eq!(
        r.requested_ips,
        vec!["10.0.10.5".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(
        r.requested_mac.map(|m| m.to_string()).as_deref(),
        Some("02:00:00:00:00:05")
    );
    assert_eq!(r.version, Version::V1_0_0);
}

#[test]
fn prev_result_on_add_is_invalid_config_naming_it() {
    let mut c = base();
    c["prevResult"] = json!({"cniVersion": "1.0.0", "interfaces": []});
    let e = AddRequest::from_cni(&env("ADD", &[]), &conf(c)).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
    assert!(e.msg.starts_with("prevResult"), "{}", e.msg);
}

#[test]
fn add_with_unsupported_version_is_error_1() {
    let mut c = conf(base());
    c.cni_version = Some("9.9.9".into());
    let e = AddRequest::from_cni(&env("ADD", &[]), &c).unwrap_err();
    assert_eq!(e.code, ErrorCode::IncompatibleVersion);
}

#[test]
fn del_request_keeps_an_absent_netns_absent() {
    let r = DelRequest::from_cni(&env("DEL", &[("CNI_NETNS", "")]), &conf(base())).unwrap();
    assert_eq!(r.netns, None);
    let r = DelRequest::from_cni(&env("DEL", &[]), &conf(base())).unwrap();
    assert_eq!(r.netns, Some(PathBuf::from("/var/run/netns/cni-1")));
}

#[test]
fn check_requires_prev_result() {
    let e = CheckRequest::from_cni(&env("CHECK", &[]), &conf(base())).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
    assert!(e.msg.starts_with("prevResult"), "{}", e.msg);
}

#[test]
fn check_parses_prev_result() {
    let mut c = base();
    c["prevResult"] = json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "lxc1", "mac": "02:00:00:00:00:01"},
                       {"name": "eth0", "mac": "02:00:00:00:00:02", "sandbox": "/var/run/netns/cni-1"}],
        "ips": [{"interface": 1, "address": "10.0.10.30/24", "gateway": "10.0.0.7"}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.7"}],
        "dns": {}
    });
    let r = CheckRequest::from_cni(&env("CHECK", &[]), &conf(c)).unwrap();
    assert_eq!(r.prev_result.interfaces.len(), 2);
    assert_eq!(r.prev_result.ips[0].interface, Some(1));
}

#[test]
fn gc_requires_the_valid_attachment_list() {
    let e = GcRequest::from_cni(&env("GC", &[]), &conf(base())).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
    assert!(e.msg.contains("cni.dev/valid-attachments"), "{}", e.msg);
    let mut c = base();
    c["cni.dev/valid-attachments"] = json!([{"containerID": "c1", "ifname": "eth0"}]);
    let r = GcRequest::from_cni(&env("GC", &[]), &conf(c)).unwrap();
    assert_eq!(
        r.valid,
        vec![Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into()
        }]
    );
}

#[test]
fn requested_ips_merge_cni_args_and_runtime_config_without_duplicates() {
    let mut c = base();
    c["runtimeConfig"] = json!({"ips": ["10.0.10.5/24", "10.0.10.6"]});
    let r = AddRequest::from_cni(&env("ADD", &[("CNI_ARGS", "IP=10.0.10.5")]), &conf(c)).unwrap();
    let want: Vec<IpAddr> = vec!["10.0.10.5".parse().unwrap(), "10.0.10.6".parse().unwrap()];
    assert_eq!(r.requested_ips, want);
}

#[test]
fn hand_built_requests_are_validated() {
    let mut r = AddRequest::from_cni(&env("ADD", &[]), &conf(base())).unwrap();
    r.attachment.ifname = "this-name-is-far-too-long".into();
    assert_eq!(
        r.validate().unwrap_err().code,
        ErrorCode::InvalidEnvironment
    );
}
