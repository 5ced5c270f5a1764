//! `sarena-daemon`: the node daemon. Everything lives in the library; this only
//! parses the command line, sets up logging and the runtime, and maps the outcome
//! to an exit code (0 after a clean SIGTERM/SIGINT shutdown, 1 on a start-up
//! failure, 2 on bad usage). With `--uninstall`: 0 when the node is clean,
//! 1 when something is left or failed.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use sarena_core::error_chain;
use sarena_core::node::DEFAULT_CONFIG_TOML;
use sarena_daemon::cli::Cli;
use sarena_daemon::{app, uninstall};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.print_default_config {
        print!("{DEFAULT_CONFIG_TOML}");
        return ExitCode::SUCCESS;
    }
    let filter = match EnvFilter::try_new(&cli.log_level) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "sarena-daemon: invalid --log-level {:?}: {e}",
                cli.log_level
            );
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {}", error_chain(&e));
            return ExitCode::FAILURE;
        }
    };
    if cli.uninstall.enabled {
        return run_uninstall(&cli, &runtime);
    }
    let outcome = runtime.block_on(async {
        let shutdown = app::shutdown_signal()?;
        app::run(&cli, shutdown).await
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `--uninstall`: 0 when the node is clean, 1 when something is left or
/// failed, or the uninstall could not run.
fn run_uninstall(cli: &Cli, runtime: &tokio::runtime::Runtime) -> ExitCode {
    let outcome = runtime.block_on(async {
        let shutdown = match app::shutdown_signal() {
            Ok(shutdown) => shutdown,
            Err(e) => {
                tracing::error!("{}", error_chain(&e));
                return None;
            }
        };
        match uninstall::run(cli, shutdown).await {
            Ok(clean) => Some(clean),
            Err(e) => {
                tracing::error!("{}", error_chain(&e));
                None
            }
        }
    });
    match outcome {
        Some(true) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
