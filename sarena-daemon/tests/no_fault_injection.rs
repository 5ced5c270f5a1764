//! A default build has no fault injection: the real `sarena-daemon`, built
//! without the `fault-injection` feature (as every release is), started on
//! the eBPF dataplane with `SARENA_TEST_KILL_AT` naming points its start-up
//! passes (`loaded` at every start; `first-swap` and `swapped` when
//! reconcile replaces a filter) keeps serving, and never logs a kill.
//!
//! Only built without the feature (a build with it would kill itself
//! there; e2e/test-upgrade.sh covers that side).
//!
//! Privileged: needs root and the eBPF object embedded in the daemon; the
//! test is `#[ignore]`d unless included (`--include-ignored`, as
//! scripts/test.sh does as root). It uses the node-global device
//! `sarena_host`, like the other `ebpf_node` tests: one at a time.
#![cfg(not(feature = "fault-injection"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sarena_core::api::Inspect as _;
use std::time::Duration;

use sarena_core::api::Daemon;
use sarena_core::dataplane::ebpf::KILL_AT_ENV;
use sarena_test_support::{run, tc_program_ids};

mod ebpf_node;

use ebpf_node::{Node, SERIAL, preconditions};

/// What a build with fault injection logs as it kills itself.
const KILL_MESSAGE: &str = "fault injection";

/// The daemon answers its health check and lists `endpoints` endpoints.
async fn serves(node: &Node, endpoints: usize, what: &str) {
    let client = node.site.client();
    let health = client.health().await;
    assert!(
        health.as_ref().is_ok_and(|h| h.ready),
        "{what}: the daemon stopped serving: {health:?}\n{}",
        node.log()
    );
    assert_eq!(client.endpoints().await.unwrap().len(), endpoints, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn the_kill_points_are_ignored_without_the_feature() {
    let test = "the_kill_points_are_ignored_without_the_feature";
    preconditions(test);
    let _serial = SERIAL.lock().await;
    let mut node = Node::start().await;
    let pod = node.add_pod();
    let endpoint = node.site.client().endpoints().await.unwrap().remove(0);

    // `loaded`: the end of every eBPF start-up.
    node.daemon().kill();
    node.daemon = Some(node.spawn_with_env(&[(KILL_AT_ENV, "loaded")]).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    serves(&node, 1, "killed at loaded").await;

    // `first-swap` and `swapped`: the restart's reconcile puts back a
    // filter removed while the daemon was down.
    node.daemon().kill();
    run(&[
        "tc",
        "filter",
        "del",
        "dev",
        &endpoint.spec.host_ifname,
        "ingress",
    ]);
    let (ingress, egress) = tc_program_ids(&endpoint.spec.host_ifname);
    assert!(
        ingress.is_empty() && egress.len() == 1,
        "{ingress:?} {egress:?}"
    );
    let log_len = node.log().len();
    node.daemon = Some(node.spawn_with_env(&[(KILL_AT_ENV, "first-swap")]).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    serves(&node, 1, "killed at first-swap").await;
    let (ingress, egress) = tc_program_ids(&endpoint.spec.host_ifname);
    assert!(
        ingress.len() == 1 && egress.len() == 1,
        "reconcile did not put the filter back: {ingress:?} {egress:?}"
    );
    let restart_log = node.log()[log_len..].to_string();
    let ready = restart_log
        .lines()
        .find(|l| l.contains("dataplane ready"))
        .unwrap_or_else(|| panic!("no 'dataplane ready' after the restart:\n{restart_log}"));
    assert!(
        ready.contains("attached=1"),
        "the restart swapped nothing: {ready}"
    );
    assert!(!node.log().contains(KILL_MESSAGE), "{}", node.log());
    node.del_pod(&pod);
}
