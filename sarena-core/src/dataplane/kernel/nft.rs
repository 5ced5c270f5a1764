//! Running nftables scripts: `nft -f -`, one atomic transaction per script;
//! and reading objects back as JSON (`nft -j list …`).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::dataplane::DataplaneError;

/// The command line every script is fed to.
const COMMAND: &str = "nft -f -";

/// The command line of [`list_json`].
const LIST: &str = "nft -j list";

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
    checked(COMMAND, &output)
}

/// `Ok` when `output` says the command succeeded, else its stderr as the error.
fn checked(command: &'static str, output: &std::process::Output) -> Result<(), DataplaneError> {
    if !output.status.success() {
        return Err(DataplaneError::Command {
            command,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// `nft -j list ARGS…` (e.g. `counter inet t c`): the JSON it prints (blocking).
pub(crate) fn list_json(args: &[&str]) -> Result<serde_json::Value, DataplaneError> {
    let output = Command::new("nft")
        .arg("-j")
        .arg("list")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| DataplaneError::Spawn {
            command: LIST,
            source,
        })?;
    checked(LIST, &output)?;
    serde_json::from_slice(&output.stdout).map_err(|e| DataplaneError::Command {
        command: LIST,
        stderr: format!("unreadable JSON: {e}"),
    })
}

/// [`list_json`] off the async workers.
pub(crate) async fn list_json_off_worker(
    args: Vec<String>,
) -> Result<serde_json::Value, DataplaneError> {
    crate::blocking::off_worker(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        list_json(&args)
    })
    .await
    .map_err(|source| DataplaneError::Task {
        command: LIST,
        source,
    })?
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
