//! Named network namespaces (`/run/netns/NAME`, as `ip netns add` makes them), removed
//! on drop, and the pods that are one each.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use nix::sched::{CloneFlags, setns};

use crate::BenchError;

/// This process's run id: six hex digits, in every name the harness creates.
pub fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        format!(
            "{:06x}",
            (nanos ^ std::process::id().rotate_left(11)) & 0xff_ffff
        )
    })
}

/// A name unique in this run: `sb<run id><n><tag>` (alphanumeric, `-` and `_`).
pub fn unique_name(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(24)
        .collect();
    format!("sb{}{n:x}-{tag}", run_id())
}

/// Moves the calling thread into the network namespace `netns` (an open
/// namespace file); `setns(2)`, nothing else (async-signal-safe).
pub fn enter(netns: impl AsFd) -> std::io::Result<()> {
    setns(netns, CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
}

/// Set when a thread could not return from a node's network namespace:
/// every later [`ThreadIn::enter`] fails, so the run stops (and cleans up)
/// instead of going on from a thread in the wrong namespace.
static STRANDED: AtomicBool = AtomicBool::new(false);

/// The calling thread inside another network namespace until
/// [`ThreadIn::leave`] (or drop) returns it to the one it was in. For
/// spawning a child there without a `pre_exec` hook, which forces a fork;
/// without one the spawn is a `posix_spawn`.
#[derive(Debug)]
#[must_use = "leave() returns the thread to its own namespace"]
pub struct ThreadIn {
    home: Option<File>,
}

impl ThreadIn {
    /// Moves the calling thread into `netns` (an open namespace file).
    pub fn enter(netns: &File) -> Result<ThreadIn, BenchError> {
        if STRANDED.load(Ordering::Relaxed) {
            return Err(BenchError::Input {
                what: "a harness thread could not return from a node's network namespace".into(),
            });
        }
        let home = File::open("/proc/thread-self/ns/net")
            .map_err(|source| BenchError::io("open", "/proc/thread-self/ns/net", source))?;
        enter(netns).map_err(|source| BenchError::io("setns", "node netns", source))?;
        Ok(ThreadIn { home: Some(home) })
    }

    /// Returns the thread to the namespace it was in.
    pub fn leave(mut self) -> Result<(), BenchError> {
        self.go_home()
    }

    fn go_home(&mut self) -> Result<(), BenchError> {
        let Some(home) = self.home.take() else {
            return Ok(());
        };
        enter(&home).map_err(|source| {
            STRANDED.store(true, Ordering::Relaxed);
            BenchError::io("setns", "the thread's own netns", source)
        })
    }
}

impl Drop for ThreadIn {
    fn drop(&mut self) {
        if let Err(e) = self.go_home() {
            warn(&sarena_core::error_chain(&e));
        }
    }
}

/// Makes `cmd` enter the network namespace `netns` (an open namespace file)
/// between fork and exec. The file moves into the hook, so it stays open until
/// the spawn; the child calls only [`enter`] there.
pub fn enter_on_exec(cmd: &mut Command, netns: File) {
    // SAFETY: the hook runs between fork and exec and only calls setns on an
    // fd it owns; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || enter(&netns));
    }
}

/// Runs a helper command to completion; non-zero exit is an error with its stderr.
pub fn run_cmd(program: &str, args: &[&str]) -> Result<String, BenchError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| BenchError::io("spawn", program, source))?;
    if !out.status.success() {
        return Err(BenchError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A named network namespace, deleted (`ip netns del`) on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
    path: PathBuf,
}

impl Netns {
    /// Creates `/run/netns/NAME` with its loopback up.
    pub fn create(name: &str) -> Result<Netns, BenchError> {
        run_cmd("ip", &["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
            path: PathBuf::from("/run/netns").join(name),
        };
        run_cmd("ip", &["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name under /run/netns.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/NAME`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the namespace (for `setns`).
    pub fn open(&self) -> Result<File, BenchError> {
        File::open(&self.path).map_err(|source| BenchError::io("open netns", &self.path, source))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = run_cmd("ip", &["netns", "del", &self.name]) {
            warn(&format!(
                "removing netns {}: {}",
                self.name,
                sarena_core::error_chain(&e)
            ));
        }
    }
}

/// Cleanup failures are reported on stderr (nothing else can be done in `drop`).
pub(crate) fn warn(msg: &str) {
    eprintln!("sarena-bench: warning: {msg}");
}

/// A pod: its own network namespace and container id; it keeps the result of its
/// last successful ADD (the `prevResult` runtimes send with CHECK and DEL).
#[derive(Debug)]
pub struct Pod {
    netns: Netns,
    container_id: String,
    prev_result: Mutex<Option<serde_json::Value>>,
    runtime_config: Option<serde_json::Value>,
}

impl Pod {
    /// A new pod (fresh netns, unique container id) named after `tag`.
    pub fn new(tag: &str) -> Result<Pod, BenchError> {
        let name = unique_name(tag);
        let netns = Netns::create(&name)?;
        Ok(Pod {
            container_id: format!("{name}-ctr"),
            netns,
            prev_result: Mutex::new(None),
            runtime_config: None,
        })
    }

    /// The same pod with `runtimeConfig` (the capability arguments a
    /// runtime adds to every operation's config, e.g. `{"bandwidth": ...}`).
    pub fn with_runtime_config(mut self, runtime_config: serde_json::Value) -> Pod {
        self.runtime_config = Some(runtime_config);
        self
    }

    /// The pod's `runtimeConfig`, if it has one.
    pub fn runtime_config(&self) -> Option<&serde_json::Value> {
        self.runtime_config.as_ref()
    }

    /// `/run/netns/NAME` of the pod.
    pub fn netns_path(&self) -> &Path {
        self.netns.path()
    }

    /// The pod's netns name.
    pub fn netns_name(&self) -> &str {
        self.netns.name()
    }

    /// The container id the CNI operations use.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// Whether the pod has the result of a successful ADD (and no DEL since).
    pub fn has_prev_result(&self) -> bool {
        self.prev_result.lock().is_ok_and(|slot| slot.is_some())
    }

    /// The IPv4 address of the pod's last ADD result.
    pub fn prev_ip(&self) -> Option<std::net::Ipv4Addr> {
        self.prev_result()
            .as_ref()
            .and_then(super::exec::first_ipv4)
    }

    pub(crate) fn set_prev_result(&self, result: Option<serde_json::Value>) {
        if let Ok(mut slot) = self.prev_result.lock() {
            *slot = result;
        }
    }

    pub(crate) fn prev_result(&self) -> Option<serde_json::Value> {
        self.prev_result.lock().ok().and_then(|slot| slot.clone())
    }
}
