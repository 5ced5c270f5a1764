//! Programs showing how to embed sarena-core (`cargo run -p sarena-examples --example NAME`):
//!
//! - `embed`: ADD and DEL through the plugin's library calls against a running daemon;
//! - `embed_inprocess`: IPAM, veth provisioning and the eBPF dataplane in process,
//!   no plugin binary and no daemon;
//! - `cni_runtime`: a runtime executing any CNI plugin chain the way libcni does;
//! - `custom_ipam`: an address policy plugged in through the `Daemon` trait;
//! - `veth`: the links backend on its own.
//!
//! `tests/run_examples.rs` runs each of them and checks its output.
