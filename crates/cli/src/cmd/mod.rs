//! One module per subcommand, each with `run(&Args) -> anyhow::Result<()>`, and the errors
//! that decide the exit code.

use std::{fmt, io};

use crate::args::Command;

mod health;
mod parse;
mod serve;

/// Exit code for a mistake in how toolshim was invoked ([`UsageError`]).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code for any other failure: the output could not be written, or a bug.
pub(crate) const EXIT_FAILURE: u8 = 1;
/// Exit code of `serve` when its shutdown cut off requests still in flight after the drain
/// timeout ([`WorkCut`]).
pub(crate) const EXIT_CUT: u8 = 3;

/// Runs the chosen subcommand.
pub(crate) fn run(command: &Command) -> anyhow::Result<()> {
    match command {
        Command::Parse(args) => parse::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Health(args) => health::run(args),
    }
}

/// A mistake in the command line or in the files it names; exits with [`EXIT_USAGE`].
/// The message says what is wrong and, where it can, what to do about it.
#[derive(Debug)]
pub(crate) struct UsageError(String);

impl UsageError {
    pub(crate) fn new(message: impl Into<String>) -> UsageError {
        UsageError(message.into())
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `serve` shut down but had to cut off requests in flight; exits with [`EXIT_CUT`].
#[derive(Debug)]
pub(crate) struct WorkCut(pub(crate) usize);

impl fmt::Display for WorkCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the drain timeout passed with {} request(s) still in flight; they were cut off (raise drain_timeout_secs to let them finish)",
            self.0
        )
    }
}

impl std::error::Error for WorkCut {}

/// How a failed command ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Standard output was closed early (`toolshim … | head`): exit 0, print nothing.
    BrokenPipe,
    /// Print the error and exit with this code.
    Exit(u8),
}

impl Failure {
    pub(crate) fn of(err: &anyhow::Error) -> Failure {
        let broken_pipe = err.chain().any(|cause| {
            cause
                .downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            Failure::BrokenPipe
        } else if err.is::<UsageError>() {
            Failure::Exit(EXIT_USAGE)
        } else if err.is::<WorkCut>() {
            Failure::Exit(EXIT_CUT)
        } else {
            Failure::Exit(EXIT_FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn failures_map_to_exit_codes() {
        let usage = anyhow::Error::new(UsageError::new("--tools x: not found"));
        assert_eq!(Failure::of(&usage), Failure::Exit(EXIT_USAGE));

        let full: Result<(), io::Error> = Err(io::Error::from(io::ErrorKind::StorageFull));
        let full = full.context("cannot write the output").unwrap_err();
        assert_eq!(Failure::of(&full), Failure::Exit(EXIT_FAILURE));

        let pipe: Result<(), io::Error> = Err(io::Error::from(io::ErrorKind::BrokenPipe));
        let pipe = pipe.context("cannot write the output").unwrap_err();
        assert_eq!(Failure::of(&pipe), Failure::BrokenPipe);
    }
}
