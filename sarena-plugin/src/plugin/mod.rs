//! The plugin's sequences: ADD, DEL, CHECK, STATUS, GC, written against the
//! [`crate::api::Daemon`] and [`crate::links::Links`] traits.
//!
//! An embedder (a Rust container runtime, or `sarena-cni`) builds a [`Plugin`]
//! from a daemon client and a links backend and calls one method per CNI
//! operation; [`dispatch`] does the same from a parsed CNI environment and
//! config and returns the JSON to print.
//!
//! ```no_run
//! use std::path::PathBuf;
//! use std::sync::Arc;
//! use sarena_plugin::api::{Attachment, Daemon, PodRef};
//! use sarena_plugin::cni::Version;
//! use sarena_plugin::links::Links;
//! use sarena_plugin::plugin::{AddRequest, DelRequest, DeleteQueue, Plugin};
//!
//! async fn attach(daemon: Arc<dyn Daemon>, links: Arc<dyn Links>) -> Result<(), Box<dyn std::error::Error>> {
//!     let plugin = Plugin::new(daemon, links)
//!         .with_delete_queue(DeleteQueue::new(DeleteQueue::DEFAULT_DIR));
//!     let attachment = Attachment { container_id: "abc123".into(), ifname: "eth0".into() };
//!     let result = plugin
//!         .add(&AddRequest {
//!             attachment: attachment.clone(),
//!             netns: PathBuf::from("/var/run/netns/cni-1234"),
//!             pod: PodRef { namespace: Some("default".into()), name: Some("web".into()), uid: None },
//!             requested_ips: vec![],
//!             requested_mac: None,
//!             version: Version::V1_1_0,
//!             bandwidth: None,
//!             chain_check: None,
//!         })
//!         .await?;
//!     println!("pod address: {}", result.ips[0].address);
//!     plugin.del(&DelRequest { attachment, netns: None }).await?;
//!     Ok(())
//! }
//! ```

mod add;
mod bandwidth;
mod check;
mod cni_codes;
mod del;
mod dispatch;
mod error;
mod gc;
mod request;
mod rollback;
mod status;
mod step;
#[cfg(test)]
pub(crate) mod test_support;

use std::fmt;
use std::sync::Arc;

use crate::api::Daemon;
use crate::cni::CniResult;
use crate::links::Links;

pub use crate::delqueue::{DeleteQueue, QueueError, ReplayReport};
pub use dispatch::{dispatch, version_output};
pub use error::PluginError;
pub use request::{AddRequest, CheckRequest, DelRequest, GcRequest};
pub use step::{Operation, Step};

/// The plugin: the CNI operations over a daemon client and a links backend.
#[derive(Clone)]
pub struct Plugin {
    daemon: Arc<dyn Daemon>,
    links: Arc<dyn Links>,
    queue: Option<DeleteQueue>,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

/// Why [`Plugin::connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The daemon endpoint is not usable.
    #[error(transparent)]
    Daemon(#[from] crate::api::DaemonError),
    /// The netlink socket could not be opened.
    #[error(transparent)]
    Links(#[from] crate::links::LinkError),
}

impl Plugin {
    /// How many queued deletions one ADD or DEL replays at most.
    pub const REPLAY_BATCH: usize = 64;

    /// A plugin without a deletion queue: a DEL that cannot reach the daemon fails
    /// (code 11) instead of being queued.
    pub fn new(daemon: Arc<dyn Daemon>, links: Arc<dyn Links>) -> Self {
        Plugin {
            daemon,
            links,
            queue: None,
        }
    }

    /// The usual set-up for a node: the daemon at `daemon_endpoint` (a Unix
    /// socket path, `unix://PATH` or `http://IP:PORT`; `None` for
    /// [`crate::api::DEFAULT_SOCKET`]), the rtnetlink links backend, and the
    /// deletion queue in its default directory (replace it with
    /// [`Plugin::with_delete_queue`]). Call inside a tokio runtime. `sarena-cni`
    /// builds its plugin with this.
    pub fn connect(daemon_endpoint: Option<&str>) -> Result<Self, ConnectError> {
        Self::connect_with_token(daemon_endpoint, None)
    }

    /// [`Plugin::connect`], with the token file for an `http://` endpoint
    /// (see [`crate::api::HttpDaemon::for_endpoint`]; the network config's
    /// `daemon-token-file`). Over the Unix socket nothing more is read.
    pub fn connect_with_token(
        daemon_endpoint: Option<&str>,
        token_file: Option<&std::path::Path>,
    ) -> Result<Self, ConnectError> {
        let endpoint = daemon_endpoint.unwrap_or(crate::api::DEFAULT_SOCKET);
        let daemon = crate::api::HttpDaemon::for_endpoint(endpoint, token_file)?;
        let links = crate::links::RtnetlinkLinks::new()?;
        Ok(Plugin::new(Arc::new(daemon), Arc::new(links))
            .with_delete_queue(DeleteQueue::new(DeleteQueue::DEFAULT_DIR)))
    }

    /// Queues DELs that cannot reach the daemon in `queue`, and replays the queue
    /// before each ADD and DEL.
    pub fn with_delete_queue(mut self, queue: DeleteQueue) -> Self {
        self.queue = Some(queue);
        self
    }

    /// The deletion queue, if any.
    pub fn delete_queue(&self) -> Option<&DeleteQueue> {
        self.queue.as_ref()
    }

    /// Replays up to [`Plugin::REPLAY_BATCH`] queued deletions (cheap when the queue is empty). Failures are logged:
    /// they never fail the operation that triggered the replay.
    async fn replay_pending(&self) {
        let Some(queue) = &self.queue else { return };
        match queue
            .replay_at_most(self.daemon.as_ref(), Self::REPLAY_BATCH)
            .await
        {
            Ok(report) if !report.done.is_empty() || report.remaining > 0 => {
                tracing::info!(
                    done = report.done.len(),
                    remaining = report.remaining,
                    "deletion queue replayed"
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "cannot replay the deletion queue")
            }
        }
    }

    /// ADD: attaches the pod (the seed's eight steps). On failure after allocation
    /// the address is released, and after veth creation the veth is removed.
    pub async fn add(&self, req: &AddRequest) -> Result<CniResult, PluginError> {
        self.replay_pending().await;
        add::add(
            self.daemon.as_ref(),
            self.links.as_ref(),
            self.queue.as_ref(),
            req,
        )
        .await
    }

    /// DEL: detaches the pod, best effort and idempotent; queues the daemon-side
    /// deletion when the daemon cannot be reached.
    pub async fn del(&self, req: &DelRequest) -> Result<(), PluginError> {
        self.replay_pending().await;
        del::del(
            self.daemon.as_ref(),
            self.links.as_ref(),
            self.queue.as_ref(),
            req,
        )
        .await
    }

    /// CHECK: verifies that what `prevResult` describes still exists.
    pub async fn check(&self, req: &CheckRequest) -> Result<(), PluginError> {
        check::check(self.daemon.as_ref(), self.links.as_ref(), req).await
    }

    /// STATUS: `Ok` when the daemon is reachable and ready to serve ADD.
    pub async fn status(&self) -> Result<(), PluginError> {
        status::status(self.daemon.as_ref()).await
    }

    /// GC: removes endpoints, allocations and host links of attachments not in `req.valid`.
    pub async fn gc(&self, req: &GcRequest) -> Result<(), PluginError> {
        gc::gc(self.daemon.as_ref(), self.links.as_ref(), req).await
    }
}
