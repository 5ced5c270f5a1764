//! What a client can hold of a listener, the same rules for the API's
//! listeners (Unix socket, TCP) and the metrics': each listener has a
//! [`Budget`] of its own, so clients of one can never take another's.
//!
//! - At most `max_connections` connections per listener. At the limit a
//!   new client takes the place of the oldest *idle* connection (one
//!   waiting for a request's headers, or for its answer to be read), which
//!   is closed; when every connection is busy answering a request, the new
//!   client waits in the listen backlog until one is done. Idle clients
//!   (slow loris, or a flood of connections that send nothing) therefore
//!   never keep a well-behaved client out.
//! - A connection that does not deliver a request's headers within
//!   `header_timeout` (also how long an idle keep-alive connection stays
//!   open) is closed.
//! - A write that cannot make progress for `write_timeout` (a client that
//!   never reads its answers) fails, and the connection is closed.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::TokioTimer;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{Notify, oneshot};
use tokio::time::Sleep;

/// One listener's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once (at least 1).
    pub max_connections: usize,
    /// How long a connection may take to deliver a request's headers, from
    /// when the server starts waiting for them.
    pub header_timeout: Duration,
    /// How long a write may stay blocked by a client that does not read.
    pub write_timeout: Duration,
}

/// An HTTP/1.1 connection builder with `limits`' header timeout.
pub(crate) fn http1(limits: &ConnLimits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    builder
}

/// A listener the accept loop can take connections from.
pub(crate) trait Listener: Send + Sync {
    /// The accepted stream.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection and, over TCP, the peer's address.
    fn accept_one(
        &self,
    ) -> impl Future<Output = io::Result<(Self::Stream, Option<SocketAddr>)>> + Send;
}

impl Listener for TcpListener {
    type Stream = TcpStream;
    async fn accept_one(&self) -> io::Result<(TcpStream, Option<SocketAddr>)> {
        let (stream, peer) = self.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok((stream, Some(peer)))
    }
}

impl Listener for UnixListener {
    type Stream = UnixStream;
    async fn accept_one(&self) -> io::Result<(UnixStream, Option<SocketAddr>)> {
        Ok((self.accept().await?.0, None))
    }
}

/// Accepts connections from `listener` forever, each admitted by `budget`
/// (see the [module docs](self)) and handed to `serve` with the peer's
/// address. Accept errors (e.g. EMFILE) are logged and retried after a
/// short pause.
pub(crate) async fn accept_loop<L: Listener>(
    listener: &L,
    budget: &Budget,
    mut serve: impl FnMut(TimedWrites<L::Stream>, Option<SocketAddr>, Admitted),
) {
    loop {
        match listener.accept_one().await {
            Ok((stream, peer)) => {
                let admitted = budget.admit().await;
                serve(
                    TimedWrites::new(stream, budget.write_timeout),
                    peer,
                    admitted,
                );
            }
            Err(e) => {
                tracing::warn!("accept failed: {}", sarena_core::error_chain(&e));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The open connections of one listener.
#[derive(Debug, Clone)]
pub struct Budget {
    shared: Arc<Shared>,
    write_timeout: Duration,
}

#[derive(Debug)]
struct Shared {
    max: usize,
    slots: Mutex<Slots>,
    /// Signalled when a connection ends or turns idle.
    changed: Notify,
}

#[derive(Debug, Default)]
struct Slots {
    next_id: u64,
    /// By age: the smallest id is the oldest connection.
    open: BTreeMap<u64, Slot>,
}

#[derive(Debug)]
struct Slot {
    /// Requests being answered on it.
    busy: usize,
    /// Closes the connection when it is evicted.
    evict: Option<oneshot::Sender<()>>,
}

impl Budget {
    /// A budget for a listener with `limits`.
    pub fn new(limits: &ConnLimits) -> Budget {
        Budget {
            shared: Arc::new(Shared {
                max: limits.max_connections.max(1),
                slots: Mutex::default(),
                changed: Notify::new(),
            }),
            write_timeout: limits.write_timeout,
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// A place for a new connection: a free one, else the oldest idle
    /// connection's (closed), else the first to free up.
    pub(crate) async fn admit(&self) -> Admitted {
        loop {
            let changed = self.shared.changed.notified();
            if let Some(admitted) = self.try_admit() {
                return admitted;
            }
            changed.await;
        }
    }

    fn try_admit(&self) -> Option<Admitted> {
        let mut slots = self.lock();
        if slots.open.len() >= self.shared.max {
            let oldest_idle = slots
                .open
                .iter()
                .find(|(_, s)| s.busy == 0)
                .map(|(id, _)| *id);
            let slot = slots.open.remove(&oldest_idle?)?;
            if let Some(evict) = slot.evict {
                let _ = evict.send(());
            }
            tracing::debug!("connection limit reached: closed the oldest idle connection");
        }
        let id = slots.next_id;
        slots.next_id += 1;
        let (evict, evicted) = oneshot::channel();
        slots.open.insert(
            id,
            Slot {
                busy: 0,
                evict: Some(evict),
            },
        );
        Some(Admitted {
            slot: SlotRef {
                budget: self.clone(),
                id,
            },
            evicted,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.shared
            .slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One admitted connection; its place is freed when this is dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    slot: SlotRef,
    evicted: oneshot::Receiver<()>,
}

impl Admitted {
    /// A handle for marking requests in progress ([`SlotRef::busy`]).
    pub(crate) fn slot(&self) -> SlotRef {
        self.slot.clone()
    }

    /// Serves `conn` until it ends or the budget evicts it.
    pub(crate) async fn run<C, E>(mut self, conn: C)
    where
        C: Future<Output = Result<(), E>>,
        E: std::error::Error + 'static,
    {
        tokio::select! {
            ended = conn => if let Err(e) = ended {
                tracing::debug!("connection ended with error: {}", sarena_core::error_chain(&e));
            },
            _ = &mut self.evicted => tracing::debug!("idle connection closed to make room"),
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.slot.budget.lock().open.remove(&self.slot.id);
        self.slot.budget.shared.changed.notify_one();
    }
}

/// A connection's place in its budget.
#[derive(Debug, Clone)]
pub(crate) struct SlotRef {
    budget: Budget,
    id: u64,
}

impl SlotRef {
    /// Marks a request in progress until the guard is dropped: a busy
    /// connection is never evicted.
    pub(crate) fn busy(&self) -> Busy {
        self.update(|busy| *busy += 1);
        Busy(self.clone())
    }

    fn update(&self, f: impl FnOnce(&mut usize)) {
        if let Some(slot) = self.budget.lock().open.get_mut(&self.id) {
            f(&mut slot.busy);
        }
    }
}

/// A request in progress on a connection ([`SlotRef::busy`]).
#[derive(Debug)]
pub(crate) struct Busy(SlotRef);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.update(|busy| *busy = busy.saturating_sub(1));
        self.0.budget.shared.changed.notify_one();
    }
}

/// A stream whose writes fail with `TimedOut` once one has been blocked
/// (the peer not reading) for the write timeout.
#[derive(Debug)]
pub(crate) struct TimedWrites<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> TimedWrites<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        TimedWrites {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After the inner write returned `poll`: progress resets the clock,
    /// a block starts it, and a block past the timeout is an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {timeout:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TimedWrites<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TimedWrites<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize) -> ConnLimits {
        ConnLimits {
            max_connections: max,
            header_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn at_the_limit_the_oldest_idle_connection_makes_room_busy_ones_never() {
        let budget = Budget::new(&limits(2));
        let mut first = budget.admit().await;
        let second = budget.admit().await;
        let _busy = second.slot().busy();
        // Full: the third takes the first's place (idle), not the busy second's.
        let third = budget.admit().await;
        assert!(first.evicted.try_recv().is_ok());
        drop(first);
        assert_eq!(budget.open(), 2);
        // Both busy: a fourth waits until one is done.
        let _busy_third = third.slot().busy();
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.admit().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(_busy);
        let fourth = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        drop(fourth);
        assert_eq!(budget.open(), 1);
    }
}
