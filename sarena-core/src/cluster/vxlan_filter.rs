//! Who may reach the VXLAN device (pure): [`VxlanFilter`], an nftables
//! table of Sarena's own that drops, and counts, every packet to the VXLAN
//! UDP port that does not come from a current peer's underlay address
//! through the underlay device.
//!
//! The kernel's VXLAN device decapsulates whatever reaches its UDP port and
//! delivers the inner frame as if it came from the overlay: without the
//! filter any host that can reach the node (and any local pod, sending to
//! its own node's address) injects frames with forged pod sources. The
//! kernel's UDP stack hands the packet to the device after the `input`
//! hook, so a drop there means the device never sees it.
//!
//! `table inet sarena_vxlan` (both families in one table):
//! - sets `peers4` and `peers6`: the peers' underlay addresses, rewritten
//!   by every sync, next to the FDB entries (the same peers);
//! - the named counter `dropped`, which survives the rewrites;
//! - chain `input` (hook input, priority filter - 10, policy accept): to the
//!   port, from the underlay device and a peer: accept; else count and drop.
//!   Traffic to any other port is left alone.
//!
//! The table is Sarena's alone: set-up creates it, a sync rewrites only its
//! chain and sets, and native routing deletes it with the device. Nobody
//! else's tables or rules are touched.

use std::fmt::Write as _;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The nftables table (family `inet`) of the filter.
pub const VXLAN_FILTER_TABLE: &str = "sarena_vxlan";

/// The name of the filter's drop counter in [`VXLAN_FILTER_TABLE`].
pub const VXLAN_FILTER_COUNTER: &str = "dropped";

/// The filter in front of the VXLAN device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanFilter {
    /// The VXLAN UDP port.
    pub port: u16,
    /// The underlay device peers' packets arrive on.
    pub underlay: String,
    /// The peers' underlay addresses (the FDB entries' destinations).
    pub peers: Vec<IpAddr>,
}

/// What the filter dropped since the table was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterDrops {
    /// Packets dropped.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Why a filter cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the underlay device name {name:?} cannot be written in an nftables rule")]
pub struct UnwritableName {
    /// The device name.
    pub name: String,
}

impl VxlanFilter {
    /// The nft script (one transaction) that makes the table what `self`
    /// asks: objects created when missing (`add` is idempotent; the counter
    /// keeps its value), the chain's rules and the sets rewritten.
    pub fn script(&self) -> Result<String, UnwritableName> {
        if self.underlay.is_empty()
            || self
                .underlay
                .chars()
                .any(|c| c == '"' || c == '\\' || c.is_control() || c.is_whitespace())
        {
            return Err(UnwritableName {
                name: self.underlay.clone(),
            });
        }
        let t = format!("inet {VXLAN_FILTER_TABLE}");
        let mut s = String::new();
        let _ = writeln!(s, "add table {t}");
        let _ = writeln!(s, "add counter {t} {VXLAN_FILTER_COUNTER}");
        let _ = writeln!(s, "add set {t} peers4 {{ type ipv4_addr; }}");
        let _ = writeln!(s, "add set {t} peers6 {{ type ipv6_addr; }}");
        let _ = writeln!(
            s,
            "add chain {t} input {{ type filter hook input priority filter - 10; policy accept; }}"
        );
        let _ = writeln!(s, "flush chain {t} input");
        for (set, v4) in [("peers4", true), ("peers6", false)] {
            let _ = writeln!(s, "flush set {t} {set}");
            let mut peers: Vec<String> = self
                .peers
                .iter()
                .filter(|p| p.is_ipv4() == v4)
                .map(IpAddr::to_string)
                .collect();
            peers.sort();
            peers.dedup();
            if !peers.is_empty() {
                let _ = writeln!(s, "add element {t} {set} {{ {} }}", peers.join(", "));
            }
        }
        let (port, dev) = (self.port, &self.underlay);
        for (family, set) in [("ip", "peers4"), ("ip6", "peers6")] {
            let _ = writeln!(
                s,
                "add rule {t} input udp dport {port} iifname \"{dev}\" {family} saddr @{set} accept"
            );
        }
        let _ = writeln!(
            s,
            "add rule {t} input udp dport {port} counter name \"{VXLAN_FILTER_COUNTER}\" drop"
        );
        Ok(s)
    }
}

/// The script that removes the table, whether or not it exists.
pub fn remove_script() -> String {
    format!("add table inet {VXLAN_FILTER_TABLE}\ndelete table inet {VXLAN_FILTER_TABLE}\n")
}

/// The drop counter in the output of `nft -j list counter inet
/// sarena_vxlan dropped`; `None` when it holds none.
pub fn drops_from_json(listing: &serde_json::Value) -> Option<FilterDrops> {
    listing
        .get("nftables")?
        .as_array()?
        .iter()
        .find_map(|item| {
            let counter = item.get("counter")?;
            Some(FilterDrops {
                packets: counter.get("packets")?.as_u64()?,
                bytes: counter.get("bytes")?.as_u64()?,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(peers: &[&str]) -> VxlanFilter {
        VxlanFilter {
            port: 8472,
            underlay: "eth0".into(),
            peers: peers.iter().map(|p| p.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn peers_through_the_underlay_pass_everything_else_to_the_port_is_counted_and_dropped() {
        let s = filter(&["172.31.0.13", "fd00::12", "172.31.0.12", "172.31.0.12"])
            .script()
            .unwrap();
        assert!(s.contains("add counter inet sarena_vxlan dropped\n"), "{s}");
        assert!(
            s.contains("flush set inet sarena_vxlan peers4\nadd element inet sarena_vxlan peers4 { 172.31.0.12, 172.31.0.13 }\n"),
            "{s}"
        );
        assert!(
            s.contains("add element inet sarena_vxlan peers6 { fd00::12 }"),
            "{s}"
        );
        let rules: Vec<&str> = s.lines().filter(|l| l.starts_with("add rule")).collect();
        assert_eq!(
            rules,
            [
                "add rule inet sarena_vxlan input udp dport 8472 iifname \"eth0\" ip saddr @peers4 accept",
                "add rule inet sarena_vxlan input udp dport 8472 iifname \"eth0\" ip6 saddr @peers6 accept",
                "add rule inet sarena_vxlan input udp dport 8472 counter name \"dropped\" drop",
            ]
        );
        // The chain is rewritten, the table and counter never deleted.
        assert!(s.contains("flush chain inet sarena_vxlan input\n"));
        assert!(!s.contains("delete"), "{s}");
    }

    #[test]
    fn no_peers_leaves_the_sets_empty_so_everything_is_dropped() {
        let s = filter(&[]).script().unwrap();
        assert!(!s.contains("add element"), "{s}");
        assert!(s.contains("flush set inet sarena_vxlan peers6\n"), "{s}");
    }

    #[test]
    fn a_device_name_that_would_break_the_rule_is_refused() {
        for name in ["", "a\"b", "a b", "a\\b"] {
            let mut f = filter(&[]);
            f.underlay = name.into();
            assert_eq!(f.script().unwrap_err().name, name);
        }
    }

    #[test]
    fn removal_succeeds_with_or_without_the_table() {
        assert_eq!(
            remove_script(),
            "add table inet sarena_vxlan\ndelete table inet sarena_vxlan\n"
        );
    }

    #[test]
    fn the_counter_is_read_from_nfts_json() {
        let listing = serde_json::json!({"nftables": [
            {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
            {"counter": {"family": "inet", "name": "dropped", "table": "sarena_vxlan",
                         "handle": 3, "packets": 7, "bytes": 700}}
        ]});
        assert_eq!(
            drops_from_json(&listing),
            Some(FilterDrops {
                packets: 7,
                bytes: 700
            })
        );
        assert_eq!(drops_from_json(&serde_json::json!({"nftables": []})), None);
        assert_eq!(drops_from_json(&serde_json::json!([])), None);
    }
}
