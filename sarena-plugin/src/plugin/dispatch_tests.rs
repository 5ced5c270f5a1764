use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::{DaemonError, Health, MockDaemon};
use crate::cni::ErrorCode;
use crate::links::MockLinks;
use crate::plugin::DeleteQueue;
use crate::plugin::test_support::*;

fn env(vars: &[(&str, &str)]) -> CniEnv {
    CniEnv::from_lookup(|k| {
        vars.iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap()
}

fn attach_env(command: &str) -> CniEnv {
    env(&[
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", "abc123"),
        ("CNI_NETNS", NETNS),
        ("CNI_IFNAME", "eth0"),
        (
            "CNI_ARGS",
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;IP=10.0.10.30;MAC=9a:54:00:00:00:a7",
        ),
    ])
}

fn conf(version: &str) -> NetConf {
    NetConf::parse(
        json!({"cniVersion": version, "name": "sarena", "type": "sarena-cni"})
            .to_string()
            .as_bytes(),
    )
    .unwrap()
}

fn plugin(d: MockDaemon, l: MockLinks) -> Plugin {
    Plugin::new(Arc::new(d), Arc::new(l))
}

#[tokio::test]
async fn version_answers_without_touching_backends() {
    let p = plugin(MockDaemon::new(), MockLinks::new());
    let out = dispatch(&p, &env(&[("CNI_COMMAND", "VERSION")]), &conf("0.4.0"))
        .await
        .unwrap();
    let out = out.unwrap();
    assert_eq!(out["cniVersion"], "0.4.0");
    assert_eq!(out["supportedVersions"].as_array().unwrap().len(), 7);
    let out = dispatch(&p, &env(&[("CNI_COMMAND", "VERSION")]), &NetConf::default())
        .await
        .unwrap();
    assert_eq!(out.unwrap()["cniVersion"], Version::LATEST.as_str());
}

#[tokio::test]
async fn add_prints_the_result_in_the_config_version() {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate().returning(|_| Ok(allocation()));
    l.expect_create_veth().returning(|_| Ok(pair()));
    l.expect_configure_pod().returning(|_, _, _| Ok(()));
    d.expect_create_endpoint()
        .returning(|r| Ok(endpoint_from(&r)));
    let out = dispatch(&plugin(d, l), &attach_env("ADD"), &conf("1.0.0"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out["cniVersion"], "1.0.0");
    assert_eq!(out["ips"][0]["address"], "10.0.10.30/24");
    assert_eq!(out["ips"][0]["interface"], 1);
    assert_eq!(out["interfaces"][1]["sandbox"], NETNS);
}

#[tokio::test]
async fn check_before_0_4_0_is_refused() {
    let p = plugin(MockDaemon::new(), MockLinks::new());
    let e = dispatch(&p, &attach_env("CHECK"), &conf("0.3.1"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::IncompatibleVersion);
}

#[tokio::test]
async fn status_before_1_1_0_is_refused_and_maps_unreachable_to_50() {
    let p = plugin(MockDaemon::new(), MockLinks::new());
    let e = dispatch(&p, &env(&[("CNI_COMMAND", "STATUS")]), &conf("1.0.0"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::IncompatibleVersion);

    let mut d = MockDaemon::new();
    d.expect_health().times(1).returning(|| Err(unreachable()));
    let e = dispatch(
        &plugin(d, MockLinks::new()),
        &env(&[("CNI_COMMAND", "STATUS")]),
        &conf("1.1.0"),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::PluginNotAvailable);

    let mut d = MockDaemon::new();
    d.expect_health().times(1).returning(|| {
        Ok(Health {
            ready: true,
            message: String::new(),
        })
    });
    let out = dispatch(
        &plugin(d, MockLinks::new()),
        &env(&[("CNI_COMMAND", "STATUS")]),
        &conf("1.1.0"),
    )
    .await
    .unwrap();
    assert_eq!(out, None);
}

#[tokio::test]
async fn del_replays_the_queue_first_then_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let queue = DeleteQueue::new(dir.path());
    let old = crate::api::Attachment {
        container_id: "old".into(),
        ifname: "eth0".into(),
    };
    queue.enqueue(&old).unwrap();
    let mut seq = mockall::Sequence::new();
    let mut d = MockDaemon::new();
    let o = old.clone();
    d.expect_delete_endpoint()
        .withf(move |a| a == &o)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(true));
    d.expect_delete_endpoint_and_veth()
        .withf(|a| a == &att())
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Ok(crate::api::Deleted {
                deleted: true,
                veth_removal: false,
            })
        });
    let mut l = MockLinks::new();
    l.expect_remove_host_link().returning(|_| Ok(true));
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    l.expect_release_netns().times(1).return_const(());
    let p = plugin(d, l).with_delete_queue(queue.clone());
    assert_eq!(
        dispatch(&p, &attach_env("DEL"), &conf("1.1.0"))
            .await
            .unwrap(),
        None
    );
    assert!(queue.is_empty().unwrap());
}

#[tokio::test]
async fn add_replays_the_queue_and_proceeds_when_its_own_entry_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let queue = DeleteQueue::new(dir.path());
    queue.enqueue(&att()).unwrap();
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    d.expect_delete_endpoint()
        .withf(|a| a == &att())
        .times(1)
        .returning(|_| Ok(true));
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate().returning(|_| Ok(allocation()));
    l.expect_create_veth().returning(|_| Ok(pair()));
    l.expect_configure_pod().returning(|_, _, _| Ok(()));
    d.expect_create_endpoint()
        .returning(|r| Ok(endpoint_from(&r)));
    let p = plugin(d, l).with_delete_queue(queue.clone());
    dispatch(&p, &attach_env("ADD"), &conf("1.1.0"))
        .await
        .unwrap()
        .unwrap();
    assert!(queue.is_empty().unwrap());
}

#[tokio::test]
async fn add_with_its_deletion_still_queued_is_try_again_later() {
    let dir = tempfile::tempdir().unwrap();
    let queue = DeleteQueue::new(dir.path());
    queue.enqueue(&att()).unwrap();
    let mut d = MockDaemon::new();
    d.expect_delete_endpoint()
        .times(1)
        .returning(|_| Err(unreachable()));
    let p = plugin(d, MockLinks::new()).with_delete_queue(queue);
    let e = dispatch(&p, &attach_env("ADD"), &conf("1.1.0"))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TryAgainLater);
    let _: Option<DaemonError> = None;
}

#[tokio::test]
async fn gc_runs_with_the_valid_list() {
    let mut d = MockDaemon::new();
    d.expect_gc()
        .withf(|r| r.valid.len() == 1)
        .times(1)
        .returning(|_| Ok(Default::default()));
    let mut l = MockLinks::new();
    l.expect_list_host_links().times(1).returning(|| Ok(vec![]));
    let c = NetConf::parse(
        json!({"cniVersion": "1.1.0", "name": "sarena", "type": "sarena-cni",
               "cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "eth0"}]})
        .to_string()
        .as_bytes(),
    )
    .unwrap();
    let out = dispatch(&plugin(d, l), &env(&[("CNI_COMMAND", "GC")]), &c)
        .await
        .unwrap();
    assert_eq!(out, None);
}
