//! What the eBPF dataplane tests share: the pods' subnet. The object comes
//! from `sarena_test_support::require_ebpf_object` (`SARENA_EBPF_OBJECT`,
//! which scripts/test.sh exports from sarena-daemon's build output, or the
//! newest one under the target directory).
#![allow(dead_code)]

use sarena_core::dataplane::Dataplane;
use sarena_core::dataplane::ebpf::{AyaDataplane, EndpointCounters};
use sarena_core::links::RtnetlinkLinks;
use sarena_test_support::{PinDir, Pod, require_ebpf_object, require_root, run};

/// The gateway of the pods' subnet, `10.251.0.0/24`.
pub const GATEWAY: &str = "10.251.0.1";

/// The pod `10.251.0.<host>/24` behind [`GATEWAY`].
pub async fn pod(links: &RtnetlinkLinks, host: u8) -> Pod {
    Pod::in_subnet(links, GATEWAY, host).await
}

pub mod frames;
pub mod frames6;
pub mod ipv6;
pub mod peer;
pub mod policy;
pub mod raw;
pub mod shop;

/// A dataplane over maps pinned under a directory unique to the test, both
/// gone when it is dropped.
pub struct TestDataplane {
    /// The dataplane.
    pub dp: AyaDataplane,
    object: Vec<u8>,
    _pins: PinDir,
}

impl TestDataplane {
    /// Opens the eBPF object for `test` (the test's name), which fails
    /// without root or the object.
    pub fn open(test: &str) -> TestDataplane {
        require_root(test);
        let object = require_ebpf_object(test);
        let pins = PinDir::new();
        let dp = AyaDataplane::open(&object, &pins.0).unwrap();
        TestDataplane {
            dp,
            object,
            _pins: pins,
        }
    }

    /// Another dataplane on the same pins, as a restarted daemon opens them.
    #[allow(dead_code)] // not every test binary restarts
    pub fn reopen(&self) -> AyaDataplane {
        AyaDataplane::open(&self.object, self.dp.pin_dir()).unwrap()
    }

    /// The same dataplane with `host_stack` for what the programs leave to
    /// the host (routes, gateways).
    pub fn with_host_stack<H>(self, host_stack: std::sync::Arc<H>) -> TestDataplane
    where
        H: Dataplane + sarena_core::dataplane::NodeUpdates + 'static,
    {
        TestDataplane {
            dp: self.dp.with_host_stack(host_stack),
            object: self.object,
            _pins: self._pins,
        }
    }

    /// The same dataplane with the kernel dataplane over `host`'s names
    /// (anti-spoofing left to the programs) for what the programs leave to
    /// the host stack.
    pub fn with_kernel_host(self, host: &sarena_test_support::HostStack) -> TestDataplane {
        let kernel = sarena_core::dataplane::KernelDataplane::with_names(host.names.clone())
            .unwrap()
            .without_antispoof();
        self.with_host_stack(std::sync::Arc::new(kernel))
    }

    /// Attaches each of `pods`.
    pub async fn attach(&self, pods: &[&Pod]) {
        for pod in pods {
            self.dp.attach(&pod.endpoint).await.unwrap();
        }
    }

    /// `pod`'s counters.
    pub fn counters(&self, pod: &Pod) -> EndpointCounters {
        self.dp
            .counters(pod.endpoint.spec.host_ifindex)
            .unwrap()
            .unwrap()
    }
}

/// The addresses of the host's neighbour entries on the host veth `ifname`,
/// of one family (`-4` or `-6`), whatever their state.
pub fn host_neighbours(ifname: &str, family: &str) -> Vec<std::net::IpAddr> {
    run(&["ip", family, "neigh", "show", "dev", ifname])
        .lines()
        .filter_map(|line| line.split_whitespace().next()?.parse().ok())
        .collect()
}

/// An nftables table of the test's (unique name), deleted on drop.
pub struct NftTable {
    family: &'static str,
    name: String,
}

impl NftTable {
    /// Loads the table `family` (`ip`, `ip6`, `inet`) with `body` (its
    /// chains and sets, in nft's syntax) under a unique name.
    pub fn load(family: &'static str, body: &str) -> NftTable {
        let table = NftTable {
            family,
            name: sarena_test_support::unique("srsvc"),
        };
        let rules = format!("table {family} {} {{\n{body}}}\n", table.name);
        let out = sarena_test_support::output_with_stdin(
            std::process::Command::new("nft").args(["-f", "-"]),
            rules.as_bytes(),
        );
        assert!(out.status.success(), "nft: {out:?}\n{rules}");
        table
    }

    /// The table's (unique) name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for NftTable {
    fn drop(&mut self) {
        sarena_test_support::succeeds(&["nft", "delete", "table", self.family, &self.name]);
    }
}
