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

/// An nftables table of the test's (unique name), deleted on drop.
pub struct NftTable {
    family: &'static str,
    name: String,
}

impl NftTable {
    /// Loads the table `family` (`ip`, `ip6`, `inet`) with `body` (its
    /// chains and sets, in nft's syntax) under a unique name.
    pub fn load(family: &'static str, body: &str) -> NftTable {
        let table = NftTable {
            family,
            name: sarena_test_support::unique("srsvc"),
        };
        let rules = format!("table {family} {} {{\n{body}}}\n", table.name);
        let out = sarena_test_support::output_with_stdin(
            std::process::Command::new("nft").args(["-f", "-"]),
            rules.as_bytes(),
        );
        assert!(out.status.success(), "nft: {out:?}\n{rules}");
        table
    }
}

impl Drop for NftTable {
    fn drop(&mut self) {
        sarena_test_support::succeeds(&["nft", "delete", "table", self.family, &self.name]);
    }
}
