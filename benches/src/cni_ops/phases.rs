//! Where one plugin run spends its time (issue 29, step 1): STATUS, ADD and
//! DEL of `sarena-cni` on an eBPF node, each run timed by the harness from
//! just before the spawn to the reap and by the plugin itself, phase by
//! phase (`SARENA_CNI_PHASES`, `sarena_plugin::phases`), on the same
//! monotonic clock. The phase table takes, per phase, the median over the
//! runs; "exec and loading" is the spawn to the plugin's first instruction
//! of `main`, "exit and reap" its last one to the reap.
//!
//! The baselines, run by the same harness, interleaved with the plugin's
//! runs: a statically linked hello world (built here with `cc -static`;
//! absent without a C compiler and static libc) and `sarena-cni` VERSION.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Check, make_pods, progress, push_check};
use crate::BenchError;
use crate::node::{Bins, Contender, NodeNetns, PluginRun};
use crate::stats::{median, ms, ratio};

/// The first phase of every run: from the spawn to `main`.
pub const EXEC_PHASE: &str = "exec and loading";
/// The last: from the end of `main` to the reap.
pub const EXIT_PHASE: &str = "exit and reap";
/// The operations measured, in order.
pub const OPS: [&str; 3] = ["STATUS", "ADD", "DEL"];

/// One phase of one operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseRow {
    /// What ran (the plugin's name for it).
    pub name: String,
    /// Median start, ms after the spawn.
    pub start_p50_ms: f64,
    /// Median duration, ms.
    pub p50_ms: f64,
}

/// One operation's phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpPhases {
    /// "STATUS", "ADD" or "DEL".
    pub op: String,
    /// Median wall time, spawn to reap, ms.
    pub total_p50_ms: f64,
    /// Its phases in the order they start (median start).
    pub phases: Vec<PhaseRow>,
}

/// The phase table and its baselines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseTable {
    /// Runs per operation.
    pub runs: usize,
    /// A static hello world, spawn to reap, median ms (`None`: no static
    /// build here).
    pub hello_p50_ms: Option<f64>,
    /// `sarena-cni` VERSION, median ms.
    pub version_p50_ms: Option<f64>,
    /// STATUS, ADD, DEL.
    pub ops: Vec<OpPhases>,
}

impl PhaseTable {
    /// The phases of `op`.
    pub fn op(&self, op: &str) -> Option<&OpPhases> {
        self.ops.iter().find(|o| o.op == op)
    }

    /// `op`'s median wall time over the static hello world's.
    pub fn ratio_to_hello(&self, op: &str) -> Option<f64> {
        ratio(self.op(op)?.total_p50_ms, self.hello_p50_ms?)
    }
}

/// One run's phases as `sarena-cni` wrote them.
#[derive(Debug, Deserialize)]
struct PluginPhases {
    main_start_ns: u64,
    main_end_ns: u64,
    phases: Vec<sarena_core::phases::Phase>,
}

/// Samples of one operation: per phase name, (start, duration) in ms.
#[derive(Default)]
pub(super) struct Samples {
    totals: Vec<f64>,
    phases: BTreeMap<String, Vec<(f64, f64)>>,
}

impl Samples {
    /// Adds `run`, whose phases are in `file` (emptied after).
    pub(super) fn add(&mut self, run: &PluginRun, file: &Path) -> Result<(), BenchError> {
        let text =
            std::fs::read_to_string(file).map_err(|source| BenchError::io("read", file, source))?;
        std::fs::write(file, "").map_err(|source| BenchError::io("empty", file, source))?;
        let Some(line) = text.lines().last() else {
            return Ok(());
        };
        let Ok(p) = serde_json::from_str::<PluginPhases>(line) else {
            return Ok(());
        };
        let since = |ns: u64| ns.saturating_sub(run.spawn_ns) as f64 / 1e6;
        let mut push = |name: &str, start: u64, end: u64| {
            self.phases
                .entry(name.to_owned())
                .or_default()
                .push((since(start), end.saturating_sub(start) as f64 / 1e6));
        };
        push(EXEC_PHASE, run.spawn_ns, p.main_start_ns);
        for phase in &p.phases {
            push(&phase.name, phase.start_ns, phase.end_ns);
        }
        push(EXIT_PHASE, p.main_end_ns, run.reaped_ns);
        self.totals.push(ms(run.elapsed));
        Ok(())
    }

    /// The medians, `None` without a run.
    pub(super) fn into_op(self, op: &str) -> Option<OpPhases> {
        let mut phases: Vec<PhaseRow> = self
            .phases
            .into_iter()
            .filter_map(|(name, samples)| {
                let starts: Vec<f64> = samples.iter().map(|s| s.0).collect();
                let durations: Vec<f64> = samples.iter().map(|s| s.1).collect();
                Some(PhaseRow {
                    name,
                    start_p50_ms: median(&starts)?,
                    p50_ms: median(&durations)?,
                })
            })
            .collect();
        phases.sort_by(|a, b| a.start_p50_ms.total_cmp(&b.start_p50_ms));
        Some(OpPhases {
            op: op.to_owned(),
            total_p50_ms: median(&self.totals)?,
            phases,
        })
    }
}

/// Builds the static hello world in `dir`; `None` (with a note) when it
/// cannot be built.
fn static_hello(dir: &Path) -> Option<PathBuf> {
    let path = dir.join("hello-static");
    let source = dir.join("hello.c");
    let text = "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n";
    let built = std::fs::write(&source, text).is_ok()
        && std::process::Command::new("cc")
            .args(["-static", "-O2", "-o"])
            .arg(&path)
            .arg(&source)
            .status()
            .is_ok_and(|s| s.success());
    if !built {
        progress("phases: no static hello world (cc -static failed): no baseline");
    }
    built.then_some(path)
}

/// Runs the phase table: `runs` rounds of hello, VERSION, STATUS, ADD, DEL
/// on a fresh eBPF node.
pub(super) fn run(
    runs: usize,
    bins: &Bins,
    checks: &mut Vec<Check>,
) -> Result<PhaseTable, BenchError> {
    progress(&format!(
        "phases: {runs} runs of STATUS, ADD, DEL with their phases"
    ));
    let mut node = NodeNetns::start(Contender::SarenaEbpf, 0, bins)?;
    let file = node.work_dir().join("phases.jsonl");
    let hello = static_hello(node.work_dir());
    let pods = make_pods("phases", runs, 4)?;
    let (mut hellos, mut versions) = (Vec::new(), Vec::new());
    let mut samples: BTreeMap<&str, Samples> = BTreeMap::new();
    let mut errors = 0;
    for pod in &pods {
        if let Some(hello) = &hello {
            let run = node.exec_other(hello)?;
            if run.ok() {
                hellos.push(ms(run.elapsed));
            }
        }
        let run = node.version()?;
        if run.ok() {
            versions.push(ms(run.elapsed));
        }
        node.record_phases(Some(file.clone()));
        for op in OPS {
            let run = match op {
                "STATUS" => node.status()?,
                "ADD" => node.add(pod)?,
                _ => node.del(pod)?,
            };
            if run.ok() {
                samples.entry(op).or_default().add(&run, &file)?;
            } else {
                errors += 1;
            }
        }
        node.record_phases(None);
    }
    push_check(
        checks,
        errors == 0,
        format!("phases: every STATUS, ADD and DEL succeeded ({errors} failed)"),
    );
    let ops = OPS
        .iter()
        .filter_map(|op| samples.remove(op)?.into_op(op))
        .collect();
    Ok(PhaseTable {
        runs,
        hello_p50_ms: median(&hellos),
        version_p50_ms: median(&versions),
        ops,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    use std::time::Duration;

    use super::*;

    fn run(spawn_ns: u64, reaped_ns: u64) -> PluginRun {
        PluginRun {
            elapsed: Duration::from_nanos(reaped_ns - spawn_ns),
            status: ExitStatus::from_raw(0),
            stdout: String::new(),
            max_rss_kib: None,
            ip: None,
            json: None,
            spawn_ns,
            reaped_ns,
            cpu: None,
        }
    }

    #[test]
    fn a_run_is_cut_into_exec_its_phases_and_exit_on_the_harness_clock() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("phases.jsonl");
        let line = |start: u64, offset: u64| {
            serde_json::json!({
                "main_start_ns": start + 500_000,
                "phases": [{"name": "command ADD", "start_ns": start + 1_000_000 + offset,
                            "end_ns": start + 7_000_000}],
                "main_end_ns": start + 8_000_000,
            })
            .to_string()
        };
        let mut samples = Samples::default();
        for (i, offset) in [0u64, 200_000, 400_000].into_iter().enumerate() {
            let start = 1_000_000_000 * (i as u64 + 1);
            std::fs::write(&file, format!("{}\n", line(start, offset))).unwrap();
            samples.add(&run(start, start + 9_000_000), &file).unwrap();
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "", "emptied");
        }
        let op = samples.into_op("ADD").unwrap();
        assert_eq!(op.total_p50_ms, 9.0);
        let got: Vec<(&str, f64, f64)> = op
            .phases
            .iter()
            .map(|p| (p.name.as_str(), p.start_p50_ms, p.p50_ms))
            .collect();
        assert_eq!(
            got,
            [
                (EXEC_PHASE, 0.0, 0.5),
                ("command ADD", 1.2, 5.8),
                (EXIT_PHASE, 8.0, 1.0)
            ]
        );
    }
}
