//! Small-message request/response over one TCP connection: a 1-byte request,
//! a 1-byte response, back to back, `TCP_NODELAY` on both ends. The server
//! and the client are threads of this process, each inside its pod's netns;
//! on a Service path the client dials the ClusterIP.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cpu::{self, CpuUsage, Pinning};
use super::netns;
use super::paths::Endpoints;
use crate::BenchError;

/// How long any single step (connect, accept, one round trip) may take
/// before the path counts as broken.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

/// Round trips done before the timed window (connection warm-up).
const WARM_UP: u32 = 200;

/// One request/response measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RrRun {
    /// Round trips completed in the timed window.
    pub transactions: u64,
    /// Length of the timed window, seconds.
    pub seconds: f64,
    /// Round trips per second.
    pub per_second: f64,
    /// Machine CPU over the timed window.
    pub cpu: Option<CpuUsage>,
    /// CPU-seconds of the client thread over the timed window plus the server
    /// thread over its whole session (immune to other load on the machine).
    pub process_cpu_seconds: Option<f64>,
}

impl RrRun {
    /// Busy CPU microseconds per round trip (whole machine).
    pub fn cpu_us_per_transaction(&self) -> Option<f64> {
        let cpu = self.cpu?;
        (self.transactions > 0).then(|| cpu.busy_seconds * 1e6 / self.transactions as f64)
    }

    /// Client and server threads' CPU microseconds per round trip.
    pub fn process_cpu_us_per_transaction(&self) -> Option<f64> {
        let cpu = self.process_cpu_seconds?;
        (self.transactions > 0).then(|| cpu * 1e6 / self.transactions as f64)
    }
}

fn io(call: &'static str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Socket { call, addr, source }
}

/// Accepts one connection on `listener` (at most [`STEP_TIMEOUT`]), then
/// echoes every byte until the client closes; returns the thread's CPU
/// seconds over the session.
fn serve(listener: TcpListener, addr: SocketAddr) -> Result<Option<f64>, BenchError> {
    listener
        .set_nonblocking(true)
        .map_err(io("set nonblocking", addr))?;
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut conn = loop {
        match listener.accept() {
            Ok((conn, _)) => break conn,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(io("accept", addr)(e)),
        }
    };
    conn.set_nonblocking(false)
        .map_err(io("set blocking", addr))?;
    conn.set_nodelay(true)
        .map_err(io("set TCP_NODELAY", addr))?;
    conn.set_read_timeout(Some(STEP_TIMEOUT))
        .map_err(io("set read timeout", addr))?;
    let start = cpu::thread_cpu_seconds();
    let mut byte = [0u8; 1];
    loop {
        match conn.read(&mut byte) {
            Ok(0) => {
                let end = cpu::thread_cpu_seconds();
                return Ok(start.zip(end).map(|(s, e)| e - s));
            }
            Ok(_) => conn.write_all(&byte).map_err(io("write", addr))?,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io("read", addr)(e)),
        }
    }
}

/// Connects to `addr`, warms up, then does round trips for `duration` with
/// the machine's CPU sampled around the timed window.
fn client(addr: SocketAddr, duration: Duration) -> Result<RrRun, BenchError> {
    let mut conn = TcpStream::connect_timeout(&addr, STEP_TIMEOUT).map_err(io("connect", addr))?;
    conn.set_nodelay(true)
        .map_err(io("set TCP_NODELAY", addr))?;
    conn.set_read_timeout(Some(STEP_TIMEOUT))
        .map_err(io("set read timeout", addr))?;
    conn.set_write_timeout(Some(STEP_TIMEOUT))
        .map_err(io("set write timeout", addr))?;
    let mut byte = [7u8; 1];
    let mut round_trip = |conn: &mut TcpStream| -> Result<(), BenchError> {
        conn.write_all(&byte).map_err(io("write", addr))?;
        conn.read_exact(&mut byte).map_err(io("read", addr))
    };
    for _ in 0..WARM_UP {
        round_trip(&mut conn)?;
    }
    timed(duration, || round_trip(&mut conn))
}

/// Repeats `step` for `duration`, counting the steps, with the machine's
/// CPU sampled around the window and the calling thread's CPU time.
pub(super) fn timed(
    duration: Duration,
    mut step: impl FnMut() -> Result<(), BenchError>,
) -> Result<RrRun, BenchError> {
    let before = cpu::sample()?;
    let thread_before = cpu::thread_cpu_seconds();
    let start = Instant::now();
    let mut transactions = 0u64;
    while start.elapsed() < duration {
        step()?;
        transactions += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let thread_after = cpu::thread_cpu_seconds();
    let after = cpu::sample()?;
    Ok(RrRun {
        transactions,
        seconds,
        per_second: transactions as f64 / seconds,
        cpu: CpuUsage::between(before, after, cpu::ticks_per_second()),
        process_cpu_seconds: thread_before.zip(thread_after).map(|(b, a)| a - b),
    })
}

/// Measures the request/response rate from a client thread in the client
/// netns of `e` to a server thread in its server netns for `duration`, the
/// threads pinned as `pinning` says.
pub fn measure(
    e: &Endpoints,
    duration: Duration,
    pinning: Option<Pinning>,
) -> Result<RrRun, BenchError> {
    let pair = ThreadPair {
        server: ("request/response server", serve),
        client: ("request/response client", client),
    };
    pair.measure(e, duration, pinning)
}

/// A server function (a bound listener; its thread's CPU seconds) and a
/// client function (the address to dial, the duration), with the names
/// their threads' errors carry.
pub(super) struct ThreadPair {
    /// The server's name and function.
    pub server: (&'static str, ServeFn),
    /// The client's name and function.
    pub client: (&'static str, ClientFn),
}

/// Serves a bound listener; its thread's CPU seconds.
pub(super) type ServeFn = fn(TcpListener, SocketAddr) -> Result<Option<f64>, BenchError>;
/// Dials an address for a duration; the run.
pub(super) type ClientFn = fn(SocketAddr, Duration) -> Result<RrRun, BenchError>;

impl ThreadPair {
    /// Runs the server in the server netns of `e` (bound to its address and
    /// port) and the client in its client netns, pinned as `pinning` says;
    /// the client's run with both threads' CPU seconds.
    pub fn measure(
        &self,
        e: &Endpoints,
        duration: Duration,
        pinning: Option<Pinning>,
    ) -> Result<RrRun, BenchError> {
        let ((server_name, serve), (client_name, client)) = (self.server, self.client);
        let (tx, rx) = mpsc::channel();
        let (server_ip, port) = (e.server_ip, e.rr_port());
        let server = netns::spawn_in(&e.server_ns, move || {
            if let Some(p) = pinning {
                cpu::pin_current_thread(p.server)?;
            }
            let wanted = SocketAddr::from((server_ip, port));
            let bound = TcpListener::bind(wanted).and_then(|l| Ok((l.local_addr()?, l)));
            match bound {
                Ok((addr, listener)) => {
                    let _ = tx.send(Ok(addr));
                    serve(listener, addr)
                }
                Err(e) => {
                    let _ = tx.send(Err(()));
                    Err(io("bind", wanted)(e))
                }
            }
        })?;
        // A Service path's client dials the ClusterIP, at the port the
        // server listens on (the Service maps it to the same port).
        let addr = match rx.recv_timeout(STEP_TIMEOUT) {
            Ok(Ok(addr)) => SocketAddr::from((e.dial_ip(), addr.port())),
            _ => {
                netns::join(server, server_name)?;
                return Err(BenchError::Parse {
                    what: server_name,
                    detail: "did not report its port".into(),
                });
            }
        };
        let run = netns::spawn_in(&e.client_ns, move || {
            if let Some(p) = pinning {
                cpu::pin_current_thread(p.client)?;
            }
            client(addr, duration)
        })
        .and_then(|c| netns::join(c, client_name));
        // The client's socket is closed by now (or never connected): the
        // server sees EOF or times out.
        let served = netns::join(server, server_name);
        let mut run = run?;
        let server_cpu = served?;
        run.process_cpu_seconds = run.process_cpu_seconds.zip(server_cpu).map(|(c, s)| c + s);
        Ok(run)
    }
}
