//! The machine a run was made on: CPU, memory, kernel, toolchain and plugin versions.

use std::process::Command;

use serde::{Deserialize, Serialize};

/// Facts about the machine and software of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    /// UTC date and time the run started (`date -u`).
    pub date: String,
    /// CPU model name.
    pub cpu: String,
    /// Online CPUs.
    pub cores: usize,
    /// Total memory, GiB.
    pub memory_gib: f64,
    /// Kernel release.
    pub kernel: String,
    /// `rustc --version`.
    pub rustc: String,
    /// containernetworking-plugins package version.
    pub reference_plugins: String,
    /// `iperf3 --version` (first line).
    pub iperf3: String,
    /// sarena-cni's version and build profile.
    pub sarena: String,
    /// 1/5/15-minute load averages at the start.
    pub load_average: String,
    /// Hypervisor, if `systemd-detect-virt` says so.
    pub virtualization: String,
}

fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| "unknown".into())
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The CPU model from /proc/cpuinfo text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// MemTotal in GiB from /proc/meminfo text.
pub fn mem_total_gib(meminfo: &str) -> Option<f64> {
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0 / 1024.0)
}

/// Collects the facts now; `sarena_cni` is the plugin binary used.
pub fn collect(sarena_cni: Option<&std::path::Path>) -> Machine {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let rev = first_line("git", &["-C", repo, "rev-parse", "--short", "HEAD"]);
    let dirty = Command::new("git")
        .args(["-C", repo, "status", "--porcelain", "--untracked-files=no"])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty());
    let sarena = format!(
        "commit {rev}{}{}",
        if dirty {
            " (with uncommitted changes)"
        } else {
            ""
        },
        sarena_cni.map_or(String::new(), |p| format!(", binaries {}", p.display()))
    );
    Machine {
        date: first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        cpu: cpu_model(&read("/proc/cpuinfo")).unwrap_or_else(|| "unknown".into()),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: mem_total_gib(&read("/proc/meminfo")).unwrap_or(0.0),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        rustc: first_line("rustc", &["--version"]),
        reference_plugins: format!(
            "containernetworking-plugins {}",
            first_line(
                "dpkg-query",
                &["-W", "-f", "${Version}", "containernetworking-plugins"]
            )
        ),
        iperf3: first_line("iperf3", &["--version"]),
        sarena,
        load_average: read("/proc/loadavg")
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        virtualization: first_line("systemd-detect-virt", &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo_and_meminfo() {
        let cpu = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nflags\t: fpu\n";
        assert_eq!(
            cpu_model(cpu).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        assert_eq!(cpu_model("processor: 0\n"), None);
        let mem = "MemTotal:       24117248 kB\nMemFree: 1 kB\n";
        assert_eq!(mem_total_gib(mem), Some(23.0));
        assert_eq!(mem_total_gib(""), None);
    }
}
