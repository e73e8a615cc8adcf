//! `cairn mcp ping 'COMMAND ARGS...'`: starts one MCP server as cairn would (its own process
//! group, only PATH and HOME in its environment), does the handshake, lists its tools and
//! says which ones cairn can use, then stops it. Exit 0 when the server answered, 1 when it
//! did not (the message says why, with the end of its stderr), 2 for a bad command line.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::printer::Printer;
use crate::config::{Config, Verbosity};
use crate::tools::mcp::{McpServer, ServerSpec};
use crate::tools::Tool;

/// The `cairn mcp` subcommands.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start a server, list its tools, stop it: is it usable by cairn?
    Ping(PingArgs),
}

/// Flags of `cairn mcp ping`.
#[derive(Debug, Args)]
pub struct PingArgs {
    /// The server: 'COMMAND ARGS...' or 'NAME=COMMAND ARGS...', as for --mcp.
    pub command: String,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `cairn mcp`.
pub fn run(_config: &Config, printer: &Printer, command: &McpCommand) -> anyhow::Result<ExitCode> {
    let McpCommand::Ping(args) = command;
    let spec = ServerSpec::from_command_line(&args.command)?;
    let start = Instant::now();
    let server = match McpServer::start(spec) {
        Ok(s) => s,
        Err(e) => {
            if args.json {
                writeln!(
                    printer.out(),
                    "{}",
                    json!({"ok": false, "error": e.to_string()})
                )?;
            } else {
                printer.line(Verbosity::Quiet, &format!("error: {e}"));
            }
            return Ok(ExitCode::from(1));
        }
    };
    let ms = start.elapsed().as_millis() as u64;
    let (tools, left_out) = server.tools();
    let ident = server.ident();
    let mut out = printer.out();
    if args.json {
        let tools: Vec<_> = tools
            .iter()
            .map(|t| json!({"name": t.name(), "server_name": t.remote_name(), "description": t.description(), "args_schema": t.args_schema()}))
            .collect();
        let left: Vec<_> = left_out
            .iter()
            .map(|(n, why)| json!({"name": n, "reason": why}))
            .collect();
        let v = json!({
            "ok": true,
            "name": server.spec().name,
            "server": {"name": ident.name, "version": ident.version, "protocol": ident.protocol},
            "started_ms": ms,
            "tools": tools,
            "left_out": left,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        writeln!(
            out,
            "{}: {} {} (protocol {}) answered in {ms} ms with {} tools, {} usable",
            server.spec().name,
            ident.name,
            ident.version,
            ident.protocol,
            tools.len() + left_out.len(),
            tools.len()
        )?;
        for t in &tools {
            let d = t.description();
            let first = d.lines().next().unwrap_or("");
            writeln!(out, "  {}  {first}", t.name())?;
        }
        for (n, why) in &left_out {
            writeln!(out, "  {n}  (left out: {why})")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
