//! The real `sarena-daemon` binary in tests: a [`Site`] per daemon (a unique
//! temp directory with its socket, state, config and log), a [`Running`]
//! guard that SIGKILLs the child if a test fails, an [`EbpfNode`] (the daemon
//! in `ebpf` mode with its plugin) for whole-stack tests, raw HTTP/1.1 for
//! requests a well-behaved client never sends, and the API requests tests
//! repeat.

mod ebpf;
mod raw;
mod site;

pub use ebpf::{EbpfNode, GATEWAY_DEVICE};
pub use raw::{RawAnswer, free_loopback_addr, raw, raw_bytes, raw_tcp, raw_tcp_with};
pub use site::{Running, Site};

use sarena_core::api::{AllocateRequest, Attachment, PodRef};

/// A config with a small pool, for exhaustion tests: a /29 has 8 addresses; minus
/// network, broadcast and gateway, 5 can be handed out.
pub const SMALL_POOL: &str = r#"
mtu = 1400
[[ipam.pools]]
name = "tiny"
cidrs = ["10.77.0.0/29"]
"#;

/// The attachment `<cid>`/`eth0`.
pub fn owner(cid: &str) -> Attachment {
    Attachment {
        container_id: cid.into(),
        ifname: "eth0".into(),
    }
}

/// An allocation for [`owner`]`(cid)` from the default pool.
pub fn alloc_req(cid: &str) -> AllocateRequest {
    AllocateRequest {
        owner: owner(cid),
        pod: PodRef::default(),
        requested: vec![],
        pool: None,
    }
}
