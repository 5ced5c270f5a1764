//! The eBPF dataplane against the real kernel: two pods in throwaway netns,
//! veths from RtnetlinkLinks, the programs attached as tc filters, maps pinned
//! under a unique directory. No host routes to the pods exist, so every pod ↔ pod
//! frame that arrives went through the programs.
//!
//! The object comes from `SARENA_EBPF_OBJECT` (scripts/test.sh exports it from
//! sarena-daemon's build output) or, failing that, from the newest
//! `target/*/build/sarena-daemon-*/out/sarena-ebpf`. Without one the tests are
//! skipped, except under `CI=true`, where that is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{HostLinkGuard, TestNetns, require_root, run};
use sarena_core::api::{Attachment, Endpoint, PodRef, RouteSpec};
use sarena_core::dataplane::ebpf::{AyaDataplane, EndpointInfo, EndpointKey};
use sarena_core::dataplane::kernel::KernelNames;
use sarena_core::dataplane::{Dataplane, KernelDataplane, NodeNetwork};
use sarena_core::links::{Links, PodIfaceConfig, RtnetlinkLinks, VethSpec, host_ifname};

const GATEWAY: &str = "10.251.0.1";

/// The eBPF object, or `None` (test skipped) outside CI.
fn object(test: &str) -> Option<Vec<u8>> {
    let path = std::env::var_os("SARENA_EBPF_OBJECT")
        .map(PathBuf::from)
        .or_else(find_daemon_object);
    let bytes = path.as_ref().and_then(|p| std::fs::read(p).ok());
    match bytes {
        Some(b) if !b.is_empty() => Some(b),
        _ => {
            let msg = format!(
                "{test}: no eBPF object (SARENA_EBPF_OBJECT={path:?}); build sarena-daemon \
                 with the eBPF toolchain (scripts/setup-ebpf.sh)"
            );
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{msg}");
            }
            eprintln!("SKIPPED {msg}");
            None
        }
    }
}

fn find_daemon_object() -> Option<PathBuf> {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let mut found = Vec::new();
    for profile in std::fs::read_dir(target).ok()?.flatten() {
        let Ok(builds) = std::fs::read_dir(profile.path().join("build")) else {
            continue;
        };
        for build in builds.flatten() {
            if !build
                .file_name()
                .to_string_lossy()
                .starts_with("sarena-daemon-")
            {
                continue;
            }
            let object = build.path().join("out/sarena-ebpf");
            if let Ok(meta) = std::fs::metadata(&object)
                && meta.len() > 0
            {
                found.push((meta.modified().ok()?, object));
            }
        }
    }
    found.into_iter().max().map(|(_, p)| p)
}

/// A unique pin directory on bpffs, purged on drop.
struct PinDir(PathBuf);

impl PinDir {
    fn new() -> Self {
        if !run(&["mount"]).contains("/sys/fs/bpf type bpf") {
            run(&["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"]);
        }
        let n: u32 = rand::random();
        PinDir(PathBuf::from(format!(
            "/sys/fs/bpf/sarena-test-{}-{n:08x}",
            std::process::id()
        )))
    }
}

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = AyaDataplane::purge(&self.0);
    }
}

/// One pod: netns, veth pair, address `10.251.0.<host>/24`, routes via the gateway.
struct Pod {
    netns: TestNetns,
    _host_link: HostLinkGuard,
    endpoint: Endpoint,
}

impl Pod {
    async fn new(links: &RtnetlinkLinks, host: u8) -> Pod {
        Pod::in_subnet(links, GATEWAY, host).await
    }

    /// A pod `<subnet>.<host>/24` whose gateway is `gateway` (`<subnet>.1`).
    async fn in_subnet(links: &RtnetlinkLinks, gateway: &str, host: u8) -> Pod {
        let netns = TestNetns::new();
        let container = common::unique("ebpf");
        let spec = VethSpec {
            host_ifname: host_ifname(&container, "eth0"),
            netns: netns.path(),
            pod_ifname: "eth0".into(),
            mtu: 1500,
            pod_mac: None,
        };
        let guard = HostLinkGuard(spec.host_ifname.clone());
        let pair = links.create_veth(&spec).await.unwrap();
        let prefix = gateway.rsplit_once('.').unwrap().0;
        let address = format!("{prefix}.{host}/24").parse().unwrap();
        let gw: IpAddr = gateway.parse().unwrap();
        let config = PodIfaceConfig {
            addresses: vec![address],
            routes: vec![
                RouteSpec {
                    dst: format!("{gateway}/32").parse().unwrap(),
                    gw: None,
                    mtu: None,
                },
                RouteSpec {
                    dst: "0.0.0.0/0".parse().unwrap(),
                    gw: Some(gw),
                    mtu: None,
                },
            ],
        };
        links
            .configure_pod(&spec.netns, "eth0", &config)
            .await
            .unwrap();
        let endpoint = Endpoint {
            owner: Attachment {
                container_id: container,
                ifname: "eth0".into(),
            },
            pod: PodRef::default(),
            host_ifname: pair.host_ifname,
            host_ifindex: pair.host_ifindex,
            host_mac: pair.host_mac,
            pod_mac: pair.pod_mac,
            addresses: vec![address],
            netns: spec.netns.display().to_string(),
            created_at: 0,
        };
        Pod {
            netns,
            _host_link: guard,
            endpoint,
        }
    }

    fn ip(&self) -> Ipv4Addr {
        match self.endpoint.addresses[0].addr() {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => unreachable!(),
        }
    }

    fn ifname(&self) -> &str {
        &self.endpoint.host_ifname
    }

    /// `ping` from this pod; true when every echo was answered.
    fn ping(&self, to: &Pod, count: u32) -> bool {
        self.ping_addr(&to.ip().to_string(), count)
    }

    fn ping_addr(&self, to: &str, count: u32) -> bool {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.netns.name, "ping", "-n", "-q"])
            .args(["-c", &count.to_string(), "-i", "0.2", "-W", "1", to])
            .output()
            .unwrap();
        out.status.success()
    }
}

fn node() -> NodeNetwork {
    NodeNetwork {
        gateways: vec![GATEWAY.parse().unwrap()],
        pools: vec!["10.251.0.0/24".parse().unwrap()],
        masquerade: false,
    }
}

/// The host has no route through either pod's veth: only the programs can
/// carry pod ↔ pod traffic.
fn assert_no_host_routes(pods: &[&Pod]) {
    for pod in pods {
        let routes = run(&[
            "ip",
            "-4",
            "route",
            "show",
            "table",
            "all",
            "dev",
            pod.ifname(),
        ]);
        assert!(
            routes.trim().is_empty(),
            "host routes via {}: {routes}",
            pod.ifname()
        );
    }
}

/// Program ids of the `bpf` filters on `ifname`, per direction, as `tc`
/// reports them (an oracle independent of the dataplane's own query).
fn tc_program_ids(ifname: &str) -> (Vec<u32>, Vec<u32>) {
    let ids = |hook: &str| -> Vec<u32> {
        let out = std::process::Command::new("tc")
            .args(["-j", "filter", "show", "dev", ifname, hook])
            .output()
            .unwrap();
        let filters: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        filters
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|f| f["options"]["prog"]["id"].as_u64())
                    .map(|id| id as u32)
                    .collect()
            })
            .unwrap_or_default()
    };
    (ids("ingress"), ids("egress"))
}

/// How many programs are attached on `ifname`, per direction.
fn tc_programs(ifname: &str) -> (usize, usize) {
    let (ingress, egress) = tc_program_ids(ifname);
    (ingress.len(), egress.len())
}

/// Runs `f` on a thread inside `netns` (the test's own threads stay put).
fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let file = std::fs::File::open(netns).unwrap();
    std::thread::spawn(move || {
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
}

/// One TCP connection from `a` to `b` carrying `len` bytes; returns what the
/// server counted.
fn tcp_exchange(a: &Pod, b: &Pod, len: usize) -> usize {
    let b_ip = b.ip();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = in_netns(&b.netns.path(), move || {
        let listener = TcpListener::bind(SocketAddr::from((b_ip, 0))).unwrap();
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
    let client = in_netns(&a.netns.path(), move || {
        let mut conn =
            TcpStream::connect_timeout(&SocketAddr::from((b_ip, port)), Duration::from_secs(5))
                .unwrap();
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

#[tokio::test]
async fn pods_ping_and_talk_tcp_through_the_programs_alone() {
    if !require_root("pods_ping_and_talk_tcp_through_the_programs_alone") {
        return;
    }
    let Some(object) = object("pods_ping_and_talk_tcp_through_the_programs_alone") else {
        return;
    };
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (Pod::new(&links, 2).await, Pod::new(&links, 3).await);

    // Without the programs, nothing carries pod ↔ pod traffic.
    assert_no_host_routes(&[&a, &b]);
    assert!(!a.ping(&b, 1), "pods talk without the dataplane?");

    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.setup(&node()).await.unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    // attach is idempotent: no second link.
    dp.attach(&a.endpoint).await.unwrap();
    assert_eq!(tc_programs(a.ifname()), (1, 1));
    assert_eq!(tc_programs(b.ifname()), (1, 1));

    assert!(a.ping(&b, 3), "a → b");
    assert!(b.ping(&a, 3), "b → a");
    assert_eq!(tcp_exchange(&a, &b, 4 << 20), 4 << 20);
    assert_no_host_routes(&[&a, &b]);

    let ca = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    let cb = dp.counters(b.endpoint.host_ifindex).unwrap().unwrap();
    assert!(ca.redirected_packets >= 3 + 3, "{ca:?}");
    assert!(cb.redirected_packets >= 3, "{cb:?}");
    assert!(cb.to_pod_packets >= ca.redirected_packets, "{ca:?} {cb:?}");
    assert!(cb.to_pod_bytes >= 4 << 20, "{cb:?}");
    assert!(ca.from_pod_bytes >= 4 << 20, "{ca:?}");
    assert!(ca.arp_replies >= 1 && cb.arp_replies >= 1, "{ca:?} {cb:?}");
    assert_eq!(ca.total_drops() + cb.total_drops(), 0, "{ca:?} {cb:?}");

    // ARP for the peer (on-link /24) and for the gateway, which exists on no
    // host interface, were answered with the host end's MAC by the program.
    let neigh = a.netns.exec(&["ip", "neigh", "show", "dev", "eth0"]);
    let peer_line = neigh
        .lines()
        .find(|l| l.starts_with(&format!("{} ", b.ip())));
    assert!(
        peer_line.is_some_and(|l| l.contains(&a.endpoint.host_mac.to_string())),
        "{neigh}"
    );
    let before = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    // TTL 1: the host stack drops the echo instead of forwarding it anywhere.
    let _ = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &a.netns.name,
            "ping",
            "-c",
            "1",
            "-t",
            "1",
            "-W",
            "1",
            GATEWAY,
        ])
        .output();
    let neigh = a
        .netns
        .exec(&["ip", "neigh", "show", GATEWAY, "dev", "eth0"]);
    assert!(neigh.contains(&a.endpoint.host_mac.to_string()), "{neigh}");
    let after = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    assert!(
        after.arp_replies > before.arp_replies,
        "{before:?} {after:?}"
    );
    assert!(
        !run(&["ip", "-o", "-4", "addr"]).contains(&format!(" {GATEWAY}/")),
        "the gateway address exists on the host; the test proves nothing"
    );
}

#[tokio::test]
async fn detach_removes_entries_counters_and_links() {
    if !require_root("detach_removes_entries_counters_and_links") {
        return;
    }
    let Some(object) = object("detach_removes_entries_counters_and_links") else {
        return;
    };
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (Pod::new(&links, 2).await, Pod::new(&links, 3).await);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    assert!(a.ping(&b, 1));
    assert_eq!(dp.endpoint_entries().unwrap().len(), 2);

    dp.detach(&b.endpoint).await.unwrap();
    let entries = dp.endpoint_entries().unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].0, a.ip());
    assert!(dp.counters(b.endpoint.host_ifindex).unwrap().is_none());
    assert!(dp.pinned_links().unwrap().is_empty(), "tcx links pinned");
    assert_eq!(tc_programs(b.ifname()), (0, 0));
    assert_eq!(tc_programs(a.ifname()), (1, 1));
    assert!(!a.ping(&b, 1), "b still reachable after detach");
    // Detach is idempotent.
    dp.detach(&b.endpoint).await.unwrap();

    dp.detach(&a.endpoint).await.unwrap();
    assert!(dp.endpoint_entries().unwrap().is_empty());
    assert!(dp.pinned_links().unwrap().is_empty());
    assert_eq!(tc_programs(a.ifname()), (0, 0));
}

/// `count` pings at 20/s from `from` to `to` in the background; returns
/// (transmitted, received) once done.
fn background_ping(from: &Pod, to: &Pod, count: u32) -> std::thread::JoinHandle<(u32, u32)> {
    let netns = from.netns.name.clone();
    let to = to.ip().to_string();
    std::thread::spawn(move || {
        let out = std::process::Command::new("ip")
            .args([
                "netns", "exec", &netns, "ping", "-n", "-q", "-i", "0.05", "-W", "1",
            ])
            .args(["-c", &count.to_string(), &to])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let stats = text
            .lines()
            .find(|l| l.contains("packets transmitted"))
            .unwrap_or_else(|| panic!("no ping summary: {text}"));
        let numbers: Vec<u32> = stats
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        (numbers[0], numbers[1])
    })
}

#[tokio::test]
async fn pins_survive_the_loader_and_reconcile_repairs_drift() {
    if !require_root("pins_survive_the_loader_and_reconcile_repairs_drift") {
        return;
    }
    let Some(object) = object("pins_survive_the_loader_and_reconcile_repairs_drift") else {
        return;
    };
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (Pod::new(&links, 2).await, Pod::new(&links, 3).await);
    let both = [a.endpoint.clone(), b.endpoint.clone()];
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();
    assert!(a.ping(&b, 1));

    // "Restart": the loader goes away and comes back while pods keep pinging.
    let pinger = background_ping(&a, &b, 60);
    std::thread::sleep(Duration::from_millis(500));
    drop(dp);
    std::thread::sleep(Duration::from_millis(500));
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    let report = dp.reconcile(&both).await.unwrap();
    assert!(
        report.attached.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    let (sent, received) = pinger.join().unwrap();
    assert!(
        sent >= 60 && received + 1 >= sent,
        "{received}/{sent} pings answered"
    );
    assert_eq!(tc_programs(a.ifname()), (1, 1), "duplicate attachment");
    assert_eq!(tc_programs(b.ifname()), (1, 1), "duplicate attachment");
    // The counters kept counting across the restart (same pinned map).
    let ca = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    assert!(ca.redirected_packets >= 60, "{ca:?}");

    // Drift 1: the registry lost b (stale pins, entries and counters).
    let report = dp
        .reconcile(std::slice::from_ref(&a.endpoint))
        .await
        .unwrap();
    assert_eq!(
        report.removed,
        vec![b.ip().to_string(), b.endpoint.host_ifname.clone()],
        "{report:?}"
    );
    assert_eq!(tc_programs(b.ifname()), (0, 0));
    assert!(dp.counters(b.endpoint.host_ifindex).unwrap().is_none());
    assert!(!a.ping(&b, 1));

    // Drift 2: an entry for an address nobody owns, and b back in the
    // registry but missing from the dataplane.
    let stale: Ipv4Addr = "10.251.0.99".parse().unwrap();
    {
        let data = aya::maps::MapData::from_pin(pins.0.join("maps/SARENA_ENDPOINTS")).unwrap();
        let mut map: aya::maps::HashMap<_, EndpointKey, EndpointInfo> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
        map.insert(EndpointKey::new(stale.octets()), EndpointInfo::default(), 0)
            .unwrap();
    }
    let report = dp.reconcile(&both).await.unwrap();
    assert_eq!(
        report.attached,
        vec![b.endpoint.host_ifname.clone()],
        "{report:?}"
    );
    assert_eq!(report.removed, vec![stale.to_string()], "{report:?}");
    let addrs: Vec<Ipv4Addr> = dp
        .endpoint_entries()
        .unwrap()
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    assert_eq!(addrs, vec![a.ip(), b.ip()]);
    assert_eq!(tc_programs(a.ifname()), (1, 1));
    assert_eq!(tc_programs(b.ifname()), (1, 1));
    assert!(a.ping(&b, 2));

    // A reconcile with nothing to do changes nothing.
    let report = dp.reconcile(&both).await.unwrap();
    assert!(
        report.attached.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
}

/// Sends raw Ethernet frames out of the pod's `eth0` (AF_PACKET, from a
/// thread inside the pod's netns).
fn send_raw_frames(pod: &Pod, frames: Vec<Vec<u8>>) {
    in_netns(&pod.netns.path(), move || {
        // SAFETY: plain socket calls with valid arguments; the fd is closed below.
        unsafe {
            let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let ifindex = libc::if_nametoindex(c"eth0".as_ptr());
            assert!(ifindex > 0);
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = proto as u16;
            addr.sll_ifindex = ifindex as i32;
            addr.sll_halen = 6;
            for frame in &frames {
                let sent = libc::sendto(
                    fd,
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&raw const addr).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                );
                assert!(
                    sent == frame.len() as isize,
                    "sendto: {}",
                    std::io::Error::last_os_error()
                );
            }
            libc::close(fd);
        }
    })
    .join()
    .unwrap();
}

#[tokio::test]
async fn malformed_frames_are_dropped_and_counted() {
    if !require_root("malformed_frames_are_dropped_and_counted") {
        return;
    }
    let Some(object) = object("malformed_frames_are_dropped_and_counted") else {
        return;
    };
    let pins = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (Pod::new(&links, 2).await, Pod::new(&links, 3).await);
    let dp = AyaDataplane::open(&object, &pins.0).unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();

    let host_mac = a.endpoint.host_mac.octets();
    let pod_mac = a.endpoint.pod_mac.octets();
    let eth = |ether_type: [u8; 2]| {
        let mut f = Vec::new();
        f.extend_from_slice(&host_mac);
        f.extend_from_slice(&pod_mac);
        f.extend_from_slice(&ether_type);
        f
    };
    let mut truncated_ip = eth([0x08, 0x00]);
    truncated_ip.extend_from_slice(&[0x45, 0, 0, 20, 0, 0]);
    let mut bad_version = eth([0x08, 0x00]);
    let mut header = [0u8; 20];
    header[0] = 0x65; // version 6 in an IPv4 ethertype
    header[8] = 64;
    header[16..20].copy_from_slice(&b.ip().octets());
    bad_version.extend_from_slice(&header);
    let mut short_ihl = bad_version.clone();
    short_ihl[14] = 0x44; // header length 16 bytes
    let mut truncated_arp = eth([0x08, 0x06]);
    truncated_arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    let mut bad_arp_lengths = eth([0x08, 0x06]);
    bad_arp_lengths.extend_from_slice(&[0, 1, 8, 0, 8, 4, 0, 1]);
    bad_arp_lengths.extend_from_slice(&[0u8; 24]);
    // (A frame shorter than an Ethernet header cannot be sent: the kernel
    // refuses it before any program sees it.)
    send_raw_frames(
        &a,
        vec![
            truncated_ip,
            bad_version,
            short_ihl,
            truncated_arp,
            bad_arp_lengths,
        ],
    );

    let c = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    assert_eq!(
        c.drops,
        [0, 3, 2, 0],
        "drops by reason (ethernet, ipv4, arp, rewrite): {c:?}"
    );
    assert_eq!(c.redirected_packets, 0, "{c:?}");
    // Nothing was forwarded, and traffic still flows.
    assert!(a.ping(&b, 1));
}

/// The kernel dataplane's objects under unique names, torn down on drop.
struct HostStack {
    names: KernelNames,
}

impl HostStack {
    fn new() -> Self {
        HostStack {
            names: KernelNames {
                gateway_device: common::unique("srgw"),
                gateway_peer: common::unique("srgp"),
                nft_table: common::unique("srt"),
            },
        }
    }
}

impl Drop for HostStack {
    fn drop(&mut self) {
        // The test's runtime is blocked in this drop: tear down on a fresh one.
        let names = self.names.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async { KernelDataplane::with_names(names).unwrap().teardown().await })
        })
        .join();
    }
}

#[tokio::test]
async fn with_the_kernel_dataplane_as_host_stack_pods_also_reach_the_host() {
    let test = "with_the_kernel_dataplane_as_host_stack_pods_also_reach_the_host";
    if !require_root(test) {
        return;
    }
    let Some(object) = object(test) else {
        return;
    };
    let gateway = "10.254.0.1";
    let pins = PinDir::new();
    let host = HostStack::new();
    let links = RtnetlinkLinks::new().unwrap();
    let a = Pod::in_subnet(&links, gateway, 2).await;
    let b = Pod::in_subnet(&links, gateway, 3).await;
    let kernel = KernelDataplane::with_names(host.names.clone()).unwrap();
    let dp = AyaDataplane::open(&object, &pins.0)
        .unwrap()
        .with_host_stack(std::sync::Arc::new(kernel));
    dp.setup(&NodeNetwork {
        gateways: vec![gateway.parse().unwrap()],
        pools: vec!["10.254.0.0/24".parse().unwrap()],
        masquerade: false,
    })
    .await
    .unwrap();
    dp.attach(&a.endpoint).await.unwrap();
    dp.attach(&b.endpoint).await.unwrap();

    // The host routes exist now, yet pod ↔ pod still takes the eBPF path.
    assert!(a.ping(&b, 2));
    let ca = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    assert!(ca.redirected_packets >= 2, "{ca:?}");
    // The gateway is the host: answered through the host stack, and the
    // reply comes back through to_container.
    let before = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    assert!(a.ping_addr(gateway, 2), "pod -> gateway (host)");
    let after = dp.counters(a.endpoint.host_ifindex).unwrap().unwrap();
    assert!(
        after.to_pod_packets >= before.to_pod_packets + 2,
        "{after:?}"
    );
    assert_eq!(after.redirected_packets, before.redirected_packets);

    dp.detach(&a.endpoint).await.unwrap();
    dp.detach(&b.endpoint).await.unwrap();
    assert!(!a.ping(&b, 1));
}

/// An upgrade from a version that attached with pinned tcx links: reconcile
/// puts the tc filters in place, then detaches and unpins the old links, and
/// the pods keep talking.
#[tokio::test]
async fn reconcile_replaces_the_tcx_links_of_an_earlier_version() {
    use aya::programs::links::{FdLink, LinkOrder};
    use aya::programs::tc::{SchedClassifier, TcAttachOptions};
    use sarena_core::dataplane::ebpf::{Direction, PinnedAttachment, pins};

    let test = "reconcile_replaces_the_tcx_links_of_an_earlier_version";
    if !require_root(test) {
        return;
    }
    let Some(object) = object(test) else {
        return;
    };
    let pins_dir = PinDir::new();
    let links = RtnetlinkLinks::new().unwrap();
    let (a, b) = (Pod::new(&links, 2).await, Pod::new(&links, 3).await);
    let both = [a.endpoint.clone(), b.endpoint.clone()];

    // What the earlier version left: the maps pinned, entries written, and
    // each program attached by tcx with its link pinned under links/.
    let dp = AyaDataplane::open(&object, &pins_dir.0).unwrap();
    dp.reconcile(&[]).await.unwrap();
    let mut old = aya::EbpfLoader::new()
        .default_map_pin_directory(pins::maps_dir(&pins_dir.0))
        .load(&object)
        .unwrap();
    std::fs::create_dir_all(pins::links_dir(&pins_dir.0)).unwrap();
    for pod in [&a, &b] {
        for direction in Direction::ALL {
            let prog: &mut SchedClassifier = old
                .program_mut(direction.program())
                .unwrap()
                .try_into()
                .unwrap();
            if prog.fd().is_err() {
                prog.load().unwrap();
            }
            let attach_type = match direction {
                Direction::Ingress => aya::programs::TcAttachType::Ingress,
                Direction::Egress => aya::programs::TcAttachType::Egress,
            };
            let id = prog
                .attach_with_options(
                    pod.ifname(),
                    attach_type,
                    TcAttachOptions::TcxOrder(LinkOrder::default()),
                )
                .unwrap();
            let link = FdLink::try_from(prog.take_link(id).unwrap()).unwrap();
            let pin = PinnedAttachment {
                ifindex: pod.endpoint.host_ifindex,
                ifname: pod.ifname().to_owned(),
                direction,
            };
            link.pin(pins::links_dir(&pins_dir.0).join(pin.file_name()))
                .unwrap();
        }
    }
    drop(old);
    assert_eq!(dp.pinned_links().unwrap().len(), 4);

    let report = dp.reconcile(&both).await.unwrap();
    assert_eq!(report.attached.len(), 2, "{report:?}");
    assert!(dp.pinned_links().unwrap().is_empty(), "tcx links left");
    for pod in [&a, &b] {
        assert_eq!(tc_programs(pod.ifname()), (1, 1), "{}", pod.ifname());
        let tcx = |t| {
            SchedClassifier::query_tcx(pod.ifname(), t)
                .map(|(_, progs)| progs.len())
                .unwrap_or(0)
        };
        assert_eq!(
            (
                tcx(aya::programs::TcAttachType::Ingress),
                tcx(aya::programs::TcAttachType::Egress)
            ),
            (0, 0),
            "tcx programs left on {}",
            pod.ifname()
        );
    }
    assert!(a.ping(&b, 2));
}
