//! `sarena policy explain`: a packet from one party to another, decided at
//! the sender's egress and the receiver's ingress — through
//! [`PolicyEngine::compile`] / [`PolicyEngine::endpoint_policy`] and
//! [`CompiledPolicy::decide_for`], the very lookups the programs do.

use std::net::IpAddr;

use super::compiled::{CompiledPolicy, Decision, Direction, PodKey};
use super::engine::PolicyEngine;
use super::model::Protocol;

/// One end of a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Party {
    /// A pod (its address of the family the other end needs).
    Pod(PodKey),
    /// An address.
    Address(IpAddr),
}

/// The decisions on a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The sender's egress decision, when the sender is a pod Sarena
    /// enforces on (not on the host network).
    pub egress: Option<(PodKey, Decision)>,
    /// The receiver's ingress decision, likewise.
    pub ingress: Option<(PodKey, Decision)>,
    /// Whether the packet passes both.
    pub allowed: bool,
}

/// Why a packet cannot be explained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// The engine knows no such pod.
    #[error("pod {pod} is unknown")]
    UnknownPod {
        /// The pod.
        pod: PodKey,
    },
    /// The pod has no address of the family the other end needs.
    #[error("pod {pod} has no {family} address")]
    NoAddress {
        /// The pod.
        pod: PodKey,
        /// "IPv4", "IPv6" or "IP" (none at all).
        family: &'static str,
    },
}

fn family(addr: &IpAddr) -> &'static str {
    match addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

impl PolicyEngine {
    /// The decisions on a `proto` packet to `port` from `from` to `to`.
    pub fn explain(
        &mut self,
        from: &Party,
        to: &Party,
        proto: Protocol,
        port: u16,
    ) -> Result<Explanation, ExplainError> {
        let (src, dst) = self.addresses(from, to)?;
        let compiled = self.compile();
        let egress = self.side(&compiled, from, Direction::Egress, dst, proto, port);
        let ingress = self.side(&compiled, to, Direction::Ingress, src, proto, port);
        let allowed = [&egress, &ingress]
            .iter()
            .all(|d| d.as_ref().is_none_or(|(_, d)| d.allows()));
        Ok(Explanation {
            egress,
            ingress,
            allowed,
        })
    }

    /// `party`'s decision in `direction` with `peer`, when it is an enforced pod.
    fn side(
        &mut self,
        compiled: &CompiledPolicy,
        party: &Party,
        direction: Direction,
        peer: IpAddr,
        proto: Protocol,
        port: u16,
    ) -> Option<(PodKey, Decision)> {
        let Party::Pod(key) = party else { return None };
        if self.pod(key)?.host_network {
            return None;
        }
        let ep = match compiled.endpoints.get(key) {
            Some(ep) => ep.clone(),
            None => self.endpoint_policy(key)?,
        };
        let d = compiled.decide_for(&ep, direction, peer, proto.number(), port);
        Some((key.clone(), d))
    }

    /// The source and destination addresses of the packet.
    fn addresses(&self, from: &Party, to: &Party) -> Result<(IpAddr, IpAddr), ExplainError> {
        let ips = |key: &PodKey| {
            (self.pod(key).map(|p| p.ips.clone()))
                .ok_or_else(|| ExplainError::UnknownPod { pod: key.clone() })
        };
        let pick = |key: &PodKey, ips: &[IpAddr], like: &IpAddr| {
            (ips.iter().find(|a| a.is_ipv4() == like.is_ipv4()).copied()).ok_or_else(|| {
                ExplainError::NoAddress {
                    pod: key.clone(),
                    family: family(like),
                }
            })
        };
        match (from, to) {
            (Party::Address(a), Party::Address(b)) => Ok((*a, *b)),
            (Party::Pod(p), Party::Address(b)) => Ok((pick(p, &ips(p)?, b)?, *b)),
            (Party::Address(a), Party::Pod(q)) => Ok((*a, pick(q, &ips(q)?, a)?)),
            (Party::Pod(p), Party::Pod(q)) => {
                let (pi, qi) = (ips(p)?, ips(q)?);
                let Some(first) = qi.first() else {
                    return Err(ExplainError::NoAddress {
                        pod: q.clone(),
                        family: "IP",
                    });
                };
                if pi.is_empty() {
                    return Err(ExplainError::NoAddress {
                        pod: p.clone(),
                        family: "IP",
                    });
                }
                // The first family of the receiver's the sender also has.
                match qi
                    .iter()
                    .find_map(|b| pick(p, &pi, b).ok().map(|a| (a, *b)))
                {
                    Some(pair) => Ok(pair),
                    None => Err(ExplainError::NoAddress {
                        pod: p.clone(),
                        family: family(first),
                    }),
                }
            }
        }
    }
}
