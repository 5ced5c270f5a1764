//! Logging through `tracing` to the config's `log-file` (opened as
//! [`crate::log_file`] says), never to stdout.

use std::path::Path;
use std::sync::Mutex;

use tracing::Dispatch;
use tracing::level_filters::LevelFilter;

/// A subscriber writing to `log_file` (appending; rotated past the given
/// size; debug level when `debug`, else info). Without a log file, or when
/// it cannot be used, it writes to stderr instead (warnings only, unless
/// `debug`, when there is none; everything, with the reason first, when it
/// is refused): a log that cannot be written never fails the command.
pub(crate) fn dispatch(log_file: Option<(&Path, u64)>, debug: bool) -> Dispatch {
    let level = if debug {
        LevelFilter::DEBUG
    } else {
        LevelFilter::INFO
    };
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_target(false);
    let opened = log_file.map(|(path, max_bytes)| crate::log_file::open(path, max_bytes));
    match opened {
        Some(Ok(file)) => Dispatch::new(
            builder
                .with_max_level(level)
                .with_writer(Mutex::new(file))
                .finish(),
        ),
        Some(Err(e)) => {
            let d = Dispatch::new(
                builder
                    .with_max_level(level)
                    .with_writer(std::io::stderr)
                    .finish(),
            );
            tracing::dispatcher::with_default(&d, || {
                tracing::warn!(error = %sarena_plugin::error_chain(&e), "cannot use log-file; logging to stderr");
            });
            d
        }
        None => {
            let level = if debug {
                LevelFilter::DEBUG
            } else {
                LevelFilter::WARN
            };
            Dispatch::new(
                builder
                    .with_max_level(level)
                    .with_writer(std::io::stderr)
                    .finish(),
            )
        }
    }
}
