use super::*;
use crate::cni_ops::{Check, CniOptions, LatencyResults, OpLatency};
use crate::node::Contender;
use crate::stats::Summary;

fn row(contender: Contender, op: &str, samples: &[f64]) -> OpLatency {
    OpLatency {
        contender,
        op: op.into(),
        summary: Summary::of(samples),
        errors: 0,
        first_error: None,
        p50_ratio_to_ptp: None,
        p99_ratio_to_ptp: None,
        plugin_peak_rss_kib: Some(6000),
        plugin_median_rss_kib: Some(5000),
        samples_ms: samples.to_vec(),
    }
}

fn inputs() -> ReportInputs {
    let mut ebpf_add = row(Contender::SarenaEbpf, "ADD", &[2.0, 3.0, 4.0]);
    ebpf_add.p50_ratio_to_ptp = Some(0.2);
    let mut ebpf_del = row(Contender::SarenaEbpf, "DEL", &[9.0]);
    ebpf_del.p50_ratio_to_ptp = Some(0.5);
    let cni = CniResults {
        options: CniOptions {
            contenders: vec![Contender::SarenaEbpf, Contender::PtpHostLocal],
            ..CniOptions::quick()
        },
        latency: LatencyResults {
            pods: 3,
            rows: vec![
                ebpf_add,
                row(Contender::PtpHostLocal, "ADD", &[10.0, 15.0, 20.0]),
                ebpf_del,
            ],
            rss_pods: 1,
            rss_floor_kib: Some(1800),
        },
        churn: vec![],
        scale: vec![],
        checks: vec![Check {
            what: "pods have addresses".into(),
            ok: true,
        }],
    };
    ReportInputs {
        cni: Some(cni),
        dataplane: None,
        criterion: vec![],
        machine: Machine {
            cpu: "Test CPU".into(),
            ..Machine::default()
        },
        command: "bash scripts/bench.sh".into(),
        quick: true,
    }
}

#[test]
fn page_has_the_sections_numbers_and_verdicts() {
    let md = render(&inputs());
    for needle in [
        "## Command",
        "bash scripts/bench.sh",
        "Test CPU",
        "## CNI operation latency",
        "| ADD | Sarena (eBPF) | 3 | 3.00 |",
        "| ADD p50, Sarena (eBPF) | ≤ 0.25× ptp + host-local | 0.20× (3.00 ms vs 15.00 ms) | ✓ met |",
        "| DEL p50, Sarena (eBPF) | ≤ 0.2× ptp + host-local | 0.50×",
        "✗ missed",
        "benchmarks-latency.svg",
        "Smoke run",
        "✓ pods have addresses",
        "## Dataplane",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in:\n{md}");
    }
}

#[test]
fn write_puts_page_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path(), &inputs()).unwrap();
    assert_eq!(files.len(), 3);
    let svg = std::fs::read_to_string(dir.path().join(LATENCY_SVG)).unwrap();
    // ADD: two bars, DEL: one (ptp has no DEL row here), CHECK/STATUS none;
    // each series also has one legend swatch.
    let bars: usize = plots::COLOURS[..2]
        .iter()
        .map(|&c| svg.matches(&format!("fill=\"{}\"", plots::hex(c))).count() - 1)
        .sum();
    assert_eq!(bars, 3);
}
