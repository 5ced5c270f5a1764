//! The uninstall's node-device steps against the real kernel, in a
//! throwaway network namespace with veth "uplinks": Sarena's network hooks
//! removed by the maps they use (never another pin dir's), the `clsact`
//! removed only when the host-changes ledger says Sarena added it and no
//! filter is left, the pins removed; a dry run changes nothing. Also the
//! kernel host stack's removal and the ledger's sysctl round trip.
//!
//! Privileged (root, and the eBPF object for the eBPF cases): `#[ignore]`d
//! unless included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_core::dataplane::ebpf::teardown::{
    remove_added_clsacts, remove_network_hooks, remove_pins,
};
use sarena_core::dataplane::kernel::teardown::remove_host_stack;
use sarena_core::dataplane::{Dataplane, KernelDataplane, NodeNetwork};
use sarena_core::host_ledger::{ClsactAdded, HostLedger, restore_sysctls};
use sarena_test_support::{
    PinDir, TestNetns, block_on_in_netns, require_ebpf_object, require_root, tc_program_ids,
    tc_programs,
};

/// A namespace with the veth "uplinks" `names` (each with a peer `NAME-p`).
fn netns_with(names: &[&str]) -> TestNetns {
    let ns = TestNetns::new();
    for name in names {
        let peer = format!("{name}-p");
        ns.exec(&[
            "ip", "link", "add", name, "type", "veth", "peer", "name", &peer,
        ]);
        ns.exec(&["ip", "link", "set", name, "up"]);
    }
    ns
}

/// The qdiscs of `dev` in `ns`, as `tc qdisc show` prints them.
fn qdiscs(ns: &TestNetns, dev: &str) -> String {
    ns.exec(&["tc", "qdisc", "show", "dev", dev])
}

fn has_clsact(ns: &TestNetns, dev: &str) -> bool {
    qdiscs(ns, dev).contains("clsact")
}

/// The filters on one hook of `dev` in `ns`.
fn filters(ns: &TestNetns, dev: &str, hook: &str) -> String {
    ns.exec(&["tc", "filter", "show", "dev", dev, hook])
}

/// Whether the kernel still has the program `id`.
fn program_exists(id: u32) -> bool {
    std::process::Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .output()
        .unwrap()
        .status
        .success()
}

/// Waits (up to 2 s) until none of `ids` is loaded: programs are freed
/// after an RCU grace period once their last user is gone.
fn programs_gone(ids: &[u32]) -> bool {
    for _ in 0..40 {
        if !ids.iter().any(|id| program_exists(*id)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// What a test runs in the namespace needs: the object, a pin dir, a
/// ledger dir.
struct Setup {
    object: Vec<u8>,
    pins: PinDir,
    ledger_dir: tempfile::TempDir,
}

impl Setup {
    fn new(test: &str) -> Setup {
        require_root(test);
        Setup {
            object: require_ebpf_object(test),
            pins: PinDir::new(),
            ledger_dir: tempfile::tempdir().unwrap(),
        }
    }

    fn pin_dir(&self) -> PathBuf {
        self.pins.0.clone()
    }

    fn ledger(&self) -> HostLedger {
        HostLedger::in_dir(self.ledger_dir.path())
    }
}

/// Opens a dataplane on `pin_dir` with `ledger` and hooks `devices`, in
/// the namespace; returns the program ids found on them, then drops the
/// dataplane (as a stopped daemon leaves its filters).
fn attach_in(
    ns: &TestNetns,
    object: &[u8],
    pin_dir: &Path,
    ledger: HostLedger,
    devices: &[&str],
) -> Vec<u32> {
    let (object, pin_dir) = (object.to_vec(), pin_dir.to_owned());
    let devices: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
    block_on_in_netns(&ns.path(), move || async move {
        let dp = AyaDataplane::open(&object, &pin_dir)
            .unwrap()
            .with_ledger(ledger);
        let mut ids = Vec::new();
        for dev in &devices {
            dp.attach_network_hook(dev).await.unwrap();
            assert_eq!(tc_programs(dev), (1, 1), "{dev}");
            let (ingress, egress) = tc_program_ids(dev);
            ids.extend(ingress.into_iter().chain(egress));
        }
        ids
    })
}

/// The three eBPF steps in order, in the namespace.
fn teardown_in(
    ns: &TestNetns,
    pin_dir: &Path,
    ledger: &HostLedger,
    dry_run: bool,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (pin_dir, ledger) = (pin_dir.to_owned(), ledger.clone());
    block_on_in_netns(&ns.path(), move || async move {
        let hooks = remove_network_hooks(&pin_dir, dry_run).await.unwrap();
        let read = ledger.read().unwrap();
        let clsacts = remove_added_clsacts(&read, dry_run).await.unwrap();
        let pins = remove_pins(&pin_dir, dry_run).unwrap();
        (hooks, clsacts, pins)
    })
}

fn ifindex_in(ns: &TestNetns, dev: &str) -> u32 {
    let dev = dev.to_owned();
    block_on_in_netns(&ns.path(), move || async move {
        nix::net::if_::if_nametoindex(dev.as_str()).unwrap()
    })
}

#[test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
fn a_clsact_sarena_added_goes_with_its_hooks_and_pins() {
    let s = Setup::new("a_clsact_sarena_added_goes_with_its_hooks_and_pins");
    let ns = netns_with(&["upa"]);
    assert!(!has_clsact(&ns, "upa"));
    let ids = attach_in(&ns, &s.object, &s.pin_dir(), s.ledger(), &["upa"]);
    assert_eq!(
        s.ledger().read().unwrap().clsact,
        vec![ClsactAdded {
            ifindex: ifindex_in(&ns, "upa"),
            ifname: "upa".into()
        }]
    );

    let (hooks, clsacts, pins) = teardown_in(&ns, &s.pin_dir(), &s.ledger(), false);
    assert_eq!(
        hooks,
        vec![
            "removed filter from_network from upa ingress",
            "removed filter to_network from upa egress"
        ]
    );
    assert_eq!(clsacts, vec!["removed clsact from upa"]);
    assert_eq!(
        pins,
        vec![format!("removed pin dir {}", s.pin_dir().display())]
    );
    assert!(!has_clsact(&ns, "upa"), "{}", qdiscs(&ns, "upa"));
    assert!(!s.pin_dir().exists());
    assert!(programs_gone(&ids), "programs {ids:?} still loaded");

    // A second run finds nothing.
    let again = teardown_in(&ns, &s.pin_dir(), &s.ledger(), false);
    assert_eq!(again, (vec![], vec![], vec![]));
}

#[test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
fn a_clsact_that_was_there_or_holds_others_filters_stays() {
    let s = Setup::new("a_clsact_that_was_there_or_holds_others_filters_stays");
    let ns = netns_with(&["upb", "upc"]);
    // upb: a clsact with a foreign filter before Sarena.
    ns.exec(&["tc", "qdisc", "add", "dev", "upb", "clsact"]);
    foreign_filter(&ns, "upb", "egress", "5");
    attach_in(&ns, &s.object, &s.pin_dir(), s.ledger(), &["upb", "upc"]);
    let recorded: Vec<String> = s
        .ledger()
        .read()
        .unwrap()
        .clsact
        .into_iter()
        .map(|c| c.ifname)
        .collect();
    assert_eq!(recorded, vec!["upc"], "upb had its clsact already");
    // upc: someone else puts a filter on the clsact Sarena added.
    foreign_filter(&ns, "upc", "ingress", "7");

    let (hooks, clsacts, _) = teardown_in(&ns, &s.pin_dir(), &s.ledger(), false);
    assert_eq!(hooks.len(), 4, "{hooks:?}");
    assert_eq!(
        clsacts,
        vec!["left clsact on upc: filters of others remain"]
    );
    for dev in ["upb", "upc"] {
        assert!(has_clsact(&ns, dev), "{dev}: {}", qdiscs(&ns, dev));
        assert_eq!(tc_programs_in(&ns, dev), (0, 0), "{dev}");
    }
    assert!(filters(&ns, "upb", "egress").contains("pref 5 u32"));
    assert!(filters(&ns, "upc", "ingress").contains("pref 7 u32"));
}

/// Someone else's filter on `hook` of `dev` at `prio`: a `u32` filter
/// (the kernels the tests run on need not have `matchall` or actions).
fn foreign_filter(ns: &TestNetns, dev: &str, hook: &str, prio: &str) {
    ns.exec(&[
        "tc", "filter", "add", "dev", dev, hook, "prio", prio, "u32", "match", "u32", "0", "0",
    ]);
}

/// [`tc_programs`] of `dev` in `ns`.
fn tc_programs_in(ns: &TestNetns, dev: &str) -> (usize, usize) {
    let dev = dev.to_owned();
    block_on_in_netns(&ns.path(), move || async move { tc_programs(&dev) })
}

#[test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
fn only_this_pin_dirs_hooks_are_removed() {
    // Two "nodes" sharing a bpffs (and here a namespace): each its own pins.
    let one = Setup::new("only_this_pin_dirs_hooks_are_removed");
    let two = Setup::new("only_this_pin_dirs_hooks_are_removed");
    let ns = netns_with(&["upd", "upe"]);
    attach_in(&ns, &one.object, &one.pin_dir(), one.ledger(), &["upd"]);
    let ids_two = attach_in(&ns, &two.object, &two.pin_dir(), two.ledger(), &["upe"]);

    let (hooks, clsacts, _) = teardown_in(&ns, &one.pin_dir(), &one.ledger(), false);
    let (removed, kept): (Vec<_>, Vec<_>) = hooks.iter().partition(|l| l.starts_with("removed "));
    assert_eq!(
        removed,
        vec![
            "removed filter from_network from upd ingress",
            "removed filter to_network from upd egress"
        ]
    );
    // The other node's filters are seen, and said to be kept.
    assert_eq!(kept.len(), 2, "{hooks:?}");
    assert!(
        kept.iter()
            .all(|l| l.starts_with("kept filter") && l.contains(" on upe ")),
        "{hooks:?}"
    );
    assert_eq!(clsacts, vec!["removed clsact from upd"]);
    assert_eq!(tc_programs_in(&ns, "upd"), (0, 0));
    assert_eq!(tc_programs_in(&ns, "upe"), (1, 1), "the other node's stay");
    assert!(two.pin_dir().exists());
    let (ingress, egress) = {
        let ns_path = ns.path();
        block_on_in_netns(&ns_path, || async { tc_program_ids("upe") })
    };
    assert_eq!(
        ingress.into_iter().chain(egress).collect::<Vec<_>>(),
        ids_two
    );

    let (hooks, _, _) = teardown_in(&ns, &two.pin_dir(), &two.ledger(), false);
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert_eq!(tc_programs_in(&ns, "upe"), (0, 0));
}

#[test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
fn a_dry_run_lists_and_changes_nothing() {
    let s = Setup::new("a_dry_run_lists_and_changes_nothing");
    let ns = netns_with(&["upf"]);
    attach_in(&ns, &s.object, &s.pin_dir(), s.ledger(), &["upf"]);

    let (hooks, clsacts, pins) = teardown_in(&ns, &s.pin_dir(), &s.ledger(), true);
    assert_eq!(
        hooks,
        vec![
            "would remove filter from_network from upf ingress",
            "would remove filter to_network from upf egress"
        ]
    );
    assert_eq!(clsacts, vec!["would remove clsact from upf"]);
    assert_eq!(
        pins,
        vec![format!("would remove pin dir {}", s.pin_dir().display())]
    );
    assert_eq!(tc_programs_in(&ns, "upf"), (1, 1));
    assert!(has_clsact(&ns, "upf"));
    assert!(s.pin_dir().exists());

    // Pins removed first (a wrong --bpf-pin-dir, or another's removal): the
    // hooks can no longer be told this node's, so they are kept, and the
    // lines say so; the clsact under them too.
    let pin_dir = s.pin_dir();
    let removed = remove_pins(&pin_dir, false).unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    let (hooks, clsacts, pins) = teardown_in(&ns, &s.pin_dir(), &s.ledger(), false);
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert!(
        hooks
            .iter()
            .all(|l| l.starts_with("kept filter") && l.contains("uses no map pinned under")),
        "{hooks:?}"
    );
    assert_eq!(clsacts.len(), 1, "{clsacts:?}");
    assert!(clsacts[0].starts_with("left clsact on upf"), "{clsacts:?}");
    assert!(pins.is_empty());
    assert_eq!(tc_programs_in(&ns, "upf"), (1, 1));
}

fn node_network(pools: &[&str], gateways: &[&str]) -> NodeNetwork {
    NodeNetwork {
        gateways: gateways.iter().map(|g| g.parse().unwrap()).collect(),
        pools: pools.iter().map(|p| p.parse().unwrap()).collect(),
        masquerade: true,
        exempt: Vec::new(),
    }
}

/// The nft tables of `ns`, as `family name` lines.
fn nft_tables(ns: &TestNetns) -> String {
    ns.exec(&["nft", "list", "tables"])
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn the_host_stack_goes_and_foreign_objects_stay() {
    require_root("the_host_stack_goes_and_foreign_objects_stay");
    let ns = TestNetns::new();
    ns.exec(&["nft", "add", "table", "inet", "sarenax"]);
    ns.exec(&["nft", "add", "table", "inet", "sarena_policy"]);
    let lines = block_on_in_netns(&ns.path(), || async {
        let kernel = KernelDataplane::new().unwrap();
        kernel
            .setup(&node_network(
                &["10.252.0.0/24", "fd00:252::/64"],
                &["10.252.0.1", "fd00:252::1"],
            ))
            .await
            .unwrap();
        let dry = remove_host_stack(true).await.unwrap();
        assert!(dry.iter().all(|l| l.starts_with("would remove")), "{dry:?}");
        dry
    });
    assert_eq!(
        lines,
        vec![
            "would remove link sarena_host (and its peer sarena_net)",
            "would remove nft table ip sarena",
            "would remove nft table ip6 sarena",
            "would remove nft table inet sarena",
            "would remove nft table arp sarena",
            "would remove nft table inet sarena_policy",
        ]
    );
    assert!(ns.exec(&["ip", "link", "show"]).contains("sarena_host"));
    assert!(nft_tables(&ns).contains("table ip6 sarena"));

    let removed = block_on_in_netns(&ns.path(), || async {
        remove_host_stack(false).await.unwrap()
    });
    assert_eq!(removed.len(), 6, "{removed:?}");
    assert!(
        removed.iter().all(|l| l.starts_with("removed ")),
        "{removed:?}"
    );
    let links = ns.exec(&["ip", "link", "show"]);
    assert!(
        !links.contains("sarena_host") && !links.contains("sarena_net"),
        "{links}"
    );
    assert_eq!(nft_tables(&ns).trim(), "table inet sarenax");
    let again = block_on_in_netns(&ns.path(), || async {
        remove_host_stack(false).await.unwrap()
    });
    assert!(again.is_empty(), "{again:?}");

    // A link of that name without Sarena's mark is someone else's.
    ns.exec(&[
        "ip",
        "link",
        "add",
        "sarena_host",
        "type",
        "veth",
        "peer",
        "name",
        "other_peer",
    ]);
    let left = block_on_in_netns(&ns.path(), || async {
        remove_host_stack(false).await.unwrap()
    });
    assert_eq!(
        left,
        vec!["left link sarena_host: not Sarena's (group 0x0)"]
    );
    assert!(ns.exec(&["ip", "link", "show"]).contains("sarena_host"));
}

/// Runs the kernel dataplane's set-up with a ledger in `ns`, then the
/// sysctl restore; returns the ledger's sysctls, ip_forward after the
/// set-up, the restore's lines and ip_forward after it.
fn forwarding_round_trip(ns: &TestNetns, before: &str) -> (usize, String, Vec<String>, String) {
    ns.exec(&["sysctl", "-qw", &format!("net.ipv4.ip_forward={before}")]);
    let dir = tempfile::tempdir().unwrap();
    let ledger = HostLedger::in_dir(dir.path());
    let forwarding = || std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    block_on_in_netns(&ns.path(), move || async move {
        let kernel = KernelDataplane::new().unwrap().with_ledger(ledger.clone());
        kernel
            .setup(&node_network(&["10.253.0.0/24"], &["10.253.0.1"]))
            .await
            .unwrap();
        let after_setup = forwarding().trim().to_owned();
        let read = ledger.read().unwrap();
        let lines = restore_sysctls(&read, false).unwrap();
        kernel.teardown().await.unwrap();
        (
            read.sysctls.len(),
            after_setup,
            lines,
            forwarding().trim().to_owned(),
        )
    })
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn forwarding_written_by_the_dataplane_is_put_back() {
    require_root("forwarding_written_by_the_dataplane_is_put_back");
    let ns = TestNetns::new();
    let (recorded, during, lines, after) = forwarding_round_trip(&ns, "0");
    assert_eq!((recorded, during.as_str()), (1, "1"));
    assert_eq!(lines, vec!["restored sysctl net/ipv4/ip_forward = 0"]);
    assert_eq!(after, "0");

    // On already, nothing was overwritten and nothing is written back.
    let (recorded, during, lines, after) = forwarding_round_trip(&ns, "1");
    assert_eq!((recorded, during.as_str()), (0, "1"));
    assert!(lines.is_empty(), "{lines:?}");
    assert_eq!(after, "1");
}

#[test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
fn a_sysctl_changed_since_is_left() {
    require_root("a_sysctl_changed_since_is_left");
    let ns = TestNetns::new();
    ns.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    let dir = tempfile::tempdir().unwrap();
    let ledger = HostLedger::in_dir(dir.path());
    let lines = block_on_in_netns(&ns.path(), move || async move {
        let kernel = KernelDataplane::new().unwrap().with_ledger(ledger.clone());
        kernel
            .setup(&node_network(&["10.254.0.0/24"], &["10.254.0.1"]))
            .await
            .unwrap();
        // Someone else's record of a key (Sarena wrote 0 over 1) that was
        // changed to 2 since.
        ledger
            .record_sysctl("net/ipv4/conf/all/rp_filter", "1", "0")
            .unwrap();
        std::fs::write("/proc/sys/net/ipv4/conf/all/rp_filter", "2").unwrap();
        let lines = restore_sysctls(&ledger.read().unwrap(), false).unwrap();
        kernel.teardown().await.unwrap();
        lines
    });
    assert_eq!(
        lines,
        vec![
            "restored sysctl net/ipv4/ip_forward = 0".to_string(),
            "left sysctl net/ipv4/conf/all/rp_filter = 2: changed since Sarena wrote 0".into(),
        ]
    );
    assert_eq!(
        ns.exec(&["sysctl", "-n", "net.ipv4.conf.all.rp_filter"])
            .trim(),
        "2"
    );
}
