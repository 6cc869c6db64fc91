//! Standard output for every command.
//!
//! Everything the binary prints goes through [`stdout`] (or the `outln!` / `out!` macros
//! over it, visible in every module), never `println!` (`clippy::print_stdout` is on), so a
//! write that fails comes back as an error instead of a panic. The errors are tagged as
//! standard output's own: when the reader has gone (`rampart rules list | head -1`), `main`
//! sees [`stdout_closed`] and exits quietly with status 0, the way a CLI piped into `head`
//! should, after the command's destructors have run.
//!
//! Why not restore the default SIGPIPE disposition instead (the process killed at the first
//! such write)? Rust ignores SIGPIPE so that writes report EPIPE, and `rampart serve` relies on
//! it: hyper writes responses with `writev`, which raises SIGPIPE when a client has hung up,
//! and the default action would kill the service. Only standard output ends the program.

use std::io::{self, Write};

/// An error writing to standard output; the I/O error it wraps keeps its kind. (Written out
/// rather than derived: the binary has no other use for `thiserror`.)
#[derive(Debug)]
pub struct StdoutError(io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

/// Standard output, locked, with its write errors tagged as [`StdoutError`].
#[derive(Debug)]
pub struct Stdout(io::StdoutLock<'static>);

/// Standard output for a command's results.
pub fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

fn tag(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), StdoutError(e))
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(tag)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(tag)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(tag)
    }
}

/// Whether `e` is (caused by) a write to a standard output whose reader has gone. A broken
/// pipe anywhere else (a child process, a socket) is an ordinary error.
pub fn stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>().is_some_and(|io| {
            io.kind() == io::ErrorKind::BrokenPipe
                && io.get_ref().is_some_and(|inner| inner.is::<StdoutError>())
        })
    })
}

/// `println!` for command output: writes a line to [`stdout`] and returns the
/// `io::Result`, to be propagated with `?`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        writeln!($crate::out::stdout(), $($arg)*)
    }};
}

/// `print!` for command output (see `outln!`).
macro_rules! out {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        write!($crate::out::stdout(), $($arg)*)
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broken_standard_output_counts_as_closed() {
        let ours = anyhow::Error::from(tag(io::Error::from(io::ErrorKind::BrokenPipe)));
        assert!(stdout_closed(&ours));
        assert!(stdout_closed(&ours.context("printing the list")));
        let child = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(
            !stdout_closed(&child),
            "a pipe to a child process is an error"
        );
        let full = anyhow::Error::from(tag(io::Error::from(io::ErrorKind::StorageFull)));
        assert!(!stdout_closed(&full));
        assert!(full.to_string().starts_with("standard output: "), "{full}");
    }
}
