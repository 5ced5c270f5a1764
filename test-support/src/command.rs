//! Commands (`ip`, `tc`, `mount`, ...) run from tests.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `args[0]` with the rest as arguments and returns its stdout. Panics
/// when it cannot be started or exits unsuccessfully, with the command line,
/// the exit status and what it printed.
pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{}`: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "`{}` failed ({}):\nstderr: {}\nstdout: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim_end(),
        String::from_utf8_lossy(&out.stdout).trim_end(),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the command with its output discarded; true when it exited
/// successfully. For probes (`ip link show X`) and best-effort clean-up in
/// `Drop`. A command that cannot be started is no answer: it panics, unless
/// the thread is already panicking (a clean-up during a failure).
pub fn succeeds(args: &[&str]) -> bool {
    let status = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(status) => status.success(),
        Err(_) if std::thread::panicking() => false,
        Err(e) => panic!("cannot run `{}`: {e}", args.join(" ")),
    }
}

/// Spawns `cmd` with piped stdio, writes `stdin` and closes it, and waits
/// for the whole output (how a runtime drives a CNI plugin).
pub fn output_with_stdin(cmd: &mut Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    // A child that exits without reading its stdin closes the pipe: that is
    // its answer, not the test's failure.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_returns_stdout_and_fails_loudly() {
        assert_eq!(run(&["echo", "hi"]), "hi\n");
        let err =
            std::panic::catch_unwind(|| run(&["sh", "-c", "echo oops >&2; exit 3"])).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("`sh -c echo oops >&2; exit 3` failed"),
            "{msg}"
        );
        assert!(msg.contains("oops") && msg.contains("3"), "{msg}");
    }

    #[test]
    fn succeeds_reports_the_exit_status() {
        assert!(succeeds(&["true"]));
        assert!(!succeeds(&["false"]));
        let err = std::panic::catch_unwind(|| succeeds(&["/nonexistent/binary"])).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(msg.starts_with("cannot run `/nonexistent/binary`"), "{msg}");
    }

    #[test]
    fn stdin_reaches_the_child() {
        let out = output_with_stdin(&mut Command::new("cat"), b"data");
        assert!(out.status.success());
        assert_eq!(out.stdout, b"data");
    }
}
