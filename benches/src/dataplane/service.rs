//! The Service paths (issue 11): the client pod dials a ClusterIP whose only
//! endpoint is the server pod, through netfilter rules of the shape
//! kube-proxy writes in its iptables mode, installed in the node netns with
//! `iptables-restore --noflush` (the netns takes them along when it goes):
//!
//! - nat: `KUBE-SERVICES` jumped to from PREROUTING and OUTPUT; per Service
//!   port a `KUBE-SVC-*` chain (masquerade mark for sources outside the pod
//!   subnet, then the endpoint) and a `KUBE-SEP-*` chain (hairpin mark,
//!   DNAT to the pod); `KUBE-MARK-MASQ` (mark 0x4000), `KUBE-POSTROUTING`
//!   (masquerade marked traffic) and the empty `KUBE-NODEPORTS` last;
//! - filter: `KUBE-FORWARD` from FORWARD (drop conntrack-invalid, accept
//!   marked, accept RELATED,ESTABLISHED).
//!
//! The Service has two ports, the iperf3 one and the request/response one,
//! each mapped to the same port on the pod. The rules' own counters
//! (`iptables-save -c`) show that the traffic went through them: a DNAT
//! rule counts the first packet of each connection, the conntrack rule of
//! `KUBE-FORWARD` every forwarded packet of an established connection.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::{iperf, netns};
use crate::BenchError;
use crate::node::{NodeNetns, run_id};

/// The request/response port of a Service path (the others pick a free one).
pub const RR_PORT: u16 = 5202;

/// The Service's ports (name, port), the same on the ClusterIP and the pod.
pub const PORTS: [(&str, u16); 2] = [("iperf", iperf::PORT), ("rr", RR_PORT)];

/// The ClusterIP of a run with id `run` (hex, as [`run_id`] makes it): in
/// 10.96.0.0/12, as a cluster's service CIDR; the last byte never 0 or 255.
pub fn cluster_ip_for(run: &str) -> Ipv4Addr {
    let v = u32::from_str_radix(run, 16).unwrap_or(0);
    Ipv4Addr::new(
        10,
        96 + ((v >> 20) & 0xf) as u8,
        ((v >> 12) & 0xff) as u8,
        1 + (v % 254) as u8,
    )
}

/// The rules of one Service (a ClusterIP with the server pod as its one
/// endpoint) in one node netns.
#[derive(Debug, Clone)]
pub struct KubeProxyRules {
    cluster_ip: Ipv4Addr,
    backend: Ipv4Addr,
    pod_cidr: String,
    netns: PathBuf,
}

/// What the rules counted (cumulative, or a difference from [`RuleCounters::since`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RuleCounters {
    /// Per Service port: packets its DNAT rule translated (the first packet
    /// of each connection).
    pub dnat_packets: Vec<(u16, u64)>,
    /// Packets `KUBE-FORWARD` accepted as part of established connections.
    pub forwarded_packets: u64,
    /// Their bytes.
    pub forwarded_bytes: u64,
}

impl RuleCounters {
    /// The counts since `before`.
    pub fn since(&self, before: &RuleCounters) -> RuleCounters {
        let earlier = |port: u16| {
            before
                .dnat_packets
                .iter()
                .find(|(p, _)| *p == port)
                .map_or(0, |(_, n)| *n)
        };
        RuleCounters {
            dnat_packets: self
                .dnat_packets
                .iter()
                .map(|&(port, n)| (port, n.saturating_sub(earlier(port))))
                .collect(),
            forwarded_packets: self
                .forwarded_packets
                .saturating_sub(before.forwarded_packets),
            forwarded_bytes: self.forwarded_bytes.saturating_sub(before.forwarded_bytes),
        }
    }
}

/// A kube-proxy-style chain name: `KUBE-<kind>-` and 16 characters derived
/// from the run, the port's name and the kind (kube-proxy hashes the
/// service port's name likewise).
fn chain(kind: &str, port_name: &str) -> String {
    let mut h = DefaultHasher::new();
    (run_id(), port_name, kind).hash(&mut h);
    format!("KUBE-{kind}-{:016X}", h.finish())
}

/// The packet and byte counters at the start of an `iptables-save -c`
/// line (`[12:720] -A ...`), and the rest of the line.
fn counted(line: &str) -> Option<(u64, u64, &str)> {
    let rest = line.strip_prefix('[')?;
    let (counts, rest) = rest.split_once(']')?;
    let (packets, bytes) = counts.split_once(':')?;
    Some((
        packets.parse().ok()?,
        bytes.parse().ok()?,
        rest.trim_start(),
    ))
}

/// The counters of the first rule of `save` (`iptables-save -c` output)
/// appended to `chain` whose text contains every one of `needles`.
fn rule_counters(save: &str, chain: &str, needles: &[&str]) -> Result<(u64, u64), BenchError> {
    let head = format!("-A {chain} ");
    save.lines()
        .filter_map(counted)
        .find(|(_, _, rule)| rule.starts_with(&head) && needles.iter().all(|n| rule.contains(n)))
        .map(|(p, b, _)| (p, b))
        .ok_or_else(|| BenchError::Parse {
            what: "iptables-save -c",
            detail: format!("no rule in {chain} with {needles:?}"),
        })
}

impl KubeProxyRules {
    /// The rules for `cluster_ip` → `backend` on a node whose pods are in
    /// `pod_cidr`, for the node netns at `netns` (nothing installed yet).
    pub fn new(
        cluster_ip: Ipv4Addr,
        backend: Ipv4Addr,
        pod_cidr: &str,
        netns: &Path,
    ) -> KubeProxyRules {
        KubeProxyRules {
            cluster_ip,
            backend,
            pod_cidr: pod_cidr.to_owned(),
            netns: netns.to_owned(),
        }
    }

    /// Installs this run's Service with `backend` as its endpoint in `node`.
    pub fn install(node: &NodeNetns, backend: Ipv4Addr) -> Result<KubeProxyRules, BenchError> {
        let rules = KubeProxyRules::new(
            cluster_ip_for(run_id()),
            backend,
            node.subnet(),
            node.netns_path(),
        );
        let input = rules.restore_input();
        run_in(
            &rules.netns,
            "iptables-restore",
            &["-w", "5", "--noflush"],
            Some(&input),
        )?;
        Ok(rules)
    }

    /// The ClusterIP.
    pub fn cluster_ip(&self) -> Ipv4Addr {
        self.cluster_ip
    }

    /// The `iptables-restore` input: the rules above.
    pub fn restore_input(&self) -> String {
        let (svc_ip, pod, cidr) = (self.cluster_ip, self.backend, &self.pod_cidr);
        let cmt = |text: &str| format!("-m comment --comment \"{text}\"");
        let mut chains = vec![
            ":KUBE-SERVICES - [0:0]".to_owned(),
            ":KUBE-NODEPORTS - [0:0]".into(),
            ":KUBE-POSTROUTING - [0:0]".into(),
            ":KUBE-MARK-MASQ - [0:0]".into(),
        ];
        let mut rules = vec![
            format!(
                "-A PREROUTING {} -j KUBE-SERVICES",
                cmt("kubernetes service portals")
            ),
            format!(
                "-A OUTPUT {} -j KUBE-SERVICES",
                cmt("kubernetes service portals")
            ),
            format!(
                "-A POSTROUTING {} -j KUBE-POSTROUTING",
                cmt("kubernetes postrouting rules")
            ),
            "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000".into(),
            "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN".into(),
            "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0".into(),
            format!(
                "-A KUBE-POSTROUTING {} -j MASQUERADE --random-fully",
                cmt("kubernetes service traffic requiring SNAT")
            ),
        ];
        for (name, port) in PORTS {
            let (svc, sep) = (chain("SVC", name), chain("SEP", name));
            let what = format!("sarena-bench/svc:{name}");
            chains.push(format!(":{svc} - [0:0]"));
            chains.push(format!(":{sep} - [0:0]"));
            rules.push(format!(
                "-A KUBE-SERVICES -d {svc_ip}/32 -p tcp {} -m tcp --dport {port} -j {svc}",
                cmt(&format!("{what} cluster IP"))
            ));
            rules.push(format!(
                "-A {svc} ! -s {cidr} -d {svc_ip}/32 -p tcp {} -m tcp --dport {port} -j KUBE-MARK-MASQ",
                cmt(&format!("{what} cluster IP"))
            ));
            rules.push(format!(
                "-A {svc} {} -j {sep}",
                cmt(&format!("{what} -> {pod}:{port}"))
            ));
            rules.push(format!(
                "-A {sep} -s {pod}/32 {} -j KUBE-MARK-MASQ",
                cmt(&what)
            ));
            rules.push(format!(
                "-A {sep} -p tcp {} -m tcp -j DNAT --to-destination {pod}:{port}",
                cmt(&what)
            ));
        }
        rules.push(format!(
            "-A KUBE-SERVICES {} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
            cmt("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
        ));
        let forward = [
            ":KUBE-FORWARD - [0:0]".to_owned(),
            format!(
                "-A FORWARD {} -j KUBE-FORWARD",
                cmt("kubernetes forwarding rules")
            ),
            "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP".into(),
            format!(
                "-A KUBE-FORWARD {} -m mark --mark 0x4000/0x4000 -j ACCEPT",
                cmt("kubernetes forwarding rules")
            ),
            format!(
                "-A KUBE-FORWARD {} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
                cmt("kubernetes forwarding conntrack rule")
            ),
        ];
        format!(
            "*nat\n{}\n{}\nCOMMIT\n*filter\n{}\nCOMMIT\n",
            chains.join("\n"),
            rules.join("\n"),
            forward.join("\n")
        )
    }

    /// The rules' counters now.
    pub fn counters(&self) -> Result<RuleCounters, BenchError> {
        let nat = run_in(&self.netns, "iptables-save", &["-c", "-t", "nat"], None)?;
        let filter = run_in(&self.netns, "iptables-save", &["-c", "-t", "filter"], None)?;
        self.parse_counters(&nat, &filter)
    }

    /// This Service's counters in `iptables-save -c` output of the nat and
    /// the filter table.
    pub fn parse_counters(&self, nat: &str, filter: &str) -> Result<RuleCounters, BenchError> {
        let mut dnat_packets = Vec::new();
        for (name, port) in PORTS {
            let to = format!("--to-destination {}:{port}", self.backend);
            let (packets, _) = rule_counters(nat, &chain("SEP", name), &["-j DNAT", &to])?;
            dnat_packets.push((port, packets));
        }
        let (forwarded_packets, forwarded_bytes) = rule_counters(
            filter,
            "KUBE-FORWARD",
            &["RELATED,ESTABLISHED", "-j ACCEPT"],
        )?;
        Ok(RuleCounters {
            dnat_packets,
            forwarded_packets,
            forwarded_bytes,
        })
    }
}

/// Runs `program` inside the netns at `netns` with `stdin` (or nothing) on
/// its standard input; non-zero exit is an error with its stderr.
fn run_in(
    netns: &Path,
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, BenchError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    netns::command_in(netns, &mut cmd)?;
    let mut child = cmd
        .spawn()
        .map_err(|source| BenchError::io("spawn", program, source))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Dropping the pipe at the end of this block closes it: EOF.
        pipe.write_all(text.as_bytes())
            .map_err(|source| BenchError::io("write the standard input of", program, source))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|source| BenchError::io("wait for", program, source))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command: format!("{program} {} (in {})", args.join(" "), netns.display()),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> KubeProxyRules {
        KubeProxyRules::new(
            Ipv4Addr::new(10, 100, 7, 9),
            Ipv4Addr::new(10, 195, 0, 3),
            "10.195.0.0/16",
            Path::new("/run/netns/x"),
        )
    }

    #[test]
    fn the_cluster_ip_is_in_the_service_cidr_and_follows_the_run() {
        for run in ["000000", "ffffff", "a1b2c3", "not hex"] {
            let ip = cluster_ip_for(run);
            let [a, b, _, d] = ip.octets();
            assert_eq!(a, 10, "{ip}");
            assert!((96..112).contains(&b), "{ip}");
            assert!(d != 0 && d != 255, "{ip}");
        }
        assert_ne!(cluster_ip_for("a1b2c3"), cluster_ip_for("a1b2c4"));
    }

    #[test]
    fn the_rules_have_kube_proxys_shape() {
        let text = rules().restore_input();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "*nat");
        assert_eq!(lines.iter().filter(|l| **l == "COMMIT").count(), 2);
        for hook in ["PREROUTING", "OUTPUT"] {
            assert!(
                text.contains(&format!(
                    "-A {hook} -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"
                )),
                "{text}"
            );
        }
        let (svc, sep) = (chain("SVC", "rr"), chain("SEP", "rr"));
        assert_eq!(svc.len(), "KUBE-SVC-".len() + 16);
        assert_ne!(svc, chain("SVC", "iperf"));
        // The service rule, the masquerade mark for outside sources, the
        // endpoint, the hairpin mark, the DNAT: in this order.
        let wanted = [
            "-A KUBE-SERVICES -d 10.100.7.9/32 -p tcp".to_string(),
            format!("--dport {RR_PORT} -j {svc}"),
            format!("-A {svc} ! -s 10.195.0.0/16 -d 10.100.7.9/32"),
            format!("-A {svc} -m comment"),
            format!("-A {sep} -s 10.195.0.3/32"),
            format!("-A {sep} -p tcp"),
            format!("-j DNAT --to-destination 10.195.0.3:{RR_PORT}"),
        ];
        let mut at = 0;
        for w in &wanted {
            let found = text[at..]
                .find(w.as_str())
                .unwrap_or_else(|| panic!("{w} after {at}: {text}"));
            at += found;
        }
        // The nodeports jump is the last rule of KUBE-SERVICES.
        let last = lines
            .iter()
            .rposition(|l| l.starts_with("-A KUBE-SERVICES"))
            .unwrap();
        assert!(lines[last].ends_with("-j KUBE-NODEPORTS"), "{text}");
        assert!(text.contains("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN"));
        assert!(
            text.contains("*filter\n:KUBE-FORWARD - [0:0]\n-A FORWARD"),
            "{text}"
        );
    }

    #[test]
    fn counters_are_read_from_iptables_save() {
        let r = rules();
        let (iperf_sep, rr_sep) = (chain("SEP", "iperf"), chain("SEP", "rr"));
        let nat = format!(
            "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [40:2400]\n\
             [9:540] -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
             [0:0] -A {iperf_sep} -s 10.195.0.3/32 -m comment --comment x -j KUBE-MARK-MASQ\n\
             [6:360] -A {iperf_sep} -p tcp -m comment --comment x -m tcp -j DNAT --to-destination 10.195.0.3:5201\n\
             [3:180] -A {rr_sep} -p tcp -m comment --comment x -m tcp -j DNAT --to-destination 10.195.0.3:5202\n\
             COMMIT\n"
        );
        let filter = "*filter\n[0:0] -A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n\
                      [5000:7000000] -A KUBE-FORWARD -m comment --comment \"c\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n";
        let c = r.parse_counters(&nat, filter).unwrap();
        assert_eq!(c.dnat_packets, vec![(5201, 6), (5202, 3)]);
        assert_eq!((c.forwarded_packets, c.forwarded_bytes), (5000, 7_000_000));
        let before = RuleCounters {
            dnat_packets: vec![(5201, 2), (5202, 1)],
            forwarded_packets: 1000,
            forwarded_bytes: 1_000_000,
        };
        let d = c.since(&before);
        assert_eq!(d.dnat_packets, vec![(5201, 4), (5202, 2)]);
        assert_eq!(d.forwarded_bytes, 6_000_000);
        // A missing rule (another backend, the rules gone) is an error.
        let other = nat.replace("10.195.0.3:5202", "10.195.0.4:5202");
        let e = r.parse_counters(&other, filter).unwrap_err();
        assert!(e.to_string().contains(&rr_sep), "{e}");
        assert!(r.parse_counters(&nat, "*filter\nCOMMIT\n").is_err());
        assert_eq!(counted("[x:1] -A"), None);
        assert_eq!(counted("-A X"), None);
    }
}
