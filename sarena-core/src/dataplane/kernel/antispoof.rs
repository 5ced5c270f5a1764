//! Source-address and ARP anti-spoofing with nftables: a pod may only speak
//! as itself.
//!
//! Two tables named like the masquerading ones (`sarena` by default) but in
//! other families, so nothing else touches them: `inet` (a `prerouting`
//! filter at priority -310, before conntrack and kube-proxy's NAT) and `arp`
//! (`input`). Each holds a set `guarded` of the pods' host veth ifindexes and
//! a set of allowed `ifindex . address` pairs; a packet that enters through a
//! guarded veth from any other source is counted and dropped. The pod's own
//! IPv6 link-local address (the EUI-64 one of its MAC, the only one the
//! plugin gives it) is one of its addresses; no other link-local source is
//! allowed, as each would be one more neighbour entry the host learns on
//! the pod's word (a router solicitation with a forged source, repeated,
//! fills the node's neighbour table). For ICMPv6 only, the unspecified
//! address (DAD, MLD) is allowed; an ARP's sender address must be the
//! pod's (so a gratuitous ARP for another address is dropped too), and so
//! must the target of a neighbour advertisement or of a duplicate-address
//! probe (set `claimable6`: the same pairs, the address as the 128-bit
//! integer nftables reads from the ICMPv6 header). Router advertisements
//! and redirects from a pod are dropped. The eBPF programs apply the same
//! rules (`sarena-ebpf`).
//!
//! Why nftables, not strict reverse-path filtering: `rp_filter` takes the
//! maximum of `all` and the interface's value, so a host with `all` = 2
//! (loose, systemd's default on many distributions) silently gets no check,
//! and it covers neither ARP nor IPv6. The rules are kernel state: they stay
//! while the daemon restarts and are rebuilt from the registry by
//! [`reconcile`]. An endpoint costs set elements only (no rule per pod), so
//! attach and detach are one small nfnetlink batch each (`nft_elements.rs`;
//! an `nft` process start was 2–3 ms of a kernel-dataplane ADD).

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::api::Endpoint;
use crate::dataplane::DataplaneError;
use crate::links::link_local;

/// The chain and set definitions, created when missing; set contents are
/// kept and the rules of Sarena's chains replaced (idempotent). Protocols
/// by number (58: ICMPv6): `nft` resolves names through /etc/protocols,
/// which the DaemonSet's image does not have.
pub(super) fn structure(table: &str) -> String {
    format!(
        "add table inet {table}
add set inet {table} guarded {{ type iface_index; }}
add set inet {table} allowed4 {{ type iface_index . ipv4_addr; }}
add set inet {table} allowed6 {{ type iface_index . ipv6_addr; }}
add set inet {table} claimable6 {{ typeof iif . @th,64,128; }}
add chain inet {table} antispoof_prerouting {{ type filter hook prerouting priority -310; policy accept; }}
add chain inet {table} antispoof
flush chain inet {table} antispoof_prerouting
flush chain inet {table} antispoof
add rule inet {table} antispoof_prerouting iif @guarded jump antispoof
add rule inet {table} antispoof meta nfproto ipv4 iif . ip saddr @allowed4 return
add rule inet {table} antispoof icmpv6 type {{ nd-router-advert, nd-redirect }} counter drop
add rule inet {table} antispoof icmpv6 type nd-neighbor-advert iif . @th,64,128 != @claimable6 counter drop
add rule inet {table} antispoof icmpv6 type nd-neighbor-solicit ip6 saddr :: iif . @th,64,128 != @claimable6 counter drop
add rule inet {table} antispoof meta nfproto ipv6 ip6 saddr :: meta l4proto 58 return
add rule inet {table} antispoof meta nfproto ipv6 iif . ip6 saddr @allowed6 return
add rule inet {table} antispoof counter drop
add table arp {table}
add set arp {table} guarded {{ type iface_index; }}
add set arp {table} allowed4 {{ type iface_index . ipv4_addr; }}
add chain arp {table} antispoof_input {{ type filter hook input priority -10; policy accept; }}
add chain arp {table} antispoof
flush chain arp {table} antispoof_input
flush chain arp {table} antispoof
add rule arp {table} antispoof_input iif @guarded jump antispoof
add rule arp {table} antispoof iif . arp saddr ip @allowed4 return
add rule arp {table} antispoof counter drop
"
    )
}

/// `add` (or `delete`) statements for the elements of `endpoint`: its
/// ifindex in both `guarded` sets and one pair per address, its link-local
/// address included.
fn elements(verb: &str, table: &str, endpoint: &Endpoint) -> String {
    let ifindex = endpoint.spec.host_ifindex;
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    let mut claimable6 = Vec::new();
    let own = endpoint.spec.addresses.iter().map(|a| a.addr());
    for address in own.chain([IpAddr::V6(link_local(endpoint.spec.pod_mac))]) {
        match address {
            IpAddr::V4(a) => v4.push(format!("{ifindex} . {a}")),
            IpAddr::V6(a) => {
                v6.push(format!("{ifindex} . {a}"));
                claimable6.push(format!("{ifindex} . 0x{:032x}", u128::from(a)));
            }
        }
    }
    let mut script = String::new();
    for family in ["inet", "arp"] {
        // The allowed pairs exist before the interface is guarded.
        if !v4.is_empty() {
            let _ = writeln!(
                script,
                "{verb} element {family} {table} allowed4 {{ {} }}",
                v4.join(", ")
            );
        }
        if family == "inet" && !v6.is_empty() {
            let _ = writeln!(
                script,
                "{verb} element inet {table} allowed6 {{ {} }}",
                v6.join(", ")
            );
            let _ = writeln!(
                script,
                "{verb} element inet {table} claimable6 {{ {} }}",
                claimable6.join(", ")
            );
        }
        let _ = writeln!(
            script,
            "{verb} element {family} {table} guarded {{ {ifindex} }}"
        );
    }
    script
}

/// The script that guards `endpoint` (sets must exist).
pub(crate) fn guard_script(table: &str, endpoint: &Endpoint) -> String {
    elements("add", table, endpoint)
}

/// The tables and sets alone, created when missing.
fn sets(table: &str) -> String {
    structure(table)
        .lines()
        .filter(|l| l.starts_with("add table") || l.starts_with("add set"))
        .fold(String::new(), |s, l| s + l + "\n")
}

/// The script that removes `endpoint`'s elements, whether or not they (or
/// the tables) exist: each is added first, as deleting a missing element
/// would fail the whole transaction.
pub(crate) fn unguard_script(table: &str, endpoint: &Endpoint) -> String {
    let mut script = sets(table);
    script.push_str(&elements("add", table, endpoint));
    script.push_str(&elements("delete", table, endpoint));
    script
}

/// The script that makes both tables exactly what `endpoints` need, in one
/// transaction: packets see the old rules or the new, never none.
pub(crate) fn rebuild_script(table: &str, endpoints: &[Endpoint]) -> String {
    let mut script = format!(
        "add table inet {table}\ndelete table inet {table}\nadd table arp {table}\ndelete table arp {table}\n"
    );
    script.push_str(&structure(table));
    for endpoint in endpoints {
        script.push_str(&guard_script(table, endpoint));
    }
    script
}

/// The script that removes both tables (whether or not they exist).
pub(crate) fn remove_script(table: &str) -> String {
    format!(
        "add table inet {table}\ndelete table inet {table}\nadd table arp {table}\ndelete table arp {table}\n"
    )
}

/// Creates the tables, sets and rules when missing (node set-up).
pub(crate) async fn setup(table: &str) -> Result<(), DataplaneError> {
    super::nft::run_off_worker(structure(table)).await
}

/// Guards `endpoint`. When the sets are missing (no set-up yet), creates them first.
/// The elements go over nfnetlink (`nft_elements.rs`: no `nft` process);
/// a refusal (no sets yet) falls back to the script with the structure.
pub(crate) async fn guard(table: &str, endpoint: &Endpoint) -> Result<(), DataplaneError> {
    let batch =
        super::nft_elements::endpoint_batch(super::nft_elements::Verb::Add, table, endpoint);
    let sent = crate::blocking::off_worker(move || batch.send()).await;
    if matches!(sent, Ok(Ok(()))) {
        return Ok(());
    }
    if let Ok(Err(e)) = &sent {
        tracing::debug!(error = %crate::error_chain(e), "anti-spoofing elements over netlink refused; nft script with the sets");
    }
    super::nft::run_off_worker(structure(table) + &guard_script(table, endpoint)).await
}

/// Removes `endpoint`'s elements (missing ones are fine), in the background.
///
/// Deleting set elements makes the kernel wait for an RCU grace period
/// (15–25 ms on a 2-vCPU VM, measured), which a DEL should not wait for.
/// Nothing depends on the removal being done: the elements name an ifindex
/// that goes with the veth and is never reused for another one while the
/// host runs, and [`reconcile`] drops whatever a failure or a crash left.
///
/// Over nfnetlink: the elements added (so that none is missing), then
/// deleted, two batches; the script (the same in one transaction) when
/// that fails.
pub(crate) fn unguard(table: &str, endpoint: &Endpoint) {
    use super::nft_elements::{Verb, endpoint_batch};
    let (add, delete) = (
        endpoint_batch(Verb::Add, table, endpoint),
        endpoint_batch(Verb::Delete, table, endpoint),
    );
    let script = unguard_script(table, endpoint);
    let ifname = endpoint.spec.host_ifname.clone();
    tokio::spawn(async move {
        let sent =
            crate::blocking::off_worker(move || add.send().and_then(|()| delete.send())).await;
        if matches!(sent, Ok(Ok(()))) {
            return;
        }
        if let Err(error) = super::nft::run_off_worker(script).await {
            tracing::warn!(%ifname, error = %crate::error_chain(&error), "anti-spoofing elements not removed; reconcile will");
        }
    });
}

/// Rebuilds both tables for `endpoints` (start-up: whatever the registry
/// does not know goes).
pub(crate) async fn reconcile(table: &str, endpoints: &[Endpoint]) -> Result<(), DataplaneError> {
    super::nft::run_off_worker(rebuild_script(table, endpoints)).await
}

/// Removes both tables (uninstall, tests).
pub(crate) async fn remove(table: &str) -> Result<(), DataplaneError> {
    super::nft::run_off_worker(remove_script(table)).await
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::api::EndpointSpec;
    use crate::api::{Attachment, PodRef};

    /// An endpoint on host ifindex `ifindex` with `addrs` (also used by
    /// `nft_elements.rs`'s tests).
    pub(in crate::dataplane::kernel) fn endpoint(ifindex: u32, addrs: &[&str]) -> Endpoint {
        Endpoint {
            spec: EndpointSpec {
                owner: Attachment {
                    container_id: format!("c{ifindex}"),
                    ifname: "eth0".into(),
                },
                pod: PodRef::default(),
                host_ifname: format!("lxc{ifindex}"),
                host_ifindex: ifindex,
                host_mac: "02:00:00:00:00:01".parse().unwrap(),
                pod_mac: "0a:00:00:00:00:02".parse().unwrap(),
                addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
                netns: "/var/run/netns/x".into(),
                bandwidth: None,
                identity: Default::default(),
            },
            created_at: 0,
        }
    }

    #[test]
    fn guarding_adds_the_pairs_then_the_interface_in_both_families() {
        let script = guard_script("t", &endpoint(7, &["10.1.0.5/24", "fd00::5/64"]));
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(
            lines,
            [
                "add element inet t allowed4 { 7 . 10.1.0.5 }",
                "add element inet t allowed6 { 7 . fd00::5, 7 . fe80::800:ff:fe00:2 }",
                "add element inet t claimable6 { 7 . 0xfd000000000000000000000000000005, 7 . 0xfe80000000000000080000fffe000002 }",
                "add element inet t guarded { 7 }",
                "add element arp t allowed4 { 7 . 10.1.0.5 }",
                "add element arp t guarded { 7 }",
            ]
        );
    }

    #[test]
    fn unguarding_deletes_exactly_what_guarding_added() {
        let ep = endpoint(9, &["10.1.0.6/24", "10.2.0.6/24"]);
        let script = unguard_script("t", &ep);
        let (adds, deletes): (Vec<&str>, Vec<&str>) = script
            .lines()
            .filter(|l| l.starts_with("add element") || l.starts_with("delete"))
            .partition(|l| l.starts_with("add "));
        assert!(script.starts_with("add table inet t\n"), "{script}");
        assert!(!script.contains("rule"), "{script}");
        assert_eq!(adds.join("\n") + "\n", guard_script("t", &ep));
        assert_eq!(deletes.len(), adds.len());
        for (a, d) in adds.iter().zip(&deletes) {
            assert_eq!(a.replacen("add", "delete", 1), *d);
        }
        assert!(
            script.contains("{ 9 . 10.1.0.6, 9 . 10.2.0.6 }"),
            "{script}"
        );
    }

    #[test]
    fn the_rules_drop_every_other_source_of_a_guarded_interface() {
        let script = structure("t");
        assert!(script.contains("antispoof_prerouting iif @guarded jump antispoof"));
        assert!(script.contains("iif . ip saddr @allowed4 return"));
        // No link-local source but the pod's own (in `allowed6`).
        assert!(!script.contains("fe80"));
        assert!(script.contains("ip6 saddr :: meta l4proto 58 return"));
        assert!(script.contains("iif . arp saddr ip @allowed4 return"));
        // Neighbour discovery claiming another address, and router
        // messages, are dropped before any source is let through.
        let nd = script.find("nd-neighbor-advert").unwrap();
        assert!(nd < script.find("ip6 saddr :: meta l4proto").unwrap());
        assert!(script.contains("iif . @th,64,128 != @claimable6 counter drop"));
        assert!(script.contains("{ nd-router-advert, nd-redirect } counter drop"));
        assert_eq!(script.matches("counter drop").count(), 5);
        // Sets are created, never flushed: their elements survive a set-up.
        assert!(!script.contains("flush set"));
        assert!(!script.contains("delete"));
    }

    #[test]
    fn a_rebuild_replaces_both_tables_with_every_endpoint() {
        let eps = [endpoint(3, &["10.0.0.3/24"]), endpoint(4, &["10.0.0.4/24"])];
        let script = rebuild_script("t", &eps);
        assert!(script.starts_with("add table inet t\ndelete table inet t\n"));
        assert!(script.contains("delete table arp t"));
        assert!(script.contains("add element inet t guarded { 3 }"));
        assert!(script.contains("add element arp t allowed4 { 4 . 10.0.0.4 }"));
        assert_eq!(remove_script("t").matches("delete table").count(), 2);
    }
}
