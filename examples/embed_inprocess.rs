//! A Rust container runtime networking two pods with sarena-core alone: IPAM
//! and the endpoint registry ([`Registry`]), veth provisioning
//! ([`RtnetlinkLinks`]) and the eBPF dataplane ([`AyaDataplane`]) as library
//! calls, driven by the plugin's own ADD and DEL sequences ([`Plugin`]).
//! No `sarena-cni` binary and no `sarena-daemon` process are involved.
//!
//! Needs root, bpffs and the eBPF object that sarena-daemon's build embeds
//! (`SARENA_EBPF_OBJECT`, or the path as third argument; scripts/test.sh
//! shows where cargo puts it). The dataplane here has no host stack
//! (`AyaDataplane::with_host_stack` adds routes and masquerading for traffic
//! to the host and beyond), so the example touches nothing node-wide: the
//! pods reach each other through the programs alone.
//!
//! ```text
//! ip netns add a && ip netns add b
//! cargo run -p sarena-examples --example embed_inprocess -- /var/run/netns/a /var/run/netns/b
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sarena_core::api::{Attachment, Inspect, PodRef};
use sarena_core::cni::Version;
use sarena_core::dataplane::ebpf::AyaDataplane;
use sarena_core::links::RtnetlinkLinks;
use sarena_core::node::{NodeConfig, Registry, WithDataplane};
use sarena_core::plugin::{AddRequest, DelRequest, Plugin};

const CONFIG: &str = r#"
dataplane = "ebpf"
[[ipam.pools]]
name = "embedded"
cidrs = ["10.251.0.0/24"]
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: embed_inprocess NETNS_A NETNS_B [EBPF_OBJECT]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(netns_a), Some(netns_b)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    let object_path = args
        .get(2)
        .cloned()
        .or_else(|| std::env::var("SARENA_EBPF_OBJECT").ok())
        .ok_or("no eBPF object: pass its path or set SARENA_EBPF_OBJECT")?;
    let object = std::fs::read(&object_path)?;

    // The runtime's own state and pins, private to this run.
    let run_id = format!("sarena-embed-{}", std::process::id());
    let state_dir = std::env::temp_dir().join(&run_id);
    let pin_dir = Path::new("/sys/fs/bpf").join(&run_id);
    let _cleanup = Cleanup(state_dir.clone(), pin_dir.clone());

    // IPAM + registry, the eBPF dataplane, and the two composed.
    let node = Registry::open(&state_dir, NodeConfig::from_toml_str(CONFIG)?)?;
    let dataplane = Arc::new(AyaDataplane::open(&object, &pin_dir)?);
    let daemon = Arc::new(WithDataplane::new(Arc::new(node), dataplane.clone()));
    // ADD and DEL against the in-process daemon and the host's netlink.
    let plugin = Plugin::new(daemon.clone(), Arc::new(RtnetlinkLinks::new()?));

    let mut pods = Vec::new();
    for (name, netns) in [("a", netns_a), ("b", netns_b)] {
        let attachment = Attachment {
            container_id: format!("embedded-{name}"),
            ifname: "eth0".into(),
        };
        let result = plugin
            .add(&AddRequest {
                attachment: attachment.clone(),
                netns: PathBuf::from(netns),
                pod: PodRef {
                    namespace: Some("default".into()),
                    name: Some(name.into()),
                    uid: None,
                },
                requested_ips: vec![],
                requested_mac: None,
                version: Version::V1_1_0,
                bandwidth: None,
                chain_check: None,
            })
            .await?;
        let address = result.ips[0].address;
        println!("pod {name}: {address} in {netns}");
        pods.push((attachment, netns.clone(), address.addr()));
    }

    // Pod a pings pod b; the programs redirect the frames veth to veth.
    let ping = Command::new("nsenter")
        .arg(format!("--net={}", pods[0].1))
        .args(["ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "1"])
        .arg(pods[1].2.to_string())
        .output()?;
    let summary = String::from_utf8_lossy(&ping.stdout);
    let received = summary
        .lines()
        .find(|l| l.contains("received"))
        .unwrap_or("no ping summary");
    println!("a -> b: {received}");

    // The per-endpoint counters, read from the pinned map.
    for stats in daemon.endpoint_stats().await? {
        if let Some(c) = &stats.counters {
            println!(
                "{} ({}): from_pod_packets={} redirected_packets={} arp_replies={} drops={}",
                stats.endpoint.spec.owner.container_id,
                stats.endpoint.spec.host_ifname,
                c.get("from_pod_packets"),
                c.get("redirected_packets"),
                c.get("arp_replies"),
                c.total_drops()
            );
        }
    }

    for (attachment, netns, _) in pods {
        let netns = Some(PathBuf::from(netns));
        plugin.del(&DelRequest { attachment, netns }).await?;
    }
    println!("endpoints left: {}", daemon.endpoints().await?.len());
    Ok(())
}

/// Removes the run's state and pins (whatever happened).
struct Cleanup(PathBuf, PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = AyaDataplane::purge(&self.1);
    }
}
