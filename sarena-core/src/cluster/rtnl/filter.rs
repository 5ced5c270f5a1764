//! The VXLAN filter's table in the kernel, through `nft` (see
//! [`crate::cluster::VxlanFilter`]).

use crate::cluster::error::ClusterError;
use crate::cluster::vxlan_filter::{
    FilterDrops, VXLAN_FILTER_COUNTER, VXLAN_FILTER_TABLE, VxlanFilter, drops_from_json,
    remove_script,
};
use crate::dataplane::kernel::nft;

fn filter_error(
    call: &'static str,
) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> ClusterError {
    move |source| ClusterError::Filter { call, source }
}

/// Creates or rewrites the table for `filter` (one transaction).
pub(super) async fn ensure(filter: &VxlanFilter) -> Result<(), ClusterError> {
    let script = filter
        .script()
        .map_err(|e| filter_error("write the rules")(Box::new(e)))?;
    nft::run_off_worker(script)
        .await
        .map_err(|e| filter_error("apply the rules")(Box::new(e)))
}

/// Deletes the table if it exists.
pub(super) async fn remove() -> Result<(), ClusterError> {
    nft::run_off_worker(remove_script())
        .await
        .map_err(|e| filter_error("delete the table")(Box::new(e)))
}

/// The drop counter.
pub(super) async fn drops() -> Result<FilterDrops, ClusterError> {
    let args = ["counter", "inet", VXLAN_FILTER_TABLE, VXLAN_FILTER_COUNTER];
    let listing = nft::list_json_off_worker(args.iter().map(|a| (*a).to_owned()).collect())
        .await
        .map_err(|e| filter_error("read the drop counter")(Box::new(e)))?;
    drops_from_json(&listing).ok_or_else(|| {
        filter_error("read the drop counter")("nft listed no counter with packets and bytes".into())
    })
}
