//! Scale: a whole cluster fed to a fresh engine, then its first compile,
//! timed; the memory it took (`/proc/self/status`) and the size of what it
//! compiled, in map entries. Run in a child process of its own
//! ([`in_child`]) so that the memory figures are the engine's, not the
//! harness's leftovers.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use sarena_core::policy::{CompiledPolicy, PolicyEngine};
use serde::{Deserialize, Serialize};

use super::cluster::{Cluster, ClusterSpec, LOCAL_NODE};
use crate::BenchError;
use crate::stats::ms;

/// The first identity the daemon's engine allocates.
const FIRST_IDENTITY: u32 = 256;

/// `/proc/self/status` at the steps of the scale run, KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// VmRSS with the engine made but told nothing.
    pub rss_before_kib: u64,
    /// VmRSS after every event (objects held, nothing compiled).
    pub rss_fed_kib: u64,
    /// VmRSS after the first compile, its result held.
    pub rss_compiled_kib: u64,
    /// VmRSS after a second compile made while the first is held (the
    /// daemon keeps its last state while it compiles the next).
    pub rss_recompiled_kib: u64,
    /// VmHWM (peak) at the end.
    pub hwm_kib: u64,
    /// VmHWM was reset to VmRSS before the feeding (`/proc/self/clear_refs`),
    /// so it is the peak of the feeding and compiles alone.
    pub hwm_reset: bool,
}

impl Memory {
    /// The engine's peak share: VmHWM − VmRSS before the feeding, KiB.
    pub fn engine_peak_kib(&self) -> u64 {
        self.hwm_kib.saturating_sub(self.rss_before_kib)
    }

    /// What the engine holds between compiles (its objects and one
    /// compiled state): VmRSS after the first compile − before, KiB.
    pub fn engine_held_kib(&self) -> u64 {
        self.rss_compiled_kib.saturating_sub(self.rss_before_kib)
    }
}

/// The size of a compiled state, in what the dataplane holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizes {
    /// `SARENA_IPCACHE` entries (pods of every node, Services, policy
    /// prefixes, this node's addresses).
    pub ipcache_entries: usize,
    /// `SARENA_POLICY` entries: every allow entry of every local endpoint.
    pub policy_entries: usize,
    /// The local endpoints.
    pub endpoints: usize,
    /// Local endpoints isolated for ingress.
    pub ingress_isolated: usize,
    /// Local endpoints isolated for egress.
    pub egress_isolated: usize,
    /// The most allow entries of one endpoint.
    pub max_endpoint_entries: usize,
    /// Allocated identities (pod address sets and policy prefixes).
    pub identities: usize,
    /// Rules the entries name.
    pub rules: usize,
}

impl Sizes {
    /// The sizes of `c`.
    pub fn of(c: &CompiledPolicy) -> Sizes {
        let count = |f: fn(&sarena_core::policy::EndpointPolicy) -> bool| {
            c.endpoints.values().filter(|e| f(e)).count()
        };
        Sizes {
            ipcache_entries: c.ipcache.len(),
            policy_entries: c.endpoints.values().map(|e| e.entries.len()).sum(),
            endpoints: c.endpoints.len(),
            ingress_isolated: count(|e| e.ingress_isolated),
            egress_isolated: count(|e| e.egress_isolated),
            max_endpoint_entries: (c.endpoints.values())
                .map(|e| e.entries.len())
                .max()
                .unwrap_or(0),
            identities: c.identities.len(),
            rules: c.rules.len(),
        }
    }
}

/// The scale run's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleResult {
    /// The cluster.
    pub spec: ClusterSpec,
    /// How it was measured (a child process, or in the harness's own).
    pub measured_in: String,
    /// Events told to the engine.
    pub events: usize,
    /// Time to tell the engine every event, ms.
    pub feed_ms: f64,
    /// The first full compile, ms.
    pub first_compile_ms: f64,
    /// A second compile, nothing changed (identities and rule numbers
    /// known), ms.
    pub second_compile_ms: f64,
    /// Memory.
    pub memory: Memory,
    /// What the compile gave.
    pub sizes: Sizes,
}

/// VmRSS and VmHWM of this process, KiB.
fn status() -> Result<(u64, u64), BenchError> {
    let s = procfs::process::Process::myself()
        .and_then(|p| p.status())
        .map_err(|source| BenchError::Proc {
            what: "/proc/self/status",
            source,
        })?;
    Ok((s.vmrss.unwrap_or(0), s.vmhwm.unwrap_or(0)))
}

/// Resets VmHWM to VmRSS (Linux ≥ 4.0); whether it did.
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Measures in this process: memory figures are deltas from an engine told
/// nothing yet, so run it in a fresh process ([`in_child`]) for figures
/// that hold no earlier allocations.
pub fn measure(spec: ClusterSpec, measured_in: &str) -> Result<ScaleResult, BenchError> {
    let cluster = Cluster::new(spec)?;
    let mut engine = PolicyEngine::new(LOCAL_NODE, FIRST_IDENTITY);
    let (rss_before_kib, _) = status()?;
    let hwm_reset = reset_hwm();
    let started = Instant::now();
    let mut events = 0;
    for event in cluster.events() {
        engine.handle(event);
        events += 1;
    }
    let feed_ms = ms(started.elapsed());
    if !engine.synced() {
        return Err(BenchError::Verify {
            what: "the policy engine is not synced after every list".into(),
        });
    }
    let (rss_fed_kib, _) = status()?;
    let started = Instant::now();
    let first = engine.compile();
    let first_compile_ms = ms(started.elapsed());
    let (rss_compiled_kib, _) = status()?;
    let started = Instant::now();
    let second = engine.compile();
    let second_compile_ms = ms(started.elapsed());
    let (rss_recompiled_kib, hwm_kib) = status()?;
    if second != first {
        return Err(BenchError::Verify {
            what: "two compiles of the same objects differ".into(),
        });
    }
    Ok(ScaleResult {
        spec,
        measured_in: measured_in.into(),
        events,
        feed_ms,
        first_compile_ms,
        second_compile_ms,
        memory: Memory {
            rss_before_kib,
            rss_fed_kib,
            rss_compiled_kib,
            rss_recompiled_kib,
            hwm_kib,
            hwm_reset,
        },
        sizes: Sizes::of(&first),
    })
}

/// The hidden subcommand of `exe` that runs [`measure`] and prints its
/// result as JSON.
pub const CHILD_COMMAND: &str = "policy-scale-child";

/// Runs [`measure`] in a fresh process: `exe CHILD_COMMAND --spec JSON`.
pub fn in_child(exe: &Path, spec: ClusterSpec) -> Result<ScaleResult, BenchError> {
    let json = serde_json::to_string(&spec).map_err(|source| BenchError::Json {
        what: "policy scale spec".into(),
        source,
    })?;
    let out = Command::new(exe)
        .args([CHILD_COMMAND, "--spec", &json])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| BenchError::io("spawn", exe, e))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command: format!("{} {CHILD_COMMAND}", exe.display()),
            status: out.status.to_string(),
            stderr: "(inherited, above)".into(),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|source| BenchError::Json {
        what: format!("output of {CHILD_COMMAND}"),
        source,
    })
}
