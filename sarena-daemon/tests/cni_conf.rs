//! `--write-cni-conf` through the real daemon binary: the conflist appears
//! once the daemon serves, points at its socket, survives the daemon's stop,
//! and a bad `--cni-conf-source` stops the start.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use sarena_core::api::Daemon;
use sarena_core::install::validate_conflist;
use sarena_test_support::daemon::Site;

#[tokio::test]
async fn the_daemon_writes_its_conflist_once_it_serves_and_leaves_it_at_stop() {
    let site = Site::new();
    let conf_dir = site.dir.path().join("net.d");
    let conflist = conf_dir.join("10-sarena.conflist");
    let daemon = site
        .start(&["--write-cni-conf", conflist.to_str().unwrap()])
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !conflist.exists() {
        assert!(
            Instant::now() < deadline,
            "no conflist after 10 s:\n{}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(site.client().health().await.unwrap().ready);
    let body = std::fs::read(&conflist).unwrap();
    validate_conflist(&body).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        value["plugins"][0]["daemon-endpoint"],
        site.socket().display().to_string(),
        "the plugin is pointed at this daemon's socket"
    );
    let names: Vec<_> = std::fs::read_dir(&conf_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["10-sarena.conflist"], "no temporary file left");
    // logged right after the rename
    while !daemon.log_text().contains("ready: CNI config written") {
        assert!(Instant::now() < deadline, "{}", daemon.log_text());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    daemon.signal_and_wait(libc::SIGTERM);
    assert_eq!(
        std::fs::read(&conflist).unwrap(),
        body,
        "a stopping daemon leaves the conflist (an upgrade never leaves the node without one)"
    );
}

#[test]
fn a_source_that_does_not_call_sarena_stops_the_start() {
    let site = Site::new();
    let source = site.dir.path().join("other.conflist");
    std::fs::write(
        &source,
        br#"{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge"}]}"#,
    )
    .unwrap();
    let target = site.dir.path().join("net.d/10-sarena.conflist");
    let (status, log) = site.start_failing(&[
        "--write-cni-conf",
        target.to_str().unwrap(),
        "--cni-conf-source",
        source.to_str().unwrap(),
    ]);
    assert!(!status.success());
    assert!(log.contains("no plugin of type `sarena-cni`"), "{log}");
    assert!(!target.exists());
}
