//! ADD with bandwidth limits the daemon cannot put in place, against the
//! real daemon (eBPF dataplane) and plugin: ADD fails with an error naming
//! the cause, and leaves nothing behind (no endpoint, no address, no veth,
//! no map entries).
//!
//! The case: the runtime's netns path is not one the daemon can open, as
//! `/proc/PID/ns/net` of a runtime (cri-dockerd) whose processes the
//! daemon's container does not see. Here the plugin runs in a mount
//! namespace of its own where the path is a bind mount of the pod's netns,
//! on a tmpfs the daemon's mount namespace does not have.
//!
//! Privileged (root, a daemon built with the eBPF object): `#[ignore]`d
//! unless included; the daemon runs in the host netns (e2e lock).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ebpf_node;

use ebpf_node::{Node, SERIAL, preconditions};
use sarena_core::api::Inspect as _;
use sarena_test_support::{TestNetns, succeeds, unique};

/// A directory on the host, removed on drop.
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn add_with_limits_fails_clearly_and_leaves_nothing_when_the_daemon_cannot_open_the_netns() {
    preconditions(
        "add_with_limits_fails_clearly_and_leaves_nothing_when_the_daemon_cannot_open_the_netns",
    );
    let _serial = SERIAL.lock().await;
    let node = Node::start().await;
    let netns = TestNetns::new();
    let dir = Dir(std::env::temp_dir().join(unique("srbw")));
    std::fs::create_dir(&dir.0).unwrap();
    let seen_by_plugin = dir.0.join("net");
    let script = format!(
        "mount -t tmpfs tmpfs {dir} && touch {ns} && mount --bind {real} {ns} && exec \"$0\"",
        dir = dir.0.display(),
        ns = seen_by_plugin.display(),
        real = netns.path().display(),
    );
    let wrapper = ["unshare", "--mount", "sh", "-c", script.as_str()];
    let limits =
        serde_json::json!({"bandwidth": {"egressRate": 10_000_000, "egressBurst": 100_000}});
    let capabilities = serde_json::json!({"bandwidth": true});
    let extra = [("capabilities", capabilities), ("runtimeConfig", limits)];

    let (ok, out, err) = node.cni_with("ADD", &netns.name, &seen_by_plugin, &extra, &wrapper);
    eprintln!("ADD: {out} {err}");
    assert!(
        !ok,
        "ADD succeeded though the limit cannot be put in place: {out}"
    );
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    let text = format!("{} {}", answer["msg"], answer["details"]);
    assert!(
        text.contains("open the pod netns") && text.contains(&seen_by_plugin.display().to_string()),
        "the error does not name the cause: {text}"
    );

    // Nothing is left: no endpoint, no address, no veth (its pod end would
    // still be in the netns), no map entries.
    let client = node.site.client();
    assert!(client.endpoints().await.unwrap().is_empty(), "endpoints");
    assert!(
        client.ipam_state().await.unwrap().allocations.is_empty(),
        "allocations"
    );
    assert!(
        !succeeds(&[
            "ip",
            "netns",
            "exec",
            &netns.name,
            "ip",
            "link",
            "show",
            "eth0"
        ]),
        "veth"
    );
    let pins = node.pins();
    assert!(pins.endpoint_entries().unwrap().is_empty(), "endpoint map");
    assert!(pins.bandwidth_keys().is_empty(), "pacing map");

    // The same ADD with a path the daemon sees works (the failure was the path).
    let (ok, out, err) = node.cni_with("ADD", &netns.name, &netns.path(), &extra, &[]);
    assert!(ok, "ADD failed: {out} {err}");
    assert_eq!(
        pins.bandwidth_keys().len(),
        2,
        "pacer and host-side policer"
    );
    let (ok, out, err) = node.cni("DEL", &netns);
    assert!(ok, "DEL failed: {out} {err}");
    assert!(pins.bandwidth_keys().is_empty(), "pacing map after DEL");
}
