//! The section "NetworkPolicy on a real cluster" (issue 26, point 7): the
//! whole daemon, from `e2e/k8s/bench-policy-cluster.sh`'s results.

use std::fmt::Write;

use crate::policy::RealCluster;

fn per_node(map: &std::collections::BTreeMap<String, f64>, unit: &str) -> String {
    let v: Vec<String> = map.values().map(|v| format!("{v:.1} {unit}")).collect();
    if v.is_empty() {
        "–".into()
    } else {
        v.join(" / ")
    }
}

/// The section.
pub(super) fn section(md: &mut String, r: &RealCluster) {
    let (e, m) = (&r.enforce, &r.rss);
    let _ = writeln!(md, "## NetworkPolicy on a real cluster\n");
    let _ = writeln!(
        md,
        "The whole daemon, not only its engine: Sarena installed by its DaemonSet (eBPF \
         dataplane, native routing) on a two-node cluster of e2e/k8s (Kubernetes v1.20.2 on \
         this machine, {} CPUs, kernel {}), run on {} by `{}`. The background pods are real \
         Pod objects in the API server bound to Node objects without a kubelet (Running, an \
         address each, labels and named ports), in 20 namespaces, with a mix of policies \
         (pod and namespace selectors, matchExpressions, ipBlock with except, ports by number \
         and by name); one real pod per node is measured. Each sample creates one policy \
         selecting the measured pods and takes, per node, the first time the daemon's \
         `GET /v1/policy/endpoints` (what `sarena policy list` shows, answered once the \
         dataplane has the state) lists it, polled every 5 ms from inside the node; the \
         sample is the slower node's time from just before the create request. The policy \
         is deleted again before the next sample.\n",
        r.cpus, r.kernel, r.date, r.command
    );
    let _ = writeln!(md, "| measure | value |\n|---|---|");
    let rows = [
        (
            format!(
                "policy created → enforced on every node ({} pods, {} policies, {} samples)",
                e.pods, e.policies, e.samples
            ),
            format!(
                "p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                e.p50_ms, e.p90_ms, e.p99_ms, e.max_ms
            ),
        ),
        (
            "each node's own p50".into(),
            per_node(&e.per_node_p50_ms, "ms"),
        ),
        (
            "daemon VmRSS, idle (after the cluster came up), per node".into(),
            per_node(&m.idle_rss_mib, "MiB"),
        ),
        (
            format!(
                "daemon VmRSS with {} pods and {} policies, settled, per node",
                m.pods, m.policies
            ),
            per_node(&m.rss_mib, "MiB"),
        ),
        (
            "daemon VmHWM (peak) then, per node".into(),
            per_node(&m.hwm_mib, "MiB"),
        ),
    ];
    for (what, value) in rows {
        let _ = writeln!(md, "| {what} | {value} |");
    }
    for (pods, secs) in &r.populate_seconds {
        let _ = writeln!(
            md,
            "| creating the background up to {pods} pods | {secs:.1} s |"
        );
    }
    let _ = writeln!(
        md,
        "\nThe floor of the latency is the daemon's 20 ms gathering of changes before a \
         compile, the watch's delivery and the 5 ms poll; every change recompiles the \
         cluster's state on every node (see the engine's section for its share).\n"
    );
}
