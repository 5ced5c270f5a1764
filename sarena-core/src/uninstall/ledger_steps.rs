//! The dataplane steps: the node devices' network hooks, the host stack,
//! the `clsact`s Sarena added, the pins and the sysctls, through the
//! dataplane's teardown functions and the host-changes ledger.
//!
//! NOT WIRED YET: these steps wait for the dataplane teardown functions
//! (`dataplane::ebpf::teardown`, `dataplane::kernel::teardown`,
//! `host_ledger`); until then each fails, so the run and state dirs stay
//! for a re-run.

use super::{HostPaths, Line, Step, StepError};

/// Runs one of the dataplane steps.
pub(super) async fn run(
    step: Step,
    _paths: &HostPaths,
    _dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    Err(StepError::call("the dataplane teardown")(
        format!("step {step} is not wired to the dataplane teardown yet").into(),
    ))
}
