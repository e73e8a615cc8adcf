//! Progress on stderr while downloading, unpacking and hashing.

use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

/// Bytes done of a total on stderr: a line redrawn at most ten times a second on a terminal,
/// a single summary line otherwise.
pub(super) struct Progress {
    enabled: bool,
    tty: bool,
    label: String,
    total: u64,
    done: u64,
    started: Instant,
    last_draw: Option<Instant>,
}

impl Progress {
    /// A counter of `total` bytes (0: unknown), shown only when `enabled`.
    pub(super) fn new(enabled: bool, label: String, total: u64) -> Progress {
        Progress {
            enabled,
            tty: io::stderr().is_terminal(),
            label,
            total,
            done: 0,
            started: Instant::now(),
            last_draw: None,
        }
    }

    /// Counts `n` more bytes, redrawing the line now and then on a terminal.
    pub(super) fn add(&mut self, n: u64) {
        // Time from the first byte, not from creation: pip may take a while before that.
        if self.done == 0 {
            self.started = Instant::now();
        }
        self.done += n;
        if !self.enabled || !self.tty {
            return;
        }
        if self
            .last_draw
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last_draw = Some(Instant::now());
        eprint!("\r{}", self.line());
    }

    /// The progress line without the time.
    fn line(&self) -> String {
        if self.total > 0 {
            format!(
                "{}: {} / {} ({}%)",
                self.label,
                format_mb(self.done),
                format_mb(self.total),
                self.done.saturating_mul(100) / self.total
            )
        } else {
            format!("{}: {}", self.label, format_mb(self.done))
        }
    }

    /// The last line, with the time taken; nothing more is shown after it.
    pub(super) fn finish(&mut self) {
        if !self.enabled {
            return;
        }
        let secs = self.started.elapsed().as_secs_f64();
        if self.tty {
            eprintln!("\r{} in {secs:.1} s\x1b[K", self.line());
        } else {
            eprintln!("{}: {} in {secs:.1} s", self.label, format_mb(self.done));
        }
        self.enabled = false;
    }
}

impl hf_hub::api::Progress for Progress {
    fn init(&mut self, size: usize, _filename: &str) {
        self.total = size as u64;
        self.started = Instant::now();
    }

    fn update(&mut self, size: usize) {
        self.add(size as u64);
    }

    fn finish(&mut self) {
        Progress::finish(self);
    }
}

/// Bytes as decimal megabytes with one decimal ("491.4 MB").
fn format_mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// A size in decimal megabytes, rounded, as the presets table writes it ("491 MB").
pub fn format_size(bytes: u64) -> String {
    if bytes >= 10_000_000 {
        format!("{:.0} MB", bytes as f64 / 1e6)
    } else if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else if bytes >= 1_000 {
        format!("{:.1} kB", bytes as f64 / 1e3)
    } else {
        format!("{bytes} B")
    }
}
