//! The runtime's CNI config directory: where it is unless configured, and
//! which of its files it loads. The one home of these rules for the plugin
//! (the bandwidth chain check reads the directory) and the installer (which
//! writes Sarena's conflist there and sets other networks aside).

/// Where kubelet's runtimes (containerd, CRI-O) and podman with CNI read
/// network configs unless configured otherwise.
pub const DEFAULT_CONF_DIR: &str = "/etc/cni/net.d";

/// The extensions libcni loads from a conf dir.
pub const CONF_EXTENSIONS: [&str; 3] = ["conf", "conflist", "json"];

/// Whether libcni loads a file of this name: a non-empty stem and one of
/// [`CONF_EXTENSIONS`] (`10-net.conflist` yes; `.conflist`, `x.conf.bak` no).
pub fn is_loadable(file_name: &str) -> bool {
    CONF_EXTENSIONS.iter().any(|ext| {
        file_name
            .strip_suffix(ext)
            .and_then(|rest| rest.strip_suffix('.'))
            .is_some_and(|stem| !stem.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadable_names_have_a_stem_and_a_libcni_extension() {
        for name in ["10-net.conflist", "a.conf", "b.json", "x.y.conf"] {
            assert!(is_loadable(name), "{name}");
        }
        for name in [
            ".conflist",
            "conflist",
            "a.conf.bak",
            "a.sarena-tmp",
            "a.txt",
            "",
        ] {
            assert!(!is_loadable(name), "{name}");
        }
    }
}
