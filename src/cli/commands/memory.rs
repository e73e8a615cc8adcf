//! `cairn memory sessions | show SESSION | search QUERY | forget SESSION | forget --fact ID |
//! export SESSION --json`: looking into the memory file, and removing what should not be
//! remembered.
//!
//! A thin layer over [`crate::memory::MemoryStore`]: results on stdout (a table, a readable
//! transcript, or JSON), notes on stderr. Reading commands never create the memory file; an
//! unknown session is an error (exit 2) that lists the known ones.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::cli::outputs::{check_output, inputs_of, OutputKind};
use crate::cli::printer::Printer;
use crate::config::Config;
use crate::memory::{
    format_utc, Fact, FactId, FactScope, MemoryError, MemoryStore, SessionInfo, Step, Turn,
    TurnSummary,
};
use crate::tools::escape_controls;

/// The `cairn memory` subcommands.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List the sessions: turns, steps, facts, last activity.
    Sessions(SessionsArgs),
    /// A session's turns and steps as a readable transcript.
    Show(ShowArgs),
    /// Search long-term facts of every session, best first (BM25 × time decay).
    Search(SearchArgs),
    /// Delete a session (its turns, steps and facts) or one fact.
    Forget(ForgetArgs),
    /// Print a session, its turns, steps and facts as one JSON document.
    Export(ExportArgs),
}

/// Flags of `cairn memory sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Print a JSON array on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `cairn memory show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session's name (or id).
    pub session: String,
}

/// Flags of `cairn memory search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words to look for; any text is fine (quotes and operators are taken literally).
    pub query: String,
    /// How many facts to show.
    #[arg(short = 'k', long, default_value_t = 10, value_name = "N")]
    pub top_k: usize,
    /// Print a JSON array on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `cairn memory forget`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["session", "fact"]))]
pub struct ForgetArgs {
    /// The session to delete, by name (or id).
    pub session: Option<String>,
    /// Delete this one fact instead (ids are shown by `cairn memory search`).
    #[arg(long, value_name = "ID")]
    pub fact: Option<i64>,
}

/// Flags of `cairn memory export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The session's name (or id).
    pub session: String,
    /// JSON output (the only format; accepted so scripts can say what they expect).
    #[arg(long)]
    pub json: bool,
}

/// Runs a `cairn memory` subcommand.
pub fn run(
    config: &Config,
    printer: &Printer,
    command: &MemoryCommand,
) -> anyhow::Result<ExitCode> {
    let Some(store) = open_existing(config)? else {
        return missing_file(config, printer, command);
    };
    let mut out = printer.out();
    match command {
        MemoryCommand::Sessions(args) => {
            let sessions = store.sessions()?;
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&sessions)?)?;
            } else {
                write_sessions(&mut out, &sessions)?;
            }
        }
        MemoryCommand::Show(args) => {
            let session = store.find_session(&args.session)?;
            write_transcript(&mut out, &store, &session)?;
        }
        MemoryCommand::Search(args) => {
            let found = store.search_facts(&args.query, args.top_k, config.memory_decay)?;
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&found)?)?;
            } else {
                let names = session_names(&store)?;
                for f in &found {
                    writeln!(
                        out,
                        "#{:<6} {:>9}  {:<20} {}",
                        f.fact.id.0,
                        score_text(f.score),
                        scope_label(&f.fact, &names),
                        one_line(&f.fact.text)
                    )?;
                }
                if found.is_empty() {
                    printer.info(&format!("no fact matches `{}`", args.query));
                }
            }
        }
        MemoryCommand::Forget(args) => {
            if let Some(id) = args.fact {
                store.forget_fact(FactId(id))?;
                writeln!(out, "forgot fact #{id}")?;
            } else if let Some(name) = &args.session {
                let session = store.find_session(name)?;
                let gone = store.forget_session(session.id)?;
                writeln!(
                    out,
                    "forgot session `{}`: {} turns, {} steps, {} facts",
                    session.name, gone.turns, gone.steps, gone.facts
                )?;
            }
        }
        MemoryCommand::Export(args) => {
            let session = store.find_session(&args.session)?;
            let turns = store
                .turns(session.id)?
                .into_iter()
                .map(|turn| {
                    let steps = store.steps(turn.id)?;
                    let summary = store.summary(turn.id)?;
                    Ok(ExportTurn {
                        turn,
                        steps,
                        summary,
                    })
                })
                .collect::<Result<Vec<_>, MemoryError>>()?;
            let facts = store.session_facts(session.id)?;
            let doc = Export {
                memory_file: store.path(),
                session,
                turns,
                facts,
            };
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The store, or `None` when the memory file does not exist yet (reading never creates it).
fn open_existing(config: &Config) -> anyhow::Result<Option<MemoryStore>> {
    if !config.memory.exists() {
        return Ok(None);
    }
    check_output(
        "--memory",
        &config.memory,
        OutputKind::Memory,
        &inputs_of(config, &[]),
        config.memory_named,
    )?;
    Ok(Some(MemoryStore::open(&config.memory)?))
}

fn missing_file(
    config: &Config,
    printer: &Printer,
    command: &MemoryCommand,
) -> anyhow::Result<ExitCode> {
    let path = &config.memory;
    let unknown = |name: &str| MemoryError::UnknownSession {
        name: name.to_string(),
        path: path.clone(),
        known: "none (the memory file does not exist yet)".to_string(),
    };
    match command {
        MemoryCommand::Sessions(args) => {
            if args.json {
                printer.result("[]")?;
            } else {
                printer.info(&format!("no memory yet: {} does not exist", path.display()));
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Search(args) => {
            if args.json {
                printer.result("[]")?;
            } else {
                printer.info(&format!("no memory yet: {} does not exist", path.display()));
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Show(ShowArgs { session })
        | MemoryCommand::Export(ExportArgs { session, .. }) => Err(unknown(session).into()),
        MemoryCommand::Forget(args) => match (&args.session, args.fact) {
            (_, Some(id)) => Err(MemoryError::UnknownFact(id).into()),
            (Some(name), None) => Err(unknown(name).into()),
            (None, None) => Ok(ExitCode::SUCCESS),
        },
    }
}

#[derive(Serialize)]
struct Export<'a> {
    memory_file: &'a Path,
    session: SessionInfo,
    turns: Vec<ExportTurn>,
    facts: Vec<Fact>,
}

#[derive(Serialize)]
struct ExportTurn {
    #[serde(flatten)]
    turn: Turn,
    steps: Vec<Step>,
    /// The turn's summary, once it no longer fitted in full in a prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<TurnSummary>,
}

fn session_names(store: &MemoryStore) -> Result<HashMap<i64, String>, MemoryError> {
    Ok(store
        .sessions()?
        .into_iter()
        .map(|s| (s.id.0, s.name))
        .collect())
}

fn scope_label(fact: &Fact, names: &HashMap<i64, String>) -> String {
    match fact.scope {
        FactScope::Global => "global".to_string(),
        FactScope::Session(s) => match names.get(&s.0) {
            Some(n) => format!("session {n}"),
            None => format!("session #{}", s.0),
        },
    }
}

/// A score with three significant digits, in exponent form when tiny (old facts decay far).
fn score_text(score: f64) -> String {
    if score >= 0.001 {
        format!("{score:.3}")
    } else {
        format!("{score:.2e}")
    }
}

/// The transcript shows this much of an observation; `export --json` has all of it.
const SHOWN_CHARS: usize = 600;

fn shortened(text: &str) -> String {
    let total = text.chars().count();
    if total <= SHOWN_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "{head}… ({} more characters; `cairn memory export` has all)",
        total - SHOWN_CHARS
    )
}

fn one_line(s: &str) -> String {
    escape_controls(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn write_sessions(out: &mut impl Write, sessions: &[SessionInfo]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:>6} {:>6} {:>6}  last active (UTC)",
        "session", "turns", "steps", "facts"
    )?;
    for s in sessions {
        writeln!(
            out,
            "{:<24} {:>6} {:>6} {:>6}  {}",
            s.name,
            s.turns,
            s.steps,
            s.facts,
            format_utc(s.last_active_at)
        )?;
    }
    Ok(())
}

/// Writes `text` after `label`, indenting continuation lines under the first.
fn write_block(out: &mut impl Write, indent: &str, label: &str, text: &str) -> std::io::Result<()> {
    // Stored text came from the model and tools: no raw control bytes reach the terminal.
    let text = escape_controls(text);
    let mut lines = text.lines();
    writeln!(out, "{indent}{label}: {}", lines.next().unwrap_or(""))?;
    let pad = " ".repeat(label.len() + 2);
    for line in lines {
        writeln!(out, "{indent}{pad}{line}")?;
    }
    Ok(())
}

fn write_transcript(
    out: &mut impl Write,
    store: &MemoryStore,
    session: &SessionInfo,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "session {} (id {}), created {} UTC: {} turns, {} steps, {} facts",
        session.name,
        session.id.0,
        format_utc(session.created_at),
        session.turns,
        session.steps,
        session.facts
    )?;
    for (n, turn) in store.turns(session.id)?.iter().enumerate() {
        writeln!(out)?;
        let ending = match &turn.end {
            Some(e) => format!(
                "{}, {} ms, {} prompt + {} generated tokens",
                e.stop_reason, e.latency_ms, e.prompt_tokens, e.generated_tokens
            ),
            None => "unfinished".to_string(),
        };
        writeln!(
            out,
            "turn {} · {} UTC · {ending}",
            n + 1,
            format_utc(turn.started_at)
        )?;
        write_block(out, "", "task", &turn.task)?;
        for step in store.steps(turn.id)? {
            let r = &step.record;
            let class = r
                .error_class
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            writeln!(
                out,
                "  round {} · {} · {}{class} · {} ms",
                r.round, r.action, r.outcome, r.latency_ms
            )?;
            if !r.thought.is_empty() {
                write_block(out, "    ", "thought", &r.thought)?;
            }
            write_block(out, "    ", "args", &r.args_json)?;
            write_block(out, "    ", "observation", &shortened(&r.observation))?;
        }
        if let Some(e) = &turn.end {
            write_block(out, "", "answer", &e.answer)?;
        }
        if let Some(summary) = store.summary(turn.id)? {
            write_block(out, "", "summary", &summary.line())?;
        }
    }
    let facts = store.session_facts(session.id)?;
    if !facts.is_empty() {
        writeln!(out)?;
        writeln!(out, "facts:")?;
        for f in facts {
            writeln!(out, "  #{} {}", f.id.0, one_line(&f.text))?;
        }
    }
    Ok(())
}
