//! The machine a run was made on: CPU, memory, kernel, toolchain and plugin versions.

use std::process::Command;

use procfs::{Current, LoadAverage, Meminfo};
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

const GIB: f64 = (1u64 << 30) as f64;

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
        cpu: procfs::CpuInfo::current()
            .ok()
            .and_then(|c| c.model_name(0).map(str::to_string))
            .unwrap_or_else(|| "unknown".into()),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_gib: Meminfo::current().map_or(0.0, |m| m.mem_total as f64 / GIB),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
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
        load_average: LoadAverage::current().map_or(String::new(), |l| {
            format!("{:.2} {:.2} {:.2}", l.one, l.five, l.fifteen)
        }),
        virtualization: first_line("systemd-detect-virt", &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_this_machine() {
        let m = collect(None);
        assert!(m.memory_gib > 0.0, "{m:?}");
        assert!(m.cores >= 1 && !m.kernel.is_empty(), "{m:?}");
        assert_eq!(m.load_average.split(' ').count(), 3, "{m:?}");
    }
}
