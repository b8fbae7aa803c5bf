//! The `toolshim` binary: parse the command line, run one subcommand, turn the outcome into an
//! exit code (documented in `toolshim parse --help`).

mod args;
mod cmd;

use std::{io::Write, process::ExitCode};

use clap::Parser;

use crate::cmd::Failure;

/// A gateway allocates small, short-lived buffers for every event it reads and writes;
/// mimalloc serves those with less work than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => report(&err),
    }
}

fn run() -> anyhow::Result<()> {
    let cli = args::Cli::try_parse()?;
    cmd::run(&cli.command)
}

/// Prints `err` (or nothing, for a closed stdout) and picks the exit code.
fn report(err: &anyhow::Error) -> ExitCode {
    if let Some(err) = err.downcast_ref::<clap::Error>() {
        // `--help` and `--version` (exit 0) and command-line mistakes (exit 2), worded by clap.
        let _ = err.print();
        return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(cmd::EXIT_USAGE));
    }
    match Failure::of(err) {
        Failure::BrokenPipe => ExitCode::SUCCESS,
        Failure::Exit(code) => {
            let _ = writeln!(std::io::stderr().lock(), "error: {err:#}");
            ExitCode::from(code)
        }
    }
}
