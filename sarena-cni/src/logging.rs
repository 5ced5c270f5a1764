//! Logging through `tracing` to the config's `log-file`, never to stdout.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing::Dispatch;
use tracing::level_filters::LevelFilter;

/// A subscriber writing to `log_file` (appending; debug level when `debug`, else info).
/// Without a log file, or when it cannot be opened, it writes to stderr instead
/// (warnings only, unless `debug`).
pub(crate) fn dispatch(log_file: Option<&Path>, debug: bool) -> Dispatch {
    let level = if debug {
        LevelFilter::DEBUG
    } else {
        LevelFilter::INFO
    };
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_target(false);
    let opened = log_file.map(|p| (p, OpenOptions::new().create(true).append(true).open(p)));
    match opened {
        Some((_, Ok(file))) => Dispatch::new(
            builder
                .with_max_level(level)
                .with_writer(Mutex::new(file))
                .finish(),
        ),
        Some((path, Err(e))) => {
            let d = Dispatch::new(
                builder
                    .with_max_level(level)
                    .with_writer(std::io::stderr)
                    .finish(),
            );
            tracing::dispatcher::with_default(&d, || {
                tracing::warn!(path = %path.display(), error = %sarena_plugin::error_chain(&e), "cannot open log-file; logging to stderr");
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
