//! Every example run as a user would run it, its output checked: CI
//! compiles the examples (cargo test builds them) and runs them here.
//! `custom_ipam` needs no privilege; the others make interfaces and are
//! `#[ignore = "privileged: ..."]`, run as root by scripts/test.sh.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sarena_test_support::daemon::Site;
use sarena_test_support::{
    TestNetns, require_ebpf_object, require_root, succeeds, workspace_binary,
};
use serde_json::json;

/// `target/<profile>/examples/<name>`, built by cargo test with this test.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(path.is_file(), "{} not built", path.display());
    path
}

/// Runs `cmd`, which must succeed; its stdout.
fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout: {text}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn custom_ipam_pins_ordinals_and_refuses_a_taken_one() {
    let out = stdout(&mut Command::new(example("custom_ipam")));
    for round in ["first", "again"] {
        for line in [
            format!("{round}: db/postgres-0 -> 10.252.1.10/24 (pool stateful)"),
            format!("{round}: db/postgres-2 -> 10.252.1.12/24 (pool stateful)"),
        ] {
            assert!(out.contains(&line), "{line:?} missing:\n{out}");
        }
    }
    assert!(
        out.contains("first: web/frontend-x7k2 -> 10.252.0.2/24 (pool default)"),
        "{out}"
    );
    assert!(out.contains("db/mysql-1 refused: Some(Conflict)"), "{out}");
}

#[test]
#[ignore = "privileged: needs root (veth pair in a netns)"]
fn veth_creates_the_peer_in_the_netns() {
    require_root("veth_creates_the_peer_in_the_netns");
    let netns = TestNetns::new();
    let out = stdout(Command::new(example("veth")).arg(netns.path()));
    assert!(out.contains("host end lxc"), "{out}");
    assert!(out.contains("10.99.0.2/24"), "{out}");
    let eth0 = [
        "ip",
        "netns",
        "exec",
        &netns.name,
        "ip",
        "link",
        "show",
        "eth0",
    ];
    assert!(!succeeds(&eth0), "removing the host end removes the pair");
}

#[tokio::test]
#[ignore = "privileged: needs root (the plugin makes a veth pair)"]
async fn embed_adds_and_removes_through_the_daemon() {
    require_root("embed_adds_and_removes_through_the_daemon");
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let netns = TestNetns::new();
    let out = stdout(
        Command::new(example("embed"))
            .arg(netns.path())
            .arg(site.socket()),
    );
    assert!(out.contains("got 10.200.0.2/16"), "{out}");
    assert!(out.contains("removed again"), "{out}");
}

#[test]
#[ignore = "privileged: needs root and the eBPF object"]
fn embed_inprocess_pods_talk_through_the_programs() {
    let test = "embed_inprocess_pods_talk_through_the_programs";
    require_root(test);
    let object = require_ebpf_object(test);
    let dir = tempfile::tempdir().unwrap();
    let object_path = dir.path().join("sarena-ebpf");
    std::fs::write(&object_path, object).unwrap();
    let (a, b) = (TestNetns::new(), TestNetns::new());
    let out = stdout(
        Command::new(example("embed_inprocess"))
            .arg(a.path())
            .arg(b.path())
            .arg(&object_path),
    );
    assert!(out.contains("pod a: 10.251.0.2/24"), "{out}");
    assert!(out.contains("pod b: 10.251.0.3/24"), "{out}");
    assert!(
        out.contains("a -> b: 3 packets transmitted, 3 received"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("embedded-a "))
        .unwrap_or_else(|| panic!("{out}"));
    let redirected: u64 = line
        .split("redirected_packets=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(redirected >= 3, "{line}");
    assert!(out.contains("endpoints left: 0"), "{out}");
}

/// ADD, CHECK and DEL of `conflist` with the `cni_runtime` example,
/// calling `after_add` with the result between ADD and CHECK.
fn cni_cycle(
    conflist: &serde_json::Value,
    cni_path: &str,
    netns: &TestNetns,
    dir: &Path,
    after_add: impl Fn(&serde_json::Value),
) {
    let file = dir.join("net.conflist");
    std::fs::write(&file, conflist.to_string()).unwrap();
    let cache = dir.join("cache");
    let run = |command: &str| {
        stdout(
            Command::new(example("cni_runtime"))
                .args([command, file.to_str().unwrap(), &netns.name])
                .arg(netns.path())
                .env("CNI_PATH", cni_path)
                .env("CNI_CACHE_DIR", &cache),
        )
    };
    let result: serde_json::Value = serde_json::from_str(&run("ADD")).unwrap();
    let name = conflist["name"].as_str().unwrap();
    let cached = cache.join(format!("{name}-{}-eth0", netns.name));
    assert!(cached.is_file(), "no cached result");
    after_add(&result);
    assert!(run("CHECK").starts_with("CHECK ok"));
    assert!(run("DEL").starts_with("DEL ok"));
    assert!(!cached.exists(), "cache entry left after DEL");
}

#[test]
#[ignore = "privileged: needs root (loopback in a netns)"]
fn cni_runtime_runs_reference_plugins() {
    require_root("cni_runtime_runs_reference_plugins");
    let dir = tempfile::tempdir().unwrap();
    let netns = TestNetns::new();
    let conflist = json!({
        "cniVersion": "1.0.0",
        "name": "reference",
        "plugins": [
            {"type": "loopback"},
            {"type": "host-local", "ipam": {"type": "host-local", "dataDir": dir.path().join("ipam"),
                                            "ranges": [[{"subnet": "10.253.0.0/24"}]]}}
        ]
    });
    let lease = dir.path().join("ipam/reference/10.253.0.2");
    let lo_up = || {
        netns
            .exec(&["ip", "-o", "link", "show", "lo"])
            .contains(",UP")
    };
    cni_cycle(&conflist, "/usr/lib/cni", &netns, dir.path(), |result| {
        assert_eq!(result["ips"][0]["address"], "10.253.0.2/24", "{result}");
        assert!(lease.is_file(), "host-local holds no lease");
        assert!(lo_up(), "loopback's ADD did not bring lo up");
    });
    assert!(
        !lease.exists(),
        "host-local's DEL did not release the address"
    );
    assert!(!lo_up(), "loopback's DEL did not run");
}

#[tokio::test]
#[ignore = "privileged: needs root (the plugin makes a veth pair)"]
async fn cni_runtime_runs_sarena() {
    use sarena_core::api::Inspect;
    require_root("cni_runtime_runs_sarena");
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let netns = TestNetns::new();
    let plugin = workspace_binary("sarena-cni");
    let dir = site.dir.path();
    let conflist = json!({
        "cniVersion": "1.1.0",
        "name": "sarena",
        "plugins": [{"type": "sarena-cni", "daemon-endpoint": site.socket(),
                     "log-file": dir.join("cni.log"), "delete-queue-dir": dir.join("queue")}]
    });
    let cni_path = plugin.parent().unwrap().to_str().unwrap().to_owned();
    cni_cycle(&conflist, &cni_path, &netns, dir, |result| {
        assert_eq!(result["ips"][0]["address"], "10.200.0.2/16", "{result}");
        assert_eq!(result["interfaces"][1]["name"], "eth0", "{result}");
        let addr = netns.exec(&["ip", "-o", "addr", "show", "eth0"]);
        assert!(addr.contains("10.200.0.2/16"), "{addr}");
    });
    let left = site.client().endpoints().await.unwrap();
    assert!(left.is_empty(), "DEL left {left:?}");
}
