//! `sarena`: the operator's view of a node's Sarena daemon. Everything lives
//! in the library (`sarena_cli`); this parses the command line, runs the
//! command on a small runtime and maps the outcome to the exit code: 0 on
//! success, 1 on failure (one line on stderr) or when `policy explain`
//! finds the packet denied (the explanation on stdout), 2 on bad usage.

use std::process::ExitCode;

use clap::Parser;
use sarena_cli::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sarena: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(sarena_cli::CliError::Denied { report }) => {
            print!("{report}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("sarena: {}", sarena_core::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
