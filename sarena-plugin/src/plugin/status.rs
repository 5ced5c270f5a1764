//! STATUS: is the daemon there and ready to serve ADD?

use crate::api::Daemon;

use super::error::PluginError;
use super::step::Step;

/// Runs STATUS: `GET /daemon/health`. Unreachable, failing or not ready → error
/// (code 50 at the edge).
pub(crate) async fn status(daemon: &dyn Daemon) -> Result<(), PluginError> {
    let health = daemon
        .health()
        .await
        .map_err(|source| PluginError::Daemon {
            step: Step::Health,
            attachment: None,
            source,
        })?;
    if !health.ready {
        return Err(PluginError::NotReady {
            message: health.message,
        });
    }
    tracing::debug!(message = %health.message, "daemon ready");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ApiErrorKind, DaemonError, Health, MockDaemon};
    use crate::cni::ErrorCode;

    fn daemon(answer: fn() -> Result<Health, DaemonError>) -> MockDaemon {
        let mut d = MockDaemon::new();
        d.expect_health().times(1).returning(answer);
        d
    }

    #[tokio::test]
    async fn ready_daemon_is_ok() {
        let d = daemon(|| {
            Ok(Health {
                ready: true,
                message: "ok".into(),
            })
        });
        status(&d).await.unwrap();
    }

    #[tokio::test]
    async fn not_ready_daemon_is_50_with_its_message() {
        let d = daemon(|| {
            Ok(Health {
                ready: false,
                message: "restoring state".into(),
            })
        });
        let e = status(&d).await.unwrap_err().to_cni();
        assert_eq!(e.code, ErrorCode::PluginNotAvailable);
        assert!(e.msg.contains("restoring state"), "{}", e.msg);
    }

    #[tokio::test]
    async fn unreachable_daemon_is_50() {
        let d = daemon(|| {
            Err(DaemonError::Unreachable {
                endpoint: "/run/sarena/sarena.sock".into(),
                source: "ENOENT".into(),
            })
        });
        let e = status(&d).await.unwrap_err().to_cni();
        assert_eq!(e.code, ErrorCode::PluginNotAvailable);
        assert!(e.msg.contains("cannot reach"), "{}", e.msg);
    }

    #[tokio::test]
    async fn failing_daemon_is_50() {
        let d = daemon(|| Err(DaemonError::api(ApiErrorKind::Internal, "boom")));
        assert_eq!(
            status(&d).await.unwrap_err().to_cni().code,
            ErrorCode::PluginNotAvailable
        );
    }
}
