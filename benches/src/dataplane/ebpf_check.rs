//! Evidence that the eBPF node's traffic really went through the eBPF
//! programs: the eBPF node has host routes to its pods too (its kernel
//! dataplane serves host and outside traffic), so routes prove nothing; the
//! programs' own per-endpoint counters, pinned by the daemon under
//! `<pin dir>/maps/SARENA_COUNTERS_V2`, do. They are read before and after the
//! eBPF path's measurements and compared with what iperf3 moved.

use std::path::Path;

use aya::maps::{Map, MapData, PerCpuHashMap};
use sarena_common::{COUNTERS_MAP, EndpointCounters};
use serde::{Deserialize, Serialize};

use crate::BenchError;

/// The programs' counters summed over every endpoint of the node and every CPU.
pub fn read_totals(pin_dir: &Path) -> Result<EndpointCounters, BenchError> {
    let path = pin_dir.join("maps").join(COUNTERS_MAP);
    let err = |source| BenchError::Counters {
        path: path.clone(),
        source,
    };
    let data = MapData::from_pin(&path).map_err(err)?;
    let map = Map::from_map_data(data).map_err(err)?;
    let counters: PerCpuHashMap<MapData, u32, EndpointCounters> =
        PerCpuHashMap::try_from(map).map_err(err)?;
    let mut total = EndpointCounters::default();
    for entry in counters.iter() {
        let (_ifindex, per_cpu) = entry.map_err(err)?;
        for v in per_cpu.iter() {
            total.add(v);
        }
    }
    Ok(total)
}

/// What the counters said about the eBPF path's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EbpfCheck {
    /// Frames redirected pod → pod by the programs during the eBPF path's runs.
    pub redirected_packets: u64,
    /// Bytes the programs delivered into the node's pods during those runs.
    pub to_pod_bytes: u64,
    /// Bytes iperf3 reported received on the eBPF path in the same runs.
    pub iperf_bytes: u64,
    /// Frames the programs dropped during the runs.
    pub drops: u64,
    /// Of the redirected frames, the IPv6 ones.
    #[serde(default)]
    pub ipv6_redirected_packets: u64,
    /// Whether the path was the IPv6 one (its redirects must be IPv6).
    #[serde(default)]
    pub ipv6: bool,
    /// Whether the programs carried (at least) what iperf3 moved.
    pub passed: bool,
}

impl EbpfCheck {
    /// Compares the counter deltas with iperf3's bytes: the programs must have
    /// redirected frames (IPv6 ones on the `ipv6` path) and delivered at
    /// least 90 % of the payload iperf3 received (headers make the counters
    /// larger, never smaller).
    pub fn new(
        before: &EndpointCounters,
        after: &EndpointCounters,
        iperf_bytes: u64,
        ipv6: bool,
    ) -> EbpfCheck {
        let redirected_packets = after
            .redirected_packets
            .saturating_sub(before.redirected_packets);
        let ipv6_redirected_packets = after
            .ipv6_redirected_packets
            .saturating_sub(before.ipv6_redirected_packets);
        let to_pod_bytes = after.to_pod_bytes.saturating_sub(before.to_pod_bytes);
        let drops = after
            .drops
            .iter()
            .sum::<u64>()
            .saturating_sub(before.drops.iter().sum());
        let family_redirected = if ipv6 {
            ipv6_redirected_packets
        } else {
            redirected_packets
        };
        let passed = family_redirected > 0 && to_pod_bytes as f64 >= 0.9 * iperf_bytes as f64;
        EbpfCheck {
            redirected_packets,
            to_pod_bytes,
            iperf_bytes,
            drops,
            ipv6_redirected_packets,
            ipv6,
            passed,
        }
    }

    /// One sentence for the report.
    pub fn describe(&self) -> String {
        let ipv6 = if self.ipv6 {
            format!(" ({} of them IPv6)", self.ipv6_redirected_packets)
        } else {
            String::new()
        };
        format!(
            "the eBPF programs' counters (pinned map `{COUNTERS_MAP}`) rose by {} frames \
             redirected pod → pod{ipv6} and {:.2} GB delivered into the pods while iperf3 \
             received {:.2} GB on that path ({} drops): {}",
            self.redirected_packets,
            self.to_pod_bytes as f64 / 1e9,
            self.iperf_bytes as f64 / 1e9,
            self.drops,
            if self.passed {
                "the eBPF path carried the traffic"
            } else {
                "NOT all of the traffic went through the programs"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(redirected: u64, to_pod_bytes: u64) -> EndpointCounters {
        EndpointCounters {
            redirected_packets: redirected,
            to_pod_bytes,
            ..EndpointCounters::default()
        }
    }

    #[test]
    fn passes_when_the_programs_carried_the_payload() {
        let c = EbpfCheck::new(
            &counters(10, 1_000),
            &counters(5_010, 1_101_000),
            1_000_000,
            false,
        );
        assert_eq!(c.redirected_packets, 5_000);
        assert_eq!(c.to_pod_bytes, 1_100_000);
        assert!(c.passed, "{c:?}");
        assert!(c.describe().contains("carried the traffic"));
    }

    #[test]
    fn fails_when_the_traffic_bypassed_the_programs() {
        // Counters barely moved: the traffic went through the host stack.
        let c = EbpfCheck::new(&counters(10, 1_000), &counters(12, 5_000), 1_000_000, false);
        assert!(!c.passed, "{c:?}");
        assert!(c.describe().contains("NOT"));
        // No redirect at all.
        let c = EbpfCheck::new(&counters(0, 0), &counters(0, 2_000_000), 1_000_000, false);
        assert!(!c.passed, "{c:?}");
    }

    #[test]
    fn the_ipv6_path_passes_only_on_ipv6_redirects() {
        let after = counters(5_000, 1_100_000);
        let ipv4_only = EbpfCheck::new(&counters(0, 0), &after, 1_000_000, true);
        assert!(!ipv4_only.passed, "{ipv4_only:?}");
        let after = EndpointCounters {
            ipv6_redirected_packets: 4_990,
            ..after
        };
        let c = EbpfCheck::new(&counters(0, 0), &after, 1_000_000, true);
        assert!(c.passed, "{c:?}");
        assert!(
            c.describe().contains("4990 of them IPv6"),
            "{}",
            c.describe()
        );
    }
}
