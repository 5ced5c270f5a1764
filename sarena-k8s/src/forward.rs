//! [`forward`]: a watch's events, translated, into a channel. Shared by the
//! identity and the policy watches.

use futures_util::StreamExt;
use kube::runtime::watcher;
use tokio::sync::mpsc;

/// Sends the translation of every event of `stream` to `events`, until
/// either ends; a watch error is logged (naming `what` is watched) and
/// the watcher retries on its own.
pub(crate) async fn forward<K, E>(
    what: &'static str,
    stream: impl futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    translate: fn(watcher::Event<K>) -> Option<E>,
    events: mpsc::Sender<E>,
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                if let Some(event) = translate(event)
                    && events.send(event).await.is_err()
                {
                    return;
                }
            }
            Err(e) => tracing::warn!("watching {what}: {e} (retrying)"),
        }
    }
}
