//! `sarena status`.

use sarena_core::api::{Daemon, DaemonStatus, NodeApi};

use crate::table::{fields, table};
use crate::{CliError, OutputFormat, json};

/// Asks the daemon for its status and shows it.
pub async fn run(daemon: &dyn NodeApi, output: OutputFormat) -> Result<String, CliError> {
    let status = daemon.status().await?;
    match output {
        OutputFormat::Json => json(&status),
        OutputFormat::Table => Ok(render(&status)),
    }
}

/// `sarena health`: the daemon's health; `Err` (exit 1) when it is not
/// ready to serve ADD, so that it serves as a readiness probe.
pub async fn health(daemon: &dyn Daemon, output: OutputFormat) -> Result<String, CliError> {
    let health = daemon.health().await?;
    if !health.ready {
        return Err(CliError::NotReady {
            message: health.message,
        });
    }
    match output {
        OutputFormat::Json => json(&health),
        OutputFormat::Table if health.message.is_empty() => Ok("ready\n".to_owned()),
        OutputFormat::Table => Ok(format!("ready ({})\n", health.message)),
    }
}

/// The status as key/value lines and a pool table.
pub fn render(s: &DaemonStatus) -> String {
    let health = if s.health.ready { "ready" } else { "NOT READY" };
    let health = match s.health.message.as_str() {
        "" => health.to_owned(),
        message => format!("{health} ({message})"),
    };
    let dataplane = match &s.dataplane.programs {
        None => s.dataplane.mode.clone(),
        Some(p) if p.detached.is_empty() => {
            format!(
                "{}, programs attached on all {} endpoints",
                s.dataplane.mode, p.attached
            )
        }
        Some(p) => format!(
            "{}, programs DETACHED on {} of {} endpoints: {}",
            s.dataplane.mode,
            p.detached.len(),
            p.attached as usize + p.detached.len(),
            p.detached.join(", ")
        ),
    };
    let dataplane = match &s.dataplane.host_routing {
        Some(r) if !r.peer_pod_cidrs.is_empty() => format!(
            "{dataplane}; host routing to {} peer pod CIDRs: out {} direct, {} host stack; in {} direct, {} host stack",
            r.peer_pod_cidrs.len(),
            r.get("to_peer_redirected") + r.get("to_peer_neigh"),
            r.get("to_peer_fib_fallback") + r.get("to_peer_host_flow"),
            r.get("from_peer_redirected"),
            r.get("from_peer_host_flow"),
        ),
        _ => dataplane,
    };
    let queue = match &s.delete_queue {
        None => "unknown".to_owned(),
        Some(q) => format!("{} pending ({})", q.pending, q.dir),
    };
    let kubernetes = match &s.kubernetes {
        None => "off".to_owned(),
        Some(k) if k.pod_cidrs.is_empty() => format!("node {}, waiting for podCIDRs", k.node_name),
        Some(k) => {
            let cidrs: Vec<String> = k.pod_cidrs.iter().map(ToString::to_string).collect();
            format!("node {}, podCIDRs {}", k.node_name, cidrs.join(", "))
        }
    };
    let network = s.network.clone().unwrap_or_default();
    let mtu = network
        .mtu
        .map_or_else(|| "unknown".to_owned(), |m| m.to_string());
    let masquerade = match network.masquerade {
        None => "unknown".to_owned(),
        Some(m) if !m.enabled => "off".to_owned(),
        Some(m) => {
            let exempt: Vec<String> = m.exempt.iter().map(ToString::to_string).collect();
            format!("on, except to {}", exempt.join(", "))
        }
    };
    let mut rows = vec![
        ("Daemon", health),
        ("Version", s.version.clone()),
        ("Dataplane", dataplane),
        ("Endpoints", s.endpoints.to_string()),
        (
            "Allocations",
            format!(
                "{} ({} waiting for their endpoint)",
                s.allocations, s.leases
            ),
        ),
        ("Delete queue", queue),
        ("Kubernetes", kubernetes),
        ("MTU", mtu),
        ("Masquerade", masquerade),
    ];
    if let Some(peers) = &network.peers {
        let rejected: Vec<String> = peers
            .rejected
            .iter()
            .map(|r| format!("{} ({}: {})", r.node, r.reason, r.detail))
            .collect();
        let text = if rejected.is_empty() {
            "none rejected".to_owned()
        } else {
            format!("rejected {}", rejected.join("; "))
        };
        rows.push(("Peers", text));
    }
    if let Some(filter) = &network.vxlan_filter {
        rows.push((
            "VXLAN filter",
            format!(
                "{} packets ({} bytes) dropped from non-peers",
                filter.dropped_packets, filter.dropped_bytes
            ),
        ));
    }
    let mut out = fields(&rows);
    out.push_str("\nPools:\n");
    let rows = s.pools.iter().map(|p| {
        vec![
            p.name.clone(),
            p.cidr.to_string(),
            p.gateway.to_string(),
            p.used.to_string(),
            p.free.to_string(),
            p.capacity.to_string(),
        ]
    });
    out.push_str(&table(
        &["NAME", "CIDR", "GATEWAY", "USED", "FREE", "CAPACITY"],
        rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use sarena_core::api::{
        Health, IpamState, KubernetesStatus, MasqueradeStatus, MockDaemon, MtuSource, MtuStatus,
        NetworkStatus, PeersStatus, PoolState, ProgramsStatus, RejectedPeerStatus,
        VxlanFilterStatus,
    };

    use super::*;

    fn answering(ready: bool, message: &str) -> MockDaemon {
        let mut daemon = MockDaemon::new();
        let health = Health {
            ready,
            message: message.into(),
        };
        daemon
            .expect_health()
            .times(1)
            .returning(move || Ok(health.clone()));
        daemon
    }

    #[tokio::test]
    async fn health_fails_while_the_daemon_is_not_ready() {
        let err = health(
            &answering(false, "node n1 has no spec.podCIDRs yet"),
            OutputFormat::Table,
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "sarena-daemon is not ready: node n1 has no spec.podCIDRs yet"
        );
        let ok = health(&answering(true, "store open"), OutputFormat::Table).await;
        assert_eq!(ok.unwrap(), "ready (store open)\n");
        let ok = health(&answering(true, ""), OutputFormat::Json)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&ok).unwrap();
        assert_eq!(v["ready"], true);
    }

    #[test]
    fn shows_detached_programs_pools_and_kubernetes() {
        let ipam = IpamState {
            pools: vec![PoolState {
                name: "default".into(),
                cidr: "10.200.0.0/16".parse().unwrap(),
                gateway: "10.200.0.1".parse().unwrap(),
                namespaces: vec![],
                allocated: 3,
                capacity: 65533,
            }],
            allocations: vec![],
        };
        let health = Health {
            ready: true,
            message: "store open".into(),
        };
        let mut s = DaemonStatus::from_parts(health, "ebpf", &ipam, 3);
        s.dataplane.programs = Some(ProgramsStatus {
            attached: 2,
            detached: vec!["lxc1".into()],
        });
        s.kubernetes = Some(KubernetesStatus {
            node_name: "n1".into(),
            pod_cidrs: vec!["10.244.1.0/24".parse().unwrap()],
        });
        let text = render(&s);
        assert!(text.contains("Daemon:       ready (store open)"), "{text}");
        assert!(
            text.contains("programs DETACHED on 1 of 3 endpoints: lxc1"),
            "{text}"
        );
        assert!(
            text.contains("Kubernetes:   node n1, podCIDRs 10.244.1.0/24"),
            "{text}"
        );
        assert!(text.contains("Delete queue: unknown"), "{text}");
        assert!(text.contains("MTU:          unknown"), "{text}");
        s.network = Some(NetworkStatus {
            mtu: Some(MtuStatus {
                mtu: 8950,
                source: MtuSource::Uplink,
                base: 9000,
                uplink: Some("eth0".into()),
                overhead: 50,
            }),
            masquerade: Some(MasqueradeStatus {
                enabled: true,
                exempt: vec!["10.244.0.0/16".parse().unwrap()],
            }),
            peers: Some(PeersStatus {
                rejected: vec![RejectedPeerStatus {
                    node: "evil".into(),
                    reason: "own_address".into(),
                    detail: "InternalIP 172.30.0.11".into(),
                }],
                rejections: [("own_address".to_owned(), 1)].into(),
            }),
            vxlan_filter: Some(VxlanFilterStatus {
                dropped_packets: 3,
                dropped_bytes: 240,
            }),
        });
        let text = render(&s);
        assert!(
            text.contains("MTU:          8950 (uplink eth0 9000 - 50 encapsulation)"),
            "{text}"
        );
        assert!(
            text.contains("Masquerade:   on, except to 10.244.0.0/16"),
            "{text}"
        );
        assert!(
            text.contains("Peers:        rejected evil (own_address: InternalIP 172.30.0.11)"),
            "{text}"
        );
        assert!(
            text.contains("VXLAN filter: 3 packets (240 bytes) dropped from non-peers"),
            "{text}"
        );
        let pool = text.lines().find(|l| l.starts_with("default")).unwrap();
        let cols: Vec<&str> = pool.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "default",
                "10.200.0.0/16",
                "10.200.0.1",
                "3",
                "65530",
                "65533"
            ]
        );
    }
}
