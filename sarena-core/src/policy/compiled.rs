//! [`CompiledPolicy`]: what the engine hands the dataplane, and what
//! `sarena policy explain` answers from. One set of types for both, so the
//! explanation is the decision the programs take, not a second
//! implementation of the semantics.

use std::collections::BTreeMap;
use std::fmt;

use ipnet::IpNet;

use crate::api::Labels;

/// A numeric identity (see `sarena_common::policy`): 0 any, 1 this node,
/// 2 the world, from 256 allocated by the engine.
pub type Identity = u32;

/// A pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl PodKey {
    /// `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        PodKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Into or out of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Into it (its `ingress` rules).
    Ingress,
    /// Out of it (its `egress` rules).
    Egress,
}

/// One allow entry of an endpoint: the key of `sarena_common::policy::PolicyKey`
/// without the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryKey {
    /// Direction.
    pub direction: Direction,
    /// The peer's identity; 0: any peer.
    pub peer: Identity,
    /// IP protocol; 0: any protocol and port (then `port` and `port_bits` are 0).
    pub proto: u8,
    /// The port (the endpoint's own for ingress, the peer's for egress),
    /// its low `16 - port_bits` bits zero.
    pub port: u16,
    /// How many high bits of `port` must match (0: any port of `proto`, 16: exactly `port`).
    pub port_bits: u8,
}

/// A rule's number in a [`CompiledPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleId(pub u32);

/// Where a rule comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    /// The policy's namespace.
    pub namespace: String,
    /// The policy's name.
    pub name: String,
    /// Its ingress or egress rules.
    pub direction: Direction,
    /// The rule's index in them.
    pub index: usize,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = match self.direction {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        };
        write!(
            f,
            "{}/{} {}[{}]",
            self.namespace, self.name, list, self.index
        )
    }
}

/// One endpoint's compiled policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPolicy {
    /// A policy selects it for ingress.
    pub ingress_isolated: bool,
    /// A policy selects it for egress.
    pub egress_isolated: bool,
    /// Its allow entries, each with the rule it comes from.
    pub entries: BTreeMap<EntryKey, RuleId>,
    /// The policies that select it (namespace, name), sorted.
    pub policies: Vec<(String, String)>,
}

/// One ipcache entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpcacheEntry {
    /// The identity.
    pub identity: Identity,
    /// `sarena_common::policy::IPCACHE_F_*` bits.
    pub flags: u32,
}

/// What an identity stands for (for explanations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityInfo {
    /// Pods of `namespace` with these labels (and addresses inside the same
    /// policy prefixes).
    Pods {
        /// Namespace.
        namespace: String,
        /// Pod labels.
        labels: Labels,
    },
    /// Addresses whose longest policy prefix is this one.
    Prefix(IpNet),
}

/// The engine's output: every entry the dataplane holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompiledPolicy {
    /// Address prefix → identity (pods of every node as host prefixes,
    /// policy prefixes, Service and node addresses).
    pub ipcache: BTreeMap<IpNet, IpcacheEntry>,
    /// This node's pods (every one the engine knows of, selected or not).
    pub endpoints: BTreeMap<PodKey, EndpointPolicy>,
    /// The rules the entries name.
    pub rules: BTreeMap<RuleId, RuleRef>,
    /// What the allocated identities stand for.
    pub identities: BTreeMap<Identity, IdentityInfo>,
}

/// Why a packet is allowed or denied in one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No policy selects the endpoint in this direction.
    NotIsolated,
    /// Traffic between a pod and its own node.
    Host,
    /// An entry allows it; the rule it comes from.
    Allowed(RuleId),
    /// Isolated, and no entry allows it.
    Denied,
}

impl Decision {
    /// Whether the packet passes.
    pub fn allows(&self) -> bool {
        !matches!(self, Decision::Denied)
    }
}
