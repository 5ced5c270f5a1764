//! IPAM benchmarks: allocate + release on the default `/16`, with 0 and with 50,000
//! existing allocations (and 25,000 in a fragmented free set), through the in-memory [`Allocator`] alone and through
//! [`Registry`] (each operation one durable redb commit), plus `Registry::open` of a store
//! holding 50,000 allocations (daemon start-up).
//!
//! `cargo bench -p sarena-benches --bench ipam -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use sarena_core::api::{AllocateRequest, Attachment, Daemon, PodRef};
use sarena_core::ipam::Allocator;
use sarena_core::node::{NodeConfig, Registry};
use sarena_core::store::{AllocationEntry, RedbStore};

const PREFILL: [usize; 2] = [0, 50_000];

fn owner(i: usize) -> Attachment {
    Attachment {
        container_id: format!("container-{i:08}"),
        ifname: "eth0".to_owned(),
    }
}

/// An allocator with `n` addresses handed out.
fn allocator_with(n: usize) -> Allocator {
    let mut alloc = Allocator::new(&NodeConfig::default().ipam).unwrap();
    for _ in 0..n {
        alloc.allocate("default", &[]).unwrap();
    }
    alloc
}

/// A state directory whose store holds `n` allocations, written in one transaction.
fn store_with(dir: &Path, n: usize) {
    let mut alloc = allocator_with(0);
    let entries: Vec<AllocationEntry> = (0..n)
        .map(|i| AllocationEntry {
            owner: owner(i),
            pod: PodRef::default(),
            pool: "default".to_owned(),
            addresses: alloc.allocate("default", &[]).unwrap(),
            allocated_at: 1,
            lease_expires_at: None,
        })
        .collect();
    RedbStore::open(dir)
        .unwrap()
        .put_allocations(&entries)
        .unwrap();
}

fn bench_allocator(c: &mut Criterion) {
    let mut group = c.benchmark_group("allocator_slash16");
    for n in PREFILL {
        let mut alloc = allocator_with(n);
        group.bench_function(format!("allocate_release/{n}_existing"), |b| {
            b.iter(|| {
                let got = alloc.allocate("default", &[]).unwrap();
                assert!(alloc.release(black_box(got[0].address.addr())));
            })
        });
    }
    // Worst case for the interval set: every other address of the first 50,000 free
    // again (25,000 one-address intervals).
    let mut alloc = allocator_with(50_000);
    for i in (2..50_002u32).step_by(2) {
        alloc.release(std::net::Ipv4Addr::from(0x0AC8_0000 + i).into());
    }
    group.bench_function("allocate_release/25000_existing_fragmented", |b| {
        b.iter(|| {
            let got = alloc.allocate("default", &[]).unwrap();
            assert!(alloc.release(black_box(got[0].address.addr())));
        })
    });
    group.finish();
}

fn bench_node(c: &mut Criterion) {
    let mut group = c.benchmark_group("node_redb_slash16");
    group.sample_size(20);
    // Through the `Daemon` interface, as the daemon serves it: each commit runs
    // on the runtime's blocking pool.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for n in PREFILL {
        let dir = tempfile::tempdir().unwrap();
        store_with(dir.path(), n);
        let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
        let who = owner(n + 1);
        group.bench_function(format!("allocate_release/{n}_existing"), |b| {
            b.iter(|| {
                let req = AllocateRequest {
                    owner: who.clone(),
                    pod: PodRef::default(),
                    requested: vec![],
                    pool: None,
                };
                rt.block_on(async {
                    black_box(node.allocate(req).await.unwrap());
                    assert!(node.release(who.clone()).await.unwrap());
                })
            })
        });
    }
    let dir = tempfile::tempdir().unwrap();
    store_with(dir.path(), 50_000);
    group.sample_size(10);
    group.bench_function("open/50000_existing", |b| {
        b.iter(|| black_box(Registry::open(dir.path(), NodeConfig::default()).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench_allocator, bench_node);
criterion_main!(benches);
