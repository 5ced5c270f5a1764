//! The eBPF object (Sarena's TC programs) embedded at build time.
//!
//! `build.rs` builds `sarena-ebpf/sarena-ebpf-programs` (into the target
//! dir's `ebpf-programs`, shared by every profile). When
//! the eBPF toolchain was missing, `AYA_BUILD_SKIP=1` was set, or the
//! programs' sources were not there (the packaged crate), the embedded
//! object is empty and [`ebpf_object`] returns `None`: the daemon must then
//! refuse the `ebpf` dataplane mode with [`not_embedded`]'s error (and can
//! still run in `kernel` mode).

/// The object's bytes (8-byte aligned, as aya requires), or `None` when the
/// daemon was built without the eBPF toolchain.
pub fn ebpf_object() -> Option<&'static [u8]> {
    let object: &'static [u8] =
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sarena-ebpf"));
    (!object.is_empty()).then_some(object)
}

/// Why this build has no eBPF object (build.rs's words), empty when it has one.
const MISSING: &str = env!("SARENA_EBPF_MISSING");

/// What the daemon says when the `ebpf` dataplane mode is asked for and
/// [`ebpf_object`] is `None`: why, and what to do.
pub fn not_embedded() -> String {
    let why = if MISSING.is_empty() {
        "its eBPF object is empty"
    } else {
        MISSING
    };
    format!(
        "this sarena-daemon has no eBPF object: {why}. Build sarena-daemon from the Sarena \
         repository after scripts/setup-ebpf.sh (the pinned nightly with rust-src, and \
         bpf-linker; SARENA_EBPF_REQUIRED=1 makes their absence a build error), or choose \
         dataplane = \"kernel\""
    )
}
