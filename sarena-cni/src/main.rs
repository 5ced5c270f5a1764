//! `sarena-cni`: the CNI plugin binary.
fn main() {}
