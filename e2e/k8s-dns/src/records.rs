//! [`resolve`]: the answer to one question from a [`View`], following the
//! Kubernetes DNS-Based Service Discovery specification 1.1.0. Pure: no
//! I/O, no clock.
//!
//! Served zones: the cluster zone (`cluster.local.` by default) and the
//! reverse zones `in-addr.arpa.` and `ip6.arpa.` as a whole (PTR of
//! ClusterIPs and headless endpoints; any other address is NXDOMAIN). A
//! name outside them is REFUSED: the test cluster has no upstream to
//! forward to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use crate::view::{Key, ServiceKind, View};

/// The version of the specification this server implements, served as the
/// TXT record of `dns-version.<zone>`.
pub const SCHEMA_VERSION: &str = "1.1.0";

/// The zone served and the TTL of every record.
#[derive(Clone, Debug)]
pub struct Zone {
    /// The cluster domain, lowercase and fully qualified (`cluster.local.`).
    pub origin: Name,
    /// TTL of every record, the SOA's minimum (negative caching) too.
    pub ttl: u32,
    /// The SOA serial.
    pub serial: u32,
}

/// The outcome of one question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// NoError, NXDomain or Refused.
    pub rcode: ResponseCode,
    /// Whether the server is authoritative for the name (AA).
    pub authoritative: bool,
    /// The answer section.
    pub answers: Vec<Record>,
    /// The authority section (the SOA of a negative answer).
    pub authorities: Vec<Record>,
    /// The additional section (the addresses of SRV targets).
    pub additionals: Vec<Record>,
}

impl Answer {
    fn refused() -> Self {
        Self {
            rcode: ResponseCode::Refused,
            authoritative: false,
            answers: vec![],
            authorities: vec![],
            additionals: vec![],
        }
    }
}

/// The records owned by one existing name, with the additional records
/// that go with its SRV records.
#[derive(Default)]
struct Node {
    records: Vec<Record>,
    additionals: Vec<Record>,
}

/// The answer to `qname`/`qtype` (case-insensitive) from `view`.
pub fn resolve(view: &View, zone: &Zone, qname: &Name, qtype: RecordType) -> Answer {
    let mut qname = qname.to_lowercase();
    qname.set_fqdn(true);
    let (apex, node) = if zone.origin.zone_of(&qname) {
        let labels = relative_labels(&qname, &zone.origin);
        (
            zone.origin.clone(),
            cluster_node(view, zone, &qname, &labels),
        )
    } else if let Some(apex) = reverse_apex(&qname) {
        let labels = relative_labels(&qname, &apex);
        let node = reverse_node(view, zone, &qname, &apex, &labels);
        (apex, node)
    } else {
        return Answer::refused();
    };
    let soa = soa(zone, &apex);
    let Some(node) = node else {
        return Answer {
            rcode: ResponseCode::NXDomain,
            authoritative: true,
            answers: vec![],
            authorities: vec![soa],
            additionals: vec![],
        };
    };
    let answers: Vec<Record> = node
        .records
        .into_iter()
        .filter(|r| {
            qtype == RecordType::ANY
                || r.record_type() == qtype
                || r.record_type() == RecordType::CNAME
        })
        .collect();
    let has_srv = answers.iter().any(|r| r.record_type() == RecordType::SRV);
    let additionals = if has_srv { node.additionals } else { vec![] };
    let authorities = if answers.is_empty() {
        vec![soa]
    } else {
        vec![]
    };
    Answer {
        rcode: ResponseCode::NoError,
        authoritative: true,
        answers,
        authorities,
        additionals,
    }
}

/// The labels of `name` below `apex`, lowercase, leftmost first.
fn relative_labels(name: &Name, apex: &Name) -> Vec<String> {
    let below = usize::from(name.num_labels()).saturating_sub(usize::from(apex.num_labels()));
    name.iter()
        .take(below)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect()
}

fn reverse_apex(name: &Name) -> Option<Name> {
    ["in-addr.arpa.", "ip6.arpa."]
        .into_iter()
        .filter_map(|z| Name::from_ascii(z).ok())
        .find(|z| z.zone_of(name))
}

/// `labels` + `base`, or `None` if that is no valid name (a label over 63
/// bytes, a name over 255).
fn child(labels: &[&str], base: &Name) -> Option<Name> {
    Name::from_labels(labels.iter().copied())
        .ok()?
        .append_domain(base)
        .ok()
}

fn address(name: &Name, ttl: u32, ip: IpAddr) -> Record {
    let data = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(name.clone(), ttl, data)
}

fn ns_name(zone: &Zone) -> Option<Name> {
    child(&["ns", "dns"], &zone.origin)
}

fn soa(zone: &Zone, apex: &Name) -> Record {
    let mname = ns_name(zone).unwrap_or_else(|| zone.origin.clone());
    let rname = child(&["hostmaster"], &zone.origin).unwrap_or_else(|| zone.origin.clone());
    let data = SOA::new(mname, rname, zone.serial, 7200, 1800, 86400, zone.ttl);
    Record::from_rdata(apex.clone(), zone.ttl, RData::SOA(data))
}

fn apex_node(zone: &Zone, apex: &Name) -> Node {
    let mut records = vec![soa(zone, apex)];
    if let Some(ns) = ns_name(zone) {
        records.push(Record::from_rdata(
            apex.clone(),
            zone.ttl,
            RData::NS(NS(ns)),
        ));
    }
    Node {
        records,
        additionals: vec![],
    }
}

/// An existing name that owns no record (an empty non-terminal).
fn empty() -> Option<Node> {
    Some(Node::default())
}

/// The node of `qname` in the cluster zone, `None` if the name does not
/// exist; `labels` are its labels below the zone.
fn cluster_node(view: &View, zone: &Zone, qname: &Name, labels: &[String]) -> Option<Node> {
    let l: Vec<&str> = labels.iter().map(String::as_str).collect();
    match l.as_slice() {
        [] => Some(apex_node(zone, &zone.origin)),
        ["dns-version"] => {
            let txt = TXT::new(vec![SCHEMA_VERSION.to_owned()]);
            Some(Node {
                records: vec![Record::from_rdata(qname.clone(), zone.ttl, RData::TXT(txt))],
                additionals: vec![],
            })
        }
        ["svc"] | ["pod"] | [_, "pod"] => empty(),
        [ns, "svc"] => view.has_namespace(ns).then(Node::default),
        [svc, ns, "svc"] => service_node(view, zone, qname, &Key::new(ns, svc)),
        [sub, svc, ns, "svc"] => service_child(view, zone, qname, &Key::new(ns, svc), sub),
        [port, proto, svc, ns, "svc"] => {
            let port = port.strip_prefix('_')?;
            let proto = proto.strip_prefix('_')?;
            srv_node(view, zone, qname, &Key::new(ns, svc), port, proto)
        }
        [ip, _, "pod"] => {
            let ip = undash(ip)?;
            Some(Node {
                records: vec![address(qname, zone.ttl, ip)],
                additionals: vec![],
            })
        }
        _ => None,
    }
}

/// The address written with dashes (`10-244-1-5`, `fd00-10-244--5`).
fn undash(label: &str) -> Option<IpAddr> {
    if let Ok(v4) = label.replace('-', ".").parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    label
        .replace('-', ":")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// `<svc>.<ns>.svc.<zone>`.
fn service_node(view: &View, zone: &Zone, qname: &Name, key: &Key) -> Option<Node> {
    let service = view.services.get(key)?;
    let ttl = zone.ttl;
    let records = match &service.kind {
        ServiceKind::ClusterIp(ips) => ips.iter().map(|ip| address(qname, ttl, *ip)).collect(),
        ServiceKind::Headless => {
            let mut ips: Vec<IpAddr> = view
                .published_endpoints(key, service)
                .map(|e| e.ip)
                .collect();
            ips.sort();
            ips.dedup();
            ips.into_iter().map(|ip| address(qname, ttl, ip)).collect()
        }
        ServiceKind::ExternalName(target) => {
            let target = Name::from_str_relaxed(target).ok().map(|mut n| {
                n.set_fqdn(true);
                n
            });
            target
                .into_iter()
                .map(|t| Record::from_rdata(qname.clone(), ttl, RData::CNAME(CNAME(t))))
                .collect()
        }
    };
    Some(Node {
        records,
        additionals: vec![],
    })
}

/// `<sub>.<svc>.<ns>.svc.<zone>`: `_<proto>` (an empty non-terminal above
/// SRV records) or a headless endpoint's name.
fn service_child(view: &View, zone: &Zone, qname: &Name, key: &Key, sub: &str) -> Option<Node> {
    let service = view.services.get(key)?;
    if let Some(proto) = sub.strip_prefix('_') {
        let in_service = service.ports.iter().any(|p| p.protocol == proto);
        let in_endpoints = view
            .published_endpoints(key, service)
            .flat_map(|e| &e.ports)
            .any(|p| p.protocol == proto);
        let serves = !matches!(service.kind, ServiceKind::ExternalName(_));
        return (serves && (in_service || in_endpoints)).then(Node::default);
    }
    if service.kind != ServiceKind::Headless {
        return None;
    }
    let mut ips: Vec<IpAddr> = view
        .published_endpoints(key, service)
        .filter(|e| e.label() == sub)
        .map(|e| e.ip)
        .collect();
    if ips.is_empty() {
        return None;
    }
    ips.sort();
    ips.dedup();
    Some(Node {
        records: ips
            .into_iter()
            .map(|ip| address(qname, zone.ttl, ip))
            .collect(),
        additionals: vec![],
    })
}

/// `_<port>._<proto>.<svc>.<ns>.svc.<zone>`.
fn srv_node(
    view: &View,
    zone: &Zone,
    qname: &Name,
    key: &Key,
    port_name: &str,
    proto: &str,
) -> Option<Node> {
    let service = view.services.get(key)?;
    let service_name = child(&[&key.name, &key.namespace, "svc"], &zone.origin)?;
    let matches = |p: &&crate::view::Port| p.name == port_name && p.protocol == proto;
    let srv = |port: u16, target: &Name| {
        let data = RData::SRV(SRV::new(0, 100, port, target.clone()));
        Record::from_rdata(qname.clone(), zone.ttl, data)
    };
    let mut node = Node::default();
    match &service.kind {
        ServiceKind::ExternalName(_) => return None,
        ServiceKind::ClusterIp(ips) => {
            let port = service.ports.iter().find(matches)?;
            node.records.push(srv(port.port, &service_name));
            for ip in ips {
                node.additionals.push(address(&service_name, zone.ttl, *ip));
            }
        }
        ServiceKind::Headless => {
            let mut declared = service.ports.iter().any(|p| matches(&p));
            for ep in view.published_endpoints(key, service) {
                let Some(port) = ep.ports.iter().find(matches) else {
                    continue;
                };
                declared = true;
                let Some(target) = child(&[&ep.label()], &service_name) else {
                    continue;
                };
                node.records.push(srv(port.port, &target));
                node.additionals.push(address(&target, zone.ttl, ep.ip));
            }
            if !declared {
                return None;
            }
        }
    }
    Some(node)
}

/// The address of a reverse name: 4 decimal labels under `in-addr.arpa.`
/// or 32 nibbles under `ip6.arpa.`, least significant first.
fn reverse_ip(labels: &[String], v4: bool) -> Option<IpAddr> {
    if v4 {
        if labels.len() != 4 {
            return None;
        }
        let mut octets = [0u8; 4];
        for (i, l) in labels.iter().rev().enumerate() {
            if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            *octets.get_mut(i)? = l.parse().ok()?;
        }
        return Some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    if labels.len() != 32 {
        return None;
    }
    let mut bits: u128 = 0;
    for l in labels.iter().rev() {
        let [digit] = l.as_bytes() else {
            return None;
        };
        let nibble = char::from(*digit).to_digit(16)?;
        bits = (bits << 4) | u128::from(nibble);
    }
    Some(IpAddr::V6(Ipv6Addr::from(bits)))
}

/// The node of a name in a reverse zone: the PTR records of an address
/// that is a ClusterIP or a published headless endpoint.
fn reverse_node(
    view: &View,
    zone: &Zone,
    qname: &Name,
    apex: &Name,
    labels: &[String],
) -> Option<Node> {
    if labels.is_empty() {
        return Some(apex_node(zone, apex));
    }
    let v4 = apex.num_labels() == 2 && apex.iter().next() == Some(b"in-addr".as_slice());
    let ip = reverse_ip(labels, v4)?;
    let mut targets: Vec<Name> = vec![];
    for (key, service) in &view.services {
        let Some(service_name) = child(&[&key.name, &key.namespace, "svc"], &zone.origin) else {
            continue;
        };
        match &service.kind {
            ServiceKind::ClusterIp(ips) if ips.contains(&ip) => targets.push(service_name),
            ServiceKind::Headless => {
                for ep in view
                    .published_endpoints(key, service)
                    .filter(|e| e.ip == ip)
                {
                    targets.extend(child(&[&ep.label()], &service_name));
                }
            }
            _ => {}
        }
    }
    if targets.is_empty() {
        return None;
    }
    targets.sort();
    targets.dedup();
    let records = targets
        .into_iter()
        .map(|t| Record::from_rdata(qname.clone(), zone.ttl, RData::PTR(PTR(t))))
        .collect();
    Some(Node {
        records,
        additionals: vec![],
    })
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
