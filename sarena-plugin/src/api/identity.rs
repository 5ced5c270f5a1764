//! [`PodIdentity`]: the labels a pod is known by (its own and its
//! namespace's), the input of policy. Labels come from the runtime or the
//! API server and are hostile: [`PodIdentity::bounded`] keeps at most
//! [`MAX_LABELS`] of each, of valid Kubernetes sizes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// At most this many labels of a pod (and of its namespace) are kept.
pub const MAX_LABELS: usize = 64;
/// The longest label key kept (prefix `/` name, as Kubernetes allows: 253 + 1 + 63).
pub const MAX_LABEL_KEY_LEN: usize = 317;
/// The longest label value kept (Kubernetes allows 63).
pub const MAX_LABEL_VALUE_LEN: usize = 63;

/// Labels: key → value.
pub type Labels = BTreeMap<String, String>;

/// Who a pod is, for policy: its labels and its namespace's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodIdentity {
    /// The pod's labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Its namespace's labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespace_labels: Labels,
}

impl PodIdentity {
    /// No labels at all (the identity is then left out of the JSON).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.namespace_labels.is_empty()
    }

    /// An identity from untrusted labels: entries with an empty or oversized
    /// key or an oversized value are dropped, and at most [`MAX_LABELS`] of
    /// each map are kept (the first by key order).
    pub fn bounded<'a>(
        labels: impl IntoIterator<Item = (&'a String, &'a String)>,
        namespace_labels: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> PodIdentity {
        PodIdentity {
            labels: bound_labels(labels),
            namespace_labels: bound_labels(namespace_labels),
        }
    }
}

/// The labels of `entries` that are of a valid size, at most [`MAX_LABELS`].
pub fn bound_labels<'a>(entries: impl IntoIterator<Item = (&'a String, &'a String)>) -> Labels {
    let mut kept: Labels = entries
        .into_iter()
        .filter(|(k, v)| {
            !k.is_empty() && k.len() <= MAX_LABEL_KEY_LEN && v.len() <= MAX_LABEL_VALUE_LEN
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    while kept.len() > MAX_LABELS {
        kept.pop_last();
    }
    kept
}
