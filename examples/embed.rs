//! A container runtime giving a network namespace its network with Sarena,
//! in a handful of calls (needs root and a running `sarena-daemon`).
//!
//! Shell equivalent: `ip netns add demo`, then CNI ADD and DEL with `sarena-cni`.
//!
//! ```text
//! ip netns add demo
//! cargo run -p sarena-examples --example embed -- /var/run/netns/demo [DAEMON_SOCKET]
//! ip netns del demo
//! ```

use std::path::PathBuf;

use sarena_core::api::{Attachment, PodRef};
use sarena_core::cni::Version;
use sarena_core::plugin::{AddRequest, DelRequest, Plugin};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let netns = PathBuf::from(
        args.next()
            .ok_or("usage: embed NETNS_PATH [DAEMON_SOCKET]")?,
    );
    let socket = args.next();

    let plugin = Plugin::connect(socket.as_deref())?;
    let attachment = Attachment {
        container_id: "embed-example".into(),
        ifname: "eth0".into(),
    };
    let result = plugin
        .add(&AddRequest {
            attachment: attachment.clone(),
            netns: netns.clone(),
            pod: PodRef {
                namespace: Some("default".into()),
                name: Some("embed".into()),
                uid: None,
            },
            requested_ips: vec![],
            requested_mac: None,
            version: Version::V1_1_0,
            bandwidth: None,
            chain_check: None,
        })
        .await?;
    for ip in &result.ips {
        println!(
            "{} got {} (gateway {:?})",
            netns.display(),
            ip.address,
            ip.gateway
        );
    }
    plugin
        .del(&DelRequest {
            attachment,
            netns: Some(netns),
        })
        .await?;
    println!("removed again");
    Ok(())
}
