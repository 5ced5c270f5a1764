//! Names unique per run, for everything a test creates on the host.

/// `prefix`, 12 bits of the process id and 32 random bits, cut to 15 bytes
/// (the longest interface name): unique per run, and recognisable by prefix.
pub fn unique(prefix: &str) -> String {
    let n: u32 = rand::random();
    let mut name = format!("{prefix}{:x}{n:08x}", std::process::id() & 0xfff);
    name.truncate(15);
    name
}

#[cfg(test)]
mod tests {
    use super::unique;

    #[test]
    fn names_fit_an_interface_and_differ() {
        let (a, b) = (unique("srnt"), unique("srnt"));
        assert!(a.starts_with("srnt") && a.len() <= 15, "{a}");
        assert_ne!(a, b);
        assert_eq!(unique("a-very-long-prefix").len(), 15);
    }
}
