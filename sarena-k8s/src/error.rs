//! [`K8sError`]: connecting to the API server.

use std::path::PathBuf;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// The kubeconfig file could not be read or used.
    #[error("kubeconfig {path}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No in-cluster credentials (not running in a pod).
    #[error(
        "no in-cluster credentials; outside a pod, pass --kubeconfig PATH \
         (or [kubernetes] kubeconfig in the config file)"
    )]
    InCluster {
        /// Cause.
        #[source]
        source: kube::config::InClusterError,
    },
    /// The client could not be built from the configuration.
    #[error("cannot build the Kubernetes client")]
    Client {
        /// Cause.
        #[source]
        source: kube::Error,
    },
}
