//! The operator's view of a real eBPF node: `sarena-daemon` in `ebpf` mode
//! with `--metrics-listen`, two pods added by the real plugin and pinging
//! each other, then the `sarena` binary and a metrics scrape must show the
//! programs attached and the pods' eBPF counters; with one filter removed
//! behind the daemon's back, both must say the programs are detached.
//!
//! Privileged (root, the eBPF object): `#[ignore]`d unless included, as
//! scripts/test.sh does as root. The fixture is `ebpf_node/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use sarena_core::dataplane::ebpf::DropReason;
use sarena_test_support::daemon::free_loopback_addr;
use sarena_test_support::{package_binary, run};
use serde_json::Value as Json;

mod ebpf_node;

use ebpf_node::{Node, SERIAL, preconditions, scrape, values};

fn sarena(node: &Node, args: &[&str]) -> String {
    let out = Command::new(package_binary("sarena-cli", "sarena"))
        .arg("--socket")
        .arg(node.site.socket())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sarena {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn sarena_json(node: &Node, args: &[&str]) -> Json {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&sarena(node, &all)).unwrap()
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object"]
async fn status_counters_and_metrics_of_an_ebpf_node() {
    preconditions("status_counters_and_metrics_of_an_ebpf_node");
    let _serial = SERIAL.lock().await;
    let addr = free_loopback_addr();
    let node = Node::start_with(&["--metrics-listen", &addr.to_string()]).await;
    let (a, b) = (node.add_pod(), node.add_pod());
    assert!(a.pings(&b, 3), "pods cannot talk");

    let status = sarena_json(&node, &["status"]);
    assert_eq!(status["dataplane"]["mode"], "ebpf");
    assert_eq!(status["dataplane"]["programs"]["attached"], 2, "{status}");
    assert_eq!(
        status["dataplane"]["programs"]["detached"],
        serde_json::json!([])
    );
    let text = sarena(&node, &["status"]);
    assert!(
        text.contains("ebpf, programs attached on all 2 endpoints"),
        "{text}"
    );

    let one = sarena_json(&node, &["endpoint", "get", a.id()]);
    let counters = &one["counters"];
    assert!(
        counters["counters"]["from_pod_packets"].as_u64().unwrap() >= 3,
        "{one}"
    );
    assert!(
        counters["counters"]["redirected_packets"].as_u64().unwrap() >= 3,
        "{one}"
    );
    assert!(
        counters["counters"]["to_pod_packets"].as_u64().unwrap() >= 3,
        "{one}"
    );
    use strum::IntoEnumIterator;
    for reason in DropReason::iter() {
        let name: &'static str = reason.into();
        assert!(counters["drops"][name].is_u64(), "{name} missing: {one}");
    }
    let host_ifname = one["endpoint"]["host_ifname"].as_str().unwrap().to_owned();
    let text = sarena(&node, &["endpoint", "get", a.id()]);
    assert!(
        text.contains("Counters:") && text.contains("redirected_packets"),
        "{text}"
    );
    let list = sarena(&node, &["endpoint", "list"]);
    let row = list.lines().find(|l| l.contains(&host_ifname)).unwrap();
    assert!(!row.trim_end().ends_with('-'), "counters expected: {row}");

    let s = scrape(addr).await;
    let pod_a = [("container_id", a.id())];
    let from_pod = values(&s, "sarena_endpoint_from_pod_packets_total", &pod_a);
    assert!(from_pod.len() == 1 && from_pod[0] >= 3.0, "{from_pod:?}");
    assert_eq!(
        values(&s, "sarena_endpoint_drops_total", &pod_a).len(),
        DropReason::iter().count()
    );
    assert_eq!(values(&s, "sarena_dataplane_programs_attached", &[]), [2.0]);
    assert_eq!(values(&s, "sarena_dataplane_reconciles_total", &[]), [1.0]);

    // The ingress filter removed behind the daemon's back.
    run(&[
        "tc",
        "filter",
        "del",
        "dev",
        &host_ifname,
        "ingress",
        "pref",
        "1",
    ]);
    let status = sarena_json(&node, &["status"]);
    assert_eq!(status["dataplane"]["programs"]["attached"], 1, "{status}");
    assert_eq!(
        status["dataplane"]["programs"]["detached"],
        serde_json::json!([host_ifname])
    );
    let text = sarena(&node, &["status"]);
    assert!(
        text.contains(&format!(
            "programs DETACHED on 1 of 2 endpoints: {host_ifname}"
        )),
        "{text}"
    );
    assert_eq!(
        values(
            &scrape(addr).await,
            "sarena_dataplane_programs_detached",
            &[]
        ),
        [1.0]
    );

    node.del_pod(&a);
    node.del_pod(&b);
    assert_eq!(
        sarena_json(&node, &["endpoint", "list"]),
        serde_json::json!([])
    );
}
