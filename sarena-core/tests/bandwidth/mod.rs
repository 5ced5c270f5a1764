//! What the bandwidth tests share: iperf3 between namespaces, the `tc`
//! oracle for root qdiscs, and a DNAT rule in a throwaway nftables table.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sarena_test_support::{TestNetns, run, succeeds, unique};

/// Seconds each measurement runs, after one omitted second (TCP's start
/// and the bucket's burst are not measured).
pub const SECONDS: u32 = 4;

/// Longest an iperf3 client may run before it is killed (it has no timeout
/// of its own once connected).
const CLIENT_TIMEOUT: &str = "30";

/// Held by each test for its whole run: the tests share one pod subnet on
/// the host and measure rates on a small machine, so they run one at a time
/// even when the harness runs tests in parallel.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for the other tests of this binary to finish; hold the guard for
/// the test's duration.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// Where an iperf3 end runs: in a pod's netns, or on the host.
#[derive(Clone, Copy)]
pub enum Side<'a> {
    /// In this netns.
    Pod(&'a TestNetns),
    /// In the test's (host) netns.
    Host,
}

fn command(side: Side<'_>, args: &[&str]) -> Command {
    let mut cmd = match side {
        Side::Pod(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns.name, "iperf3"]);
            c
        }
        Side::Host => Command::new("iperf3"),
    };
    cmd.args(args);
    cmd
}

/// An iperf3 server for one test, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// TCP goodput in bits/s from `from` to `to_addr` (served on `to`), as the
/// receiver measured it over [`SECONDS`] s.
pub fn tcp_rate(from: Side<'_>, to: Side<'_>, to_addr: &str) -> f64 {
    tcp_rate_via(from, to, to_addr, to_addr)
}

/// [`tcp_rate`] with the server on `bind_addr` and the client connecting to
/// `to_addr` (an address the host translates to `bind_addr`).
pub fn tcp_rate_via(from: Side<'_>, to: Side<'_>, bind_addr: &str, to_addr: &str) -> f64 {
    rate(from, to, bind_addr, to_addr, &[])
}

/// UDP goodput in bits/s from `from` to `to_addr` (served on `to`) while the
/// sender offers 1 Gbit/s of 1400-byte datagrams (a flood), as the receiver
/// measured it over [`SECONDS`] s.
pub fn udp_flood_rate(from: Side<'_>, to: Side<'_>, to_addr: &str) -> f64 {
    rate(
        from,
        to,
        to_addr,
        to_addr,
        &["-u", "-b", "1G", "-l", "1400"],
    )
}

/// What the receiver measured of an iperf3 run from `from` to `to_addr`,
/// the server on `bind_addr` (on `to`), the client given `extra` arguments.
fn rate(from: Side<'_>, to: Side<'_>, bind_addr: &str, to_addr: &str, extra: &[&str]) -> f64 {
    let port = (20_000 + rand::random::<u16>() % 40_000).to_string();
    let server = command(to, &["-s", "-1", "-B", bind_addr, "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    let _server = Server(server);
    let seconds = SECONDS.to_string();
    let mut last = String::new();
    for _ in 0..20 {
        let mut client = Command::new("timeout");
        client.args(["-k", "5", CLIENT_TIMEOUT]);
        let iperf = command(
            from,
            &[
                &["-c", to_addr, "-p", &port, "-t", &seconds, "-O", "1", "-J"],
                extra,
            ]
            .concat(),
        );
        client.arg(iperf.get_program()).args(iperf.get_args());
        let out = client.output().expect("iperf3 client");
        let report: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        if let Some(bps) = report["end"]["sum_received"]["bits_per_second"].as_f64() {
            return bps;
        }
        // The server may not listen yet.
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("iperf3 to {to_addr}:{port} never ran: {last}");
}

/// Prints `measured` against `limit` (bits/s); returns their ratio.
fn report(what: &str, measured: f64, limit: u64) -> f64 {
    let ratio = measured / limit as f64;
    eprintln!(
        "{what}: {:.1} Mbit/s against a limit of {:.1} Mbit/s ({:.1} %)",
        measured / 1e6,
        limit as f64 / 1e6,
        ratio * 100.0
    );
    ratio
}

/// Asserts `measured` is within ±15 % of `limit` (bits/s).
pub fn assert_near(what: &str, measured: f64, limit: u64) {
    let ratio = report(what, measured, limit);
    assert!(
        (0.85..=1.15).contains(&ratio),
        "{what}: {measured:.0} bit/s is not within 15 % of {limit} bit/s"
    );
}

/// Asserts `measured` is at most 15 % above `limit` (bits/s): what a pod
/// trying to exceed its limit must not manage.
pub fn assert_at_most(what: &str, measured: f64, limit: u64) {
    let ratio = report(what, measured, limit);
    assert!(
        ratio <= 1.15,
        "{what}: {measured:.0} bit/s is more than 15 % above {limit} bit/s"
    );
}

/// `(kind, handle)` of `ifname`'s root qdisc per `tc` (handle `5a5f:`).
pub fn root_qdisc(netns: Option<&TestNetns>, ifname: &str) -> (String, String) {
    let mut args = vec![];
    if let Some(ns) = netns {
        args.extend(["ip", "netns", "exec", &ns.name]);
    }
    args.extend(["tc", "-j", "qdisc", "show", "dev", ifname, "root"]);
    let out = run(&args);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let root = &list[0];
    (
        root["kind"].as_str().unwrap_or("").to_string(),
        root["handle"].as_str().unwrap_or("").to_string(),
    )
}

/// Names of the `bpf` programs on `ifname`'s egress hook per `tc`.
pub fn egress_programs(netns: Option<&TestNetns>, ifname: &str) -> Vec<String> {
    let mut args = vec![];
    if let Some(ns) = netns {
        args.extend(["ip", "netns", "exec", &ns.name]);
    }
    args.extend(["tc", "-j", "filter", "show", "dev", ifname, "egress"]);
    let out = run(&args);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    list.as_array()
        .map(|l| {
            l.iter()
                .filter_map(|f| f["options"]["prog"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// An nftables table with one DNAT rule (`vip:port` → `dst:port`, TCP),
/// deleted on drop: the host stack translating a pod → pod flow, as
/// kube-proxy does for a ClusterIP.
pub struct Dnat(String);

impl Dnat {
    /// The rule for TCP to `vip`, any port, towards `dst`.
    pub fn new(vip: &str, dst: &str) -> Dnat {
        let table = unique("srbw");
        run(&["nft", "add", "table", "ip", &table]);
        let dnat = Dnat(table);
        let chain = "{ type nat hook prerouting priority -100 ; }";
        run(&["nft", "add", "chain", "ip", &dnat.0, "pre", chain]);
        let rule = format!("ip daddr {vip} meta l4proto tcp dnat to {dst}");
        let mut args = vec!["nft", "add", "rule", "ip", &dnat.0, "pre"];
        args.extend(rule.split(' '));
        run(&args);
        dnat
    }
}

impl Drop for Dnat {
    fn drop(&mut self) {
        succeeds(&["nft", "delete", "table", "ip", &self.0]);
    }
}
