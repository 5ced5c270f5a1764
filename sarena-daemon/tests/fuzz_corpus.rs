//! Replays the daemon API fuzz corpus (`fuzz/corpus/daemon_api`, kept in the
//! repository) through the real router over a real `Registry`, with the fuzz
//! target's own invariants (`fuzz/api/model.rs`): an answer within 5 s,
//! never a 5xx, always JSON, no state change from a rejected request. The
//! fuzzer itself runs with `cargo +nightly fuzz run daemon_api` (fuzz/README.md);
//! this keeps what it found exercised on every `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../fuzz/api/model.rs"]
mod model;

use std::path::Path;

use arbitrary::{Arbitrary, Unstructured};
use sarena_core::node::{NodeConfig, Registry};

#[tokio::test]
async fn the_daemon_api_fuzz_corpus_replays_cleanly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/daemon_api");
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| panic!("{}: {e}", corpus.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 100, "only {} corpus entries", files.len());
    // tmpfs when there is one: the store fsyncs every commit.
    let dir = tempfile::Builder::new()
        .prefix("sarena-corpus")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let node = Registry::open(dir.path(), NodeConfig::default()).unwrap();
    let mut replayed = 0;
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        // As libfuzzer-sys decodes a typed input; what does not decode, it skips.
        let Ok(input) = model::Input::arbitrary_take_rest(Unstructured::new(&bytes)) else {
            continue;
        };
        model::run(&node, &input, |request| {
            sarena_daemon::routes::handle(&node, request)
        })
        .await;
        replayed += 1;
    }
    assert!(
        replayed * 2 >= files.len(),
        "{replayed} of {} decoded",
        files.len()
    );
}
