//! See the `examples` targets: `cargo run -p sarena-examples --example embed`.
