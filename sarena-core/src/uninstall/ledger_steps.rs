//! The dataplane steps: the node devices' network hooks, the host stack,
//! the `clsact`s Sarena added, the pins and the sysctls, through the
//! dataplane's teardown functions ([`crate::dataplane::ebpf::teardown`],
//! [`crate::dataplane::kernel::teardown`]) and the host-changes ledger in
//! the socket's directory ([`crate::host_ledger`]). Their text lines
//! become [`Line`]s by their verb ([`Line::from_text`]).

use super::{HostPaths, Line, Step, StepError};
use crate::dataplane::ebpf::teardown as ebpf;
use crate::dataplane::kernel::teardown as kernel;
use crate::host_ledger::{self, HostLedger, Ledger};

fn boxed<E: std::error::Error + Send + Sync + 'static>(
    call: &'static str,
) -> impl FnOnce(E) -> StepError {
    move |e| StepError::call(call)(Box::new(e))
}

/// The host-changes ledger the daemon kept next to its socket (empty when
/// there is none, or it is of another boot).
fn ledger(paths: &HostPaths) -> Result<Ledger, StepError> {
    HostLedger::in_dir(paths.socket_dir())
        .read()
        .map_err(boxed("read the host-changes ledger"))
}

/// Runs one of the dataplane steps.
pub(super) async fn run(
    step: Step,
    paths: &HostPaths,
    dry_run: bool,
) -> Result<Vec<Line>, StepError> {
    let texts = match step {
        Step::NetworkHooks => ebpf::remove_network_hooks(&paths.pin_dir, dry_run)
            .await
            .map_err(boxed("remove the network hooks"))?,
        Step::HostStack => kernel::remove_host_stack(dry_run)
            .await
            .map_err(boxed("remove the host stack"))?,
        Step::Clsact => ebpf::remove_added_clsacts(&ledger(paths)?, dry_run)
            .await
            .map_err(boxed("remove the added clsacts"))?,
        Step::Pins => {
            let pin_dir = paths.pin_dir.clone();
            crate::blocking::off_worker(move || ebpf::remove_pins(&pin_dir, dry_run))
                .await
                .map_err(boxed("remove the pins"))?
                .map_err(boxed("remove the pins"))?
        }
        Step::Sysctls => {
            let ledger = ledger(paths)?;
            crate::blocking::off_worker(move || host_ledger::restore_sysctls(&ledger, dry_run))
                .await
                .map_err(boxed("restore the sysctls"))?
                .map_err(boxed("restore the sysctls"))?
        }
        _ => Vec::new(),
    };
    Ok(texts
        .iter()
        .map(|text| Line::from_text(text, dry_run))
        .collect())
}
