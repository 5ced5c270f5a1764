//! The attachment digest: sha256(`containerid:ifname`), the one key names
//! derived from an attachment are built from (the host veth's `lxc…` name, the
//! deletion queue's file names). Those names are kernel and on-disk state, so
//! this digest must never change.

use sha2::{Digest, Sha256};

/// sha256(`containerid:ifname`). Formats as lowercase hex with `{:x}` (64
/// digits); a precision keeps the leading digits (`{:.12x}`: 12).
pub fn attachment_digest(container_id: &str, ifname: &str) -> sha2::digest::Output<Sha256> {
    Sha256::digest(format!("{container_id}:{ifname}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_the_sha256_of_id_colon_ifname() {
        // printf 'abc123:eth0' | sha256sum
        let full = "c69fce2d24302fe50f4378898a2c062dfe9f83781b9aedb060a7e06a71e2fe00";
        assert_eq!(format!("{:x}", attachment_digest("abc123", "eth0")), full);
        assert_eq!(
            format!("{:.12x}", attachment_digest("abc123", "eth0")),
            &full[..12]
        );
    }

    #[test]
    fn host_ifname_is_lxc_and_the_first_12_digits() {
        assert_eq!(
            crate::links::host_ifname("abc123", "eth0"),
            "lxcc69fce2d2430"
        );
    }
}
