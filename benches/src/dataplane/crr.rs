//! Connection rate, a TCP_CRR-like test: connect, a 1-byte request, a
//! 1-byte response, close, over and over, `TCP_NODELAY` on both ends. The
//! server closes first (as an HTTP/1.0 server does), so `TIME_WAIT` is kept
//! on the server side and the client never runs out of ephemeral ports;
//! the client waits for the server's FIN before it closes. The server and
//! the client are threads of this process, each inside its netns, pinned
//! like the request/response threads ([`super::rr`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;

use super::cpu::{self, Pinning};
use super::paths::Endpoints;
use super::rr::{RrRun, ThreadPair, timed};
use crate::BenchError;

/// How long any single step (connect, accept, one exchange) may take before
/// the path counts as broken.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections made before the timed window (neighbour entries, conntrack,
/// the flow caches warm).
const WARM_UP: u32 = 50;

/// The request byte that ends the server's loop.
const STOP: u8 = b'q';
/// Every other request.
const REQUEST: u8 = b'c';

fn io(call: &'static str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> BenchError {
    move |source| BenchError::Socket { call, addr, source }
}

/// Accepts connections until one asks it to stop ([`STOP`]) or none comes
/// for [`STEP_TIMEOUT`]; answers each with one byte and closes it. Returns
/// the thread's CPU seconds over the session.
fn serve(listener: TcpListener, addr: SocketAddr) -> Result<Option<f64>, BenchError> {
    // A blocking accept that gives up after STEP_TIMEOUT (SO_RCVTIMEO on a
    // listening socket bounds accept): no polling, which would spend the
    // CPU the client is pinned to as well.
    let timeout = TimeVal::new(STEP_TIMEOUT.as_secs() as _, 0);
    setsockopt(&listener, sockopt::ReceiveTimeout, &timeout)
        .map_err(|e| io("set SO_RCVTIMEO", addr)(e.into()))?;
    let start = cpu::thread_cpu_seconds();
    loop {
        let mut conn = match listener.accept() {
            Ok((conn, _)) => conn,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io("accept", addr)(e)),
        };
        conn.set_nodelay(true)
            .map_err(io("set TCP_NODELAY", addr))?;
        conn.set_read_timeout(Some(STEP_TIMEOUT))
            .map_err(io("set read timeout", addr))?;
        let mut byte = [0u8; 1];
        conn.read_exact(&mut byte).map_err(io("read", addr))?;
        if byte[0] == STOP {
            let end = cpu::thread_cpu_seconds();
            return Ok(start.zip(end).map(|(s, e)| e - s));
        }
        conn.write_all(&byte).map_err(io("write", addr))?;
        // Dropped here: the server's FIN follows the response.
    }
}

/// One connection: connect, request, response, the server's FIN, close.
fn exchange(addr: SocketAddr, request: u8) -> Result<(), BenchError> {
    let mut conn = TcpStream::connect_timeout(&addr, STEP_TIMEOUT).map_err(io("connect", addr))?;
    conn.set_nodelay(true)
        .map_err(io("set TCP_NODELAY", addr))?;
    conn.set_read_timeout(Some(STEP_TIMEOUT))
        .map_err(io("set read timeout", addr))?;
    conn.write_all(&[request]).map_err(io("write", addr))?;
    if request == STOP {
        return Ok(());
    }
    let mut buf = [0u8; 2];
    conn.read_exact(&mut buf[..1]).map_err(io("read", addr))?;
    match conn.read(&mut buf) {
        Ok(0) => Ok(()),
        Ok(_) => Err(BenchError::Parse {
            what: "connection-rate server",
            detail: format!("{addr} sent more than one byte"),
        }),
        Err(e) => Err(io("read the server's FIN", addr)(e)),
    }
}

/// Warms up, then makes connections for `duration`, with the machine's CPU
/// sampled around the timed window; always tells the server to stop.
fn client(addr: SocketAddr, duration: Duration) -> Result<RrRun, BenchError> {
    let run = (0..WARM_UP)
        .try_for_each(|_| exchange(addr, REQUEST))
        .and_then(|()| timed(duration, || exchange(addr, REQUEST)));
    let stopped = exchange(addr, STOP);
    let run = run?;
    stopped?;
    Ok(run)
}

/// Measures the connection rate from a client thread in the client netns of
/// `e` to a server thread in its server netns for `duration`, the threads
/// pinned as `pinning` says. The result's `transactions` are connections.
pub fn measure(
    e: &Endpoints,
    duration: Duration,
    pinning: Option<Pinning>,
) -> Result<RrRun, BenchError> {
    let pair = ThreadPair {
        server: ("connection-rate server", serve),
        client: ("connection-rate client", client),
    };
    pair.measure(e, duration, pinning)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over loopback in this process's own netns: connections are made,
    /// counted and closed by the server first.
    #[test]
    fn connections_are_counted_over_loopback() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || serve(listener, addr));
        let run = client(addr, Duration::from_millis(200)).unwrap();
        assert!(run.transactions > 10, "{run:?}");
        assert!(run.per_second > 0.0);
        server.join().unwrap().unwrap();
    }

    #[test]
    fn a_server_that_never_answers_is_an_error() {
        // Accepts (the kernel's backlog) but never reads or writes.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        conn.write_all(&[REQUEST]).unwrap();
        let mut byte = [0u8; 1];
        assert!(conn.read(&mut byte).is_err());
        drop(listener);
        assert!(exchange(addr, REQUEST).is_err());
    }
}
