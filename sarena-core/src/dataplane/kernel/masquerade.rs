//! Egress masquerading of the pod pools with nftables (`table ip sarena` /
//! `ip6 sarena` by default).
//!
//! Traffic from a pool to a destination outside every exempt network,
//! leaving through a non-pod interface, leaves with the node's address
//! (the kernel's `masquerade`: the source of the outgoing route, ports
//! chosen by conntrack's NAT). Exempt: the pools themselves, the configured
//! exemptions (`cluster_cidrs`, `no_masquerade`), and the cluster's
//! networks as the node learns them ([`super::super::ClusterNetworks`]).
//!
//! Per family a table with three sets and one rule:
//! - `pods`: the pools (the sources masqueraded);
//! - `exempt`: the pools and the configured exemptions, rewritten by set-up;
//! - `cluster`: the cluster's networks, rewritten by each update and left
//!   alone by set-up, so a restarted daemon keeps them (kernel state) until
//!   it hears from the API server again.
//!
//! Why the kernel's masquerade and not SNAT in the eBPF programs: kube-proxy
//! already runs every connection through conntrack, so NAT there costs no
//! new state; the kernel picks source ports and handles their exhaustion;
//! and the programs only short-cut pod -> pod traffic of this node, so
//! egress to the outside crosses the host stack anyway.

use std::fmt::Write as _;

use ipnet::IpNet;

use crate::dataplane::DataplaneError;

/// What the tables are made of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Masquerade {
    /// Whether masquerading is on (off: no tables).
    pub enabled: bool,
    /// The pools.
    pub pools: Vec<IpNet>,
    /// Configured destinations never masqueraded.
    pub exempt: Vec<IpNet>,
    /// The cluster's networks; `None` until the node learned them (set-up
    /// then keeps what the kernel holds).
    pub cluster: Option<Vec<IpNet>>,
}

/// The families and their nft names.
const FAMILIES: [(&str, &str, bool); 2] = [("ip", "ipv4_addr", true), ("ip6", "ipv6_addr", false)];

/// `nets` of one family, merged, as an nft element list; `None` when empty.
fn elements(nets: &[IpNet], is_v4: bool) -> Option<String> {
    let family: Vec<IpNet> = nets
        .iter()
        .filter(|n| matches!(n, IpNet::V4(_)) == is_v4)
        .map(IpNet::trunc)
        .collect();
    let merged = IpNet::aggregate(&family);
    (!merged.is_empty()).then(|| {
        merged
            .iter()
            .map(IpNet::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// `flush set` then `add element` (when there are any) for `set`.
fn refill(script: &mut String, family: &str, table: &str, set: &str, nets: &[IpNet], is_v4: bool) {
    let _ = writeln!(script, "flush set {family} {table} {set}");
    if let Some(list) = elements(nets, is_v4) {
        let _ = writeln!(script, "add element {family} {table} {set} {{ {list} }}");
    }
}

/// The nft script that makes the tables what `m` asks (one transaction):
/// per family with a pool, the table, its sets (created when missing,
/// `cluster` refilled only when known) and the rule; every other table of
/// that name removed (`add` then `delete` succeeds whether or not it exists).
pub(crate) fn ruleset(table: &str, m: &Masquerade) -> String {
    let mut script = String::new();
    for (family, addr_type, is_v4) in FAMILIES {
        if !m.enabled || elements(&m.pools, is_v4).is_none() {
            let _ = writeln!(
                script,
                "add table {family} {table}\ndelete table {family} {table}"
            );
            continue;
        }
        let _ = writeln!(script, "add table {family} {table}");
        for set in ["pods", "exempt", "cluster"] {
            let _ = writeln!(
                script,
                "add set {family} {table} {set} {{ type {addr_type}; flags interval; }}"
            );
        }
        let _ = writeln!(
            script,
            "add chain {family} {table} postrouting {{ type nat hook postrouting priority srcnat; policy accept; }}\nflush chain {family} {table} postrouting"
        );
        refill(&mut script, family, table, "pods", &m.pools, is_v4);
        let exempt: Vec<IpNet> = m.pools.iter().chain(&m.exempt).copied().collect();
        refill(&mut script, family, table, "exempt", &exempt, is_v4);
        if let Some(cluster) = &m.cluster {
            refill(&mut script, family, table, "cluster", cluster, is_v4);
        }
        let _ = writeln!(
            script,
            "add rule {family} {table} postrouting {family} saddr @pods {family} daddr != @exempt {family} daddr != @cluster oifname != \"lxc*\" counter masquerade"
        );
    }
    script
}

/// The script that replaces the `cluster` sets (tables in place).
pub(crate) fn cluster_script(table: &str, m: &Masquerade) -> String {
    let mut script = String::new();
    for (family, _, is_v4) in FAMILIES {
        if m.enabled
            && elements(&m.pools, is_v4).is_some()
            && let Some(cluster) = &m.cluster
        {
            refill(&mut script, family, table, "cluster", cluster, is_v4);
        }
    }
    script
}

/// Applies [`ruleset`] atomically with `nft -f -`.
pub(crate) async fn apply(table: &str, m: &Masquerade) -> Result<(), DataplaneError> {
    super::nft::run_off_worker(ruleset(table, m)).await
}

/// Applies [`cluster_script`] (nothing to do when it is empty).
pub(crate) async fn apply_cluster(table: &str, m: &Masquerade) -> Result<(), DataplaneError> {
    let script = cluster_script(table, m);
    if script.is_empty() {
        return Ok(());
    }
    super::nft::run_off_worker(script).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn on(pools: &[&str]) -> Masquerade {
        Masquerade {
            enabled: true,
            pools: nets(pools),
            ..Masquerade::default()
        }
    }

    #[test]
    fn the_rule_masquerades_the_pools_to_anything_not_exempt() {
        let mut m = on(&["10.200.0.0/16", "fd00:5a::/64"]);
        m.exempt = nets(&["192.168.0.0/16", "10.200.1.0/24"]);
        let script = ruleset("sarena", &m);
        assert!(
            script.contains("add element ip sarena pods { 10.200.0.0/16 }"),
            "{script}"
        );
        // The pools are exempt too, merged with what they contain.
        assert!(
            script.contains("add element ip sarena exempt { 10.200.0.0/16, 192.168.0.0/16 }"),
            "{script}"
        );
        assert!(script.contains(
            "ip saddr @pods ip daddr != @exempt ip daddr != @cluster oifname != \"lxc*\" counter masquerade"
        ));
        assert!(
            script.contains("ip6 saddr @pods ip6 daddr != @exempt"),
            "{script}"
        );
        assert!(script.contains("add element ip6 sarena pods { fd00:5a::/64 }"));
        // Unknown cluster networks: the kernel's set is kept, not flushed.
        assert!(!script.contains("flush set ip sarena cluster"), "{script}");
        assert!(!script.contains("delete"), "{script}");
    }

    #[test]
    fn known_cluster_networks_are_written_by_setup_and_by_updates() {
        let mut m = on(&["10.244.1.0/24"]);
        m.cluster = Some(nets(&["10.244.2.0/24", "10.244.3.0/24", "172.30.0.12/32"]));
        let script = ruleset("t", &m);
        assert!(
            script.contains(
                "flush set ip t cluster\nadd element ip t cluster { 10.244.2.0/23, 172.30.0.12/32 }"
            ),
            "{script}"
        );
        assert_eq!(
            cluster_script("t", &m),
            "flush set ip t cluster\nadd element ip t cluster { 10.244.2.0/23, 172.30.0.12/32 }\n"
        );
        // The IPv4-only node has no ip6 table.
        assert!(
            script.contains("add table ip6 t\ndelete table ip6 t\n"),
            "{script}"
        );
        m.cluster = Some(Vec::new());
        assert_eq!(cluster_script("t", &m), "flush set ip t cluster\n");
    }

    #[test]
    fn disabled_masquerading_only_removes_the_tables() {
        let mut m = on(&["10.200.0.0/16"]);
        m.enabled = false;
        m.cluster = Some(nets(&["10.244.0.0/16"]));
        let script = ruleset("sarena", &m);
        assert!(!script.contains("masquerade"));
        assert!(script.contains("delete table ip sarena"));
        assert!(script.contains("delete table ip6 sarena"));
        assert_eq!(cluster_script("sarena", &m), "");
    }
}
