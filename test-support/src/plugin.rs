//! The real `sarena-cni` plugin run as a runtime runs it: a fresh process,
//! `CNI_*` variables, the network config on stdin.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sarena_core::api::Attachment;

use crate::binaries::workspace_binary;
use crate::command::output_with_stdin;

/// What one plugin run printed.
#[derive(Debug, Clone)]
pub struct CniRun {
    /// Exit status 0.
    pub ok: bool,
    /// stdout (the result or the error JSON).
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

impl CniRun {
    /// stdout as JSON; panics with the whole run when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// Panics with the whole run unless it succeeded; returns `self`.
    pub fn expect_ok(self, what: &str) -> Self {
        assert!(self.ok, "{what} failed: {self:?}");
        self
    }

    /// The CNI error code of a failed run.
    pub fn code(&self) -> Option<u64> {
        serde_json::from_str::<serde_json::Value>(&self.stdout)
            .ok()?
            .get("code")?
            .as_u64()
    }
}

/// `sarena-cni` configured for one daemon: its socket, and a log file and
/// deletion queue in `dir`.
#[derive(Debug, Clone)]
pub struct Cni {
    binary: PathBuf,
    conf: serde_json::Value,
    queue: PathBuf,
    netns: Option<String>,
}

impl Cni {
    /// The plugin talking to the daemon at `socket`, logging and queueing
    /// under `dir`.
    pub fn new(socket: &Path, dir: &Path) -> Cni {
        let queue = dir.join("delete-queue");
        let conf = serde_json::json!({
            "cniVersion": "1.1.0",
            "name": "sarena",
            "type": "sarena-cni",
            "daemon-endpoint": socket,
            "log-file": dir.join("sarena-cni.log"),
            "delete-queue-dir": queue,
        });
        Cni {
            binary: workspace_binary("sarena-cni"),
            conf,
            queue,
            netns: None,
        }
    }

    /// The same plugin run inside the network namespace `name` (`ip netns
    /// exec`), the netns playing the host of a daemon started with
    /// `Site::in_netns`: the pods' host veths land there.
    pub fn in_netns(mut self, name: &str) -> Cni {
        self.netns = Some(name.to_owned());
        self
    }

    /// The plugin's deletion queue directory.
    pub fn queue_dir(&self) -> &Path {
        &self.queue
    }

    /// The command for `command` on `att` in `netns`, its config extended
    /// with `extra` (e.g. `prevResult`, `cni.dev/valid-attachments`).
    fn command(&self, command: &str, att: &Attachment, netns: Option<&Path>) -> Command {
        let mut cmd = match &self.netns {
            Some(netns) => {
                let mut ip = Command::new("ip");
                ip.args(["netns", "exec", netns]).arg(&self.binary);
                ip
            }
            None => Command::new(&self.binary),
        };
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", &att.container_id)
            .env("CNI_IFNAME", &att.ifname)
            .env("CNI_PATH", self.binary.parent().unwrap_or(Path::new("/")))
            .env(
                "CNI_ARGS",
                format!(
                    "K8S_POD_NAMESPACE=default;K8S_POD_NAME={}",
                    att.container_id
                ),
            );
        if let Some(netns) = netns {
            cmd.env("CNI_NETNS", netns);
        }
        cmd
    }

    fn conf_with(&self, extra: &serde_json::Value) -> Vec<u8> {
        let mut conf = self.conf.clone();
        if let (Some(conf), Some(extra)) = (conf.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                conf.insert(k.clone(), v.clone());
            }
        }
        conf.to_string().into_bytes()
    }

    /// Runs `command` to completion.
    pub fn run(
        &self,
        command: &str,
        att: &Attachment,
        netns: Option<&Path>,
        extra: &serde_json::Value,
    ) -> CniRun {
        let out = output_with_stdin(
            &mut self.command(command, att, netns),
            &self.conf_with(extra),
        );
        CniRun {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// ADD.
    pub fn add(&self, att: &Attachment, netns: &Path) -> CniRun {
        self.run("ADD", att, Some(netns), &serde_json::json!({}))
    }

    /// DEL (with the netns, as kubelet passes it while the pod exists).
    pub fn del(&self, att: &Attachment, netns: Option<&Path>) -> CniRun {
        self.run("DEL", att, netns, &serde_json::json!({}))
    }

    /// CHECK against `prev_result` (an ADD's output).
    pub fn check(&self, att: &Attachment, netns: &Path, prev_result: &serde_json::Value) -> CniRun {
        self.run(
            "CHECK",
            att,
            Some(netns),
            &serde_json::json!({ "prevResult": prev_result }),
        )
    }

    /// GC keeping `valid`.
    pub fn gc(&self, valid: &[Attachment]) -> CniRun {
        let valid: Vec<_> = valid
            .iter()
            .map(|a| serde_json::json!({"containerID": a.container_id, "ifname": a.ifname}))
            .collect();
        let any = Attachment {
            container_id: "gc".into(),
            ifname: "eth0".into(),
        };
        self.run(
            "GC",
            &any,
            None,
            &serde_json::json!({ "cni.dev/valid-attachments": valid }),
        )
    }

    /// Starts `command` without waiting (to kill it mid-way); its config is
    /// already written to its stdin, which is closed.
    pub fn spawn(&self, command: &str, att: &Attachment, netns: Option<&Path>) -> Child {
        use std::io::Write;
        let mut child = self
            .command(command, att, netns)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        let conf = self.conf_with(&serde_json::json!({}));
        let _ = child.stdin.take().map(|mut stdin| stdin.write_all(&conf));
        child
    }
}
