//! TCP throughput with iperf3: a one-shot server (`-s -1`) in the server
//! pod's netns, a client (`-c … -J`, one stream) in the client pod's netns,
//! the machine's CPU sampled around the client's run.

use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use procfs::net::TcpState;
use serde::{Deserialize, Serialize};

use super::cpu::{self, CpuUsage, Pinning};
use super::netns;
use super::paths::Endpoints;
use crate::BenchError;

/// The TCP port the servers listen on (each path has its own netns; a
/// Service path's ClusterIP maps the same port).
pub const PORT: u16 = 5201;

/// What the benchmark reads from iperf3's JSON report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IperfReport {
    /// Received bits per second (`end.sum_received.bits_per_second`).
    pub bits_per_second: f64,
    /// Bytes received.
    pub bytes: u64,
    /// Seconds the receiver measured over.
    pub seconds: f64,
    /// TCP retransmissions of the sender, when reported.
    pub retransmits: Option<u64>,
    /// iperf3's own CPU use of the client process, percent of one CPU.
    pub client_cpu_percent: Option<f64>,
    /// iperf3's own CPU use of the server process, percent of one CPU.
    pub server_cpu_percent: Option<f64>,
}

/// Parses `iperf3 -J` output; an `"error"` member or missing totals are an
/// error carrying iperf3's message.
pub fn parse_report(json: &str) -> Result<IperfReport, BenchError> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|source| BenchError::Json {
        what: "iperf3 JSON".into(),
        source,
    })?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(BenchError::Parse {
            what: "iperf3 run",
            detail: err.to_owned(),
        });
    }
    let end = &v["end"];
    let received = &end["sum_received"];
    let missing = |field: &str| BenchError::Parse {
        what: "iperf3 JSON",
        detail: format!("no end.sum_received.{field}"),
    };
    let cpu = &end["cpu_utilization_percent"];
    Ok(IperfReport {
        bits_per_second: received["bits_per_second"]
            .as_f64()
            .ok_or_else(|| missing("bits_per_second"))?,
        bytes: received["bytes"].as_u64().ok_or_else(|| missing("bytes"))?,
        seconds: received["seconds"]
            .as_f64()
            .ok_or_else(|| missing("seconds"))?,
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
        client_cpu_percent: cpu["host_total"].as_f64(),
        server_cpu_percent: cpu["remote_total"].as_f64(),
    })
}

/// Whether the process `pid` sees a TCP socket in LISTEN state on `port` in
/// its network namespace (`/proc/<pid>/net/tcp` and `tcp6`).
pub fn listens(pid: u32, port: u16) -> bool {
    let Ok(process) = crate::node::process(pid) else {
        return false;
    };
    // `/proc/PID/net/tcp` lists IPv4 sockets only, `tcp6` the IPv6 ones.
    [process.tcp(), process.tcp6()].into_iter().any(|sockets| {
        sockets.is_ok_and(|sockets| {
            sockets
                .iter()
                .any(|s| s.state == TcpState::Listen && s.local_address.port() == port)
        })
    })
}

/// One throughput measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IperfRun {
    /// What iperf3 reported.
    pub report: IperfReport,
    /// Machine CPU from just before the client started to just after it exited.
    pub cpu: Option<CpuUsage>,
    /// Attempts it took (a failed run is retried once).
    pub attempts: u32,
}

impl IperfRun {
    /// Received Gbit/s.
    pub fn gbits_per_second(&self) -> f64 {
        self.report.bits_per_second / 1e9
    }

    /// Busy CPU-seconds (whole machine) per Gbit received.
    pub fn cpu_seconds_per_gbit(&self) -> Option<f64> {
        let cpu = self.cpu?;
        let gbit = self.report.bytes as f64 * 8.0 / 1e9;
        (gbit > 0.0).then(|| cpu.busy_seconds / gbit)
    }

    /// CPU-seconds of the two iperf3 processes (as iperf3 reports them) per
    /// Gbit received: immune to other load on the machine.
    pub fn process_cpu_seconds_per_gbit(&self) -> Option<f64> {
        let r = &self.report;
        let percent = r.client_cpu_percent? + r.server_cpu_percent?;
        let gbit = r.bytes as f64 * 8.0 / 1e9;
        (gbit > 0.0).then(|| percent / 100.0 * r.seconds / gbit)
    }
}

/// Starts the one-shot server in `server_ns` and waits until it listens.
fn start_server(
    server_ns: &Path,
    server_ip: IpAddr,
    cpu: Option<usize>,
) -> Result<std::process::Child, BenchError> {
    let mut cmd = Command::new("iperf3");
    let ip = server_ip.to_string();
    cmd.args(["-s", "-1", "-B", &ip, "-p", &PORT.to_string()]);
    if let Some(cpu) = cpu {
        cmd.args(["-A", &cpu.to_string()]);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    netns::command_in(server_ns, &mut cmd)?;
    let mut child = cmd
        .spawn()
        .map_err(|source| BenchError::io("spawn", "iperf3", source))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if listens(child.id(), PORT) {
            return Ok(child);
        }
        if Instant::now() >= deadline || matches!(child.try_wait(), Ok(Some(_))) {
            netns::stop(&mut child);
            return Err(BenchError::Command {
                command: format!("iperf3 -s -B {server_ip}"),
                status: "not listening after 5 s".into(),
                stderr: String::new(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn attempt(
    e: &Endpoints,
    duration: Duration,
    pinning: Option<Pinning>,
) -> Result<(IperfReport, Option<CpuUsage>), BenchError> {
    let server_ip = e.server_ip;
    let mut server = start_server(&e.server_ns, server_ip, pinning.map(|p| p.server))?;
    let secs = duration.as_secs().max(1).to_string();
    let mut cmd = Command::new("iperf3");
    cmd.args(["-c", &e.dial_ip().to_string(), "-p", &PORT.to_string()])
        .args(["-t", &secs, "-J", "--connect-timeout", "3000"]);
    if let Some(p) = pinning {
        // Client side only: `-A n,m` would also move the server.
        cmd.args(["-A", &p.client.to_string()]);
    }
    let result = netns::command_in(&e.client_ns, &mut cmd).and_then(|()| {
        let timeout = duration + Duration::from_secs(15);
        cpu::measure(|| netns::output_timeout(&mut cmd, timeout))
    });
    netns::stop(&mut server);
    let (out, cpu) = result?;
    let report = parse_report(&out.stdout);
    match (out.status, report) {
        (Some(status), Ok(report)) if status.success() => Ok((report, cpu)),
        (status, report) => Err(BenchError::Command {
            command: format!("iperf3 -c {} -t {secs} -J", e.dial_ip()),
            status: status.map_or("timed out".into(), |s| s.to_string()),
            stderr: match report {
                Err(e) => format!("{}; {}", sarena_core::error_chain(&e), out.stderr.trim()),
                Ok(_) => out.stderr.trim().to_owned(),
            },
        }),
    }
}

/// Measures TCP throughput from the client to the server of `e` for
/// `duration` (whole seconds), client and server pinned as `pinning` says,
/// retrying a failed run once.
pub fn measure(
    e: &Endpoints,
    duration: Duration,
    pinning: Option<Pinning>,
) -> Result<IperfRun, BenchError> {
    match attempt(e, duration, pinning) {
        Ok((report, cpu)) => Ok(IperfRun {
            report,
            cpu,
            attempts: 1,
        }),
        Err(first) => {
            let ip = e.dial_ip();
            eprintln!("sarena-bench: iperf3 to {ip} failed, retrying once: {first}");
            let (report, cpu) = attempt(e, duration, pinning)?;
            Ok(IperfRun {
                report,
                cpu,
                attempts: 2,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_totals_are_read() {
        let json = r#"{"start":{},"intervals":[],"end":{
            "sum_sent":{"bytes":3664773120,"seconds":1.0001,"bits_per_second":2.9e10,"retransmits":3},
            "sum_received":{"bytes":3664773120,"seconds":1.00015,"bits_per_second":29313787891.8},
            "cpu_utilization_percent":{"host_total":98.7,"remote_total":74.5}}}"#;
        let r = parse_report(json).unwrap();
        assert_eq!(r.bytes, 3_664_773_120);
        assert!((r.bits_per_second - 29_313_787_891.8).abs() < 1.0);
        assert!((r.seconds - 1.00015).abs() < 1e-9);
        assert_eq!(r.retransmits, Some(3));
        assert_eq!(r.client_cpu_percent, Some(98.7));
        assert_eq!(r.server_cpu_percent, Some(74.5));
    }

    #[test]
    fn an_iperf_error_or_missing_totals_is_an_error() {
        let e = parse_report(
            r#"{"start":{},"error":"unable to connect to server: Connection refused"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("Connection refused"), "{e}");
        let e = parse_report(r#"{"end":{"sum_received":{"bytes":1}}}"#).unwrap_err();
        assert!(e.to_string().contains("bits_per_second"), "{e}");
        assert!(parse_report("not json").is_err());
    }

    #[test]
    fn listening_socket_is_found_by_port_and_state() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listens(std::process::id(), port));
        // Connected, not listening.
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let client_port = client.local_addr().unwrap().port();
        assert!(!listens(std::process::id(), client_port));
        drop(listener);
        assert!(!listens(std::process::id(), port));
    }

    #[test]
    fn cpu_cost_per_gbit() {
        let run = IperfRun {
            report: IperfReport {
                bits_per_second: 20e9,
                bytes: 12_500_000_000,
                seconds: 5.0,
                retransmits: None,
                client_cpu_percent: Some(100.0),
                server_cpu_percent: Some(60.0),
            },
            cpu: Some(CpuUsage {
                busy_seconds: 10.0,
                busy_percent: 100.0,
                steal_percent: 0.0,
            }),
            attempts: 1,
        };
        assert!((run.gbits_per_second() - 20.0).abs() < 1e-9);
        // 12.5 GB = 100 Gbit moved with 10 CPU-seconds.
        assert!((run.cpu_seconds_per_gbit().unwrap() - 0.1).abs() < 1e-9);
        // The processes: 1.6 CPUs for 5 s = 8 CPU-seconds for 100 Gbit.
        assert!((run.process_cpu_seconds_per_gbit().unwrap() - 0.08).abs() < 1e-9);
    }
}
