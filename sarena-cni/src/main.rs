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

use sarena_plugin::{error_chain, phases};

/// Names a file to append this run's phases to (one JSON line, see
/// [`write_phases`]); for the benchmark's phase table.
const PHASES_ENV: &str = "SARENA_CNI_PHASES";

fn main() -> ExitCode {
    let main_start_ns = phases::now_ns();
    let phases_file = std::env::var_os(PHASES_ENV);
    if phases_file.is_some() {
        phases::enable();
    }
    let mut stdin = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(run::MAX_STDIN as u64 + 1)
        .read_to_end(&mut stdin);
    phases::record("read stdin", main_start_ns);
    let (out, code) = match read {
        Ok(_) => std::panic::catch_unwind(|| {
            run::run(|k| std::env::var(k).ok(), &stdin, backends::connect)
        })
        .unwrap_or_else(|_| run::internal_error("sarena-cni panicked; see the log")),
        Err(e) => run::io_error(&format!("cannot read stdin: {}", error_chain(&e))),
    };
    let writing = phases::start(|| "write stdout");
    let mut stdout = std::io::stdout().lock();
    // One write of the whole answer, so a runtime never sees a partial result.
    let written = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    drop(writing);
    if let Some(path) = phases_file {
        write_phases(path.as_ref(), main_start_ns);
    }
    if written.is_err() || code != 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Appends this run's phases to `path` as one JSON line:
/// `{"main_start_ns": …, "main_end_ns": …, "phases": [{"name", "start_ns",
/// "end_ns"}, …]}` (`CLOCK_MONOTONIC`). A failure only costs the line
/// (reported on stderr): the command's answer is out already.
fn write_phases(path: &std::path::Path, main_start_ns: u64) {
    let line = serde_json::json!({
        "main_start_ns": main_start_ns,
        "phases": phases::take(),
        "main_end_ns": phases::now_ns(),
    });
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = appended {
        eprintln!(
            "{PHASES_ENV}: cannot append to {}: {}",
            path.display(),
            error_chain(&e)
        );
    }
}
