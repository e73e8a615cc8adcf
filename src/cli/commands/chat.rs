//! `cairn chat`: an interactive, multi-turn session. Each line is a task for the agent loop;
//! the session's earlier turns and facts are in every prompt, so a follow-up ("And what would
//! 10 of them cost?") works. Everything is in the memory file, so a session resumes after
//! exit (`cairn chat --session S`). With a terminal, lines are edited with history (kept in
//! HOME/chat_history.txt); without one (a pipe), each input line is one task.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Args;

use super::agents::build_agent;
use super::run::{print_result, AgentArgs};
use crate::cli::outputs::{check_output, inputs_of, OutputKind};
use crate::cli::printer::Printer;
use crate::config::Config;

/// The session `cairn chat` uses without `--session`.
pub const DEFAULT_SESSION: &str = "chat";

/// Flags of `cairn chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Print each result as one JSON object instead of the answer alone.
    #[arg(long)]
    pub json: bool,
    /// The agent loop's flags (`--session S` picks the session; default `chat`).
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// Where input lines come from.
enum Input {
    Editor(Box<rustyline::DefaultEditor>, std::path::PathBuf),
    Lines {
        stdin: std::io::StdinLock<'static>,
        /// Lines read so far, for messages.
        number: usize,
        /// Lines skipped because they were not UTF-8.
        skipped: usize,
    },
}

impl Input {
    /// The next line; `None` at the end of input (Ctrl-D) or on Ctrl-C. A line that is not
    /// UTF-8 is reported through `printer` and skipped.
    fn next(&mut self, printer: &Printer) -> anyhow::Result<Option<String>> {
        match self {
            Input::Editor(ed, _) => match ed.readline("> ") {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = ed.add_history_entry(line.as_str());
                    }
                    Ok(Some(line))
                }
                Err(rustyline::error::ReadlineError::Eof)
                | Err(rustyline::error::ReadlineError::Interrupted) => Ok(None),
                Err(e) => Err(anyhow::anyhow!("cannot read the input line: {e}")),
            },
            Input::Lines {
                stdin,
                number,
                skipped,
            } => loop {
                let line = crate::eval::next_line(stdin)
                    .map_err(|e| anyhow::anyhow!("cannot read standard input: {e}"))?;
                let Some(line) = line else {
                    return Ok(None);
                };
                *number += 1;
                match line {
                    Ok(l) => return Ok(Some(l)),
                    // One bad line must not end the session: report it and go on, as batch does.
                    Err(why) => {
                        printer.error(&format!(
                            "standard input line {number}: {why}; the line is skipped"
                        ));
                        *skipped += 1;
                    }
                }
            },
        }
    }

    fn save_history(&mut self, printer: &Printer) {
        if let Input::Editor(ed, path) = self {
            if let Err(e) = ed.save_history(path) {
                printer.warn(&format!(
                    "the line history was not saved to {}: {e}",
                    path.display()
                ));
            }
        }
    }
}

/// Runs `cairn chat`.
pub fn run(config: &Config, printer: &Printer, args: &ChatArgs) -> anyhow::Result<ExitCode> {
    if args.agent.no_memory {
        anyhow::bail!(
            "cairn chat keeps its turns in memory to work at all; drop --no-memory (or use cairn run for one-off tasks)"
        );
    }
    let session = args
        .agent
        .session
        .clone()
        .unwrap_or_else(|| DEFAULT_SESSION.to_string());
    let mut agent = build_agent(config, printer, &args.agent)?;
    let earlier = match agent.memory() {
        Some(store) => {
            let sid = store.session(&session)?;
            store.turns(sid)?.len()
        }
        None => 0,
    };
    let interactive = std::io::stdin().is_terminal();
    let mut input = if interactive {
        let mut ed = rustyline::DefaultEditor::new()
            .map_err(|e| anyhow::anyhow!("cannot start the line editor: {e}"))?;
        let history = config.home.join("chat_history.txt");
        check_output(
            "the chat history",
            &history,
            OutputKind::History,
            &inputs_of(config, &[]),
            false,
        )?;
        let _ = ed.load_history(&history);
        Input::Editor(Box::new(ed), history)
    } else {
        Input::Lines {
            stdin: std::io::stdin().lock(),
            number: 0,
            skipped: 0,
        }
    };
    printer.info(&format!(
        "cairn chat: session `{session}`{}. One task per line; Ctrl-D or /exit ends, and `cairn chat --session {session}` resumes.",
        if earlier > 0 {
            format!(" resumed with {earlier} earlier turns")
        } else {
            String::new()
        }
    ));
    let mut all_answered = true;
    while let Some(line) = input.next(printer)? {
        let task = line.trim();
        if task.is_empty() {
            continue;
        }
        if task == "/exit" || task == "/quit" {
            break;
        }
        let result = agent.run_task(task, Some(&session));
        print_result(printer, &result, args.json)?;
        all_answered &= result.answered();
    }
    input.save_history(printer);
    if let Input::Lines { skipped, .. } = input {
        all_answered &= skipped == 0;
    }
    Ok(if all_answered || interactive {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
