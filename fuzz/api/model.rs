//! The daemon API fuzz input, shared by the `daemon_api` fuzz target and the
//! test that replays its corpus (sarena-daemon/tests/fuzz_corpus.rs): a
//! sequence of requests, built from structure (the routes, owners drawn from
//! a few so that requests meet, bodies that are mostly well-formed and then
//! damaged) rather than raw bytes, sent through the daemon's real router.
//!
//! Invariants checked on every request: an answer within 5 s; never a 5xx;
//! a JSON body; and a rejected request (4xx) changes nothing (allocations,
//! pools and endpoints are the same before and after).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use arbitrary::Arbitrary;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use sarena_core::api::{Endpoint, GcRequest, IpamState, NodeApi, encode_segment};
use serde_json::{Value, json};

/// At most this many requests per input.
pub const MAX_STEPS: usize = 24;

/// One fuzz input: requests against one daemon, in order.
#[derive(Arbitrary, Debug)]
pub struct Input {
    /// The requests.
    pub steps: Vec<Step>,
}

/// One request.
#[derive(Arbitrary, Debug)]
pub enum Step {
    Config,
    Health,
    Ipam,
    Endpoints,
    Allocate(Body<AllocateBody>),
    Release(Owner),
    CreateEndpoint(Body<EndpointBody>),
    GetEndpoint(Owner),
    DeleteEndpoint(Owner, Query),
    Gc(Body<GcBody>),
    /// Anything at all.
    Raw {
        method: Verb,
        path: String,
        body: Vec<u8>,
    },
}

/// A body: well-formed, damaged, or raw bytes.
#[derive(Arbitrary, Debug)]
pub enum Body<T> {
    Json(T),
    Damaged(T, Damage),
    Bytes(Vec<u8>),
}

/// How a well-formed JSON body is damaged.
#[derive(Arbitrary, Debug)]
pub enum Damage {
    /// Cut after this many bytes.
    Truncate(u16),
    /// An unknown field.
    ExtraField(String),
    /// A field (by index) set to null.
    Null(u8),
    /// A field (by index) given a value of another type.
    Retype(u8, i64),
    /// Wrapped in an array.
    Array,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Verb {
    Get,
    Post,
    Delete,
    Put,
    Head,
}

/// An owner: mostly one of a few, so that requests meet.
#[derive(Arbitrary, Debug, Clone)]
pub struct Owner {
    pub container_id: Id,
    pub ifname: Name,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Id {
    Pick(u8),
    Any(String),
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Name {
    Pick(u8),
    Any(String),
}

/// The query of `DELETE /v1/endpoints/...`.
#[derive(Arbitrary, Debug, Clone)]
pub enum Query {
    None,
    VethRemove,
    AllocationKeep,
    Any(String),
}

#[derive(Arbitrary, Debug)]
pub struct AllocateBody {
    pub owner: Owner,
    pub namespace: Option<String>,
    pub requested: Vec<Address>,
    pub pool: Option<String>,
}

#[derive(Arbitrary, Debug)]
pub struct EndpointBody {
    pub owner: Owner,
    pub host_ifname: Name,
    pub host_ifindex: u32,
    pub host_mac: [u8; 6],
    pub pod_mac: [u8; 6],
    /// The owner's current allocation (so that a registration can succeed),
    /// or these.
    pub addresses: Option<Vec<(Address, u8)>>,
    pub netns: String,
}

#[derive(Arbitrary, Debug)]
pub struct GcBody {
    pub valid: Vec<Owner>,
}

/// An address: mostly in the default pool.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Address {
    InPool(u8),
    V4(u32),
    V6([u8; 16]),
}

impl Address {
    fn ip(self) -> IpAddr {
        match self {
            Address::InPool(n) => IpAddr::V4(Ipv4Addr::new(10, 200, 0, n)),
            Address::V4(n) => IpAddr::V4(Ipv4Addr::from(n)),
            Address::V6(b) => IpAddr::V6(Ipv6Addr::from(b)),
        }
    }
}

fn id(id: &Id) -> String {
    match id {
        Id::Pick(n) => format!("c{}", n % 4),
        Id::Any(s) => s.clone(),
    }
}

fn name(name: &Name) -> String {
    match name {
        Name::Pick(n) => format!("eth{}", n % 2),
        Name::Any(s) => s.clone(),
    }
}

fn owner_json(owner: &Owner) -> Value {
    json!({"container_id": id(&owner.container_id), "ifname": name(&owner.ifname)})
}

fn owner_path(prefix: &str, owner: &Owner) -> String {
    format!(
        "/v1/{prefix}/{}/{}",
        encode_segment(&id(&owner.container_id)),
        encode_segment(&name(&owner.ifname))
    )
}

fn mac(b: &[u8; 6]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What the daemon holds: compared before and after a rejected request.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    ipam: IpamState,
    endpoints: Vec<Endpoint>,
}

/// Reads the daemon's whole state.
pub async fn snapshot(daemon: &dyn NodeApi) -> Snapshot {
    Snapshot {
        ipam: daemon.ipam_state().await.expect("ipam state"),
        endpoints: daemon.endpoints().await.expect("endpoints"),
    }
}

impl EndpointBody {
    fn to_json(&self, state: &Snapshot) -> Value {
        let owner = owner_json(&self.owner);
        let addresses: Vec<String> = match &self.addresses {
            Some(list) => list
                .iter()
                .map(|(a, prefix)| format!("{}/{}", a.ip(), prefix % 130))
                .collect(),
            None => state
                .ipam
                .allocations
                .iter()
                .filter(|r| owner == json!(r.owner))
                .map(|r| format!("{}/16", r.address))
                .collect(),
        };
        json!({
            "owner": owner,
            "host_ifname": name(&self.host_ifname),
            "host_ifindex": self.host_ifindex,
            "host_mac": mac(&self.host_mac),
            "pod_mac": mac(&self.pod_mac),
            "addresses": addresses,
            "netns": self.netns,
        })
    }
}

fn damage(value: Value, damage: &Damage) -> Vec<u8> {
    let field = |value: &mut Value, i: u8| -> Option<String> {
        let keys: Vec<String> = value.as_object()?.keys().cloned().collect();
        keys.get(usize::from(i) % keys.len().max(1)).cloned()
    };
    let mut value = value;
    match damage {
        Damage::Truncate(n) => {
            let mut bytes = value.to_string().into_bytes();
            bytes.truncate(usize::from(*n) % (bytes.len() + 1));
            return bytes;
        }
        Damage::ExtraField(name) => {
            if let Some(map) = value.as_object_mut() {
                map.insert(name.clone(), json!(1));
            }
        }
        Damage::Null(i) => {
            if let Some(key) = field(&mut value, *i) {
                value[&key] = Value::Null;
            }
        }
        Damage::Retype(i, n) => {
            if let Some(key) = field(&mut value, *i) {
                value[&key] = json!(n);
            }
        }
        Damage::Array => value = json!([value]),
    }
    value.to_string().into_bytes()
}

fn body<T>(body: &Body<T>, to_json: impl Fn(&T) -> Value) -> Vec<u8> {
    match body {
        Body::Json(t) => to_json(t).to_string().into_bytes(),
        Body::Damaged(t, d) => damage(to_json(t), d),
        Body::Bytes(b) => b.clone(),
    }
}

/// The request for `step`, given the daemon's state; `None` when it cannot
/// be expressed as an HTTP request at all (an invalid URI).
pub fn request(step: &Step, state: &Snapshot) -> Option<Request<Full<Bytes>>> {
    let (method, path, payload) = match step {
        Step::Config => (Method::GET, "/v1/daemon/config".to_string(), vec![]),
        Step::Health => (Method::GET, "/v1/daemon/health".to_string(), vec![]),
        Step::Ipam => (Method::GET, "/v1/ipam".to_string(), vec![]),
        Step::Endpoints => (Method::GET, "/v1/endpoints".to_string(), vec![]),
        Step::Allocate(b) => (
            Method::POST,
            "/v1/ipam/allocate".to_string(),
            body(b, |a| {
                json!({
                    "owner": owner_json(&a.owner),
                    "pod": {"namespace": a.namespace},
                    "requested": a.requested.iter().map(|x| x.ip()).collect::<Vec<_>>(),
                    "pool": a.pool,
                })
            }),
        ),
        Step::Release(o) => (Method::DELETE, owner_path("ipam/allocations", o), vec![]),
        Step::CreateEndpoint(b) => (
            Method::POST,
            "/v1/endpoint/create".to_string(),
            body(b, |e| e.to_json(state)),
        ),
        Step::GetEndpoint(o) => (Method::GET, owner_path("endpoints", o), vec![]),
        Step::DeleteEndpoint(o, q) => {
            let query = match q {
                Query::None => String::new(),
                Query::VethRemove => "?veth=remove".into(),
                Query::AllocationKeep => "?allocation=keep".into(),
                Query::Any(s) => format!("?{s}"),
            };
            let path = format!("{}{query}", owner_path("endpoints", o));
            (Method::DELETE, path, vec![])
        }
        Step::Gc(b) => (
            Method::POST,
            "/v1/gc".to_string(),
            body(
                b,
                |g| json!({"valid": g.valid.iter().map(owner_json).collect::<Vec<_>>()}),
            ),
        ),
        Step::Raw { method, path, body } => {
            let method = match method {
                Verb::Get => Method::GET,
                Verb::Post => Method::POST,
                Verb::Delete => Method::DELETE,
                Verb::Put => Method::PUT,
                Verb::Head => Method::HEAD,
            };
            (method, path.clone(), body.clone())
        }
    };
    let length = payload.len();
    Request::builder()
        .method(method)
        .uri(path)
        .header("content-length", length)
        .body(Full::new(Bytes::from(payload)))
        .ok()
}

/// Runs `input` against `daemon` through `handle` (the daemon's router),
/// starting from an empty state, and checks the invariants; panics with the
/// step that broke one.
pub async fn run<H, F>(daemon: &dyn NodeApi, input: &Input, handle: H)
where
    H: Fn(Request<Full<Bytes>>) -> F,
    F: std::future::Future<Output = hyper::Response<Full<Bytes>>>,
{
    daemon
        .gc(GcRequest { valid: vec![] })
        .await
        .expect("reset by GC");
    for step in input.steps.iter().take(MAX_STEPS) {
        let before = snapshot(daemon).await;
        let Some(request) = request(step, &before) else {
            continue;
        };
        let answer = tokio::time::timeout(Duration::from_secs(5), handle(request))
            .await
            .unwrap_or_else(|_| panic!("no answer within 5 s to {step:?}"));
        let status = answer.status();
        let bytes = answer
            .into_body()
            .collect()
            .await
            .expect("a full body can be read")
            .to_bytes();
        assert!(
            !status.is_server_error(),
            "{status} for {step:?}: {}",
            String::from_utf8_lossy(&bytes)
        );
        assert!(
            serde_json::from_slice::<Value>(&bytes).is_ok(),
            "not JSON ({status}) for {step:?}: {}",
            String::from_utf8_lossy(&bytes)
        );
        if status.is_client_error() {
            let after = snapshot(daemon).await;
            assert!(after == before, "{status} for {step:?} changed the state");
        }
    }
}
