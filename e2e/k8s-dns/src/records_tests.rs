//! Unit tests of [`resolve`] over a hand-built view.

use super::*;
use crate::view::{Endpoint, Port, Service};

fn port(name: &str, protocol: &str, port: u16) -> Port {
    Port {
        name: name.into(),
        protocol: protocol.into(),
        port,
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn endpoint(addr: &str, hostname: Option<&str>, ready: bool, ports: &[Port]) -> Endpoint {
    Endpoint {
        ip: ip(addr),
        hostname: hostname.map(str::to_owned),
        ready,
        ports: ports.to_vec(),
    }
}

/// The test cluster: default/{kubernetes, web, db (headless), pnr
/// (headless, publishes not-ready), ext (ExternalName)} and other/pending
/// (no ClusterIP yet).
pub(crate) fn view() -> View {
    let mut v = View::default();
    let mut svc = |ns: &str, name: &str, kind, ports, publish_not_ready| {
        let s = Service {
            kind,
            ports,
            publish_not_ready,
        };
        v.services.insert(Key::new(ns, name), s);
    };
    let cluster = |ips: &[&str]| ServiceKind::ClusterIp(ips.iter().map(|s| ip(s)).collect());
    svc(
        "default",
        "kubernetes",
        cluster(&["10.96.0.1"]),
        vec![port("https", "tcp", 443)],
        false,
    );
    let web_ports = vec![port("http", "tcp", 80), port("dns", "udp", 53)];
    svc(
        "default",
        "web",
        cluster(&["10.96.0.20", "fd00:10:96::20"]),
        web_ports,
        false,
    );
    svc(
        "default",
        "db",
        ServiceKind::Headless,
        vec![port("mysql", "tcp", 3306)],
        false,
    );
    svc("default", "pnr", ServiceKind::Headless, vec![], true);
    svc(
        "default",
        "ext",
        ServiceKind::ExternalName("Example.COM".into()),
        vec![],
        false,
    );
    svc("other", "pending", cluster(&[]), vec![], false);
    let mysql = [port("mysql", "tcp", 13306)];
    v.endpoints.insert(
        Key::new("default", "db"),
        vec![
            endpoint("10.244.1.5", Some("db-0"), true, &mysql),
            endpoint("10.244.1.6", None, true, &mysql),
            endpoint("10.244.1.7", Some("db-2"), false, &mysql),
        ],
    );
    v.endpoints.insert(
        Key::new("default", "pnr"),
        vec![endpoint(
            "10.244.2.9",
            Some("p-0"),
            false,
            &[port("web", "tcp", 8080)],
        )],
    );
    v
}

pub(crate) fn zone() -> Zone {
    Zone {
        origin: Name::from_ascii("cluster.local.").unwrap(),
        ttl: 5,
        serial: 1,
    }
}

fn ask(name: &str, qtype: RecordType) -> Answer {
    resolve(&view(), &zone(), &Name::from_ascii(name).unwrap(), qtype)
}

fn data(records: &[Record]) -> Vec<String> {
    records.iter().map(|r| r.data.to_string()).collect()
}

fn assert_found(a: &Answer, want: &[&str]) {
    assert_eq!(a.rcode, ResponseCode::NoError, "{a:?}");
    assert!(a.authoritative);
    assert_eq!(data(&a.answers), want, "{a:?}");
    assert!(a.authorities.is_empty());
}

fn assert_nodata(a: &Answer) {
    assert_eq!(a.rcode, ResponseCode::NoError, "{a:?}");
    assert!(a.authoritative);
    assert!(a.answers.is_empty(), "{a:?}");
    assert_eq!(a.authorities.len(), 1);
    assert_eq!(a.authorities[0].record_type(), RecordType::SOA);
}

fn assert_nxdomain(a: &Answer, apex: &str) {
    assert_eq!(a.rcode, ResponseCode::NXDomain, "{a:?}");
    assert!(a.authoritative);
    assert!(a.answers.is_empty());
    assert_eq!(a.authorities.len(), 1);
    assert_eq!(a.authorities[0].record_type(), RecordType::SOA);
    assert_eq!(a.authorities[0].name.to_string(), apex);
    assert_eq!(a.authorities[0].ttl, 5);
}

#[test]
fn a_cluster_ip_service_resolves_to_its_address_per_family() {
    let a = ask("web.default.svc.cluster.local.", RecordType::A);
    assert_found(&a, &["10.96.0.20"]);
    assert_eq!(a.answers[0].ttl, 5);
    assert_found(
        &ask("web.default.svc.cluster.local.", RecordType::AAAA),
        &["fd00:10:96::20"],
    );
    assert_found(
        &ask("web.default.svc.cluster.local.", RecordType::ANY).clone(),
        &["10.96.0.20", "fd00:10:96::20"],
    );
}

#[test]
fn names_are_case_insensitive() {
    let a = ask("WeB.Default.SVC.Cluster.LOCAL.", RecordType::A);
    assert_found(&a, &["10.96.0.20"]);
    assert_eq!(
        a.answers[0].name.to_string(),
        "web.default.svc.cluster.local."
    );
    assert_found(
        &ask("DB-0.db.default.svc.cluster.local.", RecordType::A),
        &["10.244.1.5"],
    );
}

#[test]
fn a_missing_name_is_nxdomain_and_an_existing_name_without_the_type_is_nodata() {
    assert_nxdomain(
        &ask("missing.default.svc.cluster.local.", RecordType::A),
        "cluster.local.",
    );
    // A search path tried first by a pod in namespace `default`.
    let searched = "kubernetes.default.default.svc.cluster.local.";
    assert_nxdomain(&ask(searched, RecordType::A), "cluster.local.");
    assert_nxdomain(
        &ask("nons.svc.cluster.local.", RecordType::A),
        "cluster.local.",
    );
    assert_nxdomain(&ask("foo.cluster.local.", RecordType::A), "cluster.local.");
    assert_nodata(&ask("web.default.svc.cluster.local.", RecordType::TXT));
    assert_nodata(&ask("default.svc.cluster.local.", RecordType::A));
    assert_nodata(&ask("svc.cluster.local.", RecordType::A));
    assert_nodata(&ask("pod.cluster.local.", RecordType::A));
    // A service with no ClusterIP allocated yet exists but has no address.
    assert_nodata(&ask("pending.other.svc.cluster.local.", RecordType::A));
}

#[test]
fn a_headless_service_resolves_to_its_ready_endpoints() {
    let db = "db.default.svc.cluster.local.";
    assert_found(&ask(db, RecordType::A), &["10.244.1.5", "10.244.1.6"]);
    assert_nodata(&ask(db, RecordType::AAAA));
    // publishNotReadyAddresses: the not-ready endpoint is published.
    assert_found(
        &ask("pnr.default.svc.cluster.local.", RecordType::A),
        &["10.244.2.9"],
    );
    assert_found(
        &ask("p-0.pnr.default.svc.cluster.local.", RecordType::A),
        &["10.244.2.9"],
    );
}

#[test]
fn headless_endpoints_are_named_by_hostname_or_dashed_address() {
    let name = |n: &str| format!("{n}.db.default.svc.cluster.local.");
    assert_found(&ask(&name("db-0"), RecordType::A), &["10.244.1.5"]);
    assert_found(&ask(&name("10-244-1-6"), RecordType::A), &["10.244.1.6"]);
    // Not ready: no name.
    assert_nxdomain(&ask(&name("db-2"), RecordType::A), "cluster.local.");
    // With a hostname, the dashed address is no name of it.
    assert_nxdomain(&ask(&name("10-244-1-5"), RecordType::A), "cluster.local.");
    // A ClusterIP service has no endpoint names.
    let web = "db-0.web.default.svc.cluster.local.";
    assert_nxdomain(&ask(web, RecordType::A), "cluster.local.");
}

#[test]
fn srv_of_a_cluster_ip_service_targets_the_service_with_its_addresses_additional() {
    let a = ask("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV);
    assert_found(&a, &["0 100 80 web.default.svc.cluster.local."]);
    assert_eq!(data(&a.additionals), ["10.96.0.20", "fd00:10:96::20"]);
    let dns = ask("_DNS._UDP.web.default.svc.cluster.local.", RecordType::SRV);
    assert_found(&dns, &["0 100 53 web.default.svc.cluster.local."]);
    // The port is known with another protocol only.
    let wrong = ask("_http._udp.web.default.svc.cluster.local.", RecordType::SRV);
    assert_nxdomain(&wrong, "cluster.local.");
    // `_tcp.<svc>` is an empty non-terminal; `_sctp.<svc>` does not exist.
    assert_nodata(&ask("_tcp.web.default.svc.cluster.local.", RecordType::SRV));
    assert_nxdomain(
        &ask("_sctp.web.default.svc.cluster.local.", RecordType::SRV),
        "cluster.local.",
    );
    // An A question at an SRV name: NODATA, no additionals.
    let a = ask("_http._tcp.web.default.svc.cluster.local.", RecordType::A);
    assert_nodata(&a);
    assert!(a.additionals.is_empty());
}

#[test]
fn srv_of_a_headless_service_targets_each_ready_endpoint() {
    let a = ask("_mysql._tcp.db.default.svc.cluster.local.", RecordType::SRV);
    assert_found(
        &a,
        &[
            "0 100 13306 db-0.db.default.svc.cluster.local.",
            "0 100 13306 10-244-1-6.db.default.svc.cluster.local.",
        ],
    );
    let additional: Vec<String> = a
        .additionals
        .iter()
        .map(|r| format!("{} {}", r.name, r.data))
        .collect();
    assert_eq!(
        additional,
        [
            "db-0.db.default.svc.cluster.local. 10.244.1.5",
            "10-244-1-6.db.default.svc.cluster.local. 10.244.1.6",
        ]
    );
}

#[test]
fn an_external_name_service_is_a_cname_for_any_type() {
    let ext = "ext.default.svc.cluster.local.";
    for qtype in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::TXT,
    ] {
        let a = ask(ext, qtype);
        assert_found(&a, &["example.com."]);
        assert_eq!(a.answers[0].record_type(), RecordType::CNAME);
    }
    assert_nxdomain(
        &ask("_http._tcp.ext.default.svc.cluster.local.", RecordType::SRV),
        "cluster.local.",
    );
}

#[test]
fn ptr_of_cluster_ips_and_headless_endpoints() {
    let ptr = |n: &str| ask(n, RecordType::PTR);
    assert_found(
        &ptr("1.0.96.10.in-addr.arpa."),
        &["kubernetes.default.svc.cluster.local."],
    );
    assert_found(
        &ptr("5.1.244.10.IN-ADDR.ARPA."),
        &["db-0.db.default.svc.cluster.local."],
    );
    assert_found(
        &ptr("6.1.244.10.in-addr.arpa."),
        &["10-244-1-6.db.default.svc.cluster.local."],
    );
    let v6 = "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.";
    assert_found(&ptr(v6), &["web.default.svc.cluster.local."]);
    // Not ready, unknown, malformed: no such name.
    assert_nxdomain(&ptr("7.1.244.10.in-addr.arpa."), "in-addr.arpa.");
    assert_nxdomain(&ptr("9.9.9.9.in-addr.arpa."), "in-addr.arpa.");
    assert_nxdomain(&ptr("x.0.96.10.in-addr.arpa."), "in-addr.arpa.");
    assert_nxdomain(&ptr("256.0.96.10.in-addr.arpa."), "in-addr.arpa.");
    assert_nxdomain(&ptr("1.0.ip6.arpa."), "ip6.arpa.");
    assert_nodata(&ask("1.0.96.10.in-addr.arpa.", RecordType::A));
}

#[test]
fn pod_names_resolve_to_the_dashed_address() {
    let v4 = "10-244-1-99.default.pod.cluster.local.";
    assert_found(&ask(v4, RecordType::A), &["10.244.1.99"]);
    assert_nodata(&ask(v4, RecordType::AAAA));
    let v6 = "fd00-10-244--5.any.pod.cluster.local.";
    assert_found(&ask(v6, RecordType::AAAA), &["fd00:10:244::5"]);
    assert_nxdomain(
        &ask("not-an-ip.default.pod.cluster.local.", RecordType::A),
        "cluster.local.",
    );
    assert_nodata(&ask("default.pod.cluster.local.", RecordType::A));
}

#[test]
fn the_schema_version_and_the_apex() {
    assert_found(
        &ask("dns-version.cluster.local.", RecordType::TXT),
        &["1.1.0"],
    );
    let soa = ask("cluster.local.", RecordType::SOA);
    assert_eq!(soa.answers.len(), 1);
    assert_eq!(soa.answers[0].record_type(), RecordType::SOA);
    assert_found(
        &ask("cluster.local.", RecordType::NS),
        &["ns.dns.cluster.local."],
    );
    assert_nodata(&ask("cluster.local.", RecordType::A));
}

#[test]
fn a_name_outside_the_zones_is_refused() {
    for name in ["example.com.", "local.", "cluster.local.example.", "arpa."] {
        let a = ask(name, RecordType::A);
        assert_eq!(a.rcode, ResponseCode::Refused, "{name}");
        assert!(!a.authoritative);
        assert!(a.answers.is_empty() && a.authorities.is_empty());
    }
}

#[test]
fn another_zone_is_served_when_configured() {
    let zone = Zone {
        origin: Name::from_ascii("k8s.test.").unwrap(),
        ..zone()
    };
    let q = |n: &str| resolve(&view(), &zone, &Name::from_ascii(n).unwrap(), RecordType::A);
    assert_found(&q("web.default.svc.k8s.test."), &["10.96.0.20"]);
    assert_eq!(
        q("web.default.svc.cluster.local.").rcode,
        ResponseCode::Refused
    );
    let p = resolve(
        &view(),
        &zone,
        &Name::from_ascii("1.0.96.10.in-addr.arpa.").unwrap(),
        RecordType::PTR,
    );
    assert_found(&p, &["kubernetes.default.svc.k8s.test."]);
}
