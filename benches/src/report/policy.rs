//! The section "NetworkPolicy: engine scale and change latency" (issue 26,
//! point 7): the engine's share of the targets, the scale point's
//! memory and map entries, the change latencies.

use std::fmt::Write;

use super::num;
use crate::policy::{
    CHANGE_P50_TARGET_MS, CHANGE_P99_TARGET_MS, ClusterSpec, DEBOUNCE_MS, IPCACHE_CAPACITY, MIX,
    OPS, POLICY_CAPACITY, PolicyResults, RSS_TARGET_MIB, SEED,
};

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// A target's verdict; `share`: the measure is the engine's share of it.
fn verdict(met: Option<bool>, share: bool) -> &'static str {
    match (met, share) {
        (Some(true), true) => "✓ met (engine's share)",
        (Some(true), false) => "✓ met",
        (Some(false), _) => "✗ missed",
        (None, _) => "not measured",
    }
}

fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn cluster(s: &ClusterSpec) -> String {
    format!(
        "{} pods on {} nodes ({} on this one), {} namespaces, {} policies",
        grouped(s.pods),
        s.nodes,
        s.local_pods(),
        s.namespaces,
        grouped(s.policies)
    )
}

fn share(entries: usize, capacity: u32) -> String {
    format!(
        "{} ({:.1} % of {})",
        grouped(entries),
        entries as f64 * 100.0 / f64::from(capacity),
        grouped(capacity as usize)
    )
}

/// The section.
pub(super) fn section(md: &mut String, r: &PolicyResults) {
    let (scale, change) = (&r.scale, &r.change);
    let _ = writeln!(md, "## NetworkPolicy: engine scale and change latency\n");
    let mix: Vec<String> = MIX.iter().map(|(k, w)| format!("{k} {w} %")).collect();
    let _ = writeln!(
        md,
        "The policy engine (`sarena_core::policy::PolicyEngine`) in process (the scale \
         point in a child process of the harness, the changes in the harness's own), on a \
         synthetic cluster made from seed {SEED}: namespaces labelled with their name, a \
         team and an environment; {} Deployments per namespace whose replicas share their \
         labels (a tenth of them half-way through a rollout, two `pod-template-hash`es), \
         named container ports, pods spread evenly over the nodes; one Service (ClusterIP) \
         per Deployment; a default-deny (ingress) in every namespace, the other policies \
         drawn from this mix: {}. Only the engine is measured: not the daemon's watch caches \
         and the rest of its memory, not its {DEBOUNCE_MS:.0} ms debounce before a compile, \
         not the eBPF map (or nftables) writes after it.\n",
        scale.spec.apps_per_namespace,
        mix.join(", ")
    );
    let created = change.row(OPS[0]).and_then(|row| row.summary);
    let latency = |v: Option<f64>| {
        v.map_or("–".into(), |v| {
            format!(
                "{v:.1} ms engine + {DEBOUNCE_MS:.0} ms debounce = {:.1} ms",
                v + DEBOUNCE_MS
            )
        })
    };
    let peak = scale.memory.engine_peak_kib();
    let s = &scale.sizes;
    let fits = |n: usize, cap: u32| Some(n <= cap as usize);
    // (what, target, measured, met, the engine's share of the target)
    let rows = [
        (
            format!("policy created → enforced, p50 ({})", cluster(&change.spec)),
            format!("≤ {CHANGE_P50_TARGET_MS:.0} ms"),
            latency(created.map(|s| s.p50)),
            created.map(|s| s.p50 + DEBOUNCE_MS <= CHANGE_P50_TARGET_MS),
            true,
        ),
        (
            "policy created → enforced, p99".into(),
            format!("≤ {CHANGE_P99_TARGET_MS:.0} ms"),
            latency(created.map(|s| s.p99)),
            created.map(|s| s.p99 + DEBOUNCE_MS <= CHANGE_P99_TARGET_MS),
            true,
        ),
        (
            format!("daemon RSS ({})", cluster(&scale.spec)),
            format!("≤ {RSS_TARGET_MIB:.0} MiB"),
            format!("engine's peak {}", mib(peak)),
            Some(r.memory_target_met()),
            true,
        ),
        (
            "`SARENA_IPCACHE` entries".into(),
            format!("≤ {}", grouped(IPCACHE_CAPACITY as usize)),
            share(s.ipcache_entries, IPCACHE_CAPACITY),
            fits(s.ipcache_entries, IPCACHE_CAPACITY),
            false,
        ),
        (
            "`SARENA_POLICY` entries".into(),
            format!("≤ {}", grouped(POLICY_CAPACITY as usize)),
            share(s.policy_entries, POLICY_CAPACITY),
            fits(s.policy_entries, POLICY_CAPACITY),
            false,
        ),
    ];
    let _ = writeln!(
        md,
        "| what (issue 26) | target | measured | |\n|---|---|---|---|"
    );
    for (what, target, measured, met, share) in rows {
        let _ = writeln!(
            md,
            "| {what} | {target} | {measured} | {} |",
            verdict(met, share)
        );
    }
    let _ = writeln!(
        md,
        "\nA ✓ here is the engine's share only: \"enforced\" also needs the map writes, and \
         the daemon's RSS also holds its watch caches (every Pod, Namespace, Service and \
         NetworkPolicy of the cluster in reduced form), the dataplane's copy of the entries \
         it holds, the API server client and the runtime.\n"
    );
    scale_table(md, r);
    changes_table(md, r);
}

fn scale_table(md: &mut String, r: &PolicyResults) {
    let (sc, m, s) = (&r.scale, &r.scale.memory, &r.scale.sizes);
    let _ = writeln!(md, "### Scale: {}\n", cluster(&sc.spec));
    let _ = writeln!(
        md,
        "Measured in {}: the engine is made, `VmRSS` read, `VmHWM` reset to it{}, every \
         event told (each list, then its end), then two compiles, the second while the \
         first is held (as the daemon holds its last state while it compiles the next). \
         Memory is glibc's `malloc` as the daemon's (no other allocator).\n",
        sc.measured_in,
        if m.hwm_reset {
            ""
        } else {
            " (the reset failed: the peak includes the start)"
        }
    );
    let rows = [
        ("events told", grouped(sc.events)),
        ("telling them", format!("{:.1} ms", sc.feed_ms)),
        (
            "first full compile",
            format!("{:.1} ms", sc.first_compile_ms),
        ),
        (
            "second compile, nothing changed",
            format!("{:.1} ms", sc.second_compile_ms),
        ),
        ("VmRSS before", mib(m.rss_before_kib)),
        ("VmRSS after the events", mib(m.rss_fed_kib)),
        ("VmRSS after the first compile", mib(m.rss_compiled_kib)),
        ("VmRSS after the second", mib(m.rss_recompiled_kib)),
        ("VmHWM (peak)", mib(m.hwm_kib)),
        (
            "engine held (VmRSS after the first compile − before)",
            mib(m.engine_held_kib()),
        ),
        (
            "engine peak (VmHWM − VmRSS before)",
            mib(m.engine_peak_kib()),
        ),
        (
            "`SARENA_IPCACHE` entries",
            share(s.ipcache_entries, IPCACHE_CAPACITY),
        ),
        (
            "`SARENA_POLICY` entries (all local endpoints)",
            share(s.policy_entries, POLICY_CAPACITY),
        ),
        (
            "local endpoints (isolated ingress / egress)",
            format!(
                "{} ({} / {})",
                s.endpoints, s.ingress_isolated, s.egress_isolated
            ),
        ),
        (
            "most entries of one endpoint",
            grouped(s.max_endpoint_entries),
        ),
        ("identities allocated", grouped(s.identities)),
        ("rules named by entries", grouped(s.rules)),
    ];
    let _ = writeln!(md, "| | |\n|---|---:|");
    for (k, v) in rows {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    let _ = writeln!(md);
}

fn changes_table(md: &mut String, r: &PolicyResults) {
    let c = &r.change;
    let _ = writeln!(md, "### Change latency: {}\n", cluster(&c.spec));
    let _ = writeln!(
        md,
        "After a first compile ({:.1} ms), {} rounds of: a policy created (a random one of \
         the mix, in a random namespace), then deleted; a pod relabelled (a label added, then \
         taken off again, untimed); a pod created (a replica of a random Deployment, every \
         other one on this node), then deleted. Each is timed from `handle` of its event to \
         the end of the `compile` that follows: the engine's share of \"policy created → \
         enforced\". The daemon compiles {DEBOUNCE_MS:.0} ms after the first event of a burst \
         (its debounce) and writes the maps after the compile; neither is in these numbers.\n",
        c.first_compile_ms, c.rounds
    );
    let _ = writeln!(
        md,
        "| change | n | p50 ms | p90 ms | p99 ms | max ms | mean ms |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for row in &c.rows {
        let s = row.summary;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.op,
            s.map_or(0, |s| s.n),
            num(s.map(|s| s.p50), 2),
            num(s.map(|s| s.p90), 2),
            num(s.map(|s| s.p99), 2),
            num(s.map(|s| s.max), 2),
            num(s.map(|s| s.mean), 2),
        );
    }
    let _ = writeln!(md);
}
