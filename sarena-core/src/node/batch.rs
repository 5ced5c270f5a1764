//! Group commit: concurrent mutations share one fsync, and none is answered
//! before it is durable.
//!
//! Every mutation of the registry goes through [`Inner::mutate`]: it queues
//! the operation and waits for its answer. The first caller that finds no
//! batch running leads: it takes the state mutex and runs what is queued,
//! one operation after the other, as they would have run each under the
//! mutex. A batch of one commits as before (durably, one fsync). A batch of
//! several commits each operation's transaction without an fsync
//! ([`RedbStore::deferring`](crate::store::RedbStore::deferring)) and then
//! makes them all durable with one ([`RedbStore::flush`](crate::store::RedbStore::flush)).
//! The leader keeps the mutex until the flush returns and answers only then,
//! so nobody, reader or writer, ever sees state the disk might not keep, and
//! an acknowledged mutation survives a SIGKILL or a power loss as before.
//! While a batch runs the next one queues; the leader takes it in turn.
//!
//! A flush that fails (or a failure that made the store reopen its file
//! while the batch ran) loses the batch's deferred writes: the leader
//! reloads the state from the store, so memory is again what the disk holds,
//! and every operation of the batch that had succeeded is answered with
//! [`NodeError::NotKept`] (those that had failed keep their own error). When
//! the reload itself fails the state is marked stale and every later
//! operation tries it first (see [`Inner::lock`]).

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::{Inner, NodeError, State};

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;

/// An operation waiting in the queue.
struct Job {
    run: Run,
    /// Tells its caller, waiting for the answer, to lead the next batch.
    lead: Box<dyn Fn() + Send>,
}

/// Runs an operation, by the leader, with the state (or the error that kept
/// it from the state); returns how to answer once the batch's fate is known.
type Run = Box<dyn FnOnce(&Inner, Result<&mut State, NodeError>) -> Answer + Send>;

/// Answers an operation: with `None` when its batch is durable, with why
/// not otherwise.
type Answer = Box<dyn FnOnce(Option<&str>) + Send>;

/// The queue of operations and whether a leader is running them.
#[derive(Default)]
pub(super) struct Batches {
    queue: Mutex<Queue>,
    /// Tests: the next flush is taken as failed.
    #[cfg(test)]
    pub(super) fail_next_flush: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    leading: bool,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches").finish_non_exhaustive()
    }
}

impl Batches {
    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        // The queue holds plain values: nothing can be left torn by a panic.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Operations waiting for the next batch.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.queue().jobs.len()
    }
}

/// A caller's side of its operation: the answer, or the turn to lead.
struct Slot<T> {
    inbox: Mutex<Inbox<T>>,
    ready: Condvar,
}

struct Inbox<T> {
    answer: Option<Result<T, NodeError>>,
    lead: bool,
}

/// What a waiting caller is woken for.
enum Woken<T> {
    Answered(Result<T, NodeError>),
    Lead,
}

impl<T> Slot<T> {
    fn inbox(&self) -> std::sync::MutexGuard<'_, Inbox<T>> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, answer: Result<T, NodeError>) {
        self.inbox().answer = Some(answer);
        self.ready.notify_one();
    }

    fn call_to_lead(&self) {
        self.inbox().lead = true;
        self.ready.notify_one();
    }

    fn wait(&self) -> Woken<T> {
        let mut inbox = self.inbox();
        loop {
            if let Some(a) = inbox.answer.take() {
                return Woken::Answered(a);
            }
            if std::mem::take(&mut inbox.lead) {
                return Woken::Lead;
            }
            inbox = self
                .ready
                .wait(inbox)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Puts [`NodeError::Poisoned`] in the slot if dropped unanswered (a
/// leader that panicked mid-batch): no caller waits forever.
struct Reply<T>(Option<Arc<Slot<T>>>);

impl<T> Reply<T> {
    fn send(mut self, answer: Result<T, NodeError>) {
        if let Some(slot) = self.0.take() {
            slot.put(answer);
        }
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.put(Err(NodeError::Poisoned));
        }
    }
}

/// Held while leading: a leader that unwinds (a panic in an operation)
/// answers every queued operation [`NodeError::Poisoned`] (their jobs are
/// dropped) and steps down, so nobody waits for a leader that is gone.
struct Leading<'a>(&'a Batches);

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let jobs = {
                let mut queue = self.0.queue();
                queue.leading = false;
                std::mem::take(&mut queue.jobs)
            };
            drop(jobs);
        }
    }
}

impl Inner {
    /// Runs `op` on the state in the next batch and returns its answer once
    /// the batch is durable (see the module docs).
    pub(super) fn mutate<T, F>(&self, op: F) -> Result<T, NodeError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &mut State) -> Result<T, NodeError> + Send + 'static,
    {
        let slot = Arc::new(Slot {
            inbox: Mutex::new(Inbox {
                answer: None,
                lead: false,
            }),
            ready: Condvar::new(),
        });
        let reply = Reply(Some(Arc::clone(&slot)));
        let caller = Arc::clone(&slot);
        let job = Job {
            run: Box::new(move |inner, state| {
                let result = state.and_then(|st| op(inner, st));
                Box::new(move |lost: Option<&str>| {
                    reply.send(match (result, lost) {
                        (Ok(_), Some(reason)) => Err(NodeError::NotKept {
                            reason: reason.to_owned(),
                        }),
                        (result, _) => result,
                    })
                })
            }),
            lead: Box::new(move || caller.call_to_lead()),
        };
        let lead = {
            let mut queue = self.batches.queue();
            queue.jobs.push(job);
            !std::mem::replace(&mut queue.leading, true)
        };
        if lead {
            self.lead_one_batch();
        }
        loop {
            match slot.wait() {
                Woken::Answered(answer) => return answer,
                Woken::Lead => self.lead_one_batch(),
            }
        }
    }

    /// Runs every queued operation as one batch, then hands the lead to the
    /// first caller queued meanwhile (or steps down): a leader answers its
    /// own operation in the batch it runs and is not kept leading others'.
    fn lead_one_batch(&self) {
        let leading = Leading(&self.batches);
        let jobs = std::mem::take(&mut self.batches.queue().jobs);
        if !jobs.is_empty() {
            self.run_batch(jobs);
        }
        let mut queue = self.batches.queue();
        match queue.jobs.first() {
            Some(next) => (next.lead)(),
            None => queue.leading = false,
        }
        drop(queue);
        drop(leading);
    }

    /// Runs `jobs` under the state mutex, makes their writes durable, then
    /// answers them.
    fn run_batch(&self, jobs: Vec<Job>) {
        let jobs: Vec<_> = jobs.into_iter().map(|job| job.run).collect();
        let mut guard = match self.lock() {
            Ok(guard) => guard,
            Err(error) => {
                let reason = crate::error_chain(&error);
                for job in jobs {
                    let err = match error {
                        NodeError::Poisoned => NodeError::Poisoned,
                        _ => NodeError::NotKept {
                            reason: reason.clone(),
                        },
                    };
                    job(self, Err(err))(None);
                }
                return;
            }
        };
        let st = &mut *guard;
        // Alone, an operation's writes commit durably themselves, as they
        // always have; together, they are deferred and flushed at once.
        let alone = jobs.len() == 1;
        let generation = self.store.generation();
        let run = || -> Vec<Answer> {
            jobs.into_iter()
                .map(|job| job(self, Ok(&mut *st)))
                .collect()
        };
        let answers = if alone {
            run()
        } else {
            self.store.deferring(run)
        };
        let lost = if alone { None } else { self.flush(generation) };
        if let Some(reason) = &lost {
            tracing::warn!(%reason, operations = answers.len(), "a group commit was lost; reloading the state from the store");
            self.reload(st);
        }
        drop(guard);
        for answer in answers {
            answer(lost.as_deref());
        }
    }

    /// Makes the batch's deferred writes durable
    /// ([`RedbStore::flush`](crate::store::RedbStore::flush)); why they are
    /// lost when the flush fails or the store was reopened since
    /// `generation` (a failure during the batch), `None` when kept.
    fn flush(&self, generation: u64) -> Option<String> {
        #[cfg(test)]
        if self
            .batches
            .fail_next_flush
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            return Some(
                "the state store could not make the commit durable: injected by a test".into(),
            );
        }
        match self.store.flush() {
            Err(e) => Some(format!(
                "the state store could not make the commit durable: {}",
                crate::error_chain(&e)
            )),
            Ok(()) if self.store.generation() != generation => {
                Some("the state store was reopened after a failure during the commit".into())
            }
            Ok(()) => None,
        }
    }
}
