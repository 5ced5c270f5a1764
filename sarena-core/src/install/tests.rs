use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

fn dirs() -> (tempfile::TempDir, Installer) {
    let root = tempfile::tempdir().unwrap();
    let (bin, conf) = (root.path().join("bin"), root.path().join("net.d"));
    fs::create_dir(&bin).unwrap();
    fs::create_dir(&conf).unwrap();
    (root, Installer::new(bin, conf))
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn names(dir: &Path) -> Vec<String> {
    let paths = sarena_plugin::durable::list(dir).unwrap();
    paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn conflist() -> Vec<u8> {
    generate_conflist(&ConflistOptions::default())
}

#[test]
fn the_plugin_is_copied_executable_and_a_second_install_touches_nothing() {
    let (root, installer) = dirs();
    let source = root.path().join("sarena-cni.new");
    fs::write(&source, b"plugin v1").unwrap();
    assert_eq!(installer.install_plugin(&source).unwrap(), Outcome::Written);
    let target = installer.bin_dir().join(PLUGIN_NAME);
    assert_eq!(fs::read(&target).unwrap(), b"plugin v1");
    assert_eq!(mode(&target), 0o755);
    let inode = fs::metadata(&target).unwrap();
    assert_eq!(
        installer.install_plugin(&source).unwrap(),
        Outcome::Unchanged
    );
    let again = fs::metadata(&target).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        inode.ino(),
        again.ino(),
        "an identical plugin is not rewritten"
    );

    fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(installer.install_plugin(&source).unwrap(), Outcome::Written);
    assert_eq!(
        mode(&target),
        0o755,
        "a plugin that lost its x bit is fixed"
    );
    fs::write(&source, b"plugin v2").unwrap();
    assert_eq!(installer.install_plugin(&source).unwrap(), Outcome::Written);
    assert_eq!(fs::read(&target).unwrap(), b"plugin v2");
    assert_eq!(
        names(installer.bin_dir()),
        [PLUGIN_NAME],
        "no temporary file left"
    );
}

/// The hazard is real (writing in place over a running binary fails with
/// ETXTBSY), and the installer's rename does not meet it: the running
/// process keeps the old inode, the path gets the new binary.
#[test]
fn a_running_plugin_is_replaced_without_text_file_busy() {
    let (root, installer) = dirs();
    let sleep = PathBuf::from("/bin/sleep");
    assert_eq!(installer.install_plugin(&sleep).unwrap(), Outcome::Written);
    let target = installer.bin_dir().join(PLUGIN_NAME);
    let mut child = std::process::Command::new(&target)
        .arg("30")
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::read_link(format!("/proc/{}/exe", child.id())).ok() != Some(target.clone()) {
        assert!(Instant::now() < deadline, "the copy never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    let in_place = fs::OpenOptions::new().write(true).open(&target);
    assert_eq!(
        in_place.unwrap_err().raw_os_error(),
        Some(libc::ETXTBSY),
        "writing over a running binary in place must fail, else this test proves nothing"
    );

    let newer = root.path().join("newer");
    fs::write(&newer, b"#!/bin/sh\necho new\n").unwrap();
    assert_eq!(installer.install_plugin(&newer).unwrap(), Outcome::Written);
    assert_eq!(fs::read(&target).unwrap(), b"#!/bin/sh\necho new\n");
    assert_eq!(
        child.try_wait().unwrap(),
        None,
        "the running plugin was not disturbed"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(names(installer.bin_dir()), [PLUGIN_NAME]);
}

#[test]
fn a_missing_bin_dir_is_created_and_a_failed_copy_leaves_no_file() {
    let (root, installer) = dirs();
    let err = installer
        .install_plugin(&root.path().join("missing"))
        .unwrap_err();
    assert!(
        matches!(err, InstallError::Io { call: "read", .. }),
        "{err}"
    );
    fs::write(root.path().join("p"), b"x").unwrap();
    let missing = Installer::new(root.path().join("new/bin"), installer.conf_dir());
    assert_eq!(
        missing.install_plugin(&root.path().join("p")).unwrap(),
        Outcome::Written
    );
    assert_eq!(
        fs::read(root.path().join("new/bin").join(PLUGIN_NAME)).unwrap(),
        b"x"
    );
    let not_a_dir = Installer::new(root.path().join("p"), installer.conf_dir());
    let err = not_a_dir
        .install_plugin(&root.path().join("p"))
        .unwrap_err();
    assert!(
        matches!(err, InstallError::Io { call: "mkdir", .. }),
        "{err}"
    );
    assert!(names(installer.bin_dir()).is_empty());
}

#[test]
fn stale_temporary_files_of_a_dead_installer_are_removed() {
    let (_root, installer) = dirs();
    let stale = installer
        .conf_dir()
        .join(format!(".{DEFAULT_CONFLIST_NAME}.1.sarena-tmp"));
    fs::write(&stale, b"{").unwrap();
    assert_eq!(
        installer.write_conflist(&conflist()).unwrap(),
        Outcome::Written
    );
    assert_eq!(names(installer.conf_dir()), [DEFAULT_CONFLIST_NAME]);
}

#[test]
fn the_conflist_is_written_once_and_only_when_it_calls_sarena() {
    let (_root, installer) = dirs();
    let path = installer.conflist_path();
    for (bad, why) in [
        (&b"{"[..], "not valid JSON"),
        (br#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}"#, "no plugin of type `sarena-cni`"),
        (br#"{"name":"x","plugins":[{"type":"sarena-cni"}]}"#, "no `cniVersion`"),
        (br#"{"cniVersion":"1.0.0","name":"x"}"#, "no `plugins`"),
        (
            br#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"sarena-cni","daemon-endpoint":"ftp://x"}]}"#,
            "daemon-endpoint",
        ),
        (br#"{"cniVersion":"9.9.9","name":"x","plugins":[{"type":"sarena-cni"}]}"#, "9.9.9"),
    ] {
        let err = installer.write_conflist(bad).unwrap_err();
        assert!(matches!(err, InstallError::Conflist { .. }), "{err}");
        assert!(err.to_string().contains(why), "{why}: {err}");
        assert!(!path.exists());
    }
    assert_eq!(
        installer.write_conflist(&conflist()).unwrap(),
        Outcome::Written
    );
    assert_eq!(fs::read(&path).unwrap(), conflist());
    assert_eq!(mode(&path), 0o644);
    assert_eq!(
        installer.write_conflist(&conflist()).unwrap(),
        Outcome::Unchanged
    );
    let chained = br#"{"cniVersion":"1.0.0","name":"sarena","plugins":[
        {"type":"sarena-cni"},{"type":"portmap","capabilities":{"portMappings":true}}]}"#;
    assert_eq!(installer.write_conflist(chained).unwrap(), Outcome::Written);
    assert_eq!(fs::read(&path).unwrap(), chained);
    assert_eq!(names(installer.conf_dir()), [DEFAULT_CONFLIST_NAME]);
}

#[test]
fn the_generated_conflist_names_the_daemon_only_when_it_is_not_the_default() {
    let plain: serde_json::Value =
        serde_json::from_slice(&generate_conflist(&ConflistOptions::for_daemon(
            Path::new(crate::api::DEFAULT_SOCKET),
            Path::new(crate::delqueue::DeleteQueue::DEFAULT_DIR),
        )))
        .unwrap();
    assert_eq!(
        plain,
        serde_json::json!({"cniVersion": "1.0.0", "name": "sarena", "plugins": [
            {"type": "sarena-cni", "log-file": "/var/log/sarena-cni.log"}]})
    );
    let own = generate_conflist(&ConflistOptions::for_daemon(
        Path::new("/run/x/s.sock"),
        Path::new("/var/lib/x/q"),
    ));
    validate_conflist(&own).unwrap();
    let own: serde_json::Value = serde_json::from_slice(&own).unwrap();
    assert_eq!(own["plugins"][0]["daemon-endpoint"], "/run/x/s.sock");
    assert_eq!(own["plugins"][0]["delete-queue-dir"], "/var/lib/x/q");
}

#[test]
fn other_networks_are_left_alone_unless_set_aside_and_come_back_at_uninstall() {
    let (_root, installer) = dirs();
    let conf = installer.conf_dir().to_path_buf();
    fs::write(conf.join("05-other.conflist"), b"other").unwrap();
    fs::write(conf.join("99-loopback.conf"), b"lo").unwrap();
    fs::write(conf.join("notes.txt"), b"n").unwrap();
    installer.write_conflist(&conflist()).unwrap();
    assert_eq!(
        names(&conf),
        [
            "05-other.conflist",
            DEFAULT_CONFLIST_NAME,
            "99-loopback.conf",
            "notes.txt"
        ],
        "writing Sarena's config touches no other file"
    );

    let aside = installer.set_aside_others().unwrap();
    assert_eq!(
        aside,
        [
            conf.join("05-other.conflist.sarena-bak"),
            conf.join("99-loopback.conf.sarena-bak")
        ]
    );
    assert_eq!(installer.set_aside_others().unwrap(), Vec::<PathBuf>::new());
    assert_eq!(
        fs::read(conf.join("05-other.conflist.sarena-bak")).unwrap(),
        b"other"
    );

    // a config that appeared under a set-aside name meanwhile is not overwritten
    fs::write(conf.join("99-loopback.conf"), b"newer").unwrap();
    let report = installer.uninstall().unwrap();
    assert_eq!(report.removed, Some(installer.conflist_path()));
    assert_eq!(report.restored, [conf.join("05-other.conflist")]);
    assert_eq!(fs::read(conf.join("99-loopback.conf")).unwrap(), b"newer");
    assert_eq!(
        names(&conf),
        [
            "05-other.conflist",
            "99-loopback.conf",
            "99-loopback.conf.sarena-bak",
            "notes.txt"
        ]
    );
    assert_eq!(installer.uninstall().unwrap().removed, None, "idempotent");
}

#[test]
fn uninstall_never_removes_another_networks_file_under_sarenas_name() {
    let (_root, installer) = dirs();
    let foreign = br#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}"#;
    fs::write(installer.conflist_path(), foreign).unwrap();
    let err = installer.uninstall().unwrap_err();
    assert!(matches!(err, InstallError::NotSarenas { .. }), "{err}");
    assert_eq!(fs::read(installer.conflist_path()).unwrap(), foreign);
    let gone = Installer::new("/nonexistent-bin", "/nonexistent-sarena-conf");
    assert_eq!(gone.uninstall().unwrap(), UninstallReport::default());
}

#[test]
fn the_conflist_name_must_be_one_libcni_loads() {
    for good in ["05-sarena.conflist", "sarena.conf", "x.json"] {
        let installer = Installer::default().with_conflist_name(good).unwrap();
        assert_eq!(
            installer.conflist_path(),
            Path::new(DEFAULT_CNI_CONF_DIR).join(good)
        );
    }
    for bad in [
        "",
        "sarena",
        "a/b.conflist",
        ".conflist",
        ".hidden.conf",
        "x.conflist.bak",
    ] {
        let err = Installer::default().with_conflist_name(bad).unwrap_err();
        assert!(
            matches!(err, InstallError::ConflistName { .. }),
            "{bad}: {err}"
        );
    }
}

/// A reader polling the conflist (as the runtime's watcher does) sees the
/// old body or the new one, never a mix or a short file, while it is
/// replaced over and over.
#[test]
fn a_reader_never_sees_a_partial_conflist() {
    let (_root, installer) = dirs();
    let body = |name: &str| {
        let mut options = ConflistOptions {
            name: name.to_owned(),
            ..ConflistOptions::default()
        };
        // large enough that an in-place write takes several write calls
        options.log_file = Some(PathBuf::from(format!("/var/log/{}", "x".repeat(200_000))));
        generate_conflist(&options)
    };
    let (a, b) = (body("a"), body("b"));
    installer.write_conflist(&a).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (path, stop, a, b) = (
            installer.conflist_path(),
            stop.clone(),
            a.clone(),
            b.clone(),
        );
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let seen = fs::read(&path).unwrap();
                assert!(
                    seen == a || seen == b,
                    "a partial conflist of {} bytes",
                    seen.len()
                );
                reads += 1;
            }
            reads
        })
    };
    for i in 0..100 {
        let next = if i % 2 == 0 { &b } else { &a };
        assert_eq!(installer.write_conflist(next).unwrap(), Outcome::Written);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0, "the reader never ran");
    assert_eq!(names(installer.conf_dir()), [DEFAULT_CONFLIST_NAME]);
}
