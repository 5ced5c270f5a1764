//! The Sarena node daemon as a library: the REST routes over any
//! [`sarena_core::api::Daemon`], the listeners that serve them, the CLI, the
//! Prometheus metrics ([`metrics`]) and [`operated::Operated`], the layer that
//! adds the process's own knowledge to the status and counts operations.
//! `main.rs` only wires these together.
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod api_token;
pub mod app;
pub mod cli;
pub mod cni_conf;
pub mod conn;
pub mod dataplane;
pub mod ebpf_object;
pub mod events;
pub mod kubernetes;
pub mod locks;
pub mod metrics;
pub mod operated;
pub mod routes;
pub mod server;
pub mod sysctl_dir;
pub mod uninstall;
