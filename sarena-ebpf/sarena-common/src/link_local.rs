//! The pod's link-local address, as the plugin gives it and the programs
//! check it.

/// The EUI-64 link-local address (`fe80::/64`, RFC 4291 appendix A) of the
/// interface whose MAC is `mac`: what the kernel would generate, what the
/// plugin gives a pod's interface (with the kernel's own generation off),
/// and so the only link-local source the programs accept from that pod.
pub const fn link_local(mac: [u8; 6]) -> [u8; 16] {
    let mut addr = [0u8; 16];
    addr[0] = 0xfe;
    addr[1] = 0x80;
    // The universal/local bit flipped, `ff:fe` in the middle.
    addr[8] = mac[0] ^ 0x02;
    addr[9] = mac[1];
    addr[10] = mac[2];
    addr[11] = 0xff;
    addr[12] = 0xfe;
    addr[13] = mac[3];
    addr[14] = mac[4];
    addr[15] = mac[5];
    addr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_local_address_is_the_eui64_of_the_mac() {
        let addr = |mac| u128::from_be_bytes(link_local(mac));
        // The universal/local bit flips both ways.
        assert_eq!(
            addr([0x0a, 0x58, 0x0a, 0xf4, 0, 2]),
            0xfe80_0000_0000_0000_0858_0aff_fef4_0002
        );
        assert_eq!(
            addr([0, 0x11, 0x22, 0x33, 0x44, 0x55]),
            0xfe80_0000_0000_0000_0211_22ff_fe33_4455
        );
    }
}
