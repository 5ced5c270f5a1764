//! Running a CNI plugin exactly as a runtime does: a fresh process, env cleared but
//! for the CNI variables, config on stdin, result (or error) on stdout, exit code.
//! The child starts in the node's netns: the calling thread enters it for the spawn
//! and returns to its own afterwards (network namespaces are per thread), so the
//! spawn is a `posix_spawn` (the child shares the harness's memory until it execs),
//! as a runtime's fork/exec is, rather than a fork that copies the harness's page
//! tables (with 100 threads spawning at once, that copy was a sizeable part of a
//! churn round's CPU, for every contender alike).
//!
//! Peak RSS: a child's `ru_maxrss` includes the RSS of the process that forked it
//! (the copied address space's high-water mark survives exec), so the rusage of a
//! child of the harness would report the harness's size. A run with `rss_file` set
//! therefore goes through GNU time (`/usr/bin/time -f %M`), a small C program whose
//! own child is the plugin: its figure is the plugin's peak with a floor of time's
//! own size (see [`rss_floor_kib`]). Those runs are not timed for latency.
//!
//! CPU: each plugin is reaped with `wait4`, whose rusage is the plugin's own
//! user and system time, with that of the children it reaped (ptp's
//! host-local): [`PluginRun::cpu`].

use std::fs::File;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::BenchError;

/// One plugin execution.
#[derive(Debug, Clone)]
pub struct PluginRun {
    /// Wall time from spawn to reaped.
    pub elapsed: Duration,
    /// The plugin's exit status.
    pub status: ExitStatus,
    /// Everything the plugin wrote on stdout.
    pub stdout: String,
    /// The plugin's peak resident set, KiB: only for runs made with `rss_file`
    /// (through GNU time; see the module doc).
    pub max_rss_kib: Option<u64>,
    /// The first IPv4 address of an ADD result.
    pub ip: Option<Ipv4Addr>,
    /// The parsed stdout, if it was JSON.
    pub json: Option<serde_json::Value>,
    /// `CLOCK_MONOTONIC` just before the spawn, ns (the clock the plugin's
    /// phases are on).
    pub spawn_ns: u64,
    /// `CLOCK_MONOTONIC` once the child was reaped, ns.
    pub reaped_ns: u64,
    /// The plugin's CPU time, user and system, with its reaped children's
    /// (`wait4`'s rusage); `None` when the rusage could not be read.
    pub cpu: Option<Duration>,
}

impl PluginRun {
    /// Exit code 0.
    pub fn ok(&self) -> bool {
        self.status.success()
    }

    /// A one-line description of a failure: the CNI error's code and msg, or the
    /// exit status and raw stdout.
    pub fn error_text(&self) -> String {
        if let Some(json) = &self.json
            && let Some(code) = json.get("code")
        {
            let msg = json.get("msg").and_then(|m| m.as_str()).unwrap_or("");
            let details = json.get("details").and_then(|m| m.as_str()).unwrap_or("");
            return format!("CNI error {code}: {msg} {details}")
                .trim()
                .to_string();
        }
        format!("{}: {}", self.status, self.stdout.trim())
    }
}

/// What to run: the plugin binary, its env and stdin.
#[derive(Debug)]
pub struct Invocation<'a> {
    pub plugin: &'a Path,
    pub cni_path: &'a str,
    pub command: &'a str,
    pub container_id: &'a str,
    pub netns: &'a str,
    pub ifname: &'a str,
    pub args: &'a str,
    pub stdin: &'a [u8],
    /// Measure the peak RSS through GNU time, which writes it to this file.
    pub rss_file: Option<&'a Path>,
    /// Have `sarena-cni` append its phases to this file (`SARENA_CNI_PHASES`).
    pub phases_file: Option<&'a Path>,
}

/// The variable naming the file `sarena-cni` appends its phases to.
pub const PHASES_ENV: &str = "SARENA_CNI_PHASES";

/// `CLOCK_MONOTONIC`, ns: the clock of the plugin's phases.
pub fn now_ns() -> u64 {
    sarena_core::phases::now_ns()
}

/// GNU time, which measures the plugin's peak RSS.
pub const GNU_TIME: &str = "/usr/bin/time";

/// Runs `inv` with the process entering `netns` before exec; stderr goes to `stderr`.
pub fn run_plugin(
    inv: &Invocation<'_>,
    netns: &File,
    stderr: &File,
) -> Result<PluginRun, BenchError> {
    let stderr = stderr
        .try_clone()
        .map_err(|source| BenchError::io("dup", "plugin stderr log", source))?;
    let mut cmd = match inv.rss_file {
        Some(file) => {
            let mut c = Command::new(GNU_TIME);
            c.arg("-f").arg("%M").arg("-o").arg(file).arg(inv.plugin);
            c
        }
        None => Command::new(inv.plugin),
    };
    cmd.env_clear()
        .env("CNI_COMMAND", inv.command)
        .env("CNI_CONTAINERID", inv.container_id)
        .env("CNI_NETNS", inv.netns)
        .env("CNI_IFNAME", inv.ifname)
        .env("CNI_ARGS", inv.args)
        .env("CNI_PATH", inv.cni_path)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr));
    if let Some(file) = inv.phases_file {
        cmd.env(PHASES_ENV, file);
    }
    let inside = super::netns::ThreadIn::enter(netns)?;
    let spawn_ns = now_ns();
    let start = Instant::now();
    let spawned = cmd.spawn();
    inside.leave()?;
    let mut child = spawned.map_err(|source| BenchError::io("spawn plugin", inv.plugin, source))?;
    let mut stdout = String::new();
    let io_result = (|| -> std::io::Result<()> {
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(inv.stdin)?;
        }
        if let Some(mut out) = child.stdout.take() {
            out.read_to_string(&mut stdout)?;
        }
        Ok(())
    })();
    let (status, cpu) =
        reap(&mut child).map_err(|source| BenchError::io("wait for", inv.plugin, source))?;
    let elapsed = start.elapsed();
    let reaped_ns = now_ns();
    // A plugin that exits without reading its stdin gives EPIPE: its exit status tells.
    if let Err(e) = io_result
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(BenchError::io("plugin stdio", inv.plugin, e));
    }
    let json: Option<serde_json::Value> = serde_json::from_str(stdout.trim()).ok();
    let ip = json.as_ref().and_then(first_ipv4);
    Ok(PluginRun {
        elapsed,
        status,
        stdout,
        max_rss_kib: inv.rss_file.and_then(read_rss_file),
        ip,
        json,
        spawn_ns,
        reaped_ns,
        cpu,
    })
}

/// Waits for `child` with `wait4`: its exit status and its CPU time (user
/// and system, with its reaped children's). Falls back to `Child::wait`
/// (and no CPU time) when the pid does not fit.
fn reap(child: &mut Child) -> std::io::Result<(ExitStatus, Option<Duration>)> {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return child.wait().map(|s| (s, None));
    };
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes for the call;
        // `pid` is our own unreaped child (std never reaps it behind us).
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let time = |t: libc::timeval| {
        let secs = u64::try_from(t.tv_sec).ok()?;
        let micros = u64::try_from(t.tv_usec).ok()?;
        Some(Duration::from_secs(secs) + Duration::from_micros(micros))
    };
    let cpu = time(usage.ru_utime)
        .zip(time(usage.ru_stime))
        .map(|(u, s)| u + s);
    Ok((ExitStatus::from_raw(status), cpu))
}

/// The KiB figure GNU time wrote (last line; earlier lines may be its notes such
/// as "Command exited with non-zero status"); the file is removed.
fn read_rss_file(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let _ = std::fs::remove_file(path);
    parse_time_output(&text)
}

/// The number on the last non-empty line of GNU time's `-f %M` output.
pub fn parse_time_output(text: &str) -> Option<u64> {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())?
        .trim()
        .parse()
        .ok()
}

/// GNU time's own floor: its figure for `/bin/true` (KiB).
pub fn rss_floor_kib(scratch: &Path) -> Option<u64> {
    let file = scratch.join("rss-floor.txt");
    let ok = Command::new(GNU_TIME)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&file)
        .arg("/bin/true")
        .status()
        .is_ok_and(|s| s.success());
    if ok { read_rss_file(&file) } else { None }
}

/// The first IPv6 address of a CNI result (`ips[].address`, "x:y::z/len").
pub fn first_ipv6(result: &serde_json::Value) -> Option<std::net::Ipv6Addr> {
    result
        .get("ips")?
        .as_array()?
        .iter()
        .filter_map(|ip| ip.get("address")?.as_str())
        .filter_map(|a| a.split('/').next()?.parse().ok())
        .next()
}

/// The first IPv4 address of a CNI result (`ips[].address`, "a.b.c.d/len").
pub fn first_ipv4(result: &serde_json::Value) -> Option<Ipv4Addr> {
    result
        .get("ips")?
        .as_array()?
        .iter()
        .filter_map(|ip| ip.get("address")?.as_str())
        .filter_map(|a| a.split('/').next()?.parse::<Ipv4Addr>().ok())
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_output_last_line() {
        assert_eq!(parse_time_output("5632\n"), Some(5632));
        assert_eq!(
            parse_time_output("Command exited with non-zero status 1\n7000\n\n"),
            Some(7000)
        );
        assert_eq!(parse_time_output(""), None);
    }

    #[test]
    fn first_ipv4_skips_ipv6_and_prefix() {
        let r = serde_json::json!({"ips": [
            {"address": "fd00::5/64"}, {"address": "10.1.2.3/16", "gateway": "10.1.0.1"}]});
        assert_eq!(first_ipv4(&r), Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(first_ipv4(&serde_json::json!({"code": 7})), None);
    }
}
