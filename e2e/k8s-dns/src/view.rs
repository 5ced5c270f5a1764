//! [`View`]: what the DNS answers from, the Services and Endpoints of the
//! cluster reduced to the fields the DNS specification reads, and the
//! conversions from the API objects (`k8s-openapi`) to it.
//!
//! Kubernetes object names are DNS labels in lowercase, so the keys are
//! stored as the API server gives them and a query is lowercased before a
//! lookup.

use std::collections::HashMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    EndpointSubset, Endpoints as K8sEndpoints, Service as K8sService,
};

/// A Service or Endpoints object's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl Key {
    /// The key of `namespace`/`name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// A named port of a Service or of an Endpoints subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// The port's name (unnamed ports have no SRV record and are not kept).
    pub name: String,
    /// The protocol in lowercase: `tcp`, `udp` or `sctp`.
    pub protocol: String,
    /// The port number (the Service's port; an endpoint's target port).
    pub port: u16,
}

/// How a Service is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    /// A virtual IP per family (ClusterIP, NodePort, LoadBalancer); empty
    /// while none is allocated.
    ClusterIp(Vec<IpAddr>),
    /// `clusterIP: None`: the name resolves to the endpoints.
    Headless,
    /// `type: ExternalName`: a CNAME to this name.
    ExternalName(String),
}

/// The parts of a Service that DNS reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    /// How it is reached.
    pub kind: ServiceKind,
    /// Its named ports.
    pub ports: Vec<Port>,
    /// `spec.publishNotReadyAddresses`: not-ready endpoints get records too.
    pub publish_not_ready: bool,
}

/// One endpoint address of an Endpoints object with the ports of its subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The address.
    pub ip: IpAddr,
    /// `hostname` (set for pods with `hostname` + `subdomain`).
    pub hostname: Option<String>,
    /// Listed in `addresses` (true) or `notReadyAddresses` (false).
    pub ready: bool,
    /// The named ports of its subset.
    pub ports: Vec<Port>,
}

impl Endpoint {
    /// The first label of its DNS name: the hostname, or without one the
    /// address with `-` for `.` and `:` (`10-244-1-5`, `fd00-10-244--5`).
    pub fn label(&self) -> String {
        match &self.hostname {
            Some(h) if !h.is_empty() => h.to_ascii_lowercase(),
            _ => dashed(self.ip),
        }
    }
}

/// `ip` with its separators replaced by `-`.
pub fn dashed(ip: IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

/// The Services and Endpoints of the cluster, by namespace and name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Every Service.
    pub services: HashMap<Key, Service>,
    /// Every Endpoints object's addresses.
    pub endpoints: HashMap<Key, Vec<Endpoint>>,
}

impl View {
    /// Whether any Service lives in `namespace`.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.services.keys().any(|k| k.namespace == namespace)
    }

    /// The endpoints of the Service `key` that get records: the ready
    /// ones, and the not-ready ones too if the Service publishes them.
    pub fn published_endpoints<'a>(
        &'a self,
        key: &Key,
        service: &Service,
    ) -> impl Iterator<Item = &'a Endpoint> + 'a {
        let publish_not_ready = service.publish_not_ready;
        self.endpoints
            .get(key)
            .into_iter()
            .flatten()
            .filter(move |e| e.ready || publish_not_ready)
    }
}

/// The key of an API object, if it has a namespace and a name.
pub fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Key> {
    Some(Key::new(meta.namespace.as_deref()?, meta.name.as_deref()?))
}

fn port(name: Option<&String>, protocol: Option<&String>, port: i32) -> Option<Port> {
    let name = name.filter(|n| !n.is_empty())?;
    Some(Port {
        name: name.to_ascii_lowercase(),
        protocol: protocol.map_or("tcp".to_owned(), |p| p.to_ascii_lowercase()),
        port: u16::try_from(port).ok()?,
    })
}

/// The DNS view of a Service object (`None` without a spec).
pub fn service(svc: &K8sService) -> Option<Service> {
    let spec = svc.spec.as_ref()?;
    let ports = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port(p.name.as_ref(), p.protocol.as_ref(), p.port))
        .collect();
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        ServiceKind::ExternalName(spec.external_name.clone().unwrap_or_default())
    } else if spec.cluster_ip.as_deref() == Some("None") {
        ServiceKind::Headless
    } else {
        let listed = spec.cluster_ips.iter().flatten();
        let single = spec.cluster_ip.iter();
        let mut ips: Vec<IpAddr> = listed
            .chain(single)
            .filter_map(|ip| ip.parse().ok())
            .collect();
        ips.sort();
        ips.dedup();
        ServiceKind::ClusterIp(ips)
    };
    Some(Service {
        kind,
        ports,
        publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false),
    })
}

fn subset_endpoints(subset: &EndpointSubset) -> impl Iterator<Item = Endpoint> + '_ {
    let ports: Vec<Port> = subset
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port(p.name.as_ref(), p.protocol.as_ref(), p.port))
        .collect();
    let ready = subset.addresses.iter().flatten().map(|a| (a, true));
    let not_ready = subset
        .not_ready_addresses
        .iter()
        .flatten()
        .map(|a| (a, false));
    ready.chain(not_ready).filter_map(move |(a, ready)| {
        Some(Endpoint {
            ip: a.ip.parse().ok()?,
            hostname: a.hostname.clone().filter(|h| !h.is_empty()),
            ready,
            ports: ports.clone(),
        })
    })
}

/// The addresses of an Endpoints object, each with its subset's ports.
pub fn endpoints(eps: &K8sEndpoints) -> Vec<Endpoint> {
    eps.subsets
        .iter()
        .flatten()
        .flat_map(subset_endpoints)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, ServicePort, ServiceSpec};

    #[test]
    fn a_dual_stack_service_keeps_both_addresses_and_its_named_ports() {
        let svc = K8sService {
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.96.0.20".into()),
                cluster_ips: Some(vec!["10.96.0.20".into(), "fd00:10:96::20".into()]),
                ports: Some(vec![
                    ServicePort {
                        name: Some("HTTP".into()),
                        port: 80,
                        ..Default::default()
                    },
                    ServicePort {
                        port: 81,
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let Some(s) = service(&svc) else {
            panic!("no service");
        };
        let want: Vec<IpAddr> = vec![
            "10.96.0.20".parse().unwrap(),
            "fd00:10:96::20".parse().unwrap(),
        ];
        assert_eq!(s.kind, ServiceKind::ClusterIp(want));
        assert_eq!(
            s.ports,
            vec![Port {
                name: "http".into(),
                protocol: "tcp".into(),
                port: 80
            }]
        );
    }

    #[test]
    fn endpoints_keep_readiness_hostname_and_subset_ports() {
        let eps = K8sEndpoints {
            subsets: Some(vec![EndpointSubset {
                addresses: Some(vec![EndpointAddress {
                    ip: "10.244.1.5".into(),
                    hostname: Some("web-0".into()),
                    ..Default::default()
                }]),
                not_ready_addresses: Some(vec![EndpointAddress {
                    ip: "not an ip".into(),
                    ..Default::default()
                }]),
                ports: Some(vec![EndpointPort {
                    name: Some("dns".into()),
                    protocol: Some("UDP".into()),
                    port: 1053,
                    ..Default::default()
                }]),
            }]),
            ..Default::default()
        };
        let got = endpoints(&eps);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].label(), "web-0");
        assert!(got[0].ready);
        assert_eq!(got[0].ports[0].protocol, "udp");
        assert_eq!(got[0].ports[0].port, 1053);
    }

    #[test]
    fn an_endpoint_without_hostname_is_named_by_its_dashed_address() {
        let ep = |ip: &str| Endpoint {
            ip: ip.parse().unwrap(),
            hostname: None,
            ready: true,
            ports: vec![],
        };
        assert_eq!(ep("10.244.1.5").label(), "10-244-1-5");
        assert_eq!(ep("fd00:10:244::5").label(), "fd00-10-244--5");
    }
}
