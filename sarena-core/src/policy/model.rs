//! NetworkPolicy as Sarena reads it: `networking.k8s.io/v1` reduced to what
//! enforcement needs, with every field already validated by the adapter
//! (`sarena-k8s`). Nothing here depends on a Kubernetes client, so a
//! runtime embedding Sarena can feed policies of its own.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::api::Labels;

/// A pod, as policy sees it (any node's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyPod {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (bounded).
    pub labels: Labels,
    /// `status.podIPs` (none yet: the pod has no address entry).
    pub ips: Vec<IpAddr>,
    /// Its containers' named ports (`spec.containers[].ports[]` with a name).
    pub named_ports: Vec<NamedPort>,
    /// `spec.nodeName` (empty: not scheduled).
    pub node: String,
    /// `spec.hostNetwork`: its addresses are its node's, not its own.
    pub host_network: bool,
}

/// A container port with a name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamedPort {
    /// `name`.
    pub name: String,
    /// `protocol`.
    pub protocol: Protocol,
    /// `containerPort`.
    pub port: u16,
}

/// A namespace, as policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyNamespace {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (bounded).
    pub labels: Labels,
}

/// A NetworkPolicy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.podSelector`: the pods of `namespace` it selects.
    pub pod_selector: LabelSelector,
    /// Whether it isolates the selected pods for ingress (`policyTypes`,
    /// or its default: always).
    pub ingress_isolation: bool,
    /// Whether it isolates them for egress (`policyTypes`, or its default:
    /// when it has egress rules).
    pub egress_isolation: bool,
    /// `spec.ingress`: what may enter.
    pub ingress: Vec<Rule>,
    /// `spec.egress`: what may leave.
    pub egress: Vec<Rule>,
}

/// One ingress or egress rule: traffic with any of `peers` on any of
/// `ports` is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// `from` / `to`; empty: any peer.
    pub peers: Vec<Peer>,
    /// `ports`; empty: any protocol and port.
    pub ports: Vec<PortSpec>,
}

/// One `from` / `to` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// `podSelector` and/or `namespaceSelector`: with only `pods`, pods of
    /// the policy's namespace; with only `namespaces`, every pod of the
    /// namespaces it selects; with both, the pods `pods` selects in those.
    Pods {
        /// `podSelector`.
        pods: Option<LabelSelector>,
        /// `namespaceSelector`.
        namespaces: Option<LabelSelector>,
    },
    /// `ipBlock`: addresses in `cidr` and in none of `except` (each
    /// within `cidr`). Both canonical (host bits cleared).
    IpBlock {
        /// `cidr`.
        cidr: IpNet,
        /// `except`.
        except: Vec<IpNet>,
    },
}

/// One `ports` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// `protocol` (default TCP).
    pub protocol: Protocol,
    /// `port`; `None`: every port of `protocol`.
    pub port: Option<PortRef>,
    /// `endPort`: with a numeric `port`, the range's last port.
    pub end_port: Option<u16>,
}

/// A port by number or by a container port's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    /// A number (1–65535).
    Number(u16),
    /// A container port's name (an IANA service name).
    Named(String),
}

/// The transport protocols a policy's ports name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// SCTP (132).
    Sctp,
}

impl Protocol {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
        }
    }

    /// The protocol of an IP protocol number, if a policy can name it.
    pub fn from_number(n: u8) -> Option<Protocol> {
        match n {
            6 => Some(Protocol::Tcp),
            17 => Some(Protocol::Udp),
            132 => Some(Protocol::Sctp),
            _ => None,
        }
    }
}

/// A label selector: every `match_labels` pair and every requirement must
/// hold. The empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: Labels,
    /// `matchExpressions`.
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// `key`.
    pub key: String,
    /// `operator` and `values`.
    pub op: Operator,
}

/// A requirement's operator, with its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// The label is set to one of the values (non-empty).
    In(BTreeSet<String>),
    /// The label is not set, or set to none of the values (non-empty).
    NotIn(BTreeSet<String>),
    /// The label is set.
    Exists,
    /// The label is not set.
    DoesNotExist,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    /// Whether `labels` satisfy the requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            Operator::In(values) => value.is_some_and(|v| values.contains(v)),
            Operator::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}
