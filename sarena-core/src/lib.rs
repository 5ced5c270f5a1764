//! # sarena-core
//!
//! Everything Sarena does, behind traits, so that the `sarena-cni` plugin and the
//! `sarena-daemon` are thin adapters and a Rust container runtime can embed the
//! same logic with a handful of calls.
//!
//! - [`cni`]: the CNI 1.1.0 protocol — network config, environment, `CNI_ARGS`,
//!   versions, typed results and their conversion to older versions, errors.
//! - [`plugin`]: the ADD / DEL / CHECK / STATUS / GC sequences, written against
//!   the [`api::Daemon`] and [`links::Links`] traits.
//! - [`delqueue`]: [`delqueue::DeleteQueue`], the durable queue of deletions DEL
//!   could not hand to the daemon, replayed by later plugin runs and the daemon.
//! - [`api`]: the daemon's REST API types, the [`api::Daemon`] trait and its HTTP client.
//! - [`links`]: the [`links::Links`] trait: netns handling and veth provisioning.
//! - [`ipam`]: address pools and the free-interval allocator (never scans a range).
//! - [`store`]: [`store::RedbStore`], the crash-safe redb store of allocations and endpoints.
//! - [`node`]: [`node::Node`], the in-process [`api::Daemon`] (IPAM + endpoint registry) and
//!   the daemon's [`node::NodeConfig`].
//! - [`dataplane`]: the [`dataplane::Dataplane`] trait: how pod traffic is forwarded.
//! - [`cluster`]: Kubernetes mode's logic without a Kubernetes client: pools from the
//!   Node's podCIDRs, routes to the other nodes (native or VXLAN), the control loop.
//! - [`mac`]: [`mac::MacAddr`], the type of every MAC address.
//!
//! Links and both dataplanes talk to the kernel through shared crate-internal
//! modules (netlink handles and lookups, sysctl); their errors,
//! [`NetlinkError`] and [`SysctlError`], are re-exported here.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod api;
mod blocking;
pub mod cluster;
pub mod cni;
pub mod dataplane;
pub mod delqueue;
mod digest;
mod error_chain;
pub mod ipam;
pub mod links;
pub mod mac;
mod netlink;
pub mod node;
pub mod plugin;
pub mod store;
mod sysctl;

pub use error_chain::error_chain;
pub use netlink::NetlinkError;
pub use sysctl::SysctlError;
