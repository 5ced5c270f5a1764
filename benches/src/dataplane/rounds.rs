//! Setting up all paths and measuring them in interleaved rounds.

use std::time::Duration;

use sarena_common::EndpointCounters;

use super::iperf::{self, IperfRun};
use super::paths::{self, PreparedPath};
use super::prog_stats::{self, NodePrograms, ProgramRuns};
use super::results::{PathKind, PathSample, round_order};
use super::rr::{self, RrRun};
use super::{DataplaneOptions, ebpf_check};
use crate::BenchError;
use crate::node::Bins;

/// Sets up every path of `opts`; the ones that fail are returned with why.
pub fn prepare_all(
    opts: &DataplaneOptions,
    bins: Option<&Bins>,
) -> (Vec<PreparedPath>, Vec<(PathKind, String)>) {
    let mut prepared = Vec::new();
    let mut skipped = Vec::new();
    let mut node_index = opts.first_node_index;
    for &kind in &opts.paths {
        let index = node_index;
        if !kind.is_raw() {
            node_index += 1;
        }
        match paths::prepare(kind, index, bins) {
            Ok(p) => prepared.push(p),
            Err(e) => {
                eprintln!(
                    "sarena-bench: dataplane: {} not set up: {}",
                    kind.label(),
                    sarena_core::error_chain(&e)
                );
                skipped.push((kind, sarena_core::error_chain(&e)));
            }
        }
    }
    (prepared, skipped)
}

/// The eBPF programs' counters of `path`'s node (`None` without a pin dir).
pub fn ebpf_counters(path: &PreparedPath) -> Option<Result<EndpointCounters, BenchError>> {
    path.pin_dir().map(ebpf_check::read_totals)
}

/// The programs of every prepared eBPF path (direct, Service and
/// embedded), by index;
/// programs that cannot be found are returned as errors for the report.
pub fn ebpf_programs(prepared: &[PreparedPath]) -> (Vec<Option<NodePrograms>>, Vec<String>) {
    let mut errors = Vec::new();
    let programs = prepared
        .iter()
        .map(|p| {
            let dir = p.pin_dir()?;
            if !p.kind.is_ebpf() {
                return None;
            }
            NodePrograms::find(dir)
                .map_err(|e| {
                    errors.push(format!(
                        "{} programs: {}",
                        p.kind.label(),
                        sarena_core::error_chain(&e)
                    ))
                })
                .ok()
        })
        .collect();
    (programs, errors)
}

/// What the rounds gave, by index into the prepared paths.
#[derive(Debug)]
pub struct Measured {
    /// Each path's samples.
    pub samples: Vec<Vec<PathSample>>,
    /// Why a path stopped being measured.
    pub failed: Vec<Option<String>>,
    /// Why a path's programs stopped being measured.
    pub stats_failed: Vec<Option<String>>,
}

fn measure_once(
    path: &PreparedPath,
    opts: &DataplaneOptions,
) -> Result<(IperfRun, RrRun), BenchError> {
    let e = &path.endpoints;
    let iperf = iperf::measure(e, Duration::from_secs(opts.iperf_seconds), opts.pinning)?;
    let rr = rr::measure(e, Duration::from_secs(opts.rr_seconds), opts.pinning)?;
    Ok((iperf, rr))
}

/// One more request/response run of `path`, with the programs' statistics on.
fn measure_programs(
    path: &PreparedPath,
    opts: &DataplaneOptions,
    programs: &NodePrograms,
) -> Result<ProgramRuns, BenchError> {
    prog_stats::measure(programs, || {
        let secs = Duration::from_secs(opts.rr_seconds);
        rr::measure(&path.endpoints, secs, opts.pinning).map(|r| r.transactions)
    })
}

/// Measures every path once per round, in [`round_order`]; a path that
/// fails is left out of the later rounds. The paths with `programs` get an
/// extra request/response run with the programs' statistics on.
pub fn measure(
    prepared: &[PreparedPath],
    opts: &DataplaneOptions,
    programs: &[Option<NodePrograms>],
) -> Measured {
    let mut samples: Vec<Vec<PathSample>> = vec![Vec::new(); prepared.len()];
    let mut failed: Vec<Option<String>> = vec![None; prepared.len()];
    let mut stats_failed: Vec<Option<String>> = vec![None; prepared.len()];
    for round in 1..=opts.rounds {
        for (position, i) in round_order(prepared.len(), round).into_iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            let path = &prepared[i];
            match measure_once(path, opts) {
                Ok((iperf, rr)) => {
                    let nodes = programs.get(i).and_then(Option::as_ref);
                    let runs = match nodes.filter(|_| stats_failed[i].is_none()) {
                        Some(p) => match measure_programs(path, opts, p) {
                            Ok(runs) => Some(runs),
                            Err(e) => {
                                let label = path.kind.label();
                                eprintln!(
                                    "sarena-bench: dataplane: {label} programs: {}",
                                    sarena_core::error_chain(&e)
                                );
                                stats_failed[i] = Some(format!(
                                    "{label}: program statistics failed in round {round}: {}",
                                    sarena_core::error_chain(&e)
                                ));
                                None
                            }
                        },
                        None => None,
                    };
                    eprintln!(
                        "sarena-bench: dataplane round {round}/{}: {}: {:.2} Gbit/s, {:.0} req/s",
                        opts.rounds,
                        path.kind.label(),
                        iperf.gbits_per_second(),
                        rr.per_second
                    );
                    samples[i].push(PathSample {
                        round,
                        position: position as u32,
                        iperf,
                        rr,
                        programs: runs,
                    });
                }
                Err(e) => {
                    eprintln!(
                        "sarena-bench: dataplane: {} failed: {}",
                        path.kind.label(),
                        sarena_core::error_chain(&e)
                    );
                    failed[i] = Some(format!(
                        "failed in round {round}: {}",
                        sarena_core::error_chain(&e)
                    ));
                }
            }
        }
    }
    Measured {
        samples,
        failed,
        stats_failed,
    }
}
