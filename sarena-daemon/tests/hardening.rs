//! The daemon's hardening, each as a test against the real binaries: the
//! socket is 0600 and root's, TCP is off unless asked for, an oversize body
//! gets 413 at once, slow-loris clients cannot hold the daemon, container ids
//! and ifnames that could reach outside the state or queue directory are
//! refused before any file is touched, and a second daemon on the same state
//! directory or bpffs pin directory fails at once, saying why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

use sarena_core::api::{Attachment, Daemon, Inspect as _};
use sarena_test_support::daemon::{EbpfNode, Site, alloc_req, raw};
use sarena_test_support::{Cni, require, require_root};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
#[ignore = "privileged: needs root (the socket must be root's); run as root with --include-ignored (scripts/test.sh)"]
async fn the_socket_is_0600_and_roots() {
    require_root("the_socket_is_0600_and_roots");
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let meta = std::fs::symlink_metadata(site.socket()).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
}

/// The inodes of the TCP sockets listening in this netns (both families).
fn listening_tcp_inodes() -> HashSet<String> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // st 0A: LISTEN; the inode is the tenth field.
            if fields.get(3) == Some(&"0A")
                && let Some(inode) = fields.get(9)
            {
                inodes.insert((*inode).to_string());
            }
        }
    }
    inodes
}

/// The socket inodes process `pid` has open.
fn socket_inodes(pid: i32) -> HashSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter_map(|t| {
            let t = t.to_string_lossy().into_owned();
            t.strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn tcp_is_off_by_default() {
    let site = Site::new();
    let plain = site.start(&[]).await;
    let listening = listening_tcp_inodes();
    let open = socket_inodes(plain.pid());
    assert!(!open.is_empty(), "the daemon has no sockets at all?");
    assert!(
        open.is_disjoint(&listening),
        "the daemon listens on TCP without --listen-tcp"
    );
    drop(plain);
    // The probe would see it: with --listen-tcp it does.
    let site = Site::new();
    let tcp = site.start(&["--listen-tcp", "127.0.0.1:0"]).await;
    assert!(!socket_inodes(tcp.pid()).is_disjoint(&listening_tcp_inodes()));
}

#[tokio::test]
async fn an_oversize_body_gets_413_at_once() {
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let sock = site.socket();
    // Declared far past the limit, and never sent.
    let started = Instant::now();
    let answer = raw(
        &sock,
        "POST /v1/ipam/allocate HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 1073741824",
        b"{",
    )
    .await;
    answer.assert_error(413, "payload_too_large", "65536");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // Past the limit but small enough to be read and dropped.
    let body = vec![b' '; 300 * 1024];
    let started = Instant::now();
    let answer = raw(
        &sock,
        &format!(
            "POST /v1/gc HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        &body,
    )
    .await;
    answer.assert_error(413, "payload_too_large", "65536");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // Nothing changed.
    assert!(
        site.client()
            .ipam_state()
            .await
            .unwrap()
            .allocations
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_clients_cannot_hold_the_daemon() {
    let site = Site::new();
    let _daemon = site.start(&[]).await;
    let sock = site.socket();
    // Many clients that start a request and never finish it, and one that
    // sends its headers and then a body byte every second.
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut s = tokio::net::UnixStream::connect(&sock).await.unwrap();
        s.write_all(b"GET /v1/daemon/heal").await.unwrap();
        slow.push(s);
    }
    let mut dribbler = tokio::net::UnixStream::connect(&sock).await.unwrap();
    dribbler
        .write_all(b"POST /v1/gc HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    // The daemon still answers everyone else at once.
    let client = site.client();
    for _ in 0..20 {
        let started = Instant::now();
        client.allocate(alloc_req("fast")).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    // And cuts the slow ones off: headers within 10 s, bodies within 10 s.
    let deadline = Instant::now() + Duration::from_secs(15);
    for s in &mut slow {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut buf = Vec::new();
        let read = tokio::time::timeout(left, s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "a slow client still holds a connection");
    }
    let mut answer = Vec::new();
    let left = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(2);
    let dribbled = async {
        loop {
            let mut buf = [0u8; 4096];
            match tokio::time::timeout(Duration::from_secs(1), dribbler.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
                // One more byte a second, whether or not it still goes through.
                Err(_) => drop(dribbler.write_all(b" ").await),
            }
        }
    };
    assert!(
        tokio::time::timeout(left, dribbled).await.is_ok(),
        "the dribbling client still holds its connection"
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.contains(" 400 ") && text.contains("not received within"),
        "{text}"
    );
}

/// Container ids and ifnames that name (or climb out of) a directory.
fn escaping() -> Vec<Attachment> {
    let att = |c: &str, i: &str| Attachment {
        container_id: c.into(),
        ifname: i.into(),
    };
    vec![
        att("..", "eth0"),
        att("../../etc", "eth0"),
        att("a/../../b", "eth0"),
        att("/etc/passwd", "eth0"),
        att(".hidden", "eth0"),
        att("ok", ".."),
        att("ok", "../x"),
        att("ok", "a/b"),
        att("ok", "."),
    ]
}

/// Every file under `dir`, recursively.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn ids_that_could_leave_the_state_or_queue_dir_are_refused_before_any_file_is_touched() {
    let site = Site::new();
    let daemon = site.start(&[]).await;
    let sock = site.socket();
    let cni = Cni::new(&sock, site.dir.path());
    let state_before = files_under(&site.state_dir());
    // Over the API: refused, nothing stored.
    for att in escaping() {
        let seg = |s: &str| sarena_core::api::encode_segment(s);
        let path = format!(
            "/v1/endpoints/{}/{}",
            seg(&att.container_id),
            seg(&att.ifname)
        );
        for method in ["GET", "DELETE"] {
            let a = raw(&sock, &format!("{method} {path} HTTP/1.1"), b"").await;
            assert_eq!(a.status, 400, "{method} {path}: {a:?}");
        }
        let body =
            serde_json::json!({"owner": {"container_id": att.container_id, "ifname": att.ifname}});
        let body = body.to_string();
        let head = format!(
            "POST /v1/ipam/allocate HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        );
        assert_eq!(
            raw(&sock, &head, body.as_bytes()).await.status,
            400,
            "{att:?}"
        );
        // The plugin refuses it too (code 4), daemon up or not.
        let netns = std::path::Path::new("/var/run/netns/none");
        let add = cni.add(&att, netns);
        assert_eq!(add.code(), Some(4), "ADD {att:?}: {add:?}");
    }
    assert_eq!(files_under(&site.state_dir()), state_before);
    assert!(
        site.client()
            .ipam_state()
            .await
            .unwrap()
            .allocations
            .is_empty()
    );
    // With the daemon down a DEL would be queued: these never are, and the
    // queue directory is not even created.
    drop(daemon);
    for att in escaping() {
        let del = cni.del(&att, None);
        assert_eq!(del.code(), Some(4), "DEL {att:?}: {del:?}");
    }
    assert!(
        !cni.queue_dir().exists(),
        "{:?}",
        files_under(cni.queue_dir())
    );
}

#[tokio::test]
async fn a_second_daemon_on_the_same_state_dir_fails_at_once() {
    let site = Site::new();
    let first = site.start(&[]).await;
    let other = Site::with_state_dir(site.state_dir());
    let started = Instant::now();
    let (status, log) = other.start_failing(&[]);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(1), "{log}");
    let expected = format!(
        "another sarena-daemon (pid {}) is already using the state dir {}",
        first.pid(),
        site.state_dir().display()
    );
    assert!(log.contains(&expected), "{log}");
    assert!(!other.socket().exists(), "it bound a socket before failing");
    // The first one is unharmed.
    assert!(site.client().health().await.unwrap().ready);
}

#[tokio::test]
#[ignore = "privileged: needs root, bpffs and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn a_second_daemon_on_the_same_pin_dir_fails_at_once() {
    let test = "a_second_daemon_on_the_same_pin_dir_fails_at_once";
    require_root(test);
    require(
        test,
        sarena_daemon::ebpf_object::ebpf_object().is_some(),
        "the daemon was built without the eBPF object (run scripts/setup-ebpf.sh)",
    );
    let node = EbpfNode::start("10.248.0.0/16", "10.248.0.1", "").await;
    let other = Site::new();
    let config = other.config(
        "dataplane = \"ebpf\"\nmasquerade = false\n\
         [[ipam.pools]]\nname = \"other\"\ncidrs = [\"10.249.0.0/16\"]\n",
    );
    let started = Instant::now();
    let (status, log) = other.start_failing(&[
        "--config",
        config.to_str().unwrap(),
        "--bpf-pin-dir",
        node.pin_dir.0.to_str().unwrap(),
    ]);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(1), "{log}");
    let expected = format!(
        "is already using the bpffs pin dir {}",
        node.pin_dir.0.display()
    );
    assert!(log.contains(&expected), "{log}");
    assert!(node.client().health().await.unwrap().ready);
}
