//! Listeners and the accept loops: a Unix socket (mode 0600, root's: its
//! mode is the access control) and an optional TCP listener (loopback only
//! unless `--allow-remote-tcp`) whose clients must present the bearer token
//! of its token file ([`TcpApi`], [`crate::api_token`]); HTTP/1.1
//! connections served by [`crate::routes`]; and a graceful shutdown that
//! stops accepting, lets in-flight requests finish and removes the socket.
//!
//! What a client can hold is bounded per listener ([`Limits`], see
//! [`crate::conn`]): TCP clients have a connection budget of their own, so
//! however many of them there are, the plugin's Unix socket keeps its own;
//! idle connections give way to new clients, slow headers and blocked
//! writes are cut off; the routes bound the body in size and time.

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
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use sarena_core::api::NodeApi;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

use crate::api_token::{ApiToken, TokenError};
use crate::conn::{self, Admitted, Budget, ConnLimits};
use crate::events;
use crate::routes::{self, Caller};

/// How long shutdown waits for in-flight requests before giving up on them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What clients can hold of the daemon: each listener has its own budget
/// (see [`crate::conn`]), so TCP clients can never take the Unix socket's
/// connections, which the plugin needs for ADD and DEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The Unix socket's.
    pub unix: ConnLimits,
    /// The TCP listener's (`--listen-tcp`).
    pub tcp: ConnLimits,
}

impl Limits {
    /// The daemon's limits: 256 connections on the Unix socket, 64 on TCP;
    /// 10 s for a request's headers, 10 s for a blocked write.
    pub const DEFAULT: Limits = Limits {
        unix: ConnLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
        },
        tcp: ConnLimits {
            max_connections: 64,
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
        },
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// The TCP listener and the token its clients must present.
#[derive(Debug)]
pub struct TcpApi {
    listener: TcpListener,
    token: ApiToken,
}

impl TcpApi {
    /// Loads (or creates) the token at `token_file` ([`ApiToken::load_or_create`]),
    /// then binds `addr` after [`check_tcp_addr`].
    pub async fn bind(
        addr: SocketAddr,
        allow_remote: bool,
        token_file: &Path,
    ) -> Result<TcpApi, ServerError> {
        check_tcp_addr(addr, allow_remote)?;
        let token = ApiToken::load_or_create(token_file)?;
        Ok(TcpApi {
            listener: bind_tcp(addr, allow_remote).await?,
            token,
        })
    }

    /// `listener`, its clients needing `token`.
    pub fn new(listener: TcpListener, token: ApiToken) -> TcpApi {
        TcpApi { listener, token }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// `--listen-tcp` of `cli` bound with its token file; `None` without it.
    pub async fn from_cli(cli: &crate::cli::Cli) -> Result<Option<TcpApi>, ServerError> {
        match cli.listen_tcp {
            Some(addr) => Ok(Some(
                TcpApi::bind(addr, cli.allow_remote_tcp, &cli.tcp_token_file()).await?,
            )),
            None => Ok(None),
        }
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
        "refusing to listen on non-loopback address {addr}: the API has no TLS (its token would cross the network in clear); pass --allow-remote-tcp to do it anyway"
    )]
    RemoteTcpRefused {
        /// The address.
        addr: SocketAddr,
    },
    /// The TCP listener's token file cannot be used.
    #[error(transparent)]
    Token(#[from] TokenError),
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
    tcp: Option<TcpApi>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    serve_with_limits(daemon, unix, tcp, shutdown, grace, Limits::DEFAULT).await;
}

/// [`serve`] with other [`Limits`].
pub async fn serve_with_limits(
    daemon: Arc<dyn NodeApi>,
    unix: UnixSocket,
    tcp: Option<TcpApi>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: Limits,
) {
    let graceful = GracefulShutdown::new();
    {
        let unix_budget = Budget::new(&limits.unix);
        let serve_unix = conn::accept_loop(&unix.listener, &unix_budget, |stream, _, admitted| {
            spawn_connection(
                &graceful,
                daemon.clone(),
                stream,
                admitted,
                Caller::Trusted,
                &limits.unix,
            )
        });
        let serve_tcp = async {
            let Some(tcp) = &tcp else {
                return std::future::pending().await;
            };
            let budget = Budget::new(&limits.tcp);
            let caller = Caller::WithToken(tcp.token.clone());
            conn::accept_loop(&tcp.listener, &budget, |stream, _, admitted| {
                spawn_connection(
                    &graceful,
                    daemon.clone(),
                    stream,
                    admitted,
                    caller.clone(),
                    &limits.tcp,
                )
            })
            .await
        };
        tokio::select! {
            () = shutdown => {}
            () = serve_unix => {}
            () = serve_tcp => {}
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

/// Serves one connection on a task of its own; its place in the budget is
/// held until it ends (or is evicted while idle).
fn spawn_connection<S>(
    graceful: &GracefulShutdown,
    daemon: Arc<dyn NodeApi>,
    stream: S,
    admitted: Admitted,
    caller: Caller,
    limits: &ConnLimits,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = admitted.slot();
    let service = service_fn(move |req: Request<Incoming>| {
        let (daemon, caller) = (daemon.clone(), caller.clone());
        let busy = slot.busy();
        async move {
            let (method, path) = (req.method().clone(), req.uri().path().to_owned());
            if let Some(route) = events::http::route(&method, &path, req.uri().query()) {
                // the busy mark goes with a streamed answer, kept until it ends
                let answer =
                    events::http::answer(events::installed(), route, &caller, req, busy).await;
                return Ok::<_, Infallible>(answer);
            }
            let answer = routes::handle_as(&*daemon, &caller, req).await;
            drop(busy);
            Ok::<_, Infallible>(answer.map(events::http::whole))
        }
    });
    let conn = conn::http1(limits).serve_connection(TokioIo::new(stream), service);
    let conn = graceful.watch(conn);
    tokio::spawn(admitted.run(conn));
}

#[cfg(test)]
mod tests;
