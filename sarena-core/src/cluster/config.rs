//! [`KubernetesConfig`]: the `[kubernetes]` table of the daemon's configuration.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::types::RoutingMode;
use crate::node::ConfigError;

/// The Linux VXLAN default port (also flannel's): `vxlan_port`'s default.
pub const DEFAULT_VXLAN_PORT: u16 = 8472;

/// `vxlan_vni`'s default.
pub const DEFAULT_VXLAN_VNI: u32 = 1;

/// The name of the VXLAN device Sarena creates in `vxlan` routing.
pub const VXLAN_DEVICE: &str = "sarena.vxlan";

/// The `[kubernetes]` table.
///
/// ```
/// use sarena_core::cluster::RoutingMode;
/// use sarena_core::node::NodeConfig;
/// let cfg = NodeConfig::from_toml_str("[kubernetes]\nenabled = true\nrouting = \"vxlan\"\n")?;
/// assert!(cfg.kubernetes.enabled);
/// assert_eq!(cfg.kubernetes.routing, RoutingMode::Vxlan);
/// assert_eq!(cfg.kubernetes.vxlan_port, 8472);
/// # Ok::<(), sarena_core::node::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// Kubernetes mode (also `sarena-daemon --kubernetes`): pools from this
    /// node's `spec.podCIDRs`, routes to the other nodes' podCIDRs.
    #[serde(default)]
    pub enabled: bool,
    /// A kubeconfig file (also `--kubeconfig`); without it the daemon uses
    /// the in-cluster service-account credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// How the other nodes' podCIDRs are reached (default `native`).
    #[serde(default)]
    pub routing: RoutingMode,
    /// The VXLAN network identifier in `vxlan` routing (1 to 16777215; default 1).
    #[serde(default = "default_vni")]
    pub vxlan_vni: u32,
    /// The VXLAN UDP port in `vxlan` routing (default 8472).
    #[serde(default = "default_port")]
    pub vxlan_port: u16,
    /// The underlay device the VXLAN device sends through; default: the one
    /// holding this node's `InternalIP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay: Option<String>,
}

fn default_vni() -> u32 {
    DEFAULT_VXLAN_VNI
}

fn default_port() -> u16 {
    DEFAULT_VXLAN_PORT
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            enabled: false,
            kubeconfig: None,
            routing: RoutingMode::default(),
            vxlan_vni: DEFAULT_VXLAN_VNI,
            vxlan_port: DEFAULT_VXLAN_PORT,
            underlay: None,
        }
    }
}

impl KubernetesConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=0x00ff_ffff).contains(&self.vxlan_vni) {
            return Err(ConfigError::invalid(
                "kubernetes.vxlan_vni",
                self.vxlan_vni,
                "must be between 1 and 16777215",
            ));
        }
        if self.vxlan_port == 0 {
            return Err(ConfigError::invalid(
                "kubernetes.vxlan_port",
                self.vxlan_port,
                "must not be 0",
            ));
        }
        if let Some(name) = &self.underlay
            && (name.is_empty() || name.len() > 15 || name.contains(['/', ' ']))
        {
            return Err(ConfigError::invalid(
                "kubernetes.underlay",
                name,
                "must be a device name (1 to 15 characters, no '/' or space)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::node::NodeConfig;

    #[test]
    fn the_table_is_optional_and_its_fields_are_checked() {
        let cfg = NodeConfig::from_toml_str("").unwrap();
        assert!(!cfg.kubernetes.enabled);
        let cfg = NodeConfig::from_toml_str(
            "[kubernetes]\nenabled = true\nkubeconfig = \"/etc/k\"\nrouting = \"vxlan\"\nvxlan_vni = 7\nvxlan_port = 4789\nunderlay = \"eth1\"\n",
        )
        .unwrap();
        assert_eq!(cfg.kubernetes.vxlan_vni, 7);
        assert_eq!(cfg.kubernetes.vxlan_port, 4789);
        assert_eq!(cfg.kubernetes.underlay.as_deref(), Some("eth1"));
        assert_eq!(
            cfg.kubernetes.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/k"))
        );
        for (text, field) in [
            ("vxlan_vni = 0", "kubernetes.vxlan_vni"),
            ("vxlan_vni = 16777216", "kubernetes.vxlan_vni"),
            ("vxlan_port = 0", "kubernetes.vxlan_port"),
            ("underlay = \"a-very-long-device\"", "kubernetes.underlay"),
        ] {
            let err = NodeConfig::from_toml_str(&format!("[kubernetes]\n{text}\n")).unwrap_err();
            assert!(err.to_string().contains(field), "{text}: {err}");
        }
        let err = NodeConfig::from_toml_str("[kubernetes]\nrouting = \"bgp\"\n").unwrap_err();
        assert!(crate::error_chain(&err).contains("bgp"), "{err}");
        let err = NodeConfig::from_toml_str("[kubernetes]\nbogus = 1\n").unwrap_err();
        assert!(crate::error_chain(&err).contains("bogus"), "{err}");
    }
}
