//! Fault injection for the upgrade tests: the named points of an upgrade
//! (see `upgrade.rs`) where a daemon under test SIGKILLs itself.
//!
//! Only builds with the `fault-injection` feature have it: there,
//! [`KILL_AT_ENV`]`=<point>` makes the process kill itself when it reaches
//! that point. Without the feature (every default and release build) nothing
//! reads the variable and [`KillAt::kill_if`] is an empty inline function:
//! the kill points compile to nothing. e2e/test-upgrade.sh builds a daemon
//! with the feature for its kills mid-migration.
//!
//! Points: `loaded` (end of open), `first-swap` (right after reconcile
//! replaced the first endpoint's programs), `swapped` (after it replaced the
//! last one), `retired` (the old pins removed, the mark not yet written).

/// The environment variable that, in a build with the `fault-injection`
/// feature, makes the daemon SIGKILL itself at a named point of an upgrade:
/// `loaded`, `first-swap`, `swapped` or `retired` (tests only; see
/// docs/upgrade.md). Default and release builds never read it.
pub const KILL_AT_ENV: &str = "SARENA_TEST_KILL_AT";

/// Where a daemon under test kills itself (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KillPoint {
    /// End of open: new maps created, nothing attached, old pins untouched.
    Loaded,
    /// Reconcile replaced the first endpoint's programs.
    FirstSwap,
    /// Reconcile replaced the last endpoint's programs; old pins still there.
    Swapped,
    /// The old pins are removed; the mark is not written yet.
    Retired,
}

/// The point this process is to die at, read once from [`KILL_AT_ENV`] when
/// the dataplane opens; holds nothing without the `fault-injection` feature.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct KillAt {
    #[cfg(feature = "fault-injection")]
    point: Option<KillPoint>,
}

#[cfg(feature = "fault-injection")]
impl KillAt {
    /// Reads [`KILL_AT_ENV`]; an unknown point is logged and ignored.
    pub(super) fn from_env() -> Self {
        let point = std::env::var(KILL_AT_ENV).ok().and_then(|text| {
            let point = KillPoint::parse(&text);
            if point.is_none() {
                tracing::warn!(value = %text, "{KILL_AT_ENV}: unknown point, ignored");
            }
            point
        });
        KillAt { point }
    }

    /// Kills the process if `point` is the one [`KILL_AT_ENV`] names.
    pub(super) fn kill_if(&self, point: KillPoint) {
        if self.point == Some(point) {
            tracing::warn!(
                ?point,
                "{KILL_AT_ENV}: killing the daemon (fault injection)"
            );
            // SAFETY: kill(2) on our own pid; no memory is involved.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
impl KillAt {
    /// Nothing to read: this build has no fault injection.
    pub(super) fn from_env() -> Self {
        KillAt {}
    }

    /// Nothing: this build has no fault injection.
    #[inline(always)]
    pub(super) fn kill_if(&self, _point: KillPoint) {}
}

#[cfg(feature = "fault-injection")]
impl KillPoint {
    fn parse(text: &str) -> Option<KillPoint> {
        match text {
            "loaded" => Some(KillPoint::Loaded),
            "first-swap" => Some(KillPoint::FirstSwap),
            "swapped" => Some(KillPoint::Swapped),
            "retired" => Some(KillPoint::Retired),
            _ => None,
        }
    }
}
