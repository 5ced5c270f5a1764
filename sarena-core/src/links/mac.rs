//! MAC addresses: random locally administered ones, formatting and parsing.

use rand::Rng;

/// A random unicast, locally administered MAC (`x2:`, `x6:`, `xa:` or `xe:` first octet).
pub fn random_mac() -> [u8; 6] {
    let mut mac: [u8; 6] = rand::rng().random();
    mac[0] = (mac[0] & 0xfe) | 0x02;
    mac
}

/// `aa:bb:cc:dd:ee:ff`, lower case.
pub fn format_mac(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff` (either case); `None` when malformed.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in mac.iter_mut() {
        let part = parts.next()?;
        if part.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_macs_are_local_unicast() {
        for _ in 0..100 {
            let mac = random_mac();
            assert_eq!(mac[0] & 0x01, 0, "multicast bit set");
            assert_eq!(mac[0] & 0x02, 0x02, "local bit unset");
        }
    }

    #[test]
    fn format_and_parse_round_trip() {
        let mac = [0x02, 0xab, 0x00, 0x10, 0xff, 0x7e];
        assert_eq!(format_mac(&mac), "02:ab:00:10:ff:7e");
        assert_eq!(parse_mac("02:AB:00:10:ff:7e"), Some(mac));
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in [
            "",
            "02:ab:00:10:ff",
            "02:ab:00:10:ff:7e:01",
            "2:ab:00:10:ff:7e",
            "zz:ab:00:10:ff:7e",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }
}
