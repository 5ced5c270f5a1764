//! [`watch_nodes`]: a watch of every Node object, decoded as [`PeerNode`]
//! (the fields peer routing reads) into a [`NodeTable`], publishing this
//! node's [`ClusterView`] on a `tokio::sync::watch` channel whenever it
//! changes. The API server is watched (list, then watch with bookmarks;
//! re-listed with backoff after an error), never polled. Nothing but the
//! table is kept: no copy of the Node objects.

use futures_util::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use sarena_core::cluster::ClusterView;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::node::PeerNode;
use crate::view::NodeTable;

/// Watches the Nodes through `client`; the receiver holds `None` until the
/// first complete list, then the view of `local_name`, updated on every
/// change of what the view holds (heartbeats of other fields do not wake
/// the receiver). The task runs until the receiver is dropped.
pub fn watch_nodes(
    client: Client,
    local_name: String,
) -> (watch::Receiver<Option<ClusterView>>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let nodes: Api<PeerNode> = Api::all(client);
    let stream = watcher(nodes, watcher::Config::default()).default_backoff();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut table = NodeTable::new(&local_name);
        let mut listed = false;
        while let Some(event) = stream.next().await {
            let changed = match event {
                Ok(watcher::Event::Init) => {
                    table.relist_begin();
                    false
                }
                Ok(watcher::Event::InitApply(node)) => {
                    table.relisted(&node);
                    false
                }
                Ok(watcher::Event::InitDone) => {
                    let changed = table.relist_done();
                    if listed {
                        changed
                    } else {
                        // the first list is published, changed or not
                        tracing::info!("listed the Node objects; watching them");
                        listed = true;
                        true
                    }
                }
                Ok(watcher::Event::Apply(node)) => table.apply(&node),
                Ok(watcher::Event::Delete(node)) => table.remove(&node),
                Err(e) => {
                    tracing::warn!("watching the Node objects: {e} (retrying)");
                    false
                }
            };
            if changed && listed {
                tx.send_replace(Some(table.view()));
            }
            if tx.is_closed() {
                break;
            }
        }
    });
    (rx, task)
}
