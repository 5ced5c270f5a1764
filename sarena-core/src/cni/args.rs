//! `CNI_ARGS`: `KEY=VALUE;KEY=VALUE`.

use std::net::IpAddr;

/// Parsed `CNI_ARGS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs {
    /// `IgnoreUnknown=1|true`.
    pub ignore_unknown: bool,
    /// `K8S_POD_NAMESPACE`.
    pub pod_namespace: Option<String>,
    /// `K8S_POD_NAME`.
    pub pod_name: Option<String>,
    /// `K8S_POD_UID`.
    pub pod_uid: Option<String>,
    /// `K8S_POD_INFRA_CONTAINER_ID`.
    pub pod_infra_container_id: Option<String>,
    /// `IP=`: requested static addresses (comma separated).
    pub ips: Vec<IpAddr>,
    /// `MAC=`: requested pod-side MAC.
    pub mac: Option<String>,
    /// Unknown keys that were accepted because of `IgnoreUnknown`.
    pub ignored: Vec<(String, String)>,
}
