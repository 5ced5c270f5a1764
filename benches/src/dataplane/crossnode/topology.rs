//! The two nodes' shared pieces: the underlay link between their netns, the
//! routes to each other's pods, the host firewall loaded into them, and
//! what their host stack forwarded. Everything lives in the nodes' own
//! netns and goes with them.

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::BenchError;
use crate::dataplane::raw_veth::veth_between;
use crate::node::run_cmd;

/// The underlay device's name in both node netns.
pub const UNDERLAY: &str = "ul0";
/// The underlay's MTU (the pods' on the routed paths; VXLAN's pods get 50
/// bytes less).
pub const UNDERLAY_MTU: u32 = 1500;

/// The two ends' underlay addresses of link `pair` (`10.97.<pair>.1/24`,
/// `.2`): private to the nodes' netns.
pub fn underlay_addresses(pair: u8) -> [Ipv4Addr; 2] {
    [1, 2].map(|host| Ipv4Addr::new(10, 97, pair, host))
}

/// The netns name of a `/run/netns/<name>` path.
fn name_of(netns: &Path) -> Result<&str, BenchError> {
    netns
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| BenchError::Input {
            what: format!("netns path {} has no name", netns.display()),
        })
}

/// Runs `args` inside the netns at `netns` (`nsenter`), returning stdout.
fn run_in(netns: &Path, args: &[&str]) -> Result<String, BenchError> {
    let target = format!("--net={}", netns.display());
    let mut all = vec![target.as_str()];
    all.extend_from_slice(args);
    run_cmd("nsenter", &all)
}

/// Joins the node netns `a` and `b` with a veth pair ([`UNDERLAY`] in
/// each, [`underlay_addresses`] of `pair`) and turns IPv4 forwarding on in
/// both (the nodes route for their pods).
pub fn link_nodes(a: &Path, b: &Path, pair: u8) -> Result<[Ipv4Addr; 2], BenchError> {
    veth_between(name_of(a)?, name_of(b)?, UNDERLAY, UNDERLAY_MTU)?;
    let addresses = underlay_addresses(pair);
    for (ns, ip) in [a, b].into_iter().zip(addresses) {
        let cidr = format!("{ip}/24");
        let name = name_of(ns)?;
        run_cmd("ip", &["-n", name, "addr", "add", &cidr, "dev", UNDERLAY])?;
        run_cmd("ip", &["-n", name, "link", "set", UNDERLAY, "up"])?;
        run_cmd("ip", &["-n", name, "link", "set", "lo", "up"])?;
        run_in(ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    }
    Ok(addresses)
}

/// A route in the node netns `ns` to `dst` through the other node at `via`
/// on the underlay (flannel host-gw's route, what native routing installs).
pub fn route_via(ns: &Path, dst: &str, via: Ipv4Addr) -> Result<(), BenchError> {
    let via = via.to_string();
    run_cmd(
        "ip",
        &[
            "-n",
            name_of(ns)?,
            "route",
            "replace",
            dst,
            "via",
            &via,
            "dev",
            UNDERLAY,
        ],
    )
    .map(drop)
}

/// `Ip: ForwDatagrams` of `/proc/net/snmp` text: the packets the host
/// stack forwarded.
pub fn parse_forwarded(snmp: &str) -> Option<u64> {
    let mut ip_lines = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip_lines.next()?, ip_lines.next()?);
    let column = names
        .split_whitespace()
        .position(|n| n == "ForwDatagrams")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// The packets the host stack of the netns `ns` has forwarded.
pub fn host_forwarded(ns: &Path) -> Result<u64, BenchError> {
    let snmp = run_in(ns, &["cat", "/proc/net/snmp"])?;
    parse_forwarded(&snmp).ok_or_else(|| BenchError::Parse {
        what: "/proc/net/snmp",
        detail: "no Ip: ForwDatagrams".into(),
    })
}

/// `count` filter FORWARD rules that match nothing the benchmark sends
/// (TCP between addresses of 198.18.0.0/15, one pair per rule, so no two
/// rules are alike), in `iptables-restore` format.
pub fn firewall_rules(count: usize) -> String {
    let mut text = String::from("*filter\n");
    for i in 0..count {
        let (hi, lo) = ((i >> 8) & 0xff, i & 0xff);
        text.push_str(&format!(
            "-A FORWARD -s 198.18.{hi}.{lo}/32 -d 198.19.{hi}.{lo}/32 -p tcp --dport {} -j DROP\n",
            1024 + i % 60_000
        ));
    }
    text.push_str("COMMIT\n");
    text
}

/// Appends `rules` ([`firewall_rules`]) to the node netns `ns`'s FORWARD
/// chain (`iptables-restore --noflush`; the netns's own tables, gone with it).
pub fn load_firewall(ns: &Path, rules: &str) -> Result<(), BenchError> {
    let target = format!("--net={}", ns.display());
    let command = format!("nsenter {target} iptables-restore --noflush");
    let mut child = Command::new("nsenter")
        .args([target.as_str(), "iptables-restore", "--noflush"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| BenchError::io("spawn", "nsenter", source))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(rules.as_bytes())
            .map_err(|source| BenchError::io("write rules to", "iptables-restore", source))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|source| BenchError::io("wait for", "iptables-restore", source))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// The FORWARD chain's rule count in the netns `ns`.
pub fn forward_rules(ns: &Path) -> Result<usize, BenchError> {
    let listing = run_in(ns, &["iptables", "-S", "FORWARD"])?;
    Ok(listing.lines().filter(|l| l.starts_with("-A ")).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_packets_are_read_from_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams OutRequests\n\
                    Ip: 1 64 1000 0 0 777 900\n\
                    Icmp: InMsgs InErrors\nIcmp: 3 0\n";
        assert_eq!(parse_forwarded(snmp), Some(777));
        assert_eq!(parse_forwarded("Ip: Forwarding\nIp: 1\n"), None);
        assert_eq!(parse_forwarded(""), None);
    }

    #[test]
    fn firewall_rules_are_distinct_and_counted() {
        let text = firewall_rules(300);
        let rules: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("-A FORWARD"))
            .collect();
        assert_eq!(rules.len(), 300);
        let distinct: std::collections::BTreeSet<&&str> = rules.iter().collect();
        assert_eq!(distinct.len(), 300);
        assert!(text.starts_with("*filter\n") && text.ends_with("COMMIT\n"));
        assert!(rules[257].contains("198.18.1.1/32"), "{}", rules[257]);
    }

    #[test]
    fn underlay_addresses_are_per_pair() {
        assert_eq!(
            underlay_addresses(3),
            [Ipv4Addr::new(10, 97, 3, 1), Ipv4Addr::new(10, 97, 3, 2)]
        );
    }
}
