//! The eBPF programs' own cost per run (issue 16 item 4: what the
//! anti-spoofing check, the flow lookup and the rest of `from_container` and
//! `to_container` cost per packet), from the kernel's run-time statistics:
//! `run_time_ns` and `run_cnt` of each program's info.
//!
//! A node's programs are the `from_container` and `to_container` programs
//! (and, across nodes, `from_network` and `to_network`) that use its pinned
//! counters maps (found by map id, so other daemons' programs on the
//! machine never count). The statistics are switched on with
//! `BPF_ENABLE_STATS` (aya's [`enable_stats`]) only around an extra
//! request/response run per round, never during the timed runs whose rates
//! are compared (they add two clock reads to every program run, eBPF paths
//! only). The kernel counts while such a file descriptor is open and stops
//! when it closes, so the switch is undone however the harness ends, even
//! killed; the `kernel.bpf_stats_enabled` sysctl, a separate reference on
//! the same switch, is left as it was (recorded before and after the run).

use std::collections::BTreeMap;
use std::path::Path;

use aya::maps::MapData;
use aya::programs::loaded_programs;
use aya::sys::{Stats, enable_stats};
use sarena_common::peers::NODE_COUNTERS_MAP;
use sarena_common::{COUNTERS_MAP, FROM_CONTAINER_PROG, TO_CONTAINER_PROG};
use serde::{Deserialize, Serialize};

use crate::BenchError;

/// The sysctl that also turns the statistics on.
pub const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Run time and runs of a program (totals, or a difference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunDelta {
    /// Nanoseconds spent in the program.
    pub run_time_ns: u64,
    /// Times it ran.
    pub runs: u64,
}

impl RunDelta {
    /// Nanoseconds per run (`None` when it did not run).
    pub fn ns_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }

    /// Adds `other`'s time and runs.
    pub fn add(&mut self, other: RunDelta) {
        self.run_time_ns += other.run_time_ns;
        self.runs += other.runs;
    }

    fn since(self, before: RunDelta) -> RunDelta {
        RunDelta {
            run_time_ns: self.run_time_ns.saturating_sub(before.run_time_ns),
            runs: self.runs.saturating_sub(before.runs),
        }
    }
}

/// The programs' runs over one request/response run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ProgramRuns {
    /// `from_container` (ingress of the host veths: every frame a pod sends).
    pub from_container: RunDelta,
    /// `to_container` (egress of the host veths: frames the host stack sends
    /// into a pod; redirected frames skip it).
    pub to_container: RunDelta,
    /// Round trips of the timed window of that run (the runs also include
    /// its connection set-up and warm-up).
    pub transactions: u64,
}

impl ProgramRuns {
    /// Adds `other`'s runs and round trips (totals over several runs).
    pub fn add(&mut self, other: ProgramRuns) {
        self.from_container.add(other.from_container);
        self.to_container.add(other.to_container);
        self.transactions += other.transactions;
    }

    /// Runs of `d` per round trip.
    pub fn per_transaction(&self, d: RunDelta) -> Option<f64> {
        (self.transactions > 0).then(|| d.runs as f64 / self.transactions as f64)
    }
}

/// The kernel ids of some of one node's programs, by program name: the
/// programs of those names that use one of the node's pinned maps (its
/// pods' counters, its host-routing counters), so other nodes' programs on
/// the machine never count.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamedPrograms {
    ids: BTreeMap<&'static str, Vec<u32>>,
}

/// The maps under a pin dir that mark a program as the node's.
const NODE_MAPS: [&str; 2] = [COUNTERS_MAP, NODE_COUNTERS_MAP];

impl NamedPrograms {
    /// The programs named `names` of the node pinned under `pin_dir`;
    /// every name must have at least one.
    pub fn find(pin_dir: &Path, names: &[&'static str]) -> Result<NamedPrograms, BenchError> {
        let mut map_ids = Vec::new();
        for map in NODE_MAPS {
            let path = pin_dir.join("maps").join(map);
            if map == COUNTERS_MAP || path.exists() {
                let id = MapData::from_pin(&path)
                    .and_then(|m| m.info())
                    .map_err(|source| BenchError::Counters {
                        path: path.clone(),
                        source,
                    })?
                    .id();
                map_ids.push(id);
            }
        }
        let mut ids: BTreeMap<&'static str, Vec<u32>> =
            names.iter().map(|n| (*n, Vec::new())).collect();
        // Programs of other nodes come and go meanwhile: those that vanish
        // between listing and reading are skipped.
        for info in loaded_programs().flatten() {
            let Some(list) = info.name_as_str().and_then(|n| ids.get_mut(n)) else {
                continue;
            };
            if let Ok(Some(maps)) = info.map_ids()
                && maps.iter().any(|m| map_ids.contains(m))
            {
                list.push(info.id());
            }
        }
        if let Some((name, _)) = ids.iter().find(|(_, l)| l.is_empty()) {
            return Err(BenchError::Verify {
                what: format!(
                    "no {name} program uses the maps under {} (ids {map_ids:?})",
                    pin_dir.display()
                ),
            });
        }
        Ok(NamedPrograms { ids })
    }

    /// Each name's totals now.
    pub fn totals(&self) -> Result<BTreeMap<&'static str, RunDelta>, BenchError> {
        let mut totals: BTreeMap<&'static str, RunDelta> =
            self.ids.keys().map(|n| (*n, RunDelta::default())).collect();
        let mut seen = 0;
        for info in loaded_programs().flatten() {
            let id = info.id();
            let Some(name) = self
                .ids
                .iter()
                .find(|(_, l)| l.contains(&id))
                .map(|(n, _)| *n)
            else {
                continue;
            };
            let slot = totals.entry(name).or_default();
            slot.run_time_ns += u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX);
            slot.runs += info.run_count();
            seen += 1;
        }
        if seen != self.ids.values().map(Vec::len).sum::<usize>() {
            return Err(BenchError::Verify {
                what: format!("the node's programs {self:?} are no longer all loaded"),
            });
        }
        Ok(totals)
    }
}

/// The growth of each name's totals from `before` to `after`.
pub fn since(
    after: &BTreeMap<&'static str, RunDelta>,
    before: &BTreeMap<&'static str, RunDelta>,
) -> BTreeMap<String, RunDelta> {
    after
        .iter()
        .map(|(n, a)| {
            (
                (*n).to_owned(),
                a.since(before.get(n).copied().unwrap_or_default()),
            )
        })
        .collect()
}

/// The kernel ids of one node's pod programs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodePrograms {
    programs: NamedPrograms,
}

impl NodePrograms {
    /// The `from_container` and `to_container` programs of the node pinned
    /// under `pin_dir`.
    pub fn find(pin_dir: &Path) -> Result<NodePrograms, BenchError> {
        Ok(NodePrograms {
            programs: NamedPrograms::find(pin_dir, &[FROM_CONTAINER_PROG, TO_CONTAINER_PROG])?,
        })
    }

    /// The programs' totals now (`from_container`, `to_container`).
    fn totals(&self) -> Result<(RunDelta, RunDelta), BenchError> {
        let t = self.programs.totals()?;
        let get = |n| t.get(n).copied().unwrap_or_default();
        Ok((get(FROM_CONTAINER_PROG), get(TO_CONTAINER_PROG)))
    }
}

/// Runs `f` (a request/response run that returns its round trips) with the
/// run-time statistics on and returns what `programs` did meanwhile.
pub fn measure(
    programs: &NodePrograms,
    f: impl FnOnce() -> Result<u64, BenchError>,
) -> Result<ProgramRuns, BenchError> {
    let on = enable_stats(Stats::RunTime).map_err(|source| BenchError::BpfStats { source })?;
    let before = programs.totals()?;
    let transactions = f()?;
    let after = programs.totals()?;
    drop(on);
    Ok(ProgramRuns {
        from_container: after.0.since(before.0),
        to_container: after.1.since(before.1),
        transactions,
    })
}

/// Runs `f` with the run-time statistics on and returns what each of
/// `nodes`' programs did meanwhile, and `f`'s result.
pub fn measure_nodes<T>(
    nodes: &[&NamedPrograms],
    f: impl FnOnce() -> Result<T, BenchError>,
) -> Result<(Vec<BTreeMap<String, RunDelta>>, T), BenchError> {
    let on = enable_stats(Stats::RunTime).map_err(|source| BenchError::BpfStats { source })?;
    let before = nodes
        .iter()
        .map(|n| n.totals())
        .collect::<Result<Vec<_>, _>>()?;
    let out = f()?;
    let after = nodes
        .iter()
        .map(|n| n.totals())
        .collect::<Result<Vec<_>, _>>()?;
    drop(on);
    let runs = after
        .iter()
        .zip(&before)
        .map(|(a, b)| since(a, b))
        .collect();
    Ok((runs, out))
}

/// Whether the `kernel.bpf_stats_enabled` sysctl is on (`None`: unreadable).
pub fn sysctl_enabled() -> Option<bool> {
    let text = std::fs::read_to_string(STATS_SYSCTL).ok()?;
    Some(text.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_run_and_per_round_trip() {
        let runs = ProgramRuns {
            from_container: RunDelta {
                run_time_ns: 2_000_000,
                runs: 10_000,
            },
            to_container: RunDelta::default(),
            transactions: 5_000,
        };
        assert_eq!(runs.from_container.ns_per_run(), Some(200.0));
        assert_eq!(runs.to_container.ns_per_run(), None);
        assert_eq!(runs.per_transaction(runs.from_container), Some(2.0));
        let later = RunDelta {
            run_time_ns: 2_500_000,
            runs: 12_000,
        };
        assert_eq!(
            later.since(runs.from_container),
            RunDelta {
                run_time_ns: 500_000,
                runs: 2_000
            }
        );
        assert_eq!(RunDelta::default().since(later), RunDelta::default());
    }

    #[test]
    fn a_pin_dir_without_the_counters_map_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = NodePrograms::find(dir.path()).unwrap_err();
        assert!(e.to_string().contains(COUNTERS_MAP), "{e}");
    }
}
