//! [`FullMaps`]: when a policy update finds eBPF maps full, a Warning
//! Event on the Node names them (reason [`REASON`]) and the metric
//! `sarena_policy_map_full_total{map}` counts it. The update's missing
//! entries stay denied (fail closed) and the hub retries every second, so
//! the Event is posted when the set of full maps changes, and again at
//! most every [`REPEAT`] while it stays the same.

use std::sync::Arc;
use std::time::Duration;

use sarena_core::cluster::{ClusterApi, ClusterNode};
use sarena_core::dataplane::DataplaneError;
use tokio::time::Instant;

use crate::metrics::PolicyMetrics;

/// The Event's reason.
pub const REASON: &str = "PolicyMapFull";
/// How often the same full maps are reported again.
pub const REPEAT: Duration = Duration::from_secs(600);

/// What the hub tells about full maps.
pub(super) struct FullMaps {
    node: String,
    api: Option<Arc<dyn ClusterApi>>,
    metrics: Option<PolicyMetrics>,
    /// The maps of the last Event, and when it was posted.
    last: Option<(Vec<&'static str>, Instant)>,
}

impl FullMaps {
    pub(super) fn new(
        node: String,
        api: Option<Arc<dyn ClusterApi>>,
        metrics: Option<PolicyMetrics>,
    ) -> Self {
        FullMaps {
            node,
            api,
            metrics,
            last: None,
        }
    }

    /// An apply failed with `error`: counted per full map, and an Event
    /// posted (in the background) when due.
    pub(super) fn failed(&mut self, error: &DataplaneError) {
        let maps = error.full_maps();
        if maps.is_empty() {
            return;
        }
        if let Some(m) = &self.metrics {
            for map in maps {
                m.map_full(map);
            }
        }
        let now = Instant::now();
        let due = match &self.last {
            Some((last, at)) => last.as_slice() != maps || now.duration_since(*at) >= REPEAT,
            None => true,
        };
        if !due {
            return;
        }
        self.last = Some((maps.to_vec(), now));
        let Some(api) = self.api.clone() else { return };
        let node = ClusterNode {
            name: self.node.clone(),
            uid: String::new(),
            internal_ips: Vec::new(),
            pod_cidrs: Vec::new(),
        };
        let message = format!(
            "NetworkPolicy: the eBPF map(s) {} are full ({}); the entries that did not fit \
             stay denied until they fit (see docs/networkpolicy.md, map sizes)",
            maps.join(", "),
            sarena_core::error_chain(error),
        );
        tokio::spawn(async move {
            if let Err(e) = api.warn(&node, REASON, &message).await {
                tracing::warn!(error = %sarena_core::error_chain(&e), "the PolicyMapFull Event was not posted");
            }
        });
    }

    /// An apply succeeded: a later full map is news again.
    pub(super) fn cleared(&mut self) {
        self.last = None;
    }
}
