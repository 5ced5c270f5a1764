//! Issue 26, point 7 (the engine's part): the NetworkPolicy engine
//! (`sarena_core::policy::PolicyEngine`) in process, on a synthetic cluster
//! ([`Cluster`]):
//!
//! - **scale**: 10,000 pods on 100 nodes (100 on this one), 200
//!   namespaces, 1,000 policies: the first full compile, the memory the
//!   engine takes (in a child process of its own), and the map entries its
//!   output needs against the maps' capacities;
//! - **change latency**: 1,000 pods on 10 nodes, 200 policies: one change
//!   at a time (policy created / deleted, pod relabelled, created,
//!   deleted), `handle` → end of `compile`.
//!
//! What it leaves out, and the page says so: the daemon's watch caches and
//! the rest of its memory, its 20 ms debounce before a compile, and the
//! map (or nftables) writes after it.

mod change;
mod cluster;
mod mix;
pub mod real_cluster;
mod scale;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::BenchError;
use crate::cni_ops::progress;

pub use change::{ChangeResults, ChangeRow, OPS};
pub use cluster::{Cluster, ClusterSpec, LOCAL_NODE, SEED};
pub use mix::MIX;
pub use real_cluster::RealCluster;
pub use scale::{CHILD_COMMAND, Memory, ScaleResult, Sizes, in_child, measure as measure_scale};

/// Target (issue 26): policy created → enforced, p50, ms.
pub const CHANGE_P50_TARGET_MS: f64 = 100.0;
/// Target (issue 26): policy created → enforced, p99, ms.
pub const CHANGE_P99_TARGET_MS: f64 = 500.0;
/// Target (issue 26): the daemon's RSS at the scale point, MiB.
pub const RSS_TARGET_MIB: f64 = 100.0;
/// The daemon's wait for more events before it compiles (`DEBOUNCE` in
/// `sarena-daemon/src/kubernetes/policy.rs`), ms.
pub const DEBOUNCE_MS: f64 = 20.0;
/// `SARENA_IPCACHE`'s capacity.
pub const IPCACHE_CAPACITY: u32 = sarena_common::policy::MAX_IPCACHE_ENTRIES;
/// `SARENA_POLICY`'s capacity.
pub const POLICY_CAPACITY: u32 = sarena_common::policy::MAX_POLICY_ENTRIES;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyOptions {
    /// The scale point.
    pub scale: ClusterSpec,
    /// The change point.
    pub change: ClusterSpec,
    /// Rounds of changes (each op of [`OPS`] once per round).
    pub rounds: usize,
}

impl PolicyOptions {
    /// The numbers: [`ClusterSpec::scale`], [`ClusterSpec::change`], 200 rounds.
    pub fn full() -> PolicyOptions {
        PolicyOptions {
            scale: ClusterSpec::scale(),
            change: ClusterSpec::change(),
            rounds: 200,
        }
    }

    /// A smoke run: small clusters, 10 rounds.
    pub fn quick() -> PolicyOptions {
        PolicyOptions {
            scale: ClusterSpec::quick_scale(),
            change: ClusterSpec::quick_change(),
            rounds: 10,
        }
    }
}

/// The policy part's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyResults {
    /// What was run.
    pub options: PolicyOptions,
    /// The scale point.
    pub scale: ScaleResult,
    /// The change point.
    pub change: ChangeResults,
}

impl PolicyResults {
    /// The engine's peak memory at the scale point, MiB.
    pub fn engine_peak_mib(&self) -> f64 {
        self.scale.memory.engine_peak_kib() as f64 / 1024.0
    }

    /// Whether the policy-created latency plus the debounce meets both
    /// targets (`None`: not measured).
    pub fn change_target_met(&self) -> Option<bool> {
        let s = self.change.row(OPS[0])?.summary?;
        Some(
            s.p50 + DEBOUNCE_MS <= CHANGE_P50_TARGET_MS
                && s.p99 + DEBOUNCE_MS <= CHANGE_P99_TARGET_MS,
        )
    }

    /// Whether the engine's peak at the scale point is within the RSS target.
    pub fn memory_target_met(&self) -> bool {
        self.engine_peak_mib() <= RSS_TARGET_MIB
    }

    /// Whether the compiled state fits both maps.
    pub fn fits_maps(&self) -> bool {
        let s = &self.scale.sizes;
        s.ipcache_entries <= IPCACHE_CAPACITY as usize
            && s.policy_entries <= POLICY_CAPACITY as usize
    }
}

/// Runs both points: scale in a child process (`exe`, the harness itself,
/// see [`CHILD_COMMAND`]), changes in this one.
pub fn run(opts: &PolicyOptions, exe: &Path) -> Result<PolicyResults, BenchError> {
    if opts.rounds == 0 || opts.rounds > 60_000 {
        return Err(BenchError::Input {
            what: format!("policy change rounds {} (1–60,000)", opts.rounds),
        });
    }
    opts.change.validate()?;
    let s = opts.scale;
    progress(&format!(
        "policy: scale, {} pods on {} nodes, {} namespaces, {} policies (child process)",
        s.pods, s.nodes, s.namespaces, s.policies
    ));
    let scale = in_child(exe, s)?;
    let c = opts.change;
    progress(&format!(
        "policy: change latency, {} pods on {} nodes, {} policies, {} rounds",
        c.pods, c.nodes, c.policies, opts.rounds
    ));
    let change = change::measure(c, opts.rounds)?;
    Ok(PolicyResults {
        options: *opts,
        scale,
        change,
    })
}

/// The change point alone, in this process (for tests and embedders).
pub fn measure_changes(spec: ClusterSpec, rounds: usize) -> Result<ChangeResults, BenchError> {
    change::measure(spec, rounds)
}

#[cfg(test)]
mod tests;
