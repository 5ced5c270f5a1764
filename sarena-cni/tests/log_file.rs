//! The plugin's `log-file`, opened by root on every invocation: a symbolic
//! link at its path is refused (the plugin still answers, and says why on
//! stderr), the file is 0600 whatever the umask, and it is rotated to
//! `<log-file>.1` past `log-max-bytes`, so it stays bounded. Run as the real
//! binary; STATUS against an absent daemon logs without needing one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use sarena_test_support::output_with_stdin;
use serde_json::{Value, json};

/// What one run printed.
struct Run {
    answer: Value,
    stderr: String,
}

/// STATUS with `log` as `log-file` (and `extra` merged into the config),
/// under umask 000 so only the plugin decides the file's mode.
fn status(dir: &Path, log: &Path, extra: &Value) -> Run {
    let mut conf = json!({"cniVersion": "1.1.0", "name": "sarena", "type": "sarena-cni",
                          "daemon-endpoint": dir.join("absent.sock"), "log-file": log});
    for (k, v) in extra.as_object().unwrap() {
        conf[k] = v.clone();
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sarena-cni"));
    cmd.env_clear().env("CNI_COMMAND", "STATUS");
    // SAFETY: umask(2) between fork and exec: no allocation, no lock.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let out = output_with_stdin(&mut cmd, conf.to_string().as_bytes());
    let stdout = String::from_utf8(out.stdout).unwrap();
    Run {
        answer: serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}")),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The plugin answered STATUS as it does without a daemon.
fn assert_answered(run: &Run) {
    assert_eq!(run.answer["code"], 50, "{}", run.answer);
}

/// Writes `path` with `text` and sets its `mode`; returns the path.
fn file_with(path: &Path, text: &str, mode: u32) -> PathBuf {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, PermissionsExt::from_mode(mode)).unwrap();
    path.to_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// `dir` holds `cni.log` and its one backup, nothing else.
fn assert_only_log_and_backup(dir: &Path) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["cni.log", "cni.log.1"]);
}

fn backup(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

#[test]
fn a_symlink_at_the_log_path_is_refused_and_its_target_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let victim = file_with(&dir.path().join("victim"), "precious\n", 0o644);
    let log = dir.path().join("cni.log");
    symlink(&victim, &log).unwrap();

    let run = status(dir.path(), &log, &json!({}));
    assert_answered(&run);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(mode(&victim), 0o644);
    assert!(std::fs::symlink_metadata(&log).unwrap().is_symlink());
    assert!(
        run.stderr.contains("symbolic link"),
        "stderr does not say why the log-file is refused: {}",
        run.stderr
    );
    // The link is refused even when it points nowhere yet.
    let dangling = dir.path().join("dangling.log");
    symlink(dir.path().join("created-through-the-link"), &dangling).unwrap();
    assert_answered(&status(dir.path(), &dangling, &json!({})));
    assert!(!dir.path().join("created-through-the-link").exists());
}

#[test]
fn a_new_log_file_is_0600_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cni.log");
    assert_answered(&status(dir.path(), &log, &json!({})));
    assert_eq!(mode(&log), 0o600);
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("cannot reach")
    );
}

#[test]
fn an_existing_log_file_with_a_looser_mode_is_narrowed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cni.log");
    file_with(&log, "earlier line\n", 0o666);
    assert_answered(&status(dir.path(), &log, &json!({})));
    assert_eq!(mode(&log), 0o600);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("earlier line\n") && text.contains("cannot reach"));
}

#[test]
fn a_log_over_the_limit_is_rotated_and_stays_bounded() {
    const LIMIT: u64 = 4096;
    // What one invocation may add past the limit (its few lines).
    const SLACK: u64 = 2048;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cni.log");
    let extra = json!({"log-max-bytes": LIMIT});
    let mut rotations = 0;
    let mut last_size = 0;
    for n in 0..60 {
        assert_answered(&status(dir.path(), &log, &extra));
        assert!(
            size(&log) <= LIMIT + SLACK,
            "run {n}: log is {} bytes",
            size(&log)
        );
        let backup_size = size(&backup(&log));
        assert!(
            backup_size <= LIMIT + SLACK,
            "run {n}: backup is {backup_size} bytes"
        );
        if size(&log) < last_size {
            rotations += 1;
        }
        last_size = size(&log);
    }
    assert!(rotations >= 2, "rotated {rotations} times");
    assert_eq!(mode(&backup(&log)), 0o600);
    assert_only_log_and_backup(dir.path());
}

#[test]
fn a_bad_log_max_bytes_is_an_error_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cni.log");
    let run = status(dir.path(), &log, &json!({"log-max-bytes": 10}));
    assert_eq!(run.answer["code"], 7, "{}", run.answer);
    assert!(
        run.answer["msg"]
            .as_str()
            .unwrap()
            .contains("log-max-bytes"),
        "{}",
        run.answer
    );
}

#[test]
fn concurrent_invocations_rotate_to_one_bounded_backup() {
    const LIMIT: u64 = 4096;
    const WRITERS: u64 = 8;
    // Each writer may append its lines to a file another just rotated.
    const SLACK: u64 = 2048 * WRITERS;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cni.log");
    let threads: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (dir, log) = (dir.path().to_owned(), log.clone());
            std::thread::spawn(move || {
                for _ in 0..10 {
                    assert_answered(&status(&dir, &log, &json!({"log-max-bytes": LIMIT})));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(size(&log) <= LIMIT + SLACK, "log is {} bytes", size(&log));
    let backup_size = size(&backup(&log));
    assert!(
        backup_size > 0 && backup_size <= LIMIT + SLACK,
        "backup is {backup_size} bytes"
    );
    assert_only_log_and_backup(dir.path());
}

#[test]
fn a_hard_link_at_the_log_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let victim = file_with(&dir.path().join("victim"), "precious\n", 0o644);
    let log = dir.path().join("cni.log");
    std::fs::hard_link(&victim, &log).unwrap();
    let run = status(dir.path(), &log, &json!({}));
    assert_answered(&run);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(run.stderr.contains("hard links"), "{}", run.stderr);
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn a_log_file_of_another_user_is_refused() {
    sarena_test_support::require_root("a_log_file_of_another_user_is_refused");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cni.log");
    file_with(&log, "theirs\n", 0o644);
    std::os::unix::fs::chown(&log, Some(65534), Some(65534)).unwrap();
    let run = status(dir.path(), &log, &json!({}));
    assert_answered(&run);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "theirs\n");
    assert!(
        run.stderr.contains("belongs to uid 65534"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_symlink_at_the_backup_path_is_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = file_with(&dir.path().join("victim"), "precious\n", 0o644);
    let log = dir.path().join("cni.log");
    symlink(&victim, backup(&log)).unwrap();
    file_with(&log, &"x".repeat(5000), 0o600);
    assert_answered(&status(dir.path(), &log, &json!({"log-max-bytes": 4096})));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let rotated = std::fs::symlink_metadata(backup(&log)).unwrap();
    assert!(rotated.is_file() && rotated.len() == 5000, "{rotated:?}");
    assert!(size(&log) < 4096);
}
