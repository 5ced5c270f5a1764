//! Outside Kubernetes mode, with no `mtu` configured, new pods follow the
//! MTU of the default route's device as it changes, on a real kernel in a
//! throwaway netns.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use sarena_core::api::{MtuSource, NetworkStatus};
use sarena_core::node::{NetworkCell, NodeConfig, Registry};

use sarena_test_support::{TestNetns, in_netns, require_root};

/// Polls `f` every 50 ms for up to 5 s.
fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..100 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("not within 5 s: {what}");
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn new_pods_follow_the_default_route_devices_mtu() {
    require_root("new_pods_follow_the_default_route_devices_mtu");
    let ns = TestNetns::new();
    ns.exec(&[
        "ip", "link", "add", "up0", "type", "veth", "peer", "name", "up1",
    ]);
    ns.exec(&["ip", "link", "set", "up0", "mtu", "9000", "up"]);
    ns.exec(&["ip", "link", "set", "up1", "mtu", "9000", "up"]);
    ns.exec(&["ip", "addr", "add", "192.0.2.2/24", "dev", "up0"]);
    ns.exec(&["ip", "route", "add", "default", "via", "192.0.2.1"]);

    let dir = tempfile::tempdir().unwrap();
    let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    let network: NetworkCell = NetworkCell::new(std::sync::Mutex::new(NetworkStatus::default()));
    assert_eq!(node.mtu(), 1500, "opened with the default");

    let (n, cell) = (node.clone(), network.clone());
    // runs (in the netns) until the test process ends, as in the daemon
    let follower = in_netns(&ns.path(), move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(sarena_core::uplink::follow_standalone_mtu(
            n,
            cell,
            Duration::from_millis(100),
        ));
    });
    let status_mtu = || network.lock().unwrap().mtu.clone();

    eventually("the uplink's 9000", || node.mtu() == 9000);
    let reported = status_mtu().unwrap();
    assert_eq!(reported.source, MtuSource::Uplink);
    assert_eq!(reported.uplink.as_deref(), Some("up0"));

    ns.exec(&["ip", "link", "set", "up0", "mtu", "1400"]);
    eventually("the lowered 1400", || node.mtu() == 1400);
    assert_eq!(status_mtu().unwrap().base, 1400);

    // No default route for a while: nothing changes (no fallback to 1500).
    ns.exec(&["ip", "route", "del", "default"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(node.mtu(), 1400, "a missing default route is no new MTU");

    assert!(
        !follower.is_finished(),
        "the follower runs until the daemon stops"
    );
}
