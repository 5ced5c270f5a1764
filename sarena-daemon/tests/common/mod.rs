//! Harness for tests that run the real `sarena-daemon` binary: a unique temp
//! directory per daemon (socket, state, config, log), a guard that SIGKILLs the
//! child if a test fails, and a raw HTTP/1.1 helper for malformed requests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use sarena_core::api::{AllocateRequest, Attachment, Daemon, HttpDaemon, PodRef};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

pub const BIN: &str = env!("CARGO_BIN_EXE_sarena-daemon");

/// A config with a small pool, for exhaustion tests: a /29 has 8 addresses; minus
/// network, broadcast and gateway, 5 can be handed out.
pub const SMALL_POOL: &str = r#"
mtu = 1400
[[ipam.pools]]
name = "tiny"
cidrs = ["10.77.0.0/29"]
"#;

/// A temp directory holding one daemon's socket, state, config and log.
pub struct Site {
    pub dir: tempfile::TempDir,
    socket: Option<PathBuf>,
}

impl Site {
    pub fn new() -> Site {
        let dir = tempfile::Builder::new()
            .prefix("sarena-d")
            .tempdir()
            .unwrap();
        Site { dir, socket: None }
    }

    /// A site of its own that serves on `socket` (someone else's).
    pub fn with_socket(socket: PathBuf) -> Site {
        Site {
            socket: Some(socket),
            ..Site::new()
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| self.dir.path().join("run/sarena.sock"))
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn log(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }

    /// Writes `toml` as the config file and returns its path. Unless `toml`
    /// says otherwise, the daemon runs with `dataplane = "none"`: these tests
    /// are about the API and the state, not forwarding, and must not touch
    /// the host's network.
    pub fn config(&self, toml: &str) -> PathBuf {
        self.write_config("config.toml", toml)
    }

    fn write_config(&self, name: &str, toml: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let text = if toml.contains("dataplane") {
            toml.to_string()
        } else {
            format!("dataplane = \"none\"\n{toml}")
        };
        fs::write(&path, text).unwrap();
        path
    }

    pub fn client(&self) -> HttpDaemon {
        HttpDaemon::new(self.socket().to_str().unwrap()).unwrap()
    }

    /// The daemon's arguments for this site plus `extra`.
    fn command(&self, extra: &[&str]) -> Command {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .unwrap();
        let mut cmd = Command::new(BIN);
        if !extra.contains(&"--config") {
            cmd.arg("--config")
                .arg(self.write_config("default.toml", ""));
        }
        cmd.arg("--socket")
            .arg(self.socket())
            .arg("--state-dir")
            .arg(self.state_dir())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        cmd
    }

    /// Starts the daemon and waits until it answers `GET /daemon/health`.
    pub async fn start(&self, extra: &[&str]) -> Running {
        let child = self.command(extra).spawn().unwrap();
        let mut running = Running {
            child: Some(child),
            log: self.log(),
        };
        let client = self.client().with_timeout(Duration::from_secs(2));
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(h) = client.health().await {
                assert!(h.ready, "{h:?}");
                return running;
            }
            if let Some(status) = running.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "daemon exited with {status} during start-up:\n{}",
                    running.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "daemon not ready in time:\n{}",
                running.log_text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Runs the daemon expecting it to fail at start-up; returns its status and log.
    pub fn start_failing(&self, extra: &[&str]) -> (ExitStatus, String) {
        let mut child = self.command(extra).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status, fs::read_to_string(self.log()).unwrap_or_default());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "daemon did not fail:\n{}",
                    fs::read_to_string(self.log()).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A running daemon; SIGKILLed and reaped on drop.
pub struct Running {
    child: Option<Child>,
    log: PathBuf,
}

impl Running {
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().unwrap().id()).unwrap()
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Sends `signal` and waits (bounded) for the exit status.
    pub fn signal_and_wait(mut self, signal: i32) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(i32::try_from(child.id()).unwrap(), signal) };
        assert_eq!(rc, 0);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("daemon ignored signal {signal}:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("--- daemon log ---\n{}", self.log_text());
            }
        }
    }
}

pub fn owner(cid: &str) -> Attachment {
    Attachment {
        container_id: cid.into(),
        ifname: "eth0".into(),
    }
}

pub fn alloc_req(cid: &str) -> AllocateRequest {
    AllocateRequest {
        owner: owner(cid),
        pod: PodRef::default(),
        requested: vec![],
        pool: None,
    }
}

/// An HTTP answer read off the wire.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl RawAnswer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// Asserts an error answer of `status` and `kind` whose message contains `needle`.
    pub fn assert_error(&self, status: u16, kind: &str, needle: &str) {
        assert_eq!(self.status, status, "{self:?}");
        let v = self.json();
        assert_eq!(v["kind"], kind, "{self:?}");
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{msg:?} should contain {needle:?}");
    }
}

/// Sends `head` (request line and headers, without the blank line) and `body`
/// over a fresh connection with `Connection: close`; reads the whole answer.
pub async fn raw(socket: &Path, head: &str, body: &[u8]) -> RawAnswer {
    let mut request = format!("{head}\r\nHost: sarena\r\nConnection: close\r\n\r\n").into_bytes();
    request.extend_from_slice(body);
    raw_bytes(socket, request).await
}

/// Writes `request` verbatim (from a separate task, so a server that answers
/// before reading everything cannot deadlock the test) and reads until EOF.
pub async fn raw_bytes(socket: &Path, request: Vec<u8>) -> RawAnswer {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&request).await;
        wr
    });
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), rd.read_to_end(&mut buf))
        .await
        .expect("daemon did not answer")
        .unwrap();
    drop(writer.await);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    RawAnswer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
