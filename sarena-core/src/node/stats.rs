//! What [`WithDataplane`] adds to the operator's answers: whether the
//! programs are attached (`GET /daemon/status`) and each endpoint's
//! counters (`GET /stats/endpoints`), read from the dataplane at request time.

use crate::api::{
    BandwidthStatus, DaemonError, DaemonStatus, DataplaneCounters, Endpoint, EndpointStats,
};

use super::WithDataplane;

impl WithDataplane {
    /// The registry's status with the dataplane's mode and programs. A
    /// failed program query leaves `programs` out (and is logged) rather
    /// than failing the status.
    pub(super) async fn dataplane_status(&self) -> Result<DaemonStatus, DaemonError> {
        let mut status = self.registry.status().await?;
        status.dataplane.mode = self.dataplane.mode().as_str().to_owned();
        let endpoints = self.registry.endpoints().await?;
        status.dataplane.programs = match self.dataplane.programs_status(&endpoints).await {
            Ok(programs) => programs,
            Err(error) => {
                tracing::warn!(error = %crate::error_chain(&error), "cannot tell whether the programs are attached");
                None
            }
        };
        status.dataplane.host_routing = match self.dataplane.host_routing() {
            Ok(routing) => routing,
            Err(error) => {
                tracing::warn!(error = %crate::error_chain(&error), "cannot read host routing");
                None
            }
        };
        Ok(status)
    }

    /// `endpoint` with its counters; a failed read leaves them out (logged).
    pub(super) fn stats(&self, endpoint: Endpoint) -> EndpointStats {
        let counters = match self.dataplane.endpoint_counters(&endpoint) {
            Ok(counters) => counters.as_ref().map(DataplaneCounters::from),
            Err(error) => {
                tracing::warn!(error = %crate::error_chain(&error), host_ifname = %endpoint.spec.host_ifname, "cannot read counters");
                None
            }
        };
        EndpointStats {
            endpoint,
            counters,
            bandwidth: None,
        }
    }

    /// Whether `endpoint`'s bandwidth limits are in place; `None` for an
    /// endpoint without limits. A failed query is reported as a problem
    /// (and logged), so an answer never claims shaping it could not see.
    pub(super) async fn bandwidth_status(&self, endpoint: &Endpoint) -> Option<BandwidthStatus> {
        endpoint.spec.bandwidth?;
        match self.dataplane.bandwidth_status(endpoint).await {
            Ok(status) => status,
            Err(error) => {
                tracing::warn!(error = %crate::error_chain(&error), host_ifname = %endpoint.spec.host_ifname, "cannot read bandwidth shaping");
                Some(BandwidthStatus {
                    enforced: None,
                    problems: vec![format!(
                        "the dataplane could not be read: {}",
                        crate::error_chain(&error)
                    )],
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::EndpointSpec;
    use crate::api::HostRoutingStatus;
    use crate::api::{Attachment, Health, Inspect, IpamState, MockNodeApi, ProgramsStatus};
    use crate::dataplane::ebpf::EndpointCounters;
    use crate::dataplane::{DataplaneError, DataplaneMode, MockDataplane};

    fn endpoint(ifname: &str) -> Endpoint {
        let owner = Attachment {
            container_id: ifname.into(),
            ifname: "eth0".into(),
        };
        let addresses = vec!["10.200.0.5/16".parse().unwrap()];
        Endpoint {
            spec: EndpointSpec::for_tests(owner, ifname, addresses),
            created_at: 1,
        }
    }

    fn registry() -> MockNodeApi {
        let mut registry = MockNodeApi::new();
        registry
            .expect_endpoints()
            .returning(|| Ok(vec![endpoint("lxca"), endpoint("lxcb")]));
        registry.expect_status().returning(|| {
            let health = Health {
                ready: true,
                message: String::new(),
            };
            Ok(DaemonStatus::from_parts(
                health,
                "ebpf",
                &IpamState::default(),
                2,
            ))
        });
        registry
    }

    #[tokio::test]
    async fn status_has_the_dataplanes_mode_programs_and_host_routing() {
        let mut dataplane = MockDataplane::new();
        dataplane.expect_mode().return_const(DataplaneMode::Kernel);
        dataplane
            .expect_programs_status()
            .withf(|eps| eps.len() == 2)
            .returning(|_| {
                Ok(Some(ProgramsStatus {
                    attached: 1,
                    detached: vec!["lxcb".into()],
                }))
            });
        dataplane.expect_host_routing().returning(|| {
            Ok(Some(HostRoutingStatus {
                peer_pod_cidrs: vec!["10.244.1.0/24".parse().unwrap()],
                counters: [("from_peer_redirected".to_owned(), 7)].into(),
            }))
        });
        let daemon = WithDataplane::new(Arc::new(registry()), Arc::new(dataplane));
        let status = daemon.status().await.unwrap();
        assert_eq!(status.dataplane.mode, "kernel");
        let routing = status.dataplane.host_routing.unwrap();
        assert_eq!(routing.get("from_peer_redirected"), 7);
        assert_eq!(routing.peer_pod_cidrs.len(), 1);
        let programs = status.dataplane.programs.unwrap();
        assert_eq!(
            (programs.attached, programs.detached),
            (1, vec!["lxcb".into()])
        );
        assert_eq!(status.endpoints, 2);
    }

    #[tokio::test]
    async fn stats_carry_counters_and_survive_a_failed_read() {
        let mut dataplane = MockDataplane::new();
        dataplane.expect_mode().return_const(DataplaneMode::Ebpf);
        dataplane.expect_endpoint_counters().returning(|e| {
            if e.spec.host_ifname == "lxca" {
                Ok(Some(EndpointCounters {
                    to_pod_packets: 4,
                    ..Default::default()
                }))
            } else {
                Err(DataplaneError::Io {
                    call: "read counters",
                    path: "/x".into(),
                    source: std::io::Error::other("boom"),
                })
            }
        });
        let daemon = WithDataplane::new(Arc::new(registry()), Arc::new(dataplane));
        let stats = daemon.endpoint_stats().await.unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0].counters.as_ref().unwrap().get("to_pod_packets"), 4);
        assert_eq!(stats[1].counters, None);
    }
}
