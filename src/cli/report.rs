//! What the layers below the CLI report, shown through the [`Printer`]: the agent loop's
//! events as one line per round ([`RoundPrinter`]), a trace file that stopped being written
//! ([`TraceSink`]), and a model fetch's progress and notes ([`FetchLines`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::printer::Printer;
use crate::agent::{Event, EventKind, EventSink, TraceWriter};
use crate::model::fetch::FetchProgress;

/// Prints one line per round on stderr: tool, arguments (short), outcome, time; with `-v`
/// also the task's setup, prompt sizes and thoughts.
#[derive(Debug)]
pub struct RoundPrinter {
    printer: Printer,
    verbose: bool,
    step_ms: f64,
}

impl RoundPrinter {
    /// Round lines through `printer`; its `-v` adds thoughts, prompt sizes and the setup.
    pub fn new(printer: Printer) -> Self {
        RoundPrinter {
            verbose: printer.verbose(),
            printer,
            step_ms: 0.0,
        }
    }

    /// The line an event is shown as, if any.
    fn line(&mut self, event: &Event) -> Option<String> {
        let line = match &event.kind {
            EventKind::TaskStart {
                tools,
                session,
                facts,
                history_turns,
                summaries,
                ..
            } if self.verbose => format!(
                "task: tools {}; session {}; {facts} facts, {history_turns} earlier turns in the prompt, {summaries} more by their summaries",
                tools.join(", "),
                session.as_deref().unwrap_or("none")
            ),
            EventKind::Context {
                example,
                tools,
                text,
            } if self.verbose => format!(
                "task: {} characters of context from {} shown before round 1; worked example: {}",
                text.chars().count(),
                if tools.is_empty() { "no tool".to_string() } else { tools.join(", ") },
                example.as_deref().unwrap_or("none")
            ),
            EventKind::EvidenceCheck {
                round,
                unsupported,
            } => format!(
                "round {round}: the answer's {} found in no result; sent back to check",
                unsupported.join(", ")
            ),
            EventKind::AmountCheck { round, unused } => format!(
                "round {round}: no calculation used the task's {}; the answer sent back to check",
                unused.join(", ")
            ),
            EventKind::EchoCheck { round, repeated } => format!(
                "round {round}: the answer repeats cairn's note (\"{}\"); sent back",
                short(repeated, 80)
            ),
            EventKind::Summary {
                turn,
                text,
                tokens,
                ms,
                ..
            } => match text {
                Some(t) if self.verbose => format!(
                    "memory: earlier turn {turn} summarised ({tokens} tokens, {:.1} s): {}",
                    ms / 1000.0,
                    short(t, 240)
                ),
                Some(_) => format!(
                    "memory: an earlier turn no longer fits in full; summarised ({:.1} s)",
                    ms / 1000.0
                ),
                None => format!(
                    "memory: earlier turn {turn} could not be summarised; it is left out of the prompt"
                ),
            },
            EventKind::Plan { text, tokens, ms } if self.verbose => format!(
                "plan ({tokens} tokens, {:.1} s): {}",
                ms / 1000.0,
                short(text, 240)
            ),
            EventKind::Prompt {
                round,
                tokens,
                allowed,
                ..
            } if self.verbose => format!(
                "round {round}: prompt {tokens} tokens; allowed: {}",
                allowed.join(", ")
            ),
            EventKind::Trim {
                round,
                dropped_rounds,
                cut_chars,
                dropped_context,
            } => format!(
                "round {round}: prompt trimmed to fit the context: {dropped_rounds} earlier rounds dropped, {cut_chars} characters of observations cut{}",
                if *dropped_context { ", earlier turns and facts left out" } else { "" }
            ),
            EventKind::Step {
                round,
                thought,
                prefill_ms,
                decode_ms,
                ..
            } => {
                self.step_ms = prefill_ms + decode_ms;
                if !self.verbose {
                    return None;
                }
                format!("round {round}: thought: {}", short(thought, 160))
            }
            EventKind::BadStep { round, error, .. } => format!("round {round}: {error}"),
            EventKind::Retry {
                round,
                tool,
                attempt,
                wait_ms,
                error,
            } => format!(
                "round {round}: {tool} failed (attempt {attempt}): {}; retrying in {wait_ms} ms",
                short(error, 100)
            ),
            EventKind::ToolResult {
                round,
                tool,
                args,
                ok,
                observation,
                ms,
                cached,
                ..
            } => format!(
                "round {round}: {tool} {} → {}{} ({:.1} s)",
                short(&args.to_string(), 70),
                if *ok { "ok: " } else { "" },
                short(observation, 70),
                (self.step_ms + ms) / 1000.0,
            ) + if *cached { " [repeat: cached]" } else { "" },
            EventKind::Forbidden { round, call } => {
                format!("round {round}: this call is not made again: {}", short(call, 70))
            }
            EventKind::DeadLoop { round, tool, times } => {
                format!("round {round}: {tool} chosen {times} times with the same arguments")
            }
            EventKind::CircuitOpen {
                round,
                tool,
                failures,
            } => format!("round {round}: {tool} failed {failures} times in a row: it is off for the rest of the task"),
            EventKind::SelfCheck {
                round,
                done,
                accepted,
            } => format!(
                "round {round}: self-check {done:.2}: {}",
                if *accepted { "accepted" } else { "going on" }
            ),
            EventKind::Warning { message } => format!("warning: {message}"),
            EventKind::Stop {
                reason,
                rounds,
                error,
                latency_ms,
                ..
            } => {
                let mut s = format!(
                    "stop: {reason} after {rounds} rounds, {:.1} s",
                    *latency_ms as f64 / 1000.0
                );
                if let Some(e) = error {
                    s.push_str(&format!(": {e}"));
                }
                s
            }
            _ => return None,
        };
        Some(line)
    }
}

impl EventSink for RoundPrinter {
    fn event(&mut self, event: &Event) {
        if let Some(line) = self.line(event) {
            self.printer.info(&line);
        }
    }
}

/// `text` on one line, at most `max` characters, with `…` when cut, control characters
/// made visible.
pub fn short(text: &str, max: usize) -> String {
    let one_line: String = crate::tools::escape_controls(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// The `--trace` file's writer, and a warning through the printer when writing it fails
/// (the rest of the trace is then lost; the task goes on).
pub struct TraceSink {
    trace: TraceWriter,
    printer: Printer,
    warned: bool,
}

impl TraceSink {
    /// `trace`, with its first write error shown through `printer`.
    pub fn new(trace: TraceWriter, printer: Printer) -> Self {
        TraceSink {
            trace,
            printer,
            warned: false,
        }
    }
}

impl EventSink for TraceSink {
    fn event(&mut self, event: &Event) {
        self.trace.event(event);
        if self.warned {
            return;
        }
        if let Some(e) = self.trace.error() {
            self.printer.warn(&format!(
                "cannot write the trace: {e}; the rest of the trace is lost"
            ));
            self.warned = true;
        }
    }
}

/// A model fetch's progress and notes through the printer: bytes as a line redrawn at most
/// ten times a second on a terminal, one summary line per step otherwise.
#[derive(Debug)]
pub struct FetchLines {
    printer: Printer,
    last_draw: Mutex<Option<Instant>>,
}

impl FetchLines {
    /// Fetch reports shown through `printer`.
    pub fn new(printer: Printer) -> Self {
        FetchLines {
            printer,
            last_draw: Mutex::new(None),
        }
    }
}

/// `LABEL: DONE / TOTAL (P%)`, or `LABEL: DONE` when the total is unknown.
fn bytes_line(label: &str, done: u64, total: u64) -> String {
    if total > 0 {
        format!(
            "{label}: {} / {} ({}%)",
            format_mb(done),
            format_mb(total),
            done.saturating_mul(100) / total
        )
    } else {
        format!("{label}: {}", format_mb(done))
    }
}

/// Bytes as decimal megabytes with one decimal ("491.4 MB").
fn format_mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

impl FetchProgress for FetchLines {
    fn note(&self, text: &str) {
        self.printer.info(text);
    }

    fn bytes(&self, label: &str, done: u64, total: u64) {
        if !self.printer.is_terminal() {
            return;
        }
        let mut last = self.last_draw.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        *last = Some(Instant::now());
        self.printer.status(&bytes_line(label, done, total));
    }

    fn finished(&self, label: &str, done: u64, total: u64, secs: f64) {
        *self.last_draw.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if self.printer.is_terminal() {
            self.printer.progress_done(&format!(
                "{} in {secs:.1} s",
                bytes_line(label, done, total)
            ));
        } else {
            self.printer
                .progress_done(&format!("{label}: {} in {secs:.1} s", format_mb(done)));
        }
    }

    fn tool_output(&self) -> Option<std::process::Stdio> {
        // pip writes its own progress; the line of ours it would overwrite is ended first.
        self.printer.end_line();
        Some(std::process::Stdio::from(std::io::stderr()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Verbosity;

    fn event(kind: EventKind) -> Event {
        Event { t_ms: 0, kind }
    }

    /// A round's tool call is one line with its time; thoughts only at -v; a failed trace
    /// write is one warning.
    #[test]
    fn rounds_and_trace_failures_are_printed_as_lines() {
        let p = Printer::keeping(Verbosity::Normal, false);
        let mut rounds = RoundPrinter::new(p.clone());
        rounds.event(&event(EventKind::Step {
            round: 1,
            thought: "add them".into(),
            action: "calculator".into(),
            args: serde_json::json!({"expression": "2+2"}),
            prompt_tokens: 10,
            reused_tokens: 0,
            sampled_tokens: 5,
            forced_tokens: 5,
            prefill_ms: 300.0,
            mask_ms: 1.0,
            decode_ms: 200.0,
        }));
        rounds.event(&event(EventKind::ToolResult {
            round: 1,
            tool: "calculator".into(),
            args: serde_json::json!({"expression": "2+2"}),
            ok: true,
            error_class: None,
            observation: "4\u{1b}".into(),
            ms: 500.0,
            cached: false,
        }));
        assert_eq!(
            p.take_kept(),
            "round 1: calculator {\"expression\":\"2+2\"} → ok: 4\\x1b (1.0 s)\n"
        );

        struct Broken;
        impl std::io::Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut trace = TraceSink::new(TraceWriter::new(Box::new(Broken)), p.clone());
        let warning = event(EventKind::Warning {
            message: "x".into(),
        });
        trace.event(&warning);
        trace.event(&warning);
        assert_eq!(
            p.take_kept(),
            "warning: cannot write the trace: disk full; the rest of the trace is lost\n"
        );
    }

    /// Without a terminal a fetch shows its notes and one summary line per step; on one, the
    /// bytes are redrawn in place and the summary ends the line.
    #[test]
    fn fetch_progress_is_a_summary_line_or_a_redrawn_one() {
        let p = Printer::keeping(Verbosity::Normal, false);
        let f = FetchLines::new(p.clone());
        f.note("fetched x");
        f.bytes("downloading x", 1_000_000, 2_000_000);
        f.finished("downloading x", 2_000_000, 2_000_000, 1.26);
        assert_eq!(p.take_kept(), "fetched x\ndownloading x: 2.0 MB in 1.3 s\n");
        let t = Printer::keeping(Verbosity::Normal, true);
        let f = FetchLines::new(t.clone());
        f.bytes("verifying x", 1_000_000, 2_000_000);
        f.finished("verifying x", 2_000_000, 2_000_000, 0.5);
        assert_eq!(
            t.take_kept(),
            "\rverifying x: 1.0 MB / 2.0 MB (50%)\x1b[K\rverifying x: 2.0 MB / 2.0 MB (100%) in 0.5 s\x1b[K\n"
        );
    }
}
