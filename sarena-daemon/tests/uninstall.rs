//! `sarena-daemon --uninstall` end to end: the real daemon (eBPF
//! dataplane) inside a throwaway netns playing the host, two pods through
//! the real plugin, then the uninstall with the daemon's flags. A live
//! daemon makes it fail and change nothing; a dry run lists and changes
//! nothing; the real run leaves nothing of Sarena's, and a second run
//! finds nothing. Foreign look-alikes (an unmarked `lxc…` veth, the nft
//! table `inet sarenax`) survive.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sarena_core::api::Attachment;
use sarena_test_support::daemon::{Running, Site};
use sarena_test_support::{Cni, TestNetns, require, require_root, unique, workspace_binary};

const POOL: &str = "10.246.0.0/24";
const DECOY_LINK: &str = "lxc0123456789ab";

/// The netns playing the host and the daemon's paths in it.
struct Node {
    host: TestNetns,
    site: Site,
    pin_dir: PathBuf,
    config: PathBuf,
    conflist: PathBuf,
    bin_dir: PathBuf,
    plugin_log: PathBuf,
}

impl Node {
    fn new() -> Node {
        let host = TestNetns::new();
        host.exec(&["ip", "link", "set", "lo", "up"]);
        host.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
        let site = Site::new().in_netns(&host.name);
        let config = site.config(&format!(
            "dataplane = \"ebpf\"\nmasquerade = false\nmtu = 1500\n\
             [[ipam.pools]]\nname = \"t\"\ncidrs = [\"{POOL}\"]\n"
        ));
        let dir = site.dir.path().to_path_buf();
        let bin_dir = dir.join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        std::fs::copy(workspace_binary("sarena-cni"), bin_dir.join("sarena-cni")).unwrap();
        Node {
            pin_dir: PathBuf::from(format!("/sys/fs/bpf/{}", unique("sarena-un"))),
            conflist: dir.join("net.d/10-sarena.conflist"),
            plugin_log: dir.join("sarena-cni.log"),
            host,
            site,
            config,
            bin_dir,
        }
    }

    /// The daemon's path flags, shared by the daemon and the uninstall.
    fn path_args(&self) -> Vec<String> {
        [
            "--config",
            self.config.to_str().unwrap(),
            "--bpf-pin-dir",
            self.pin_dir.to_str().unwrap(),
            "--write-cni-conf",
            self.conflist.to_str().unwrap(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    }

    async fn start(&self) -> Running {
        // Our own conflist source: the plugin log in the site, not /var/log.
        let source = self.site.dir.path().join("source.conflist");
        let body = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "sarena",
            "plugins": [{
                "type": "sarena-cni",
                "daemon-endpoint": self.site.socket(),
                "log-file": self.plugin_log,
            }],
        });
        std::fs::write(&source, body.to_string()).unwrap();
        let mut args = self.path_args();
        args.extend(["--cni-conf-source".to_owned(), source.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let daemon = self.site.start(&args).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.conflist.exists() {
            assert!(Instant::now() < deadline, "no conflist written");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        daemon
    }

    /// `sarena-daemon --uninstall` with the daemon's flags and `extra`, in
    /// the host netns (with a bpffs, as the daemon had).
    fn uninstall(&self, extra: &[&str]) -> Output {
        let daemon = workspace_binary("sarena-daemon");
        Command::new("ip")
            .args(["netns", "exec", &self.host.name, "sh", "-c"])
            .arg("mount -t bpf bpf /sys/fs/bpf && exec \"$0\" \"$@\"")
            .arg(daemon)
            .arg("--uninstall")
            .arg("--socket")
            .arg(self.site.socket())
            .arg("--state-dir")
            .arg(self.site.state_dir())
            .arg("--cni-bin-dir")
            .arg(&self.bin_dir)
            .args(self.path_args())
            .args(extra)
            .output()
            .unwrap()
    }

    fn links(&self) -> String {
        self.host.exec(&["ip", "-d", "-o", "link", "show"])
    }

    fn tables(&self) -> String {
        self.host.exec(&["nft", "list", "tables"])
    }

    fn ip_forward(&self) -> String {
        self.host
            .exec(&["cat", "/proc/sys/net/ipv4/ip_forward"])
            .trim()
            .to_owned()
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The JSON summary, the last line of stdout.
fn summary(output: &Output) -> serde_json::Value {
    let text = stdout(output);
    let last = text.lines().last().unwrap_or_default().to_owned();
    serde_json::from_str(&last)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{text}\n{}", stderr(output)))
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[tokio::test]
#[ignore = "privileged: needs root and the eBPF object; run as root with --include-ignored (scripts/test.sh)"]
async fn uninstall_removes_sarena_and_only_sarena() {
    let test = "uninstall_removes_sarena_and_only_sarena";
    require_root(test);
    require(
        test,
        sarena_daemon::ebpf_object::ebpf_object().is_some(),
        "the daemon was built without the eBPF object (run scripts/setup-ebpf.sh)",
    );
    let node = Node::new();
    node.host.exec(&[
        "ip", "link", "add", DECOY_LINK, "type", "veth", "peer", "name", "decoy1",
    ]);
    node.host.exec(&["nft", "add", "table", "inet", "sarenax"]);

    let daemon = node.start().await;
    let cni = Cni::new(&node.site.socket(), node.site.dir.path()).in_netns(&node.host.name);
    let pods = [TestNetns::new(), TestNetns::new()];
    for pod in &pods {
        let att = Attachment {
            container_id: pod.name.clone(),
            ifname: "eth0".into(),
        };
        cni.add(&att, &pod.path()).expect_ok("ADD");
    }
    let lxc_links = |links: &str| {
        links
            .lines()
            .filter(|l| l.contains(": lxc") && !l.contains(DECOY_LINK))
            .count()
    };
    assert_eq!(lxc_links(&node.links()), 2, "{}", node.links());
    assert_eq!(node.ip_forward(), "1");

    // A live daemon: refused, nothing changed.
    let (links, tables) = (node.links(), node.tables());
    let refused = node.uninstall(&[]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("stop the daemon first"),
        "{}",
        stderr(&refused)
    );
    assert!(exists(&node.conflist));
    assert_eq!(lxc_links(&node.links()), lxc_links(&links));
    assert_eq!(node.tables(), tables);

    let status = daemon.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "{status}");

    // A dry run lists and changes nothing.
    let dry = node.uninstall(&["--dry-run"]);
    assert_eq!(dry.status.code(), Some(1), "{}", stderr(&dry));
    let listed = stdout(&dry);
    eprintln!("--- dry run ---\n{listed}");
    assert!(listed.contains("would remove conflist"), "{listed}");
    assert_eq!(
        listed.matches("would remove link lxc").count(),
        2,
        "{listed}"
    );
    assert!(listed.contains("would remove plugin"), "{listed}");
    assert_eq!(summary(&dry)["clean"], false);
    assert!(exists(&node.conflist) && exists(&node.bin_dir.join("sarena-cni")));
    assert_eq!(lxc_links(&node.links()), 2);

    // The real run.
    let done = node.uninstall(&[]);
    let report = stdout(&done);
    eprintln!("--- uninstall report ---\n{report}");
    assert_eq!(done.status.code(), Some(0), "{report}\n{}", stderr(&done));
    assert_eq!(summary(&done)["clean"], true, "{report}");
    assert_eq!(summary(&done)["left"], 0, "{report}");
    assert_eq!(summary(&done)["failed"], 0, "{report}");
    let links = node.links();
    assert_eq!(lxc_links(&links), 0, "{links}");
    assert!(!links.contains("sarena_host"), "{links}");
    assert!(links.contains(DECOY_LINK), "the foreign veth went: {links}");
    let tables = node.tables();
    assert!(tables.contains("inet sarenax"), "{tables}");
    assert!(
        !tables.contains("sarena\n") && !tables.contains("sarena_"),
        "{tables}"
    );
    assert_eq!(node.ip_forward(), "0", "{report}");
    for gone in [
        node.conflist.clone(),
        node.bin_dir.join("sarena-cni"),
        node.plugin_log.clone(),
        node.site.state_dir(),
        node.site.socket().parent().unwrap().to_path_buf(),
    ] {
        assert!(
            !exists(&gone),
            "{} is still there:\n{report}",
            gone.display()
        );
    }
    assert!(exists(&node.bin_dir), "the bin dir itself stays");

    // A second run finds nothing.
    let again = node.uninstall(&[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(
        stdout(&again).trim(),
        r#"{"removed":0,"left":0,"failed":0,"clean":true}"#
    );
    let dry_again = node.uninstall(&["--dry-run"]);
    assert_eq!(dry_again.status.code(), Some(0), "{}", stdout(&dry_again));
}

#[tokio::test]
#[ignore = "privileged: needs root; run as root with --include-ignored (scripts/test.sh)"]
async fn a_vxlan_device_left_keeps_the_filter_that_guards_it() {
    require_root("a_vxlan_device_left_keeps_the_filter_that_guards_it");
    let node = Node::new();
    // Marked as Sarena's but not a VXLAN device: the uninstall cannot
    // remove it as one, so it is left; its filter must stay with it.
    node.host.exec(&[
        "ip",
        "link",
        "add",
        "sarena.vxlan",
        "type",
        "veth",
        "peer",
        "name",
        "sxpeer0",
    ]);
    let group = sarena_core::links::LINK_GROUP.to_string();
    node.host
        .exec(&["ip", "link", "set", "sarena.vxlan", "group", &group]);
    node.host
        .exec(&["nft", "add", "table", "inet", "sarena_vxlan"]);

    let run = node.uninstall(&[]);
    let report = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{report}\n{}", stderr(&run));
    assert_eq!(summary(&run)["clean"], false, "{report}");
    assert!(report.contains("left device sarena.vxlan"), "{report}");
    assert!(
        report.contains("kept nft table inet sarena_vxlan"),
        "{report}"
    );
    assert!(node.tables().contains("inet sarena_vxlan"), "{report}");
    assert!(node.links().contains("sarena.vxlan"), "{report}");
}
