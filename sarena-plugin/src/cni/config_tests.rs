//! Tests of [`NetConf`] parsing and its helpers.

use serde_json::json;

use super::*;

fn parse_json(v: Value) -> Result<NetConf, CniError> {
    NetConf::parse(v.to_string().as_bytes())
}

fn base() -> Value {
    json!({"cniVersion": "1.1.0", "name": "sarena", "type": "sarena-cni"})
}

fn with(key: &str, value: Value) -> Value {
    let mut v = base();
    v[key] = value;
    v
}

fn err_of(v: Value, code: ErrorCode, needle: &str) -> CniError {
    let e = parse_json(v.clone()).unwrap_err();
    assert_eq!(e.code, code, "{v}: {e}");
    assert!(e.msg.contains(needle), "expected {needle:?} in {e}");
    e
}

#[test]
fn parses_full_sarena_config() {
    let conf = parse_json(json!({
        "cniVersion": "1.0.0",
        "name": "sarena",
        "type": "sarena-cni",
        "enable-debug": true,
        "log-file": "/var/log/sarena-cni.log",
        "daemon-endpoint": "unix:///run/sarena/sarena.sock",
        "delete-queue-dir": "/var/lib/sarena/del-queue",
        "prevResult": {"cniVersion": "1.0.0", "ips": []},
        "runtimeConfig": {"ips": ["10.0.0.7/24"]},
        "capabilities": {"ips": true},
        "args": {"cni": {"labels": []}},
        "ipam": {"type": "host-local"},
        "cniVersions": ["0.4.0", "1.0.0"],
    }))
    .unwrap();
    assert_eq!(conf.version().unwrap(), Version::V1_0_0);
    assert_eq!(conf.name, "sarena");
    assert_eq!(conf.plugin_type, "sarena-cni");
    assert!(conf.enable_debug);
    assert_eq!(
        conf.log_file,
        Some(PathBuf::from("/var/log/sarena-cni.log"))
    );
    assert_eq!(
        conf.daemon_endpoint.as_deref(),
        Some("unix:///run/sarena/sarena.sock")
    );
    assert_eq!(
        conf.delete_queue_dir,
        Some(PathBuf::from("/var/lib/sarena/del-queue"))
    );
    assert!(conf.prev_result.is_some());
    assert_eq!(conf.capabilities.as_ref().unwrap()["ips"], true);
    assert_eq!(conf.extra.len(), 2);
    assert_eq!(conf.extra["ipam"], json!({"type": "host-local"}));
    assert_eq!(conf.extra["cniVersions"], json!(["0.4.0", "1.0.0"]));
}

#[test]
fn serializes_back_with_extra_fields() {
    let conf = parse_json(with("custom", json!({"a": 1}))).unwrap();
    let back = serde_json::to_value(&conf).unwrap();
    assert_eq!(back["custom"], json!({"a": 1}));
    assert_eq!(back["name"], "sarena");
    assert_eq!(NetConf::parse(back.to_string().as_bytes()).unwrap(), conf);
}

#[test]
fn missing_version_is_0_1_0_and_empty_too() {
    let mut v = base();
    v.as_object_mut().unwrap().remove("cniVersion");
    assert_eq!(parse_json(v).unwrap().version().unwrap(), Version::V0_1_0);
    assert_eq!(
        parse_json(with("cniVersion", json!("")))
            .unwrap()
            .version()
            .unwrap(),
        Version::V0_1_0
    );
    assert_eq!(
        parse_json(with("cniVersion", Value::Null))
            .unwrap()
            .version()
            .unwrap(),
        Version::V0_1_0
    );
    for v in Version::ALL {
        let conf = parse_json(with("cniVersion", json!(v.as_str()))).unwrap();
        assert_eq!(conf.version().unwrap(), v);
    }
}

#[test]
fn unsupported_version_is_error_1() {
    err_of(
        with("cniVersion", json!("1.2.0")),
        ErrorCode::IncompatibleVersion,
        "cniVersion",
    );
    let conf = NetConf {
        cni_version: Some("9.9.9".into()),
        ..NetConf::default()
    };
    assert_eq!(
        conf.version().unwrap_err().code,
        ErrorCode::IncompatibleVersion
    );
}

#[test]
fn malformed_json_is_error_6() {
    for bad in [
        &b""[..],
        b"{",
        b"not json",
        b"{\"name\": }",
        b"\xff\xfe",
        b"{} trailing",
    ] {
        let e = NetConf::parse(bad).unwrap_err();
        assert_eq!(e.code, ErrorCode::Decode);
        assert!(e.msg.contains("network config"), "{e}");
        assert!(!e.details.is_empty());
    }
    for not_object in ["[]", "1", "\"s\"", "null", "true"] {
        let e = NetConf::parse(not_object.as_bytes()).unwrap_err();
        assert_eq!(e.code, ErrorCode::Decode);
        assert!(e.msg.contains("not a JSON object"));
    }
}

#[test]
fn wrong_field_type_is_error_6_naming_the_field() {
    let cases = [
        ("cniVersion", json!(1)),
        ("name", json!(["x"])),
        ("type", json!(5)),
        ("enable-debug", json!("yes")),
        ("log-file", json!(1)),
        ("log-max-bytes", json!(-1)),
        ("daemon-endpoint", json!(false)),
        ("delete-queue-dir", json!({})),
        ("runtimeConfig", json!([])),
        ("capabilities", json!("ips")),
        ("args", json!(3)),
        (
            "cni.dev/valid-attachments",
            json!([{"containerID": 1, "ifname": "eth0"}]),
        ),
        ("cni.dev/attachments", json!({"containerID": "a"})),
    ];
    for (key, value) in cases {
        let e = err_of(with(key, value), ErrorCode::Decode, key);
        assert!(e.msg.contains(&format!("`{key}`")), "{e}");
        assert!(!e.details.is_empty());
    }
    err_of(
        with("prevResult", json!([1])),
        ErrorCode::Decode,
        "prevResult",
    );
}

#[test]
fn name_is_required_and_validated_with_code_7() {
    let mut v = base();
    v.as_object_mut().unwrap().remove("name");
    err_of(v, ErrorCode::InvalidConfig, "`name`");
    err_of(with("name", json!("")), ErrorCode::InvalidConfig, "`name`");
    err_of(
        with("name", json!("../etc")),
        ErrorCode::InvalidConfig,
        "`name`",
    );
    err_of(
        with("name", json!("my net")),
        ErrorCode::InvalidConfig,
        "`name`",
    );
}

#[test]
fn type_is_required_and_a_file_name() {
    let mut v = base();
    v.as_object_mut().unwrap().remove("type");
    err_of(v, ErrorCode::InvalidConfig, "`type`");
    err_of(with("type", json!("")), ErrorCode::InvalidConfig, "`type`");
    err_of(
        with("type", json!("../bin/sh")),
        ErrorCode::InvalidConfig,
        "`type`",
    );
    err_of(
        with("type", json!("a\\b")),
        ErrorCode::InvalidConfig,
        "`type`",
    );
}

#[test]
fn daemon_endpoint_forms() {
    for ok in [
        "/run/sarena/sarena.sock",
        "unix:///run/sarena.sock",
        "http://127.0.0.1:7070",
        "http://localhost:7070/",
        "http://[::1]:7070",
        "http://sarena-daemon.kube-system.svc:80",
    ] {
        let conf = parse_json(with("daemon-endpoint", json!(ok))).unwrap();
        assert_eq!(conf.daemon_endpoint.as_deref(), Some(ok));
    }
    for bad in [
        "",
        "run/sarena.sock",
        "unix://run.sock",
        "http://",
        "http://host",
        "http://host:0",
        "http://host:99999",
        "http://:80",
        "http://[::1:80",
        "http://ho st:80",
        "https://host:443",
        "tcp://host:1",
    ] {
        err_of(
            with("daemon-endpoint", json!(bad)),
            ErrorCode::InvalidConfig,
            "`daemon-endpoint`",
        );
    }
}

#[test]
fn empty_paths_are_invalid() {
    err_of(
        with("log-file", json!("")),
        ErrorCode::InvalidConfig,
        "path",
    );
    err_of(
        with("delete-queue-dir", json!("")),
        ErrorCode::InvalidConfig,
        "path",
    );
}

#[test]
fn requested_ips_from_runtime_config_and_args() {
    let mut v = base();
    v["runtimeConfig"] = json!({"ips": ["10.0.0.7/24", "fd00::7"]});
    v["args"] = json!({"cni": {"ips": ["10.0.0.8", "10.0.0.7/16"]}});
    let ips = parse_json(v).unwrap().requested_ips().unwrap();
    let want: Vec<IpAddr> = ["10.0.0.7", "fd00::7", "10.0.0.8"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(ips, want);
    assert!(
        parse_json(base())
            .unwrap()
            .requested_ips()
            .unwrap()
            .is_empty()
    );
    // `args.cni` that is not an object carries no ips: optional metadata is ignored.
    let conf = parse_json(with("args", json!({"cni": "x", "other": 1}))).unwrap();
    assert!(conf.requested_ips().unwrap().is_empty());
    let conf = parse_json(with("runtimeConfig", json!({"ips": null}))).unwrap();
    assert!(conf.requested_ips().unwrap().is_empty());
}

#[test]
fn requested_ips_bad_entries_are_error_7_naming_field() {
    let cases = [
        (
            with("runtimeConfig", json!({"ips": "10.0.0.1"})),
            "runtimeConfig.ips",
        ),
        (
            with("runtimeConfig", json!({"ips": [1]})),
            "runtimeConfig.ips",
        ),
        (
            with("runtimeConfig", json!({"ips": ["10.0.0.1/40"]})),
            "runtimeConfig.ips",
        ),
        (
            with("args", json!({"cni": {"ips": ["nope"]}})),
            "args.cni.ips",
        ),
        (
            with("args", json!({"cni": {"ips": {"a": 1}}})),
            "args.cni.ips",
        ),
    ];
    for (v, field) in cases {
        let e = parse_json(v).unwrap().requested_ips().unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidConfig);
        assert!(e.msg.contains(field), "{e}");
    }
}

#[test]
fn gc_attachments_prefer_valid_attachments() {
    let a = json!([{"containerID": "c1", "ifname": "eth0"}]);
    let b = json!([{"containerID": "c2", "ifname": "eth1"}]);
    let mut v = base();
    v["cni.dev/attachments"] = b.clone();
    let conf = parse_json(v.clone()).unwrap();
    let got = conf.gc_valid_attachments().unwrap();
    assert_eq!(
        got,
        vec![GcAttachment {
            container_id: "c2".into(),
            ifname: "eth1".into()
        }]
    );
    v["cni.dev/valid-attachments"] = a;
    let got = parse_json(v).unwrap().gc_valid_attachments().unwrap();
    assert_eq!(
        got,
        vec![GcAttachment {
            container_id: "c1".into(),
            ifname: "eth0".into()
        }]
    );
    assert_eq!(parse_json(base()).unwrap().gc_valid_attachments(), None);
    let empty = parse_json(with("cni.dev/valid-attachments", json!([]))).unwrap();
    assert_eq!(empty.gc_valid_attachments(), Some(vec![]));
}

#[test]
fn check_command_version_gates_check_status_gc() {
    for cmd in Command::ALL {
        for v in Version::ALL {
            let r = check_command_version(cmd, v);
            assert_eq!(r.is_ok(), v >= cmd.min_version(), "{cmd} {v}");
            if let Err(e) = r {
                assert_eq!(e.code, ErrorCode::IncompatibleVersion);
                assert!(
                    e.msg.contains(cmd.as_str()) && e.msg.contains("cniVersion"),
                    "{e}"
                );
            }
        }
    }
    assert!(check_command_version(Command::Check, Version::V0_3_1).is_err());
    assert!(check_command_version(Command::Check, Version::V0_4_0).is_ok());
    assert!(check_command_version(Command::Gc, Version::V1_0_0).is_err());
    assert!(check_command_version(Command::Status, Version::V1_1_0).is_ok());
}

#[test]
fn log_max_bytes_defaults_and_has_a_floor() {
    let conf = parse_json(base()).unwrap();
    assert_eq!(conf.log_max_bytes(), DEFAULT_LOG_MAX_BYTES);
    let conf = parse_json(with("log-max-bytes", json!(8192))).unwrap();
    assert_eq!(conf.log_max_bytes(), 8192);
    err_of(
        with("log-max-bytes", json!(MIN_LOG_MAX_BYTES - 1)),
        ErrorCode::InvalidConfig,
        "log-max-bytes",
    );
}
