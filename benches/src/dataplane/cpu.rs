//! CPU accounting from `/proc/stat`: the machine's busy time (all CPUs:
//! user + nice + system + irq + softirq) over a measurement, so that a path's
//! cost shows even when its throughput is capped by the 2 CPUs.

use serde::{Deserialize, Serialize};

use super::DataplaneError;

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    /// Every field of the line (busy, idle, iowait, steal; guest time is
    /// already part of user/nice and not added twice).
    pub total: u64,
    /// Time stolen by the hypervisor.
    pub steal: u64,
}

/// Parses the aggregate `cpu ` line of `/proc/stat` text.
pub fn parse_proc_stat(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    if fields.len() < 8 {
        return None;
    }
    let busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6];
    let total = fields[..8].iter().sum();
    Some(CpuTicks {
        busy,
        total,
        steal: fields[7],
    })
}

/// The number of CPUs `/proc/stat` lists (`cpuN` lines).
pub fn parse_cpu_count(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count()
}

/// Reads `/proc/stat` now.
pub fn sample() -> Result<CpuTicks, DataplaneError> {
    let path = "/proc/stat";
    let text = std::fs::read_to_string(path).map_err(|source| DataplaneError::Io {
        action: "read",
        path: path.into(),
        source,
    })?;
    parse_proc_stat(&text).ok_or(DataplaneError::Parse {
        what: "/proc/stat cpu line",
        detail: text.lines().next().unwrap_or_default().to_owned(),
    })
}

/// Clock ticks per second (USER_HZ).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// CPU used by the whole machine between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Busy CPU-seconds (all CPUs) in the window.
    pub busy_seconds: f64,
    /// Busy share of all CPUs' time in the window, in percent (100 = every
    /// CPU busy all the time).
    pub busy_percent: f64,
    /// Share of the window stolen by the hypervisor, in percent.
    pub steal_percent: f64,
}

impl CpuUsage {
    /// The usage between `before` and `after` at `hz` ticks per second;
    /// `None` when no tick passed.
    pub fn between(before: CpuTicks, after: CpuTicks, hz: f64) -> Option<CpuUsage> {
        let total = after.total.checked_sub(before.total)?;
        let busy = after.busy.checked_sub(before.busy)?;
        let steal = after.steal.checked_sub(before.steal)?;
        if total == 0 {
            return None;
        }
        Some(CpuUsage {
            busy_seconds: busy as f64 / hz,
            busy_percent: 100.0 * busy as f64 / total as f64,
            steal_percent: 100.0 * steal as f64 / total as f64,
        })
    }
}

/// Samples `/proc/stat` around `f` and returns its value with the usage.
pub fn measure<T>(
    f: impl FnOnce() -> Result<T, DataplaneError>,
) -> Result<(T, Option<CpuUsage>), DataplaneError> {
    let before = sample()?;
    let value = f()?;
    let after = sample()?;
    Ok((value, CpuUsage::between(before, after, ticks_per_second())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 1000 20 3 7 15 40 0\n\
                        cpu0 50 2 25 500 10 1 3 7 20 0\n\
                        cpu1 50 3 25 500 10 2 4 8 20 0\n\
                        intr 12345\n";

    #[test]
    fn busy_is_user_nice_system_irq_softirq_and_total_excludes_guest() {
        let t = parse_proc_stat(STAT).unwrap();
        assert_eq!(t.busy, 100 + 5 + 50 + 3 + 7);
        assert_eq!(t.total, 100 + 5 + 50 + 1000 + 20 + 3 + 7 + 15);
        assert_eq!(t.steal, 15);
        assert_eq!(parse_cpu_count(STAT), 2);
    }

    #[test]
    fn malformed_stat_is_none() {
        assert_eq!(parse_proc_stat("cpu0 1 2 3\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 x 4 5 6 7 8\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 3 4 5 6 7\n"), None);
    }

    #[test]
    fn usage_between_samples() {
        let before = CpuTicks {
            busy: 100,
            total: 1000,
            steal: 0,
        };
        let after = CpuTicks {
            busy: 250,
            total: 1200,
            steal: 10,
        };
        let u = CpuUsage::between(before, after, 100.0).unwrap();
        assert!((u.busy_seconds - 1.5).abs() < 1e-9);
        assert!((u.busy_percent - 75.0).abs() < 1e-9);
        assert!((u.steal_percent - 5.0).abs() < 1e-9);
        assert_eq!(CpuUsage::between(before, before, 100.0), None);
        assert_eq!(CpuUsage::between(after, before, 100.0), None);
    }

    #[test]
    fn the_real_proc_stat_parses() {
        let text = std::fs::read_to_string("/proc/stat").unwrap();
        let t = parse_proc_stat(&text).unwrap();
        assert!(t.total >= t.busy);
        assert!(parse_cpu_count(&text) >= 1);
    }
}
