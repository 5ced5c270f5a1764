//! Choosing and starting the dataplane the config asks for, and bringing it
//! in line with the registry before the API is served.

use std::path::Path;
use std::sync::Arc;

use sarena_core::api::DaemonError;
use sarena_core::api::NodeApi;
use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_core::dataplane::{
    Dataplane, DataplaneError, DataplaneMode, KernelDataplane, NodeUpdates, ReconcileReport,
};
use sarena_core::host_ledger::HostLedger;
use sarena_core::links::RtnetlinkLinks;
use sarena_core::node::{ConfigError, NodeConfig, Registry, StartUpError, WithDataplane};

/// Why the dataplane could not start.
#[derive(Debug, thiserror::Error)]
pub enum DataplaneStartError {
    /// The pools could not be turned into gateways and CIDRs.
    #[error("dataplane")]
    Config(#[from] ConfigError),
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] DataplaneError),
    /// The registry could not be listed for reconciliation.
    #[error("dataplane: listing endpoints for reconciliation")]
    Registry(#[source] DaemonError),
    /// The start-up repair (stale endpoints, owed veth removals, unowned
    /// links, reconciliation) failed.
    #[error(transparent)]
    StartUp(#[from] StartUpError),
    /// The netlink socket for removing veths could not be opened.
    #[error("dataplane")]
    Links(#[from] sarena_core::links::LinkError),
    /// This build has no such backend.
    #[error("dataplane {mode:?} is not available in this build: {reason}")]
    Unavailable {
        /// The mode asked for.
        mode: &'static str,
        /// Why.
        reason: String,
    },
}

/// The backend for `mode`; `None` for [`DataplaneMode::None`]. The eBPF
/// dataplane keeps the kernel one as its host stack (routes to the pods for
/// host and outside traffic, gateway addresses, masquerading).
/// The eBPF one is returned a second time, typed, for [`DataplaneParts::hand_over`].
/// The third part is the same backend as the node's update path.
type Backend = (
    Arc<dyn Dataplane>,
    Option<Arc<AyaDataplane>>,
    Arc<dyn NodeUpdates>,
);

/// The host-changes ledger of the daemon serving on `socket`: in the
/// socket's directory (`/run/sarena/host-changes.json` by default), a tmpfs
/// with the lifetime of the changes it records. The uninstall reads it from
/// the same place.
pub fn host_ledger(socket: &Path) -> HostLedger {
    let dir = socket
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    HostLedger::in_dir(dir)
}

fn backend(
    mode: DataplaneMode,
    pin_dir: &Path,
    ledger: HostLedger,
) -> Result<Option<Backend>, DataplaneStartError> {
    match mode {
        DataplaneMode::None => Ok(None),
        DataplaneMode::Kernel => {
            let kernel = Arc::new(KernelDataplane::new()?.with_ledger(ledger));
            Ok(Some((kernel.clone(), None, kernel)))
        }
        DataplaneMode::Ebpf => {
            let object = crate::ebpf_object::ebpf_object().ok_or_else(|| {
                DataplaneStartError::Unavailable {
                    mode: "ebpf",
                    reason: crate::ebpf_object::not_embedded(),
                }
            })?;
            // The programs check source addresses and enforce policy themselves.
            let host_stack = Arc::new(
                KernelDataplane::new()?
                    .without_antispoof()
                    .without_policy()
                    .with_ledger(ledger.clone()),
            );
            let ebpf = Arc::new(
                AyaDataplane::open(object, pin_dir)?
                    .with_host_stack(host_stack)
                    .with_ledger(ledger),
            );
            Ok(Some((ebpf.clone(), Some(ebpf.clone()), ebpf)))
        }
    }
}

/// What a dataplane is started on: the backend (none for
/// [`DataplaneMode::None`]) and the links that remove veths. Built once per
/// process; Kubernetes mode starts each session of the node state on the
/// same parts.
#[derive(Clone)]
pub struct DataplaneParts {
    backend: Option<Arc<dyn Dataplane>>,
    ebpf: Option<Arc<AyaDataplane>>,
    updates: Option<Arc<dyn NodeUpdates>>,
    links: Option<Arc<RtnetlinkLinks>>,
}

impl std::fmt::Debug for DataplaneParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataplaneParts")
            .field("mode", &self.backend.as_ref().map(|d| d.mode()))
            .finish_non_exhaustive()
    }
}

impl DataplaneParts {
    /// The eBPF dataplane, when it is the one.
    pub fn ebpf(&self) -> Option<Arc<AyaDataplane>> {
        self.ebpf.clone()
    }

    /// The parts for `mode`, with eBPF pins under `pin_dir`; the host
    /// changes an uninstall cannot tell afterwards are recorded in `ledger`
    /// first (see [`host_ledger`]).
    pub fn new(
        mode: DataplaneMode,
        pin_dir: &Path,
        ledger: HostLedger,
    ) -> Result<Self, DataplaneStartError> {
        let Some((backend, ebpf, updates)) = backend(mode, pin_dir, ledger)? else {
            return Ok(DataplaneParts {
                backend: None,
                ebpf: None,
                updates: None,
                links: None,
            });
        };
        Ok(DataplaneParts {
            backend: Some(backend),
            ebpf,
            updates: Some(updates),
            links: Some(Arc::new(veth_remover()?)),
        })
    }

    /// The backend's node-wide update path (pod identities); `None` for
    /// [`DataplaneMode::None`].
    pub fn updates(&self) -> Option<Arc<dyn NodeUpdates>> {
        self.updates.clone()
    }

    /// At a graceful stop: the eBPF dataplane leaves its counters where the
    /// previous release finds them after a downgrade
    /// ([`AyaDataplane::hand_over`]). A failure is logged, never fatal: the
    /// pods' traffic does not depend on it.
    pub fn hand_over(&self) {
        let Some(ebpf) = &self.ebpf else { return };
        if let Err(error) = ebpf.hand_over() {
            tracing::warn!(error = %sarena_core::error_chain(&error), "eBPF: counters not left for an older release");
        }
    }
}

/// Starts the dataplane of `parts` (node set-up, then the start-up repair:
/// stale endpoints, owed veth removals, unowned links, reconciliation with
/// the registry, see [`WithDataplane::start_up`]) and returns what the API
/// should serve: the node itself, or the node wrapped so that endpoint
/// changes drive the dataplane; and what the reconciliation changed (`None`
/// without a dataplane).
pub async fn start_on(
    parts: &DataplaneParts,
    config: &NodeConfig,
    node: Registry,
) -> Result<(Arc<dyn NodeApi>, Option<ReconcileReport>), DataplaneStartError> {
    let (Some(dataplane), Some(links)) = (&parts.backend, &parts.links) else {
        tracing::warn!("dataplane \"none\": pod traffic is not forwarded by Sarena");
        return Ok((Arc::new(node), None));
    };
    dataplane.setup(&config.node_network()?).await?;
    let mode = dataplane.mode();
    let links: Arc<RtnetlinkLinks> = Arc::clone(links);
    let daemon = WithDataplane::new(Arc::new(node.clone()), Arc::clone(dataplane))
        .with_veth_removal(links, Arc::new(node));
    let report = daemon.start_up().await?;
    tracing::info!(
        mode = mode.as_str(),
        endpoints = report.endpoints,
        stale_endpoints = report.stale_endpoints.len(),
        attached = report.dataplane.attached.len(),
        removed = report.dataplane.removed.len(),
        "dataplane ready"
    );
    Ok((Arc::new(daemon), Some(report.dataplane)))
}

/// Links whose netlink socket is driven by a runtime on a thread of its own.
///
/// Deleting a link blocks in `sendmsg` until the kernel's RCU barrier is over
/// (~15 ms): on the API's runtime that would stall a worker, and with it
/// whatever tasks sit in its queue, including the next requests.
fn veth_remover() -> Result<RtnetlinkLinks, DataplaneStartError> {
    let io_error = |source: std::io::Error| {
        DataplaneStartError::Links(sarena_core::links::LinkError::Io {
            call: "veth removal runtime",
            ifname: String::new(),
            source,
        })
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_error)?;
    let links = {
        // The socket's connection task is spawned onto `runtime`.
        let _context = runtime.enter();
        RtnetlinkLinks::new()?
    };
    std::thread::Builder::new()
        .name("veth-removal".into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(io_error)?;
    Ok(links)
}
