//! Veth removals the daemon owes: recorded in the same transaction that
//! deletes the endpoint (so before DEL is answered), settled once the link
//! is gone. A daemon killed in between finds them at its next start.

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::{RedbStore, StoreError, redb_err, remove_owners_in};
use crate::api::Attachment;

/// Host ifindex → host ifname.
pub(super) const VETH_REMOVALS: TableDefinition<u32, &str> = TableDefinition::new("veth_removals");

/// A veth pair whose removal is owed: its host end, by index and name (a
/// link is removed only if both still match).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OwedRemoval {
    /// The host end's name.
    pub host_ifname: String,
    /// The host end's ifindex.
    pub host_ifindex: u32,
}

impl RedbStore {
    /// [`RedbStore::remove_owners`], and the removal of `owed` recorded, in
    /// one durable transaction.
    pub fn remove_owners_owing(
        &self,
        owners: &[Attachment],
        owed: &[OwedRemoval],
    ) -> Result<(), StoreError> {
        self.write("remove owing veth removal", |txn| {
            remove_owners_in(txn, owners)?;
            let mut removals = txn
                .open_table(VETH_REMOVALS)
                .map_err(redb_err("open table"))?;
            for removal in owed {
                removals
                    .insert(removal.host_ifindex, removal.host_ifname.as_str())
                    .map_err(redb_err("write"))?;
            }
            Ok(())
        })
    }

    /// Every removal still owed, by ifindex.
    pub fn owed_removals(&self) -> Result<Vec<OwedRemoval>, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(redb_err("read"))?;
            let table = txn
                .open_table(VETH_REMOVALS)
                .map_err(redb_err("open table"))?;
            let mut owed = Vec::new();
            for row in table.iter().map_err(redb_err("read"))? {
                let (index, name) = row.map_err(redb_err("read"))?;
                owed.push(OwedRemoval {
                    host_ifname: name.value().to_owned(),
                    host_ifindex: index.value(),
                });
            }
            Ok(owed)
        })
    }

    /// Forgets the removals in `done` (their links are gone), in one
    /// transaction. A record whose ifindex now names another link is kept.
    pub fn settle_removals(&self, done: &[OwedRemoval]) -> Result<(), StoreError> {
        if done.is_empty() {
            return Ok(());
        }
        self.write("settle veth removals", |txn| {
            let mut removals = txn
                .open_table(VETH_REMOVALS)
                .map_err(redb_err("open table"))?;
            for removal in done {
                let same = removals
                    .get(removal.host_ifindex)
                    .map_err(redb_err("read"))?
                    .is_some_and(|name| name.value() == removal.host_ifname);
                if same {
                    removals
                        .remove(removal.host_ifindex)
                        .map_err(redb_err("write"))?;
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owed(name: &str, index: u32) -> OwedRemoval {
        OwedRemoval {
            host_ifname: name.into(),
            host_ifindex: index,
        }
    }

    #[test]
    fn owed_removals_survive_a_reopen_until_settled() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(dir.path()).unwrap();
        assert!(store.owed_removals().unwrap().is_empty());
        store
            .remove_owners_owing(&[], &[owed("lxca", 7), owed("lxcb", 9)])
            .unwrap();
        drop(store);
        let store = RedbStore::open(dir.path()).unwrap();
        assert_eq!(
            store.owed_removals().unwrap(),
            vec![owed("lxca", 7), owed("lxcb", 9)]
        );
        // Settling a record by the wrong name keeps it.
        store
            .settle_removals(&[owed("lxca", 7), owed("lxcz", 9)])
            .unwrap();
        assert_eq!(store.owed_removals().unwrap(), vec![owed("lxcb", 9)]);
    }
}
