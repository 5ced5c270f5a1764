//! Reading the endpoints of a state directory without opening it for
//! writing: for the uninstall, which must find the host veths of endpoints
//! a release without link marks created, and must not write (nor create)
//! the database it is about to delete.

use std::path::Path;

use redb::{
    Database, DatabaseError, ReadOnlyDatabase, ReadableDatabase, ReadableTable, TableError,
};

use super::{ENDPOINTS, STATE_FILE, StoreError, redb_err};
use crate::api::Endpoint;

/// The endpoints recorded in `state_dir/state.redb`; `Ok(None)` when there
/// is no such file. Fails while another process (a live daemon) has the
/// database open.
///
/// A database its daemon did not close (killed, out of memory, the power
/// lost) needs a repair, which a read-only open refuses: it is then opened
/// for writing, which repairs it. The caller holds the state dir's lock
/// (no daemon can have it open) and is about to delete it.
pub fn read_endpoints(state_dir: &Path) -> Result<Option<Vec<Endpoint>>, StoreError> {
    let path = state_dir.join(STATE_FILE);
    if !path.exists() {
        return Ok(None);
    }
    match ReadOnlyDatabase::open(&path) {
        Ok(db) => endpoints_of(&db).map(Some),
        Err(DatabaseError::RepairAborted) => {
            let db = Database::open(&path).map_err(redb_err("open to repair"))?;
            endpoints_of(&db).map(Some)
        }
        Err(e) => Err(redb_err("open read-only")(e)),
    }
}

/// Every endpoint of `db`'s endpoints table (none when it has none).
fn endpoints_of(db: &impl ReadableDatabase) -> Result<Vec<Endpoint>, StoreError> {
    let txn = db.begin_read().map_err(redb_err("read"))?;
    let table = match txn.open_table(ENDPOINTS) {
        Ok(table) => table,
        Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
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
    Ok(endpoints)
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

    #[test]
    fn a_database_left_open_by_a_killed_daemon_is_repaired_and_read() {
        let live = tempfile::tempdir().unwrap();
        let copy = tempfile::tempdir().unwrap();
        let store = RedbStore::open(live.path()).unwrap();
        // The file as a killed daemon leaves it: still marked open.
        std::fs::copy(live.path().join(STATE_FILE), copy.path().join(STATE_FILE)).unwrap();
        drop(store);
        assert!(
            matches!(
                ReadOnlyDatabase::open(copy.path().join(STATE_FILE)),
                Err(DatabaseError::RepairAborted)
            ),
            "the copy does not need a repair: the test proves nothing"
        );
        assert_eq!(read_endpoints(copy.path()).unwrap(), Some(Vec::new()));
    }
}
