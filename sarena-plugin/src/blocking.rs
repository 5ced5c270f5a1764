//! Blocking work (file I/O, fsync, flock) called from async code.

use tokio::task::JoinError;

/// Runs `f` on tokio's blocking pool when called inside a tokio runtime, so that
/// file I/O, fsync and flock never stall an async worker; runs it inline
/// elsewhere (no runtime, or another executor). The caller's tracing dispatcher
/// and span go with it, so its logs land where the caller's do.
///
/// `Err` only when the task did not complete: it panicked, or the runtime shut
/// down before it started.
pub async fn off_worker<T, F>(f: F) -> Result<T, JoinError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            let dispatch = tracing::dispatcher::get_default(Clone::clone);
            let span = tracing::Span::current();
            handle
                .spawn_blocking(move || {
                    tracing::dispatcher::with_default(&dispatch, || span.in_scope(f))
                })
                .await
        }
        Err(_) => Ok(f()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inside_a_runtime_it_runs_on_another_thread() {
        let caller = std::thread::current().id();
        let ran_on = off_worker(|| std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, caller);
    }

    #[test]
    fn without_a_runtime_it_runs_inline() {
        let caller = std::thread::current().id();
        let ran_on =
            futures_util::FutureExt::now_or_never(off_worker(|| std::thread::current().id()));
        assert_eq!(ran_on.map(Result::unwrap), Some(caller));
    }

    /// A subscriber that only marks where the dispatcher came from.
    struct Marker;

    impl tracing::Subscriber for Marker {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &tracing::Event<'_>) {}
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn the_callers_dispatcher_goes_along() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let marked = tracing::Dispatch::new(Marker);
        let seen = tracing::dispatcher::with_default(&marked, || {
            runtime.block_on(off_worker(|| {
                tracing::dispatcher::get_default(|d| d.is::<Marker>())
            }))
        });
        assert!(seen.unwrap());
    }
}
