//! The built binary as netavark runs it: arguments, JSON on stdin, the
//! answer or `{"error": …}` on stdout, exit 0 or 1. (With a real daemon and
//! a real netavark: e2e/test-netavark.sh.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn plugin(args: &[&str], stdin: &str) -> (Value, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sarena-netavark"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    (serde_json::from_str(&text).unwrap(), out.status.success())
}

#[test]
fn info_names_the_api_version() {
    let (out, ok) = plugin(&["info"], "");
    assert!(ok);
    assert_eq!(out["api_version"], json!("1.0.0"));
    assert_eq!(out["version"], json!(env!("CARGO_PKG_VERSION")));
}

#[test]
fn create_without_a_daemon_exits_1_naming_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent.sock");
    let network = json!({"name": "sn", "id": "1234", "driver": "sarena", "ipv6_enabled": false,
        "internal": false, "dns_enabled": false,
        "options": {"daemon-endpoint": socket.to_str().unwrap()}});
    let (out, ok) = plugin(&["create"], &network.to_string());
    assert!(!ok);
    let msg = out["error"].as_str().unwrap();
    assert!(
        msg.contains("cannot read the Sarena daemon's pools"),
        "{msg}"
    );
    assert!(msg.contains(socket.to_str().unwrap()), "{msg}");
}

#[test]
fn garbage_on_stdin_exits_1_with_an_error_object() {
    let (out, ok) = plugin(&["setup", "/run/netns/none"], "not json");
    assert!(!ok);
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("setup: cannot decode"),
        "{out}"
    );
}
