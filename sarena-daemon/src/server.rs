//! Listeners and the accept loop: a Unix socket (mode 0600) and an optional
//! loopback-only TCP listener, HTTP/1.1 connections served by [`crate::routes`],
//! and a graceful shutdown that stops accepting, lets in-flight requests finish
//! and removes the socket.
//!
//! What a client can hold is bounded ([`Limits`]): at most
//! [`Limits::max_connections`] connections are served at once (the rest wait
//! in the listen backlog), and a connection that does not deliver a
//! request's headers within [`Limits::header_timeout`] (a slow-loris client,
//! or an idle keep-alive one) is closed; the routes bound the body in size
//! and time.

use std::convert::Infallible;
use std::fs;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use sarena_core::api::NodeApi;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::routes;

/// How long shutdown waits for in-flight requests before giving up on them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What clients can hold of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more clients wait in the listen backlog
    /// until one ends.
    pub max_connections: usize,
    /// How long a connection may take to deliver a request's headers, from
    /// when the server starts waiting for them (so also how long an idle
    /// keep-alive connection stays open).
    pub header_timeout: Duration,
}

impl Limits {
    /// The daemon's limits: 256 connections, 10 s for headers.
    pub const DEFAULT: Limits = Limits {
        max_connections: 256,
        header_timeout: Duration::from_secs(10),
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Errors setting up or running the listeners.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A filesystem or socket call on the Unix socket path failed.
    #[error("{call} {path}")]
    Socket {
        /// The call, e.g. `bind`.
        call: &'static str,
        /// The path it was called on.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Something other than a socket sits at the socket path; it is left alone.
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// A live process already answers on the socket path.
    #[error("another daemon is already listening on {path}")]
    InUse {
        /// The path.
        path: PathBuf,
    },
    /// `--listen-tcp` names a non-loopback address without `--allow-remote-tcp`.
    #[error(
        "refusing to listen on non-loopback address {addr}: the API is unauthenticated; pass --allow-remote-tcp to do it anyway"
    )]
    RemoteTcpRefused {
        /// The address.
        addr: SocketAddr,
    },
    /// Binding the TCP listener failed.
    #[error("bind tcp {addr}")]
    TcpBind {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

fn socket_err(call: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ServerError + use<> {
    let path = path.to_owned();
    move |source| ServerError::Socket { call, path, source }
}

/// A bound Unix socket that knows its path and inode, so shutdown removes the
/// socket file only if it is still the one this process created.
#[derive(Debug)]
pub struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
    ino: u64,
}

impl UnixSocket {
    /// Binds `path` with mode 0600: creates the parent directory, removes a stale
    /// socket left by a dead daemon, and refuses to replace a live socket or a
    /// non-socket file.
    ///
    /// The socket is bound inside a fresh private (0700) directory, chmod'ed and
    /// only then renamed into place, so it is never reachable with wider permissions.
    pub fn bind(path: &Path) -> Result<UnixSocket, ServerError> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&parent)
            .map_err(socket_err("mkdir", &parent))?;
        remove_stale(path)?;

        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let private = parent.join(format!(
            ".{}.bind-{}",
            file_name.unwrap_or_else(|| "sock".into()),
            std::process::id()
        ));
        // A leftover from a crashed start of a process with the same pid.
        let _ = fs::remove_dir_all(&private);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .map_err(socket_err("mkdir", &private))?;
        let staged = private.join("s");
        let result = (|| {
            let listener = UnixListener::bind(&staged).map_err(socket_err("bind", &staged))?;
            fs::set_permissions(&staged, fs::Permissions::from_mode(0o600))
                .map_err(socket_err("chmod", &staged))?;
            fs::rename(&staged, path).map_err(socket_err("rename", path))?;
            let ino = fs::symlink_metadata(path)
                .map_err(socket_err("stat", path))?
                .ino();
            Ok(UnixSocket {
                listener,
                path: path.to_owned(),
                ino,
            })
        })();
        let _ = fs::remove_dir_all(&private);
        result
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket file if it is still this socket's.
    fn remove_file(&self) {
        match fs::symlink_metadata(&self.path) {
            Ok(m) if m.ino() == self.ino => {
                if let Err(e) = fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), "cannot remove socket: {}", sarena_core::error_chain(&e));
                }
            }
            Ok(_) => tracing::warn!(path = %self.path.display(), "socket was replaced; leaving it"),
            Err(_) => {}
        }
    }
}

/// Removes `path` if it is a socket nobody listens on.
fn remove_stale(path: &Path) -> Result<(), ServerError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(socket_err("stat", path)(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(ServerError::NotASocket {
            path: path.to_owned(),
        });
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(ServerError::InUse {
            path: path.to_owned(),
        }),
        Err(_) => {
            tracing::info!(path = %path.display(), "removing stale socket");
            fs::remove_file(path).map_err(socket_err("remove", path))
        }
    }
}

/// Checks that `addr` is loopback unless remote access is explicitly allowed.
pub fn check_tcp_addr(addr: SocketAddr, allow_remote: bool) -> Result<(), ServerError> {
    if allow_remote || addr.ip().to_canonical().is_loopback() {
        Ok(())
    } else {
        Err(ServerError::RemoteTcpRefused { addr })
    }
}

/// Binds the TCP listener after [`check_tcp_addr`].
pub async fn bind_tcp(addr: SocketAddr, allow_remote: bool) -> Result<TcpListener, ServerError> {
    check_tcp_addr(addr, allow_remote)?;
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::TcpBind { addr, source })
}

/// Serves `daemon` on `unix` (and `tcp`) until `shutdown` resolves; then stops
/// accepting, removes the socket file, and waits up to `grace` for open
/// connections to finish their in-flight requests. [`Limits::DEFAULT`] apply.
pub async fn serve(
    daemon: Arc<dyn NodeApi>,
    unix: UnixSocket,
    tcp: Option<TcpListener>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    serve_with_limits(daemon, unix, tcp, shutdown, grace, Limits::DEFAULT).await;
}

/// [`serve`] with other [`Limits`].
pub async fn serve_with_limits(
    daemon: Arc<dyn NodeApi>,
    unix: UnixSocket,
    tcp: Option<TcpListener>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: Limits,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A free slot first: at the cap, clients wait in the backlog.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        tokio::select! {
            () = &mut shutdown => break,
            accepted = unix.listener.accept() => match accepted {
                Ok((stream, _)) => spawn_connection(&graceful, daemon.clone(), stream, slot, limits),
                Err(e) => accept_failed(e).await,
            },
            accepted = accept_tcp(tcp.as_ref()) => match accepted {
                Ok(stream) => spawn_connection(&graceful, daemon.clone(), stream, slot, limits),
                Err(e) => accept_failed(e).await,
            },
        }
    }
    drop(tcp);
    unix.remove_file();
    drop(unix);
    let open = graceful.count();
    tracing::info!(
        open_connections = open,
        "stopped accepting; finishing in-flight requests"
    );
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?grace,
            "connections still open after the grace period; closing them"
        );
    }
}

async fn accept_tcp(tcp: Option<&TcpListener>) -> io::Result<tokio::net::TcpStream> {
    match tcp {
        Some(l) => {
            let (stream, _) = l.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        None => std::future::pending().await,
    }
}

/// Accept errors (e.g. EMFILE) are transient: log, back off briefly, carry on.
async fn accept_failed(e: io::Error) {
    tracing::warn!("accept failed: {}", sarena_core::error_chain(&e));
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Serves one connection on a task of its own; `slot` is held until it ends.
fn spawn_connection<S>(
    graceful: &GracefulShutdown,
    daemon: Arc<dyn NodeApi>,
    stream: S,
    slot: OwnedSemaphorePermit,
    limits: Limits,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let daemon = daemon.clone();
        async move { Ok::<_, Infallible>(routes::handle(&*daemon, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    let conn = graceful.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(
                "connection ended with error: {}",
                sarena_core::error_chain(&e)
            );
        }
        drop(slot);
    });
}

#[cfg(test)]
mod tests;
