//! A full state disk under a live daemon: while writes fail the daemon says
//! it is not ready (and why) and ADD fails cleanly; once space is back, the
//! next ADD works and readiness recovers, with no restart. The state dir is a
//! small tmpfs of the test's own; the daemon and the plugin run in a
//! throwaway netns (their "host"), the pods in another.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use sarena_core::api::{Attachment, Daemon, Inspect as _};
use sarena_core::links::host_ifname;
use sarena_test_support::daemon::Site;
use sarena_test_support::{Cni, CniRun, TestNetns, Tmpfs, in_netns, require_root, succeeds};

/// Room for the state and little else.
const STATE_FS_BYTES: u64 = 2 << 20;
/// ADDs tried on the full disk before giving up on seeing one fail.
const MAX_TRIES: usize = 40;

/// The attachment of the `n`th pod (all share the pods' netns: `eth<n>`).
fn attachment(n: usize) -> Attachment {
    Attachment {
        container_id: format!("full{n}"),
        ifname: format!("eth{n}"),
    }
}

/// The real plugin's ADD, run from the daemon's netns.
fn add(cni: &Cni, host: &Path, pods: &Path, n: usize) -> CniRun {
    let (cni, pods) = (cni.clone(), pods.to_owned());
    in_netns(host, move || cni.add(&attachment(n), &pods))
        .join()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn a_full_state_disk_makes_the_daemon_not_ready_and_freeing_it_recovers_without_a_restart() {
    require_root("a_full_state_disk_makes_the_daemon_not_ready...");
    // Declared first, dropped last: unmounted once the daemon is gone.
    let fs = Tmpfs::new(STATE_FS_BYTES);
    let host = TestNetns::new();
    let pods = TestNetns::new();
    let site = Site::with_state_dir(fs.path().join("state")).in_netns(&host.name);
    let daemon = site.start(&[]).await;
    let client = site.client();
    let cni = Cni::new(&site.socket(), site.dir.path());
    let (host_ns, pods_ns) = (host.path(), pods.path());

    add(&cni, &host_ns, &pods_ns, 0).expect_ok("ADD before the disk is full");

    let filler = fs.fill("filler");
    let (failed, run) = (1..=MAX_TRIES)
        .map(|n| (n, add(&cni, &host_ns, &pods_ns, n)))
        .find(|(_, run)| !run.ok)
        .unwrap_or_else(|| panic!("{MAX_TRIES} ADDs on a full disk all succeeded"));
    eprintln!("ADD {failed} failed on the full disk: {}", run.stdout);
    assert!(
        run.stdout.contains("state store") && run.stdout.contains("No space left"),
        "the ADD error does not say the store is out of space: {run:?}"
    );

    // Not ready while writes fail, saying why.
    let health = client.health().await.unwrap();
    eprintln!("health on the full disk: {health:?}");
    assert!(!health.ready, "ready on a full disk: {health:?}");
    assert!(
        health.message.contains("state store"),
        "the reason does not name the store: {health:?}"
    );

    // Nothing half made for the failed ADD: no endpoint, no veth, and no
    // address held for good (at most under a lease that expires).
    let att = attachment(failed);
    assert_eq!(client.endpoint(att.clone()).await.unwrap(), None);
    let veth = host_ifname(&att.container_id, &att.ifname);
    assert!(
        !succeeds(&["ip", "-n", &host.name, "link", "show", &veth]),
        "the failed ADD left its veth {veth}"
    );
    let state = client.ipam_state().await.unwrap();
    for record in state.allocations.iter().filter(|r| r.owner == att) {
        assert!(
            record.lease_expires_at.is_some(),
            "the failed ADD left {} held for good",
            record.address
        );
    }

    // Space back: the next ADD works and the daemon is ready again, same process.
    std::fs::remove_file(&filler).unwrap();
    let pid = daemon.pid();
    add(&cni, &host_ns, &pods_ns, failed + 1).expect_ok("ADD once space is back");
    let health = client.health().await.unwrap();
    assert!(health.ready, "not ready once space is back: {health:?}");
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the daemon restarted"
    );
    drop(daemon);
}
