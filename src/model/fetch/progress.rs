//! Progress while downloading, unpacking and hashing, reported to the caller's
//! [`FetchProgress`] (nothing here prints).

use std::sync::Arc;
use std::time::Instant;

/// What a fetch reports as it goes, for the caller to show: the CLI prints it (unless `-q`).
/// Set in [`super::FetchOptions::progress`]; without one, a fetch is silent.
pub trait FetchProgress: Send + Sync {
    /// A line of news: where a file came from, a fallback to pip, a wait for another process,
    /// a file that cannot be verified.
    fn note(&self, text: &str);
    /// `done` bytes of `total` (0: unknown) so far in the step `label` ("downloading FILE",
    /// "verifying FILE", "unpacking FILE"); called for every chunk, so the receiver decides
    /// how often to show it.
    fn bytes(&self, label: &str, done: u64, total: u64);
    /// The step `label` ended after `done` bytes of `total` (0: unknown) in `secs` seconds.
    fn finished(&self, label: &str, done: u64, total: u64, secs: f64);
    /// Where a helper process's own progress (pip's standard output) should go; `None`
    /// (the default) keeps it hidden.
    fn tool_output(&self) -> Option<std::process::Stdio> {
        None
    }
}

/// Bytes done of a total in one step, reported to a [`FetchProgress`] when there is one.
pub(super) struct Progress {
    report: Option<Arc<dyn FetchProgress>>,
    label: String,
    total: u64,
    done: u64,
    started: Instant,
}

impl Progress {
    /// A counter of `total` bytes (0: unknown) for the step `label`, reported to `report`.
    pub(super) fn new(
        report: Option<&Arc<dyn FetchProgress>>,
        label: String,
        total: u64,
    ) -> Progress {
        Progress {
            report: report.cloned(),
            label,
            total,
            done: 0,
            started: Instant::now(),
        }
    }

    /// Counts `n` more bytes.
    pub(super) fn add(&mut self, n: u64) {
        // Time from the first byte, not from creation: pip may take a while before that.
        if self.done == 0 {
            self.started = Instant::now();
        }
        self.done += n;
        if let Some(r) = &self.report {
            r.bytes(&self.label, self.done, self.total);
        }
    }

    /// Reports the end of the step, with the time taken; nothing more is reported after it.
    pub(super) fn finish(&mut self) {
        if let Some(r) = self.report.take() {
            let secs = self.started.elapsed().as_secs_f64();
            r.finished(&self.label, self.done, self.total, secs);
        }
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
