//! `sarena ipam list`.

use sarena_core::api::{IpamState, NodeApi};

use crate::table::{age, short_id, table};
use crate::{CliError, OutputFormat, json};

/// Pools, allocations and leases.
pub async fn list(
    daemon: &dyn NodeApi,
    output: OutputFormat,
    now: u64,
) -> Result<String, CliError> {
    let state = daemon.ipam_state().await?;
    match output {
        OutputFormat::Json => json(&state),
        OutputFormat::Table => Ok(render(&state, now)),
    }
}

/// A pool table and an allocation table; a lease shows when it expires.
pub fn render(state: &IpamState, now: u64) -> String {
    let pools = state.pools.iter().map(|p| {
        let namespaces = if p.namespaces.is_empty() {
            "(default)".to_owned()
        } else {
            p.namespaces.join(",")
        };
        vec![
            p.name.clone(),
            p.cidr.to_string(),
            p.gateway.to_string(),
            namespaces,
            p.allocated.to_string(),
            p.capacity.saturating_sub(p.allocated).to_string(),
            p.capacity.to_string(),
        ]
    });
    let mut out = table(
        &[
            "POOL",
            "CIDR",
            "GATEWAY",
            "NAMESPACES",
            "USED",
            "FREE",
            "CAPACITY",
        ],
        pools,
    );
    out.push('\n');
    let allocations = state.allocations.iter().map(|a| {
        let lease = match a.lease_expires_at {
            None => "endpoint".to_owned(),
            Some(t) if t > now => format!("expires in {}", age(t - now)),
            Some(_) => "expired".to_owned(),
        };
        vec![
            a.address.to_string(),
            a.pool.clone(),
            short_id(&a.owner.container_id),
            a.owner.ifname.clone(),
            age(now.saturating_sub(a.allocated_at)),
            lease,
        ]
    });
    out.push_str(&table(
        &["ADDRESS", "POOL", "CONTAINER", "IFNAME", "AGE", "HELD BY"],
        allocations,
    ));
    out
}

#[cfg(test)]
mod tests {
    use sarena_core::api::{AllocationRecord, Attachment, PoolState};

    use super::*;

    #[test]
    fn leases_show_their_expiry() {
        let owner = |c: &str| Attachment {
            container_id: c.into(),
            ifname: "eth0".into(),
        };
        let state = IpamState {
            pools: vec![PoolState {
                name: "tiny".into(),
                cidr: "10.77.0.0/29".parse().unwrap(),
                gateway: "10.77.0.1".parse().unwrap(),
                namespaces: vec!["team-a".into()],
                allocated: 2,
                capacity: 5,
            }],
            allocations: vec![
                AllocationRecord {
                    owner: owner("a"),
                    address: "10.77.0.2".parse().unwrap(),
                    pool: "tiny".into(),
                    allocated_at: 10,
                    lease_expires_at: None,
                },
                AllocationRecord {
                    owner: owner("b"),
                    address: "10.77.0.3".parse().unwrap(),
                    pool: "tiny".into(),
                    allocated_at: 90,
                    lease_expires_at: Some(190),
                },
            ],
        };
        let text = render(&state, 100);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[1],
            ["tiny", "10.77.0.0/29", "10.77.0.1", "team-a", "2", "3", "5"]
        );
        assert_eq!(
            rows[4],
            ["10.77.0.2", "tiny", "a", "eth0", "1m30s", "endpoint"]
        );
        assert_eq!(
            rows[5],
            [
                "10.77.0.3",
                "tiny",
                "b",
                "eth0",
                "10s",
                "expires",
                "in",
                "1m30s"
            ]
        );
    }
}
