//! Running nftables scripts: `nft -f -`, one atomic transaction per script.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::dataplane::DataplaneError;

/// The command line every script is fed to.
const COMMAND: &str = "nft -f -";

/// Feeds `script` to `nft -f -` and waits for it (blocking). Either the whole
/// script takes effect or none of it does.
pub(crate) fn run(script: &str) -> Result<(), DataplaneError> {
    let spawn_error = |source| DataplaneError::Spawn {
        command: COMMAND,
        source,
    };
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(spawn_error)?;
    }
    let output = child.wait_with_output().map_err(spawn_error)?;
    if !output.status.success() {
        return Err(DataplaneError::Command {
            command: COMMAND,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// [`run`] off the async workers.
pub(crate) async fn run_off_worker(script: String) -> Result<(), DataplaneError> {
    crate::blocking::off_worker(move || run(&script))
        .await
        .map_err(|source| DataplaneError::Task {
            command: COMMAND,
            source,
        })?
}
