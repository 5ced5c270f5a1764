//! [`watch_nodes`]: a reflector over every Node object, publishing this
//! node's [`ClusterView`] on a `tokio::sync::watch` channel whenever it
//! changes. The API server is watched (list, then watch with bookmarks;
//! re-listed with backoff after an error), never polled.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use sarena_core::cluster::ClusterView;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::view::cluster_view;

/// Watches the Nodes through `client`; the receiver holds `None` until the
/// first complete list, then the view of `local_name`, updated on every
/// change of what the view holds (heartbeats of other fields do not wake
/// the receiver). The task runs until the receiver is dropped.
pub fn watch_nodes(
    client: Client,
    local_name: String,
) -> (watch::Receiver<Option<ClusterView>>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let (store, writer) = reflector::store::<Node>();
    let nodes: Api<Node> = Api::all(client);
    let stream =
        reflector::reflector(writer, watcher(nodes, watcher::Config::default())).default_backoff();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut listed = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => {
                    if !listed {
                        tracing::info!("listed the Node objects; watching them");
                    }
                    listed = true;
                    publish(&tx, &store, &local_name);
                }
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) if listed => {
                    publish(&tx, &store, &local_name);
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("watching the Node objects: {e} (retrying)"),
            }
            if tx.is_closed() {
                break;
            }
        }
    });
    (rx, task)
}

fn publish(tx: &watch::Sender<Option<ClusterView>>, store: &Store<Node>, local_name: &str) {
    let nodes = store.state();
    let view = cluster_view(nodes.iter().map(|n| n.as_ref()), local_name);
    tx.send_if_modified(|current| {
        if current.as_ref() == Some(&view) {
            false
        } else {
            *current = Some(view);
            true
        }
    });
}
