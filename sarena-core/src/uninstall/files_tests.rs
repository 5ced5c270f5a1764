//! The file steps in a temporary directory.

use std::fs;
use std::path::Path;

use super::files;
use super::{Line, StepError, Verdict};
use crate::install::{ConflistOptions, Installer, generate_conflist};

fn names(lines: &[Line]) -> Vec<String> {
    lines.iter().map(ToString::to_string).collect()
}

fn installer(root: &Path) -> Installer {
    Installer::new(root.join("bin"), root.join("net.d"))
}

#[test]
fn the_conflist_goes_with_its_temps_and_names_the_plugin_log() {
    let dir = tempfile::tempdir().unwrap();
    let installer = installer(dir.path());
    let options = ConflistOptions {
        log_file: Some(dir.path().join("sarena-cni.log")),
        ..ConflistOptions::default()
    };
    installer
        .write_conflist(&generate_conflist(&options))
        .unwrap();
    let temp = installer
        .conf_dir()
        .join(".10-sarena.conflist.1.2.sarena-tmp");
    fs::write(&temp, b"half").unwrap();

    let run = dir.path().join("run");
    fs::create_dir_all(&run).unwrap();
    let (lines, log) = files::conflist(&installer, &run, true).unwrap();
    assert_eq!(
        log.as_deref(),
        Some(dir.path().join("sarena-cni.log").as_path())
    );
    assert_eq!(
        files::noted_plugin_log(&run),
        None,
        "a dry run notes nothing"
    );
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l.verdict == Verdict::WouldRemove));
    assert!(
        installer.conflist_path().exists(),
        "a dry run removes nothing"
    );

    let (lines, _) = files::conflist(&installer, &run, false).unwrap();
    // A later run (this one killed after the conflist went) still finds
    // the log through the run dir's note.
    assert_eq!(
        files::noted_plugin_log(&run),
        Some(dir.path().join("sarena-cni.log"))
    );
    assert_eq!(
        names(&lines),
        [
            format!("removed conflist {}", installer.conflist_path().display()),
            format!("removed temporary file {}", temp.display()),
        ]
    );
    assert!(!installer.conflist_path().exists() && !temp.exists());
    let (again, log) = files::conflist(&installer, &run, false).unwrap();
    assert!(again.is_empty() && log.is_none());
}

#[test]
fn a_foreign_conflist_is_refused_and_left() {
    let dir = tempfile::tempdir().unwrap();
    let installer = installer(dir.path());
    fs::create_dir_all(installer.conf_dir()).unwrap();
    let foreign = br#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}"#;
    fs::write(installer.conflist_path(), foreign).unwrap();
    let err = files::conflist(&installer, dir.path(), false).unwrap_err();
    assert!(matches!(err, StepError::NotSarenas { .. }), "{err}");
    assert!(err.to_string().contains("is not Sarena's"), "{err}");
    assert_eq!(fs::read(installer.conflist_path()).unwrap(), foreign);
}

#[test]
fn the_log_file_is_the_sarena_plugins() {
    let conflist = br#"{"cniVersion":"1.0.0","name":"x","plugins":[
        {"type":"portmap","log-file":"/var/log/other.log"},
        {"type":"sarena-cni","log-file":"/var/log/sarena-cni.log"}]}"#;
    assert_eq!(
        files::log_file_of(conflist).as_deref(),
        Some(Path::new("/var/log/sarena-cni.log"))
    );
    assert_eq!(
        files::log_file_of(br#"{"plugins":[{"type":"sarena-cni"}]}"#),
        None
    );
    assert_eq!(files::log_file_of(b"not json"), None);
}

#[test]
fn the_plugin_its_temps_and_its_logs_go_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    for name in [
        "sarena-cni",
        ".sarena-cni.9.abc.sarena-tmp",
        "bridge",
        ".bridge.1.2.sarena-tmp",
    ] {
        fs::write(bin.join(name), b"x").unwrap();
    }
    let log = dir.path().join("sarena-cni.log");
    fs::write(&log, b"log").unwrap();
    fs::write(dir.path().join("sarena-cni.log.1"), b"old").unwrap();

    let dry = files::plugin(&bin, Some(&log), true).unwrap();
    assert_eq!(dry.len(), 4);
    assert!(bin.join("sarena-cni").exists());

    let lines = files::plugin(&bin, Some(&log), false).unwrap();
    assert_eq!(lines.len(), 4, "{:?}", names(&lines));
    let mut left: Vec<String> = fs::read_dir(&bin)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".bridge.1.2.sarena-tmp", "bridge"]);
    assert!(!log.exists() && !dir.path().join("sarena-cni.log.1").exists());
    assert!(files::plugin(&bin, Some(&log), false).unwrap().is_empty());
}

#[test]
fn set_aside_configs_are_put_back_unless_their_name_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let installer = installer(dir.path());
    let conf = installer.conf_dir().to_path_buf();
    fs::create_dir_all(&conf).unwrap();
    fs::write(conf.join("05-a.conflist.sarena-bak"), b"a").unwrap();
    fs::write(conf.join("06-b.conf.sarena-bak"), b"b").unwrap();
    fs::write(conf.join("06-b.conf"), b"new b").unwrap();

    let dry = files::set_aside(&installer, true).unwrap();
    assert_eq!(dry.len(), 2);
    assert!(conf.join("05-a.conflist.sarena-bak").exists());

    let lines = files::set_aside(&installer, false).unwrap();
    let verdicts: Vec<&Verdict> = lines.iter().map(|l| &l.verdict).collect();
    assert!(
        matches!(verdicts[..], [Verdict::Left { .. }, Verdict::Restored]),
        "{lines:?}"
    );
    assert_eq!(fs::read(conf.join("05-a.conflist")).unwrap(), b"a");
    assert_eq!(fs::read(conf.join("06-b.conf")).unwrap(), b"new b");
}

#[test]
fn the_run_dir_loses_sarenas_files_then_itself() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    fs::create_dir_all(run.join(".sarena.sock.bind-42")).unwrap();
    fs::write(run.join("sarena.sock"), b"").unwrap();
    fs::write(run.join(files::LEDGER_FILE), b"{}").unwrap();
    let socket = run.join("sarena.sock");

    assert_eq!(files::run_dir(&socket, true).unwrap().len(), 4);
    assert!(run.join(files::LEDGER_FILE).exists());

    let lines = files::run_dir(&socket, false).unwrap();
    assert_eq!(lines.len(), 4, "{:?}", names(&lines));
    assert!(!run.exists());
    assert!(files::run_dir(&socket, false).unwrap().is_empty());
}

#[test]
fn a_run_dir_holding_other_files_is_kept_with_them() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("sarena.sock"), b"").unwrap();
    fs::write(dir.path().join("theirs"), b"").unwrap();
    let lines = files::run_dir(&dir.path().join("sarena.sock"), false).unwrap();
    assert_eq!(lines[0].verdict, Verdict::Removed);
    assert!(matches!(&lines[1].verdict, Verdict::Kept { why } if why.contains("theirs")));
    assert!(dir.path().join("theirs").exists());
}

#[test]
fn the_state_dir_loses_sarenas_entries_then_itself() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    fs::create_dir_all(state.join("delete-queue")).unwrap();
    fs::write(state.join("state.redb"), b"db").unwrap();
    fs::write(state.join("daemon.lock"), b"1").unwrap();
    fs::write(state.join("delete-queue/x.json"), b"{}").unwrap();

    let dry = files::state_dir(&state, true).unwrap();
    assert_eq!(
        names(&dry),
        [
            format!(
                "would remove contents of state dir {} (3 entries)",
                state.display()
            ),
            format!("would remove state dir {}", state.display()),
        ]
    );
    assert!(state.join("state.redb").exists());

    files::state_dir(&state, false).unwrap();
    assert!(!state.exists());
    assert!(files::state_dir(&state, false).unwrap().is_empty());
}

#[test]
fn a_state_dir_holding_other_files_keeps_them_and_itself() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("state.redb"), b"db").unwrap();
    fs::write(state.join("theirs"), b"x").unwrap();

    let lines = files::state_dir(&state, false).unwrap();
    assert!(!state.join("state.redb").exists());
    assert!(state.join("theirs").exists(), "{:?}", names(&lines));
    assert!(
        matches!(&lines[1].verdict, Verdict::Kept { why } if why.contains("theirs")),
        "{:?}",
        names(&lines)
    );
}

#[test]
fn a_state_or_run_dir_that_is_not_a_plain_absolute_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("keep"), b"x").unwrap();
    let dotdot = dir.path().join("state/..");
    for bad in [
        Path::new("/"),
        Path::new("relative/state"),
        dotdot.as_path(),
    ] {
        let err = files::state_dir(bad, false).unwrap_err();
        assert!(
            matches!(err, StepError::NotSarenas { .. }),
            "{bad:?}: {err}"
        );
        let err = files::run_dir(&bad.join("sarena.sock"), false).unwrap_err();
        assert!(
            matches!(err, StepError::NotSarenas { .. }),
            "{bad:?}: {err}"
        );
    }
    assert!(dir.path().join("keep").exists());
}
