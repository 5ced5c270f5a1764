//! The `sarena` binary against a real `sarena-daemon` (dataplane `none`, so
//! no privilege is needed): every command in both output formats, and the
//! one-line answer when no daemon is there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use sarena_core::api::{Daemon, EndpointCreate, EndpointSpec, PodRef};
use sarena_test_support::daemon::{SMALL_POOL, Site, alloc_req, owner};
use serde_json::Value;

fn sarena(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sarena"))
        .env_remove("SARENA_SOCKET")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .unwrap()
}

/// Runs a command that must succeed; its stdout.
fn ok(socket: &Path, args: &[&str]) -> String {
    let out = sarena(socket, args);
    assert!(
        out.status.success(),
        "sarena {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(socket: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(socket, &all)).unwrap()
}

/// The columns of the table line that starts with `first`.
fn row(table: &str, first: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.starts_with(first))
        .unwrap_or_else(|| panic!("no row {first:?} in\n{table}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// One endpoint (`web`, with a pod name) and one bare allocation (`lease`).
async fn populate(site: &Site) {
    let client = site.client();
    let mut req = alloc_req("web");
    req.pod = PodRef {
        namespace: Some("shop".into()),
        name: Some("web-0".into()),
        uid: None,
    };
    let alloc = client.allocate(req).await.unwrap();
    client
        .create_endpoint(EndpointCreate {
            spec: EndpointSpec {
                owner: owner("web"),
                pod: PodRef {
                    namespace: Some("shop".into()),
                    name: Some("web-0".into()),
                    uid: None,
                },
                host_ifname: "lxcweb".into(),
                host_ifindex: 4242,
                host_mac: "02:00:00:00:00:01".parse().unwrap(),
                pod_mac: "02:00:00:00:00:02".parse().unwrap(),
                addresses: vec![alloc.addresses[0].address],
                netns: "/var/run/netns/web".into(),
                bandwidth: None,
                identity: Default::default(),
            },
        })
        .await
        .unwrap();
    client.allocate(alloc_req("lease")).await.unwrap();
}

#[tokio::test]
async fn every_command_in_both_formats() {
    let site = Site::new();
    let config = site.config(SMALL_POOL);
    let _daemon = site.start(&["--config", config.to_str().unwrap()]).await;
    populate(&site).await;
    let socket = site.socket();

    // status
    let status = json(&socket, &["status"]);
    assert_eq!(status["health"]["ready"], true);
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(status["dataplane"], serde_json::json!({"mode": "none"}));
    assert_eq!(status["endpoints"], 1);
    assert_eq!(
        (status["allocations"].as_u64(), status["leases"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(status["pools"][0]["name"], "tiny");
    assert_eq!(
        (
            status["pools"][0]["used"].as_u64(),
            status["pools"][0]["free"].as_u64()
        ),
        (Some(2), Some(3))
    );
    assert_eq!(status["delete_queue"]["pending"], 0);
    assert!(status.get("kubernetes").is_none(), "{status}");
    let text = ok(&socket, &["status"]);
    assert!(text.starts_with("Daemon:       ready"), "{text}");
    assert!(text.contains("Dataplane:    none\n"), "{text}");
    assert!(text.contains("Kubernetes:   off\n"), "{text}");
    assert!(text.contains("Delete queue: 0 pending"), "{text}");
    assert_eq!(
        row(&text, "tiny"),
        ["tiny", "10.77.0.0/29", "10.77.0.1", "2", "3", "5"]
    );

    // health (the DaemonSet's readiness probe): exit 0 when ready
    let health = json(&socket, &["health"]);
    assert_eq!(health["ready"], true);
    assert!(ok(&socket, &["health"]).starts_with("ready"));

    // endpoint list
    let list = json(&socket, &["endpoint", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["endpoint"]["owner"]["container_id"], "web");
    assert_eq!(list[0]["endpoint"]["host_ifname"], "lxcweb");
    assert!(
        list[0].get("counters").is_none(),
        "no dataplane, no counters: {list}"
    );
    let text = ok(&socket, &["endpoint", "list"]);
    let web = row(&text, "shop");
    assert_eq!(
        &web[..6],
        ["shop", "web-0", "web", "eth0", "10.77.0.2", "lxcweb"]
    );
    assert_eq!(&web[7..], ["-", "-", "-"]);

    // endpoint get
    let one = json(&socket, &["endpoint", "get", "web"]);
    assert_eq!(one["endpoint"]["pod"]["name"], "web-0");
    let text = ok(&socket, &["endpoint", "get", "web", "--ifname", "eth0"]);
    let has = |line: &[&str]| {
        text.lines()
            .any(|l| l.split_whitespace().eq(line.iter().copied()))
    };
    assert!(has(&["Pod:", "shop/web-0"]), "{text}");
    assert!(
        has(&["Labels:", "-"]),
        "no labels outside Kubernetes mode: {text}"
    );
    assert!(text.contains("No dataplane counters"), "{text}");
    let missing = sarena(&socket, &["endpoint", "get", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8(missing.stderr).unwrap();
    assert_eq!(
        err,
        "sarena: no endpoint for container nope ifname eth0 (see `sarena endpoint list`)\n"
    );

    // ipam list
    let ipam = json(&socket, &["ipam", "list"]);
    assert_eq!(ipam["allocations"].as_array().unwrap().len(), 2);
    let lease = ipam["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["owner"]["container_id"] == "lease")
        .unwrap();
    assert!(lease["lease_expires_at"].as_u64().is_some(), "{lease}");
    let text = ok(&socket, &["ipam", "list"]);
    assert_eq!(
        row(&text, "tiny"),
        [
            "tiny",
            "10.77.0.0/29",
            "10.77.0.1",
            "(default)",
            "2",
            "3",
            "5"
        ]
    );
    assert_eq!(row(&text, "10.77.0.2")[5], "endpoint");
    assert_eq!(&row(&text, "10.77.0.3")[5..7], ["expires", "in"]);
}

#[test]
fn no_daemon_is_one_line_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent.sock");
    for args in [
        &["status"][..],
        &["endpoint", "list"],
        &["ipam", "list", "-o", "json"],
        &["health"],
    ] {
        let out = sarena(&socket, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        let expected = format!(
            "sarena: cannot reach sarena-daemon at {} (",
            socket.display()
        );
        assert!(err.starts_with(&expected), "{err}");
        assert!(err.contains("is the daemon running"), "{err}");
        assert!(!err.contains("hyper"), "{err}");
    }
}

#[tokio::test]
async fn policy_commands_outside_kubernetes_mode_say_so_in_one_line() {
    let site = Site::new();
    let config = site.config(SMALL_POOL);
    let _daemon = site.start(&["--config", config.to_str().unwrap()]).await;
    let socket = site.socket();
    for args in [
        &["policy", "list"][..],
        &[
            "policy", "explain", "--from", "ns/a", "--to", "10.0.0.1", "--port", "53/UDP",
        ],
    ] {
        let out = sarena(&socket, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("Kubernetes mode only"), "{err}");
    }
    let usage = sarena(
        &socket,
        &[
            "policy", "explain", "--from", "ns/a", "--to", "ns/b", "--port", "80/ICMP",
        ],
    );
    assert_eq!(usage.status.code(), Some(2));
}
