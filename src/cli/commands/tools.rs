//! `cairn tools [list] [--json]` and `cairn tools call NAME 'JSON'`: the tools the agent gets
//! from the current settings, with their argument schemas, and calling one exactly as the agent
//! would (validation, timeout, truncation) for people and scripts.
//!
//! A call prints the observation on stdout and exits 0, or prints the error with its class
//! (`transient`, `invalid_input`, `timeout`, `fatal`) and hint on stderr and exits 1. With
//! `--json` both outcomes are one JSON object on stdout.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::printer::Printer;
use crate::config::{Config, Verbosity};
use crate::tools::{RegistryOptions, ToolRegistry};

/// Flags of `cairn tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// What to do (default: list).
    #[command(subcommand)]
    pub command: Option<ToolsCommand>,
    /// Print JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Cut observations longer than this many characters (with a marker).
    #[arg(long, global = true, value_name = "N", default_value_t = 2000)]
    pub max_chars: usize,
    /// Fail a call that runs longer than this many seconds.
    #[arg(long, global = true, value_name = "SECS", default_value_t = 30.0)]
    pub timeout: f64,
}

/// The `cairn tools` subcommands.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List every tool with its description and argument schema.
    List,
    /// Call one tool with arguments given as JSON, as the agent would.
    Call {
        /// The tool's name.
        name: String,
        /// The arguments, one JSON object, e.g. '{"expression": "2^10"}'.
        args: String,
    },
}

/// Runs `cairn tools`.
pub fn run(config: &Config, printer: &Printer, args: &ToolsArgs) -> anyhow::Result<ExitCode> {
    let timeout = crate::config::seconds("--timeout", args.timeout).map_err(anyhow::Error::msg)?;
    if args.max_chars == 0 {
        anyhow::bail!("--max-chars must be at least 1");
    }
    let options = RegistryOptions {
        timeout,
        max_chars: args.max_chars,
    };
    let registry = ToolRegistry::from_sources(&config.tool_sources(), options)?;
    let mut out = printer.out();
    match &args.command {
        None | Some(ToolsCommand::List) => {
            if args.json {
                let unavailable: Vec<_> = registry
                    .unavailable()
                    .map(|(n, r)| json!({"name": n, "reason": r}))
                    .collect();
                let v = json!({"tools": registry.list(), "unavailable": unavailable});
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            } else {
                for t in registry.list() {
                    writeln!(out, "{}", t.name)?;
                    for line in t.description.lines() {
                        writeln!(out, "  {line}")?;
                    }
                    writeln!(out, "  args: {}", serde_json::to_string(&t.args_schema)?)?;
                    writeln!(out)?;
                }
                for (_, reason) in registry.unavailable() {
                    writeln!(out, "{reason}")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(ToolsCommand::Call {
            name,
            args: json_args,
        }) => match registry.call(name, json_args) {
            Ok(obs) => {
                if args.json {
                    let v =
                        json!({"ok": true, "observation": obs.text, "cut_chars": obs.cut_chars});
                    writeln!(out, "{v}")?;
                } else {
                    writeln!(out, "{}", obs.text)?;
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                if args.json {
                    writeln!(out, "{}", json!({"ok": false, "error": e}))?;
                } else {
                    drop(out);
                    printer.line(
                        Verbosity::Quiet,
                        &format!("error ({}): {}", e.class, e.message),
                    );
                    if let Some(h) = &e.hint {
                        printer.line(Verbosity::Quiet, &format!("hint: {h}"));
                    }
                }
                Ok(ExitCode::from(1))
            }
        },
    }
}
