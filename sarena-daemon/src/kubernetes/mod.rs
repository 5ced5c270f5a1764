//! Kubernetes mode's start-up: the API is bound first and serves a daemon
//! that is not ready ("waiting for the Node …"); the last run's session is
//! reopened (ADD closed) so pods can be deleted and the dataplane is
//! reconciled before the API server answers; then the Node objects are
//! watched and the supervisor (`sarena_core::cluster::Supervisor`) opens the
//! node state with pools from this node's podCIDRs, keeps the routes to the
//! other nodes in sync and marks the Node `NetworkUnavailable=False`. The
//! Pods on this node and the Namespaces are watched too: their labels are
//! the endpoints' identities ([`IdentityHub`]). Every Pod, Namespace,
//! NetworkPolicy and Service, and this node's addresses, feed NetworkPolicy
//! ([`PolicyHub`]), which compiles them for the dataplane and answers the
//! API's policy queries.

mod identity;
mod policy;
mod policy_answers;
mod policy_warnings;
mod state;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use sarena_core::api::{Attachment, KubernetesStatus, NodeApi};
use sarena_core::cluster::rtnl::RtnetlinkPeers;
use sarena_core::cluster::{ClusterError, EgressParts, PeerSync, Supervisor, SupervisorParts};
use sarena_core::node::{NetworkCell, NodeConfig};
use sarena_core::plugin::DeleteQueue;
use sarena_k8s::{K8sError, KubeClusterApi};
use tokio::sync::watch;

use crate::app::serve_metrics;
use crate::cli::Cli;
use crate::cni_conf::CniConfWriter;
use crate::dataplane::{DataplaneParts, DataplaneStartError};
use crate::metrics::{Metrics, MetricsError};
use crate::operated::{KubernetesCell, Operated};
use crate::server::{self, DEFAULT_SHUTDOWN_GRACE, ServerError, TcpApi, UnixSocket};
pub use identity::IdentityHub;
pub use policy::{DEBOUNCE, PolicyHub, PolicyHubParts};
pub use state::DaemonSessions;

/// Why Kubernetes mode could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum KubernetesError {
    /// No node name: none given and the hostname could not be read.
    #[error("no node name: pass --node-name or set NODE_NAME")]
    NodeName {
        /// Why the hostname could not be read.
        #[source]
        source: std::io::Error,
    },
    /// No client of the API server.
    #[error(transparent)]
    Client(#[from] K8sError),
    /// The cluster side failed (netlink socket, the watcher gone).
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A listener could not be set up.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The dataplane could not be prepared.
    #[error(transparent)]
    Dataplane(#[from] DataplaneStartError),
    /// The metrics listener could not be set up.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
}

/// `--node-name` (or `NODE_NAME`), else the hostname.
pub fn node_name(cli: &Cli) -> Result<String, KubernetesError> {
    if let Some(name) = cli.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Ok(name.to_owned());
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_err(|source| KubernetesError::NodeName { source })?;
    let hostname = hostname.trim();
    if hostname.is_empty() {
        return Err(KubernetesError::NodeName {
            source: std::io::Error::other("the hostname is empty"),
        });
    }
    Ok(hostname.to_lowercase())
}

/// The kubeconfig: `--kubeconfig`, else `[kubernetes] kubeconfig`, else none
/// (in-cluster credentials).
pub fn kubeconfig(cli: &Cli, config: &NodeConfig) -> Option<PathBuf> {
    cli.kubeconfig
        .clone()
        .or_else(|| config.kubernetes.kubeconfig.clone())
}

/// Runs Kubernetes mode until `shutdown` resolves, counting into `metrics`
/// when the daemon keeps them and writing `cni_conf` once ready.
pub async fn run(
    cli: &Cli,
    config: NodeConfig,
    metrics: Option<Arc<Metrics>>,
    cni_conf: Option<CniConfWriter>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), KubernetesError> {
    let name = node_name(cli)?;
    let status: KubernetesCell = Arc::new(std::sync::Mutex::new(Some(KubernetesStatus {
        node_name: name.clone(),
        pod_cidrs: Vec::new(),
    })));
    // `--kubernetes` is Kubernetes mode as much as `[kubernetes] enabled`
    // (masquerading's default follows it).
    let mut config = config;
    config.kubernetes.enabled = true;
    let network = NetworkCell::default();
    let client = sarena_k8s::connect(kubeconfig(cli, &config).as_deref()).await?;
    let kernel = Arc::new(RtnetlinkPeers::new()?);
    let dataplane = DataplaneParts::new(
        config.dataplane,
        &cli.bpf_pin_dir,
        crate::dataplane::host_ledger(&cli.socket),
    )?;
    let queue = DeleteQueue::new(cli.delete_queue_dir());
    let (identity, identity_task) = IdentityHub::spawn(dataplane.updates());
    let (policy, policy_task) = PolicyHub::spawn(PolicyHubParts {
        node: name.clone(),
        // The engine's base; the policy loader passes what the pinned
        // ipcache already holds once identities survive restarts.
        first_identity: 0,
        dataplane: dataplane.updates(),
        metrics: metrics.as_ref().map(|m| m.policy().clone()),
        api: Some(Arc::new(KubeClusterApi::new(client.clone()))),
    });
    let state = DaemonSessions::new(
        cli.state_dir.clone(),
        queue.clone(),
        config.clone(),
        dataplane.clone(),
    )
    .with_observers(status.clone(), metrics.clone())
    .with_identity(identity.clone());
    let mut supervisor = Supervisor::new(SupervisorParts {
        node_name: name.clone(),
        routing: config.kubernetes.routing,
        mtu: config.mtu,
        uplink: kernel.clone(),
        underlay: config.kubernetes.underlay.clone(),
        egress: EgressParts {
            masquerade: config.masquerade_enabled(),
            cluster_cidrs: config.cluster_cidrs.clone(),
            exempt: config.masquerade_exempt(),
            updates: dataplane.updates(),
        },
        network: network.clone(),
        state: Arc::new(state),
        peers: Arc::new(PeerSync::new(
            config.kubernetes.clone(),
            config.mtu,
            kernel.clone(),
            kernel,
        )),
        api: Arc::new(KubeClusterApi::new(client.clone())),
    });

    // The API first, not ready: STATUS says why from the first moment.
    let tcp = TcpApi::from_cli(cli).await?;
    let unix = UnixSocket::bind(&cli.socket)?;
    let (stop, stopped) = watch::channel(false);
    let mut operated = Operated::new(supervisor.gate())
        .with_delete_queue(queue)
        .with_kubernetes(status)
        .with_network(network)
        .with_policy(policy.clone())
        .on_registered({
            let identity = identity.clone();
            Arc::new(move |owner: &Attachment| identity.registered(owner.clone()))
        });
    if let Some(m) = &metrics {
        operated = operated.with_metrics(m.clone());
    }
    let served: Arc<dyn NodeApi> = Arc::new(operated);
    crate::events::start_for(cli, dataplane.ebpf(), served.clone());
    let metrics_task = serve_metrics(cli, metrics.as_ref(), &served).await?;
    let cni_conf_task = cni_conf.map(|w| w.spawn(served.clone()));
    let mut on_stop = stopped.clone();
    let server = tokio::spawn(server::serve(
        served,
        unix,
        tcp,
        async move {
            let _ = on_stop.wait_for(|stop| *stop).await;
            crate::events::close_installed();
        },
        DEFAULT_SHUTDOWN_GRACE,
    ));
    tracing::info!(
        node = %name,
        socket = %cli.socket.display(),
        routing = config.kubernetes.routing.as_str(),
        masquerade = config.masquerade_enabled(),
        state_dir = %cli.state_dir.display(),
        "Kubernetes mode: serving the API (not ready until the Node has podCIDRs)"
    );

    if let Err(e) = supervisor.resume().await {
        tracing::warn!(
            "cannot reopen the last run's session: {}",
            sarena_core::error_chain(&e)
        );
    }
    let identity_watch = sarena_k8s::watch_identity(client.clone(), &name, identity.events());
    let policy_watch = sarena_k8s::policy::watch_policy(client.clone(), policy.events());
    let (views, watcher) = sarena_k8s::watch_nodes(client, name);
    let node_addresses = spawn_node_addresses(views.clone(), policy.events());
    drop(policy);
    let mut on_stop = stopped;
    let run = supervisor.run(views, async move {
        let _ = on_stop.wait_for(|stop| *stop).await;
    });
    let mut run = std::pin::pin!(run);
    let outcome = tokio::select! {
        outcome = &mut run => outcome,
        () = shutdown => {
            let _ = stop.send(true);
            run.await
        }
    };
    let _ = stop.send(true);
    watcher.abort();
    identity_watch.abort();
    identity_task.abort();
    for task in [policy_watch, node_addresses, policy_task] {
        task.abort();
    }
    for task in [metrics_task, cni_conf_task].into_iter().flatten() {
        task.abort();
    }
    if let Err(e) = server.await {
        tracing::warn!(
            "the API server task failed: {}",
            sarena_core::error_chain(&e)
        );
    }
    dataplane.hand_over();
    tracing::info!("stopped");
    Ok(outcome?)
}

/// Tells policy this node's addresses (its Node's `InternalIP`s) whenever
/// the view of them changes.
fn spawn_node_addresses(
    mut views: watch::Receiver<Option<sarena_core::cluster::ClusterView>>,
    events: tokio::sync::mpsc::Sender<sarena_core::policy::PolicyEvent>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut told = None;
        loop {
            let addresses = views
                .borrow_and_update()
                .as_ref()
                .and_then(|v| v.local.as_ref())
                .map(|local| local.internal_ips.clone());
            if let Some(addresses) = addresses
                && told.as_ref() != Some(&addresses)
            {
                let event = sarena_core::policy::PolicyEvent::NodeAddresses(addresses.clone());
                if events.send(event).await.is_err() {
                    return;
                }
                told = Some(addresses);
            }
            if views.changed().await.is_err() {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("sarena-daemon").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn the_node_name_is_the_flag_else_the_lower_case_hostname() {
        assert_eq!(node_name(&cli(&["--node-name", "node7"])).unwrap(), "node7");
        let mut without = cli(&[]);
        without.node_name = None;
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(node_name(&without).unwrap(), hostname.trim().to_lowercase());
        without.node_name = Some(String::new());
        assert_eq!(node_name(&without).unwrap(), hostname.trim().to_lowercase());
    }

    #[test]
    fn the_kubeconfig_flag_overrides_the_config_file() {
        let mut config = NodeConfig::default();
        assert_eq!(kubeconfig(&cli(&[]), &config), None);
        config.kubernetes.kubeconfig = Some("/etc/file".into());
        assert_eq!(kubeconfig(&cli(&[]), &config), Some("/etc/file".into()));
        assert_eq!(
            kubeconfig(&cli(&["--kubeconfig", "/etc/flag"]), &config),
            Some("/etc/flag".into())
        );
    }
}
