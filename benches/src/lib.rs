//! Criterion benchmarks of Sarena; see `benches/`.
