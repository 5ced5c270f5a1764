//! Masquerading of the pod pools with nftables (`table ip sarena` / `ip6 sarena` by default).

use ipnet::IpNet;

use crate::dataplane::DataplaneError;

/// The nft script that makes the tables exactly what `pools` and `enable` ask:
/// traffic from a pool to anywhere outside every pool, leaving through a
/// non-pod interface, is masqueraded. Disabled: the tables are removed.
pub(crate) fn ruleset(table: &str, pools: &[IpNet], enable: bool) -> String {
    let mut script = String::new();
    for (family, is_v4) in [("ip", true), ("ip6", false)] {
        // `add` then `delete` makes removal succeed whether or not the table exists.
        script.push_str(&format!(
            "add table {family} {table}\ndelete table {family} {table}\n"
        ));
        let nets: Vec<String> = pools
            .iter()
            .filter(|p| matches!(p, IpNet::V4(_)) == is_v4)
            .map(|p| p.trunc().to_string())
            .collect();
        if !enable || nets.is_empty() {
            continue;
        }
        let set = nets.join(", ");
        script.push_str(&format!(
            "table {family} {table} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    {family} saddr {{ {set} }} {family} daddr != {{ {set} }} oifname != \"lxc*\" masquerade\n  }}\n}}\n"
        ));
    }
    script
}

/// Applies [`ruleset`] atomically with `nft -f -`.
pub(crate) fn apply(table: &str, pools: &[IpNet], enable: bool) -> Result<(), DataplaneError> {
    super::nft::run(&ruleset(table, pools, enable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruleset_masquerades_each_family_pools() {
        let pools: Vec<IpNet> = vec![
            "10.200.0.0/16".parse().unwrap(),
            "fd00:5a::/64".parse().unwrap(),
        ];
        let script = ruleset("sarena", &pools, true);
        assert!(
            script.contains("ip saddr { 10.200.0.0/16 } ip daddr != { 10.200.0.0/16 }"),
            "{script}"
        );
        assert!(script.contains("ip6 saddr { fd00:5a::/64 }"), "{script}");
        assert!(script.contains("masquerade"));
    }

    #[test]
    fn disabled_ruleset_only_removes_tables() {
        let pools: Vec<IpNet> = vec!["10.200.0.0/16".parse().unwrap()];
        let script = ruleset("sarena", &pools, false);
        assert!(!script.contains("masquerade"));
        assert!(script.contains("delete table ip sarena"));
        assert!(script.contains("delete table ip6 sarena"));
    }
}
