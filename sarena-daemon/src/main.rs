//! `sarena-daemon`: the node daemon.
fn main() {}
