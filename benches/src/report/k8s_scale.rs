//! The section "Kubernetes mode at cluster scale" (issue 31), from
//! `e2e/k8s/bench-node-scale.sh`'s results.

use std::fmt::Write;

use crate::k8s_scale::{DaemonLoad, Latency, NodeScale};

fn latency(l: &Latency) -> String {
    let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
    let early = if l.early > 0 {
        format!(" ({} of {} early)", l.early, l.n)
    } else {
        String::new()
    };
    format!(
        "{} / {} / {} ms{early}",
        f(l.p50_ms),
        f(l.p99_ms),
        f(l.max_ms)
    )
}

fn per_daemon(
    daemons: &std::collections::BTreeMap<String, DaemonLoad>,
    f: impl Fn(&DaemonLoad) -> String,
) -> String {
    let v: Vec<String> = daemons.values().map(f).collect();
    if v.is_empty() {
        "–".into()
    } else {
        v.join("; ")
    }
}

/// The section: one table per run (routing mode).
pub(super) fn section(md: &mut String, runs: &[NodeScale]) {
    let Some(first) = runs.first() else { return };
    let _ = writeln!(md, "## Kubernetes mode at cluster scale (issue 31)\n");
    let _ = writeln!(
        md,
        "Two real netns nodes run `sarena-daemon --kubernetes` (eBPF dataplane, the \
         DaemonSet's RBAC) against the real API server of e2e/k8s (Kubernetes v1.20.2 on \
         this machine, {} CPUs, kernel {}). The rest of the cluster is Node \
         objects that no kubelet runs, created through the API with a kubelet's status \
         (InternalIP, capacity, conditions, node info, 30 images: about 8 KiB each) and \
         given a /26 podCIDR each by the controller-manager. The cluster grows in place from \
         level to level.\n",
        first.cpus, first.kernel
    );
    let _ = writeln!(
        md,
        "- **new Nodes**: the level's Nodes created in parallel (by a process of their own); \
         per Node, its podCIDR first seen by the harness's watch of the Node objects → its \
         route on the slower real node (`ip -ts monitor route` in each node's netns); and \
         the time until both real nodes route every one (mostly the controller-manager \
         handing out podCIDRs). The start is a watch like the daemon's, delivered at about \
         the same moment; a route that came first counts as early;\n\
         - **one Node added / deleted**: one at a time (the run's `--samples`), at the \
         level's size: podCIDR seen → routed on both real nodes; deletion seen → route gone \
         on both. Percentiles are nearest-rank: under 100 samples the p99 is the slowest;\n\
         - **routes exact**: each real node's Sarena routes (proto 91) are exactly the \
         other nodes' podCIDRs via their InternalIPs (vxlan: via the overlay, with one FDB \
         entry per peer), else the run fails;\n\
         - **steady**: once no Node object changed for 15 s (5 s in older runs; the \
         controller-manager updates a thousand new Nodes for minutes), 10 s with nothing happening (the daemon's floor: its CPU, \
         and the bytes still reaching it; CPU from `/proc/PID/stat`, in 10 ms ticks, \
         so ±0.1 % over 10 s), then \
         30 s with every Node heartbeating (its status patched; nodes/60 \
         patches a second in all, five times a 1.20 kubelet's rate): each daemon's CPU (% of one CPU), \
         VmRSS (VmHWM), and the bytes on its node's eth0, where only the daemon talks (its \
         API server traffic: every watch event is a whole Node object, which Kubernetes \
         1.20 cannot filter by field);\n\
         - **join**: node2's daemon stopped, its routes flushed, started again: start → \
         ready, and → every peer routed.\n"
    );
    for r in runs {
        run_table(md, r);
    }
    let _ = writeln!(
        md,
        "\nThe daemon decodes a Node to the fields peer routing reads (name, uid, podCIDRs, \
         addresses; `sarena_k8s::PeerNode`) and keeps only its reduced view, updated one \
         event at a time (`NodeTable`): a heartbeat costs a decode and a lookup. A change \
         of the view re-checks every peer (`screen_peers`, `CidrSet`: O(n log n)) and \
         reconciles the routes against one netlink dump.\n"
    );
}

/// One run's table, and its pods' paragraph.
fn run_table(md: &mut String, r: &NodeScale) {
    let _ = writeln!(
        md,
        "### {} routing\n\nRun on {} by `{}`.\n",
        r.routing, r.date, r.command
    );
    let _ = writeln!(md, "Cells with two values are node1's; node2's.\n");
    let _ = writeln!(
        md,
        "| nodes | new Nodes | all routed | new Node → routed, p50 / p99 / max | one Node \
         added → routed, p50 / p99 / max | one Node deleted → gone, p50 / p99 / max | routes \
         exact | daemon VmRSS (VmHWM) | idle: daemon CPU | idle: eth0 in | heartbeats/s | \
         heartbeats: daemon CPU | heartbeats: eth0 in / out | join: ready / all routed |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---|---|---|---|---|---|---|---:|---|---|---|"
    );
    for l in &r.levels {
        let d = &l.steady.daemons;
        let _ = writeln!(
            md,
            "| {} | {} in {:.1} s | {:.1} s | {} | {} | {} | {} | {} MiB | {} | {} | {:.1} | {} | {} | {} / {} |",
            l.nodes,
            l.new_ghosts,
            l.create_s,
            l.converged_s,
            latency(&l.grow),
            latency(&l.probe_add),
            latency(&l.probe_delete),
            if l.exact() { "yes" } else { "**no**" },
            per_daemon(d, |x| format!("{:.1} ({:.1})", x.rss_mib, x.hwm_mib)),
            per_daemon(d, |x| x
                .idle_cpu_percent
                .map_or("–".into(), |v| format!("{v:.2} %"))),
            per_daemon(d, |x| x
                .idle_rx_bytes_per_s
                .map_or("–".into(), |v| format!("{:.0} KiB/s", v / 1024.0))),
            l.steady.heartbeats_per_s,
            per_daemon(d, |x| format!("{:.2} %", x.cpu_percent)),
            per_daemon(d, |x| format!(
                "{:.0} / {:.1} KiB/s",
                x.rx_bytes_per_s / 1024.0,
                x.tx_bytes_per_s / 1024.0
            )),
            l.join.ready_s.map_or("–".into(), |v| format!("{v:.2} s")),
            l.join.routes_s.map_or("–".into(), |v| format!("{v:.2} s")),
        );
    }
    for l in &r.levels {
        let Some(p) = &l.pods else { continue };
        let v: Vec<String> = p
            .daemons
            .values()
            .map(|d| {
                format!(
                    "VmRSS {:.1} MiB (VmHWM {:.1}), {:.2} % CPU idle",
                    d.rss_mib, d.hwm_mib, d.idle_cpu_percent
                )
            })
            .collect();
        let _ = writeln!(
            md,
            "\nWith {} Pod objects more at {} nodes (bound to the Nodes without a kubelet, \
             Running at addresses of their podCIDRs, in 20 namespaces; created and given their \
             status in {:.1} s): both daemons quiet again {:.1} s later; then per daemon: {}. \
             Every daemon's NetworkPolicy watch keeps each pod of the cluster (reduced).",
            p.pods,
            l.nodes,
            p.create_s,
            p.settle_s,
            v.join("; ")
        );
    }
    if r.levels.iter().any(|l| l.steady.quiet_after_s.is_none()) {
        let _ = writeln!(
            md,
            "\nThis run's steady windows began 50 s after the level's Nodes appeared, \
             without waiting for the Node objects to be quiet: at 1,000 nodes the \
             controller-manager was still tainting the new Nodes (about 13 updates a \
             second), which the idle CPU includes."
        );
    }
    let _ = writeln!(md);
}
