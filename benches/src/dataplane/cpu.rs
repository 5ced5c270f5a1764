//! CPU accounting from `/proc/stat`: the machine's busy time (all CPUs:
//! user + nice + system + irq + softirq) over a measurement, so that a path's
//! cost shows even when its throughput is capped by the 2 CPUs.

use std::time::{Duration, Instant};

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;
use procfs::{CpuTime, CurrentSI, KernelStats};
use serde::{Deserialize, Serialize};

use crate::BenchError;

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

impl From<&CpuTime> for CpuTicks {
    fn from(t: &CpuTime) -> CpuTicks {
        let (irq, softirq) = (t.irq.unwrap_or(0), t.softirq.unwrap_or(0));
        let (iowait, steal) = (t.iowait.unwrap_or(0), t.steal.unwrap_or(0));
        let busy = t.user + t.nice + t.system + irq + softirq;
        CpuTicks {
            busy,
            total: busy + t.idle + iowait + steal,
            steal,
        }
    }
}

fn kernel_stats() -> Result<KernelStats, BenchError> {
    KernelStats::current().map_err(|source| BenchError::Proc {
        what: "stat",
        source,
    })
}

/// Reads `/proc/stat` now.
pub fn sample() -> Result<CpuTicks, BenchError> {
    Ok(CpuTicks::from(&kernel_stats()?.total))
}

/// The number of CPUs `/proc/stat` lists (`cpuN` lines); 0 when unreadable.
pub fn cpu_count() -> usize {
    kernel_stats().map_or(0, |s| s.cpu_time.len())
}

/// Clock ticks per second (USER_HZ).
pub fn ticks_per_second() -> f64 {
    procfs::ticks_per_second() as f64
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
    f: impl FnOnce() -> Result<T, BenchError>,
) -> Result<(T, Option<CpuUsage>), BenchError> {
    let before = sample()?;
    let value = f()?;
    let after = sample()?;
    Ok((value, CpuUsage::between(before, after, ticks_per_second())))
}

/// CPU time this thread has used so far, seconds (`CLOCK_THREAD_CPUTIME_ID`;
/// with tick-based accounting it includes the softirq work, such as veth
/// receive processing, done while the thread ran).
pub fn thread_cpu_seconds() -> Option<f64> {
    let ts = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(ts.tv_sec() as f64 + ts.tv_nsec() as f64 / 1e9)
}

/// The CPUs this thread may run on (`sched_getaffinity`); empty if unknown.
pub fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect()
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), BenchError> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|_| BenchError::Input {
        what: format!("CPU {cpu} is out of range"),
    })?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|errno| BenchError::io("sched_setaffinity to CPU", cpu.to_string(), errno.into()))
}

/// How the machine looked when the measurements began.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settle {
    /// Seconds spent waiting for the machine to quieten.
    pub waited_seconds: f64,
    /// Busy % of all CPUs over the last one-second window.
    pub busy_percent: Option<f64>,
}

/// Waits until the machine is quiet (busy below `threshold_percent` of all
/// CPUs over a one-second window) or `max` has passed, so that work just
/// before (pod churn, daemon start-up) does not land on the first round.
pub fn settle(max: Duration, threshold_percent: f64) -> Settle {
    let start = Instant::now();
    let mut busy_percent = None;
    loop {
        let window = (|| {
            let before = sample().ok()?;
            std::thread::sleep(Duration::from_secs(1));
            let after = sample().ok()?;
            CpuUsage::between(before, after, ticks_per_second())
        })();
        busy_percent = window.map(|w| w.busy_percent).or(busy_percent);
        let quiet = busy_percent.is_none_or(|b| b < threshold_percent);
        if quiet || start.elapsed() >= max {
            return Settle {
                waited_seconds: start.elapsed().as_secs_f64(),
                busy_percent,
            };
        }
    }
}

/// Which CPU the client and the server run on (both iperf3 ends and both
/// request/response threads), so every path is measured with the same
/// placement instead of wherever the scheduler puts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinning {
    /// The client's CPU.
    pub client: usize,
    /// The server's CPU.
    pub server: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 1000 20 3 7 15 40 0\n\
                        cpu0 50 2 25 500 10 1 3 7 20 0\n\
                        cpu1 50 3 25 500 10 2 4 8 20 0\n\
                        intr 12345\nctxt 1\nbtime 1\nprocesses 1\n";

    fn parse(text: &str) -> procfs::ProcResult<KernelStats> {
        use procfs::FromReadSI;
        KernelStats::from_read(text.as_bytes(), procfs::current_system_info())
    }

    #[test]
    fn busy_is_user_nice_system_irq_softirq_and_total_excludes_guest() {
        let stats = parse(STAT).unwrap();
        let t = CpuTicks::from(&stats.total);
        assert_eq!(t.busy, 100 + 5 + 50 + 3 + 7);
        assert_eq!(t.total, 100 + 5 + 50 + 1000 + 20 + 3 + 7 + 15);
        assert_eq!(t.steal, 15);
        assert_eq!(stats.cpu_time.len(), 2);
    }

    #[test]
    fn malformed_stat_is_an_error() {
        assert!(parse("cpu0 1 2 3\nctxt 1\nbtime 1\nprocesses 1\n").is_err());
        assert!(parse("cpu  1 2 x 4 5 6 7 8\nctxt 1\nbtime 1\nprocesses 1\n").is_err());
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
    fn thread_cpu_time_grows_with_work_and_pinning_works() {
        let t = std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            let before = thread_cpu_seconds().unwrap();
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(100) {
                x = x.wrapping_add(1);
            }
            (thread_cpu_seconds().unwrap() - before, x)
        });
        let (used, _) = t.join().unwrap();
        assert!(used > 0.02 && used < 1.0, "{used}");
        // No such CPU on a test machine; out of the set's range.
        assert!(pin_current_thread(1000).is_err());
        assert!(pin_current_thread(usize::MAX).is_err());
    }

    #[test]
    fn allowed_cpus_match_the_parallelism() {
        let cpus = allowed_cpus();
        let n = std::thread::available_parallelism().map_or(0, usize::from);
        assert_eq!(cpus.len(), n, "{cpus:?}");
    }

    #[test]
    fn settle_returns_within_its_bound() {
        // A threshold nothing reaches: waits one window, then gives up.
        let s = settle(Duration::ZERO, -1.0);
        assert!(s.waited_seconds >= 0.9 && s.waited_seconds < 5.0, "{s:?}");
        assert!(
            s.busy_percent.is_some_and(|b| (0.0..=100.0).contains(&b)),
            "{s:?}"
        );
    }

    #[test]
    fn the_real_proc_stat_parses() {
        let t = sample().unwrap();
        assert!(t.total >= t.busy);
        assert!(cpu_count() >= 1);
    }
}
