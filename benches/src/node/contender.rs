//! The contenders: who provides pod networking on a node.

use serde::{Deserialize, Serialize};

/// Who provides pod networking on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Contender {
    /// sarena-cni + sarena-daemon, eBPF dataplane.
    SarenaEbpf,
    /// sarena-cni + sarena-daemon, kernel-routing dataplane.
    SarenaKernel,
    /// Reference `ptp` + `host-local` (containernetworking-plugins).
    PtpHostLocal,
    /// Reference `bridge` + `host-local`.
    BridgeHostLocal,
}

impl Contender {
    /// All four, in report order.
    pub const ALL: [Contender; 4] = [
        Contender::SarenaEbpf,
        Contender::SarenaKernel,
        Contender::PtpHostLocal,
        Contender::BridgeHostLocal,
    ];

    /// Human label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Contender::SarenaEbpf => "Sarena (eBPF)",
            Contender::SarenaKernel => "Sarena (kernel)",
            Contender::PtpHostLocal => "ptp + host-local",
            Contender::BridgeHostLocal => "bridge + host-local",
        }
    }

    /// Short identifier (file names, JSON).
    pub fn slug(self) -> &'static str {
        match self {
            Contender::SarenaEbpf => "sarena-ebpf",
            Contender::SarenaKernel => "sarena-kernel",
            Contender::PtpHostLocal => "ptp",
            Contender::BridgeHostLocal => "bridge",
        }
    }

    /// Sarena (a daemon runs on the node).
    pub fn is_sarena(self) -> bool {
        matches!(self, Contender::SarenaEbpf | Contender::SarenaKernel)
    }

    /// Whether the plugin implements STATUS (CNI 1.1.0; the reference plugins speak 1.0.0).
    pub fn supports_status(self) -> bool {
        self.is_sarena()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contender_labels_are_distinct() {
        let slugs: std::collections::HashSet<_> = Contender::ALL.iter().map(|c| c.slug()).collect();
        assert_eq!(slugs.len(), 4);
        assert!(Contender::SarenaEbpf.supports_status());
        assert!(!Contender::PtpHostLocal.supports_status());
    }
}
