//! The open database, and what happens when its file fails: after one I/O
//! error (a full disk, most often) redb refuses every later operation with
//! `PreviousIo` until the database is closed and opened again. So a failed
//! operation closes the database and reopens it (redb repairs the file on
//! open); when the reopen itself fails (the disk still full), the next
//! operation tries again first. Until a write succeeds again the store
//! reports the failure ([`RedbStore::write_failure`]), which the registry
//! serves as "not ready".

use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use redb::{Database, WriteTransaction};

use super::{META, RedbStore, SCHEMA_VERSION, StoreError, redb_err};

/// The database, `None` while closed after a failure.
#[derive(Debug, Default)]
pub(super) struct Handle {
    db: Option<Database>,
    /// Bumped at each (re)open: a failure closes only the database it saw fail.
    generation: u64,
}

/// The database and the last failure, shared by the store's operations.
#[derive(Debug, Default)]
pub(super) struct Guarded {
    handle: RwLock<Handle>,
    /// Why the last operation failed, until a write succeeds.
    failure: Mutex<Option<String>>,
}

impl Guarded {
    /// A store over `db`, just opened.
    pub(super) fn new(db: Database) -> Guarded {
        Guarded {
            handle: RwLock::new(Handle {
                db: Some(db),
                generation: 0,
            }),
            failure: Mutex::new(None),
        }
    }
}

impl StoreError {
    /// True when the error comes from the file (I/O, or redb refusing after
    /// an earlier I/O error): the database is reopened, and the operation may
    /// succeed later (once space is back). Served as "unavailable".
    pub fn is_io(&self) -> bool {
        matches!(
            self,
            StoreError::Redb {
                source: redb::Error::Io(_)
                    | redb::Error::PreviousIo
                    | redb::Error::DatabaseClosed
                    | redb::Error::DatabaseAlreadyOpen,
                ..
            }
        )
    }
}

impl RedbStore {
    /// Runs `f` in one write transaction and commits it durably; on error
    /// nothing is written. A success clears [`RedbStore::write_failure`].
    pub(super) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let out = self.with_db(|db| {
            let txn = db.begin_write().map_err(redb_err(op))?;
            let out = f(&txn)?;
            txn.commit().map_err(redb_err("commit"))?;
            Ok(out)
        })?;
        let mut failure = self.failure_slot();
        if let Some(reason) = failure.take() {
            tracing::info!(path = %self.path.display(), was = %reason, "state store writes again");
        }
        Ok(out)
    }

    /// Runs `f` on the open database, reopening it first if a failure closed
    /// it; an I/O failure of `f` closes it (and tries to reopen it at once).
    pub(super) fn with_db<T>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let (generation, out) = {
            let handle = self.open_handle()?;
            let Some(db) = handle.db.as_ref() else {
                // Closed again by a concurrent failure since it was reopened.
                return Err(StoreError::Redb {
                    op: "reopen",
                    source: redb::Error::DatabaseClosed,
                });
            };
            (handle.generation, f(db))
        };
        if let Err(e) = &out
            && e.is_io()
        {
            self.failed(generation, e);
        }
        out
    }

    /// Why the store's last operation failed, while no write has succeeded
    /// since; `None` when writes work.
    pub fn write_failure(&self) -> Option<String> {
        self.failure_slot().clone()
    }

    /// Tries one small write (rewrites the schema version): clears
    /// [`RedbStore::write_failure`] if writes work again, else returns why not.
    pub fn probe_write(&self) -> Result<(), StoreError> {
        self.write("probe", |txn| {
            let mut meta = txn.open_table(META).map_err(redb_err("open table"))?;
            meta.insert("schema", SCHEMA_VERSION)
                .map_err(redb_err("write"))?;
            Ok(())
        })
    }

    fn failure_slot(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        // The slot holds a plain value: a panic elsewhere cannot leave it torn.
        self.guarded
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The handle, read-locked; reopens the database first if it is closed.
    fn open_handle(&self) -> Result<RwLockReadGuard<'_, Handle>, StoreError> {
        let lock = &self.guarded.handle;
        {
            // Swapping an `Option` cannot be torn by a panic: poison is ignored.
            let handle = lock.read().unwrap_or_else(PoisonError::into_inner);
            if handle.db.is_some() {
                return Ok(handle);
            }
        }
        {
            let mut handle = lock.write().unwrap_or_else(PoisonError::into_inner);
            if handle.db.is_none() {
                let result = self.reopen(&mut handle);
                if let Err(e) = &result {
                    *self.failure_slot() = Some(crate::error_chain(e));
                }
                result?;
            }
        }
        Ok(lock.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Records `error` and closes the database of `generation` (unless a
    /// concurrent failure already did), then tries to reopen it.
    fn failed(&self, generation: u64, error: &StoreError) {
        let reason = crate::error_chain(error);
        tracing::warn!(path = %self.path.display(), error = %reason,
            "state store failed; closing and reopening it");
        *self.failure_slot() = Some(reason);
        let mut handle = self
            .guarded
            .handle
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if handle.generation != generation {
            return;
        }
        // Closed before it is opened again: redb locks the file.
        drop(handle.db.take());
        if let Err(e) = self.reopen(&mut handle) {
            tracing::warn!(path = %self.path.display(), error = %crate::error_chain(&e),
                "state store cannot be reopened yet; the next operation tries again");
        }
    }

    fn reopen(&self, handle: &mut Handle) -> Result<(), StoreError> {
        let db = Database::create(&self.path).map_err(redb_err("reopen"))?;
        handle.db = Some(db);
        handle.generation = handle.generation.wrapping_add(1);
        tracing::info!(path = %self.path.display(), "state store reopened");
        Ok(())
    }
}
