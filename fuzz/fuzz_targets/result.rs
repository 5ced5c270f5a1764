//! `CniResult::from_json` on arbitrary JSON for each version, then `to_json`
//! in each version.
//!
//! Invariants: no panic; parse errors are code 6; 0.3.0 and later print any
//! result, 0.1.0/0.2.0 only fail for a result without addresses; a printed
//! result parses back in its version, re-prints identically, and for 1.x is
//! exactly the original.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sarena_core::cni::{CniResult, ErrorCode, Version};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for v in Version::ALL {
        let result = match CniResult::from_json(&value, v) {
            Ok(result) => result,
            Err(e) => {
                assert_eq!(e.code, ErrorCode::Decode, "{e}");
                assert!(e.msg.contains("prevResult"), "{e}");
                continue;
            }
        };
        for out in Version::ALL {
            let json = match result.to_json(out) {
                Ok(json) => json,
                Err(e) => {
                    assert!(out < Version::V0_3_0, "{out} failed: {e}");
                    assert!(result.ips.is_empty());
                    continue;
                }
            };
            assert_eq!(json["cniVersion"], out.as_str());
            let back = CniResult::from_json(&json, out).expect("own output parses");
            if out.is_1x() {
                assert_eq!(back, result);
            }
            assert_eq!(back.to_json(out).expect("re-prints"), json);
        }
    }
});
