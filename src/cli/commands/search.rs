//! `cairn search QUERY`: the same BM25 search the `search` tool runs, printed for a person:
//! each hit as `path:line` and a few lines of text.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use crate::cli::printer::Printer;
use crate::config::Config;
use crate::index::Index;

/// Flags of `cairn search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for; any text (quotes and operators are treated as plain words).
    #[arg(required = true, num_args = 1.., value_name = "QUERY")]
    pub query: Vec<String>,
    /// How many results.
    #[arg(long, short = 'k', default_value_t = 5, value_name = "N")]
    pub top_k: usize,
    /// Print the hits as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// Runs `cairn search`. Exits 1 when nothing matched.
pub fn run(config: &Config, printer: &Printer, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    if args.top_k == 0 {
        anyhow::bail!("--top-k must be at least 1");
    }
    let query = args.query.join(" ");
    let index = Index::open_read_only(&config.index)?;
    let hits = index.search(&query, args.top_k)?;
    let mut out = printer.out();
    for (i, h) in hits.iter().enumerate() {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(h)?)?;
        } else {
            if i > 0 {
                writeln!(out)?;
            }
            // Document text: control bytes are shown, not sent to the terminal.
            write!(out, "{}", crate::tools::escape_controls(&h.render()))?;
        }
    }
    if hits.is_empty() {
        let (files, _) = index.counts()?;
        drop(out);
        printer.info(&format!("no results for `{query}` ({files} files indexed)"));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
