//! The eBPF object (Sarena's TC programs) embedded at build time.
//!
//! `build.rs` builds `sarena-ebpf/sarena-ebpf-programs` with aya-build. When
//! the eBPF toolchain was missing or `AYA_BUILD_SKIP=1` was set, the embedded
//! object is empty and [`ebpf_object`] returns `None`: the daemon must then
//! refuse the `ebpf` dataplane mode with a clear error (and can still run in
//! `kernel` mode).

/// The object's bytes (8-byte aligned, as aya requires), or `None` when the
/// daemon was built without the eBPF toolchain.
pub fn ebpf_object() -> Option<&'static [u8]> {
    let object: &'static [u8] =
        aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sarena-ebpf"));
    (!object.is_empty()).then_some(object)
}
