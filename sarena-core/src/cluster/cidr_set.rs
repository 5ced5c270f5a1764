//! [`CidrSet`]: the union of a set of prefixes, asked in O(log n) whether a
//! prefix overlaps it or an address lies in it (pure). Checking each of a
//! thousand peers' podCIDRs against those accepted before it was a scan of
//! every accepted one, O(n²) per cluster view; this makes it O(n log n).
//!
//! Two prefixes either nest or are disjoint, so the union is kept as its
//! widest members, pairwise disjoint, keyed by network address: the only
//! member that can hold an address is the last one starting at or before
//! it, and a prefix overlaps the set iff that member holds its network
//! address or the first member starting inside it exists. Only the widest
//! member is kept, so a message naming the member found may name a prefix
//! wider than the one inserted first (when a peer lists nested podCIDRs).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

/// Whether two prefixes share an address (they nest, since prefixes never
/// partly overlap): the rule [`CidrSet::overlapping`] answers for a set.
pub(super) fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The union of the prefixes inserted (see the module's docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrSet {
    /// Disjoint members by network address.
    members: BTreeMap<IpAddr, IpNet>,
}

impl CidrSet {
    /// An empty set.
    pub fn new() -> Self {
        CidrSet::default()
    }

    /// The member holding `ip`, if any.
    pub fn holding(&self, ip: IpAddr) -> Option<IpNet> {
        self.members
            .range(..=ip)
            .next_back()
            .map(|(_, net)| *net)
            .filter(|net| net.contains(&ip))
    }

    /// A member overlapping `net` (holding it, or inside it), if any.
    pub fn overlapping(&self, net: &IpNet) -> Option<IpNet> {
        let net = net.trunc();
        self.holding(net.network()).or_else(|| {
            self.members
                .range(net.network()..)
                .next()
                .map(|(_, m)| *m)
                .filter(|m| net.contains(&m.network()))
        })
    }

    /// Adds `net` to the union: nothing changes when a member holds it;
    /// members inside it are replaced by it.
    pub fn insert(&mut self, net: IpNet) {
        let net = net.trunc();
        if self
            .holding(net.network())
            .is_some_and(|member| member.contains(&net))
        {
            return;
        }
        let inside: Vec<IpAddr> = self
            .members
            .range(net.network()..)
            .take_while(|(start, _)| net.contains(*start))
            .map(|(start, _)| *start)
            .collect();
        for start in inside {
            self.members.remove(&start);
        }
        self.members.insert(net.network(), net);
    }

    /// The members: the union's widest prefixes, by address.
    pub fn iter(&self) -> impl Iterator<Item = &IpNet> {
        self.members.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn overlap_and_holding_follow_the_union() {
        let mut set = CidrSet::new();
        set.insert(net("10.244.1.0/24"));
        set.insert(net("10.244.3.0/24"));
        set.insert(net("fd00:10:244:1::/64"));
        assert_eq!(set.holding(ip("10.244.1.77")), Some(net("10.244.1.0/24")));
        assert_eq!(set.holding(ip("10.244.2.1")), None);
        assert_eq!(
            set.holding(ip("fd00:10:244:1::9")),
            Some(net("fd00:10:244:1::/64"))
        );
        assert_eq!(set.holding(ip("10.0.0.1")), None, "below every member");
        // a prefix inside a member, holding members, or apart
        assert_eq!(
            set.overlapping(&net("10.244.1.128/25")),
            Some(net("10.244.1.0/24"))
        );
        assert_eq!(
            set.overlapping(&net("10.244.0.0/22")),
            Some(net("10.244.1.0/24"))
        );
        assert_eq!(set.overlapping(&net("10.244.2.0/24")), None);
        assert_eq!(set.overlapping(&net("10.244.4.0/22")), None);
        // a host address given as a prefix is truncated
        assert_eq!(
            set.overlapping(&net("10.244.3.9/24")),
            Some(net("10.244.3.0/24"))
        );
    }

    #[test]
    fn a_wider_prefix_replaces_the_members_inside_it_and_a_narrower_one_changes_nothing() {
        let mut set = CidrSet::new();
        set.insert(net("10.244.1.0/24"));
        set.insert(net("10.244.2.0/24"));
        set.insert(net("10.245.0.0/24"));
        set.insert(net("10.244.1.0/25"));
        assert_eq!(set.iter().count(), 3);
        set.insert(net("10.244.0.0/16"));
        let members: Vec<String> = set.iter().map(|n| n.to_string()).collect();
        assert_eq!(members, ["10.244.0.0/16", "10.245.0.0/24"]);
    }

    #[test]
    fn answers_as_a_scan_of_every_prefix_does_in_both_families() {
        // a deterministic mix of nested and disjoint prefixes, IPv4 and IPv6
        let mut seed = 0x2545_f491_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        let mut random = move || {
            let (x, len) = (next(), next());
            if x & 1 == 0 {
                let v4 = (0x0af4_0000 | (x >> 16)).to_be_bytes();
                IpNet::new(IpAddr::from(v4), 16 + (len % 13) as u8)
            } else {
                let mut v6 = [0u8; 16];
                v6[..4].copy_from_slice(&0xfd00_0010_u32.to_be_bytes());
                v6[4..8].copy_from_slice(&(x >> 16 << 16).to_be_bytes());
                IpNet::new(IpAddr::from(v6), 40 + (len % 25) as u8)
            }
            .unwrap()
            .trunc()
        };
        let mut set = CidrSet::new();
        let mut all: Vec<IpNet> = Vec::new();
        for _ in 0..600 {
            let (n, probe) = (random(), random());
            let scan = all.iter().any(|a| overlaps(a, &probe));
            assert_eq!(
                set.overlapping(&probe).is_some(),
                scan,
                "{probe} against {all:?}"
            );
            let addr = probe.network();
            assert_eq!(
                set.holding(addr).is_some(),
                all.iter().any(|a| a.contains(&addr))
            );
            set.insert(n);
            all.push(n);
        }
        // the widest prefixes of both families hold everything of theirs only
        set.insert(net("0.0.0.0/0"));
        assert_eq!(
            set.overlapping(&net("192.0.2.0/24")),
            Some(net("0.0.0.0/0"))
        );
        assert!(
            set.iter()
                .all(|m| m.prefix_len() == 0 || matches!(m, IpNet::V6(_)))
        );
        set.insert(net("::/0"));
        assert_eq!(set.iter().count(), 2);
        assert_eq!(set.holding(ip("2001:db8::1")), Some(net("::/0")));
    }
}
