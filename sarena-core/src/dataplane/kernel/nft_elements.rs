//! Set elements added or deleted over nfnetlink, in one batch (one
//! transaction), without running `nft`: what an ADD and a DEL change in
//! the anti-spoofing sets (`antispoof.rs`). An `nft -f` run is a process
//! start, a ruleset cache fetch and a parse, about 2 ms of an ADD on the
//! kernel dataplane; the batch is one send and its acknowledgements.
//!
//! The messages (the kernel's `nf_tables` netlink interface): a batch
//! begin and end (`NFNL_MSG_BATCH_BEGIN`/`_END`, resource id the nftables
//! subsystem) around one `NFT_MSG_NEWSETELEM` or `NFT_MSG_DELSETELEM` per
//! set, each naming its table and set and listing its elements' keys, each
//! asking for an acknowledgement: the first error the kernel answers fails
//! the whole batch, which it then has not applied.
//!
//! Keys are laid out as nftables lays out a concatenation: each part in
//! its own 32-bit registers, an interface index in host byte order,
//! addresses (and raw header fields) as on the wire.

use std::net::IpAddr;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

use crate::api::Endpoint;
use crate::links::link_local;

const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 0x2;
const NLA_F_NESTED: u16 = 0x8000;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_DATA_VALUE: u16 = 1;

/// The address family of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// `inet`.
    Inet,
    /// `arp`.
    Arp,
}

impl Family {
    fn nfproto(self) -> u8 {
        match self {
            Family::Inet => 1,
            Family::Arp => 3,
        }
    }
}

/// Whether a batch adds or deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    /// Add (an element already there is fine).
    Add,
    /// Delete (a missing element fails the batch).
    Delete,
}

/// Why a batch failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NftElementsError {
    /// The netlink socket could not be used.
    #[error("nfnetlink socket: {call}")]
    Socket {
        /// What failed.
        call: &'static str,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused a message of the batch (nothing was applied).
    #[error("nftables refused the elements of set {set}")]
    Refused {
        /// The set (`family table set`).
        set: String,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
    },
    /// An answer was cut short or malformed.
    #[error("nfnetlink answer malformed")]
    Malformed,
}

/// One set's elements.
struct SetElements {
    family: Family,
    table: String,
    set: String,
    keys: Vec<Vec<u8>>,
}

/// A batch of set-element changes, sent as one transaction.
pub(crate) struct ElementBatch {
    verb: Verb,
    sets: Vec<SetElements>,
}

impl ElementBatch {
    /// An empty batch that adds (or deletes) elements.
    pub(crate) fn new(verb: Verb) -> Self {
        ElementBatch {
            verb,
            sets: Vec::new(),
        }
    }

    /// `keys` into (or out of) `family table set`; no keys, nothing.
    pub(crate) fn set(&mut self, family: Family, table: &str, set: &str, keys: Vec<Vec<u8>>) {
        if !keys.is_empty() {
            self.sets.push(SetElements {
                family,
                table: table.to_owned(),
                set: set.to_owned(),
                keys,
            });
        }
    }

    /// The batch's bytes; sequence numbers from `seq` on.
    fn encode(&self, seq: u32) -> Vec<u8> {
        let mut out = Vec::new();
        message(&mut out, NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, seq, 0, |b| {
            // res_id: the subsystem, big-endian, in the nfgenmsg.
            b[2..4].copy_from_slice(&NFNL_SUBSYS_NFTABLES.to_be_bytes());
        });
        for (i, s) in self.sets.iter().enumerate() {
            let (kind, flags) = match self.verb {
                Verb::Add => (NFT_MSG_NEWSETELEM, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE),
                Verb::Delete => (NFT_MSG_DELSETELEM, NLM_F_REQUEST | NLM_F_ACK),
            };
            let ty = (NFNL_SUBSYS_NFTABLES << 8) | kind;
            let start = out.len();
            message(
                &mut out,
                ty,
                flags,
                seq + 1 + i as u32,
                s.family.nfproto(),
                |_| {},
            );
            attr(&mut out, NFTA_SET_ELEM_LIST_TABLE, &c_string(&s.table));
            attr(&mut out, NFTA_SET_ELEM_LIST_SET, &c_string(&s.set));
            let list = begin_nested(&mut out, NFTA_SET_ELEM_LIST_ELEMENTS);
            for key in &s.keys {
                let elem = begin_nested(&mut out, NFTA_LIST_ELEM);
                let k = begin_nested(&mut out, NFTA_SET_ELEM_KEY);
                attr(&mut out, NFTA_DATA_VALUE, key);
                end_nested(&mut out, k);
                end_nested(&mut out, elem);
            }
            end_nested(&mut out, list);
            let len = (out.len() - start) as u32;
            out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
        }
        let end_seq = seq + 1 + self.sets.len() as u32;
        message(
            &mut out,
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            end_seq,
            0,
            |b| {
                b[2..4].copy_from_slice(&NFNL_SUBSYS_NFTABLES.to_be_bytes());
            },
        );
        out
    }

    /// Sends the batch and waits for every acknowledgement. Blocking.
    pub(crate) fn send(&self) -> Result<(), NftElementsError> {
        if self.sets.is_empty() {
            return Ok(());
        }
        let socket_err = |call| move |source| NftElementsError::Socket { call, source };
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(socket_err("open"))?;
        socket.bind_auto().map_err(socket_err("bind"))?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(socket_err("connect"))?;
        let seq = 1;
        let bytes = self.encode(seq);
        socket.send(&bytes, 0).map_err(socket_err("send"))?;
        let mut pending: Vec<u32> = (0..self.sets.len() as u32).map(|i| seq + 1 + i).collect();
        let mut buf = Vec::with_capacity(64 * 1024);
        while !pending.is_empty() {
            buf.clear();
            let n = socket.recv(&mut buf, 0).map_err(socket_err("receive"))?;
            let mut at = 0;
            while at + NLMSG_HDRLEN <= n {
                let len = u32_at(&buf, at)? as usize;
                if len < NLMSG_HDRLEN || at + len > n {
                    return Err(NftElementsError::Malformed);
                }
                let ty = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
                let seq = u32_at(&buf, at + 8)?;
                if ty == NLMSG_ERROR {
                    let errno = i32::from_ne_bytes(
                        buf.get(at + 16..at + 20)
                            .and_then(|b| b.try_into().ok())
                            .ok_or(NftElementsError::Malformed)?,
                    );
                    if errno != 0 {
                        let i = seq.saturating_sub(2) as usize;
                        let set = self
                            .sets
                            .get(i)
                            .map(|s| format!("{:?} {} {}", s.family, s.table, s.set))
                            .unwrap_or_default();
                        return Err(NftElementsError::Refused {
                            set: set.to_lowercase(),
                            source: std::io::Error::from_raw_os_error(-errno),
                        });
                    }
                    pending.retain(|p| *p != seq);
                }
                at += align4(len);
            }
        }
        Ok(())
    }
}

/// The batches that add (`Verb::Add`) or delete `endpoint`'s elements in
/// the anti-spoofing sets of `table`: its ifindex in both `guarded` sets
/// and one pair per address, its link-local address included (see
/// `antispoof.rs`). For an add, the allowed pairs go first in the batch.
pub(crate) fn endpoint_batch(verb: Verb, table: &str, endpoint: &Endpoint) -> ElementBatch {
    let ifindex = endpoint.spec.host_ifindex.to_ne_bytes();
    let (mut v4, mut v6, mut claimable6) = (Vec::new(), Vec::new(), Vec::new());
    let own = endpoint.spec.addresses.iter().map(|a| a.addr());
    for address in own.chain([IpAddr::V6(link_local(endpoint.spec.pod_mac))]) {
        match address {
            IpAddr::V4(a) => v4.push([&ifindex[..], &a.octets()].concat()),
            IpAddr::V6(a) => {
                v6.push([&ifindex[..], &a.octets()].concat());
                claimable6.push([&ifindex[..], &a.octets()].concat());
            }
        }
    }
    let mut batch = ElementBatch::new(verb);
    for family in [Family::Inet, Family::Arp] {
        batch.set(family, table, "allowed4", v4.clone());
        if family == Family::Inet {
            batch.set(family, table, "allowed6", v6.clone());
            batch.set(family, table, "claimable6", claimable6.clone());
        }
        batch.set(family, table, "guarded", vec![ifindex.to_vec()]);
    }
    batch
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u32_at(buf: &[u8], at: usize) -> Result<u32, NftElementsError> {
    buf.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_ne_bytes)
        .ok_or(NftElementsError::Malformed)
}

fn c_string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Appends a message header (length fixed by the caller for messages with
/// attributes; set here for the bare ones) and an nfgenmsg.
fn message(
    out: &mut Vec<u8>,
    ty: u16,
    flags: u16,
    seq: u32,
    family: u8,
    genmsg: impl FnOnce(&mut [u8]),
) {
    let len = (NLMSG_HDRLEN + NFGENMSG_LEN) as u32;
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    let mut g = [family, 0, 0, 0];
    genmsg(&mut g);
    out.extend_from_slice(&g);
}

fn attr(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = (4 + value.len()) as u16;
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(align4(out.len()), 0);
}

fn begin_nested(out: &mut Vec<u8>, ty: u16) -> usize {
    let at = out.len();
    out.extend_from_slice(&0u16.to_ne_bytes());
    out.extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
    at
}

fn end_nested(out: &mut [u8], at: usize) {
    let len = (out.len() - at) as u16;
    out[at..at + 2].copy_from_slice(&len.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    use super::super::antispoof::tests::endpoint;
    use super::*;

    fn nft(script: &str) {
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "{script}");
    }

    /// Both tables' sets as nft prints them, the table's name taken out.
    fn sets(table: &str) -> String {
        let mut out = String::new();
        for family in ["inet", "arp"] {
            let o = Command::new("nft")
                .args(["list", "table", family, table])
                .output()
                .unwrap();
            assert!(o.status.success());
            let text = String::from_utf8(o.stdout).unwrap();
            let text = text.split("chain").next().unwrap_or_default();
            out.push_str(&text.replace(table, "T"));
        }
        out
    }

    #[test]
    #[ignore = "privileged: needs root (a throwaway netns with nftables tables); run as root with --include-ignored"]
    fn netlink_elements_are_what_the_nft_script_makes_and_go_again() {
        sarena_test_support::require_root(
            "netlink_elements_are_what_the_nft_script_makes_and_go_again",
        );
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let ep = endpoint(7, &["10.1.0.5/24", "fd00::5/64"]);
            let other = endpoint(8, &["10.1.0.6/24"]);
            for t in ["by_script", "by_netlink"] {
                nft(&super::super::antispoof::structure(t));
            }
            nft(&super::super::antispoof::guard_script("by_script", &ep));
            nft(&super::super::antispoof::guard_script("by_script", &other));
            endpoint_batch(Verb::Add, "by_netlink", &ep).send().unwrap();
            endpoint_batch(Verb::Add, "by_netlink", &other)
                .send()
                .unwrap();
            // Adding again is fine, as with the script.
            endpoint_batch(Verb::Add, "by_netlink", &ep).send().unwrap();
            assert_eq!(sets("by_netlink"), sets("by_script"));
            assert!(sets("by_netlink").contains("7 . 10.1.0.5"));

            endpoint_batch(Verb::Delete, "by_netlink", &ep)
                .send()
                .unwrap();
            let left = sets("by_netlink");
            assert!(
                !left.contains("7 . ") && left.contains("8 . 10.1.0.6"),
                "{left}"
            );
            // A missing element fails the whole batch, which changes nothing.
            let err = endpoint_batch(Verb::Delete, "by_netlink", &ep)
                .send()
                .unwrap_err();
            assert!(matches!(err, NftElementsError::Refused { .. }), "{err:?}");
            assert_eq!(sets("by_netlink"), left);
            // A missing table too.
            let err = endpoint_batch(Verb::Add, "absent", &ep).send().unwrap_err();
            assert!(matches!(err, NftElementsError::Refused { .. }), "{err:?}");
        })
        .join()
        .unwrap();
    }
}
