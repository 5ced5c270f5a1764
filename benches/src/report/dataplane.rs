//! The dataplane section of docs/benchmarks.md.

use std::fmt::Write as _;

use super::num;
use crate::dataplane::{DataplaneResults, PathKind, PathResult};

/// The target: pod ↔ pod at least this fraction of the raw veth pair.
pub const TARGET_RATIO: f64 = 0.95;

fn ratio(v: Option<f64>, is_sarena: bool) -> String {
    match v {
        Some(r) if is_sarena && r < TARGET_RATIO => format!("{r:.2} ✗"),
        Some(r) if is_sarena => format!("{r:.2} ✓"),
        Some(r) => format!("{r:.2}"),
        None => "–".into(),
    }
}

fn is_sarena(p: &PathResult) -> bool {
    matches!(
        p.path,
        PathKind::SarenaEbpf
            | PathKind::SarenaEbpfBesideLimited
            | PathKind::SarenaKernel
            | PathKind::SarenaEbpf6
    )
}

impl DataplaneResults {
    /// This section of the benchmarks page (Markdown, starting with a `##`
    /// heading).
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(
            md,
            "## Dataplane: pod ↔ pod on one node, direct and through a ClusterIP\n"
        );
        self.method(&mut md);
        self.speed_table(&mut md);
        self.cpu_table(&mut md);
        self.rounds_table(&mut md);
        self.bandwidth_markdown(&mut md);
        self.services_markdown(&mut md);
        self.embedded_markdown(&mut md);
        self.event_cost_markdown(&mut md);
        self.checks(&mut md);
        md
    }

    fn method(&self, md: &mut String) {
        let pinning = match self.pinning {
            Some(p) if p.client == p.server => format!(
                "client and server both pinned to CPU {} (iperf3 `-A`, `sched_setaffinity` \
                 for the request/response threads): on one CPU the rates are the inverse of \
                 the whole path's cost, and background load lands mostly on the other CPU(s)",
                p.client
            ),
            Some(p) => format!(
                "client pinned to CPU {}, server to CPU {} (both iperf3 ends with `-A`, \
                 both request/response threads with `sched_setaffinity`)",
                p.client, p.server
            ),
            None => "client and server placed by the scheduler".into(),
        };
        let _ = writeln!(
            md,
            "Two pods on one node, made by the real plugin executed as a runtime does \
             (Sarena eBPF mode, Sarena kernel mode, reference `ptp` + `host-local`), \
             against one veth pair straight between two netns (the floor). Every path is \
             measured once per round, in a rotating order, for {} interleaved round(s); \
             the tables give medians. Per run: `iperf3 -c … -t {} -J` (one TCP stream, \
             received bits/s), then {} s of 1-byte request / 1-byte response over one \
             TCP connection with `TCP_NODELAY` (our own client and server threads, each \
             inside its pod's netns); {pinning}. ✓/✗: Sarena against the target of \
             ≥ {TARGET_RATIO}× the raw veth pair. The rows \"→ ClusterIP\" are the \
             Service paths (see below).\n",
            self.rounds, self.iperf_seconds, self.rr_seconds
        );
    }

    fn speed_table(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "| path | MTU | TCP Gbit/s | × raw veth | request/response per s | × raw veth | TCP retransmits |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
        for p in &self.paths {
            let s = &p.summary;
            let sarena = is_sarena(p);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                p.path.label(),
                p.mtu.map_or("–".into(), |m| m.to_string()),
                num(s.gbits_median, 2),
                ratio(s.gbits_ratio_to_raw, sarena),
                num(s.rr_median, 0),
                ratio(s.rr_ratio_to_raw, sarena),
                s.retransmits
            );
        }
    }

    fn cpu_table(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\nCPU cost (lower is better). *Processes*: CPU time of the two iperf3 processes \
             (as iperf3 reports it) and of the two request/response threads \
             (`CLOCK_THREAD_CPUTIME_ID`); the kernel's tick-based accounting charges the \
             softirq work done in their context (veth receive, eBPF programs, forwarding) to \
             them, so this is the path's own cost, undisturbed by other load. *Machine*: busy \
             time of all {} CPUs from `/proc/stat` (user + nice + system + irq + softirq) \
             over each run, including anything else running on the machine.\n",
            self.cpus
        );
        let _ = writeln!(
            md,
            "| path | CPU-s per Gbit (processes) | × raw veth | CPU-s per Gbit (machine) | busy % (TCP) | \
             CPU µs per request (threads) | × raw veth | CPU µs per request (machine) | busy % (req/resp) |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for p in &self.paths {
            let s = &p.summary;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.path.label(),
                num(s.process_cpu_seconds_per_gbit_median, 3),
                num(s.process_cpu_per_gbit_ratio_to_raw, 2),
                num(s.cpu_seconds_per_gbit_median, 3),
                num(s.iperf_busy_percent_median, 0),
                num(s.process_cpu_us_per_rr_median, 1),
                num(s.process_cpu_per_rr_ratio_to_raw, 2),
                num(s.cpu_us_per_rr_median, 1),
                num(s.rr_busy_percent_median, 0),
            );
        }
    }

    fn rounds_table(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "\nEvery round, in round order (Gbit/s; request/response per s):\n"
        );
        let _ = writeln!(
            md,
            "| path | TCP Gbit/s by round | req/resp per s by round |"
        );
        let _ = writeln!(md, "|---|---|---|");
        for p in &self.paths {
            let g: Vec<String> = p
                .samples
                .iter()
                .map(|s| format!("{:.2}", s.iperf.gbits_per_second()))
                .collect();
            let r: Vec<String> = p
                .samples
                .iter()
                .map(|s| format!("{:.0}", s.rr.per_second))
                .collect();
            let _ = writeln!(
                md,
                "| {} | {} | {} |",
                p.path.label(),
                g.join(" / "),
                r.join(" / ")
            );
        }
        md.push('\n');
    }

    fn checks(&self, md: &mut String) {
        match &self.ebpf_check {
            Some(c) => {
                let _ = writeln!(md, "eBPF path check: {}.\n", c.describe());
            }
            None => {
                let _ = writeln!(
                    md,
                    "eBPF path check: not made (the eBPF path was not measured, or its \
                     counters could not be read).\n"
                );
            }
        }
        if let Some(c) = &self.ebpf6_check {
            let _ = writeln!(md, "IPv6 eBPF path check: {}.\n", c.describe());
        }
        for e in &self.check_errors {
            let _ = writeln!(md, "**Check not made**: {e}\n");
        }
        for (path, why) in &self.skipped {
            let _ = writeln!(md, "**{} not measured**: {why}\n", path.label());
        }
        let steal = self
            .paths
            .iter()
            .flat_map(|p| p.samples.iter())
            .filter_map(|s| s.iperf.cpu.map(|c| c.steal_percent))
            .reduce(f64::max);
        if let Some(s) = self.settle {
            let _ = writeln!(
                md,
                "Before the first round the harness waited {:.0} s for a quiet machine \
                 (then {} % of all CPUs busy over one second).\n",
                s.waited_seconds,
                num(s.busy_percent, 0)
            );
        }
        let bound = match self.pinning {
            Some(p) if p.client == p.server => {
                "both ends share one CPU, so a path's rates follow its CPU cost; rounds \
                 still vary by about ±10 % with whatever else the machine runs"
            }
            _ => {
                "one TCP stream is bound by copying on these CPUs, so throughput differences \
                  of a few % are within the noise"
            }
        };
        let _ = writeln!(
            md,
            "Noise: 1-minute load average {} before and {} after the measurements (a slow \
             average: it still carries whatever ran just before); hypervisor steal up to {} % \
             of CPU time during a TCP run. With {} CPUs {bound}; the processes' CPU per Gbit \
             and per request show the path's own cost best.",
            num(self.load_average.0, 2),
            num(self.load_average.1, 2),
            num(steal, 1),
            self.cpus
        );
    }
}
