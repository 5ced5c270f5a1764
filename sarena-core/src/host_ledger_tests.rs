use super::*;

fn ledger_in(dir: &Path) -> HostLedger {
    HostLedger::in_dir(dir)
}

fn sysctl_root(entries: &[(&str, &str)]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for (key, value) in entries {
        let path = root.path().join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{value}\n")).unwrap();
    }
    root
}

fn change(key: &str, before: &str, written: &str) -> SysctlChange {
    SysctlChange {
        key: key.into(),
        before: before.into(),
        written: written.into(),
    }
}

#[test]
fn a_missing_file_is_an_empty_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir.path().join("not-yet"));
    assert_eq!(ledger.read().unwrap(), Ledger::default());
    assert_eq!(ledger.path(), dir.path().join("not-yet").join(LEDGER_FILE));
}

#[test]
fn records_are_on_disk_when_the_call_returns() {
    // Write-ahead: the caller changes the host only after this returned,
    // so the file must already say what is about to change.
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&dir.path().join("run"));
    ledger
        .record_sysctl("net/ipv4/ip_forward", "0", "1")
        .unwrap();
    ledger.record_clsact(2, "eth0").unwrap();
    let on_disk: Ledger = serde_json::from_slice(&std::fs::read(ledger.path()).unwrap()).unwrap();
    assert_eq!(on_disk.boot_id, current_boot_id().unwrap());
    assert_eq!(
        on_disk.sysctls,
        vec![change("net/ipv4/ip_forward", "0", "1")]
    );
    assert_eq!(
        on_disk.clsact,
        vec![ClsactAdded {
            ifindex: 2,
            ifname: "eth0".into()
        }]
    );
    // A fresh handle (another process) reads the same.
    assert_eq!(ledger_in(&dir.path().join("run")).read().unwrap(), on_disk);
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("run"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(LEDGER_FILE)]);
}

#[test]
fn the_first_writer_of_a_key_wins() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(dir.path());
    ledger
        .record_sysctl("net/ipv4/ip_forward", "0", "1")
        .unwrap();
    // A restarted daemon finds 1 (its own earlier write) and writes 1:
    // nothing to record, and the pre-install 0 stays.
    ledger
        .record_sysctl("net/ipv4/ip_forward", "1", "1")
        .unwrap();
    // Even a different value does not replace the first entry.
    ledger
        .record_sysctl("net/ipv4/ip_forward", "2", "1")
        .unwrap();
    assert_eq!(
        ledger.read().unwrap().sysctls,
        vec![change("net/ipv4/ip_forward", "0", "1")]
    );
}

#[test]
fn an_unchanged_value_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(dir.path());
    ledger
        .record_sysctl("net/ipv4/ip_forward", "1", "1")
        .unwrap();
    assert!(!ledger.path().exists(), "nothing to write");
    assert_eq!(ledger.read().unwrap(), Ledger::default());
}

#[test]
fn clsact_entries_are_per_device_and_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(dir.path());
    ledger.record_clsact(2, "eth0").unwrap();
    ledger.record_clsact(2, "eth0").unwrap();
    ledger.record_clsact(7, "eth0").unwrap();
    ledger.record_clsact(9, "sarena.vxlan").unwrap();
    let found: Vec<_> = ledger
        .read()
        .unwrap()
        .clsact
        .into_iter()
        .map(|c| (c.ifindex, c.ifname))
        .collect();
    assert_eq!(
        found,
        vec![
            (2, "eth0".into()),
            (7, "eth0".into()),
            (9, "sarena.vxlan".into())
        ]
    );
}

#[test]
fn entries_of_another_boot_are_ignored_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(dir.path());
    let old = Ledger {
        boot_id: "00000000-0000-0000-0000-000000000000".into(),
        sysctls: vec![change("net/ipv4/ip_forward", "0", "1")],
        clsact: vec![ClsactAdded {
            ifindex: 2,
            ifname: "eth0".into(),
        }],
    };
    std::fs::write(ledger.path(), serde_json::to_vec(&old).unwrap()).unwrap();
    assert_eq!(ledger.read().unwrap(), Ledger::default());
    // This boot's first write starts afresh: the other boot's before is
    // not this boot's.
    ledger
        .record_sysctl("net/ipv4/ip_forward", "1", "0")
        .unwrap();
    let now = ledger.read().unwrap();
    assert_eq!(now.sysctls, vec![change("net/ipv4/ip_forward", "1", "0")]);
    assert!(now.clsact.is_empty());
}

#[test]
fn a_corrupt_file_is_an_error_not_an_empty_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(dir.path());
    std::fs::write(ledger.path(), b"{not json").unwrap();
    assert!(matches!(ledger.read(), Err(LedgerError::Parse { .. })));
    assert!(matches!(
        ledger.record_clsact(2, "eth0"),
        Err(LedgerError::Parse { .. })
    ));
}

#[test]
fn an_unwritable_directory_fails_the_record() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the directory should be.
    let blocker = dir.path().join("run");
    std::fs::write(&blocker, b"").unwrap();
    let ledger = ledger_in(&blocker);
    let err = ledger
        .record_sysctl("net/ipv4/ip_forward", "0", "1")
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Read { .. } | LedgerError::Write { .. }),
        "{err:?}"
    );
}

#[test]
fn restore_writes_back_only_what_sarena_left_as_it_wrote() {
    let root = sysctl_root(&[
        ("net/ipv4/ip_forward", "1"),
        ("net/ipv6/conf/all/forwarding", "0"),
        ("net/ipv4/conf/all/rp_filter", "2"),
    ]);
    let ledger = Ledger {
        boot_id: String::new(),
        sysctls: vec![
            // Still as Sarena wrote it: back to before.
            change("net/ipv4/ip_forward", "0", "1"),
            // Back at its before already: nothing to do.
            change("net/ipv6/conf/all/forwarding", "0", "1"),
            // Changed by someone else since: left.
            change("net/ipv4/conf/all/rp_filter", "1", "0"),
        ],
        clsact: Vec::new(),
    };
    let read = |key: &str| sysctl::read_under(root.path(), key).unwrap();

    let dry = restore_sysctls_under(root.path(), &ledger, true).unwrap();
    assert_eq!(
        dry,
        vec![
            "would restore sysctl net/ipv4/ip_forward = 0".to_string(),
            "left sysctl net/ipv4/conf/all/rp_filter = 2: changed since Sarena wrote 0".into(),
        ]
    );
    assert_eq!(
        read("net/ipv4/ip_forward"),
        "1",
        "a dry run changes nothing"
    );

    let done = restore_sysctls_under(root.path(), &ledger, false).unwrap();
    assert_eq!(
        done,
        vec![
            "restored sysctl net/ipv4/ip_forward = 0".to_string(),
            "left sysctl net/ipv4/conf/all/rp_filter = 2: changed since Sarena wrote 0".into(),
        ]
    );
    assert_eq!(read("net/ipv4/ip_forward"), "0");
    assert_eq!(read("net/ipv6/conf/all/forwarding"), "0");
    assert_eq!(read("net/ipv4/conf/all/rp_filter"), "2");

    // A second run has nothing left to restore.
    let again = restore_sysctls_under(root.path(), &ledger, false).unwrap();
    assert_eq!(
        again,
        vec!["left sysctl net/ipv4/conf/all/rp_filter = 2: changed since Sarena wrote 0"]
    );
}

#[test]
fn restore_fails_on_a_key_it_cannot_read() {
    let root = sysctl_root(&[]);
    let ledger = Ledger {
        sysctls: vec![change("net/ipv4/ip_forward", "0", "1")],
        ..Ledger::default()
    };
    let err = restore_sysctls_under(root.path(), &ledger, false).unwrap_err();
    assert!(
        matches!(&err, LedgerError::Sysctl { key, .. } if key == "net/ipv4/ip_forward"),
        "{err:?}"
    );
}

#[test]
fn the_file_is_the_documented_json() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ledger_in(dir.path());
    ledger
        .record_sysctl("net/ipv4/ip_forward", "0", "1")
        .unwrap();
    let value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ledger.path()).unwrap()).unwrap();
    assert_eq!(
        value["sysctls"],
        serde_json::json!([{"key": "net/ipv4/ip_forward", "before": "0", "written": "1"}])
    );
    assert_eq!(value["clsact"], serde_json::json!([]));
    assert!(value["boot_id"].as_str().is_some_and(|id| !id.is_empty()));
}
