//! Ports of a policy rule, as allow-entry port prefixes: a range
//! (`port`..=`endPort`) split into the aligned blocks an LPM trie matches,
//! and named ports resolved on a pod's container ports.

use super::model::{NamedPort, Protocol};

/// A port prefix: `port` with its low `16 - bits` bits zero; ports sharing
/// its first `bits` bits match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortPrefix {
    /// The first port of the block.
    pub port: u16,
    /// How many high bits must match (16: exactly `port`).
    pub bits: u8,
}

impl PortPrefix {
    /// Whether `port` is in the block.
    pub fn contains(self, port: u16) -> bool {
        let mask = port_mask(self.bits);
        port & mask == self.port & mask
    }
}

/// The mask of the first `bits` bits of a port.
fn port_mask(bits: u8) -> u16 {
    match bits {
        0 => 0,
        b if b >= 16 => u16::MAX,
        b => u16::MAX << (16 - b),
    }
}

/// The fewest aligned blocks covering exactly `first..=last` (none when
/// `last < first`).
pub fn port_prefixes(first: u16, last: u16) -> Vec<PortPrefix> {
    let mut out = Vec::new();
    let (mut cur, last) = (u32::from(first), u32::from(last));
    while cur <= last {
        // The largest block aligned at `cur` that does not pass `last`.
        let mut size_log = if cur == 0 {
            16
        } else {
            cur.trailing_zeros().min(16)
        };
        while size_log > 0 && cur + (1u32 << size_log) - 1 > last {
            size_log -= 1;
        }
        out.push(PortPrefix {
            // `cur <= last <= u16::MAX` here.
            port: u16::try_from(cur).unwrap_or(u16::MAX),
            bits: 16 - size_log as u8,
        });
        cur += 1u32 << size_log;
    }
    out
}

/// The numbers `ports` give the name `name` for `protocol` (a pod's
/// containers normally name a port once, but nothing here relies on it).
pub fn resolve_named(ports: &[NamedPort], name: &str, protocol: Protocol) -> Vec<u16> {
    let mut out: Vec<u16> = ports
        .iter()
        .filter(|p| p.name == name && p.protocol == protocol)
        .map(|p| p.port)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(prefixes: &[PortPrefix]) -> Vec<u16> {
        (0..=u16::MAX)
            .filter(|p| prefixes.iter().any(|b| b.contains(*p)))
            .collect()
    }

    #[test]
    fn a_single_port_is_one_full_prefix() {
        assert_eq!(
            port_prefixes(80, 80),
            vec![PortPrefix { port: 80, bits: 16 }]
        );
    }

    #[test]
    fn ranges_split_into_aligned_blocks_covering_exactly_the_range() {
        let p = port_prefixes(1000, 1010);
        assert_eq!(
            p,
            vec![
                PortPrefix {
                    port: 1000,
                    bits: 13
                },
                PortPrefix {
                    port: 1008,
                    bits: 15
                },
                PortPrefix {
                    port: 1010,
                    bits: 16
                },
            ]
        );
        for (a, b) in [
            (1, 65535),
            (0, 65535),
            (32768, 32768),
            (5, 4000),
            (65534, 65535),
        ] {
            let p = port_prefixes(a, b);
            assert_eq!(covered(&p), (a..=b).collect::<Vec<_>>(), "{a}-{b}");
            for blk in &p {
                assert_eq!(blk.port & !port_mask(blk.bits), 0, "unaligned {blk:?}");
            }
        }
        assert_eq!(
            port_prefixes(0, 65535),
            vec![PortPrefix { port: 0, bits: 0 }]
        );
        assert_eq!(port_prefixes(1, 65535).len(), 16);
    }

    #[test]
    fn an_inverted_range_is_empty() {
        assert!(port_prefixes(90, 80).is_empty());
    }

    #[test]
    fn named_ports_resolve_by_name_and_protocol() {
        let ports = vec![
            NamedPort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 8080,
            },
            NamedPort {
                name: "dns".into(),
                protocol: Protocol::Udp,
                port: 53,
            },
            NamedPort {
                name: "dns".into(),
                protocol: Protocol::Tcp,
                port: 5353,
            },
        ];
        assert_eq!(resolve_named(&ports, "http", Protocol::Tcp), vec![8080]);
        assert_eq!(
            resolve_named(&ports, "http", Protocol::Udp),
            Vec::<u16>::new()
        );
        assert_eq!(resolve_named(&ports, "dns", Protocol::Udp), vec![53]);
        assert_eq!(
            resolve_named(&ports, "nope", Protocol::Tcp),
            Vec::<u16>::new()
        );
    }
}
