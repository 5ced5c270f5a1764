//! Evidence that the NetworkPolicies of the embedded policy path were in
//! force while it was measured: before and after the rounds, the client
//! opens a TCP connection to the server on a port the policies allow and on
//! one no policy allows ([`netpol::DENIED_PORT`]), and the eBPF programs'
//! policy drop counters are read around each denied attempt. With the
//! policies live the allowed port connects, the denied one does not, and
//! the programs count its packets as `PolicyDeniedIngress` /
//! `PolicyDeniedEgress`. The embedded path without policies is probed the
//! same way, as the control: there both ports connect and nothing is
//! dropped.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sarena_common::{DropReason, EndpointCounters};
use serde::{Deserialize, Serialize};

use super::ebpf_check::read_totals;
use super::netns;
use super::netpol;
use crate::BenchError;

/// How long the client waits for a connection to be established.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);

/// Policy drops (both directions) in `c`.
pub fn policy_drops(c: &EndpointCounters) -> u64 {
    c.dropped(DropReason::PolicyDeniedIngress) + c.dropped(DropReason::PolicyDeniedEgress)
}

/// One probe: both ports tried once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// Whether a byte went each way over a connection to the allowed port.
    pub allowed_connected: bool,
    /// Whether a byte went each way over a connection to the denied port.
    pub denied_connected: bool,
    /// How much the programs' policy drop counters rose during the probe.
    pub policy_drops: u64,
}

/// What the probes said about the policies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyCheck {
    /// Whether policies were applied (the policy path) or not (the control).
    pub enforced: bool,
    /// The port the policies allow that was probed.
    pub allowed_port: u16,
    /// The port no policy allows that was probed.
    pub denied_port: u16,
    /// Before the first round.
    pub before: Probe,
    /// After the last round.
    pub after: Probe,
    /// Policy drops between the two probes (the measured traffic): must be 0.
    pub drops_during_rounds: u64,
    /// Whether the probes matched what the policies say.
    pub passed: bool,
}

impl PolicyCheck {
    /// The verdict: with policies `enforced`, each probe must connect on the
    /// allowed port, not on the denied one, and raise the policy drop
    /// counters; without, both ports connect and nothing is dropped. Either
    /// way the measured traffic itself must not have been dropped.
    pub fn new(
        enforced: bool,
        allowed_port: u16,
        before: Probe,
        after: Probe,
        drops_during_rounds: u64,
    ) -> PolicyCheck {
        let probe_ok = |p: &Probe| {
            if enforced {
                p.allowed_connected && !p.denied_connected && p.policy_drops > 0
            } else {
                p.allowed_connected && p.denied_connected && p.policy_drops == 0
            }
        };
        let passed = probe_ok(&before) && probe_ok(&after) && drops_during_rounds == 0;
        PolicyCheck {
            enforced,
            allowed_port,
            denied_port: netpol::DENIED_PORT,
            before,
            after,
            drops_during_rounds,
            passed,
        }
    }

    /// One sentence for the report.
    pub fn describe(&self) -> String {
        let word = |c: bool| if c { "connected" } else { "refused" };
        let probe = |p: &Probe| {
            format!(
                "port {} {}, port {} {} ({} policy drops)",
                self.allowed_port,
                word(p.allowed_connected),
                self.denied_port,
                word(p.denied_connected),
                p.policy_drops
            )
        };
        let verdict = match (self.enforced, self.passed) {
            (true, true) => "the policies were enforced before and after the rounds",
            (true, false) => "the policies were NOT (all) in force",
            (false, true) => "nothing isolated, as expected without policies",
            (false, false) => "traffic was denied or dropped where no policy applies",
        };
        format!(
            "client → server, before the rounds: {}; after: {}; {} policy drops during \
             the measurements: {verdict}",
            probe(&self.before),
            probe(&self.after),
            self.drops_during_rounds
        )
    }
}

/// A listener on `ip` and each of `ports` in `server_ns` that echoes one
/// byte of each connection it accepts, until `stop` or `deadline`.
fn serve(
    server_ns: &Path,
    ip: IpAddr,
    ports: Vec<u16>,
    deadline: Instant,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<(), BenchError>>, BenchError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = netns::spawn_in(server_ns, move || {
        let mut listeners = Vec::new();
        for port in ports {
            let addr = SocketAddr::new(ip, port);
            let io = |call| move |source| BenchError::Socket { call, addr, source };
            let l = TcpListener::bind(addr).map_err(io("bind"))?;
            l.set_nonblocking(true).map_err(io("set nonblocking"))?;
            listeners.push(l);
        }
        let _ = tx.send(());
        while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            for l in &listeners {
                if let Ok((mut conn, _)) = l.accept() {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                    let mut b = [0u8; 1];
                    if conn.read_exact(&mut b).is_ok() {
                        let _ = conn.write_all(&b);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    })?;
    if rx.recv_timeout(Duration::from_secs(5)).is_err() {
        netns::join(handle, "policy probe server")?;
        return Err(BenchError::Parse {
            what: "policy probe server",
            detail: "did not start listening".into(),
        });
    }
    Ok(handle)
}

/// Whether a connection to `addr` carries one byte each way.
fn exchange(addr: SocketAddr) -> bool {
    let Ok(mut conn) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
    let mut b = [0x5au8; 1];
    conn.write_all(&b).is_ok() && conn.read_exact(&mut b).is_ok() && b == [0x5a]
}

/// Tries the allowed and the denied port from `client_ns` to `server_ip`
/// in `server_ns`, reading the node's policy drops (`pin_dir`) around it.
pub fn probe(
    client_ns: &Path,
    server_ns: &Path,
    server_ip: IpAddr,
    allowed_port: u16,
    pin_dir: &Path,
) -> Result<Probe, BenchError> {
    let before = policy_drops(&read_totals(pin_dir)?);
    let deadline = Instant::now() + CONNECT_TIMEOUT * 2 + Duration::from_secs(2);
    let ports = vec![allowed_port, netpol::DENIED_PORT];
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(server_ns, server_ip, ports, deadline, stop.clone())?;
    let client = netns::spawn_in(client_ns, move || {
        let allowed = exchange(SocketAddr::new(server_ip, allowed_port));
        let denied = exchange(SocketAddr::new(server_ip, netpol::DENIED_PORT));
        Ok((allowed, denied))
    })
    .and_then(|c| netns::join(c, "policy probe client"));
    stop.store(true, Ordering::Relaxed);
    let served = netns::join(server, "policy probe server");
    let (allowed_connected, denied_connected) = client?;
    served?;
    let after = policy_drops(&read_totals(pin_dir)?);
    Ok(Probe {
        allowed_connected,
        denied_connected,
        policy_drops: after.saturating_sub(before),
    })
}
