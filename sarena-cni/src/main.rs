//! `sarena-cni`: the CNI plugin binary, a thin adapter over `sarena_plugin`.
//!
//! Reads the `CNI_*` environment and the network config on stdin, runs the
//! command through [`sarena_plugin::plugin::dispatch`], prints the result or the
//! error JSON on stdout in one write, and exits 0 or 1.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod backends;
mod log_file;
mod logging;
mod run;

use std::io::{Read, Write};
use std::process::ExitCode;

use sarena_plugin::error_chain;

fn main() -> ExitCode {
    let mut stdin = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(run::MAX_STDIN as u64 + 1)
        .read_to_end(&mut stdin);
    let (out, code) = match read {
        Ok(_) => std::panic::catch_unwind(|| {
            run::run(|k| std::env::var(k).ok(), &stdin, backends::connect)
        })
        .unwrap_or_else(|_| run::internal_error("sarena-cni panicked; see the log")),
        Err(e) => run::io_error(&format!("cannot read stdin: {}", error_chain(&e))),
    };
    let mut stdout = std::io::stdout().lock();
    // One write of the whole answer, so a runtime never sees a partial result.
    let written = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    if written.is_err() || code != 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
