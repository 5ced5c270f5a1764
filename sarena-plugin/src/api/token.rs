//! The bearer token of the daemon's TCP listener (`--listen-tcp`), shared
//! by the daemon and its clients: where it lives by default, what a token
//! must look like, and reading it from its file.
//!
//! On TCP every route but `GET /v1/daemon/health` needs
//! `Authorization: Bearer <token>`; the Unix socket needs none (its mode,
//! 0600 root, is the access control). The daemon creates the file (mode
//! 0600) when it is missing and refuses one that others can read.

use std::io;
use std::path::{Path, PathBuf};

use hyper::header::HeaderValue;

use super::error::DaemonError;

/// The token file of a daemon with the default state directory
/// (`/var/lib/sarena`): clients of an `http://` endpoint use it unless told
/// otherwise.
pub const DEFAULT_TOKEN_FILE: &str = "/var/lib/sarena/api-token";

/// The shortest token the daemon accepts (the one it makes has 64 hex
/// digits: 256 bits).
pub const MIN_TOKEN_LEN: usize = 32;

/// The longest token the daemon accepts.
pub const MAX_TOKEN_LEN: usize = 1024;

/// What is wrong with `token` (already trimmed), if anything: too short,
/// too long, or characters that cannot travel in an HTTP header unchanged.
pub fn token_problem(token: &str) -> Option<&'static str> {
    if token.len() < MIN_TOKEN_LEN {
        Some("the token is shorter than 32 characters")
    } else if token.len() > MAX_TOKEN_LEN {
        Some("the token is longer than 1024 characters")
    } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
        Some("the token has characters other than printable ASCII without spaces")
    } else {
        None
    }
}

/// The file's token (surrounding whitespace trimmed) as the value of an
/// `Authorization` header.
pub fn read_token_file(path: &Path) -> Result<HeaderValue, DaemonError> {
    let error = |source: io::Error| DaemonError::TokenFile {
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(error)?;
    let token = text.trim();
    if let Some(problem) = token_problem(token) {
        return Err(error(io::Error::new(io::ErrorKind::InvalidData, problem)));
    }
    HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|e| error(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// The token file a client of an `http://` endpoint uses: `explicit`, or
/// [`DEFAULT_TOKEN_FILE`] when it exists; `None` when there is neither
/// (then only the health check answers).
pub fn token_file_for(explicit: Option<&Path>) -> Option<PathBuf> {
    match explicit {
        Some(path) => Some(path.to_owned()),
        None => {
            let default = Path::new(DEFAULT_TOKEN_FILE);
            default.exists().then(|| default.to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_printable_and_trimmed() {
        assert_eq!(token_problem(&"a".repeat(32)), None);
        assert!(token_problem(&"a".repeat(31)).is_some());
        assert!(token_problem(&"a".repeat(1025)).is_some());
        assert!(token_problem(&format!("{} b", "a".repeat(32))).is_some());
        assert!(token_problem(&format!("{}\u{e9}", "a".repeat(32))).is_some());

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, format!("  {}\n", "f".repeat(64))).unwrap();
        assert_eq!(
            read_token_file(&file).unwrap(),
            format!("Bearer {}", "f".repeat(64))
        );
        std::fs::write(&file, "short\n").unwrap();
        let err = read_token_file(&file).unwrap_err();
        assert!(
            crate::error_chain(&err).contains("shorter than 32"),
            "{err}"
        );
        let missing = dir.path().join("missing");
        assert!(read_token_file(&missing).is_err());
        assert_eq!(token_file_for(Some(&missing)), Some(missing));
    }
}
