//! One daemon's private site, and the running daemon.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use sarena_core::api::{Daemon, HttpDaemon};

use crate::binaries::workspace_binary;

/// A temp directory holding one daemon's socket, state, config and log.
#[derive(Debug)]
pub struct Site {
    /// The directory (removed on drop).
    pub dir: tempfile::TempDir,
    socket: Option<PathBuf>,
    state: Option<PathBuf>,
    netns: Option<String>,
}

impl Site {
    /// A new site in a unique temp directory.
    #[allow(clippy::new_without_default)] // creates a directory
    pub fn new() -> Site {
        let dir = tempfile::Builder::new()
            .prefix("sarena-d")
            .tempdir()
            .unwrap();
        Site {
            dir,
            socket: None,
            state: None,
            netns: None,
        }
    }

    /// The same site, its daemon started inside the network namespace
    /// `name` (`ip netns exec`): a throwaway netns plays the host, so the
    /// daemon's dataplane never touches the real one. Its bpffs is a private
    /// instance at /sys/fs/bpf (its pins go with the daemon).
    pub fn in_netns(mut self, name: &str) -> Site {
        self.netns = Some(name.to_owned());
        self
    }

    /// A site of its own that serves on `socket` (someone else's).
    pub fn with_socket(socket: PathBuf) -> Site {
        Site {
            socket: Some(socket),
            ..Site::new()
        }
    }

    /// A site of its own (socket, config, log) whose daemon uses `state_dir`
    /// (someone else's).
    pub fn with_state_dir(state_dir: PathBuf) -> Site {
        Site {
            state: Some(state_dir),
            ..Site::new()
        }
    }

    /// The socket the daemon serves on.
    pub fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| self.dir.path().join("run/sarena.sock"))
    }

    /// The daemon's `--state-dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.state
            .clone()
            .unwrap_or_else(|| self.dir.path().join("state"))
    }

    /// Where the daemon's stderr goes.
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

    /// A client of this site's socket.
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
        let daemon = workspace_binary("sarena-daemon");
        let mut cmd = match &self.netns {
            Some(netns) => {
                // `ip netns exec` mounts a sysfs of the netns over /sys, which
                // hides the host's bpffs: the daemon gets a private one.
                let mut ip = Command::new("ip");
                ip.args(["netns", "exec", netns, "sh", "-c"])
                    .arg("mount -t bpf bpf /sys/fs/bpf && exec \"$0\" \"$@\"")
                    .arg(daemon);
                ip
            }
            None => Command::new(daemon),
        };
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
        self.start_with_env(extra, &[]).await
    }

    /// [`Site::start`] with `env` added to the daemon's environment.
    pub async fn start_with_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Running {
        let child = self
            .command(extra)
            .envs(env.iter().copied())
            .spawn()
            .unwrap();
        self.wait_ready(child).await
    }

    /// Waits until the daemon `child` answers `GET /daemon/health`, ready.
    async fn wait_ready(&self, child: Child) -> Running {
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

/// A running daemon; SIGKILLed and reaped on drop (its log printed when the
/// test is failing).
#[derive(Debug)]
pub struct Running {
    child: Option<Child>,
    log: PathBuf,
}

impl Running {
    /// The daemon's pid.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().unwrap().id()).unwrap()
    }

    /// The daemon's log so far.
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
