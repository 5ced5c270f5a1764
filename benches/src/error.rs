//! The harness's one error type: every failure names what it was doing and on
//! what, with the real source where there is one.

use std::net::SocketAddr;
use std::path::PathBuf;

/// A failure of the benchmark harness, with the call and the object as fields;
/// the message never repeats the source, so print it with
/// [`sarena_core::error_chain`] for the whole cause.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The harness needs root (namespaces, veths, bpffs).
    #[error("the benchmark harness must run as root (it creates network namespaces and veths)")]
    NotRoot,
    /// A binary the harness runs is missing.
    #[error("{what} not found at {path}: {hint}")]
    MissingBinary {
        what: &'static str,
        path: PathBuf,
        hint: &'static str,
    },
    /// A file-system or process call failed.
    #[error("{call} {path}")]
    Io {
        call: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A helper command (`ip`, `iperf3`, ...) exited non-zero.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    /// The private sarena-daemon did not come up.
    #[error("sarena-daemon of node {node} did not start: {reason}; log tail:\n{log_tail}")]
    DaemonStart {
        node: String,
        reason: String,
        log_tail: String,
    },
    /// A call to the daemon's API failed.
    #[error("daemon API {call} on {socket}")]
    Api {
        socket: PathBuf,
        call: &'static str,
        #[source]
        source: sarena_core::api::DaemonError,
    },
    /// A file under /proc did not read or parse.
    #[error("/proc: {what}")]
    Proc {
        what: &'static str,
        #[source]
        source: procfs::ProcError,
    },
    /// A plot did not render.
    #[error("plotting {plot}")]
    Plot {
        plot: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A socket call of the request/response test failed.
    #[error("{call} {addr}")]
    Socket {
        call: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The eBPF programs' pinned counters map could not be read.
    #[error("pinned eBPF counters map {path}")]
    Counters {
        path: PathBuf,
        #[source]
        source: aya::maps::MapError,
    },
    /// The eBPF run-time statistics could not be switched on.
    #[error("BPF_ENABLE_STATS")]
    BpfStats {
        #[source]
        source: aya::sys::SyscallError,
    },
    /// Output the harness reads was not what it expected.
    #[error("{what}: {detail}")]
    Parse { what: &'static str, detail: String },
    /// A measurement thread panicked.
    #[error("the {what} thread panicked")]
    ThreadPanicked { what: &'static str },
    /// A CNI operation returned an error (or no result) where one was required.
    #[error("CNI {command} of {container_id} on {node} failed: {detail}")]
    Plugin {
        node: String,
        command: String,
        container_id: String,
        detail: String,
    },
    /// JSON the harness reads or writes did not (de)serialise.
    #[error("JSON of {what}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
    /// A check of the results failed (address missing, duplicate, IPAM not empty...).
    #[error("verification failed: {what}")]
    Verify { what: String },
    /// Bad options or input.
    #[error("invalid input: {what}")]
    Input { what: String },
    /// A call of Sarena embedded in this process (registry, dataplane,
    /// plugin sequence) failed.
    #[error("embedded Sarena: {call} ({context})")]
    Embedded {
        call: &'static str,
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BenchError {
    /// An [`BenchError::Embedded`] for `call` on `context`.
    pub fn embedded(
        call: &'static str,
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        BenchError::Embedded {
            call,
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// An [`BenchError::Io`] for `call` on `path`.
    pub fn io(call: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            call,
            path: path.into(),
            source,
        }
    }
}
