//! Running code and programs inside a pod's network namespace: a fresh
//! thread that `setns`es (the namespace is per thread, and the thread ends
//! with the work), or a child process that `setns`es between fork and exec.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use wait_timeout::ChildExt;

use crate::BenchError;
use crate::node::netns::{enter, enter_on_exec};

fn open(netns: &Path) -> Result<File, BenchError> {
    File::open(netns).map_err(|source| BenchError::io("open netns", netns.to_owned(), source))
}

/// Runs `f` on a new thread inside the network namespace at `netns` (a
/// `/run/netns/<name>` path).
pub fn spawn_in<T, F>(netns: &Path, f: F) -> Result<JoinHandle<Result<T, BenchError>>, BenchError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, BenchError> + Send + 'static,
{
    let file = open(netns)?;
    let path: PathBuf = netns.to_owned();
    std::thread::Builder::new()
        .name("bench-netns".into())
        .spawn(move || {
            enter(&file).map_err(|source| BenchError::io("setns", path, source))?;
            drop(file);
            f()
        })
        .map_err(|source| BenchError::io("spawn thread for", netns.to_owned(), source))
}

/// Joins a thread from [`spawn_in`]; a panic becomes an error.
pub fn join<T>(
    handle: JoinHandle<Result<T, BenchError>>,
    what: &'static str,
) -> Result<T, BenchError> {
    handle
        .join()
        .map_err(|_| BenchError::ThreadPanicked { what })?
}

/// Makes `cmd` run inside the network namespace at `netns`: the namespace
/// file is opened now, and the child calls only `setns` on it between fork
/// and exec (async-signal-safe).
pub fn command_in(netns: &Path, cmd: &mut Command) -> Result<(), BenchError> {
    enter_on_exec(cmd, open(netns)?);
    Ok(())
}

/// Kills and reaps `child` if it is still running (for a server whose
/// client has finished or failed).
pub fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// A finished (or timed-out) child's output.
#[derive(Debug)]
pub struct Output {
    /// Exit status; `None` when it was killed for taking too long.
    pub status: Option<ExitStatus>,
    /// Standard output (lossy UTF-8).
    pub stdout: String,
    /// Standard error (lossy UTF-8).
    pub stderr: String,
}

/// Runs `cmd` with stdout and stderr captured (read on their own threads so
/// a full pipe never stalls it) and kills it after `timeout`.
pub fn output_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output, BenchError> {
    let program = PathBuf::from(cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BenchError::io("spawn", program.clone(), source))?;
    fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = child
        .wait_timeout(timeout)
        .map_err(|source| BenchError::io("wait for", program, source))?;
    if status.is_none() {
        stop(&mut child);
    }
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}
