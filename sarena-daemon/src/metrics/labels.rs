//! Label values that come from clients, bounded: an HTTP method is one of
//! the standard ones or `other`, and pod names and namespaces are shown only
//! to scrapers that may see them ([`PodNames`]).

use hyper::Method;

/// The `method` label of an API request: the standard methods by name,
/// anything else (a client may send any token as its method) as `other`,
/// so made-up methods cannot create series without bound.
pub fn method_label(method: &Method) -> &'static str {
    const KNOWN: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    KNOWN
        .iter()
        .find(|known| *known == method)
        .map_or("other", |known| known.as_str())
}

/// Whether a scrape shows the `pod` and `namespace` labels of the
/// per-endpoint series: to loopback scrapers always, to others only with
/// `--allow-remote-pod-names` (a pod that can reach the node must not read
/// every other pod's name off it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodNames {
    /// Shown.
    Shown,
    /// Left empty (the series keep their container id and interface).
    Hidden,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_known_ones_or_other() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
        for made_up in ["FOO", "get", "XGETX", "M-SEARCH"] {
            let method = Method::from_bytes(made_up.as_bytes()).unwrap();
            assert_eq!(method_label(&method), "other", "{made_up}");
        }
    }
}
