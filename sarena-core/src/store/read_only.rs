//! Reading the endpoints of a state directory without opening it for
//! writing: for the uninstall, which must find the host veths of endpoints
//! a release without link marks created, and must not write (nor create)
//! the database it is about to delete.

use std::path::Path;

use redb::{ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableError};

use super::{ENDPOINTS, STATE_FILE, StoreError, redb_err};
use crate::api::Endpoint;

/// The endpoints recorded in `state_dir/state.redb`; `Ok(None)` when there
/// is no such file. Fails while another process (a live daemon) has the
/// database open.
pub fn read_endpoints(state_dir: &Path) -> Result<Option<Vec<Endpoint>>, StoreError> {
    let path = state_dir.join(STATE_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let db = ReadOnlyDatabase::open(&path).map_err(redb_err("open read-only"))?;
    let txn = db.begin_read().map_err(redb_err("read"))?;
    let table = match txn.open_table(ENDPOINTS) {
        Ok(table) => table,
        Err(TableError::TableDoesNotExist(_)) => return Ok(Some(Vec::new())),
        Err(e) => return Err(redb_err("open table")(e)),
    };
    let mut endpoints = Vec::new();
    for row in table.iter().map_err(redb_err("read"))? {
        let (k, v) = row.map_err(redb_err("read"))?;
        let endpoint = serde_json::from_slice(v.value()).map_err(|source| StoreError::Decode {
            table: "endpoints",
            key: format!("{:?}", k.value()),
            source,
        })?;
        endpoints.push(endpoint);
    }
    Ok(Some(endpoints))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RedbStore;

    #[test]
    fn a_missing_database_is_none_and_an_empty_one_has_no_endpoints() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_endpoints(dir.path()).unwrap().is_none());
        drop(RedbStore::open(dir.path()).unwrap());
        assert_eq!(read_endpoints(dir.path()).unwrap(), Some(Vec::new()));
    }
}
