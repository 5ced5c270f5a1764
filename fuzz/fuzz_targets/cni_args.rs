//! `CniArgs::parse` on arbitrary strings.
//!
//! Invariants: no panic; errors are code 4 naming `CNI_ARGS`; unknown keys are
//! only kept with `IgnoreUnknown`; a MAC comes back normalised; parsing is
//! unaffected by one trailing `;`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sarena_core::cni::{CniArgs, ErrorCode};

fuzz_target!(|s: &str| {
    let parsed = CniArgs::parse(s);
    match &parsed {
        Ok(args) => {
            if !args.ignored.is_empty() {
                assert!(args.ignore_unknown);
            }
            if let Some(mac) = args.mac.map(|m| m.to_string()) {
                assert_eq!(mac.len(), 17);
                assert!(mac.bytes().enumerate().all(|(i, b)| if i % 3 == 2 {
                    b == b':'
                } else {
                    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
                }));
            }
        }
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidEnvironment);
            assert!(e.msg.contains("CNI_ARGS"), "{e}");
        }
    }
    if !s.ends_with(';') {
        assert_eq!(CniArgs::parse(&format!("{s};")), parsed);
    }
});
