//! Fixtures shared by Sarena's integration tests (a dev-dependency only).
//!
//! - [`require_root`], [`require_ebpf_object`], [`require`]: the
//!   preconditions of the privileged tests. Those tests carry
//!   `#[ignore = "privileged: ..."]`, so a plain `cargo test` reports them as
//!   ignored; run as root with `--include-ignored` (scripts/test.sh does),
//!   a missing precondition fails the test with a message naming the fix.
//! - [`unique`], [`run`], [`succeeds`], [`output_with_stdin`]: names unique per
//!   run, and commands whose failure says what ran and what it printed.
//! - [`TestNetns`], [`HostLinkGuard`], [`in_netns`], [`block_on_in_netns`], [`Pod`], [`PinDir`],
//!   [`HostStack`]: kernel objects under unique names, removed on drop even
//!   when the test fails; [`SysctlGuard`] puts a kernel parameter back;
//!   [`Tmpfs`] is a small filesystem to fill on purpose.
//! - [`tc_program_ids`], [`tc_programs`]: what `tc` reports attached, an
//!   oracle independent of the dataplane's own queries; [`tcp_exchange`] and
//!   [`ping_summary`] for traffic.
//! - [`daemon`]: the real `sarena-daemon` binary on a private site (socket,
//!   state, config, log), and raw HTTP for requests a client never sends;
//!   [`Cni`]: the real `sarena-cni` run as a runtime runs it;
//!   [`workspace_binary`] finds (or builds) the workspace's binaries.
// Test code: a fixture fails its test by panicking, with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod binaries;
mod bpffs;
mod command;
pub mod daemon;
mod host_stack;
mod names;
mod netns;
mod plugin;
mod pod;
mod require;
mod sysctl;
mod tc;
mod tmpfs;
mod traffic;

pub use binaries::{package_binary, workspace_binary};
pub use bpffs::{PinDir, ensure_bpffs};
pub use command::{output_with_stdin, run, succeeds};
pub use host_stack::HostStack;
pub use names::unique;
pub use netns::{HostLinkGuard, TestNetns, block_on_in_netns, in_netns};
pub use plugin::{Cni, CniRun};
pub use pod::Pod;
pub use require::{require, require_ebpf_object, require_root};
pub use sysctl::SysctlGuard;
pub use tc::{tc_program_ids, tc_programs};
pub use tmpfs::Tmpfs;
pub use traffic::{background_ping, ping_summary, tcp_exchange, tcp_exchange_at, tcp_exchange_to};
