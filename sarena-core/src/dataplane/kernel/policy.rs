//! NetworkPolicy on the kernel dataplane, with nftables: the same
//! [`CompiledPolicy`] the eBPF programs enforce, as sets in a table of its
//! own (`inet sarena_policy` by default).
//!
//! Where: one `postrouting` filter chain at priority `srcnat + 10`, after
//! every NAT of the packet (kube-proxy's Service DNAT in `prerouting` and
//! `output`, its SNAT and the masquerading in `postrouting`), so a
//! Service's traffic is judged on its backend and port, and traffic that
//! kube-proxy rewrote to come from the node is the node's. Every path a
//! pod's packet takes out of or into its veth crosses it: routed between
//! two pods of the node, to or from another node (both routing modes),
//! from the host itself. Egress is judged on the packet's input device
//! (the pod's host veth), ingress on its output device; a packet between
//! two pods of the node is judged both ways in one pass.
//!
//! What: conntrack's `established`/`related` pass first (replies, and
//! ICMP errors about allowed flows); then a pod isolated for the
//! direction (sets `ingress_isolated`, `egress_isolated` of host veth
//! ifindexes) needs its peer to be the node (an address of the node —
//! `fib saddr type local` — or one the engine gives the host identity;
//! IPv6 link-local sources for neighbour discovery) or an element of its
//! allow sets: `in_any4` (`ifindex . address`: any protocol) and `in4`
//! (`ifindex . address . protocol . port`), and their IPv6 and egress
//! (`out_…`) twins. The engine's identities are not in the kernel: the
//! address → identity table is flattened into disjoint address ranges
//! ([`super::policy_ranges`]) and each allow entry becomes the ranges of
//! its peer identity. Denied packets are counted (`ingress_denied`,
//! `egress_denied`) and dropped.
//!
//! How it changes: every change of the compiled state, and every attach
//! and detach while a policy isolates some pod, rewrites the sets in one
//! `nft -f` transaction, so no packet ever sees half of a change; the
//! chains and counters stay. With no isolated pod the table is removed
//! (nothing in the packet path). The table is kernel state: a restarted
//! daemon keeps enforcing the last state until its engine has the
//! cluster's, and a pod attached before that is isolated both ways when a
//! policy was enforced (fail closed).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use sarena_common::policy::IDENTITY_HOST;

use super::policy_ranges::{Allowed, allowed, ranges_of, segments};
use crate::api::Endpoint;
use crate::policy::{CompiledPolicy, Direction, EndpointPolicy, PodKey};

/// The table's name for the dataplane's `nft_table`.
pub(crate) fn table_name(nft_table: &str) -> String {
    format!("{nft_table}_policy")
}

/// The families: nft's name for the address field and type, the set suffix.
const FAMILIES: [(&str, &str, &str, bool); 2] = [
    ("ip", "ipv4_addr", "4", true),
    ("ip6", "ipv6_addr", "6", false),
];

/// The directions: the set prefix, the device the endpoint is (the
/// packet's output device for ingress), the peer's address field.
const DIRECTIONS: [(Direction, &str, &str, &str); 2] = [
    (Direction::Ingress, "in", "oif", "saddr"),
    (Direction::Egress, "out", "iif", "daddr"),
];

/// What the policy side of the kernel dataplane knows.
#[derive(Debug, Default)]
pub(crate) struct KernelPolicy {
    /// The engine's last state; `None` until the first since the start.
    compiled: Option<Arc<CompiledPolicy>>,
    /// Attached endpoints: host veth ifindex → pod (`None`: not a
    /// Kubernetes pod, no policy selects it).
    endpoints: BTreeMap<u32, Option<PodKey>>,
    /// The table was there at set-up: a policy was enforced before this
    /// start, so an endpoint attached before the engine's first state is
    /// isolated both ways.
    pub(crate) enforced_before: bool,
}

/// One endpoint's isolation and, when known, its entries.
struct Wanted<'a> {
    ingress: bool,
    egress: bool,
    policy: Option<&'a EndpointPolicy>,
}

impl KernelPolicy {
    /// `endpoint` is attached (its pod from its spec).
    pub(crate) fn attached(&mut self, endpoint: &Endpoint) {
        let pod = match (&endpoint.spec.pod.namespace, &endpoint.spec.pod.name) {
            (Some(namespace), Some(name)) => Some(PodKey::new(namespace, name)),
            _ => None,
        };
        self.endpoints.insert(endpoint.spec.host_ifindex, pod);
    }

    /// `endpoint` is gone.
    pub(crate) fn detached(&mut self, endpoint: &Endpoint) {
        self.endpoints.remove(&endpoint.spec.host_ifindex);
    }

    /// Exactly `endpoints` are attached.
    pub(crate) fn set_endpoints(&mut self, endpoints: &[Endpoint]) {
        self.endpoints.clear();
        for endpoint in endpoints {
            self.attached(endpoint);
        }
    }

    /// The engine's new state.
    pub(crate) fn set_compiled(&mut self, compiled: Arc<CompiledPolicy>) {
        self.compiled = Some(compiled);
    }

    /// Every attached endpoint's isolation and entries (the compiled
    /// state's, or for a pod it has not seen, its namespace's isolation
    /// without entries).
    fn wanted<'a>(&'a self, compiled: &'a CompiledPolicy) -> BTreeMap<u32, Wanted<'a>> {
        let mut out = BTreeMap::new();
        for (ifindex, pod) in &self.endpoints {
            let Some(pod) = pod else { continue };
            let wanted = match compiled.endpoints.get(pod) {
                Some(policy) => Wanted {
                    ingress: policy.ingress_isolated,
                    egress: policy.egress_isolated,
                    policy: Some(policy),
                },
                None => {
                    let (ingress, egress) = compiled
                        .namespace_isolation
                        .get(&pod.namespace)
                        .copied()
                        .unwrap_or((false, false));
                    Wanted {
                        ingress,
                        egress,
                        policy: None,
                    }
                }
            };
            if wanted.ingress || wanted.egress {
                out.insert(*ifindex, wanted);
            }
        }
        out
    }

    /// The script that makes the table what the compiled state asks for
    /// the attached endpoints (one transaction); `None` before the
    /// engine's first state.
    pub(crate) fn script(&self, table: &str) -> Option<String> {
        let compiled = self.compiled.as_ref()?;
        let wanted = self.wanted(compiled);
        if wanted.is_empty() {
            return Some(remove_script(table));
        }
        let mut script = structure(table);
        let mut elements: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (ifindex, w) in &wanted {
            if w.ingress {
                elements
                    .entry("ingress_isolated".into())
                    .or_default()
                    .push(ifindex.to_string());
            }
            if w.egress {
                elements
                    .entry("egress_isolated".into())
                    .or_default()
                    .push(ifindex.to_string());
            }
        }
        for (_, _, suffix, v4) in FAMILIES {
            let segments = segments(compiled, v4);
            let host: Vec<String> = ranges_of(&segments, IDENTITY_HOST)
                .iter()
                .map(|r| r.render())
                .collect();
            elements.insert(format!("host{suffix}"), host);
            for (direction, prefix, _, _) in DIRECTIONS {
                for (ifindex, w) in &wanted {
                    let isolated = match direction {
                        Direction::Ingress => w.ingress,
                        Direction::Egress => w.egress,
                    };
                    let Some(policy) = w.policy.filter(|_| isolated) else {
                        continue;
                    };
                    let a = allowed(&segments, policy.entries.keys(), direction);
                    push_elements(&mut elements, (prefix, suffix), *ifindex, &a);
                }
            }
        }
        for set in set_names() {
            let _ = writeln!(script, "flush set inet {table} {set}");
            if let Some(list) = elements.get(&set).filter(|l| !l.is_empty()) {
                let _ = writeln!(
                    script,
                    "add element inet {table} {set} {{ {} }}",
                    list.join(", ")
                );
            }
        }
        Some(script)
    }
}

/// `allowed`'s elements of endpoint `ifindex` into the sets
/// `{prefix}_any{suffix}` and `{prefix}{suffix}`.
fn push_elements(
    elements: &mut BTreeMap<String, Vec<String>>,
    (prefix, suffix): (&str, &str),
    ifindex: u32,
    allowed: &Allowed,
) {
    let any = elements.entry(format!("{prefix}_any{suffix}")).or_default();
    any.extend(
        allowed
            .any
            .iter()
            .map(|r| format!("{ifindex} . {}", r.render())),
    );
    let by_port = elements.entry(format!("{prefix}{suffix}")).or_default();
    for (proto, list) in &allowed.ports {
        for (range, ports) in list {
            for (lo, hi) in ports {
                let ports = if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                };
                by_port.push(format!(
                    "{ifindex} . {} . {proto} . {ports}",
                    range.render()
                ));
            }
        }
    }
}

/// Every set of the table.
fn set_names() -> Vec<String> {
    let mut names = vec![
        "ingress_isolated".to_string(),
        "egress_isolated".to_string(),
    ];
    for (_, _, suffix, _) in FAMILIES {
        names.push(format!("host{suffix}"));
        for (_, prefix, _, _) in DIRECTIONS {
            names.push(format!("{prefix}_any{suffix}"));
            names.push(format!("{prefix}{suffix}"));
        }
    }
    names
}

/// The table, its sets, counters and chains (created when missing; the
/// chains' rules replaced, set contents and counters kept).
fn structure(table: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "add table inet {table}");
    for set in ["ingress_isolated", "egress_isolated"] {
        let _ = writeln!(s, "add set inet {table} {set} {{ type iface_index; }}");
    }
    for (_, addr_type, suffix, _) in FAMILIES {
        let _ = writeln!(
            s,
            "add set inet {table} host{suffix} {{ type {addr_type}; flags interval; }}"
        );
        for (_, prefix, _, _) in DIRECTIONS {
            let _ = writeln!(
                s,
                "add set inet {table} {prefix}_any{suffix} {{ type iface_index . {addr_type}; flags interval; }}\n\
                 add set inet {table} {prefix}{suffix} {{ type iface_index . {addr_type} . inet_proto . inet_service; flags interval; }}"
            );
        }
    }
    let _ = writeln!(
        s,
        "add counter inet {table} ingress_denied\n\
         add counter inet {table} egress_denied\n\
         add chain inet {table} postrouting {{ type filter hook postrouting priority srcnat + 10; policy accept; }}\n\
         add chain inet {table} ingress\n\
         add chain inet {table} egress\n\
         flush chain inet {table} postrouting\n\
         flush chain inet {table} ingress\n\
         flush chain inet {table} egress\n\
         add rule inet {table} postrouting ct state established,related accept\n\
         add rule inet {table} postrouting iif @egress_isolated jump egress\n\
         add rule inet {table} postrouting oif @ingress_isolated jump ingress\n\
         add rule inet {table} ingress fib saddr type local return\n\
         add rule inet {table} ingress ip6 saddr fe80::/10 return"
    );
    for (direction, prefix, device, field) in DIRECTIONS {
        let chain = match direction {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        };
        for (family, _, suffix, _) in FAMILIES {
            let _ = writeln!(
                s,
                "add rule inet {table} {chain} {family} {field} @host{suffix} return\n\
                 add rule inet {table} {chain} {device} . {family} {field} @{prefix}_any{suffix} return\n\
                 add rule inet {table} {chain} {device} . {family} {field} . meta l4proto . th dport @{prefix}{suffix} return"
            );
        }
        let _ = writeln!(
            s,
            "add rule inet {table} {chain} counter name {chain}_denied drop"
        );
    }
    s
}

/// Isolates the endpoint of `ifindex` both ways with no allow entry (an
/// endpoint attached before the engine's first state after a restart).
pub(crate) fn fail_closed_script(table: &str, ifindex: u32) -> String {
    let mut s = structure(table);
    for set in ["ingress_isolated", "egress_isolated"] {
        let _ = writeln!(s, "add element inet {table} {set} {{ {ifindex} }}");
    }
    s
}

/// Removes the table (whether or not it exists).
pub(crate) fn remove_script(table: &str) -> String {
    format!("add table inet {table}\ndelete table inet {table}\n")
}

/// Whether the table exists.
pub(crate) async fn exists(table: &str) -> bool {
    let args = ["table", "inet", table].map(String::from).to_vec();
    super::nft::list_json_off_worker(args).await.is_ok()
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
