//! The Service part of the dataplane section (issue 11 item 4) and the eBPF
//! programs' own cost per run (issue 16 item 4).

use std::fmt::Write as _;

use super::num;
use crate::dataplane::service::PORTS;
use crate::dataplane::{DataplaneResults, PathKind, PathResult, PathSummary};
use crate::stats::{median, ratio_of};

/// The target: Service traffic at least as fast as ptp's.
pub const SERVICE_TARGET: f64 = 1.0;

/// One median of a path's summary.
pub type Metric = fn(&PathSummary) -> Option<f64>;

/// A Service path's `metric` (throughput or request/response median) ÷
/// ptp's through its ClusterIP.
pub fn ratio_to_ptp(dp: &DataplaneResults, kind: PathKind, metric: Metric) -> Option<f64> {
    let of = |k: PathKind| dp.path(k).and_then(|p| metric(&p.summary));
    ratio_of(of(kind), of(PathKind::PtpHostLocalService))
}

fn marked(r: Option<f64>, kind: PathKind) -> String {
    match r {
        Some(r) if kind == PathKind::PtpHostLocalService => format!("{r:.2}"),
        Some(r) if r >= SERVICE_TARGET => format!("{r:.2} ✓"),
        Some(r) => format!("{r:.2} ✗"),
        None => "–".into(),
    }
}

impl DataplaneResults {
    /// The measured path `kind`.
    pub fn path(&self, kind: PathKind) -> Option<&PathResult> {
        self.paths.iter().find(|p| p.path == kind)
    }

    /// The Service subsection (nothing when no Service path was measured).
    pub(super) fn services_markdown(&self, md: &mut String) {
        let services: Vec<&PathResult> =
            self.paths.iter().filter(|p| p.path.is_service()).collect();
        if !services.is_empty() {
            self.service_table(md, &services);
            self.service_checks(md);
        }
        self.program_costs(md);
    }

    fn service_table(&self, md: &mut String, services: &[&PathResult]) {
        let cluster_ip = self
            .services
            .as_ref()
            .and_then(|s| s.checks.first())
            .map_or("a ClusterIP in 10.96.0.0/12".into(), |c| {
                format!("ClusterIP {}", c.cluster_ip)
            });
        let ports: Vec<String> = PORTS.iter().map(|(n, p)| format!("{p} ({n})")).collect();
        let _ = writeln!(
            md,
            "### Services: pod → ClusterIP → pod on one node\n\n\
             Each contender also runs a second node whose client pod dials {cluster_ip} \
             (ports {}, each mapped to the same port of the server pod, its only endpoint) \
             instead of the server pod, through the rules kube-proxy writes in its iptables \
             mode, installed in the node netns: nat `KUBE-SERVICES` from PREROUTING and \
             OUTPUT, one `KUBE-SVC-*` (masquerade mark for sources outside the pod subnet) \
             and one `KUBE-SEP-*` (hairpin mark, DNAT) per port, `KUBE-MARK-MASQ` / \
             `KUBE-POSTROUTING`, `KUBE-NODEPORTS` last; filter `KUBE-FORWARD` (drop \
             conntrack-invalid, accept marked and established). Same runs, same interleaved \
             rounds as the direct paths. Targets (reported, not asserted): Service traffic \
             no slower than ptp's (✓: ≥ {SERVICE_TARGET:.2}× ptp → ClusterIP).\n",
            ports.join(", ")
        );
        let _ = writeln!(
            md,
            "| path | TCP Gbit/s | × its direct path | × ptp → ClusterIP | \
             request/response per s | × its direct path | × ptp → ClusterIP |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
        let gbits = |s: &PathSummary| s.gbits_median;
        let rr = |s: &PathSummary| s.rr_median;
        for p in services {
            let direct = self.path(p.path.direct()).map(|d| &d.summary);
            let s = &p.summary;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                p.path.label(),
                num(s.gbits_median, 2),
                num(ratio_of(s.gbits_median, direct.and_then(gbits)), 2),
                marked(ratio_to_ptp(self, p.path, gbits), p.path),
                num(s.rr_median, 0),
                num(ratio_of(s.rr_median, direct.and_then(rr)), 2),
                marked(ratio_to_ptp(self, p.path, rr), p.path),
            );
        }
        md.push('\n');
    }

    fn service_checks(&self, md: &mut String) {
        let checks = self.services.as_ref().map_or(&[][..], |s| &s.checks[..]);
        for c in checks {
            let _ = writeln!(md, "Service path check: {}.\n", c.describe());
        }
    }

    fn program_costs(&self, md: &mut String) {
        let measured: Vec<&PathResult> = self
            .paths
            .iter()
            .filter(|p| p.samples.iter().any(|s| s.programs.is_some()))
            .collect();
        if measured.is_empty() {
            return;
        }
        let sysctl = |v: Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "unreadable",
        };
        let (before, after) = self
            .services
            .as_ref()
            .map_or((None, None), |s| s.stats_sysctl);
        let _ = writeln!(
            md,
            "### eBPF programs: own cost per run\n\n\
             The kernel's run-time statistics of the eBPF node's programs (`run_time_ns` ÷ \
             `run_cnt` of each program's info), over one extra {} s request/response run \
             per path and round with the statistics on (`BPF_ENABLE_STATS`, held only for \
             that run; the timed runs above run without them). `kernel.bpf_stats_enabled` \
             was {} before and {} after the run. `from_container` runs for every frame a \
             pod sends: the anti-spoofing check (one endpoint-map lookup of the source), \
             the ARP answers, and on a frame to a local pod the host-stack flows lookup \
             and the redirect; `to_container` runs for frames the host stack delivers into \
             a pod (redirected frames skip it) and records the flows it delivers from \
             another pod. Runs per round trip include the connection set-up and warm-up.\n",
            self.rr_seconds,
            sysctl(before),
            sysctl(after)
        );
        let _ = writeln!(
            md,
            "| path | from_container ns/run | runs per round trip | to_container ns/run | \
             runs per round trip | from_container ns/run by round |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---|");
        for p in measured {
            let runs: Vec<_> = p.samples.iter().filter_map(|s| s.programs).collect();
            let per = |f: &dyn Fn(&crate::dataplane::ProgramRuns) -> Option<f64>| {
                median(&runs.iter().filter_map(f).collect::<Vec<_>>())
            };
            let by_round: Vec<String> = runs
                .iter()
                .map(|r| num(r.from_container.ns_per_run(), 0))
                .collect();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} |",
                p.path.label(),
                num(p.summary.from_container_ns_per_run_median, 0),
                num(per(&|r| r.per_transaction(r.from_container)), 2),
                num(p.summary.to_container_ns_per_run_median, 0),
                num(per(&|r| r.per_transaction(r.to_container)), 2),
                by_round.join(" / ")
            );
        }
        md.push('\n');
    }
}
