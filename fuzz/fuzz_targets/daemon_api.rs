//! The daemon API: structured request sequences (see `api/model.rs`) through
//! `sarena-daemon`'s real router over a real `Registry` (redb on tmpfs).
//!
//! Invariants (checked by the model): an answer within 5 s, never a 5xx,
//! always JSON, and no state change from a rejected request.
#![no_main]

#[path = "../api/model.rs"]
mod model;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sarena_core::node::{Registry, NodeConfig};

struct Harness {
    runtime: tokio::runtime::Runtime,
    node: Registry,
    _dir: tempfile::TempDir,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        // tmpfs: the store fsyncs every commit.
        let dir = tempfile::Builder::new()
            .prefix("sarena-fuzz")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("a temp dir");
        let node = Registry::open(dir.path(), NodeConfig::default()).expect("a node");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Harness {
            runtime,
            node,
            _dir: dir,
        }
    })
}

fuzz_target!(|input: model::Input| {
    let h = harness();
    h.runtime.block_on(model::run(&h.node, &input, |request| {
        sarena_daemon::routes::handle(&h.node, request)
    }));
});
