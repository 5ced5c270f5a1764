//! Sarena's benchmarks: criterion benches in `benches/` (IPAM, API round
//! trip) and the `sarena-bench` harness (CNI operations executed as a runtime
//! does, churn, scale, dataplane, the NetworkPolicy engine) that writes
//! `docs/benchmarks.md`.

// Tests may unwrap (as in sarena-core).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod cni_ops;
pub mod dataplane;
mod error;
pub mod k8s_pods;
pub mod k8s_scale;
pub mod node;
pub mod policy;
pub mod report;
pub mod stats;

pub use error::BenchError;
