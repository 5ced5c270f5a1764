//! API round trips over the Unix socket: `HttpDaemon` (the plugin's client) against
//! the daemon's own server and `Registry` state, in process but through a real socket,
//! the server on its own runtime thread, the client on a current-thread runtime like
//! the plugin's.
//!
//! - `api/config`: `GET /v1/daemon/config` on a kept-alive connection.
//! - `api/config_new_client`: a fresh client and connection per call (a plugin run).
//! - `api/allocate_release`: `POST /v1/ipam/allocate` + `DELETE /v1/ipam/allocations/…`
//!   (two durable commits).
//! - `api/add_del`: the plugin's ADD calls (config, allocate, endpoint/create) and its
//!   DEL call (delete endpoint), on one fresh client, as one plugin ADD + DEL would.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sarena_core::api::{
    AllocateRequest, Attachment, Daemon, EndpointCreate, EndpointSpec, HttpDaemon, PodRef,
};
use sarena_core::node::{NodeConfig, Registry};
use sarena_daemon::server::{UnixSocket, serve};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;

struct Bench {
    socket: String,
    client_rt: Runtime,
    _server_rt: Runtime,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

fn start() -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("bench.sock");
    let server_rt = Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let node = Registry::open(&dir.path().join("state"), NodeConfig::default()).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let unix = server_rt
        .block_on(async { UnixSocket::bind(&socket) })
        .unwrap();
    server_rt.spawn(serve(
        Arc::new(node),
        unix,
        None,
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(1),
    ));
    let client_rt = Builder::new_current_thread().enable_all().build().unwrap();
    Bench {
        socket: socket.to_str().unwrap().to_owned(),
        client_rt,
        _server_rt: server_rt,
        _stop: stop,
        _dir: dir,
    }
}

fn owner(n: u64) -> Attachment {
    Attachment {
        container_id: format!("bench{n}"),
        ifname: "eth0".into(),
    }
}

fn alloc_req(n: u64) -> AllocateRequest {
    AllocateRequest {
        owner: owner(n),
        pod: PodRef::default(),
        requested: vec![],
        pool: None,
    }
}

fn api(c: &mut Criterion) {
    let b = start();
    let client = HttpDaemon::new(&b.socket).unwrap();
    let mut group = c.benchmark_group("api");

    group.bench_function("config", |bench| {
        bench.iter(|| b.client_rt.block_on(client.config()).unwrap());
    });

    group.bench_function("config_new_client", |bench| {
        bench.iter(|| {
            let fresh = HttpDaemon::new(&b.socket).unwrap();
            b.client_rt.block_on(fresh.config()).unwrap()
        });
    });

    let mut n = 0u64;
    group.bench_function("allocate_release", |bench| {
        bench.iter(|| {
            n += 1;
            b.client_rt.block_on(async {
                client.allocate(alloc_req(n)).await.unwrap();
                assert!(client.release(owner(n)).await.unwrap());
            });
        });
    });

    group.bench_function("add_del", |bench| {
        bench.iter(|| {
            n += 1;
            let plugin = HttpDaemon::new(&b.socket).unwrap();
            b.client_rt.block_on(async {
                plugin.config().await.unwrap();
                let a = plugin.allocate(alloc_req(n)).await.unwrap();
                plugin
                    .create_endpoint(EndpointCreate {
                        spec: EndpointSpec {
                            owner: owner(n),
                            pod: PodRef::default(),
                            host_ifname: "lxcbench".into(),
                            host_ifindex: 9,
                            host_mac: "02:00:00:00:00:01".parse().unwrap(),
                            pod_mac: "02:00:00:00:00:02".parse().unwrap(),
                            addresses: a.addresses.iter().map(|x| x.address).collect(),
                            netns: "/var/run/netns/bench".into(),
                            bandwidth: None,
                            identity: Default::default(),
                        },
                    })
                    .await
                    .unwrap();
                assert!(plugin.delete_endpoint(owner(n)).await.unwrap());
            });
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = api
}
criterion_main!(benches);
