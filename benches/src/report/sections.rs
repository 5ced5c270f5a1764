//! The page's sections, one function each.

use std::fmt::Write;

use super::bandwidth::{self, BANDWIDTH_TARGET};
use super::num;
use super::services::{self, SERVICE_TARGET};
use super::{CDF_SVG, LATENCY_SVG, Machine, ReportInputs, TARGET_RATIO};
use crate::cni_ops::CniResults;
use crate::dataplane::PathKind;
use crate::node::Contender;
use crate::report::criterion::{CriterionEstimate, human_ns};

/// Concurrent ADDs' wall time at most this share of ptp + host-local's (issue 29).
const CHURN_TARGET: f64 = 0.35;

pub(super) fn kib(v: Option<u64>) -> String {
    v.map_or("–".into(), |v| format!("{:.1} MiB", v as f64 / 1024.0))
}

pub(super) fn machine(md: &mut String, m: &Machine) {
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(md, "| | |\n|---|---|");
    let rows = [
        ("date", m.date.clone()),
        ("CPU", m.cpu.clone()),
        ("cores", m.cores.to_string()),
        ("memory", format!("{:.1} GiB", m.memory_gib)),
        ("virtualisation", m.virtualization.clone()),
        ("kernel", m.kernel.clone()),
        ("load average at start (1/5/15 min)", m.load_average.clone()),
        ("rustc", m.rustc.clone()),
        ("Sarena", m.sarena.clone()),
        ("reference plugins", m.reference_plugins.clone()),
        ("iperf3", m.iperf3.clone()),
    ];
    for (k, v) in rows {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    let _ = writeln!(md);
}

/// One row of the targets table.
struct Target {
    what: String,
    target: String,
    measured: String,
    met: Option<bool>,
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "✓ met",
        Some(false) => "✗ missed",
        None => "not measured",
    }
}

fn targets_of(inputs: &ReportInputs) -> Vec<Target> {
    let mut t = Vec::new();
    let sarena = [Contender::SarenaEbpf, Contender::SarenaKernel];
    if let Some(cni) = &inputs.cni {
        for (op, limit) in [("ADD", 0.25), ("DEL", 0.2)] {
            for c in sarena {
                let row = cni.latency.row(c, op);
                let r = row.and_then(|r| r.p50_ratio_to_ptp);
                t.push(Target {
                    what: format!("{op} p50, {}", c.label()),
                    target: format!("≤ {limit}× ptp + host-local"),
                    measured: format!(
                        "{}× ({} ms vs {} ms)",
                        num(r, 2),
                        num(row.and_then(|r| r.summary).map(|s| s.p50), 2),
                        num(
                            cni.latency
                                .row(Contender::PtpHostLocal, op)
                                .and_then(|r| r.summary)
                                .map(|s| s.p50),
                            2
                        )
                    ),
                    met: r.map(|r| r <= limit),
                });
            }
        }
        if let Some(p) = &cni.phases {
            for (what, target, measured, met) in super::phases::targets(p) {
                t.push(Target {
                    what,
                    target,
                    measured,
                    met,
                });
            }
        }
        let top = cni.churn.iter().map(|c| c.concurrency).max();
        let at_top = |c: Contender| {
            cni.churn
                .iter()
                .find(|r| r.contender == c && Some(r.concurrency) == top)
        };
        let ptp = at_top(Contender::PtpHostLocal).map(|r| r.add_wall_ms);
        for c in sarena {
            let row = at_top(c);
            let r = crate::stats::ratio_of(row.map(|r| r.add_wall_ms), ptp);
            t.push(Target {
                what: format!("{} concurrent ADDs, {}", top.unwrap_or(0), c.label()),
                target: format!("≤ {CHURN_TARGET}× ptp + host-local's wall time, zero errors"),
                measured: row.map_or("–".into(), |row| {
                    format!(
                        "{}× ({:.0} ms vs {} ms, medians of {} rounds), {} errors, one ADD's p99 {} ms",
                        num(r, 2),
                        row.add_wall_ms,
                        num(ptp, 0),
                        row.add_walls_ms.len().max(1),
                        row.add_errors,
                        num(row.add.map(|s| s.p99), 1)
                    )
                }),
                met: row.and_then(|row| Some(r? <= CHURN_TARGET && row.add_errors == 0)),
            });
        }
        let top = cni.scale.iter().map(|s| s.existing).max();
        for c in sarena {
            let row = cni
                .scale
                .iter()
                .find(|r| r.contender == c && Some(r.existing) == top);
            let r = row.and_then(|r| r.p50_ratio_to_first_level);
            t.push(Target {
                what: format!(
                    "ADD p50 at {} endpoints vs at {}, {}",
                    top.unwrap_or(0),
                    cni.scale.iter().map(|s| s.existing).min().unwrap_or(0),
                    c.label()
                ),
                target: "≤ 1.2×".into(),
                measured: format!("{}×", num(r, 2)),
                met: r.map(|r| r <= 1.2),
            });
        }
    }
    if let Some(dp) = &inputs.dataplane {
        for kind in [PathKind::SarenaEbpf, PathKind::SarenaKernel] {
            let s = dp.paths.iter().find(|p| p.path == kind).map(|p| &p.summary);
            for (what, r) in [
                ("TCP throughput", s.and_then(|s| s.gbits_ratio_to_raw)),
                ("request/response rate", s.and_then(|s| s.rr_ratio_to_raw)),
            ] {
                t.push(Target {
                    what: format!("{what}, {}", kind.label()),
                    target: format!("≥ {TARGET_RATIO}× raw veth pair"),
                    measured: format!("{}×", num(r, 2)),
                    met: r.map(|r| r >= TARGET_RATIO),
                });
            }
        }
        let bandwidth: [(&str, services::Metric); 2] = [
            ("TCP throughput", |s| s.gbits_median),
            ("request/response rate", |s| s.rr_median),
        ];
        for (what, metric) in bandwidth {
            let r = dp.beside_limited_ratio(metric);
            t.push(Target {
                what: format!(
                    "{what}, unlimited pods beside a limited pod vs. on a node without limits"
                ),
                target: format!("≥ {BANDWIDTH_TARGET}×"),
                measured: format!("{}×", num(r, 2)),
                met: r.map(|r| bandwidth::met(r, true)),
            });
        }
        for e in super::embedded::targets(dp) {
            t.push(Target {
                what: e.what,
                target: e.target,
                measured: format!("{}×", num(e.ratio, 2)),
                met: e.met,
            });
        }
        let services = [PathKind::SarenaEbpfService, PathKind::SarenaKernelService];
        let measured = dp.paths.iter().any(|p| p.path.is_service());
        for kind in services.into_iter().filter(|_| measured) {
            let metrics: [(&str, services::Metric); 2] = [
                ("TCP throughput", |s| s.gbits_median),
                ("request/response rate", |s| s.rr_median),
            ];
            for (what, metric) in metrics {
                let r = services::ratio_to_ptp(dp, kind, metric);
                t.push(Target {
                    what: format!("{what}, {}", kind.label()),
                    target: format!("≥ {SERVICE_TARGET:.1}× ptp → ClusterIP"),
                    measured: format!("{}×", num(r, 2)),
                    met: r.map(|r| r >= SERVICE_TARGET),
                });
            }
        }
    }
    if let Some(c) = &inputs.crossnode {
        for x in c.targets() {
            t.push(Target {
                what: x.what,
                target: x.target,
                measured: format!("{}×", num(x.ratio, 2)),
                met: x.met,
            });
        }
    }
    let kubelet = inputs.kubelet_pods.iter().flat_map(|k| k.targets());
    let scale = inputs.node_scale.iter().flat_map(|s| s.targets());
    for (what, target, measured, met) in kubelet.chain(scale) {
        t.push(Target {
            what,
            target,
            measured,
            met: Some(met),
        });
    }
    if let Some(c) = &inputs.policy_cluster {
        for (what, target, measured, met) in c.targets() {
            t.push(Target {
                what,
                target,
                measured,
                met: Some(met),
            });
        }
    }
    t
}

pub(super) fn targets(md: &mut String, inputs: &ReportInputs) {
    let t = targets_of(inputs);
    if t.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Targets (issues 6, 11, 26, 27, 29 and 31)\n");
    let _ = writeln!(md, "| what | target | measured | |\n|---|---|---|---|");
    for r in &t {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            r.what,
            r.target,
            r.measured,
            verdict(r.met)
        );
    }
    let missed: Vec<&str> = t
        .iter()
        .filter(|r| r.met == Some(false))
        .map(|r| r.what.as_str())
        .collect();
    let _ = writeln!(
        md,
        "\n{} of {} targets met{}\n",
        t.iter().filter(|r| r.met == Some(true)).count(),
        t.len(),
        if missed.is_empty() {
            ".".to_string()
        } else {
            format!("; missed: {}.", missed.join("; "))
        }
    );
}

pub(super) fn latency(md: &mut String, cni: &CniResults) {
    let l = &cni.latency;
    let _ = writeln!(md, "## CNI operation latency\n");
    let _ = writeln!(
        md,
        "{} pods per contender. Each contender runs on its own throwaway node (a network \
         namespace standing in for the host netns; Sarena with its own `sarena-daemon` \
         inside it). The plugin is executed exactly as a runtime does: a fresh process per \
         operation, environment cleared but for `CNI_*` and `PATH`, the network config on \
         stdin (`prevResult` included for CHECK and DEL), result read from stdout, exit code \
         checked. Latency is spawn → reaped. Operations are interleaved: pod *i*'s ADD on \
         every contender (in an order rotated per pod), then the next pod; then all CHECKs, \
         STATUSes and DELs the same way. The reference plugins speak CNI up to 1.0.0 and \
         have no STATUS.\n",
        l.pods
    );
    let _ = writeln!(
        md,
        "| op | contender | n | p50 ms | p90 ms | p99 ms | max ms | errors | p50 ÷ ptp | p99 ÷ ptp | plugin peak RSS (median / max) |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &l.rows {
        let s = r.summary;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} |",
            r.op,
            r.contender.label(),
            s.map_or(0, |s| s.n),
            num(s.map(|s| s.p50), 2),
            num(s.map(|s| s.p90), 2),
            num(s.map(|s| s.p99), 2),
            num(s.map(|s| s.max), 2),
            r.errors,
            num(r.p50_ratio_to_ptp, 2),
            num(r.p99_ratio_to_ptp, 2),
            kib(r.plugin_median_rss_kib),
            kib(r.plugin_peak_rss_kib),
        );
    }
    let _ = writeln!(
        md,
        "\nPlugin peak RSS: from {} more pods per contender after the timed runs, each \
         operation run through GNU time (`/usr/bin/time -f %M`, untimed). A child's \
         `ru_maxrss` includes the size of the process that forked it, so the harness \
         does not read it from its own children; GNU time's floor (its figure for \
         `/bin/true`) is {}.",
        l.rss_pods,
        kib(l.rss_floor_kib)
    );
    let errors: Vec<String> = l
        .rows
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{} {}: {}",
                r.contender.label(),
                r.op,
                r.first_error.as_ref()?
            ))
        })
        .collect();
    if !errors.is_empty() {
        let _ = writeln!(md, "\nFirst error of each failing row:\n");
        for e in errors {
            let _ = writeln!(md, "- {e}");
        }
    }
    let _ = writeln!(
        md,
        "\n![CNI latency: median bars, p90/p99 whiskers]({LATENCY_SVG})\n\n![ADD latency CDF]({CDF_SVG})\n"
    );
}

pub(super) fn churn(md: &mut String, cni: &CniResults) {
    if cni.churn.is_empty() {
        return;
    }
    let rounds = cni.options.churn_rounds.max(1);
    let _ = writeln!(md, "## Churn: concurrent ADDs, then concurrent DELs\n");
    let _ = writeln!(
        md,
        "N plugin processes started at once (one thread each, released together), on a fresh \
         node per contender; then N DELs at once. Wall time is from the release to the last \
         process reaped: the median of {rounds} rounds (every contender once a round, in an \
         order rotated per round), with the fastest and slowest round; per-operation \
         latencies are over every round. CPU is the whole machine's during the ADDs \
         (`/proc/stat`, every CPU: plugins, daemon, kernel and harness), as the share of \
         the CPUs busy and as CPU time per ADD (medians over the rounds): a share near 1 \
         means the wall time is what the ADDs cost in CPU. The CPU per ADD is split \
         into the plugin processes' own (each reaped with `wait4`: exec, dynamic loading, \
         the plugin's work and exit; ptp's includes the host-local it runs), the daemon's \
         (`/proc/PID/stat`) and the rest (the kernel's threads, the harness). After each \
         round's ADDs the addresses are checked for duplicates and the node's IPAM for \
         exactly N addresses, after its DELs for none.\n"
    );
    let _ = writeln!(
        md,
        "| N | contender | ADD wall ms (min–max) | ADD p50 / p99 ms | CPU busy during the ADDs | CPU ms per ADD (plugin / daemon / rest) | ADD errors | DEL wall ms (min–max) | DEL p50 / p99 ms | DEL errors | duplicate addresses | IPAM after ADDs / DELs |"
    );
    let _ = writeln!(
        md,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &cni.churn {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} ({}) | {} / {} | {} | {} | {} | {:.0} ({}) | {} / {} | {} | {} | {} / {} |",
            r.concurrency,
            r.contender.label(),
            r.add_wall_ms,
            spread(&r.add_walls_ms),
            num(r.add.map(|s| s.p50), 1),
            num(r.add.map(|s| s.p99), 1),
            r.add_cpu_busy
                .map_or("–".into(), |b| format!("{:.0} %", b * 100.0)),
            cpu_split(r),
            r.add_errors,
            r.del_wall_ms,
            spread(&r.del_walls_ms),
            num(r.del.map(|s| s.p50), 1),
            num(r.del.map(|s| s.p99), 1),
            r.del_errors,
            r.duplicates.len(),
            r.held_after_add.addresses,
            r.held_after_del.addresses,
        );
    }
    for r in cni.churn.iter().filter(|r| r.first_error.is_some()) {
        let _ = writeln!(
            md,
            "\n- first error, {} at {}: {}",
            r.contender.label(),
            r.concurrency,
            r.first_error.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(md);
    super::scale::what_concurrency_adds(md, cni);
}

/// "total (plugin / daemon / rest)" of a churn row's CPU per ADD; a part
/// not measured is "–", and so is the rest then.
fn cpu_split(r: &crate::cni_ops::ChurnResult) -> String {
    let total = num(r.add_cpu_ms_per_op, 1);
    let Some(plugin) = r.add_plugin_cpu_ms_per_op else {
        return total;
    };
    let daemon = r.add_daemon_cpu_ms_per_op;
    let rest = r
        .add_cpu_ms_per_op
        .map(|t| t - plugin - daemon.unwrap_or(0.0));
    format!(
        "{total} ({} / {} / {})",
        num(Some(plugin), 1),
        num(daemon, 1),
        num(rest, 1)
    )
}

/// "min–max" of `walls`, "–" without any.
fn spread(walls: &[f64]) -> String {
    let min = walls.iter().copied().reduce(f64::min);
    let max = walls.iter().copied().reduce(f64::max);
    match (min, max) {
        (Some(min), Some(max)) => format!("{min:.0}–{max:.0}"),
        _ => "–".into(),
    }
}

pub(super) fn criterion(md: &mut String, estimates: &[CriterionEstimate]) {
    let _ = writeln!(md, "## Criterion benches (IPAM, API round trip)\n");
    if estimates.is_empty() {
        let _ = writeln!(md, "No criterion estimates were found for this run.\n");
        return;
    }
    let _ = writeln!(
        md,
        "`cargo bench -p sarena-benches` (short warm-up and measurement times), read from \
         `target/criterion/*/new/estimates.json`.\n"
    );
    let _ = writeln!(
        md,
        "| bench | mean | 95 % CI of the mean | median |\n|---|---:|---:|---:|"
    );
    for e in estimates {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} – {} | {} |",
            e.id,
            human_ns(e.mean_ns),
            human_ns(e.mean_ci_ns.0),
            human_ns(e.mean_ci_ns.1),
            human_ns(e.median_ns)
        );
    }
    let _ = writeln!(md);
}

pub(super) fn checks(md: &mut String, cni: &CniResults) {
    let _ = writeln!(md, "## Verifications of this run\n");
    for c in &cni.checks {
        let _ = writeln!(md, "- {} {}", if c.ok { "✓" } else { "✗ FAILED:" }, c.what);
    }
    let _ = writeln!(md);
}

pub(super) fn method(md: &mut String) {
    let _ = writeln!(
        md,
        "## How to read these numbers\n\n\
         - Percentiles are nearest-rank over the successful operations; p50 is the median.\n\
         - Ratios below 1 mean Sarena is faster (latency) or lower; for the dataplane, ratios \
           are of rates, so above 1 means faster than the raw veth pair.\n\
         - The machine is small (see above) and may be shared: absolute numbers move between \
           runs; interleaving makes the ratios within one run the fairer comparison.\n\
         - Reference configs: `ptp` (ipMasq false, MTU 1500) and `bridge` (isGateway, own \
           bridge per node) with `host-local` on a /16, cniVersion 1.0.0. Sarena: \
           `sarena-cni` with cniVersion 1.1.0 against its own daemon, pool /16, \
           masquerade off.\n"
    );
}
