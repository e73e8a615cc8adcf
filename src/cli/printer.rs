//! The one place cairn writes to the terminal: results on stdout; notes, warnings, errors and
//! progress on stderr, each shown at its verbosity (see [`Printer`]).
//!
//! Nothing below the CLI prints: the model, the fetcher and the agent loop report what
//! happened (events, progress callbacks, warnings returned), and the CLI shows it through the
//! `Printer` made once in `cli::run` (see [`super::report`] for those reports).

use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, Mutex};

use crate::config::{Config, Verbosity};
use crate::tools::escape_controls;

/// Where everything a command shows goes. Made once from the validated settings and handed to
/// the command; cheap to clone and shared by threads (batch jobs).
///
/// - Results go to stdout: [`Printer::out`] for many lines, [`Printer::result`] for one.
/// - Lines on stderr have a level: [`Printer::error`] always shows; [`Printer::warn`],
///   [`Printer::info`] and progress unless `-q`; [`Printer::detail`] only with `-v`. Control
///   characters in their text (model or tool text, file names) are shown as `\xNN`.
/// - A progress line ([`Printer::progress`], [`Printer::status`]) is rewritten in place on a
///   terminal (`\r…\x1b[K`); any other line, on stderr or stdout, first ends it.
#[derive(Debug, Clone)]
pub struct Printer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    verbosity: Verbosity,
    /// Whether stderr is a terminal.
    tty: bool,
    /// The stderr side; its lock also keeps the lines of different threads whole.
    err: Mutex<ErrState>,
}

#[derive(Debug, Default)]
struct ErrState {
    /// Whether a progress line was drawn without its newline.
    open: bool,
    /// Where stderr lines are kept instead of written ([`Printer::kept`]); `None`: stderr.
    kept: Option<Vec<u8>>,
}

impl Printer {
    /// A printer showing what `verbosity` allows; `tty`: whether stderr is a terminal.
    pub fn new(verbosity: Verbosity, tty: bool) -> Printer {
        Printer::with_state(verbosity, tty, None)
    }

    /// A printer whose stderr lines are kept in memory instead ([`Printer::take_kept`]), as
    /// they would be written with stderr a terminal or not (`tty`); for tests.
    pub fn keeping(verbosity: Verbosity, tty: bool) -> Printer {
        Printer::with_state(verbosity, tty, Some(Vec::new()))
    }

    fn with_state(verbosity: Verbosity, tty: bool, kept: Option<Vec<u8>>) -> Printer {
        Printer {
            inner: Arc::new(Inner {
                verbosity,
                tty,
                err: Mutex::new(ErrState { open: false, kept }),
            }),
        }
    }

    /// What a [`Printer::keeping`] printer has kept since the last call (empty for others).
    pub fn take_kept(&self) -> String {
        let mut state = self.inner.err.lock().unwrap_or_else(|e| e.into_inner());
        let kept = state.kept.as_mut().map(std::mem::take).unwrap_or_default();
        String::from_utf8_lossy(&kept).into_owned()
    }

    /// The printer for the validated settings, on this process's stderr.
    pub fn from_config(config: &Config) -> Printer {
        Printer::new(config.verbosity, io::stderr().is_terminal())
    }

    /// The verbosity it was made with.
    pub fn verbosity(&self) -> Verbosity {
        self.inner.verbosity
    }

    /// Whether lines of `level` are shown (`Quiet`: always; `Normal`: unless `-q`;
    /// `Verbose`: with `-v`).
    pub fn shows(&self, level: Verbosity) -> bool {
        self.inner.verbosity >= level
    }

    /// Whether `-v` asked for details.
    pub fn verbose(&self) -> bool {
        self.shows(Verbosity::Verbose)
    }

    /// Whether stderr is a terminal (progress is then rewritten in place).
    pub fn is_terminal(&self) -> bool {
        self.inner.tty
    }

    /// Standard output, locked, for a command's results (after ending an open progress line).
    pub fn out(&self) -> io::StdoutLock<'static> {
        self.end_line();
        io::stdout().lock()
    }

    /// One result line on stdout, as given (JSON, a path; the caller escapes model text).
    pub fn result(&self, text: &str) -> io::Result<()> {
        let mut out = self.out();
        writeln!(out, "{text}")?;
        out.flush()
    }

    /// A line on stderr when `level` is shown, control characters made visible.
    pub fn line(&self, level: Verbosity, text: &str) {
        if !self.shows(level) {
            return;
        }
        let text = escape_controls(text);
        self.write_err(|open, err| {
            if std::mem::take(open) {
                writeln!(err)?;
            }
            writeln!(err, "{text}")
        });
    }

    /// `error: TEXT` on stderr, even with `-q`.
    pub fn error(&self, text: &str) {
        self.line(Verbosity::Quiet, &format!("error: {text}"));
    }

    /// `warning: TEXT` on stderr, unless `-q`.
    pub fn warn(&self, text: &str) {
        self.line(Verbosity::Normal, &format!("warning: {text}"));
    }

    /// A note on stderr, as given, unless `-q`.
    pub fn info(&self, text: &str) {
        self.line(Verbosity::Normal, text);
    }

    /// A detail on stderr, as given, only with `-v`.
    pub fn detail(&self, text: &str) {
        self.line(Verbosity::Verbose, text);
    }

    /// A progress line, unless `-q`: drawn over the previous one on a terminal, a plain line
    /// otherwise.
    pub fn progress(&self, text: &str) {
        self.draw(text, false, true);
    }

    /// The last progress line of a job, unless `-q`: drawn over the previous one and ended on
    /// a terminal, a plain line otherwise.
    pub fn progress_done(&self, text: &str) {
        self.draw(text, true, true);
    }

    /// A progress line shown only on a terminal (drawn over the previous one), unless `-q`:
    /// for updates too frequent to print as lines.
    pub fn status(&self, text: &str) {
        self.draw(text, false, false);
    }

    /// Ends an open progress line, so that what follows starts on a line of its own.
    pub fn end_line(&self) {
        self.write_err(|open, err| {
            if std::mem::take(open) {
                writeln!(err)?;
            }
            Ok(())
        });
    }

    fn draw(&self, text: &str, last: bool, plain_too: bool) {
        if !self.shows(Verbosity::Normal) || !(self.inner.tty || plain_too) {
            return;
        }
        let text = escape_controls(text);
        let tty = self.inner.tty;
        self.write_err(|open, err| {
            if tty {
                write!(err, "\r{text}\x1b[K")?;
                if last {
                    writeln!(err)?;
                }
                *open = !last;
                err.flush()
            } else {
                writeln!(err, "{text}")
            }
        });
    }

    /// Runs `f` on locked stderr (or the kept lines) with the open-line flag. A failed write
    /// to stderr is dropped: there is nowhere left to report it.
    fn write_err(&self, f: impl FnOnce(&mut bool, &mut dyn Write) -> io::Result<()>) {
        let mut state = self.inner.err.lock().unwrap_or_else(|e| e.into_inner());
        let ErrState { open, kept } = &mut *state;
        let _ = match kept {
            Some(buf) => f(open, buf),
            None => f(open, &mut io::stderr().lock()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// -q keeps errors only; the default adds warnings, notes and progress; -v adds details.
    #[test]
    fn each_level_shows_what_its_verbosity_allows() {
        let show = |v: Verbosity| {
            let p = Printer::keeping(v, false);
            p.error("e");
            p.warn("w");
            p.info("i");
            p.progress("p");
            p.status("s");
            p.detail("d");
            p.take_kept()
        };
        assert_eq!(show(Verbosity::Quiet), "error: e\n");
        assert_eq!(show(Verbosity::Normal), "error: e\nwarning: w\ni\np\n");
        assert_eq!(show(Verbosity::Verbose), "error: e\nwarning: w\ni\np\nd\n");
    }

    /// On a terminal a progress line is redrawn in place, and any other line ends it first.
    #[test]
    fn progress_is_redrawn_on_a_terminal_and_ended_by_other_lines() {
        let p = Printer::keeping(Verbosity::Normal, true);
        p.progress("1/3");
        p.status("2/3");
        p.info("note");
        p.progress("3/3");
        p.progress_done("done");
        p.end_line();
        assert_eq!(
            p.take_kept(),
            "\r1/3\x1b[K\r2/3\x1b[K\nnote\n\r3/3\x1b[K\rdone\x1b[K\n"
        );
        let plain = Printer::keeping(Verbosity::Normal, false);
        plain.progress("1/2");
        plain.progress_done("2/2");
        assert_eq!(plain.take_kept(), "1/2\n2/2\n");
    }

    /// Control characters in the text are shown, not sent to the terminal.
    #[test]
    fn control_characters_are_made_visible() {
        let p = Printer::keeping(Verbosity::Normal, true);
        p.error("bad \x1b[2J answer");
        p.progress("a\rb");
        assert_eq!(p.take_kept(), "error: bad \\x1b[2J answer\n\ra\\x0db\x1b[K");
    }
}
