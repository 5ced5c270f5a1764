//! [`connect`]: a client of the API server, from a kubeconfig file or the
//! pod's service account.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
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
    #[error("no in-cluster credentials; outside a pod, pass --kubeconfig PATH")]
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

/// A client from `kubeconfig` (its current context) or, without one, from
/// the in-cluster service account.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| ClientError::Kubeconfig {
                path: path.to_owned(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => Config::incluster().map_err(|source| ClientError::InCluster { source })?,
    };
    Client::try_from(config).map_err(|source| ClientError::Client { source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_names_the_file() {
        let Err(err) = connect(Some(Path::new("/nonexistent/kubeconfig"))).await else {
            panic!("a client from a missing file");
        };
        assert_eq!(err.to_string(), "kubeconfig /nonexistent/kubeconfig");
    }
}
