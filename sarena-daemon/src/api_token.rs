//! The bearer token of the TCP listener (`--listen-tcp`): read from
//! `--tcp-token-file` (default `STATE_DIR/api-token`), created there with
//! 256 random bits and mode 0600 when the file is missing, and refused when
//! it is not this process's own regular file that nobody else can read or
//! write (so a symlink, a file of another user or a mode such as 0644 make
//! start-up fail, naming the file).
//!
//! Every TCP request's `Authorization: Bearer …` is checked in constant
//! time: both sides are hashed (SHA-256) and the digests compared without an
//! early exit, so the time taken says nothing about how much of a guess was
//! right.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;
use sarena_core::api::{MAX_TOKEN_LEN, token_problem};
use sha2::{Digest, Sha256};

/// Why the token file cannot be used (the daemon does not start).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Opening, creating, reading or writing the file failed.
    #[error("token file {path}: {call}")]
    Io {
        /// What was done.
        call: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The path is a symlink (not followed: whoever controls its target
    /// would choose the token).
    #[error("token file {path} is a symlink; give the file itself")]
    Symlink {
        /// The file.
        path: PathBuf,
    },
    /// Not a regular file.
    #[error("token file {path} is not a regular file")]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// Owned by another user.
    #[error("token file {path} is owned by uid {uid}, not by the daemon's uid {euid}")]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The daemon's effective uid.
        euid: u32,
    },
    /// Group or others may read or write it.
    #[error(
        "token file {path} has mode {mode:04o}: group and others must have no access (chmod 600)"
    )]
    Mode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The content is not a usable token.
    #[error("token file {path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong ([`token_problem`]).
        problem: &'static str,
    },
}

/// The token TCP requests must carry, kept as its digest.
#[derive(Clone)]
pub struct ApiToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(..)")
    }
}

impl ApiToken {
    /// The token of `token` (for tests and embedders).
    pub fn new(token: &str) -> ApiToken {
        ApiToken {
            digest: Sha256::digest(token.as_bytes()).into(),
        }
    }

    /// Reads the token at `path`, creating the file (0600, a fresh random
    /// token) when it does not exist. See the [module docs](self) for what
    /// is refused.
    pub fn load_or_create(path: &Path) -> Result<ApiToken, TokenError> {
        let io_err = |call: &'static str| {
            let path = path.to_owned();
            move |source: io::Error| TokenError::Io { call, path, source }
        };
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return create(path),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(TokenError::Symlink {
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(io_err("open")(e)),
        };
        check_owned(&file, path)?;
        let mut text = String::new();
        file.take(MAX_TOKEN_LEN as u64 + 64)
            .read_to_string(&mut text)
            .map_err(io_err("read"))?;
        let token = text.trim();
        if let Some(problem) = token_problem(token) {
            return Err(TokenError::Invalid {
                path: path.to_owned(),
                problem,
            });
        }
        Ok(ApiToken::new(token))
    }

    /// Whether `headers` carry `Authorization: Bearer <this token>`
    /// (the scheme's case does not matter), compared in constant time.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(AUTHORIZATION) else {
            return false;
        };
        let Some((scheme, token)) = value.as_bytes().split_first_chunk::<7>() else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"Bearer ") {
            return false;
        }
        let offered: [u8; 32] = Sha256::digest(token).into();
        let differing = offered
            .iter()
            .zip(&self.digest)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(differing) == 0
    }
}

/// Who sent a request, as far as access goes.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A client of the Unix socket: its mode (0600, root's) already decided.
    Trusted,
    /// A client of the TCP listener: every route but the health check needs
    /// this token.
    WithToken(ApiToken),
}

impl Caller {
    /// Why a request with `headers` may not be answered, if it may not:
    /// over TCP without the token, except for an `open` route (the health
    /// check: whether ADD can be served, nothing about pods or state).
    pub fn refusal(&self, open: bool, headers: &HeaderMap) -> Option<&'static str> {
        match self {
            Caller::WithToken(token) if !open && !token.admits(headers) => Some(
                "this TCP listener needs `Authorization: Bearer <token>` with the token of the daemon's --tcp-token-file",
            ),
            _ => None,
        }
    }
}

/// Refuses a file that is not a regular file of the daemon's own user with
/// no access for group and others.
fn check_owned(file: &File, path: &Path) -> Result<(), TokenError> {
    let meta = file.metadata().map_err(|source| TokenError::Io {
        call: "stat",
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(TokenError::NotAFile {
            path: path.to_owned(),
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid {
        return Err(TokenError::Owner {
            path: path.to_owned(),
            uid: meta.uid(),
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Mode {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Creates `path` (mode 0600, never through a symlink or over an existing
/// file) holding a fresh token: 32 bytes of the kernel's randomness in hex.
fn create(path: &Path) -> Result<ApiToken, TokenError> {
    let io_err = |call: &'static str| {
        let path = path.to_owned();
        move |source: io::Error| TokenError::Io { call, path, source }
    };
    let mut random = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(io_err("read /dev/urandom for"))?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err("create"))?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write"))?;
    tracing::info!(path = %path.display(), "created the TCP API token file (mode 0600)");
    Ok(ApiToken::new(&token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn only_the_bearer_token_itself_is_admitted() {
        let token = "a".repeat(40);
        let t = ApiToken::new(&token);
        assert!(t.admits(&headers(&format!("Bearer {token}"))));
        assert!(t.admits(&headers(&format!("bearer {token}"))));
        for wrong in [
            format!("Bearer {token}x"),
            format!("Bearer {}", &token[1..]),
            format!("Basic {token}"),
            format!("Bearer  {token}"),
            "Bearer".to_owned(),
            String::new(),
        ] {
            assert!(!t.admits(&headers(&wrong)), "{wrong:?}");
        }
        assert!(!t.admits(&HeaderMap::new()));
    }

    #[test]
    fn a_missing_file_is_created_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let made = ApiToken::load_or_create(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim().len(), 64);
        assert_eq!(ApiToken::load_or_create(&path).unwrap().digest, made.digest);
        assert!(made.admits(&headers(&format!("Bearer {}", text.trim()))));
    }
}
