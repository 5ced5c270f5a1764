//! `sarena-netavark`: Sarena as a netavark plugin, a thin adapter over
//! `sarena_plugin::netavark`. netavark runs it as
//! `sarena create | setup NETNS | teardown NETNS | info` with JSON on stdin;
//! it prints the answer, or `{"error": …}` and exits 1.
//!
//! `SARENA_NETAVARK_LOG` (a level: `error`, `warn`, `info`, `debug`,
//! `trace`) logs to stderr, which netavark passes on to podman.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod backends;
mod run;

use std::io::{Read, Write};
use std::process::ExitCode;

/// The largest input accepted on stdin.
const MAX_STDIN: u64 = 1 << 20;

fn main() -> ExitCode {
    if let Ok(level) = std::env::var("SARENA_NETAVARK_LOG") {
        match level.parse::<tracing_subscriber::filter::LevelFilter>() {
            Ok(level) => tracing_subscriber::fmt()
                .with_max_level(level)
                .with_writer(std::io::stderr)
                .init(),
            Err(e) => eprintln!("SARENA_NETAVARK_LOG={level:?}: {e}; not logging"),
        }
    }
    let read_stdin = || {
        let mut stdin = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_STDIN + 1)
            .read_to_end(&mut stdin)?;
        if stdin.len() as u64 > MAX_STDIN {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("larger than {MAX_STDIN} bytes"),
            ));
        }
        Ok(stdin)
    };
    let (out, ok) = run::run(std::env::args_os().skip(1), read_stdin, &backends::Real);
    let mut stdout = std::io::stdout().lock();
    // One write of the whole answer.
    let written = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    if ok && written.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
