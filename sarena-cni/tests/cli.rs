//! Runs the built `sarena-cni` binary the way a runtime does and checks the exact
//! answers (stdout JSON and exit code) for inputs that need no daemon.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use sarena_test_support::output_with_stdin;
use serde_json::{Value, json};

const CONF: &str = r#"{"cniVersion":"1.0.0","name":"sarena","type":"sarena-cni"}"#;

/// Runs the plugin with exactly `env` (nothing inherited) and `stdin`.
fn plugin(env: &[(&str, &str)], stdin: &str) -> (Value, i32, String) {
    let out = output_with_stdin(
        Command::new(env!("CARGO_BIN_EXE_sarena-cni"))
            .env_clear()
            .envs(env.iter().copied()),
        stdin.as_bytes(),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    (
        value,
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn add_env(container_id: &str) -> Vec<(&str, &str)> {
    vec![
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", container_id),
        ("CNI_NETNS", "/var/run/netns/cni-test"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
    ]
}

#[test]
fn version() {
    let (out, code, _) = plugin(&[("CNI_COMMAND", "VERSION")], r#"{"cniVersion":"1.0.0"}"#);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        json!({"cniVersion": "1.0.0",
               "supportedVersions": ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]})
    );
}

#[test]
fn version_with_empty_stdin() {
    let (out, code, _) = plugin(&[("CNI_COMMAND", "VERSION")], "");
    assert_eq!(code, 0);
    assert_eq!(out["cniVersion"], "1.1.0");
    assert_eq!(out["supportedVersions"].as_array().unwrap().len(), 7);
}

#[test]
fn malformed_json() {
    let (out, code, stderr) = plugin(&add_env("abc123"), r#"{"cniVersion":"1.0.0","name":"#);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.1.0", "code": 6, "msg": "failed to decode network config",
               "details": "EOF while parsing a value at line 1 column 29"})
    );
    assert!(
        stderr.contains("failed to decode network config"),
        "{stderr}"
    );
}

#[test]
fn missing_command() {
    let (out, code, _) = plugin(&[], CONF);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.0.0", "code": 4, "msg": "missing environment variable CNI_COMMAND"})
    );
}

#[test]
fn missing_netns_on_add() {
    let env: Vec<_> = add_env("abc123")
        .into_iter()
        .filter(|(k, _)| *k != "CNI_NETNS")
        .collect();
    let (out, code, _) = plugin(&env, CONF);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.0.0", "code": 4,
               "msg": "missing environment variable CNI_NETNS (required by ADD)"})
    );
}

#[test]
fn missing_ifname_on_del() {
    let env = [("CNI_COMMAND", "DEL"), ("CNI_CONTAINERID", "abc123")];
    let (out, code, _) = plugin(&env, CONF);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.0.0", "code": 4,
               "msg": "missing environment variable CNI_IFNAME (required by DEL)"})
    );
}

#[test]
fn unsupported_cni_version() {
    let conf = r#"{"cniVersion":"2.0.0","name":"sarena","type":"sarena-cni"}"#;
    let (out, code, _) = plugin(&add_env("abc123"), conf);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.1.0", "code": 1,
               "msg": "unsupported cniVersion \"2.0.0\"; supported versions: \
                       0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"})
    );
}

#[test]
fn command_newer_than_the_config_version() {
    let (out, code, _) = plugin(&[("CNI_COMMAND", "STATUS")], CONF);
    assert_eq!(code, 1);
    assert_eq!(out["code"], 1);
    assert_eq!(out["cniVersion"], "1.0.0");
    assert!(out["msg"].as_str().unwrap().contains("STATUS"), "{out}");
}

#[test]
fn bad_container_id() {
    let (out, code, _) = plugin(&add_env("-bad/id"), CONF);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.0.0", "code": 4,
               "msg": "invalid CNI_CONTAINERID \"-bad/id\": must start with a letter or digit, \
                       followed by letters, digits, '_', '.' or '-'"})
    );
}

#[test]
fn prev_result_on_add() {
    let conf = r#"{"cniVersion":"1.0.0","name":"sarena","type":"sarena-cni","prevResult":{}}"#;
    let (out, code, _) = plugin(&add_env("abc123"), conf);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        json!({"cniVersion": "1.0.0", "code": 7,
               "msg": "prevResult: not allowed on ADD; Sarena must be the first plugin in a chain"})
    );
}

#[test]
fn status_without_a_daemon_is_50() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("absent.sock");
    let conf = json!({"cniVersion": "1.1.0", "name": "sarena", "type": "sarena-cni",
                      "daemon-endpoint": sock, "log-file": dir.path().join("cni.log")});
    let (out, code, stderr) = plugin(&[("CNI_COMMAND", "STATUS")], &conf.to_string());
    assert_eq!(code, 1);
    assert_eq!(out["code"], 50);
    assert_eq!(out["msg"], "cannot reach the Sarena daemon");
    assert!(stderr.is_empty(), "logs go to the log file: {stderr}");
    let log = std::fs::read_to_string(dir.path().join("cni.log")).unwrap();
    assert!(log.contains("cannot reach the Sarena daemon"), "{log}");
}

#[test]
fn phases_are_appended_as_one_json_line_per_run_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("phases.jsonl");
    let conf = json!({"cniVersion": "1.1.0", "name": "sarena", "type": "sarena-cni",
                      "daemon-endpoint": dir.path().join("absent.sock"),
                      "log-file": dir.path().join("cni.log")});
    let phases = file.to_str().unwrap();
    let env = [("CNI_COMMAND", "STATUS"), ("SARENA_CNI_PHASES", phases)];
    for _ in 0..2 {
        let (out, code, _) = plugin(&env, &conf.to_string());
        assert_eq!((code, &out["code"]), (1, &json!(50)), "{out}");
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in &lines {
        let (start, end) = (
            line["main_start_ns"].as_u64().unwrap(),
            line["main_end_ns"].as_u64().unwrap(),
        );
        let phases = line["phases"].as_array().unwrap();
        let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
        for name in [
            "read stdin",
            "runtime start",
            "command STATUS",
            "daemon GET /v1/daemon/health",
            "write stdout",
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        for p in phases {
            let (s, e) = (
                p["start_ns"].as_u64().unwrap(),
                p["end_ns"].as_u64().unwrap(),
            );
            assert!(
                start <= s && s <= e && e <= end,
                "{p} within {start}..{end}"
            );
        }
    }

    // Without the variable, nothing is written.
    std::fs::remove_file(&file).unwrap();
    plugin(&[("CNI_COMMAND", "STATUS")], &conf.to_string());
    assert!(!file.exists());
}
