//! Where one plugin run spends its time: named phases (start and end on
//! `CLOCK_MONOTONIC`), recorded only once [`enable`] was called — by
//! `sarena-cni` when `SARENA_CNI_PHASES` names a file, for the benchmark's
//! phase table (docs/benchmarks.md). Disabled, a phase costs one atomic load.
//!
//! The clock is the kernel's monotonic one, shared by every process of the
//! machine, so a harness that reads it before the exec and after the exit
//! can place the plugin's phases between the two (the exec and dynamic
//! loading before the first phase, the exit after the last).

use std::borrow::Cow;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

/// One phase of a run: what, and when it started and ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// What ran (`runtime start`, `daemon POST /v1/allocations`,
    /// `netlink create_veth`, …).
    pub name: Cow<'static, str>,
    /// `CLOCK_MONOTONIC` at the start, in nanoseconds.
    pub start_ns: u64,
    /// `CLOCK_MONOTONIC` at the end, in nanoseconds.
    pub end_ns: u64,
}

/// The phases recorded so far; unset: recording is off.
static RECORDED: OnceLock<Mutex<Vec<Phase>>> = OnceLock::new();

/// Turns recording on for the rest of the process.
pub fn enable() {
    let _ = RECORDED.set(Mutex::new(Vec::new()));
}

/// Whether recording is on.
pub fn enabled() -> bool {
    RECORDED.get().is_some()
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (0 if the clock cannot be read,
/// which Linux never refuses).
pub fn now_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
                + u64::try_from(t.tv_nsec()).unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Records the phase `name` from `start_ns` until now (when recording).
pub fn record(name: impl Into<Cow<'static, str>>, start_ns: u64) {
    if let Some(recorded) = RECORDED.get() {
        let phase = Phase {
            name: name.into(),
            start_ns,
            end_ns: now_ns(),
        };
        recorded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(phase);
    }
}

/// A phase that ends when the guard is dropped.
#[must_use = "the phase ends when the guard is dropped"]
#[derive(Debug)]
pub struct PhaseGuard {
    /// The phase's name and start; `None` when not recording.
    started: Option<(Cow<'static, str>, u64)>,
}

/// Starts the phase `name` (a no-op unless recording; `name` is only built
/// then).
pub fn start<N: Into<Cow<'static, str>>>(name: impl FnOnce() -> N) -> PhaseGuard {
    PhaseGuard {
        started: enabled().then(|| (name().into(), now_ns())),
    }
}

impl Drop for PhaseGuard {
    fn drop(&mut self) {
        if let Some((name, start_ns)) = self.started.take() {
            record(name, start_ns);
        }
    }
}

/// Every phase recorded so far, in the order they ended; recording goes on.
pub fn take() -> Vec<Phase> {
    RECORDED
        .get()
        .map(|recorded| {
            std::mem::take(
                &mut *recorded
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_recorded_once_enabled_with_their_times_in_order() {
        // Off: nothing is recorded, and the name is never built.
        drop(start(|| -> &'static str { panic!("name built while off") }));
        record("off", now_ns());
        assert!(take().is_empty());

        enable();
        let before = now_ns();
        {
            let _outer = start(|| "outer");
            drop(start(|| format!("inner {}", 1)));
        }
        // Other tests of this process may record phases meanwhile.
        let ours = |p: &Phase| p.name == "outer" || p.name == "inner 1";
        let phases: Vec<Phase> = take().into_iter().filter(ours).collect();
        let names: Vec<&str> = phases.iter().map(|p| p.name.as_ref()).collect();
        assert_eq!(names, ["inner 1", "outer"]);
        for p in &phases {
            assert!(before <= p.start_ns && p.start_ns <= p.end_ns, "{p:?}");
        }
        assert!(phases[1].start_ns <= phases[0].start_ns);
        assert!(phases[0].end_ns <= phases[1].end_ns);
        assert!(!take().iter().any(ours), "taken");
    }
}
