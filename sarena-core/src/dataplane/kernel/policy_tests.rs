use super::*;
use crate::api::{Attachment, EndpointSpec, PodRef};
use crate::policy::{EntryKey, IpcacheEntry, RuleId};

fn endpoint(ifindex: u32, namespace: &str, name: &str) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            owner: Attachment {
                container_id: format!("c{ifindex}"),
                ifname: "eth0".into(),
            },
            pod: PodRef {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                uid: None,
            },
            host_ifname: format!("lxc{ifindex}"),
            host_ifindex: ifindex,
            host_mac: "02:00:00:00:00:01".parse().unwrap(),
            pod_mac: "0a:00:00:00:00:02".parse().unwrap(),
            addresses: Vec::new(),
            netns: "/var/run/netns/x".into(),
            bandwidth: None,
            identity: Default::default(),
        },
        created_at: 0,
    }
}

fn compiled() -> CompiledPolicy {
    let mut c = CompiledPolicy::default();
    for (prefix, identity) in [
        ("10.0.0.2/32", 300),
        ("10.0.0.3/32", 301),
        ("10.0.0.1/32", 1),
    ] {
        let entry = IpcacheEntry { identity, flags: 0 };
        c.ipcache.insert(prefix.parse().unwrap(), entry);
    }
    let mut db = EndpointPolicy {
        ingress_isolated: true,
        ..Default::default()
    };
    let key = EntryKey {
        direction: Direction::Ingress,
        peer: 300,
        proto: 6,
        port: 8080,
        port_bits: 16,
    };
    db.entries.insert(key, RuleId(0));
    c.endpoints.insert(PodKey::new("shop", "db"), db);
    c.endpoints
        .insert(PodKey::new("shop", "web"), EndpointPolicy::default());
    c.namespace_isolation.insert("shop".into(), (true, false));
    c
}

/// The `add element` line of `set` in `script`.
fn elements_of<'a>(script: &'a str, set: &str) -> Option<&'a str> {
    let prefix = format!("add element inet t {set} {{ ");
    script.lines().find_map(|l| l.strip_prefix(prefix.as_str()))
}

#[test]
fn nothing_is_written_before_the_engines_first_state() {
    let mut p = KernelPolicy::default();
    p.attached(&endpoint(7, "shop", "db"));
    assert_eq!(p.script("t"), None);
}

#[test]
fn an_isolated_endpoint_gets_its_entries_as_address_ranges() {
    let mut p = KernelPolicy::default();
    p.attached(&endpoint(7, "shop", "db"));
    p.attached(&endpoint(8, "shop", "web"));
    p.attached(&endpoint(9, "shop", "new")); // the engine has not seen it
    let mut plain = endpoint(10, "x", "y");
    plain.spec.pod = PodRef::default(); // not a Kubernetes pod
    p.attached(&plain);
    p.set_compiled(Arc::new(compiled()));
    let script = p.script("t").unwrap();
    assert_eq!(elements_of(&script, "ingress_isolated"), Some("7, 9 }"));
    assert_eq!(elements_of(&script, "egress_isolated"), None);
    assert_eq!(elements_of(&script, "host4"), Some("10.0.0.1 }"));
    assert_eq!(
        elements_of(&script, "in4"),
        Some("7 . 10.0.0.2 . 6 . 8080 }")
    );
    assert_eq!(elements_of(&script, "in_any4"), None);
    assert!(script.contains("flush set inet t in4"));
    assert!(script.contains("counter name ingress_denied drop"));

    // No isolated endpoint left: the table goes.
    p.detached(&endpoint(7, "shop", "db"));
    p.detached(&endpoint(9, "shop", "new"));
    assert_eq!(p.script("t"), Some(remove_script("t")));
}

#[test]
fn the_fail_closed_script_isolates_both_ways() {
    let s = fail_closed_script("t", 12);
    assert!(s.contains("add element inet t ingress_isolated { 12 }"));
    assert!(s.contains("add element inet t egress_isolated { 12 }"));
}
