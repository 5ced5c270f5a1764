//! The check on an endpoint's `netns` before the dataplane opens it (the
//! eBPF dataplane puts a pod's egress limit inside it): it must not be the
//! node's own network namespace, or the limit's qdisc and filter would
//! land on a host interface of the pod's interface name.

use std::os::unix::fs::MetadataExt;

/// An endpoint whose `netns` is the host's (answered `bad_request`;
/// nothing is registered or touched).
#[derive(Debug, thiserror::Error)]
#[error("spec.netns {path} is {which} network namespace, not a pod's")]
pub struct HostNetns {
    /// The path given.
    pub path: String,
    /// Whose namespace it is.
    pub which: &'static str,
}

/// The namespaces a pod's may never be, with how to name them.
const HOST_NAMESPACES: [(&str, &str); 2] = [
    ("/proc/self/ns/net", "the daemon's own"),
    ("/proc/1/ns/net", "pid 1's"),
];

/// Refuses `path` when it is (a path to) the daemon's or pid 1's network
/// namespace, compared by device and inode (so also through a bind mount
/// or `/proc/<pid>/ns/net` of any host process). A path that cannot be
/// read is left to the dataplane.
pub(super) fn check_pod_netns(path: &str) -> Result<(), HostNetns> {
    let Ok(target) = std::fs::metadata(path) else {
        return Ok(());
    };
    for (host, which) in HOST_NAMESPACES {
        if let Ok(host) = std::fs::metadata(host)
            && (host.dev(), host.ino()) == (target.dev(), target.ino())
        {
            return Err(HostNetns {
                path: path.to_owned(),
                which,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_namespace_is_refused_by_any_path() {
        let pid = std::process::id();
        for path in [
            "/proc/self/ns/net".to_owned(),
            format!("/proc/{pid}/ns/net"),
            "/proc/thread-self/ns/net".to_owned(),
        ] {
            let err = check_pod_netns(&path).unwrap_err();
            assert!(err.to_string().contains("spec.netns"), "{err}");
        }
        assert!(check_pod_netns("/var/run/netns/does-not-exist").is_ok());
    }
}
