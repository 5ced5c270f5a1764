//! eBPF host routing to and from the pods of other nodes (issue 27).
//!
//! - [`PEER_PODS_MAP`]: an LPM trie, the other nodes' pod CIDRs (keys laid
//!   out as [`crate::policy::IpcacheKey`]) → [`PeerPodsValue`]. Only
//!   Sarena's peers are in it, never this node's own pod networks: a
//!   packet from the network claiming a local pod's address is not one the
//!   programs deliver.
//! - [`NODE_COUNTERS_MAP`]: a per-CPU array of one [`NodeCounters`], what
//!   the host-routing paths did on this node (they have no endpoint of
//!   their own to count on when a packet comes from the network).
//!
//! `from_container` sends a packet for a peer's pod straight out of the
//! device the kernel's FIB names (the uplink in native routing, the VXLAN
//! device in vxlan mode), and `from_network`, on the ingress of those
//! devices, delivers a peer pod's packet straight into the local pod: both
//! only for flows the host stack never handled, so a translated flow is
//! translated back by conntrack on either node.

/// Name of the peers' pod CIDRs map: [`crate::policy::IpcacheKey`] →
/// [`PeerPodsValue`] (LPM trie, pinned, not preallocated).
pub const PEER_PODS_MAP: &str = "SARENA_PEER_PODS";
/// Name of the node-wide host-routing counters: key 0 → [`NodeCounters`]
/// (per-CPU array, pinned).
pub const NODE_COUNTERS_MAP: &str = "SARENA_NODE_COUNTERS";
/// Name of the program on the tc ingress of the node's network devices
/// (the uplink, the VXLAN device).
pub const FROM_NETWORK_PROG: &str = "from_network";

/// Capacity of [`PEER_PODS_MAP`]: pod CIDRs of every other node, both
/// families.
pub const MAX_PEER_POD_CIDRS: u32 = 16_384;

/// `skb->mark` bit set by `from_container` on a packet it sends straight
/// to another node, so that `to_network` on the way out tells it from one
/// the host stack forwarded (whose flow it records) and clears it. Clear
/// of kube-proxy's bits (0x4000, 0x8000) and of
/// [`crate::policy::MARK_EGRESS_DEFERRED`].
pub const MARK_TO_PEER: u32 = 0x0040_0000;

/// Value of [`PEER_PODS_MAP`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerPodsValue {
    /// Reserved (zero).
    pub flags: u32,
}

/// What host routing did on this node, since the map was created. Summed
/// over CPUs by user space.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeCounters {
    /// Packets from local pods sent straight to a peer's pod, the FIB's
    /// next hop already resolved (MACs rewritten, redirected).
    pub to_peer_redirected: u64,
    /// The same, through the kernel's neighbour resolution (the next hop
    /// had no neighbour entry yet).
    pub to_peer_neigh: u64,
    /// Packets for a peer's pod left to the host stack because the FIB did
    /// not resolve (no route, forwarding off, a packet too big, ...).
    pub to_peer_fib_fallback: u64,
    /// Packets for a peer's pod left to the host stack because the host
    /// stack handled their flow.
    pub to_peer_host_flow: u64,
    /// Packets from a peer's pod delivered straight into a local pod.
    pub from_peer_redirected: u64,
    /// Packets from a peer's pod left to the host stack because the host
    /// stack handled their flow.
    pub from_peer_host_flow: u64,
    /// Flows between a local pod and a peer's pod the host stack handled,
    /// newly recorded (on the way into the pod or out to the network).
    pub peer_flows_recorded: u64,
    /// Packets from a peer's pod dropped by the local pod's NetworkPolicy
    /// on the direct path (counted on the pod too).
    pub from_peer_policy_denied: u64,
    /// Reserved for later counters.
    pub spare: [u64; 8],
}

impl NodeCounters {
    /// Each counter by its field's name (the status and metric names).
    pub fn named(&self) -> [(&'static str, u64); 8] {
        [
            ("to_peer_redirected", self.to_peer_redirected),
            ("to_peer_neigh", self.to_peer_neigh),
            ("to_peer_fib_fallback", self.to_peer_fib_fallback),
            ("to_peer_host_flow", self.to_peer_host_flow),
            ("from_peer_redirected", self.from_peer_redirected),
            ("from_peer_host_flow", self.from_peer_host_flow),
            ("peer_flows_recorded", self.peer_flows_recorded),
            ("from_peer_policy_denied", self.from_peer_policy_denied),
        ]
    }

    /// Adds `other` field by field (summing per-CPU values).
    pub fn add(&mut self, other: &NodeCounters) {
        self.to_peer_redirected += other.to_peer_redirected;
        self.to_peer_neigh += other.to_peer_neigh;
        self.to_peer_fib_fallback += other.to_peer_fib_fallback;
        self.to_peer_host_flow += other.to_peer_host_flow;
        self.from_peer_redirected += other.from_peer_redirected;
        self.from_peer_host_flow += other.from_peer_host_flow;
        self.peer_flows_recorded += other.peer_flows_recorded;
        self.from_peer_policy_denied += other.from_peer_policy_denied;
    }
}
