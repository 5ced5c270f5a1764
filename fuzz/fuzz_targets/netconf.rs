//! `NetConf::parse` on arbitrary stdin bytes, then every accessor.
//!
//! Invariants: no panic; a parsed config has a supported version, a valid
//! name and a type; it serializes back to JSON that parses to the same config;
//! its `prevResult`, when it decodes, prints in every version 1.x.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sarena_core::cni::config::check_command_version;
use sarena_core::cni::{CniResult, Command, ErrorCode, NetConf, validate};

fuzz_target!(|data: &[u8]| {
    let conf = match NetConf::parse(data) {
        Ok(conf) => conf,
        Err(e) => {
            assert!(
                matches!(
                    e.code,
                    ErrorCode::Decode | ErrorCode::InvalidConfig | ErrorCode::IncompatibleVersion
                ),
                "unexpected code {e}"
            );
            return;
        }
    };
    let v = conf.version().expect("parse accepted the version");
    validate::network_name(&conf.name).expect("parse accepted the name");
    assert!(!conf.plugin_type.is_empty());
    for cmd in Command::ALL {
        assert_eq!(
            check_command_version(cmd, v).is_ok(),
            v >= cmd.min_version()
        );
    }
    if let Err(e) = conf.requested_ips() {
        assert_eq!(e.code, ErrorCode::InvalidConfig);
    }
    let gc = conf.gc_valid_attachments();
    assert_eq!(
        gc.is_some(),
        conf.valid_attachments.is_some() || conf.attachments.is_some()
    );

    let back = serde_json::to_vec(&conf).expect("serializes");
    let again = NetConf::parse(&back).expect("own output parses");
    assert_eq!(again, conf);

    if let Some(prev) = &conf.prev_result {
        if let Ok(result) = CniResult::from_json(prev, v) {
            for out in [
                sarena_core::cni::Version::V1_0_0,
                sarena_core::cni::Version::V1_1_0,
            ] {
                result.to_json(out).expect("1.x can print any result");
            }
        }
    }
});
