//! What the NetworkPolicy tests share: dual-stack pods in their own
//! subnet, identities and allow entries written through the dataplane, and
//! a TCP connection that tells whether both directions passed.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use sarena_core::dataplane::ebpf::{AyaDataplane, DropReason};
use sarena_core::links::RtnetlinkLinks;
use sarena_core::policy::{Direction, EntryKey, IpcacheEntry, RuleId};
use sarena_test_support::{Pod, in_netns};

use super::TestDataplane;

/// Identities the tests give their pods.
pub const ID_A: u32 = 300;
pub const ID_B: u32 = 301;
pub const ID_C: u32 = 302;
/// `sarena_common::policy::IDENTITY_HOST`.
pub const IDENTITY_HOST: u32 = 1;
/// `sarena_common::policy::IPCACHE_F_POD`.
pub const IPCACHE_F_POD: u32 = 2;

/// The dual-stack pod `10.246.0.<host>/24` + `fd00:246::<host>/64`.
pub async fn pod(links: &RtnetlinkLinks, host: u8) -> Pod {
    Pod::with_addresses(
        links,
        &[
            (&format!("10.246.0.{host}/24"), "10.246.0.1"),
            (&format!("fd00:246::{host:x}/64"), "fd00:246::1"),
        ],
    )
    .await
}

/// Both addresses of `pod` get `identity` in the ipcache.
pub fn identify(dp: &AyaDataplane, pod: &Pod, identity: u32) {
    dp.policy_maps(|m| {
        for addr in &pod.endpoint.spec.addresses {
            let host = ipnet::IpNet::new(addr.addr(), addr.max_prefix_len()).unwrap();
            let entry = IpcacheEntry {
                identity,
                flags: IPCACHE_F_POD,
            };
            m.set_ipcache(host, entry).unwrap();
        }
    });
}

/// Allows `pod` `direction` traffic with `peer` (0: any) over TCP to `port`.
pub fn allow_tcp(dp: &AyaDataplane, pod: &Pod, direction: Direction, peer: u32, port: u16) {
    let key = EntryKey {
        direction,
        peer,
        proto: 6,
        port,
        port_bits: 16,
    };
    dp.policy_maps(|m| m.set_entry(pod.endpoint.spec.host_ifindex, &key, RuleId(7)))
        .unwrap();
}

pub fn isolate(dp: &AyaDataplane, pod: &Pod, ingress: bool, egress: bool) {
    dp.set_isolation(pod.endpoint.spec.host_ifindex, ingress, egress)
        .unwrap();
}

pub fn drops(t: &TestDataplane, pod: &Pod, reason: DropReason) -> u64 {
    t.counters(pod).dropped(reason)
}

/// Whether a TCP connection from `from` to `to`'s address `addr` on `port`
/// is established (a listener in `to`), with a byte each way: both
/// directions of the flow passed.
pub fn connects(from: &Pod, to: &Pod, addr: IpAddr, port: u16) -> bool {
    connects_at(from, to, addr, addr, port)
}

/// [`connects`] with `to` listening on `listen` and `from` connecting to
/// `connect` (a Service address the host translates to `listen`).
pub fn connects_at(from: &Pod, to: &Pod, listen: IpAddr, connect: IpAddr, port: u16) -> bool {
    connects_ns(&from.netns.path(), &to.netns.path(), listen, connect, port)
}

/// [`connects_at`] between any two namespaces (a pod's, or one standing
/// for another node's pod).
pub fn connects_ns(from: &Path, to: &Path, listen: IpAddr, connect: IpAddr, port: u16) -> bool {
    let server = serve_one_in(to, listen, port);
    let client = in_netns(from, move || exchange(connect, port));
    let ok = client.join().unwrap();
    server.join().unwrap();
    ok
}

/// Whether the host (the test's own netns) completes a TCP exchange with
/// `to` on `addr`:`port`.
pub fn host_connects(to: &Pod, addr: IpAddr, port: u16) -> bool {
    let server = serve_one_in(&to.netns.path(), addr, port);
    let ok = exchange(addr, port);
    server.join().unwrap();
    ok
}

/// A listener on `addr`:`port` in the namespace `to`, listening when this
/// returns, that echoes one byte of the first connection within 3 s.
fn serve_one_in(to: &Path, addr: IpAddr, port: u16) -> std::thread::JoinHandle<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = in_netns(to, move || {
        let listener = TcpListener::bind(SocketAddr::new(addr, port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        tx.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok((mut conn, _)) = listener.accept() {
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut b = [0u8; 1];
                if conn.read_exact(&mut b).is_ok() {
                    let _ = conn.write_all(&b);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    server
}

/// Connects to `addr`:`port` (1.5 s at most) and exchanges a byte each way.
fn exchange(addr: IpAddr, port: u16) -> bool {
    let target = SocketAddr::new(addr, port);
    let Ok(mut conn) = TcpStream::connect_timeout(&target, Duration::from_millis(1500)) else {
        return false;
    };
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0x5au8; 1];
    conn.write_all(&b).is_ok() && conn.read_exact(&mut b).is_ok() && b == [0x5a]
}

pub fn v4(pod: &Pod) -> IpAddr {
    IpAddr::V4(pod.ip())
}

pub fn v6(pod: &Pod) -> IpAddr {
    IpAddr::V6(pod.ip6())
}
