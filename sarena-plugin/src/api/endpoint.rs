//! The endpoint's fields, defined once: [`EndpointSpec`] is what the plugin
//! registers; [`EndpointCreate`] (the body of `POST /endpoint/create`) and
//! [`Endpoint`] (the registry's record) each hold one.
//!
//! Both keep the JSON of the separate structs they replace: the spec's
//! fields sit at the top level (`#[serde(flatten)]`), an [`Endpoint`] adds
//! `created_at`. The request still rejects an unknown field: serde's
//! `deny_unknown_fields` does not combine with `flatten`, so
//! [`EndpointCreate`] collects what its spec did not take and refuses it
//! explicitly. A record keeps reading fields it does not know (a newer
//! daemon's), as `Endpoint` always did.

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde::de::{Error as _, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize};

use super::bandwidth::BandwidthLimits;
use super::identity::PodIdentity;
use super::types::{Attachment, PodRef};
use crate::mac::MacAddr;

/// What an endpoint is: everything the plugin tells the daemon about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSpec {
    /// The owner (must hold an allocation).
    pub owner: Attachment,
    /// The pod.
    #[serde(default)]
    pub pod: PodRef,
    /// Host-side veth name (`lxc…`).
    pub host_ifname: String,
    /// Host-side ifindex.
    pub host_ifindex: u32,
    /// Host-side MAC.
    pub host_mac: MacAddr,
    /// Pod-side MAC.
    pub pod_mac: MacAddr,
    /// Pod addresses (must match the allocation).
    pub addresses: Vec<IpNet>,
    /// The pod's netns path as the runtime gave it.
    pub netns: String,
    /// The pod's bandwidth limits (the CNI `bandwidth` capability); absent
    /// for an unlimited pod, so older daemons never see the field for one
    /// (and records of daemons that predate limits read as unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<BandwidthLimits>,
    /// The pod's labels and its namespace's, when the runtime or the
    /// cluster provides them; absent when empty, so older daemons and
    /// records without it keep working.
    #[serde(default, skip_serializing_if = "PodIdentity::is_empty")]
    pub identity: PodIdentity,
}

/// `POST /endpoint/create`: the spec to register. Any field the spec does
/// not know is refused (a typo must not register a half-described pod).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointCreate {
    /// The endpoint to register.
    #[serde(flatten)]
    pub spec: EndpointSpec,
}

/// The names [`EndpointCreate`] accepts, for the unknown-field error.
const CREATE_FIELDS: &[&str] = &[
    "owner",
    "pod",
    "host_ifname",
    "host_ifindex",
    "host_mac",
    "pod_mac",
    "addresses",
    "netns",
    "bandwidth",
    "identity",
];

#[cfg(any(test, feature = "mocks"))]
impl EndpointSpec {
    /// A spec for tests (feature `mocks`): `owner`'s endpoint on host veth
    /// `host_ifname` (ifindex 7) with `addresses`, fixed MACs
    /// (`02:00:00:00:00:01` host, `…:02` pod), netns `/var/run/netns/x`, the
    /// default pod, no limits, no identity. Override fields as needed.
    pub fn for_tests(owner: Attachment, host_ifname: &str, addresses: Vec<IpNet>) -> Self {
        EndpointSpec {
            owner,
            pod: PodRef::default(),
            host_ifname: host_ifname.to_owned(),
            host_ifindex: 7,
            host_mac: MacAddr::new([2, 0, 0, 0, 0, 1]),
            pod_mac: MacAddr::new([2, 0, 0, 0, 0, 2]),
            addresses,
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
            identity: PodIdentity::default(),
        }
    }
}

impl<'de> Deserialize<'de> for EndpointCreate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The spec, and whatever it left over.
        #[derive(Deserialize)]
        struct Checked {
            #[serde(flatten)]
            spec: EndpointSpec,
            #[serde(flatten)]
            rest: BTreeMap<String, IgnoredAny>,
        }
        let checked = Checked::deserialize(deserializer)?;
        match checked.rest.keys().next() {
            Some(unknown) => Err(D::Error::unknown_field(unknown, CREATE_FIELDS)),
            None => Ok(EndpointCreate { spec: checked.spec }),
        }
    }
}

impl From<EndpointSpec> for EndpointCreate {
    fn from(spec: EndpointSpec) -> Self {
        EndpointCreate { spec }
    }
}

impl EndpointCreate {
    /// The endpoint this request registers, created at `created_at` (Unix seconds).
    pub fn into_endpoint(self, created_at: u64) -> Endpoint {
        Endpoint {
            spec: self.spec,
            created_at,
        }
    }
}

/// A registered endpoint: its spec and when it was registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// What the plugin registered (and the identity the node learned since).
    #[serde(flatten)]
    pub spec: EndpointSpec,
    /// Unix time (seconds) of creation.
    pub created_at: u64,
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
