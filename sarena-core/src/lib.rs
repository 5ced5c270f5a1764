//! # sarena-core
//!
//! Everything Sarena does, behind traits, so that the `sarena-cni` plugin and the
//! `sarena-daemon` are thin adapters and a Rust container runtime can embed the
//! same logic with a handful of calls.
//!
//! The logic lives in two crates, split where the process boundary is:
//! - `sarena-plugin`, the plugin side ([`cni`], [`plugin`], [`api`], [`links`],
//!   [`delqueue`], [`mac`]): what runs once per pod. `sarena-cni` links it
//!   alone, so the plugin carries no eBPF loader, database or config parser.
//! - this crate, the node side ([`ipam`], [`store`], [`node`], [`dataplane`],
//!   [`cluster`], [`install`]): the daemon's state and the kernel's dataplane.
//!   It re-exports every plugin-side module under its old path
//!   (`sarena_core::cni`, `sarena_core::plugin`, …), so embedders import
//!   everything from here.
//!
//! ## The traits, and which implementation to pick
//!
//! | trait | what it does | implementations |
//! | --- | --- | --- |
//! | [`api::Daemon`] | what the plugin asks: config, health, allocate, register, delete, CHECK's reads, GC | [`node::Registry`] in process (durable in redb); [`api::HttpDaemon`] over the daemon's socket; [`node::WithDataplane`] = a registry that also drives a [`dataplane::Dataplane`]; `MockDaemon` (feature `mocks`) |
//! | [`api::Inspect`] | what an operator reads: endpoints, pools, status, counters ([`api::NodeApi`] = both traits) | the same types; `MockInspect`, `MockNodeApi` |
//! | [`links::Links`] | netns handling, veth pairs, pod addresses and routes | [`links::RtnetlinkLinks`] (netlink); `MockLinks` |
//! | [`dataplane::Dataplane`] (with its capability [`dataplane::EndpointReports`]) | forwarding of pod traffic on the node, and what it reports per endpoint | [`dataplane::ebpf::AyaDataplane`] (TC programs; give it [`dataplane::KernelDataplane`] as its host stack for traffic to the host and beyond); [`dataplane::KernelDataplane`] (routes only); `MockDataplane` |
//!
//! Which to pick:
//! - a runtime on a node that runs `sarena-daemon`: [`plugin::Plugin::connect`]
//!   (an [`api::HttpDaemon`] on the default socket, [`links::RtnetlinkLinks`],
//!   the deletion queue) and call [`plugin::Plugin::add`] / `del` / `check`;
//! - a runtime with no daemon process: open a [`node::Registry`] on a state
//!   directory, wrap it with [`node::WithDataplane`] around an
//!   [`dataplane::ebpf::AyaDataplane`], and hand it to [`plugin::Plugin::new`]
//!   (`examples/embed_inprocess.rs`);
//! - a different address policy: wrap [`node::Registry`] in your own
//!   [`api::Daemon`] that rewrites [`api::AllocateRequest`]s
//!   (`examples/custom_ipam.rs`);
//! - tests of your own code: the `mocks` feature's `MockDaemon`, `MockLinks`
//!   and `MockDataplane`.
//!
//! ## How ADD flows through them
//!
//! [`plugin::Plugin::add`] is the seed's eight steps, each one call on one trait,
//! with every undo on one rollback stack (a failure undoes what was done, in
//! reverse):
//!
//! - **1** validate the request; refuse while a deletion of the attachment is
//!   queued ([`delqueue::DeleteQueue`]);
//! - **2** remove a stale link of the same name in the pod netns
//!   ([`links::Links::remove_pod_link`]), and then its stale endpoint
//!   ([`api::Daemon::delete_endpoint`]);
//! - **3–4** connect to the daemon and read its config: MTU and dataplane
//!   mode ([`api::Daemon::config`]);
//! - **5** allocate the addresses ([`api::Daemon::allocate`]);
//! - **6** create the veth pair, the peer born in the pod netns under its
//!   final name ([`links::Links::create_veth`]);
//! - **7** put addresses and routes on the pod interface
//!   ([`links::Links::configure_pod`]);
//! - **8** register the endpoint ([`api::Daemon::create_endpoint`]); behind
//!   [`node::WithDataplane`] this attaches it to the dataplane
//!   ([`dataplane::Dataplane::attach`]) before the registry commits it.
//!
//! DEL is [`api::Daemon::delete_endpoint_and_veth`] (the daemon detaches and
//! removes the veth), or, when the daemon is unreachable, an entry in the
//! [`delqueue::DeleteQueue`] replayed later.
//!
//! ```
//! use std::sync::Arc;
//! use sarena_core::api::{AllocateRequest, Attachment, NodeApi};
//! use sarena_core::node::{Registry, NodeConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
// The in-process daemon (both faces, NodeApi): IPAM and the registry, no daemon process.
//! let dir = tempfile::tempdir()?;
//! let daemon: Arc<dyn NodeApi> = Arc::new(Registry::open(dir.path(), NodeConfig::default())?);
//! let owner = Attachment { container_id: "c1".into(), ifname: "eth0".into() };
//! let allocation = daemon
//!     .allocate(AllocateRequest { owner, pod: Default::default(), requested: vec![], pool: None })
//!     .await?;
//! assert_eq!(allocation.addresses[0].pool, "default");
//! let status = daemon.status().await?;
//! assert_eq!((status.allocations, status.leases), (1, 1));
//! # Ok(()) }
//! ```
//!
//! ## The modules
//!
//! - [`cni`]: the CNI 1.1.0 protocol — network config, environment, `CNI_ARGS`,
//!   versions, typed results and their conversion to older versions, errors.
//! - [`plugin`]: the ADD / DEL / CHECK / STATUS / GC sequences, written against
//!   the [`api::Daemon`] and [`links::Links`] traits.
//! - [`delqueue`]: [`delqueue::DeleteQueue`], the durable queue of deletions DEL
//!   could not hand to the daemon, replayed by later plugin runs and the daemon.
//! - [`api`]: the daemon's REST API types (operator answers included:
//!   [`api::DaemonStatus`], [`api::EndpointStats`]), the [`api::Daemon`] trait
//!   and its HTTP client.
//! - [`links`]: the [`links::Links`] trait: netns handling and veth provisioning.
//! - [`ipam`]: address pools and the free-interval allocator (never scans a range).
//! - [`store`]: [`store::RedbStore`], the crash-safe redb store of allocations and endpoints.
//! - [`node`]: [`node::Registry`], the in-process [`api::Daemon`] (IPAM + endpoint registry),
//!   [`node::WithDataplane`] and the daemon's [`node::NodeConfig`].
//! - [`dataplane`]: the [`dataplane::Dataplane`] trait: how pod traffic is
//!   forwarded, and the per-endpoint eBPF counters.
//! - [`identity`]: pod identity (an endpoint's labels and its namespace's),
//!   kept up to date from pod and namespace events, pushed to the dataplane.
//! - [`cluster`]: Kubernetes mode's logic without a Kubernetes client: pools from the
//!   Node's podCIDRs, routes to the other nodes (native or VXLAN), the control loop.
//! - [`install`]: [`install::Installer`], the plugin binary and the conflist
//!   put onto a node without a moment where the runtime sees half of either.
//! - [`uninstall`]: [`uninstall::uninstall`], removing everything Sarena
//!   put on a node (and only that), step by step, with a report.
//! - [`mac`]: [`mac::MacAddr`], the type of every MAC address.
//! - [`host_ledger`]: [`host_ledger::HostLedger`], what Sarena changed on the
//!   node that an uninstall cannot tell afterwards (overwritten sysctls, an
//!   added `clsact`), written down before the change.
//! - [`uplink`]: the device that carries the node's traffic out, and the
//!   pods' MTU derived from it.
//!
//! Links and both dataplanes talk to the kernel through the same netlink
//! and sysctl plumbing (`sarena_plugin::netlink`, `sarena_plugin::sysctl`);
//! their errors, [`NetlinkError`] (with the kernel's answer, [`KernelAnswer`])
//! and [`SysctlError`], are re-exported here.
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod cluster;
pub mod dataplane;
pub mod host_ledger;
pub mod identity;
pub mod install;
pub mod ipam;
pub mod node;
pub mod policy;
pub mod store;
pub mod uninstall;
pub mod uplink;

pub use sarena_plugin::netlink::KernelAnswer;
pub use sarena_plugin::{NetlinkError, SysctlError, error_chain};
pub use sarena_plugin::{api, cni, delqueue, durable, links, mac, netavark, phases, plugin};
// The kernel and file-system plumbing both sides share, under the paths the
// node-side modules use (`crate::netlink`, …).
pub use sarena_plugin::sysctl;
use sarena_plugin::{blocking, netlink};
