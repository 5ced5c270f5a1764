//! # sarena-plugin
//!
//! The plugin side of Sarena: everything a process that runs once per pod
//! needs, and nothing more. `sarena-cni` links this crate alone; the node
//! side (IPAM, the registry's store, the dataplanes, Kubernetes mode, the
//! installer) is `sarena-core`, which re-exports every module here, so
//! `sarena_plugin::cni`, `sarena_plugin::plugin`, … keep working for embedders.
//!
//! - [`cni`]: the CNI 1.1.0 protocol — network config, environment, `CNI_ARGS`,
//!   versions, typed results and their conversion to older versions, errors.
//! - [`plugin`]: the ADD / DEL / CHECK / STATUS / GC sequences, written against
//!   the [`api::Daemon`] and [`links::Links`] traits.
//! - [`netavark`]: the netavark plugin API 1.0.0 (podman's network stack) —
//!   its JSON types, `create` from the daemon's pools, `setup` and
//!   `teardown` as ADD and DEL; `sarena-netavark` is its binary.
//! - [`delqueue`]: [`delqueue::DeleteQueue`], the durable queue of deletions DEL
//!   could not hand to the daemon, replayed by later plugin runs and the daemon.
//! - [`api`]: the daemon's REST API types (operator answers included:
//!   [`api::DaemonStatus`], [`api::EndpointStats`]), the [`api::Daemon`] trait
//!   and its HTTP client [`api::HttpDaemon`].
//! - [`links`]: the [`links::Links`] trait: netns handling and veth provisioning.
//! - [`mac`]: [`mac::MacAddr`], the type of every MAC address.
//! - [`phases`]: where one plugin run spends its time (the benchmark's
//!   phase table), recorded only when asked.
//! - [`netlink`], [`sysctl`], [`blocking`], [`durable`]: kernel and file-system
//!   plumbing shared with the node side (netlink handles and lookups, sysctl
//!   writes, blocking work off the runtime's workers, crash-safe file writes).
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod api;
pub mod blocking;
pub mod cni;
pub mod delqueue;
mod digest;
pub mod durable;
mod error_chain;
pub mod links;
pub mod mac;
pub mod netavark;
pub mod netlink;
pub mod phases;
pub mod plugin;
pub mod sysctl;

pub use error_chain::error_chain;
pub use netlink::NetlinkError;
pub use sysctl::SysctlError;
