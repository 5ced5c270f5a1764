use std::cell::Cell;
use std::sync::{Arc, Mutex};

use sarena_plugin::api::{DaemonError, IpamState, MockDaemon, MockInspect, PoolState};
use sarena_plugin::links::MockLinks;
use sarena_plugin::netavark::NetworkSettings;
use sarena_plugin::plugin::Plugin;
use serde_json::{Value, json};

use super::*;

/// Backends handing out the mocks they hold; each call is counted.
#[derive(Default)]
struct Mocks {
    inspect: Mutex<Option<MockInspect>>,
    daemon: Mutex<Option<MockDaemon>>,
    settings: Mutex<Vec<NetworkSettings>>,
}

impl Backends for Mocks {
    fn inspect(
        &self,
        _network: &str,
        settings: &NetworkSettings,
    ) -> Result<Box<dyn sarena_plugin::api::Inspect>, NetavarkError> {
        self.settings.lock().unwrap().push(settings.clone());
        Ok(Box::new(self.inspect.lock().unwrap().take().unwrap()))
    }

    fn plugin(&self, _network: &str, settings: &NetworkSettings) -> Result<Plugin, NetavarkError> {
        self.settings.lock().unwrap().push(settings.clone());
        let daemon = self.daemon.lock().unwrap().take().unwrap();
        let mut links = MockLinks::new();
        links.expect_remove_pod_link().returning(|_, _| Ok(false));
        links.expect_release_netns().return_const(());
        Ok(Plugin::new(Arc::new(daemon), Arc::new(links)))
    }
}

fn network(extra: Value) -> Value {
    let mut n = json!({"name": "sn", "id": "1234", "driver": "sarena", "ipv6_enabled": false,
        "internal": false, "dns_enabled": false,
        "options": {"daemon-endpoint": "/run/test/sarena.sock"}});
    if let (Some(n), Some(extra)) = (n.as_object_mut(), extra.as_object()) {
        n.extend(extra.clone());
    }
    n
}

fn call(args: &[&str], stdin: Value, backends: &Mocks) -> (Value, bool) {
    let (out, ok) = run(
        args.iter().copied(),
        || Ok(stdin.to_string().into_bytes()),
        backends,
    );
    assert!(out.ends_with('\n'), "{out:?}");
    (serde_json::from_str(&out).unwrap(), ok)
}

#[test]
fn info_reads_no_stdin() {
    let read = Cell::new(false);
    let (out, ok) = run(
        ["info"],
        || {
            read.set(true);
            Ok(Vec::new())
        },
        &Mocks::default(),
    );
    assert!(ok && !read.get());
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["api_version"], json!("1.0.0"));
    assert_eq!(v["version"], json!(env!("CARGO_PKG_VERSION")));
}

#[test]
fn create_prints_the_completed_network_from_the_daemon_named_by_the_options() {
    let mut inspect = MockInspect::new();
    inspect.expect_ipam_state().times(1).returning(|| {
        Ok(IpamState {
            pools: vec![PoolState {
                name: "default".into(),
                cidr: "10.0.10.0/24".parse().unwrap(),
                gateway: "10.0.10.1".parse().unwrap(),
                namespaces: vec![],
                allocated: 0,
                capacity: 253,
            }],
            allocations: vec![],
        })
    });
    let mocks = Mocks {
        inspect: Mutex::new(Some(inspect)),
        ..Mocks::default()
    };
    let (out, ok) = call(&["create"], network(json!({})), &mocks);
    assert!(ok, "{out}");
    assert_eq!(
        out["subnets"],
        json!([{"subnet": "10.0.10.0/24", "gateway": "10.0.10.1"}])
    );
    assert_eq!(out["ipam_options"], json!({"driver": "sarena"}));
    assert_eq!(out["name"], json!("sn"));
    assert_eq!(
        mocks.settings.lock().unwrap()[0].daemon_endpoint.as_deref(),
        Some("/run/test/sarena.sock")
    );
}

#[test]
fn a_refused_network_is_an_error_object_and_no_daemon_is_built() {
    let mocks = Mocks::default();
    let (out, ok) = call(&["create"], network(json!({"dns_enabled": true})), &mocks);
    assert!(!ok);
    let msg = out["error"].as_str().unwrap();
    assert!(msg.contains("`dns_enabled`"), "{msg}");
    assert!(mocks.settings.lock().unwrap().is_empty());
    let exec = json!({"container_id": "abc123", "container_name": "web",
        "network": network(json!({"routes": [{"destination": "10.9.0.0/16"}]})),
        "network_options": {"interface_name": "eth0"}});
    let (out, ok) = call(&["setup", "/run/netns/x"], exec, &mocks);
    assert!(
        !ok && out["error"].as_str().unwrap().contains("`routes`"),
        "{out}"
    );
    assert!(mocks.settings.lock().unwrap().is_empty());
}

#[test]
fn setup_with_the_daemon_down_says_which_daemon() {
    let mut daemon = MockDaemon::new();
    daemon.expect_config().returning(|| {
        Err(DaemonError::Unreachable {
            endpoint: "/run/test/sarena.sock".into(),
            source: "connection refused".into(),
        })
    });
    let mocks = Mocks {
        daemon: Mutex::new(Some(daemon)),
        ..Mocks::default()
    };
    let exec = json!({"container_id": "abc123", "container_name": "web",
        "network": network(json!({})), "network_options": {"interface_name": "eth0"}});
    let (out, ok) = call(&["setup", "/run/netns/x"], exec, &mocks);
    assert!(!ok);
    let msg = out["error"].as_str().unwrap();
    assert!(
        msg.starts_with("setup of container \"web\" on network \"sn\" failed"),
        "{msg}"
    );
    assert!(
        msg.contains("/run/test/sarena.sock") && msg.contains("connection refused"),
        "{msg}"
    );
}

#[test]
fn teardown_goes_ahead_on_a_network_create_would_refuse() {
    let mut daemon = MockDaemon::new();
    daemon
        .expect_delete_endpoint_and_veth()
        .times(1)
        .returning(|_| {
            Ok(sarena_plugin::api::Deleted {
                deleted: true,
                veth_removal: true,
            })
        });
    let mocks = Mocks {
        daemon: Mutex::new(Some(daemon)),
        ..Mocks::default()
    };
    let exec = json!({"container_id": "abc123", "container_name": "web",
        "network": network(json!({"dns_enabled": true, "options": {
            "daemon-endpoint": "/run/test/sarena.sock", "mtu": "1400"}})),
        "network_options": {"interface_name": "eth0"}});
    let (out, ok) = run(
        ["teardown", "/run/netns/x"],
        || Ok(exec.to_string().into_bytes()),
        &mocks,
    );
    assert!(ok, "{out}");
    assert_eq!(out, "");
    assert_eq!(
        mocks.settings.lock().unwrap()[0].daemon_endpoint.as_deref(),
        Some("/run/test/sarena.sock")
    );
}

#[test]
fn bad_calls_are_error_objects_naming_what_is_wrong() {
    let mocks = Mocks::default();
    for (args, stdin, what) in [
        (vec!["update"], json!({}), "unknown subcommand \"update\""),
        (
            vec!["setup"],
            json!({}),
            "setup: the network namespace path argument is missing",
        ),
        (
            vec!["create"],
            json!({"name": 1}),
            "create: cannot decode the network config",
        ),
        (
            vec!["teardown", "/run/netns/x"],
            json!([]),
            "teardown: cannot decode",
        ),
    ] {
        let (out, ok) = call(&args, stdin, &mocks);
        assert!(!ok, "{args:?}");
        let msg = out["error"].as_str().unwrap();
        assert!(msg.contains(what), "{args:?}: {msg}");
    }
    let (out, ok) = run(["create"], || Err(std::io::Error::other("too big")), &mocks);
    assert!(
        !ok && out.contains("create: cannot read stdin: too big"),
        "{out}"
    );
}
