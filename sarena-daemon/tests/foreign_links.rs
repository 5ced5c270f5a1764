//! Whoever can call the API cannot aim the dataplane at the host: the real
//! daemon (eBPF mode, inside a throwaway netns playing the host) refuses to
//! register an endpoint whose host interface is not one of Sarena's pod
//! veths (a plain veth, one named like Sarena's but not made by it, a
//! "NIC", `lo`) and leaves that interface's qdiscs as they were; and it
//! refuses an endpoint whose netns is the host's own. And its metrics name
//! pods only to loopback scrapers, unless `--allow-remote-pod-names`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sarena_core::api::{
    Allocation, ApiErrorKind, Daemon, EndpointCreate, EndpointSpec, Inspect as _,
};
use sarena_core::links::{LINK_GROUP, host_ifname};
use sarena_test_support::daemon::{Running, Site, alloc_req};
use sarena_test_support::{PinDir, TestNetns, require, require_root, unique};

const POOL: &str = "10.247.0.0/24";

/// The endpoint `alloc`'s owner would register on `host_ifname` (ifindex
/// `ifindex`) with the pod netns `netns`.
fn create(alloc: &Allocation, host_ifname: &str, ifindex: u32, netns: &str) -> EndpointCreate {
    let mut spec = EndpointSpec::for_tests(
        alloc.owner.clone(),
        host_ifname,
        alloc.addresses.iter().map(|a| a.address).collect(),
    );
    spec.host_ifindex = ifindex;
    spec.netns = netns.into();
    EndpointCreate { spec }
}

/// The "host": a netns with `lo` up, a "NIC", a plain veth, a veth
/// named like Sarena's but not in its group, and (see [`Host::make_ours`])
/// one Sarena would make (marked, its peer in `pod`).
struct Host {
    netns: TestNetns,
    pod: TestNetns,
    ours: String,
}

impl Host {
    fn new() -> Host {
        let netns = TestNetns::new();
        let pod = TestNetns::new();
        let ip = |args: &[&str]| {
            let mut full = vec!["ip"];
            full.extend_from_slice(args);
            netns.exec(&full);
        };
        ip(&["link", "set", "lo", "up"]);
        // The kernel here may have no dummy driver: a veth plays the NIC.
        ip(&[
            "link", "add", "nic0", "type", "veth", "peer", "name", "nic1",
        ]);
        ip(&[
            "link", "add", "plain0", "type", "veth", "peer", "name", "plain1",
        ]);
        ip(&[
            "link",
            "add",
            "lxcforeign0",
            "type",
            "veth",
            "peer",
            "name",
            "foreign1",
        ]);
        for link in ["nic0", "plain0", "lxcforeign0"] {
            ip(&["link", "set", link, "up"]);
        }
        Host {
            netns,
            pod,
            ours: host_ifname(&unique("ours"), "eth0"),
        }
    }

    /// Makes the pair Sarena would make for a pod (after the daemon's
    /// start-up, which removes marked links no endpoint owns).
    fn make_ours(&self) {
        let group = LINK_GROUP.to_string();
        self.netns.exec(&[
            "ip",
            "link",
            "add",
            &self.ours,
            "group",
            &group,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &self.pod.name,
        ]);
        self.netns.exec(&["ip", "link", "set", &self.ours, "up"]);
    }

    fn ifindex(&self, link: &str) -> u32 {
        let path = format!("/sys/class/net/{link}/ifindex");
        self.netns.exec(&["cat", &path]).trim().parse().unwrap()
    }

    fn qdiscs(&self, link: &str) -> String {
        self.netns.exec(&["tc", "qdisc", "show", "dev", link])
    }
}

/// The eBPF-mode daemon of `site` (its netns playing the host) with `extra`.
async fn start(site: &Site, pins: &PinDir, extra: &[&str]) -> Running {
    let config = site.config(&format!(
        "dataplane = \"ebpf\"\nmasquerade = false\nmtu = 1500\n\
         [[ipam.pools]]\nname = \"t\"\ncidrs = [\"{POOL}\"]\n"
    ));
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--bpf-pin-dir",
        pins.0.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    site.start(&args).await
}

fn preconditions(test: &str) {
    require_root(test);
    require(
        test,
        sarena_daemon::ebpf_object::ebpf_object().is_some(),
        "the daemon was built without the eBPF object (run scripts/setup-ebpf.sh)",
    );
}

#[tokio::test]
#[ignore = "privileged: needs root, bpffs and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn only_sarenas_pod_veths_and_pod_netns_can_be_registered() {
    preconditions("only_sarenas_pod_veths_and_pod_netns_can_be_registered");
    let host = Host::new();
    let pins = PinDir::new();
    let site = Site::new().in_netns(&host.netns.name);
    let daemon = start(&site, &pins, &[]).await;
    host.make_ours();
    let client = site.client();
    let alloc = client.allocate(alloc_req("pod1")).await.unwrap();
    let pod_netns = host.pod.path().display().to_string();

    // Not Sarena's pod veths: refused, their qdiscs untouched.
    for link in ["nic0", "plain0", "lxcforeign0", "lo"] {
        let before = host.qdiscs(link);
        let req = create(&alloc, link, host.ifindex(link), &pod_netns);
        let answer = client.create_endpoint(req).await;
        assert_eq!(host.qdiscs(link), before, "{link}'s qdiscs changed");
        let err = answer.unwrap_err();
        assert_eq!(err.kind(), Some(ApiErrorKind::BadRequest), "{link}: {err}");
        assert!(
            err.to_string().contains("not a Sarena pod veth"),
            "{link}: {err}"
        );
    }
    // Sarena's veth under another link's ifindex (the NIC's): refused, the
    // NIC untouched.
    let before = host.qdiscs("nic0");
    let req = create(&alloc, &host.ours, host.ifindex("nic0"), &pod_netns);
    let err = client.create_endpoint(req).await.unwrap_err();
    assert_eq!(err.kind(), Some(ApiErrorKind::BadRequest), "{err}");
    assert_eq!(host.qdiscs("nic0"), before);

    // Sarena's veth, but the host's netns as the pod's: refused, by any
    // path (pid 1's only where this machine lets root read it at all).
    let ours_before = host.qdiscs(&host.ours);
    let mut host_paths = vec![
        host.netns.path().display().to_string(),
        format!("/proc/{}/ns/net", daemon.pid()),
    ];
    if std::fs::metadata("/proc/1/ns/net").is_ok() {
        host_paths.push("/proc/1/ns/net".into());
    }
    for netns in &host_paths {
        let req = create(&alloc, &host.ours, host.ifindex(&host.ours), netns);
        let err = client.create_endpoint(req).await.unwrap_err();
        assert_eq!(err.kind(), Some(ApiErrorKind::BadRequest), "{netns}: {err}");
        assert!(err.to_string().contains("spec.netns"), "{netns}: {err}");
        assert_eq!(host.qdiscs(&host.ours), ours_before, "{netns}");
    }
    assert!(client.endpoints().await.unwrap().is_empty());

    // The real thing is registered and attached.
    let req = create(&alloc, &host.ours, host.ifindex(&host.ours), &pod_netns);
    client.create_endpoint(req).await.unwrap();
    assert!(
        host.qdiscs(&host.ours).contains("clsact"),
        "{}",
        host.qdiscs(&host.ours)
    );
}

/// `GET /metrics` from inside `netns` to `addr`: the body.
fn scrape_in(netns: &TestNetns, addr: std::net::SocketAddr) -> String {
    sarena_test_support::in_netns(&netns.path(), move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        text
    })
    .join()
    .unwrap()
}

#[tokio::test]
#[ignore = "privileged: needs root, bpffs and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn remote_scrapers_see_no_pod_names_unless_allowed() {
    preconditions("remote_scrapers_see_no_pod_names_unless_allowed");
    let host = Host::new();
    // The node's address a pod (or anyone off the node) would scrape.
    host.netns
        .exec(&["ip", "addr", "add", "192.0.2.1/24", "dev", "nic0"]);
    host.netns.exec(&["ip", "link", "set", "nic1", "up"]);
    let pins = PinDir::new();
    let site = Site::new().in_netns(&host.netns.name);
    let listen = ["--metrics-listen", "0.0.0.0:9464", "--allow-remote-metrics"];
    let daemon = start(&site, &pins, &listen).await;
    host.make_ours();
    let client = site.client();
    let alloc = client.allocate(alloc_req("named")).await.unwrap();
    let mut req = create(
        &alloc,
        &host.ours,
        host.ifindex(&host.ours),
        &host.pod.path().display().to_string(),
    );
    req.spec.pod.namespace = Some("secret-ns".into());
    req.spec.pod.name = Some("secret-pod".into());
    client.create_endpoint(req).await.unwrap();

    let local: std::net::SocketAddr = "127.0.0.1:9464".parse().unwrap();
    let remote: std::net::SocketAddr = "192.0.2.1:9464".parse().unwrap();
    let seen = scrape_in(&host.netns, local);
    assert!(
        seen.contains("pod=\"secret-pod\"") && seen.contains("secret-ns"),
        "{seen}"
    );
    let seen = scrape_in(&host.netns, remote);
    assert!(seen.contains("container_id=\"named\""), "{seen}");
    assert!(
        !seen.contains("secret-pod") && !seen.contains("secret-ns"),
        "{seen}"
    );

    // Opted in: remote scrapers see them too.
    daemon.kill();
    let opted_in = [&listen[..], &["--allow-remote-pod-names"]].concat();
    let _daemon = start(&site, &pins, &opted_in).await;
    let seen = scrape_in(&host.netns, remote);
    assert!(seen.contains("pod=\"secret-pod\""), "{seen}");
}
