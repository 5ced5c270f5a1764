//! The open database, and what happens when its file fails: after one I/O
//! error (a full disk, most often) redb refuses every later operation with
//! `PreviousIo` until the database is closed and opened again. So a failed
//! operation closes the database and reopens it (redb repairs the file on
//! open); when the reopen itself fails (the disk still full), the next
//! operation tries again first. Until a write succeeds again the store
//! reports the failure ([`RedbStore::write_failure`]), which the registry
//! serves as "not ready".

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use redb::{Database, Durability, WriteTransaction};

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
    /// Commits made durable (fsynced): immediate writes and flushes.
    durable_commits: AtomicU64,
    /// Write transactions committed, durable or deferred (flushes included).
    transactions: AtomicU64,
}

thread_local! {
    /// Set while this thread runs [`RedbStore::deferring`]: its commits
    /// wait for the next [`RedbStore::flush`] to be durable.
    static DEFERRING: Cell<bool> = const { Cell::new(false) };
}

/// Clears [`DEFERRING`] when dropped, however `deferring`'s closure ends.
struct DeferringGuard;

impl Drop for DeferringGuard {
    fn drop(&mut self) {
        DEFERRING.with(|d| d.set(false));
    }
}

/// What the store has committed since it was opened (group commit shows
/// as fewer durable commits than transactions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitCounts {
    /// Write transactions committed, durable or deferred (flushes included).
    pub transactions: u64,
    /// fsyncs: transactions committed durably (writes one by one, and the
    /// flushes of deferred writes).
    pub durable_commits: u64,
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
            durable_commits: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
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
    /// Runs `f` in one write transaction and commits it durably (inside
    /// [`RedbStore::deferring`]: atomically, durable at the next flush); on
    /// error nothing is written. A success clears
    /// [`RedbStore::write_failure`].
    pub(super) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let deferred = DEFERRING.with(Cell::get);
        let out = self.with_db(|db| {
            let mut txn = db.begin_write().map_err(redb_err(op))?;
            if deferred {
                txn.set_durability(Durability::None)
                    .map_err(redb_err("set durability"))?;
            }
            let out = f(&txn)?;
            txn.commit().map_err(redb_err("commit"))?;
            Ok(out)
        })?;
        self.guarded.transactions.fetch_add(1, Ordering::Relaxed);
        if !deferred {
            self.guarded.durable_commits.fetch_add(1, Ordering::Relaxed);
        }
        let mut failure = self.failure_slot();
        if let Some(reason) = failure.take() {
            tracing::info!(path = %self.path.display(), was = %reason, "state store writes again");
        }
        Ok(out)
    }

    /// Runs `f` with this thread's writes deferred: each still commits
    /// atomically and is visible to later reads, but is durable only once a
    /// later [`RedbStore::flush`] (or a durable write of any thread)
    /// returns. The caller flushes before it tells anyone about them; a
    /// failure meanwhile (the database reopened, see
    /// [`RedbStore::generation`]) loses them.
    pub fn deferring<T>(&self, f: impl FnOnce() -> T) -> T {
        DEFERRING.with(|d| d.set(true));
        let _clear = DeferringGuard;
        f()
    }

    /// Makes every write committed so far durable: one empty transaction
    /// committed durably (one fsync for all of them).
    pub fn flush(&self) -> Result<(), StoreError> {
        let was = DEFERRING.with(|d| d.replace(false));
        let out = self.write("flush", |_| Ok(()));
        DEFERRING.with(|d| d.set(was));
        out
    }

    /// The database's generation: bumped each time a failure makes the
    /// store close and reopen it, which loses whatever deferred writes were
    /// not flushed yet.
    pub fn generation(&self) -> u64 {
        self.guarded
            .handle
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .generation
    }

    /// What has been committed since the store was opened.
    pub fn commit_counts(&self) -> CommitCounts {
        CommitCounts {
            transactions: self.guarded.transactions.load(Ordering::Relaxed),
            durable_commits: self.guarded.durable_commits.load(Ordering::Relaxed),
        }
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
