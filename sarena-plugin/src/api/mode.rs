//! [`DataplaneMode`]: which dataplane a daemon runs, and what each one can
//! do. The plugin reads it from `GET /daemon/config` ([`DaemonConfig`]) and
//! the daemon from its config; both ask it the same questions here.

use serde::{Deserialize, Serialize};

use super::DaemonConfig;

/// Which dataplane the daemon runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataplaneMode {
    /// eBPF programs on the host-side veths (default).
    #[default]
    Ebpf,
    /// Kernel routing: host routes per pod, the host answers for the gateway.
    Kernel,
    /// No forwarding at all: the daemon only does IPAM and the endpoint
    /// registry (development, or another component forwards pod traffic).
    None,
}

impl DataplaneMode {
    /// `ebpf`, `kernel` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            DataplaneMode::Ebpf => "ebpf",
            DataplaneMode::Kernel => "kernel",
            DataplaneMode::None => "none",
        }
    }

    /// The mode named `name` ([`DataplaneMode::as_str`]); `None` for a name
    /// this release does not know (a newer daemon's).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            DataplaneMode::Ebpf,
            DataplaneMode::Kernel,
            DataplaneMode::None,
        ]
        .into_iter()
        .find(|mode| mode.as_str() == name)
    }

    /// Whether this dataplane enforces the bandwidth limits an endpoint may
    /// carry: only the eBPF one does (the others would ignore them, so
    /// endpoints with limits are refused there).
    pub fn enforces_bandwidth(self) -> bool {
        self == DataplaneMode::Ebpf
    }
}

impl DaemonConfig {
    /// The daemon's dataplane; `None` for a mode this release does not know.
    pub fn dataplane_mode(&self) -> Option<DataplaneMode> {
        DataplaneMode::from_name(&self.dataplane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_ebpf_enforces_bandwidth() {
        for mode in [
            DataplaneMode::Ebpf,
            DataplaneMode::Kernel,
            DataplaneMode::None,
        ] {
            assert_eq!(DataplaneMode::from_name(mode.as_str()), Some(mode));
            assert_eq!(
                serde_json::to_value(mode).unwrap(),
                serde_json::json!(mode.as_str())
            );
            assert_eq!(mode.enforces_bandwidth(), mode == DataplaneMode::Ebpf);
        }
        assert_eq!(DataplaneMode::from_name("xdp"), None);
        let config = DaemonConfig {
            mtu: 1500,
            dataplane: "kernel".into(),
        };
        assert_eq!(config.dataplane_mode(), Some(DataplaneMode::Kernel));
    }
}
