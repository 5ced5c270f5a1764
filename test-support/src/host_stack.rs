//! The kernel dataplane's node-wide objects under names unique per run.

use sarena_core::dataplane::KernelDataplane;
use sarena_core::dataplane::kernel::KernelNames;

use crate::names::unique;

/// A `KernelDataplane` whose gateway device pair and nftables table have
/// unique names; all of them are torn down on drop.
#[derive(Debug)]
pub struct HostStack {
    /// The unique names (for a second dataplane over the same objects).
    pub names: KernelNames,
    /// A dataplane over them.
    pub dataplane: KernelDataplane,
}

impl HostStack {
    /// Unique names; nothing is created until the dataplane's `setup`.
    #[allow(clippy::new_without_default)] // names are unique per call
    pub fn new() -> Self {
        let names = KernelNames {
            gateway_device: unique("srgw"),
            gateway_peer: unique("srgp"),
            nft_table: unique("srt"),
        };
        HostStack {
            dataplane: KernelDataplane::with_names(names.clone()).unwrap(),
            names,
        }
    }
}

impl Drop for HostStack {
    fn drop(&mut self) {
        // The test's runtime is blocked in this drop, so tear down with a
        // fresh runtime and a fresh netlink socket.
        let names = self.names.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async { KernelDataplane::with_names(names).unwrap().teardown().await })
        })
        .join();
    }
}
