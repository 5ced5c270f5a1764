//! `CniEnv::from_lookup` over a fuzzed map of environment variables.
//!
//! Keys are mostly the real `CNI_*` names (and `CNI_COMMAND` values mostly real
//! commands) so that the fuzzer gets past the first checks quickly.
//! Invariants: no panic; errors are code 4; an accepted environment holds
//! what its command requires, validated.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use sarena_core::cni::{CniEnv, Command, ErrorCode, validate};

#[derive(Arbitrary, Debug)]
enum Entry {
    Command(u8),
    Var(u8, String),
    Other(String, String),
}

const VARS: [&str; 6] = [
    "CNI_COMMAND",
    "CNI_CONTAINERID",
    "CNI_NETNS",
    "CNI_IFNAME",
    "CNI_ARGS",
    "CNI_PATH",
];

fuzz_target!(|entries: Vec<Entry>| {
    let mut map = HashMap::new();
    for entry in entries {
        match entry {
            Entry::Command(i) => {
                let cmd = Command::ALL[usize::from(i) % Command::ALL.len()];
                map.insert("CNI_COMMAND".to_string(), cmd.as_str().to_string());
            }
            Entry::Var(i, value) => {
                map.insert(VARS[usize::from(i) % VARS.len()].to_string(), value);
            }
            Entry::Other(key, value) => {
                map.insert(key, value);
            }
        }
    }
    let env = match CniEnv::from_lookup(|k| map.get(k).cloned()) {
        Ok(env) => env,
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidEnvironment, "{e}");
            return;
        }
    };
    assert_eq!(
        Some(env.command.as_str()),
        map.get("CNI_COMMAND").map(String::as_str)
    );
    assert!(env.path.iter().all(|p| !p.as_os_str().is_empty()));
    if env.command.is_attachment() {
        validate::container_id(env.container_id.as_deref().expect("container id"))
            .expect("valid id");
        validate::interface_name(env.ifname.as_deref().expect("ifname")).expect("valid ifname");
        if env.command != Command::Del {
            assert!(env.netns.is_some());
        }
        if !env.args.ignored.is_empty() {
            assert!(env.args.ignore_unknown);
        }
    } else {
        assert!(env.container_id.is_none() && env.netns.is_none() && env.ifname.is_none());
    }
});
