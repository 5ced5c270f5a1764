//! Durability of the node state: a process SIGKILLed in the middle of a stream of
//! concurrent allocations, endpoint creations and deletions loses nothing it
//! acknowledged, and never ends up with an address owned twice.
//!
//! The parent test re-runs this test binary as a child (`child_worker`, ignored
//! unless `SARENA_DURABILITY_DIR` is set) that prints one line per acknowledged
//! operation; the parent kills it with SIGKILL after a varying number of lines,
//! reopens the store and checks every acknowledged operation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use sarena_core::api::{
    AllocateRequest, Attachment, Daemon, EndpointCreate, EndpointSpec, Inspect as _, PodRef,
};
use sarena_core::node::{NodeConfig, Registry};

const DIR_ENV: &str = "SARENA_DURABILITY_DIR";
const ROUND_ENV: &str = "SARENA_DURABILITY_ROUND";

/// A runtime for calling the node's `Daemon` interface from a plain thread.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Runs one call of the node's `Daemon` interface to completion on this thread.
fn block_on<F: std::future::Future>(call: F) -> F::Output {
    runtime().block_on(call)
}

fn owner(name: &str) -> Attachment {
    Attachment {
        container_id: name.to_owned(),
        ifname: "eth0".to_owned(),
    }
}

/// What the child acknowledged for one owner.
#[derive(Debug, Default, Clone)]
struct Acked {
    address: Option<IpAddr>,
    endpoint: bool,
    deleted: bool,
}

/// The child: 3 threads allocating, creating endpoints and deleting, until killed.
#[test]
#[ignore = "run by crash_during_operations_loses_nothing_acknowledged as a child process"]
fn child_worker() {
    let (Ok(dir), Ok(round)) = (std::env::var(DIR_ENV), std::env::var(ROUND_ENV)) else {
        return;
    };
    let node = Registry::open(Path::new(&dir), NodeConfig::default()).unwrap();
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let node = node.clone();
            let round = round.clone();
            std::thread::spawn(move || {
                let rt = runtime();
                for i in 0..100_000u32 {
                    let name = format!("r{round}-t{t}-{i}");
                    let req = AllocateRequest {
                        owner: owner(&name),
                        pod: PodRef::default(),
                        requested: vec![],
                        pool: None,
                    };
                    let a = rt.block_on(node.allocate(req)).unwrap();
                    let addr = a.addresses[0].address;
                    say(&format!("A {name} {}", addr.addr()));
                    if i % 2 == 0 {
                        let ep = EndpointCreate {
                            spec: EndpointSpec {
                                owner: owner(&name),
                                pod: PodRef::default(),
                                host_ifname: format!("lxc{i}"),
                                host_ifindex: i,
                                host_mac: "02:00:00:00:00:01".parse().unwrap(),
                                pod_mac: "02:00:00:00:00:02".parse().unwrap(),
                                addresses: vec![addr],
                                netns: "/proc/1/ns/net".into(),
                                bandwidth: None,
                                identity: Default::default(),
                            },
                        };
                        rt.block_on(node.create_endpoint(ep)).unwrap();
                        say(&format!("E {name}"));
                    }
                    if i % 5 == 0 {
                        assert!(rt.block_on(node.delete_endpoint(owner(&name))).unwrap());
                        say(&format!("D {name}"));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ACK {line}").unwrap();
    out.flush().unwrap();
}

fn run_round(dir: &Path, round: u32, kill_after: usize, acked: &mut HashMap<String, Acked>) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_worker",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_ENV, dir)
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = 0;
    let mut record = |line: &str| {
        // libtest may print "test child_worker ... " right before the first line.
        let Some((_, ack)) = line.split_once("ACK ") else {
            return false;
        };
        let mut parts = ack.split_whitespace();
        let (Some(op), Some(name)) = (parts.next(), parts.next()) else {
            return false;
        };
        if !matches!(op, "A" | "E" | "D") {
            return false;
        }
        let entry = acked.entry(name.to_owned()).or_default();
        match op {
            "A" => entry.address = parts.next().map(|a| a.parse().unwrap()),
            "E" => entry.endpoint = true,
            _ => entry.deleted = true,
        }
        true
    };
    for line in lines.by_ref() {
        if record(&line.unwrap()) {
            seen += 1;
            if seen >= kill_after {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL
    // Lines written before the kill were acknowledged too.
    for line in lines {
        match line {
            Ok(line) => {
                record(&line);
            }
            Err(_) => break,
        }
    }
    child.wait().unwrap();
    assert!(
        seen >= kill_after,
        "round {round}: the child died early after {seen} lines"
    );
}

/// `("r3-t0", 5)` from `"r3-t0-5"`.
fn split_name(name: &str) -> (&str, u32) {
    let (thread, i) = name
        .rsplit_once('-')
        .unwrap_or_else(|| panic!("bad name {name:?}"));
    (thread, i.parse().unwrap())
}

fn check(dir: &Path, acked: &HashMap<String, Acked>) {
    let node = Registry::open(dir, NodeConfig::default()).unwrap();
    let report = node.open_report().clone();
    assert!(report.orphan_addresses_removed.is_empty(), "{report:?}");
    assert!(report.allocations_repaired.is_empty(), "{report:?}");
    assert!(report.endpoints_without_allocation.is_empty(), "{report:?}");
    let state = block_on(node.ipam_state()).unwrap();
    let mut addresses = HashSet::new();
    let mut held: HashMap<String, IpAddr> = HashMap::new();
    for r in &state.allocations {
        assert!(addresses.insert(r.address), "{} owned twice", r.address);
        held.insert(r.owner.container_id.clone(), r.address);
    }
    let endpoints: HashSet<String> = block_on(node.endpoints())
        .unwrap()
        .into_iter()
        .map(|e| e.spec.owner.container_id)
        .collect();
    // The operation in flight at the kill may or may not have committed: a thread's
    // last owner may be gone if a deletion was due for it (every 5th).
    let mut last: HashMap<&str, u32> = HashMap::new();
    for name in acked.keys() {
        let (thread, i) = split_name(name);
        let max = last.entry(thread).or_insert(i);
        *max = (*max).max(i);
    }
    for (name, a) in acked {
        let (thread, i) = split_name(name);
        let delete_in_flight = i % 5 == 0 && last.get(thread) == Some(&i);
        if a.deleted || (delete_in_flight && !held.contains_key(name)) {
            assert!(
                !held.contains_key(name) && !endpoints.contains(name),
                "{name} deleted, is back"
            );
            continue;
        }
        if let Some(addr) = a.address {
            assert_eq!(
                held.get(name),
                Some(&addr),
                "acknowledged allocation of {name} lost"
            );
        }
        if a.endpoint {
            assert!(
                endpoints.contains(name),
                "acknowledged endpoint {name} lost"
            );
            let rec = state
                .allocations
                .iter()
                .find(|r| r.owner.container_id == *name)
                .unwrap();
            assert_eq!(
                rec.lease_expires_at, None,
                "{name}: endpoint committed without its lease cleared"
            );
        }
    }
    for name in &endpoints {
        assert!(
            held.contains_key(name),
            "endpoint {name} without allocation"
        );
    }
}

#[test]
fn crash_during_operations_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = HashMap::new();
    for round in 0..8u32 {
        let kill_after = 20 + (round as usize * 37) % 90;
        run_round(dir.path(), round, kill_after, &mut acked);
        check(dir.path(), &acked);
    }
    assert!(acked.values().filter(|a| a.endpoint).count() > 20);
}

#[test]
fn reopen_without_clean_shutdown_keeps_everything_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = HashMap::new();
    {
        let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
        let rt = runtime();
        for i in 0..300 {
            let name = format!("inproc-t0-{i}");
            let req = AllocateRequest {
                owner: owner(&name),
                pod: PodRef::default(),
                requested: vec![],
                pool: None,
            };
            let addr = rt.block_on(node.allocate(req)).unwrap().addresses[0]
                .address
                .addr();
            acked.insert(
                name,
                Acked {
                    address: Some(addr),
                    ..Acked::default()
                },
            );
        }
        // Dropped here with no shutdown call: nothing is pending, every commit is durable.
    }
    check(dir.path(), &acked);
}
