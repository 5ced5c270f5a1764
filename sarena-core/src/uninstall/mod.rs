//! Removing Sarena from a node: everything it put there, and only that.
//!
//! [`uninstall`] runs the [`Step`]s in order over a [`NodeTeardown`] (the
//! real one is [`HostTeardown`]). Each step scans first and removes what it
//! finds, so every step is idempotent (missing means done) and does not
//! depend on the dataplane or routing mode the daemon ran in. Ownership
//! goes by Sarena's markers only: the link group, proto 91 in the main
//! table, Sarena's nftables table names, the maps pinned in its pin dir,
//! its paths.
//!
//! Failures do not stop the run, except:
//! - a conflist that cannot be removed stops everything (kubelet would
//!   keep sending ADDs to a plugin with no daemon);
//! - [`Step::Pins`] is skipped when [`Step::NetworkHooks`] failed or left
//!   a filter (filters left on node devices would keep programs alive with
//!   nothing to find them by);
//! - [`Step::RunDir`] and [`Step::StateDir`] are skipped when an earlier
//!   step failed or left something: a re-run needs the registry and the
//!   host-changes ledger they hold;
//! - [`Step::Sysctls`] is skipped on request
//!   ([`UninstallOptions::keep_sysctls`]).

mod files;
mod host;
mod kernel;
mod ledger_steps;
mod report;
mod step;

#[cfg(test)]
mod files_tests;
#[cfg(test)]
mod tests;

use async_trait::async_trait;

pub use host::{HostPaths, HostTeardown};
pub use report::{Counts, Line, Report, StepError, Verdict};
pub use step::Step;

/// Runs one step on a node.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait NodeTeardown: Send + Sync {
    /// Scans for what `step` covers and removes it (or, with `dry_run`,
    /// only lists it); one [`Line`] per object found, none when nothing of
    /// Sarena's is there.
    async fn run(&self, step: Step, dry_run: bool) -> Result<Vec<Line>, StepError>;
}

/// How [`uninstall`] runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UninstallOptions {
    /// List what would be removed; change nothing.
    pub dry_run: bool,
    /// Leave the sysctls as they are.
    pub keep_sysctls: bool,
}

/// Runs every [`Step`] in order on `teardown` (see the module's doc for
/// what stops or skips a step).
pub async fn uninstall(teardown: &dyn NodeTeardown, options: UninstallOptions) -> Report {
    let mut report = Report {
        dry_run: options.dry_run,
        ..Report::default()
    };
    for step in Step::ALL {
        if let Some(why) = skip_reason(step, &report, options) {
            report.lines.push((
                step,
                Line {
                    object: step.name().to_owned(),
                    verdict: Verdict::Skipped { why },
                },
            ));
            continue;
        }
        match teardown.run(step, options.dry_run).await {
            Ok(lines) => report.lines.extend(lines.into_iter().map(|l| (step, l))),
            Err(e) => {
                tracing::warn!(step = step.name(), "{}", crate::error_chain(&e));
                report.lines.push((
                    step,
                    Line {
                        object: step.name().to_owned(),
                        verdict: Verdict::Failed {
                            error: crate::error_chain(&e),
                        },
                    },
                ));
                if step == Step::Conflist {
                    report.aborted = true;
                    break;
                }
            }
        }
    }
    report
}

/// Why `step` does not run, given what the earlier steps reported.
fn skip_reason(step: Step, report: &Report, options: UninstallOptions) -> Option<String> {
    match step {
        Step::Sysctls if options.keep_sysctls => Some("--keep-sysctls".to_owned()),
        Step::Pins if report.failed_or_left(Step::NetworkHooks) => Some(
            "the network hooks could not all be removed; their programs need the pins to be found"
                .to_owned(),
        ),
        Step::RunDir | Step::StateDir => {
            let blocking: Vec<&str> = Step::ALL
                .iter()
                .filter(|s| **s < step && report.failed_or_left(**s))
                .map(|s| s.name())
                .collect();
            (!blocking.is_empty())
                .then(|| format!("kept for a re-run: {} did not finish", blocking.join(", ")))
        }
        _ => None,
    }
}
