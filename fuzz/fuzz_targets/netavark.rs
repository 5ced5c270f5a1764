//! The netavark plugin's input on arbitrary bytes: `setup`'s and
//! `teardown`'s container config, and `create`'s network config.
//!
//! Invariants: no panic; a decoded network re-encodes to JSON that decodes
//! to the same network; `NetworkSettings::of` and `add_request` either
//! refuse or give a request for exactly the container's id and interface,
//! each requested address once, in the netns given.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sarena_core::netavark::{NetworkSettings, add_request, decode_exec, decode_network};

fuzz_target!(|data: &[u8]| {
    if let Ok(network) = decode_network(data) {
        let json = serde_json::to_vec(&network).unwrap();
        assert_eq!(decode_network(&json).unwrap(), network);
        let _ = NetworkSettings::of(&network);
    }
    let Ok(exec) = decode_exec("setup", data) else {
        return;
    };
    if NetworkSettings::of(&exec.network).is_err() {
        return;
    }
    if let Ok(req) = add_request(Path::new("/run/netns/fuzz"), &exec) {
        assert_eq!(req.attachment.container_id, exec.container_id);
        assert_eq!(req.attachment.ifname, exec.network_options.interface_name);
        assert_eq!(req.netns, Path::new("/run/netns/fuzz"));
        let mut ips = req.requested_ips.clone();
        ips.sort();
        ips.dedup();
        assert_eq!(ips.len(), req.requested_ips.len());
    }
});
