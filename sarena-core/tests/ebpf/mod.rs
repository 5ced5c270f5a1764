//! What the eBPF dataplane tests share: the pods' subnet. The object comes
//! from `sarena_test_support::require_ebpf_object` (`SARENA_EBPF_OBJECT`,
//! which scripts/test.sh exports from sarena-daemon's build output, or the
//! newest one under the target directory).
#![allow(dead_code)]

use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::Pod;

/// The gateway of the pods' subnet, `10.251.0.0/24`.
pub const GATEWAY: &str = "10.251.0.1";

/// The pod `10.251.0.<host>/24` behind [`GATEWAY`].
pub async fn pod(links: &RtnetlinkLinks, host: u8) -> Pod {
    Pod::in_subnet(links, GATEWAY, host).await
}

pub mod ipv6;
pub mod raw;

pub mod frames6;
