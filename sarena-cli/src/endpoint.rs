//! `sarena endpoint list` and `sarena endpoint get`.

use sarena_core::api::{Attachment, EndpointStats, Labels, NodeApi};

use crate::table::{age, bytes, fields, short_id, table};
use crate::{CliError, OutputFormat, json};

/// Every endpoint with its traffic.
pub async fn list(
    daemon: &dyn NodeApi,
    output: OutputFormat,
    now: u64,
) -> Result<String, CliError> {
    let stats = daemon.endpoint_stats().await?;
    match output {
        OutputFormat::Json => json(&stats),
        OutputFormat::Table => Ok(render_list(&stats, now)),
    }
}

/// One endpoint with every counter.
pub async fn get(
    daemon: &dyn NodeApi,
    output: OutputFormat,
    container_id: &str,
    ifname: &str,
    now: u64,
) -> Result<String, CliError> {
    let owner = Attachment {
        container_id: container_id.to_owned(),
        ifname: ifname.to_owned(),
    };
    let Some(stats) = daemon.endpoint_stats_of(owner).await? else {
        return Err(CliError::NoEndpoint {
            container_id: container_id.to_owned(),
            ifname: ifname.to_owned(),
        });
    };
    match output {
        OutputFormat::Json => json(&stats),
        OutputFormat::Table => Ok(render_one(&stats, now)),
    }
}

/// `k=v,k2=v2` (as `kubectl get --show-labels`), `-` for none.
fn labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return "-".into();
    }
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

fn or_dash(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".into())
}

/// One line per endpoint; traffic as `from pod / to pod`, `-` without counters.
pub fn render_list(stats: &[EndpointStats], now: u64) -> String {
    let rows = stats.iter().map(|s| {
        let e = &s.endpoint.spec;
        let addresses: Vec<String> = e.addresses.iter().map(|a| a.addr().to_string()).collect();
        let (packets, traffic, drops) = match &s.counters {
            Some(c) => (
                format!("{}/{}", c.get("from_pod_packets"), c.get("to_pod_packets")),
                format!(
                    "{}/{}",
                    bytes(c.get("from_pod_bytes")),
                    bytes(c.get("to_pod_bytes"))
                ),
                c.total_drops().to_string(),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        vec![
            or_dash(&e.pod.namespace),
            or_dash(&e.pod.name),
            short_id(&e.owner.container_id),
            e.owner.ifname.clone(),
            addresses.join(","),
            e.host_ifname.clone(),
            age(now.saturating_sub(s.endpoint.created_at)),
            packets,
            traffic,
            drops,
        ]
    });
    table(
        &[
            "NAMESPACE",
            "POD",
            "CONTAINER",
            "IFNAME",
            "ADDRESSES",
            "HOST-IFNAME",
            "AGE",
            "PACKETS(OUT/IN)",
            "BYTES(OUT/IN)",
            "DROPS",
        ],
        rows,
    )
}

/// The endpoint's fields, then every counter, then drops by reason.
pub fn render_one(s: &EndpointStats, now: u64) -> String {
    let e = &s.endpoint.spec;
    let addresses: Vec<String> = e.addresses.iter().map(ToString::to_string).collect();
    let mut out = fields(&[
        ("Container", e.owner.container_id.clone()),
        ("Interface", e.owner.ifname.clone()),
        (
            "Pod",
            format!("{}/{}", or_dash(&e.pod.namespace), or_dash(&e.pod.name)),
        ),
        ("Addresses", addresses.join(", ")),
        (
            "Host interface",
            format!(
                "{} (ifindex {}, {})",
                e.host_ifname, e.host_ifindex, e.host_mac
            ),
        ),
        ("Pod MAC", e.pod_mac.to_string()),
        ("Netns", e.netns.clone()),
        ("Labels", labels(&e.identity.labels)),
        ("Namespace labels", labels(&e.identity.namespace_labels)),
        ("Age", age(now.saturating_sub(s.endpoint.created_at))),
    ]);
    match &s.counters {
        None => out
            .push_str("\nNo dataplane counters (dataplane mode without eBPF, or not attached).\n"),
        Some(c) => {
            out.push_str("\nCounters:\n");
            out.push_str(&table(
                &["COUNTER", "VALUE"],
                c.counters
                    .iter()
                    .map(|(k, v)| vec![k.clone(), v.to_string()]),
            ));
            out.push_str("\nDrops:\n");
            out.push_str(&table(
                &["REASON", "FRAMES"],
                c.drops.iter().map(|(k, v)| vec![k.clone(), v.to_string()]),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use sarena_core::api::{DataplaneCounters, Endpoint, EndpointSpec, PodRef};

    use super::*;

    fn stats(counters: Option<DataplaneCounters>) -> EndpointStats {
        EndpointStats {
            endpoint: Endpoint {
                spec: EndpointSpec {
                    owner: Attachment {
                        container_id: "0123456789abcdef".into(),
                        ifname: "eth0".into(),
                    },
                    pod: PodRef {
                        namespace: Some("default".into()),
                        name: Some("web-0".into()),
                        uid: None,
                    },
                    host_ifname: "lxc0123".into(),
                    host_ifindex: 17,
                    host_mac: "02:00:00:00:00:01".parse().unwrap(),
                    pod_mac: "02:00:00:00:00:02".parse().unwrap(),
                    addresses: vec!["10.200.0.2/16".parse().unwrap()],
                    netns: "/var/run/netns/x".into(),
                    bandwidth: None,
                    identity: Default::default(),
                },
                created_at: 100,
            },
            counters,
            bandwidth: None,
        }
    }

    #[test]
    fn list_shows_traffic_or_dashes() {
        let mut c = DataplaneCounters::default();
        c.counters.insert("from_pod_packets".into(), 3);
        c.counters.insert("to_pod_packets".into(), 4);
        c.counters.insert("from_pod_bytes".into(), 2048);
        c.drops.insert("malformed_arp".into(), 2);
        let text = render_list(&[stats(Some(c)), stats(None)], 292);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "default",
                "web-0",
                "0123456789ab",
                "eth0",
                "10.200.0.2",
                "lxc0123",
                "3m12s",
                "3/4",
                "2.0KiB/0B",
                "2"
            ]
        );
        assert_eq!(&rows[1][7..], ["-", "-", "-"]);
    }

    #[test]
    fn get_shows_every_counter_and_reason() {
        let mut c = DataplaneCounters::default();
        c.counters.insert("arp_replies".into(), 1);
        c.drops.insert("malformed_ipv4".into(), 0);
        let text = render_one(&stats(Some(c)), 100);
        assert!(
            text.lines().any(|l| l.starts_with("Host interface:")
                && l.ends_with(" lxc0123 (ifindex 17, 02:00:00:00:00:01)")),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().eq(["arp_replies", "1"])),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().eq(["malformed_ipv4", "0"])),
            "{text}"
        );
        assert!(render_one(&stats(None), 100).contains("No dataplane counters"));
    }

    #[test]
    fn get_shows_the_pods_labels_and_its_namespaces_or_a_dash() {
        let bare = render_one(&stats(None), 100);
        assert!(
            bare.lines()
                .any(|l| l.split_whitespace().eq(["Labels:", "-"])),
            "{bare}"
        );
        let mut s = stats(None);
        let identity = &mut s.endpoint.spec.identity;
        identity.labels.insert("app".into(), "web".into());
        identity.labels.insert("tier".into(), "front".into());
        identity.namespace_labels.insert("team".into(), "a".into());
        let text = render_one(&s, 100);
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().eq(["Labels:", "app=web,tier=front"])),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().eq(["Namespace", "labels:", "team=a"])),
            "{text}"
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""identity":{"labels":{"app":"web","tier":"front"},"namespace_labels":{"team":"a"}}"#), "{json}");
    }
}
