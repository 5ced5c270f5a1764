//! The Sarena node daemon as a library: the REST routes over any
//! [`sarena_core::api::Daemon`], the listeners that serve them, and the CLI.
//! `main.rs` only wires these together.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod app;
pub mod cli;
pub mod dataplane;
pub mod ebpf_object;
pub mod locks;
pub mod routes;
pub mod server;
