//! A client of the API server.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::K8sError;

/// A client from `kubeconfig` (its current context) or, without one, from
/// the in-cluster service account (`KUBERNETES_SERVICE_HOST`/`_PORT` and
/// `/var/run/secrets/kubernetes.io/serviceaccount/`). Never falls back to
/// `~/.kube/config`: a node daemon uses the credentials it is given.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Client, K8sError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| K8sError::Kubeconfig {
                path: path.to_owned(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => Config::incluster().map_err(|source| K8sError::InCluster { source })?,
    };
    Client::try_from(config).map_err(|source| K8sError::Client { source })
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
        assert!(
            sarena_core::error_chain(&err).starts_with("kubeconfig /nonexistent/kubeconfig: "),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_kubeconfig_yields_a_client_without_contacting_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
             users: [{name: u, user: {token: t}}]\n\
             contexts: [{name: c, context: {cluster: k, user: u}}]\n",
        )
        .unwrap();
        connect(Some(&path)).await.unwrap();
    }
}
