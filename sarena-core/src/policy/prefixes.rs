//! Address prefixes: the set of policy prefixes an address falls in (part
//! of a pod address's identity key), and longest-prefix matching over a
//! prefix-keyed map (what the kernel's LPM trie does).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;

/// A set of prefixes indexed by length, so the prefixes containing an
/// address are found with one lookup per length present.
#[derive(Debug, Default)]
pub(crate) struct PrefixIndex {
    set: HashSet<IpNet>,
    v4_lens: BTreeSet<u8>,
    v6_lens: BTreeSet<u8>,
}

impl PrefixIndex {
    /// Adds `net` (canonical).
    pub(crate) fn insert(&mut self, net: IpNet) {
        let net = net.trunc();
        match net {
            IpNet::V4(_) => self.v4_lens.insert(net.prefix_len()),
            IpNet::V6(_) => self.v6_lens.insert(net.prefix_len()),
        };
        self.set.insert(net);
    }

    /// The prefixes of the set containing `addr`, shortest first.
    pub(crate) fn containing(&self, addr: IpAddr) -> Vec<IpNet> {
        let lens = match addr {
            IpAddr::V4(_) => &self.v4_lens,
            IpAddr::V6(_) => &self.v6_lens,
        };
        lens.iter()
            .filter_map(|len| IpNet::new(addr, *len).ok().map(|n| n.trunc()))
            .filter(|n| self.set.contains(n))
            .collect()
    }
}

/// The host prefix of an address (/32 or /128).
pub(crate) fn host_net(addr: IpAddr) -> IpNet {
    IpNet::from(addr)
}

/// The value of the longest prefix of `map` containing `addr`.
pub(crate) fn longest_match<V>(map: &BTreeMap<IpNet, V>, addr: IpAddr) -> Option<&V> {
    // Walking down from the address, the first prefix containing it is the
    // longest: a longer one would sort after it, a shorter one before.
    // Bounded (many host entries may sit between), then one probe per length.
    for (k, v) in map.range(..=host_net(addr)).rev().take(64) {
        if k.contains(&addr) {
            return Some(v);
        }
    }
    let max = match addr {
        IpAddr::V4(_) => 31u8,
        IpAddr::V6(_) => 127u8,
    };
    (0..=max)
        .rev()
        .filter_map(|len| IpNet::new(addr, len).ok())
        .find_map(|net| map.get(&net.trunc()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn containing_lists_every_prefix_of_the_address_family() {
        let mut idx = PrefixIndex::default();
        for p in [
            "10.0.0.0/8",
            "10.1.0.0/16",
            "10.2.0.0/16",
            "0.0.0.0/0",
            "fd00::/8",
        ] {
            idx.insert(n(p));
        }
        let a: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(
            idx.containing(a),
            vec![n("0.0.0.0/0"), n("10.0.0.0/8"), n("10.1.0.0/16")]
        );
        let b: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(idx.containing(b), vec![n("fd00::/8")]);
        let c: IpAddr = "192.168.0.1".parse().unwrap();
        assert_eq!(idx.containing(c), vec![n("0.0.0.0/0")]);
    }

    #[test]
    fn longest_match_prefers_the_longest_prefix() {
        let mut m = BTreeMap::new();
        m.insert(n("0.0.0.0/0"), 1);
        m.insert(n("10.0.0.0/8"), 2);
        m.insert(n("10.1.2.3/32"), 3);
        m.insert(n("::/0"), 4);
        assert_eq!(longest_match(&m, "10.1.2.3".parse().unwrap()), Some(&3));
        assert_eq!(longest_match(&m, "10.1.2.4".parse().unwrap()), Some(&2));
        assert_eq!(longest_match(&m, "11.0.0.1".parse().unwrap()), Some(&1));
        assert_eq!(longest_match(&m, "fd00::1".parse().unwrap()), Some(&4));
        // Past the bounded walk: many host entries below the address.
        for i in 1..=200u8 {
            m.insert(n(&format!("10.0.0.{i}/32")), 10);
        }
        m.insert(n("10.0.0.0/24"), 5);
        assert_eq!(longest_match(&m, "10.0.0.250".parse().unwrap()), Some(&5));
        assert_eq!(longest_match(&m, "10.0.0.7".parse().unwrap()), Some(&10));
        assert_eq!(longest_match(&m, "10.0.1.7".parse().unwrap()), Some(&2));
        m.remove(&n("::/0"));
        assert_eq!(longest_match(&m, "fd00::1".parse().unwrap()), None);
    }
}
