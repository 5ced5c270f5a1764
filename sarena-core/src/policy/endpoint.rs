//! One endpoint's compiled policy: the union of the policies selecting it,
//! as allow entries (peer identity × protocol × port prefix → rule).
//! Everything here depends on the endpoint's class only (namespace,
//! labels, named ports), so endpoints of one class share the result.

use std::collections::BTreeMap;

use super::compiled::{Direction, EndpointPolicy, EntryKey, Identity, RuleId};
use super::context::{Context, PeerSet};
use super::identities::ClassKey;
use super::model::{PortRef, PortSpec, Rule};
use super::ports::{PortPrefix, port_prefixes, resolve_named};

/// Collects entries; the first rule to claim a key keeps it.
struct Entries {
    map: BTreeMap<EntryKey, RuleId>,
    direction: Direction,
    rule: RuleId,
}

impl Entries {
    fn add(&mut self, peer: Identity, proto: u8, port: PortPrefix) {
        let key = EntryKey {
            direction: self.direction,
            peer,
            proto,
            port: port.port,
            port_bits: port.bits,
        };
        self.map.entry(key).or_insert(self.rule);
    }

    fn add_peers(&mut self, peers: &PeerSet, proto: u8, ports: &[PortPrefix]) {
        let any = [0];
        let ids: &[Identity] = match peers {
            PeerSet::Any => &any,
            PeerSet::Ids(ids) => ids,
        };
        for peer in ids {
            for port in ports {
                self.add(*peer, proto, *port);
            }
        }
    }
}

/// Every port of a protocol (and, with protocol 0, every protocol).
const ANY_PORT: PortPrefix = PortPrefix { port: 0, bits: 0 };

impl Context<'_> {
    /// The compiled policy of an endpoint of class `class`.
    pub(crate) fn class_policy(&mut self, class: &ClassKey) -> EndpointPolicy {
        let mut out = EndpointPolicy::default();
        let mut entries = Entries {
            map: BTreeMap::new(),
            direction: Direction::Ingress,
            rule: RuleId(0),
        };
        let selecting: Vec<usize> = (self.policies_by_ns.get(class.namespace.as_str()))
            .into_iter()
            .flatten()
            .copied()
            .filter(|i| self.policies[*i].pod_selector.matches(&class.labels))
            .collect();
        for pi in selecting {
            let p = self.policies[pi];
            out.policies.push((p.namespace.clone(), p.name.clone()));
            for (direction, isolates, rules) in [
                (Direction::Ingress, p.ingress_isolation, &p.ingress),
                (Direction::Egress, p.egress_isolation, &p.egress),
            ] {
                if !isolates {
                    // Rules of a direction the policy does not isolate are
                    // not in force (policyTypes without it).
                    continue;
                }
                match direction {
                    Direction::Ingress => out.ingress_isolated = true,
                    Direction::Egress => out.egress_isolated = true,
                }
                for (index, rule) in rules.iter().enumerate() {
                    let Some(id) = self.policy_rules[pi].of(direction).get(index) else {
                        continue;
                    };
                    entries.direction = direction;
                    entries.rule = *id;
                    let peers = self.peer_set(pi, direction, index);
                    self.rule_entries(class, rule, &peers, &mut entries);
                }
            }
        }
        out.entries = entries.map;
        out
    }

    /// The entries of one rule for an endpoint of class `class`.
    fn rule_entries(&self, class: &ClassKey, rule: &Rule, peers: &PeerSet, out: &mut Entries) {
        if rule.ports.is_empty() {
            out.add_peers(peers, 0, &[ANY_PORT]);
            return;
        }
        for spec in &rule.ports {
            let proto = spec.protocol.number();
            match &spec.port {
                None => out.add_peers(peers, proto, &[ANY_PORT]),
                Some(PortRef::Number(n)) => out.add_peers(
                    peers,
                    proto,
                    &port_prefixes(*n, spec.end_port.unwrap_or(*n)),
                ),
                Some(PortRef::Named(name)) => self.named_entries(class, spec, name, peers, out),
            }
        }
    }

    /// The entries of a named port: ingress resolves it on the endpoint's
    /// own ports; egress on each peer pod's (any peer: every pod having
    /// it; prefixes: none).
    fn named_entries(
        &self,
        class: &ClassKey,
        spec: &PortSpec,
        name: &str,
        peers: &PeerSet,
        out: &mut Entries,
    ) {
        let proto = spec.protocol.number();
        let full = |port| PortPrefix { port, bits: 16 };
        match out.direction {
            Direction::Ingress => {
                let ports: Vec<PortPrefix> = resolve_named(&class.named_ports, name, spec.protocol)
                    .into_iter()
                    .map(full)
                    .collect();
                out.add_peers(peers, proto, &ports);
            }
            Direction::Egress => match peers {
                PeerSet::Any => {
                    let key = (name.to_string(), spec.protocol);
                    for (id, port) in self.named_index.get(&key).into_iter().flatten() {
                        out.add(*id, proto, full(*port));
                    }
                }
                PeerSet::Ids(ids) => {
                    for id in ids {
                        let Some(c) = self.identity_class.get(id) else {
                            continue;
                        };
                        let named = &self.classes[*c].key.named_ports;
                        for port in resolve_named(named, name, spec.protocol) {
                            out.add(*id, proto, full(port));
                        }
                    }
                }
            },
        }
    }
}
