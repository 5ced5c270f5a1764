//! Durable state: [`RedbStore`] keeps allocations, address ownership and endpoints in one
//! crash-safe redb database (`state.redb` under the state directory).
//!
//! Every mutation is one write transaction committed with
//! [`redb::Durability::Immediate`] (fsynced) before the call returns, so whatever a
//! caller acknowledged survives a SIGKILL or power loss, and a transaction cut short
//! leaves nothing behind. Nothing depends on a clean shutdown. The one exception
//! is explicit: inside [`RedbStore::deferring`] a thread's transactions commit
//! without the fsync, and [`RedbStore::flush`] makes them all durable with one
//! (group commit: the registry runs concurrent mutations that way and answers
//! none of them before the flush).
//!
//! Tables:
//! - `allocations`: owner `(container_id, ifname)` → [`AllocationEntry`] (JSON);
//! - `addresses`: address (canonical text) → owner: one row per address, so an
//!   address can never be recorded for two owners;
//! - `endpoints`: owner → [`Endpoint`] (JSON);
//! - `veth_removals`: host ifindex → host ifname: veth pairs whose removal the
//!   daemon owes (see [`OwedRemoval`]);
//! - `meta`: schema version.
//!
//! A failure of the file (a full disk) does not wedge the store: the database
//! is closed and reopened, and [`RedbStore::write_failure`] says why writes
//! fail until one succeeds again (see `handle.rs`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use handle::Guarded;
use serde::{Deserialize, Serialize};

use crate::api::{AllocatedAddress, Attachment, Endpoint, PodRef};

mod handle;
mod identity;
mod read_only;
mod removals;

pub use handle::CommitCounts;
pub use read_only::read_endpoints;
pub use removals::OwedRemoval;

const ALLOCATIONS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("allocations");
const ADDRESSES: TableDefinition<&str, (&str, &str)> = TableDefinition::new("addresses");
const ENDPOINTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("endpoints");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// The database file name under the state directory.
pub const STATE_FILE: &str = "state.redb";
/// The daemon's lock file under the state directory (`sarena-daemon`'s
/// `locks`).
pub const LOCK_FILE: &str = "daemon.lock";
/// The TCP listener's token file under the state directory, by default.
pub const API_TOKEN_FILE: &str = "api-token";
/// The plugin's deletion queue under the state directory, by default.
pub const DELETE_QUEUE_DIR: &str = "delete-queue";
/// The schema version this code writes.
pub const SCHEMA_VERSION: u64 = 1;

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory could not be created.
    #[error("cannot create state directory {path}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// redb failed.
    #[error("state store {op} failed")]
    Redb {
        /// What was being done (`open`, `commit`, ...).
        op: &'static str,
        /// Cause.
        #[source]
        source: redb::Error,
    },
    /// A stored record could not be decoded.
    #[error("corrupt record in table {table} for key {key}")]
    Decode {
        /// Table.
        table: &'static str,
        /// Key.
        key: String,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// A record could not be encoded.
    #[error("cannot encode {what}")]
    Encode {
        /// What.
        what: &'static str,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The store already records the address for another owner; nothing was written.
    #[error("address {address} is already recorded for {owner:?}")]
    AddressTaken {
        /// Address.
        address: IpAddr,
        /// Its recorded owner.
        owner: Attachment,
    },
    /// The database was written by an incompatible version.
    #[error("state store schema version {found} is not supported (expected {expected})")]
    Schema {
        /// Version found.
        found: u64,
        /// Version supported.
        expected: u64,
    },
}

fn redb_err<E: Into<redb::Error>>(op: &'static str) -> impl FnOnce(E) -> StoreError {
    move |e| StoreError::Redb {
        op,
        source: e.into(),
    }
}

/// One allocation as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationEntry {
    /// Owner.
    pub owner: Attachment,
    /// The pod it was allocated for.
    #[serde(default)]
    pub pod: PodRef,
    /// Pool name.
    pub pool: String,
    /// One address per family.
    pub addresses: Vec<AllocatedAddress>,
    /// Unix time of allocation.
    pub allocated_at: u64,
    /// Set while no endpoint holds the allocation.
    #[serde(default)]
    pub lease_expires_at: Option<u64>,
}

/// Everything in the store, as loaded at start-up.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Allocations.
    pub allocations: Vec<AllocationEntry>,
    /// Address ownership rows.
    pub addresses: Vec<(IpAddr, Attachment)>,
    /// Endpoints.
    pub endpoints: Vec<Endpoint>,
}

/// The redb-backed store. See the [module docs](self).
#[derive(Debug)]
pub struct RedbStore {
    guarded: Guarded,
    path: PathBuf,
}

fn key(owner: &Attachment) -> (&str, &str) {
    (owner.container_id.as_str(), owner.ifname.as_str())
}

fn owner_of((c, i): (&str, &str)) -> Attachment {
    Attachment {
        container_id: c.to_owned(),
        ifname: i.to_owned(),
    }
}

fn encode<T: Serialize>(what: &'static str, v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(|source| StoreError::Encode { what, source })
}

impl RedbStore {
    /// Opens (creating if needed) `state_dir/state.redb`. After a crash redb repairs
    /// the file on open; committed transactions are all there.
    pub fn open(state_dir: &Path) -> Result<RedbStore, StoreError> {
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::StateDir {
            path: state_dir.to_owned(),
            source,
        })?;
        let path = state_dir.join(STATE_FILE);
        let db = Database::create(&path).map_err(redb_err("open"))?;
        let store = RedbStore {
            guarded: Guarded::new(db),
            path,
        };
        store.write("init", |txn| {
            txn.open_table(ALLOCATIONS)
                .map_err(redb_err("open table"))?;
            txn.open_table(ADDRESSES).map_err(redb_err("open table"))?;
            txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
            txn.open_table(removals::VETH_REMOVALS)
                .map_err(redb_err("open table"))?;
            let mut meta = txn.open_table(META).map_err(redb_err("open table"))?;
            let found = meta
                .get("schema")
                .map_err(redb_err("read"))?
                .map(|v| v.value());
            match found {
                None => {
                    meta.insert("schema", SCHEMA_VERSION)
                        .map_err(redb_err("write"))?;
                }
                Some(SCHEMA_VERSION) => {}
                Some(found) => {
                    return Err(StoreError::Schema {
                        found,
                        expected: SCHEMA_VERSION,
                    });
                }
            }
            Ok(())
        })?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads every table.
    pub fn load(&self) -> Result<Snapshot, StoreError> {
        self.with_db(load_from)
    }

    /// Records (or rewrites) an allocation and claims its addresses, in one durable
    /// transaction. Fails with [`StoreError::AddressTaken`], writing nothing, when an
    /// address is recorded for another owner.
    pub fn put_allocation(&self, entry: &AllocationEntry) -> Result<(), StoreError> {
        self.put_allocations(std::slice::from_ref(entry))
    }

    /// [`RedbStore::put_allocation`] for many entries in one transaction (imports,
    /// benchmarks): all are written or none.
    pub fn put_allocations(&self, entries: &[AllocationEntry]) -> Result<(), StoreError> {
        self.write("put allocation", |txn| {
            let mut addresses = txn.open_table(ADDRESSES).map_err(redb_err("open table"))?;
            let mut allocations = txn
                .open_table(ALLOCATIONS)
                .map_err(redb_err("open table"))?;
            for entry in entries {
                let bytes = encode("allocation", entry)?;
                for a in &entry.addresses {
                    let address = a.address.addr();
                    let text = address.to_string();
                    let prev = addresses
                        .insert(text.as_str(), key(&entry.owner))
                        .map_err(redb_err("write"))?;
                    if let Some(prev) = prev {
                        let owner = owner_of(prev.value());
                        if owner != entry.owner {
                            return Err(StoreError::AddressTaken { address, owner });
                        }
                    }
                }
                allocations
                    .insert(key(&entry.owner), bytes.as_slice())
                    .map_err(redb_err("write"))?;
            }
            Ok(())
        })
    }

    /// Records an endpoint and rewrites its allocation (lease cleared) atomically.
    pub fn put_endpoint(
        &self,
        endpoint: &Endpoint,
        entry: &AllocationEntry,
    ) -> Result<(), StoreError> {
        let ep_bytes = encode("endpoint", endpoint)?;
        let alloc_bytes = encode("allocation", entry)?;
        self.write("put endpoint", |txn| {
            let mut endpoints = txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
            endpoints
                .insert(key(&endpoint.spec.owner), ep_bytes.as_slice())
                .map_err(redb_err("write"))?;
            let mut allocations = txn
                .open_table(ALLOCATIONS)
                .map_err(redb_err("open table"))?;
            allocations
                .insert(key(&entry.owner), alloc_bytes.as_slice())
                .map_err(redb_err("write"))?;
            Ok(())
        })
    }

    /// Removes the endpoint of `entry`'s owner and rewrites its allocation
    /// (under a lease again) atomically: the endpoint goes, the address stays.
    pub fn unregister_endpoint(&self, entry: &AllocationEntry) -> Result<(), StoreError> {
        let alloc_bytes = encode("allocation", entry)?;
        self.write("unregister endpoint", |txn| {
            let mut endpoints = txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
            endpoints
                .remove(key(&entry.owner))
                .map_err(redb_err("write"))?;
            let mut allocations = txn
                .open_table(ALLOCATIONS)
                .map_err(redb_err("open table"))?;
            allocations
                .insert(key(&entry.owner), alloc_bytes.as_slice())
                .map_err(redb_err("write"))?;
            Ok(())
        })
    }

    /// Removes, for each owner, its endpoint, its allocation and the address rows it
    /// holds, all in one durable transaction.
    pub fn remove_owners(&self, owners: &[Attachment]) -> Result<(), StoreError> {
        if owners.is_empty() {
            return Ok(());
        }
        self.write("remove", |txn| remove_owners_in(txn, owners))
    }

    /// Removes address rows (repair of rows no allocation holds), in one transaction.
    pub fn remove_addresses(&self, addrs: &[IpAddr]) -> Result<(), StoreError> {
        if addrs.is_empty() {
            return Ok(());
        }
        self.write("remove addresses", |txn| {
            let mut addresses = txn.open_table(ADDRESSES).map_err(redb_err("open table"))?;
            for a in addrs {
                addresses
                    .remove(a.to_string().as_str())
                    .map_err(redb_err("write"))?;
            }
            Ok(())
        })
    }
}

/// [`RedbStore::load`] from `db`.
fn load_from(db: &Database) -> Result<Snapshot, StoreError> {
    let txn = db.begin_read().map_err(redb_err("read"))?;
    let mut snap = Snapshot::default();
    let allocations = txn
        .open_table(ALLOCATIONS)
        .map_err(redb_err("open table"))?;
    for row in allocations.iter().map_err(redb_err("read"))? {
        let (k, v) = row.map_err(redb_err("read"))?;
        let entry = serde_json::from_slice(v.value()).map_err(|source| StoreError::Decode {
            table: "allocations",
            key: format!("{:?}", k.value()),
            source,
        })?;
        snap.allocations.push(entry);
    }
    let addresses = txn.open_table(ADDRESSES).map_err(redb_err("open table"))?;
    for row in addresses.iter().map_err(redb_err("read"))? {
        let (k, v) = row.map_err(redb_err("read"))?;
        let text = k.value();
        let addr = text.parse::<IpAddr>().map_err(|e| StoreError::Decode {
            table: "addresses",
            key: text.to_owned(),
            source: serde::de::Error::custom(e),
        })?;
        snap.addresses.push((addr, owner_of(v.value())));
    }
    let endpoints = txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
    for row in endpoints.iter().map_err(redb_err("read"))? {
        let (k, v) = row.map_err(redb_err("read"))?;
        let ep = serde_json::from_slice(v.value()).map_err(|source| StoreError::Decode {
            table: "endpoints",
            key: format!("{:?}", k.value()),
            source,
        })?;
        snap.endpoints.push(ep);
    }
    Ok(snap)
}

/// [`RedbStore::remove_owners`] inside `txn`.
fn remove_owners_in(txn: &WriteTransaction, owners: &[Attachment]) -> Result<(), StoreError> {
    let mut endpoints = txn.open_table(ENDPOINTS).map_err(redb_err("open table"))?;
    let mut allocations = txn
        .open_table(ALLOCATIONS)
        .map_err(redb_err("open table"))?;
    let mut addresses = txn.open_table(ADDRESSES).map_err(redb_err("open table"))?;
    for owner in owners {
        endpoints.remove(key(owner)).map_err(redb_err("write"))?;
        let removed = allocations.remove(key(owner)).map_err(redb_err("write"))?;
        let Some(bytes) = removed else { continue };
        let entry: AllocationEntry =
            serde_json::from_slice(bytes.value()).map_err(|source| StoreError::Decode {
                table: "allocations",
                key: format!("{owner:?}"),
                source,
            })?;
        drop(bytes);
        for a in &entry.addresses {
            let text = a.address.addr().to_string();
            let mine = addresses
                .get(text.as_str())
                .map_err(redb_err("read"))?
                .is_some_and(|v| owner_of(v.value()) == *owner);
            if mine {
                addresses.remove(text.as_str()).map_err(redb_err("write"))?;
            }
        }
    }
    Ok(())
}
