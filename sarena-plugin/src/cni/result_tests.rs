//! Tests of [`CniResult`] printing and parsing in every version.

use serde_json::json;

use super::*;

/// Sarena's typical result: host veth, pod eth0, dual stack, routes, DNS.
fn sample() -> CniResult {
    CniResult {
        interfaces: vec![
            Interface {
                name: "lxc0123456789ab".into(),
                mac: Some("0a:58:0a:f4:00:01".into()),
                mtu: Some(1500),
                ..Interface::default()
            },
            Interface {
                name: "eth0".into(),
                mac: Some("0a:58:0a:f4:00:05".into()),
                mtu: Some(1500),
                sandbox: Some("/var/run/netns/blue".into()),
                socket_path: Some("/run/vhost.sock".into()),
                pci_id: Some("0000:04:00.5".into()),
            },
        ],
        ips: vec![
            IpConfig {
                address: "10.1.0.5/16".parse().unwrap(),
                gateway: Some("10.1.0.1".parse().unwrap()),
                interface: Some(1),
            },
            IpConfig {
                address: "10.1.0.6/16".parse().unwrap(),
                gateway: None,
                interface: Some(1),
            },
            IpConfig {
                address: "fd00::5/64".parse().unwrap(),
                gateway: Some("fd00::1".parse().unwrap()),
                interface: Some(1),
            },
        ],
        routes: vec![
            Route {
                dst: "0.0.0.0/0".parse().unwrap(),
                gw: Some("10.1.0.1".parse().unwrap()),
                mtu: Some(1400),
                advmss: Some(1360),
                priority: Some(10),
                table: Some(100),
                scope: Some(0),
            },
            Route {
                dst: "::/0".parse().unwrap(),
                gw: None,
                mtu: None,
                advmss: None,
                priority: None,
                table: None,
                scope: None,
            },
        ],
        dns: Dns {
            nameservers: vec!["10.1.0.1".into()],
            domain: Some("cluster.local".into()),
            search: vec!["svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        },
    }
}

fn dns_json() -> Value {
    json!({
        "nameservers": ["10.1.0.1"],
        "domain": "cluster.local",
        "search": ["svc.cluster.local"],
        "options": ["ndots:5"],
    })
}

fn prev_err(value: Value, v: Version, needle: &str) {
    let e = CniResult::from_json(&value, v).unwrap_err();
    assert_eq!(e.code, ErrorCode::Decode, "{value}");
    assert!(e.msg.contains("prevResult"), "{e}");
    assert!(e.msg.contains(needle), "expected {needle:?} in {e}");
}

#[test]
fn prints_1x_as_is() {
    for v in [Version::V1_0_0, Version::V1_1_0] {
        let got = sample().to_json(v).unwrap();
        let want = json!({
            "cniVersion": v.as_str(),
            "interfaces": [
                {"name": "lxc0123456789ab", "mac": "0a:58:0a:f4:00:01", "mtu": 1500},
                {"name": "eth0", "mac": "0a:58:0a:f4:00:05", "mtu": 1500,
                 "sandbox": "/var/run/netns/blue", "socketPath": "/run/vhost.sock",
                 "pciID": "0000:04:00.5"},
            ],
            "ips": [
                {"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 1},
                {"address": "10.1.0.6/16", "interface": 1},
                {"address": "fd00::5/64", "gateway": "fd00::1", "interface": 1},
            ],
            "routes": [
                {"dst": "0.0.0.0/0", "gw": "10.1.0.1", "mtu": 1400, "advmss": 1360,
                 "priority": 10, "table": 100, "scope": 0},
                {"dst": "::/0"},
            ],
            "dns": dns_json(),
        });
        assert_eq!(got, want);
    }
}

#[test]
fn prints_04x_with_ip_versions_and_0x_fields_only() {
    for v in [Version::V0_3_0, Version::V0_3_1, Version::V0_4_0] {
        let got = sample().to_json(v).unwrap();
        let want = json!({
            "cniVersion": v.as_str(),
            "interfaces": [
                {"name": "lxc0123456789ab", "mac": "0a:58:0a:f4:00:01"},
                {"name": "eth0", "mac": "0a:58:0a:f4:00:05", "sandbox": "/var/run/netns/blue"},
            ],
            "ips": [
                {"version": "4", "address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 1},
                {"version": "4", "address": "10.1.0.6/16", "interface": 1},
                {"version": "6", "address": "fd00::5/64", "gateway": "fd00::1", "interface": 1},
            ],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}, {"dst": "::/0"}],
            "dns": dns_json(),
        });
        assert_eq!(got, want);
    }
}

#[test]
fn prints_02x_with_ip4_ip6_blocks() {
    for v in [Version::V0_1_0, Version::V0_2_0] {
        let got = sample().to_json(v).unwrap();
        let want = json!({
            "cniVersion": v.as_str(),
            "ip4": {
                "ip": "10.1.0.5/16",
                "gateway": "10.1.0.1",
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}],
            },
            "ip6": {"ip": "fd00::5/64", "gateway": "fd00::1", "routes": [{"dst": "::/0"}]},
            "dns": dns_json(),
        });
        assert_eq!(got, want);
    }
}

#[test]
fn prints_02x_single_family_and_drops_routes_without_a_block() {
    let mut r = sample();
    r.ips.retain(|ip| ip.address.addr().is_ipv6());
    let got = r.to_json(Version::V0_2_0).unwrap();
    assert!(got.get("ip4").is_none());
    assert_eq!(got["ip6"]["routes"], json!([{"dst": "::/0"}]));
    assert_eq!(got.as_object().unwrap().len(), 3, "{got}");
}

#[test]
fn result_without_ip_cannot_be_printed_in_02x() {
    let r = CniResult {
        interfaces: sample().interfaces,
        ..CniResult::default()
    };
    for v in [Version::V0_1_0, Version::V0_2_0] {
        let e = r.to_json(v).unwrap_err();
        assert_eq!(e.code, ErrorCode::IncompatibleVersion);
        assert!(
            e.msg.contains("cniVersion") && e.msg.contains(v.as_str()),
            "{e}"
        );
    }
    // Newer versions can express it.
    for v in [
        Version::V0_3_0,
        Version::V0_4_0,
        Version::V1_0_0,
        Version::V1_1_0,
    ] {
        assert!(r.to_json(v).is_ok());
    }
}

#[test]
fn empty_dns_is_omitted_in_1x_and_printed_in_0x() {
    let r = CniResult {
        ips: vec![IpConfig {
            address: "10.0.0.2/24".parse().unwrap(),
            gateway: None,
            interface: None,
        }],
        ..CniResult::default()
    };
    let v1 = r.to_json(Version::V1_1_0).unwrap();
    assert_eq!(
        v1,
        json!({"cniVersion": "1.1.0", "ips": [{"address": "10.0.0.2/24"}]})
    );
    assert_eq!(r.to_json(Version::V0_4_0).unwrap()["dns"], json!({}));
    assert_eq!(r.to_json(Version::V0_2_0).unwrap()["dns"], json!({}));
    assert!(Dns::default().is_empty());
    assert!(!sample().dns.is_empty());
}

#[test]
fn round_trips_in_every_version() {
    let r = sample();
    for v in [Version::V1_0_0, Version::V1_1_0] {
        assert_eq!(CniResult::from_json(&r.to_json(v).unwrap(), v).unwrap(), r);
    }
    let mut want_04 = r.clone();
    for i in &mut want_04.interfaces {
        (i.mtu, i.socket_path, i.pci_id) = (None, None, None);
    }
    for route in &mut want_04.routes {
        *route = route_0x(route);
    }
    for v in [Version::V0_3_0, Version::V0_3_1, Version::V0_4_0] {
        assert_eq!(
            CniResult::from_json(&r.to_json(v).unwrap(), v).unwrap(),
            want_04
        );
    }
    let want_02 = CniResult {
        interfaces: vec![],
        ips: vec![
            IpConfig {
                interface: None,
                ..r.ips[0].clone()
            },
            IpConfig {
                interface: None,
                ..r.ips[2].clone()
            },
        ],
        routes: want_04.routes.clone(),
        dns: r.dns.clone(),
    };
    for v in [Version::V0_1_0, Version::V0_2_0] {
        assert_eq!(
            CniResult::from_json(&r.to_json(v).unwrap(), v).unwrap(),
            want_02
        );
    }
}

#[test]
fn parses_spec_1x_example() {
    let value = json!({
        "cniVersion": "1.1.0",
        "ips": [{"address": "10.1.0.5/16", "gateway": "10.1.0.1", "interface": 2}],
        "routes": [{"dst": "0.0.0.0/0"}],
        "interfaces": [
            {"name": "cni0", "mac": "00:11:22:33:44:55"},
            {"name": "veth3243", "mac": "55:44:33:22:11:11"},
            {"name": "eth0", "mac": "99:88:77:66:55:44", "sandbox": "/var/run/netns/blue"},
        ],
        "dns": {"nameservers": ["10.1.0.1"]},
        "somethingNew": true,
    });
    let r = CniResult::from_json(&value, Version::V1_1_0).unwrap();
    assert_eq!(r.interfaces.len(), 3);
    assert_eq!(
        r.interfaces[2].sandbox.as_deref(),
        Some("/var/run/netns/blue")
    );
    assert_eq!(r.ips[0].interface, Some(2));
    assert_eq!(r.ips[0].gateway, Some("10.1.0.1".parse().unwrap()));
    assert_eq!(r.routes[0].gw, None);
    assert_eq!(r.dns.nameservers, vec!["10.1.0.1".to_string()]);
}

#[test]
fn parses_04x_and_checks_ip_version() {
    let value = json!({
        "cniVersion": "0.4.0",
        "interfaces": [{"name": "eth0", "sandbox": "/proc/1/ns/net"}],
        "ips": [
            {"version": "4", "address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0},
            {"address": "fd00::2/64"},
            {"version": "4", "address": "::ffff:10.0.0.9/120"},
        ],
        "routes": [{"dst": "10.0.0.0/8", "gw": "10.0.0.1"}],
    });
    let r = CniResult::from_json(&value, Version::V0_4_0).unwrap();
    assert_eq!(r.ips.len(), 3);
    assert_eq!(r.ips[0].interface, Some(0));
    assert_eq!(r.routes.len(), 1);
    for bad in ["6", "5", "", "v4"] {
        let value = json!({"ips": [{"version": bad, "address": "10.0.0.2/24"}]});
        prev_err(value, Version::V0_3_1, "ips[0].version");
    }
}

#[test]
fn parses_02x_ip4_ip6_into_ips_and_routes() {
    let value = json!({
        "cniVersion": "0.2.0",
        "ip4": {"ip": "10.0.0.2/24", "gateway": "10.0.0.1",
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1"}]},
        "ip6": {"ip": "fd00::2/64", "routes": [{"dst": "::/0"}]},
        "dns": {"nameservers": ["1.1.1.1"]},
    });
    let r = CniResult::from_json(&value, Version::V0_2_0).unwrap();
    assert!(r.interfaces.is_empty());
    assert_eq!(r.ips.len(), 2);
    assert!(r.ips.iter().all(|ip| ip.interface.is_none()));
    assert_eq!(r.ips[1].address, "fd00::2/64".parse::<IpNet>().unwrap());
    assert_eq!(r.routes.len(), 2);
    assert_eq!(r.dns.nameservers, vec!["1.1.1.1".to_string()]);
    let empty = CniResult::from_json(&json!({}), Version::V0_1_0).unwrap();
    assert_eq!(empty, CniResult::default());
    prev_err(
        json!({"ip4": {"ip": "fd00::2/64"}}),
        Version::V0_2_0,
        "ip4.ip",
    );
    prev_err(
        json!({"ip6": {"ip": "10.0.0.2/24"}}),
        Version::V0_1_0,
        "ip6.ip",
    );
}

#[test]
fn embedded_version_decides_the_shape() {
    let v02 = json!({"cniVersion": "0.2.0", "ip4": {"ip": "10.0.0.2/24"}});
    let r = CniResult::from_json(&v02, Version::V1_1_0).unwrap();
    assert_eq!(r.ips.len(), 1);
    // Without an embedded version, the given one decides: a 0.2.0 body read as
    // 1.x has no ips.
    let bare = json!({"ip4": {"ip": "10.0.0.2/24"}});
    assert!(
        CniResult::from_json(&bare, Version::V1_1_0)
            .unwrap()
            .ips
            .is_empty()
    );
    assert_eq!(
        CniResult::from_json(&bare, Version::V0_2_0)
            .unwrap()
            .ips
            .len(),
        1
    );
    let empty_version = json!({"cniVersion": "", "ip4": {"ip": "10.0.0.2/24"}});
    assert_eq!(
        CniResult::from_json(&empty_version, Version::V0_1_0)
            .unwrap()
            .ips
            .len(),
        1
    );
}

#[test]
fn nulls_and_empty_optional_strings_read_as_absent() {
    let value = json!({
        "cniVersion": null,
        "interfaces": [{"name": "eth0", "mac": "", "sandbox": null, "mtu": null}],
        "ips": [{"address": "10.0.0.2/24", "gateway": "", "interface": null}],
        "routes": null,
        "dns": null,
    });
    let r = CniResult::from_json(&value, Version::V1_0_0).unwrap();
    assert_eq!(
        r.interfaces,
        vec![Interface {
            name: "eth0".into(),
            ..Interface::default()
        }]
    );
    assert_eq!(r.ips[0].gateway, None);
    assert!(r.routes.is_empty());
    assert!(r.dns.is_empty());
}

#[test]
fn bad_prev_results_are_error_6_naming_prev_result() {
    for v in Version::ALL {
        prev_err(json!([]), v, "not a JSON object");
        prev_err(json!("x"), v, "not a JSON object");
        prev_err(json!({"cniVersion": 1}), v, "cniVersion");
        prev_err(json!({"cniVersion": "9.0.0"}), v, "cniVersion");
    }
    let v1 = Version::V1_1_0;
    prev_err(
        json!({"ips": [{"address": "10.0.0.2"}]}),
        v1,
        "1.1.0 result",
    );
    prev_err(
        json!({"ips": [{"address": "10.0.0.2/24", "interface": -1}]}),
        v1,
        "decode",
    );
    prev_err(
        json!({"ips": [{"address": "10.0.0.2/24", "gateway": "x"}]}),
        v1,
        "decode",
    );
    prev_err(json!({"interfaces": [{"mac": "aa"}]}), v1, "decode");
    prev_err(
        json!({"routes": [{"dst": "0.0.0.0/0", "scope": 300}]}),
        v1,
        "decode",
    );
    prev_err(json!({"dns": {"nameservers": "1.1.1.1"}}), v1, "decode");
    prev_err(json!({"ips": {}}), Version::V0_4_0, "0.4.0 result");
    prev_err(
        json!({"ip4": {"gateway": "10.0.0.1"}}),
        Version::V0_2_0,
        "0.2.0 result",
    );
    let e = CniResult::from_json(&json!({"ips": 1}), v1).unwrap_err();
    assert!(!e.details.is_empty());
}

#[test]
fn a_sarena_dual_stack_result_converts_to_and_from_every_version() {
    let route = |dst: &str, gw: Option<&str>| Route {
        dst: dst.parse().unwrap(),
        gw: gw.map(|g| g.parse().unwrap()),
        mtu: None,
        advmss: None,
        priority: None,
        table: None,
        scope: None,
    };
    let r = CniResult {
        interfaces: vec![
            Interface {
                name: "lxc0123456789ab".into(),
                mac: Some("0a:58:0a:f4:00:01".into()),
                ..Interface::default()
            },
            Interface {
                name: "eth0".into(),
                mac: Some("0a:58:0a:f4:00:05".into()),
                mtu: Some(1500),
                sandbox: Some("/var/run/netns/blue".into()),
                ..Interface::default()
            },
        ],
        ips: vec![
            IpConfig {
                address: "10.201.0.2/24".parse().unwrap(),
                gateway: Some("10.201.0.1".parse().unwrap()),
                interface: Some(1),
            },
            IpConfig {
                address: "fd00:201::2/64".parse().unwrap(),
                gateway: Some("fe80::1".parse().unwrap()),
                interface: Some(1),
            },
        ],
        routes: vec![
            route("10.201.0.1/32", None),
            route("0.0.0.0/0", Some("10.201.0.1")),
            route("fe80::1/128", None),
            route("::/0", Some("fe80::1")),
        ],
        dns: Dns::default(),
    };
    let v02 = r.to_json(Version::V0_2_0).unwrap();
    assert_eq!(
        v02["ip6"],
        json!({"ip": "fd00:201::2/64", "gateway": "fe80::1",
               "routes": [{"dst": "fe80::1/128"}, {"dst": "::/0", "gw": "fe80::1"}]})
    );
    assert_eq!(v02["ip4"]["ip"], "10.201.0.2/24");
    let v04 = r.to_json(Version::V0_4_0).unwrap();
    assert_eq!(v04["ips"][1]["version"], "6");
    assert_eq!(v04["ips"][1]["interface"], 1);
    for v in [
        Version::V0_1_0,
        Version::V0_2_0,
        Version::V0_3_0,
        Version::V0_3_1,
        Version::V0_4_0,
        Version::V1_0_0,
        Version::V1_1_0,
    ] {
        let back = CniResult::from_json(&r.to_json(v).unwrap(), v).unwrap();
        let addresses: Vec<_> = back.ips.iter().map(|ip| (ip.address, ip.gateway)).collect();
        let want: Vec<_> = r.ips.iter().map(|ip| (ip.address, ip.gateway)).collect();
        assert_eq!(addresses, want, "{v}");
        assert_eq!(
            back.routes, r.routes,
            "{v}: routes survive (dst and gw only)"
        );
        let indexed = !matches!(v, Version::V0_1_0 | Version::V0_2_0);
        assert_eq!(back.ips[1].interface.is_some(), indexed, "{v}");
    }
}
