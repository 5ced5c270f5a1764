//! The section "Pods through a real kubelet" (issue 29, step 5), from
//! `e2e/k8s/test-k8s-deploy.sh`'s measurements.

use std::fmt::Write;

use crate::k8s_pods::KubeletPods;

fn ms(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.0} ms"))
}

/// The section: one row per contender and size, in the order run.
pub(super) fn section(md: &mut String, r: &KubeletPods) {
    let _ = writeln!(md, "## Pods through a real kubelet (issue 29)\n");
    let _ = writeln!(
        md,
        "N pods created at once (one Deployment of busybox pods, the image already on the \
         node) on one node of e2e/k8s's cluster (Kubernetes v1.20.2: kubelet, Debian's \
         containerd and runc; this machine, {} CPUs, kernel {}), run on {} by `{}`. First the \
         reference, bridge + host-local, on a node of its own; then, in the same cluster, \
         Sarena installed by its DaemonSet (eBPF dataplane), on one of its nodes. Per pod: \
         its creation (a watch's first event) → Running. kubelet's RunPodSandbox and \
         containerd's `sandbox_create_network` (the network part of RunPodSandbox: mostly \
         the pod's netns made and the CNI ADD of the whole chain) are the means of their \
         metrics over these pods.\n",
        r.cpus, r.kernel, r.date, r.command
    );
    if r.rounds() > 1 {
        let _ = writeln!(
            md,
            "{} rounds, each a whole run of the script; the targets take the medians over \
             the rounds.\n",
            r.rounds()
        );
    }
    let _ = writeln!(
        md,
        "| round | contender | pods | creation → Running, p50 / p90 / max | all Running after | \
         RunPodSandbox, mean | its network part, mean |\n|---:|---|---:|---|---:|---:|---:|"
    );
    for x in &r.runs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} / {:.2} / {:.2} s | {:.2} s | {} | {} |",
            x.round,
            x.contender,
            x.pods,
            x.p50_s,
            x.p90_s,
            x.max_s,
            x.all_running_s,
            ms(x.sandbox_mean_ms),
            ms(x.network_mean_ms)
        );
    }
    let _ = writeln!(md);
}
