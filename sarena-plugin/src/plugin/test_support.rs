//! Fixtures shared by the plugin's unit tests.

use std::path::PathBuf;

use crate::api::{
    AllocatedAddress, Allocation, Attachment, DaemonConfig, DaemonError, Endpoint, EndpointCreate,
    EndpointSpec, PodRef, RouteSpec,
};
use crate::cni::Version;
use crate::links::{LinkError, VethPair, host_ifname};

use super::request::AddRequest;

pub(crate) const NETNS: &str = "/var/run/netns/cni-test";
pub(crate) const HOST_MAC: &str = "b6:1d:00:00:00:04";
pub(crate) const POD_MAC: &str = "9a:54:00:00:00:a7";
pub(crate) const MTU: u32 = 1450;

pub(crate) fn att() -> Attachment {
    Attachment {
        container_id: "abc123".into(),
        ifname: "eth0".into(),
    }
}

pub(crate) fn host() -> String {
    host_ifname("abc123", "eth0")
}

pub(crate) fn add_req() -> AddRequest {
    AddRequest {
        attachment: att(),
        netns: PathBuf::from(NETNS),
        pod: PodRef {
            namespace: Some("default".into()),
            name: Some("web".into()),
            uid: None,
        },
        requested_ips: vec!["10.0.10.30".parse().unwrap()],
        requested_mac: Some(POD_MAC.parse().unwrap()),
        version: Version::V1_1_0,
        bandwidth: None,
        chain_check: None,
    }
}

pub(crate) fn config() -> DaemonConfig {
    DaemonConfig {
        mtu: MTU,
        dataplane: "ebpf".into(),
    }
}

pub(crate) fn routes() -> Vec<RouteSpec> {
    vec![
        RouteSpec {
            dst: "10.0.0.7/32".parse().unwrap(),
            gw: None,
            mtu: None,
        },
        RouteSpec {
            dst: "0.0.0.0/0".parse().unwrap(),
            gw: Some("10.0.0.7".parse().unwrap()),
            mtu: Some(MTU),
        },
    ]
}

pub(crate) fn allocation() -> Allocation {
    Allocation {
        owner: att(),
        addresses: vec![AllocatedAddress {
            address: "10.0.10.30/24".parse().unwrap(),
            gateway: "10.0.0.7".parse().unwrap(),
            pool: "default".into(),
        }],
        routes: routes(),
        lease_expires_at: None,
    }
}

pub(crate) fn pair() -> VethPair {
    VethPair {
        host_ifname: host(),
        host_ifindex: 42,
        host_mac: HOST_MAC.parse().unwrap(),
        pod_ifname: "eth0".into(),
        pod_mac: POD_MAC.parse().unwrap(),
    }
}

pub(crate) fn endpoint_from(req: &EndpointCreate) -> Endpoint {
    req.clone().into_endpoint(1)
}

pub(crate) fn endpoint() -> Endpoint {
    endpoint_from(&EndpointCreate {
        spec: EndpointSpec {
            owner: att(),
            pod: PodRef::default(),
            host_ifname: host(),
            host_ifindex: 42,
            host_mac: HOST_MAC.parse().unwrap(),
            pod_mac: POD_MAC.parse().unwrap(),
            addresses: vec!["10.0.10.30/24".parse().unwrap()],
            netns: NETNS.into(),
            bandwidth: None,
            identity: Default::default(),
        },
    })
}

pub(crate) fn unreachable() -> DaemonError {
    DaemonError::Unreachable {
        endpoint: "/run/sarena/sarena.sock".into(),
        source: "refused".into(),
    }
}

pub(crate) fn netlink(call: &'static str) -> LinkError {
    LinkError::Netlink(crate::NetlinkError::from_errno(call, "x", libc::EPERM))
}

pub(crate) fn netns_gone() -> LinkError {
    LinkError::Netns {
        path: NETNS.into(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    }
}
