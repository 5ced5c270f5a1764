//! Removing the kernel dataplane's node-wide objects without a running
//! dataplane (the uninstall) and at [`super::KernelDataplane::teardown`]:
//! one definition of what is Sarena's.
//!
//! - the gateway pair (`sarena_host` ↔ `sarena_net`), by name *and*
//!   Sarena's link group ([`crate::links::LINK_GROUP`]); a link of that
//!   name in another group is someone else's and is left;
//! - the nftables tables `ip sarena`, `ip6 sarena` (masquerading),
//!   `inet sarena`, `arp sarena` (anti-spoofing) and `inet sarena_policy`
//!   (NetworkPolicy), by exact family and name, deleted in one transaction.
//!   `inet sarena_vxlan` is the VXLAN routing's, not the host stack's.
//!
//! Per-pod routes and sysctls go with the pods' veths.

use super::KernelNames;
use super::nft;
use crate::dataplane::DataplaneError;
use crate::netlink::{self, MarkedDeletion};

/// Removes the host stack's objects under the default names
/// ([`KernelNames::default`]) from the current network namespace, or only
/// lists them when `dry_run`. One line per object: `removed link …`,
/// `would remove nft table inet sarena`, `left link …: why`.
pub async fn remove_host_stack(dry_run: bool) -> Result<Vec<String>, DataplaneError> {
    remove_host_stack_named(&KernelNames::default(), dry_run).await
}

/// [`remove_host_stack`] for the objects called `names`.
pub async fn remove_host_stack_named(
    names: &KernelNames,
    dry_run: bool,
) -> Result<Vec<String>, DataplaneError> {
    let mut lines = remove_gateway_pair(names, dry_run).await?;
    lines.extend(remove_tables(names, dry_run).await?);
    Ok(lines)
}

/// The gateway pair, when it carries Sarena's mark.
async fn remove_gateway_pair(
    names: &KernelNames,
    dry_run: bool,
) -> Result<Vec<String>, DataplaneError> {
    let handle = netlink::host_handle().map_err(|source| DataplaneError::Socket { source })?;
    let (device, peer) = (&names.gateway_device, &names.gateway_peer);
    let Some(link) = netlink::link_by_name(&handle, device).await? else {
        return Ok(Vec::new());
    };
    let group = netlink::link_group(&link);
    let ours = crate::links::LINK_GROUP;
    let foreign = |group: u32| format!("left link {device}: not Sarena's (group {group:#x})");
    if group != ours {
        return Ok(vec![foreign(group)]);
    }
    if dry_run {
        return Ok(vec![format!(
            "would remove link {device} (and its peer {peer})"
        )]);
    }
    Ok(
        match netlink::delete_marked_link(&handle, device, Some(link.header.index), ours).await? {
            MarkedDeletion::Removed => vec![format!("removed link {device} (and its peer {peer})")],
            MarkedDeletion::Absent => Vec::new(),
            MarkedDeletion::Foreign { group } => vec![foreign(group)],
        },
    )
}

/// The host stack's nftables tables that exist, deleted in one transaction.
async fn remove_tables(names: &KernelNames, dry_run: bool) -> Result<Vec<String>, DataplaneError> {
    let listed = nft::list_json_off_worker(vec!["tables".into()]).await?;
    let present = our_tables(&listed, names);
    if present.is_empty() {
        return Ok(Vec::new());
    }
    if !dry_run {
        let script: String = present
            .iter()
            .map(|(family, name)| format!("delete table {family} {name}\n"))
            .collect();
        nft::run_off_worker(script).await?;
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    Ok(present
        .iter()
        .map(|(family, name)| format!("{verb} nft table {family} {name}"))
        .collect())
}

/// The host stack's tables (family, name) under `names`, in a fixed order.
fn wanted_tables(names: &KernelNames) -> [(&'static str, String); 5] {
    let table = &names.nft_table;
    [
        ("ip", table.clone()),
        ("ip6", table.clone()),
        ("inet", table.clone()),
        ("arp", table.clone()),
        ("inet", super::policy::table_name(table)),
    ]
}

/// The host stack's tables among those `nft -j list tables` printed
/// (`listed`), as (family, name), exact matches only.
pub(crate) fn our_tables(
    listed: &serde_json::Value,
    names: &KernelNames,
) -> Vec<(&'static str, String)> {
    let tables: Vec<(&str, &str)> = listed
        .get("nftables")
        .and_then(serde_json::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| {
                    let table = item.get("table")?;
                    Some((table.get("family")?.as_str()?, table.get("name")?.as_str()?))
                })
                .collect()
        })
        .unwrap_or_default();
    wanted_tables(names)
        .into_iter()
        .filter(|(family, name)| tables.contains(&(*family, name.as_str())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_tables_are_ours() {
        let listed = serde_json::json!({"nftables": [
            {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
            {"table": {"family": "ip", "name": "sarena", "handle": 1}},
            {"table": {"family": "inet", "name": "sarenax", "handle": 2}},
            {"table": {"family": "inet", "name": "sarena_vxlan", "handle": 3}},
            {"table": {"family": "inet", "name": "sarena_policy", "handle": 4}},
            {"table": {"family": "ip", "name": "filter", "handle": 5}},
            {"table": {"family": "arp", "name": "sarena", "handle": 6}},
            {"table": {"family": "bridge", "name": "sarena", "handle": 7}},
        ]});
        assert_eq!(
            our_tables(&listed, &KernelNames::default()),
            vec![
                ("ip", "sarena".to_string()),
                ("arp", "sarena".to_string()),
                ("inet", "sarena_policy".to_string()),
            ]
        );
    }

    #[test]
    fn nothing_listed_is_nothing_ours() {
        let names = KernelNames::default();
        assert!(our_tables(&serde_json::json!({"nftables": []}), &names).is_empty());
        assert!(our_tables(&serde_json::json!({}), &names).is_empty());
    }

    #[test]
    fn other_names_follow_the_table_name() {
        let names = KernelNames {
            nft_table: "srt1".into(),
            ..KernelNames::default()
        };
        let listed = serde_json::json!({"nftables": [
            {"table": {"family": "inet", "name": "srt1_policy"}},
            {"table": {"family": "ip6", "name": "srt1"}},
            {"table": {"family": "ip6", "name": "sarena"}},
        ]});
        assert_eq!(
            our_tables(&listed, &names),
            vec![
                ("ip6", "srt1".to_string()),
                ("inet", "srt1_policy".to_string())
            ]
        );
    }
}
