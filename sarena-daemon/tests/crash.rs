//! Crash safety of the real daemon: a stream of concurrent allocations and
//! releases, SIGKILL at random moments (22 times), a restart on the same state
//! dir each time, and after every restart the invariants:
//! - no address is owned twice;
//! - every allocation acknowledged (HTTP 200) before the kill is still there,
//!   with the same address, and a repeated allocate still returns it;
//! - every acknowledged release is still released.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sarena_core::api::{Attachment, Daemon, HttpDaemon, Inspect as _};
use sarena_test_support::daemon::{Site, alloc_req, owner};

const KILLS: usize = 22;
const WORKERS: usize = 4;

/// What the workers learned from acknowledged answers.
#[derive(Debug, Clone, Default)]
struct Ledger {
    /// Acknowledged allocations still expected to exist.
    held: HashMap<Attachment, IpAddr>,
    /// Acknowledged releases: these owners must not come back.
    released: HashSet<Attachment>,
}

/// Allocates fresh owners (and now and then releases one it holds) until the
/// daemon dies under it. Calls in flight at the kill are simply not recorded:
/// they may or may not have happened, and the invariants only count acks.
async fn worker(
    client: HttpDaemon,
    round: usize,
    id: usize,
    seed: u64,
    ledger: Arc<Mutex<Ledger>>,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut mine: Vec<Attachment> = Vec::new();
    for n in 0.. {
        if !mine.is_empty() && rng.random_ratio(1, 4) {
            let victim = mine.swap_remove(rng.random_range(0..mine.len()));
            // Unknown outcome until acknowledged: forget it now.
            ledger.lock().unwrap().held.remove(&victim);
            match client.release(victim.clone()).await {
                Ok(true) => {
                    ledger.lock().unwrap().released.insert(victim);
                }
                Ok(false) => panic!("release of acknowledged {victim:?} found nothing"),
                Err(_) => return,
            }
        } else {
            let cid = format!("r{round}w{id}n{n}");
            match client.allocate(alloc_req(&cid)).await {
                Ok(a) => {
                    let addr = a.addresses[0].address.addr();
                    ledger.lock().unwrap().held.insert(owner(&cid), addr);
                    mine.push(owner(&cid));
                }
                Err(_) => return,
            }
        }
    }
}

/// Checks the invariants against the restarted daemon.
async fn check(client: &HttpDaemon, ledger: &Ledger, round: usize) {
    let state = client.ipam_state().await.unwrap();
    let mut by_addr: HashMap<IpAddr, &Attachment> = HashMap::new();
    let mut by_owner: HashMap<&Attachment, IpAddr> = HashMap::new();
    for r in &state.allocations {
        if let Some(other) = by_addr.insert(r.address, &r.owner) {
            panic!(
                "round {round}: {} owned by both {other:?} and {:?}",
                r.address, r.owner
            );
        }
        assert!(
            by_owner.insert(&r.owner, r.address).is_none(),
            "round {round}: {:?} twice",
            r.owner
        );
    }
    let allocated: u64 = state.pools.iter().map(|p| p.allocated).sum();
    assert_eq!(
        allocated,
        state.allocations.len() as u64,
        "round {round}: pool counters"
    );
    for (o, addr) in &ledger.held {
        assert_eq!(
            by_owner.get(o),
            Some(addr),
            "round {round}: acknowledged {o:?} lost"
        );
    }
    for o in &ledger.released {
        assert!(
            !by_owner.contains_key(o),
            "round {round}: released {o:?} came back"
        );
    }
    // A repeated ADD of an acknowledged owner still gets its address.
    if let Some((o, addr)) = ledger.held.iter().next() {
        let again = client.allocate(alloc_req(&o.container_id)).await.unwrap();
        assert_eq!(again.addresses[0].address.addr(), *addr, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_concurrent_allocations_loses_and_duplicates_nothing() {
    let seed: u64 = rand::random();
    eprintln!("crash test seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let site = Site::new();
    let args = ["--log-level", "warn"];
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let started = Instant::now();

    for round in 0..KILLS {
        let daemon = site.start(&args).await;
        let snapshot = ledger.lock().unwrap().clone();
        check(&site.client(), &snapshot, round).await;

        let workers: Vec<_> = (0..WORKERS)
            .map(|id| {
                let client = site.client().with_timeout(Duration::from_secs(3));
                tokio::spawn(worker(client, round, id, rng.random(), ledger.clone()))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.random_range(20..250))).await;
        daemon.kill();
        for w in workers {
            w.await.unwrap();
        }
    }
    let _daemon = site.start(&args).await;
    let snapshot = ledger.lock().unwrap().clone();
    check(&site.client(), &snapshot, KILLS).await;
    let l = ledger.lock().unwrap();
    eprintln!(
        "{KILLS} kills in {:?}: {} acknowledged allocations held, {} releases",
        started.elapsed(),
        l.held.len(),
        l.released.len()
    );
    assert!(
        l.held.len() > KILLS && !l.released.is_empty(),
        "the workers barely ran"
    );
}
