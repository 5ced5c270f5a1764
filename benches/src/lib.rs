//! Sarena's benchmarks: criterion benches in `benches/` (IPAM, API round
//! trip) and the `sarena-bench` harness (CNI operations executed as a runtime
//! does, churn, scale, dataplane) that writes `docs/benchmarks.md`.

pub mod cni_ops;
pub mod dataplane;
pub mod node;
pub mod report;
pub mod stats;
