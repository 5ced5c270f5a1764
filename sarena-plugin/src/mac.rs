//! [`MacAddr`]: a 6-octet Ethernet address, the one type every MAC in Sarena is.
//!
//! Written as lower-case `aa:bb:cc:dd:ee:ff` (also in JSON: the REST API and
//! the store keep the same bytes as when MACs were strings); read from that
//! form in either case, or with `-` between the octets.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A MAC address.
///
/// ```
/// use sarena_plugin::mac::MacAddr;
/// let mac: MacAddr = "0A-58-0A-F4-00-05".parse().unwrap();
/// assert_eq!(mac.to_string(), "0a:58:0a:f4:00:05");
/// assert_eq!(mac.octets(), [0x0a, 0x58, 0x0a, 0xf4, 0x00, 0x05]);
/// assert!(mac.is_unicast() && !mac.is_zero());
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr([u8; 6]);

/// Why a text is not a MAC address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {text:?}: {reason}")]
pub struct MacParseError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: MacParseReason,
}

/// What is wrong with a text that should be a MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MacParseReason {
    /// Not six octets.
    #[error("expected 6 octets")]
    OctetCount,
    /// An octet that is not two hex digits.
    #[error("each octet must be two hex digits")]
    Octet,
}

impl MacAddr {
    /// The address with these octets.
    pub const fn new(octets: [u8; 6]) -> Self {
        MacAddr(octets)
    }

    /// A random unicast, locally administered address (`x2:`, `x6:`, `xa:`
    /// or `xe:` first octet).
    pub fn random_local() -> Self {
        let mut octets: [u8; 6] = rand::rng().random();
        octets[0] = (octets[0] & 0xfe) | 0x02;
        MacAddr(octets)
    }

    /// The six octets.
    pub const fn octets(self) -> [u8; 6] {
        self.0
    }

    /// The address of a link attribute, when it has exactly six octets.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        <[u8; 6]>::try_from(bytes).ok().map(MacAddr)
    }

    /// The group bit is clear.
    pub const fn is_unicast(self) -> bool {
        self.0[0] & 0x01 == 0
    }

    /// `00:00:00:00:00:00`.
    pub fn is_zero(self) -> bool {
        self.0 == [0; 6]
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(octets: [u8; 6]) -> Self {
        MacAddr(octets)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(mac: MacAddr) -> Self {
        mac.0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Six two-digit hex octets separated by `:` or by `-` (one kind throughout).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason| MacParseError {
            text: text.to_string(),
            reason,
        };
        let separator = if text.contains('-') { '-' } else { ':' };
        let mut octets = [0u8; 6];
        let mut parts = text.split(separator);
        for octet in &mut octets {
            let part = parts
                .next()
                .ok_or_else(|| error(MacParseReason::OctetCount))?;
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(error(MacParseReason::Octet));
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| error(MacParseReason::Octet))?;
        }
        match parts.next() {
            None => Ok(MacAddr(octets)),
            Some(_) => Err(error(MacParseReason::OctetCount)),
        }
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_macs_are_local_unicast() {
        for _ in 0..100 {
            let mac = MacAddr::random_local().octets();
            assert_eq!(mac[0] & 0x01, 0, "multicast bit set");
            assert_eq!(mac[0] & 0x02, 0x02, "local bit unset");
        }
    }

    #[test]
    fn format_and_parse_round_trip() {
        let mac = MacAddr::new([0x02, 0xab, 0x00, 0x10, 0xff, 0x7e]);
        assert_eq!(mac.to_string(), "02:ab:00:10:ff:7e");
        assert_eq!("02:AB:00:10:ff:7e".parse(), Ok(mac));
        assert_eq!("02-ab-00-10-ff-7e".parse(), Ok(mac));
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in [
            "",
            "02:ab:00:10:ff",
            "02:ab:00:10:ff:7e:01",
            "2:ab:00:10:ff:7e",
            "zz:ab:00:10:ff:7e",
            "02:ab-00:10:ff:7e",
            "+2:ab:00:10:ff:7e",
            "02ab0010ff7e",
        ] {
            let err = bad.parse::<MacAddr>().unwrap_err();
            assert_eq!(err.text, bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn json_is_the_lower_case_string() {
        let mac = MacAddr::new([0x0a, 0x58, 0x0a, 0xf4, 0x00, 0x05]);
        assert_eq!(
            serde_json::to_string(&mac).unwrap(),
            "\"0a:58:0a:f4:00:05\""
        );
        let back: MacAddr = serde_json::from_str("\"0A:58:0A:F4:00:05\"").unwrap();
        assert_eq!(back, mac);
        assert!(serde_json::from_str::<MacAddr>("\"zz\"").is_err());
    }

    #[test]
    fn an_endpoint_with_a_bad_mac_does_not_decode_and_the_error_names_it() {
        let json = r#"{"owner":{"container_id":"c","ifname":"eth0"},"host_ifname":"lxc1",
            "host_ifindex":9,"host_mac":"02:00:00:00:00:01","pod_mac":"zz",
            "addresses":[],"netns":"/x","created_at":0}"#;
        let err = serde_json::from_str::<crate::api::Endpoint>(json)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"zz\""), "{err}");
    }

    #[test]
    fn unicast_and_zero() {
        assert!(!MacAddr::new([0x01, 0, 0x5e, 0, 0, 1]).is_unicast());
        assert!(MacAddr::default().is_zero());
        assert_eq!(MacAddr::from_slice(&[1, 2, 3]), None);
        assert_eq!(
            MacAddr::from_slice(&[2, 0, 0, 0, 0, 1]),
            Some(MacAddr::new([2, 0, 0, 0, 0, 1]))
        );
    }
}
