//! NetworkPolicy's read side: `GET /policy/endpoints` ([`PolicyEndpoint`])
//! and `GET /policy/explain?from=…&to=…&port=…&protocol=…`
//! ([`PolicyQuery`] in, [`PolicyExplanation`] out).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::{ApiErrorKind, DaemonError};
use super::path::{decode_segment, encode_segment};

/// The answer of a daemon without NetworkPolicy (outside Kubernetes mode):
/// `unavailable`.
pub fn no_policy() -> DaemonError {
    DaemonError::api(
        ApiErrorKind::Unavailable,
        "NetworkPolicy is enforced in Kubernetes mode only",
    )
}

/// One endpoint of this node as policy sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyEndpoint {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// A policy selects it for ingress: only what a rule allows may enter.
    pub ingress_isolated: bool,
    /// A policy selects it for egress: only what a rule allows may leave.
    pub egress_isolated: bool,
    /// The policies selecting it, `namespace/name`, sorted.
    #[serde(default)]
    pub policies: Vec<String>,
}

/// One side of an explained packet: a pod or an address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyParty {
    /// A pod, by namespace and name (`NS/POD`).
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// An address (any pod's, a node's, outside the cluster).
    Address(IpAddr),
}

impl fmt::Display for PolicyParty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyParty::Pod { namespace, name } => write!(f, "{namespace}/{name}"),
            PolicyParty::Address(ip) => write!(f, "{ip}"),
        }
    }
}

impl FromStr for PolicyParty {
    type Err = String;

    /// `NS/POD` or an IP address.
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(PolicyParty::Address(ip));
        }
        let valid = |part: &str| {
            !part.is_empty()
                && part.len() <= 253
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        match s.split_once('/') {
            Some((namespace, name)) if valid(namespace) && valid(name) => Ok(PolicyParty::Pod {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }),
            _ => Err(format!("{s:?} is neither NAMESPACE/POD nor an IP address")),
        }
    }
}

/// The transport protocols a policy names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PolicyProtocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl PolicyProtocol {
    /// `TCP`, `UDP` or `SCTP`.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyProtocol::Tcp => "TCP",
            PolicyProtocol::Udp => "UDP",
            PolicyProtocol::Sctp => "SCTP",
        }
    }
}

impl FromStr for PolicyProtocol {
    type Err = String;

    /// `TCP`, `UDP` or `SCTP`, in any case.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "TCP" => Ok(PolicyProtocol::Tcp),
            "UDP" => Ok(PolicyProtocol::Udp),
            "SCTP" => Ok(PolicyProtocol::Sctp),
            _ => Err(format!("{s:?} is not TCP, UDP or SCTP")),
        }
    }
}

/// `GET /policy/explain`'s question: would a packet from `from` to `to`'s
/// `port` pass?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyQuery {
    /// The sender.
    pub from: PolicyParty,
    /// The receiver.
    pub to: PolicyParty,
    /// The receiver's port (1–65535).
    pub port: u16,
    /// The protocol (default TCP).
    pub protocol: PolicyProtocol,
}

/// Why a query string is no [`PolicyQuery`]: the parameter and the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query parameter {parameter}: {problem}")]
pub struct PolicyQueryError {
    /// The parameter (`from`, `to`, `port`, `protocol`, or the unknown one).
    pub parameter: String,
    /// What is wrong with it.
    pub problem: String,
}

impl PolicyQuery {
    /// The query string (`from=…&to=…&port=…&protocol=…`), percent-encoded.
    pub fn to_query(&self) -> String {
        format!(
            "from={}&to={}&port={}&protocol={}",
            encode_segment(&self.from.to_string()),
            encode_segment(&self.to.to_string()),
            self.port,
            self.protocol.as_str()
        )
    }

    /// Reads a query string; every problem names its parameter.
    pub fn from_query(query: &str) -> Result<PolicyQuery, PolicyQueryError> {
        let err = |parameter: &str, problem: String| PolicyQueryError {
            parameter: parameter.to_owned(),
            problem,
        };
        let (mut from, mut to, mut port, mut protocol) = (None, None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode_segment(raw).map_err(|e| err(key, e.to_string()))?;
            let slot = match key {
                "from" => &mut from,
                "to" => &mut to,
                "port" => &mut port,
                "protocol" => &mut protocol,
                other => return Err(err(other, "unknown parameter".to_owned())),
            };
            if slot.replace(value).is_some() {
                return Err(err(key, "given twice".to_owned()));
            }
        }
        let missing = |p: &str| err(p, "missing".to_owned());
        let party = |name: &str, value: Option<String>| {
            value
                .ok_or_else(|| missing(name))?
                .parse::<PolicyParty>()
                .map_err(|e| err(name, e))
        };
        let from = party("from", from)?;
        let to = party("to", to)?;
        let port = port.ok_or_else(|| missing("port"))?;
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| err("port", format!("{port:?} is no port (1-65535)")))?;
        Ok(PolicyQuery {
            from,
            to,
            port,
            protocol: match protocol {
                None => PolicyProtocol::Tcp,
                Some(p) => p.parse().map_err(|e| err("protocol", e))?,
            },
        })
    }
}

/// How one direction decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyVerdict {
    /// No policy selects the pod in this direction: allowed.
    NotIsolated,
    /// Between a pod and its own node: always allowed.
    Host,
    /// A rule allows it.
    Allowed,
    /// Isolated, and no rule allows it.
    Denied,
}

/// One direction's decision: the egress of the sender or the ingress of
/// the receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// The pod deciding (`namespace/name`).
    pub pod: String,
    /// How it decides.
    pub verdict: PolicyVerdict,
    /// With [`PolicyVerdict::Allowed`]: the rule, e.g. `ns/web-policy ingress[0]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The policies selecting the pod in this direction (`namespace/name`).
    #[serde(default)]
    pub policies: Vec<String>,
}

impl PolicyDecision {
    /// Whether the packet passes this direction.
    pub fn allowed(&self) -> bool {
        self.verdict != PolicyVerdict::Denied
    }
}

/// `GET /policy/explain`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyExplanation {
    /// The question.
    pub query: PolicyQuery,
    /// The sender's egress decision (none: the sender is no pod of this node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<PolicyDecision>,
    /// The receiver's ingress decision (none: the receiver is no pod of this node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<PolicyDecision>,
    /// Whether the packet passes both.
    pub allowed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_round_trips_through_its_query_string() {
        let q = PolicyQuery {
            from: PolicyParty::Pod {
                namespace: "ns".into(),
                name: "web-1".into(),
            },
            to: PolicyParty::Address("fd00::1".parse().unwrap()),
            port: 8080,
            protocol: PolicyProtocol::Udp,
        };
        assert_eq!(PolicyQuery::from_query(&q.to_query()).unwrap(), q);
        let plain = PolicyQuery::from_query("from=ns/a&to=10.0.0.1&port=80").unwrap();
        assert_eq!(plain.protocol, PolicyProtocol::Tcp);
        assert_eq!(plain.from.to_string(), "ns/a");
    }

    #[test]
    fn every_problem_names_its_parameter() {
        for (query, parameter) in [
            ("to=ns/b&port=80", "from"),
            ("from=ns/a&port=80", "to"),
            ("from=ns/a&to=ns/b", "port"),
            ("from=ns/a&to=ns/b&port=0", "port"),
            ("from=ns/a&to=ns/b&port=65536", "port"),
            ("from=ns/a&to=ns/b&port=80&protocol=ICMP", "protocol"),
            ("from=Ns/A&to=ns/b&port=80", "from"),
            ("from=ns/a&to=nobody&port=80", "to"),
            ("from=ns/a&to=ns/b&port=80&verbose=1", "verbose"),
            ("from=ns/a&from=ns/b&to=ns/b&port=80", "from"),
            ("from=%zz&to=ns/b&port=80", "from"),
        ] {
            let e = PolicyQuery::from_query(query).unwrap_err();
            assert_eq!(e.parameter, parameter, "{query}: {e}");
        }
    }
}
