//! Drop events end to end on a real eBPF node: `sarena-daemon` in `ebpf`
//! mode, pods added by the real plugin, a pod sending frames it may not
//! send, and `sarena monitor -o json` (the real binary) showing each drop
//! with its fields within a second; the kept history (`--since`), the
//! node-wide series, a flood of a million spoofed frames against a daemon
//! that must stay responsive and bounded in memory with the loss counted,
//! and the stream ending when the daemon goes away.
//!
//! Privileged (root, the eBPF object): `#[ignore]`d unless included, as
//! scripts/test.sh does as root. The fixture is `ebpf_node/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sarena_test_support::daemon::{free_loopback_addr, raw_tcp};
use sarena_test_support::{in_netns, package_binary, run};
use serde_json::Value as Json;

mod ebpf_node;

use ebpf_node::{Node, Pod, SERIAL, preconditions, scrape, values};

/// An address of the pool no pod has: the spoofed source.
const SPOOFED: Ipv4Addr = Ipv4Addr::new(10, 246, 250, 250);

/// The sum of `metric`'s values whose labels include `labels` (0 without one).
fn value(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    values(scrape, metric, labels).iter().sum()
}

/// `sarena monitor` running, its stdout lines on a channel.
struct Monitor {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Monitor {
    fn start(node: &Node, args: &[&str]) -> Monitor {
        let mut child = Command::new(package_binary("sarena-cli", "sarena"))
            .arg("--socket")
            .arg(node.site.socket())
            .arg("monitor")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Monitor { child, lines }
    }

    /// The next event line within `wait`.
    fn next(&self, wait: Duration) -> Option<Json> {
        self.lines
            .recv_timeout(wait)
            .ok()
            .map(|l| serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l}: {e}")))
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the daemon counts `n` streaming clients.
async fn subscribed(metrics: SocketAddr, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while value(&scrape(metrics).await, "sarena_monitor_subscribers", &[]) != n {
        assert!(Instant::now() < deadline, "no {n} subscribers");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An IPv4/UDP frame from `src` to `dst` (port 9), broadcast at the
/// Ethernet layer (the program looks at the addresses).
fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let checksum = !((folded & 0xffff) + (folded >> 16)) as u16;
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}

/// Sends `count` copies of `frame` out of `pod`'s eth0 (AF_PACKET, from a
/// thread in its netns); the number sent.
fn send_frames(pod: &Pod, frame: Vec<u8>, count: usize) -> usize {
    send_frames_in(pod.netns.path(), frame, count)
}

/// [`send_frames`] out of the eth0 of the netns at `netns`.
fn send_frames_in(netns: std::path::PathBuf, frame: Vec<u8>, count: usize) -> usize {
    in_netns(&netns, move || {
        // SAFETY: plain socket calls on a descriptor this closure owns and
        // closes; the address is a zeroed sockaddr_ll filled in.
        unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let ifindex = libc::if_nametoindex(c"eth0".as_ptr());
            assert!(ifindex > 0);
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_ifindex = ifindex as i32;
            addr.sll_halen = 6;
            let mut sent = 0;
            for _ in 0..count {
                let n = libc::sendto(
                    fd,
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&raw const addr).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                );
                if n > 0 {
                    sent += 1;
                } else {
                    // the veth's queue is full: let it drain
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            libc::close(fd);
            sent
        }
    })
    .join()
    .unwrap()
}

/// The daemon's resident memory, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object"]
async fn drops_reach_sarena_monitor_within_a_second_and_floods_stay_bounded() {
    preconditions("drops_reach_sarena_monitor_within_a_second_and_floods_stay_bounded");
    let _serial = SERIAL.lock().await;
    let metrics = free_loopback_addr();
    let node = Node::start_with(&["--metrics-listen", &metrics.to_string()]).await;
    let (a, b) = (node.add_pod(), node.add_pod());
    assert!(a.pings(&b, 2), "pods cannot talk");

    // 1. A spoofed ping from a: the drop, with every field, within 1 s.
    let monitor = Monitor::start(&node, &["-o", "json", "--drops", "--pod", a.id()]);
    subscribed(metrics, 1.0).await;
    run(&[
        "ip",
        "netns",
        "exec",
        a.id(),
        "ip",
        "addr",
        "add",
        &format!("{SPOOFED}/32"),
        "dev",
        "eth0",
    ]);
    let sent = Instant::now();
    // spawned, not waited for: ping waits a second for the answer that
    // never comes
    let mut ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            a.id(),
            "ping",
            "-n",
            "-q",
            "-c",
            "1",
            "-W",
            "1",
        ])
        .args(["-I", &SPOOFED.to_string(), &b.ip.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let event = loop {
        let e = monitor
            .next(Duration::from_secs(1))
            .expect("no drop event within 1 s");
        if e["packet"]["protocol"] == "ICMP" {
            break e;
        }
    };
    let latency = sent.elapsed();
    let _ = ping.wait();
    assert!(latency < Duration::from_secs(1), "{latency:?}");
    assert_eq!(event["kind"], "drop", "{event}");
    assert_eq!(event["reason"], "spoofed_source", "{event}");
    assert_eq!(event["direction"], "egress", "{event}");
    // the fixture's plugin runs name pods default/<container id>
    assert_eq!(event["pod"], format!("default/{}", a.id()), "{event}");
    assert_eq!(event["namespace"], "default", "{event}");
    assert_eq!(event["packet"]["family"], "ipv4", "{event}");
    assert_eq!(event["packet"]["src"], SPOOFED.to_string(), "{event}");
    assert_eq!(event["packet"]["dst"], b.ip.to_string(), "{event}");
    assert_eq!(event["packet"]["icmp_type"], 8, "{event}");
    assert_eq!(event["peer_pod"], format!("default/{}", b.id()), "{event}");
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let age = now_ns.saturating_sub(event["time_unix_ns"].as_u64().unwrap());
    assert!(age < 5_000_000_000, "event time off by {age} ns: {event}");
    eprintln!("drop event seen by sarena monitor {latency:?} after the ping");

    // 2. A frame of an EtherType no pod may send (LLDP): its own reason.
    let mut lldp = vec![
        0x01, 0x80, 0xc2, 0, 0, 0x0e, 0x02, 0, 0, 0, 0, 1, 0x88, 0xcc,
    ];
    lldp.resize(60, 0);
    send_frames(&a, lldp, 1);
    let e = monitor
        .next(Duration::from_secs(1))
        .expect("no LLDP drop event within 1 s");
    assert_eq!(e["reason"], "unsupported_ether_type", "{e}");
    assert_eq!(e["packet"]["family"], "0x88cc", "{e}");

    // 3. The history: the same events for a client that comes later.
    let out = Command::new(package_binary("sarena-cli", "sarena"))
        .arg("--socket")
        .arg(node.site.socket())
        .args([
            "monitor",
            "-o",
            "json",
            "--since",
            "1m",
            "--no-follow",
            "--reason",
            "spoofed_source",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept = String::from_utf8(out.stdout).unwrap();
    assert!(
        kept.lines().count() >= 1 && kept.contains(&SPOOFED.to_string()),
        "{kept}"
    );
    assert!(!kept.contains("unsupported_ether_type"), "{kept}");

    // 4. The node-wide series.
    let s = scrape(metrics).await;
    let egress_spoofed = [("direction", "egress"), ("reason", "spoofed_source")];
    assert!(value(&s, "sarena_drops_total", &egress_spoofed) >= 1.0);
    assert!(value(&s, "sarena_monitor_events_total", &[("kind", "drop")]) >= 2.0);

    // 5. A million spoofed frames: the daemon answers throughout, its
    // memory stays bounded, the events beyond the limit are counted lost.
    let pid = node.daemon.as_ref().unwrap().pid();
    let rss_before = rss_kib(pid);
    let flood = udp_frame(SPOOFED, b.ip, 4000);
    let flooding = Instant::now();
    let (done_tx, done_rx) = mpsc::channel();
    let netns = a.netns.path();
    std::thread::spawn(move || {
        let _ = done_tx.send(send_frames_in(netns, flood, 1_000_000));
    });
    let mut slowest = Duration::ZERO;
    let sent = loop {
        let asked = Instant::now();
        let health = raw_tcp(metrics, "GET /metrics HTTP/1.1").await;
        assert_eq!(health.status, 200);
        slowest = slowest.max(asked.elapsed());
        if let Ok(n) = done_rx.try_recv() {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let flood_time = flooding.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = rss_kib(pid);
    let s = scrape(metrics).await;
    let lost = value(
        &s,
        "sarena_monitor_events_lost_total",
        &[("cause", "rate_limited")],
    );
    let dropped = value(&s, "sarena_drops_total", &egress_spoofed);
    eprintln!(
        "flood: {sent} frames in {flood_time:?}; slowest scrape {slowest:?}; \
         RSS {rss_before} -> {rss_after} KiB; {dropped} spoofed drops, {lost} events held back"
    );
    assert!(sent >= 900_000, "only {sent} frames sent");
    assert!(
        dropped >= sent as f64 * 0.9,
        "{dropped} drops counted of {sent}"
    );
    assert!(
        lost >= sent as f64 * 0.8,
        "{lost} events held back of {sent}"
    );
    assert!(
        slowest < Duration::from_secs(2),
        "a scrape took {slowest:?}"
    );
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    // the client was told, or kept up: either way its stream still works
    send_frames(&a, udp_frame(SPOOFED, b.ip, 5000), 1);

    // 6. The daemon goes away: the stream ends, the command says so.
    let mut monitor = monitor;
    let daemon = node.daemon.as_ref().unwrap().pid();
    // SAFETY: a signal to the daemon this test started.
    unsafe { libc::kill(daemon, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = monitor.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sarena monitor still running");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    use std::io::Read;
    monitor
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("the daemon ended the stream"), "{stderr}");
}

#[test]
fn sarena_monitor_without_a_daemon_says_so_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(package_binary("sarena-cli", "sarena"))
        .arg("--socket")
        .arg(dir.path().join("none.sock"))
        .arg("monitor")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot reach sarena-daemon"), "{stderr}");
}
