use std::sync::{Arc, Barrier};

use std::fs::{self, File};

use super::files::{LEGACY_TMP_PREFIX, LOCK_FILE};
use super::*;
use crate::api::{ApiErrorKind, DaemonError, MockDaemon};
use crate::durable::is_temp_of;

fn att(id: &str) -> Attachment {
    Attachment {
        container_id: id.into(),
        ifname: "eth0".into(),
    }
}

fn unreachable() -> DaemonError {
    DaemonError::Unreachable {
        endpoint: "sock".into(),
        source: "refused".into(),
    }
}

fn queue() -> (tempfile::TempDir, DeleteQueue) {
    let dir = tempfile::tempdir().unwrap();
    let q = DeleteQueue::new(dir.path().join("delete-queue"));
    (dir, q)
}

fn leftovers(q: &DeleteQueue) -> Vec<String> {
    fs::read_dir(q.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| is_temp_of(n, None) || n.starts_with(LEGACY_TMP_PREFIX))
        .collect()
}

#[test]
fn absent_directory_is_an_empty_queue() {
    let (_d, q) = queue();
    assert!(q.is_empty().unwrap());
    assert!(q.pending().unwrap().is_empty());
    assert!(!q.contains(&att("a")));
}

#[test]
fn enqueue_is_durable_and_repeats_coalesce() {
    let (_d, q) = queue();
    q.enqueue(&att("a")).unwrap();
    q.enqueue(&att("a")).unwrap();
    q.enqueue(&att("b")).unwrap();
    let mut pending = q.pending().unwrap();
    pending.sort();
    assert_eq!(pending, vec![att("a"), att("b")]);
    assert!(q.contains(&att("a")));
    // A second handle on the same directory (another process) sees the same entries.
    let other = DeleteQueue::new(q.dir());
    assert_eq!(other.pending().unwrap().len(), 2);
    assert!(leftovers(&q).is_empty());
}

#[test]
fn same_container_different_ifname_are_distinct() {
    let (_d, q) = queue();
    q.enqueue(&att("a")).unwrap();
    q.enqueue(&Attachment {
        container_id: "a".into(),
        ifname: "net1".into(),
    })
    .unwrap();
    assert_eq!(q.pending().unwrap().len(), 2);
}

#[test]
fn bounded_new_entries_beyond_capacity_fail_but_repeats_pass() {
    let (_d, q) = queue();
    let q = q.with_capacity(2);
    q.enqueue(&att("a")).unwrap();
    q.enqueue(&att("b")).unwrap();
    let err = q.enqueue(&att("c")).unwrap_err();
    assert!(matches!(err, QueueError::Full { capacity: 2, .. }), "{err}");
    q.enqueue(&att("a")).unwrap();
    assert_eq!(q.pending().unwrap().len(), 2);
}

#[test]
fn concurrent_enqueue_from_threads_loses_nothing_and_respects_the_bound() {
    let (_d, q) = queue();
    let q = q.with_capacity(50);
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let q = q.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                (0..10)
                    .map(|i| q.enqueue(&att(&format!("t{t}-{i}"))))
                    .filter(|r| r.is_ok())
                    .count()
            })
        })
        .collect();
    let ok: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(ok, 50, "exactly the capacity is accepted");
    assert_eq!(q.pending().unwrap().len(), 50);
    assert!(leftovers(&q).is_empty());
}

/// Helper run in child processes by the next test; does nothing by itself.
#[test]
#[ignore = "helper for concurrent_enqueue_from_processes"]
fn child_enqueue() {
    let dir = std::env::var("SARENA_DELQ_TEST_DIR").unwrap();
    let tag = std::env::var("SARENA_DELQ_TEST_TAG").unwrap();
    let q = DeleteQueue::new(dir);
    for i in 0..20 {
        q.enqueue(&att(&format!("{tag}-{i}"))).unwrap();
        q.enqueue(&att("shared")).unwrap();
    }
}

#[test]
fn concurrent_enqueue_from_processes() {
    let (_d, q) = queue();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|p| {
            std::process::Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "delqueue::tests::child_enqueue",
                    "--quiet",
                ])
                .env("SARENA_DELQ_TEST_DIR", q.dir())
                .env("SARENA_DELQ_TEST_TAG", format!("p{p}"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let pending = q.pending().unwrap();
    assert_eq!(pending.len(), 4 * 20 + 1);
    assert!(pending.contains(&att("shared")));
    assert!(leftovers(&q).is_empty());
}

#[test]
fn crash_leftovers_are_never_read_and_are_cleaned_on_replay() {
    let (_d, q) = queue();
    q.enqueue(&att("a")).unwrap();
    // A writer that crashed before its rename leaves a partial temp file behind.
    fs::write(
        q.dir().join(".0123.json.999.00ff.sarena-tmp"),
        b"{\"container_id\":\"half",
    )
    .unwrap();
    // So does one of a release before the durable-write helper.
    fs::write(q.dir().join(".tmp.999.123"), b"{\"container_id\":\"half").unwrap();
    assert_eq!(leftovers(&q).len(), 2);
    assert_eq!(q.pending().unwrap(), vec![att("a")]);

    let mut daemon = MockDaemon::new();
    daemon
        .expect_delete_endpoint()
        .times(1)
        .withf(|a| a == &att("a"))
        .returning(|_| Ok(true));
    let report = block_on(q.replay(&daemon)).unwrap();
    assert_eq!(report.done, vec![att("a")]);
    assert!(leftovers(&q).is_empty());
    assert!(q.is_empty().unwrap());
}

#[test]
fn undecodable_entries_are_dropped_on_replay_without_a_daemon_call() {
    let (_d, q) = queue();
    fs::create_dir_all(q.dir()).unwrap();
    fs::write(q.dir().join("deadbeef.json"), b"not json").unwrap();
    let daemon = MockDaemon::new();
    let report = block_on(q.replay(&daemon)).unwrap();
    assert!(report.done.is_empty());
    assert!(q.is_empty().unwrap());
}

#[test]
fn replay_of_an_empty_queue_calls_nothing_and_creates_nothing() {
    let (_d, q) = queue();
    let daemon = MockDaemon::new();
    assert_eq!(
        block_on(q.replay(&daemon)).unwrap(),
        ReplayReport::default()
    );
    assert!(!q.dir().exists());
}

#[test]
fn replay_removes_done_entries_and_keeps_failed_ones() {
    let (_d, q) = queue();
    for id in ["gone", "known", "notfound", "broken"] {
        q.enqueue(&att(id)).unwrap();
    }
    let mut daemon = MockDaemon::new();
    daemon
        .expect_delete_endpoint()
        .times(4)
        .returning(|a| match a.container_id.as_str() {
            "gone" => Ok(false),
            "known" => Ok(true),
            "notfound" => Err(DaemonError::api(ApiErrorKind::NotFound, "no such endpoint")),
            _ => Err(DaemonError::api(ApiErrorKind::Internal, "db error")),
        });
    let mut report = block_on(q.replay(&daemon)).unwrap();
    report.done.sort();
    assert_eq!(
        report.done,
        vec![att("gone"), att("known"), att("notfound")]
    );
    assert_eq!(report.remaining, 1);
    assert_eq!(q.pending().unwrap(), vec![att("broken")]);
}

#[test]
fn replay_at_most_bounds_the_daemon_calls() {
    let (_d, q) = queue();
    for id in ["a", "b", "c", "d", "e"] {
        q.enqueue(&att(id)).unwrap();
    }
    let mut daemon = MockDaemon::new();
    daemon
        .expect_delete_endpoint()
        .times(2)
        .returning(|_| Ok(true));
    let report = block_on(q.replay_at_most(&daemon, 2)).unwrap();
    assert_eq!(report.done.len(), 2);
    assert_eq!(report.remaining, 3);
    assert_eq!(q.pending().unwrap().len(), 3);
}

#[test]
fn replay_stops_and_keeps_everything_when_the_daemon_is_unreachable() {
    let (_d, q) = queue();
    q.enqueue(&att("a")).unwrap();
    q.enqueue(&att("b")).unwrap();
    let mut daemon = MockDaemon::new();
    daemon
        .expect_delete_endpoint()
        .times(1)
        .returning(|_| Err(unreachable()));
    let report = block_on(q.replay(&daemon)).unwrap();
    assert!(report.daemon_unreachable);
    assert_eq!(report.remaining, 2);
    assert_eq!(q.pending().unwrap().len(), 2);
}

#[test]
fn replay_is_skipped_while_another_process_holds_the_lock() {
    let (_d, q) = queue();
    q.enqueue(&att("a")).unwrap();
    let held = File::open(q.dir().join(LOCK_FILE)).unwrap();
    held.lock().unwrap();
    let daemon = MockDaemon::new();
    let report = block_on(q.replay(&daemon)).unwrap();
    assert!(report.busy);
    assert_eq!(q.pending().unwrap(), vec![att("a")]);
}

/// Runs a future to completion on a fresh current-thread runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn entry_files_are_named_by_the_attachment_digest() {
    let (_d, q) = queue();
    // printf 'abc123:eth0' | sha256sum
    let name = "c69fce2d24302fe50f4378898a2c062dfe9f83781b9aedb060a7e06a71e2fe00.json";
    assert_eq!(q.entry_path(&att("abc123")), q.dir().join(name));
}
