//! The programs' decision, over a [`CompiledPolicy`]: the peer's identity
//! by longest prefix (the ipcache LPM trie), then the endpoint's longest
//! allow entry for that identity, then for any peer (the policy LPM trie).

use std::net::IpAddr;

use sarena_common::policy::{IDENTITY_HOST, IDENTITY_WORLD};

use super::compiled::{
    CompiledPolicy, Decision, Direction, EndpointPolicy, EntryKey, Identity, IpcacheEntry, PodKey,
    RuleId,
};
use super::prefixes::longest_match;

impl EndpointPolicy {
    /// The rule of the longest entry matching (direction, peer, proto,
    /// port), as the policy map's LPM lookup finds it: a port prefix beats
    /// any port of the protocol, which beats any protocol.
    pub fn lookup(
        &self,
        direction: Direction,
        peer: Identity,
        proto: u8,
        port: u16,
    ) -> Option<RuleId> {
        let lo = EntryKey {
            direction,
            peer,
            proto: 0,
            port: 0,
            port_bits: 0,
        };
        let hi = EntryKey {
            direction,
            peer,
            proto: u8::MAX,
            port: u16::MAX,
            port_bits: u8::MAX,
        };
        let mut best: Option<(u8, RuleId)> = None;
        for (k, rule) in self.entries.range(lo..=hi) {
            let len = if k.proto == 0 {
                0
            } else if k.proto == proto && port_matches(k.port, k.port_bits, port) {
                8 + k.port_bits
            } else {
                continue;
            };
            if best.is_none_or(|(l, _)| len > l) {
                best = Some((len, *rule));
            }
        }
        best.map(|(_, r)| r)
    }
}

/// Whether `port` shares the first `bits` bits of `prefix`.
fn port_matches(prefix: u16, bits: u8, port: u16) -> bool {
    let mask = match bits {
        0 => 0,
        b if b >= 16 => u16::MAX,
        b => u16::MAX << (16 - b),
    };
    prefix & mask == port & mask
}

impl CompiledPolicy {
    /// The ipcache entry of `addr` (longest prefix); none:
    /// [`IDENTITY_WORLD`] without flags.
    pub fn identity_of(&self, addr: IpAddr) -> IpcacheEntry {
        longest_match(&self.ipcache, addr)
            .copied()
            .unwrap_or(IpcacheEntry {
                identity: IDENTITY_WORLD,
                flags: 0,
            })
    }

    /// The decision for a packet of `pod` (one of this node's endpoints) in
    /// `direction` with `peer` (the source for ingress, the destination for
    /// egress) on `proto` / `port` (the destination port). A pod that is not
    /// an endpoint here is not checked: [`Decision::NotIsolated`].
    pub fn decide(
        &self,
        pod: &PodKey,
        direction: Direction,
        peer: IpAddr,
        proto: u8,
        port: u16,
    ) -> Decision {
        match self.endpoints.get(pod) {
            Some(ep) => self.decide_for(ep, direction, peer, proto, port),
            None => Decision::NotIsolated,
        }
    }

    /// [`CompiledPolicy::decide`] for an endpoint's compiled policy given
    /// directly (a remote pod's, from `PolicyEngine::endpoint_policy`).
    pub fn decide_for(
        &self,
        ep: &EndpointPolicy,
        direction: Direction,
        peer: IpAddr,
        proto: u8,
        port: u16,
    ) -> Decision {
        let identity = self.identity_of(peer).identity;
        if identity == IDENTITY_HOST {
            return Decision::Host;
        }
        let isolated = match direction {
            Direction::Ingress => ep.ingress_isolated,
            Direction::Egress => ep.egress_isolated,
        };
        if !isolated {
            return Decision::NotIsolated;
        }
        (ep.lookup(direction, identity, proto, port))
            .or_else(|| ep.lookup(direction, 0, proto, port))
            .map_or(Decision::Denied, Decision::Allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(peer: Identity, proto: u8, port: u16, port_bits: u8) -> EntryKey {
        EntryKey {
            direction: Direction::Ingress,
            peer,
            proto,
            port,
            port_bits,
        }
    }

    #[test]
    fn the_longest_entry_wins_like_the_lpm_trie() {
        let mut ep = EndpointPolicy {
            ingress_isolated: true,
            ..Default::default()
        };
        ep.entries.insert(key(300, 0, 0, 0), RuleId(1));
        ep.entries.insert(key(300, 6, 0, 0), RuleId(2));
        ep.entries.insert(key(300, 6, 8080, 16), RuleId(3));
        ep.entries.insert(key(300, 6, 1024, 6), RuleId(4));
        let l = |proto, port| ep.lookup(Direction::Ingress, 300, proto, port);
        assert_eq!(l(6, 8080), Some(RuleId(3)));
        assert_eq!(l(6, 2000), Some(RuleId(4)));
        assert_eq!(l(6, 80), Some(RuleId(2)));
        assert_eq!(l(17, 80), Some(RuleId(1)));
        assert_eq!(ep.lookup(Direction::Egress, 300, 6, 80), None);
        assert_eq!(ep.lookup(Direction::Ingress, 301, 6, 80), None);
    }

    #[test]
    fn decide_checks_host_isolation_identity_then_any_peer() {
        let mut c = CompiledPolicy::default();
        let e = |identity, flags| IpcacheEntry { identity, flags };
        c.ipcache.insert("0.0.0.0/0".parse().unwrap(), e(256, 0));
        c.ipcache.insert("10.0.0.1/32".parse().unwrap(), e(300, 2));
        c.ipcache
            .insert("10.0.0.9/32".parse().unwrap(), e(IDENTITY_HOST, 1));
        let mut ep = EndpointPolicy {
            ingress_isolated: true,
            ..Default::default()
        };
        ep.entries.insert(key(300, 6, 80, 16), RuleId(1));
        ep.entries.insert(key(0, 17, 53, 16), RuleId(2));
        let pod = PodKey::new("a", "p");
        c.endpoints.insert(pod.clone(), ep);
        let d = |peer: &str, proto, port| {
            c.decide(&pod, Direction::Ingress, peer.parse().unwrap(), proto, port)
        };
        assert_eq!(d("10.0.0.1", 6, 80), Decision::Allowed(RuleId(1)));
        assert_eq!(d("10.0.0.1", 6, 81), Decision::Denied);
        assert_eq!(d("10.0.0.2", 17, 53), Decision::Allowed(RuleId(2)));
        assert_eq!(d("10.0.0.1", 17, 53), Decision::Allowed(RuleId(2)));
        assert_eq!(d("10.0.0.9", 6, 1), Decision::Host);
        assert_eq!(
            c.decide(&pod, Direction::Egress, "10.0.0.1".parse().unwrap(), 6, 1),
            Decision::NotIsolated
        );
        assert_eq!(
            c.identity_of("fd00::1".parse().unwrap()).identity,
            IDENTITY_WORLD
        );
    }
}
