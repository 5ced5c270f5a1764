//! Traffic between pods, and reading what `ping` reports.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::Output;
use std::time::Duration;

use crate::netns::in_netns;
use crate::pod::Pod;

/// One TCP connection from `a` to `b`'s IPv4 address carrying `len` bytes;
/// returns what the server counted (and asserts the client was told the same).
pub fn tcp_exchange(a: &Pod, b: &Pod, len: usize) -> usize {
    tcp_exchange_to(a, b, IpAddr::V4(b.ip()), len)
}

/// [`tcp_exchange`] to `b_ip`, one of `b`'s addresses (either family).
pub fn tcp_exchange_to(a: &Pod, b: &Pod, b_ip: IpAddr, len: usize) -> usize {
    tcp_exchange_at(a, b, SocketAddr::from((b_ip, 0)), None, len)
}

/// [`tcp_exchange`] with `b` listening on `listen` (port 0: any) and `a`
/// connecting to `connect` (e.g. a Service address the host translates to
/// `listen`), or to where `b` listens when `None`.
pub fn tcp_exchange_at(
    a: &Pod,
    b: &Pod,
    listen: SocketAddr,
    connect: Option<SocketAddr>,
    len: usize,
) -> usize {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = in_netns(&b.netns.path(), move || {
        let listener = TcpListener::bind(listen).unwrap();
        tx.send(listener.local_addr().unwrap().port()).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut total = 0;
        let mut buf = [0u8; 65536];
        loop {
            let n = conn.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
        conn.write_all(&(total as u64).to_be_bytes()).unwrap();
        total
    });
    let port = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let target = connect.unwrap_or(SocketAddr::new(listen.ip(), port));
    let client = in_netns(&a.netns.path(), move || {
        let mut conn = TcpStream::connect_timeout(&target, Duration::from_secs(5)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        conn.write_all(&vec![0x5a; len]).unwrap();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = [0u8; 8];
        conn.read_exact(&mut answer).unwrap();
        u64::from_be_bytes(answer) as usize
    });
    let seen_by_client = client.join().unwrap();
    let seen_by_server = server.join().unwrap();
    assert_eq!(seen_by_client, seen_by_server);
    seen_by_server
}

/// (transmitted, received) from the summary line of `ping -q`'s output;
/// panics with the whole output when there is none.
pub fn ping_summary(out: &Output) -> (u32, u32) {
    let text = String::from_utf8_lossy(&out.stdout);
    let stats = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| {
            panic!(
                "no ping summary: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let numbers: Vec<u32> = stats
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// `count` pings from `from` to `to` in the background, one every `interval`
/// seconds (as `ping -i` takes it); returns (transmitted, received) once done.
pub fn background_ping(
    from: &Pod,
    to: &Pod,
    count: u32,
    interval: &str,
) -> std::thread::JoinHandle<(u32, u32)> {
    let netns = from.netns.name.clone();
    let to = to.ip().to_string();
    let interval = interval.to_string();
    std::thread::spawn(move || {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &netns, "ping", "-n", "-q", "-W", "1"])
            .args(["-i", &interval, "-c", &count.to_string(), &to])
            .output()
            .unwrap();
        ping_summary(&out)
    })
}

#[cfg(test)]
mod tests {
    use super::ping_summary;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{ExitStatus, Output};

    fn output(stdout: &str) -> Output {
        Output {
            status: ExitStatus::from_raw(0),
            stdout: stdout.as_bytes().to_vec(),
            stderr: vec![],
        }
    }

    #[test]
    fn the_summary_line_gives_sent_and_received() {
        let out = output(
            "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n\n\
             --- 10.0.0.2 ping statistics ---\n\
             200 packets transmitted, 199 received, 0.5% packet loss, time 10s\n",
        );
        assert_eq!(ping_summary(&out), (200, 199));
    }

    #[test]
    #[should_panic(expected = "no ping summary")]
    fn no_summary_is_a_failure() {
        ping_summary(&output("ping: connect: Network is unreachable\n"));
    }
}
