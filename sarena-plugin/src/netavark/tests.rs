use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::{IpamState, MockDaemon, MockInspect, PoolState};
use crate::error_chain;
use crate::links::MockLinks;
use crate::plugin::Plugin;
use crate::plugin::test_support::*;

const NET: &str = "sarena-net";

fn pool(name: &str, cidr: &str, gateway: &str, namespaces: &[&str]) -> PoolState {
    PoolState {
        name: name.into(),
        cidr: cidr.parse().unwrap(),
        gateway: gateway.parse().unwrap(),
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        allocated: 0,
        capacity: 250,
    }
}

/// A daemon with a dual-stack default pool and a namespace's pool.
fn daemon() -> MockInspect {
    let mut d = MockInspect::new();
    d.expect_ipam_state().returning(|| {
        Ok(IpamState {
            pools: vec![
                pool("default", "10.0.10.0/24", "10.0.10.1", &[]),
                pool("default", "fd00:10::/64", "fd00:10::1", &[]),
                pool("shop", "10.0.20.0/24", "10.0.20.1", &["shop"]),
            ],
            allocations: vec![],
        })
    });
    d
}

/// A network as podman passes it to `create`.
fn network(extra: serde_json::Value) -> Network {
    let mut v = json!({
        "name": NET,
        "id": "2f259bab93aaaaa2542ba43ef33eb990d0999ee1b9924b557b7be53c0b7a1bb9",
        "driver": "sarena",
        "ipv6_enabled": false,
        "internal": false,
        "dns_enabled": false,
        "created": "2026-12-05T06:00:00Z",
        "labels": {"team": "a"},
        "future_field": [1, 2],
    });
    if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        v.extend(extra.clone());
    }
    decode_network(v.to_string().as_bytes()).unwrap()
}

fn exec(extra_opts: serde_json::Value) -> NetworkPluginExec {
    let mut opts = json!({"interface_name": "eth0", "aliases": ["web"]});
    if let (Some(o), Some(extra)) = (opts.as_object_mut(), extra_opts.as_object()) {
        o.extend(extra.clone());
    }
    let v = json!({
        "container_id": "abc123",
        "container_name": "web",
        "network": network(json!({})),
        "network_options": opts,
    });
    decode_exec("setup", v.to_string().as_bytes()).unwrap()
}

#[tokio::test]
async fn create_fills_in_the_default_pools_and_keeps_every_other_field() {
    let asked = network(json!({}));
    let made = create(&daemon(), asked.clone()).await.unwrap();
    let subnets: Vec<_> = made.subnets.clone().unwrap();
    assert_eq!(
        subnets,
        vec![
            Subnet {
                subnet: "10.0.10.0/24".parse().unwrap(),
                gateway: Some("10.0.10.1".parse().unwrap()),
                lease_range: None,
            },
            Subnet {
                subnet: "fd00:10::/64".parse().unwrap(),
                gateway: Some("fd00:10::1".parse().unwrap()),
                lease_range: None,
            },
        ],
        "the namespace's pool is not a container's"
    );
    assert!(made.ipv6_enabled);
    assert_eq!(
        made.ipam_options
            .as_ref()
            .and_then(|o| o.get("driver"))
            .map(String::as_str),
        Some(IPAM_DRIVER)
    );
    assert_eq!(
        (&made.name, &made.id, &made.driver),
        (&asked.name, &asked.id, &asked.driver)
    );
    assert_eq!(
        made.other, asked.other,
        "created, labels and unknown fields kept"
    );
    let out = serde_json::to_value(&made).unwrap();
    assert_eq!(out["future_field"], json!([1, 2]));
    assert_eq!(
        out["dns_enabled"],
        json!(false),
        "netavark requires the booleans"
    );
}

#[tokio::test]
async fn create_takes_the_pools_asked_for_and_refuses_any_other_subnet_or_a_part_of_them() {
    let made = create(
        &daemon(),
        network(json!({"subnets": [{"subnet": "fd00:10::/64"}, {"subnet": "10.0.10.5/24"}]})),
    )
    .await
    .unwrap();
    assert_eq!(made.subnets.as_ref().map(Vec::len), Some(2));
    assert!(made.ipv6_enabled);

    for (subnet, what) in [
        ("10.0.30.0/24", "10.0.30.0/24 is not one"),
        ("10.0.10.0/25", "10.0.10.0/25 is not one"),
        ("10.0.20.0/24", "10.0.20.0/24 is not one"),
    ] {
        let err = create(&daemon(), network(json!({"subnets": [{"subnet": subnet}]})))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(what) && msg.contains("10.0.10.0/24, fd00:10::/64"),
            "{msg}"
        );
    }
    // The daemon hands out addresses from every default pool: one of two
    // would be a network whose containers get addresses outside it.
    let err = create(
        &daemon(),
        network(json!({"subnets": [{"subnet": "10.0.10.0/24"}]})),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetavarkError::SubnetsNotAllPools { .. }),
        "{err}"
    );
    let err = create(
        &daemon(),
        network(json!({"subnets": [
            {"subnet": "10.0.10.0/24", "gateway": "10.0.10.9"}, {"subnet": "fd00:10::/64"}]})),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, NetavarkError::GatewayMismatch { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn create_refuses_ipv6_without_an_ipv6_pool_and_a_daemon_without_a_default_pool() {
    let mut d = MockInspect::new();
    d.expect_ipam_state().returning(|| {
        Ok(IpamState {
            pools: vec![pool("default", "10.0.10.0/24", "10.0.10.1", &[])],
            allocations: vec![],
        })
    });
    let err = create(&d, network(json!({"ipv6_enabled": true})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`ipv6_enabled`"), "{err}");

    let mut d = MockInspect::new();
    d.expect_ipam_state().returning(|| {
        Ok(IpamState {
            pools: vec![pool("shop", "10.0.20.0/24", "10.0.20.1", &["shop"])],
            allocations: vec![],
        })
    });
    let err = create(&d, network(json!({}))).await.unwrap_err();
    assert!(matches!(err, NetavarkError::NoDefaultPool { .. }), "{err}");
}

#[tokio::test]
async fn create_names_the_daemon_it_cannot_reach() {
    let mut d = MockInspect::new();
    d.expect_ipam_state().returning(|| Err(unreachable()));
    let err = create(&d, network(json!({}))).await.unwrap_err();
    let msg = error_chain(&err);
    assert!(
        msg.contains("cannot read the Sarena daemon's pools"),
        "{msg}"
    );
    assert!(msg.contains("/run/sarena/sarena.sock"), "{msg}");
}

#[tokio::test]
async fn every_unsupported_network_field_is_refused_by_name_before_the_daemon_is_asked() {
    for (extra, field) in [
        (
            json!({"network_interface": "podman9"}),
            "`network_interface`",
        ),
        (json!({"internal": true}), "`internal`"),
        (json!({"dns_enabled": true}), "`dns_enabled`"),
        (
            json!({"network_dns_servers": ["10.0.0.53"]}),
            "`network_dns_servers`",
        ),
        (
            json!({"routes": [{"destination": "10.9.0.0/16", "gateway": "10.0.10.1"}]}),
            "`routes`",
        ),
        (
            json!({"subnets": [{"subnet": "10.0.10.0/24", "lease_range": {"start_ip": "10.0.10.5"}}]}),
            "`subnets[0].lease_range`",
        ),
        (
            json!({"ipam_options": {"driver": "host-local"}}),
            "`ipam_options.driver`",
        ),
        (
            json!({"ipam_options": {"driver": "dhcp"}}),
            "`ipam_options.driver`",
        ),
        (
            json!({"ipam_options": {"driver": "sarena", "x": "y"}}),
            "`ipam_options.x`",
        ),
        (json!({"options": {"mtu": "9000"}}), "`options.mtu`"),
        (
            json!({"options": {"daemon-endpoint": ""}}),
            "`options.daemon-endpoint`",
        ),
        (
            json!({"options": {"delete-queue-dir": "queue"}}),
            "`options.delete-queue-dir`",
        ),
        (
            json!({"options": {"daemon-token-file": "token"}}),
            "`options.daemon-token-file`",
        ),
    ] {
        // No expectation: the daemon must not be called.
        let err = create(&MockInspect::new(), network(extra.clone()))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(field) && msg.contains(NET), "{extra}: {msg}");
    }
}

#[test]
fn echoed_input_is_cut_short() {
    let long = "k".repeat(10_000);
    let err = NetworkSettings::of(&network(
        json!({"options": {long.clone(): "/x".repeat(5_000)}}),
    ))
    .unwrap_err();
    assert!(err.to_string().len() < 400, "{}", err.to_string().len());
    let err = NetworkSettings::of(&network(
        json!({"options": {"daemon-endpoint": "x".repeat(10_000)}}),
    ))
    .unwrap_err();
    assert!(err.to_string().len() < 400, "{}", err.to_string().len());
}

#[test]
fn teardown_reads_the_valid_options_of_a_network_create_would_refuse() {
    let n = network(
        json!({"dns_enabled": true, "routes": [{"destination": "10.9.0.0/16"}],
        "options": {"daemon-endpoint": "unix:///run/x.sock", "delete-queue-dir": "relative",
                    "mtu": "1400"}}),
    );
    assert!(NetworkSettings::of(&n).is_err());
    assert_eq!(
        NetworkSettings::for_teardown(&n),
        NetworkSettings {
            daemon_endpoint: Some("unix:///run/x.sock".into()),
            ..NetworkSettings::default()
        }
    );
}

#[test]
fn empty_and_null_fields_are_not_asking_for_anything() {
    let n = network(json!({
        "network_interface": "", "routes": [], "network_dns_servers": null, "options": null,
        "ipam_options": {"driver": "sarena"},
        "subnets": [{"subnet": "10.0.10.0/24", "lease_range": null}],
    }));
    assert_eq!(NetworkSettings::of(&n).unwrap(), NetworkSettings::default());
}

#[test]
fn the_options_name_the_daemon_its_token_and_the_deletion_queue() {
    let n = network(json!({"options": {
        "daemon-endpoint": "/run/x/sarena.sock",
        "daemon-token-file": "/etc/sarena/token",
        "delete-queue-dir": "/var/lib/x/queue",
    }}));
    assert_eq!(
        NetworkSettings::of(&n).unwrap(),
        NetworkSettings {
            daemon_endpoint: Some("/run/x/sarena.sock".into()),
            daemon_token_file: Some("/etc/sarena/token".into()),
            delete_queue_dir: Some("/var/lib/x/queue".into()),
        }
    );
}

#[test]
fn setup_asks_for_the_container_its_addresses_and_mac() {
    let e = exec(json!({
        "static_ips": ["10.0.10.30", "fd00:10::30", "10.0.10.30"],
        "static_mac": POD_MAC,
    }));
    let req = add_request(Path::new(NETNS), &e).unwrap();
    assert_eq!(req.attachment, att());
    assert_eq!(req.netns, Path::new(NETNS));
    assert_eq!(req.pod.name.as_deref(), Some("web"));
    assert_eq!(req.pod.namespace, None, "not a Kubernetes pod");
    assert_eq!(
        req.requested_ips,
        vec![
            "10.0.10.30".parse::<std::net::IpAddr>().unwrap(),
            "fd00:10::30".parse().unwrap()
        ]
    );
    assert_eq!(
        req.requested_mac.map(|m| m.to_string()).as_deref(),
        Some(POD_MAC)
    );
    assert!(req.chain_check.is_none() && req.bandwidth.is_none());
    let del = del_request(Path::new(NETNS), &e).unwrap();
    assert_eq!(del.attachment, att());
}

#[test]
fn port_mappings_per_container_options_and_bad_input_are_refused_by_name() {
    let mut e = exec(json!({}));
    e.port_mappings = Some(vec![PortMapping {
        container_port: 80,
        host_ip: String::new(),
        host_port: 8080,
        protocol: "tcp".into(),
        range: 1,
    }]);
    let msg = add_request(Path::new(NETNS), &e).unwrap_err().to_string();
    assert!(
        msg.contains("`port_mappings`") && msg.contains("8080"),
        "{msg}"
    );

    for (opts, what) in [
        (
            json!({"options": {"mtu": "1400"}}),
            "`network_options.options.mtu`",
        ),
        (json!({"static_mac": "aa:bb"}), "static_mac"),
        (json!({"interface_name": "eth0/../x"}), "CNI_IFNAME"),
    ] {
        let msg = error_chain(&add_request(Path::new(NETNS), &exec(opts.clone())).unwrap_err());
        assert!(
            msg.contains(what) && msg.contains("\"web\""),
            "{opts}: {msg}"
        );
    }
    let mut e = exec(json!({}));
    e.container_id = String::new();
    assert!(add_request(Path::new(NETNS), &e).is_err());
    assert!(del_request(Path::new(NETNS), &e).is_err());
}

#[test]
fn subcommands_and_their_netns_argument() {
    assert_eq!(
        Subcommand::parse(Vec::<String>::new()).unwrap(),
        Subcommand::Info
    );
    assert_eq!(Subcommand::parse(["info"]).unwrap(), Subcommand::Info);
    assert_eq!(Subcommand::parse(["create"]).unwrap(), Subcommand::Create);
    assert_eq!(
        Subcommand::parse(["setup", "/run/netns/x"]).unwrap(),
        Subcommand::Setup {
            netns: "/run/netns/x".into()
        }
    );
    assert_eq!(
        Subcommand::parse(["teardown", "/run/netns/x"]).unwrap(),
        Subcommand::Teardown {
            netns: "/run/netns/x".into()
        }
    );
    for args in [vec!["setup"], vec!["teardown", ""]] {
        let err = Subcommand::parse(args.clone()).unwrap_err();
        assert!(
            err.to_string().contains("namespace path"),
            "{args:?}: {err}"
        );
    }
    assert!(
        Subcommand::parse(["update"])
            .unwrap_err()
            .to_string()
            .contains("\"update\"")
    );
    let info = serde_json::to_value(info("0.1.0")).unwrap();
    assert_eq!(
        (info["version"].as_str(), info["api_version"].as_str()),
        (Some("0.1.0"), Some("1.0.0"))
    );
}

#[test]
fn the_plugin_api_documents_setup_input_decodes() {
    // netavark's plugin-API.md example (a bridge network, with a port mapping).
    let doc = r#"{"container_id": "752947ff91f961eb3cb47ffe9315016979f3ffbec09e4d96a4fae3fb03391697",
        "container_name": "testctr",
        "port_mappings": [{"container_port": 80, "host_ip": "127.0.0.1", "host_port": 8080, "protocol": "tcp", "range": 1}],
        "network": {"dns_enabled": false, "driver": "bridge", "id": "2f25", "internal": false,
            "ipv6_enabled": false, "name": "podman", "network_interface": "podman0", "options": null,
            "ipam_options": {"driver": "host-local"},
            "subnets": [{"gateway": "10.88.0.1", "lease_range": null, "subnet": "10.88.0.0/16"}],
            "network_dns_servers": null},
        "network_options": {"aliases": ["752947ff91f9"], "interface_name": "eth0",
            "static_ips": ["10.88.0.50"], "static_mac": "aa:bb:cc:dd:aa:00"}}"#;
    let e = decode_exec("setup", doc.as_bytes()).unwrap();
    assert_eq!(e.network_options.static_ips.as_ref().map(Vec::len), Some(1));
    assert!(
        NetworkSettings::of(&e.network).is_err(),
        "a bridge's interface and IPAM"
    );
    let err = decode_exec("setup", b"{\"container_id\": 1}").unwrap_err();
    assert!(err.to_string().contains("setup: cannot decode"), "{err}");
}

/// A daemon and links that carry one ADD through (the address of
/// `allocation()`, the veth of `pair()`) for the container "web".
fn plugin_for_one_add() -> Plugin {
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    d.expect_config().returning(|| Ok(config()));
    d.expect_allocate()
        .withf(|r| {
            r.owner == att() && r.pod.name.as_deref() == Some("web") && r.pod.namespace.is_none()
        })
        .times(1)
        .returning(|_| Ok(allocation()));
    l.expect_create_veth().times(1).returning(|_| Ok(pair()));
    l.expect_configure_pod()
        .times(1)
        .returning(|_, _, _| Ok(()));
    d.expect_create_endpoint()
        .times(1)
        .returning(|r| Ok(endpoint_from(&r)));
    Plugin::new(Arc::new(d), Arc::new(l))
}

#[tokio::test]
async fn setup_prints_the_interface_its_mac_and_addresses() {
    let plugin = plugin_for_one_add();
    let block = setup(&plugin, Path::new(NETNS), &exec(json!({})))
        .await
        .unwrap();
    let out = serde_json::to_value(&block).unwrap();
    assert_eq!(out["interfaces"]["eth0"]["mac_address"], json!(POD_MAC));
    assert_eq!(
        out["interfaces"]["eth0"]["subnets"],
        json!([{"ipnet": "10.0.10.30/24", "gateway": "10.0.0.7"}])
    );
}

#[tokio::test]
async fn a_failed_teardown_names_the_container_and_the_cause() {
    // Without a deletion queue, a daemon that cannot be reached fails DEL.
    let mut d = MockDaemon::new();
    let mut l = MockLinks::new();
    d.expect_delete_endpoint_and_veth()
        .withf(|a| a == &att())
        .times(1)
        .returning(|_| Err(unreachable()));
    l.expect_remove_host_link().returning(|_| Ok(true));
    l.expect_remove_pod_link().returning(|_, _| Ok(false));
    l.expect_release_netns().return_const(());
    let plugin = Plugin::new(Arc::new(d), Arc::new(l));
    let err = teardown(&plugin, Path::new(NETNS), &exec(json!({})))
        .await
        .unwrap_err();
    let msg = error_chain(&err);
    assert!(
        msg.starts_with("teardown of container \"web\" on network \"sarena-net\""),
        "{msg}"
    );
    assert!(msg.contains("/run/sarena/sarena.sock"), "{msg}");
}

#[test]
fn the_status_block_needs_the_containers_interface() {
    let result = crate::cni::CniResult::default();
    let err = status_block("web", "eth0", &result).unwrap_err();
    assert!(err.to_string().contains("no interface \"eth0\""), "{err}");
}
