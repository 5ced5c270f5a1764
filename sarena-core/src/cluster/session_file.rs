//! [`SessionFile`]: the [`SessionParams`] of the last Kubernetes-mode
//! session, kept in the state directory (`kubernetes-session.json`),
//! written durably ([`durable::replace`]).

use std::fs;
use std::path::{Path, PathBuf};

use sarena_plugin::durable;

use super::error::ClusterError;
use super::pools::SessionParams;

/// The file's name in the state directory.
pub const SESSION_FILE: &str = "kubernetes-session.json";

/// The persisted session of a state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    path: PathBuf,
}

impl SessionFile {
    /// The session file of `state_dir`.
    pub fn in_dir(state_dir: &Path) -> Self {
        SessionFile {
            path: state_dir.join(SESSION_FILE),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored session; `None` when there is no file.
    pub fn load(&self) -> Result<Option<SessionParams>, ClusterError> {
        let text = match fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(self.io("read", source)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| ClusterError::SessionFormat {
                path: self.path.clone(),
                source,
            })
    }

    /// Stores `session`.
    pub fn store(&self, session: &SessionParams) -> Result<(), ClusterError> {
        let text =
            serde_json::to_vec_pretty(session).map_err(|source| ClusterError::SessionFormat {
                path: self.path.clone(),
                source,
            })?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        durable::replace(dir, SESSION_FILE, &text, 0o600).map_err(|e| self.io(e.call, e.source))
    }

    fn io(&self, call: &'static str, source: std::io::Error) -> ClusterError {
        ClusterError::SessionFile {
            call,
            path: self.path.clone(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_session_loads_back_and_a_missing_or_damaged_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = SessionFile::in_dir(dir.path());
        assert_eq!(file.load().unwrap(), None);
        let session = SessionParams {
            pod_cidrs: vec![
                "10.244.1.0/24".parse().unwrap(),
                "fd00:1::/64".parse().unwrap(),
            ],
            mtu: 1450,
        };
        file.store(&session).unwrap();
        assert_eq!(file.load().unwrap(), Some(session));
        std::fs::write(file.path(), "{").unwrap();
        let err = file.load().unwrap_err();
        assert!(
            err.to_string()
                .contains("kubernetes-session.json is damaged"),
            "{err}"
        );
    }
}
