//! The `tc` oracle: what the kernel reports attached, independent of the
//! dataplane's own queries.

use std::process::Command;

/// Program ids of the `bpf` filters on `ifname`, (ingress, egress), as
/// `tc -j filter show` reports them; empty for a link that does not exist.
pub fn tc_program_ids(ifname: &str) -> (Vec<u32>, Vec<u32>) {
    let ids = |hook: &str| -> Vec<u32> {
        let out = Command::new("tc")
            .args(["-j", "filter", "show", "dev", ifname, hook])
            .output()
            .unwrap_or_else(|e| panic!("cannot run tc: {e}"));
        let filters: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        filters
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|f| f["options"]["prog"]["id"].as_u64())
                    .map(|id| id as u32)
                    .collect()
            })
            .unwrap_or_default()
    };
    (ids("ingress"), ids("egress"))
}

/// How many programs are attached on `ifname`, (ingress, egress).
pub fn tc_programs(ifname: &str) -> (usize, usize) {
    let (ingress, egress) = tc_program_ids(ifname);
    (ingress.len(), egress.len())
}
