//! [`HostTeardown`]: the real [`NodeTeardown`], on this host's kernel and
//! files (and, in Kubernetes mode, its Node object).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Line, NodeTeardown, Step, StepError, files, kernel, ledger_steps};
use crate::cluster::ClusterApi;
use crate::cluster::rtnl::RtnetlinkPeers;
use crate::install::{InstallError, Installer};

/// Where Sarena's files are on this node: the daemon's and the plugin's
/// paths, as the daemon was started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    /// The CNI bin dir holding `sarena-cni`.
    pub cni_bin_dir: PathBuf,
    /// Sarena's conflist (its directory is the CNI conf dir, where the
    /// set-aside configs are too).
    pub conflist: PathBuf,
    /// The daemon's state dir.
    pub state_dir: PathBuf,
    /// The daemon's socket; its directory holds the host-changes ledger.
    pub socket: PathBuf,
    /// The eBPF dataplane's bpffs pin dir.
    pub pin_dir: PathBuf,
}

impl HostPaths {
    /// The socket's directory (`/run/sarena`).
    pub fn socket_dir(&self) -> &Path {
        self.socket.parent().unwrap_or(Path::new("/"))
    }
}

/// The real teardown: files, links, routes, nftables, tc, bpffs, sysctls
/// and the Node condition. Create inside a tokio runtime.
pub struct HostTeardown {
    paths: HostPaths,
    installer: Installer,
    cluster: Option<(Arc<dyn ClusterApi>, String)>,
    /// The plugin's log file, read from the conflist before it goes.
    plugin_log: Mutex<Option<PathBuf>>,
}

impl std::fmt::Debug for HostTeardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTeardown")
            .field("paths", &self.paths)
            .field("node", &self.cluster.as_ref().map(|(_, node)| node))
            .finish_non_exhaustive()
    }
}

impl HostTeardown {
    /// The teardown of the files and kernel state at `paths`; fails when
    /// the conflist's name is not one libcni loads.
    pub fn new(paths: HostPaths) -> Result<HostTeardown, InstallError> {
        let conf_dir = paths
            .conflist
            .parent()
            .unwrap_or(Path::new("/"))
            .to_path_buf();
        let name = paths
            .conflist
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let installer = Installer::new(&paths.cni_bin_dir, conf_dir).with_conflist_name(&name)?;
        Ok(HostTeardown {
            paths,
            installer,
            cluster: None,
            plugin_log: Mutex::new(None),
        })
    }

    /// Kubernetes mode: also clear `node`'s `NetworkUnavailable` condition
    /// through `api`.
    pub fn with_cluster(mut self, api: Arc<dyn ClusterApi>, node: String) -> HostTeardown {
        self.cluster = Some((api, node));
        self
    }

    /// The paths it works on.
    pub fn paths(&self) -> &HostPaths {
        &self.paths
    }

    /// The plugin's log file: the one the conflist named, else (the
    /// conflist already gone, by an earlier run of the uninstall) the one
    /// that run noted in the run dir.
    fn plugin_log(&self) -> Option<PathBuf> {
        self.plugin_log
            .lock()
            .map(|log| log.clone())
            .unwrap_or(None)
            .or_else(|| files::noted_plugin_log(self.paths.socket_dir()))
    }

    async fn blocking<T: Send + 'static>(
        f: impl FnOnce() -> Result<T, StepError> + Send + 'static,
    ) -> Result<T, StepError> {
        crate::blocking::off_worker(f)
            .await
            .map_err(|e| StepError::call("run a file step")(Box::new(e)))?
    }

    async fn node_condition(&self, dry_run: bool) -> Result<Vec<Line>, StepError> {
        let Some((api, node)) = &self.cluster else {
            return Ok(Vec::new());
        };
        let object = format!("node condition NetworkUnavailable of {node}");
        if dry_run {
            return Ok(vec![Line::kept(
                object,
                "not read in a dry run (deleted when its reason is SarenaIsUp)",
            )]);
        }
        let cleared = api
            .clear_network_condition(node)
            .await
            .map_err(|e| StepError::call("clear the node condition")(Box::new(e)))?;
        Ok(if cleared {
            vec![Line::removed(object, false)]
        } else {
            Vec::new()
        })
    }
}

fn netlink_handle() -> Result<rtnetlink::Handle, StepError> {
    crate::netlink::host_handle().map_err(|e| StepError::call("open a netlink socket")(Box::new(e)))
}

fn peers() -> Result<RtnetlinkPeers, StepError> {
    RtnetlinkPeers::new().map_err(|e| StepError::call("open a netlink socket")(Box::new(e)))
}

#[async_trait]
impl NodeTeardown for HostTeardown {
    async fn run(&self, step: Step, dry_run: bool) -> Result<Vec<Line>, StepError> {
        match step {
            Step::Conflist => {
                let installer = self.installer.clone();
                let run_dir = self.paths.socket_dir().to_owned();
                let (lines, log) =
                    Self::blocking(move || files::conflist(&installer, &run_dir, dry_run)).await?;
                if let Some(log) = log
                    && let Ok(mut slot) = self.plugin_log.lock()
                {
                    *slot = Some(log);
                }
                Ok(lines)
            }
            Step::NodeCondition => self.node_condition(dry_run).await,
            Step::PodLinks => {
                kernel::pod_links(&netlink_handle()?, &self.paths.state_dir, dry_run).await
            }
            Step::PeerRoutes => kernel::peer_routes(&peers()?, dry_run).await,
            Step::Vxlan => kernel::vxlan(&netlink_handle()?, &peers()?, dry_run).await,
            Step::NetworkHooks | Step::HostStack | Step::Clsact | Step::Pins | Step::Sysctls => {
                ledger_steps::run(step, &self.paths, dry_run).await
            }
            Step::Plugin => {
                let (bin, log) = (self.paths.cni_bin_dir.clone(), self.plugin_log());
                Self::blocking(move || files::plugin(&bin, log.as_deref(), dry_run)).await
            }
            Step::SetAside => {
                let installer = self.installer.clone();
                Self::blocking(move || files::set_aside(&installer, dry_run)).await
            }
            Step::RunDir => {
                let socket = self.paths.socket.clone();
                Self::blocking(move || files::run_dir(&socket, dry_run)).await
            }
            Step::StateDir => {
                let dir = self.paths.state_dir.clone();
                Self::blocking(move || files::state_dir(&dir, dry_run)).await
            }
        }
    }
}
