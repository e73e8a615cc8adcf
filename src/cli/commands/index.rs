//! `cairn index DIR...`: builds or updates the search index (`--index FILE`) from folders of
//! documents, and says what changed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::cli::outputs::{check_output, inputs_of, OutputKind};
use crate::cli::printer::Printer;
use crate::config::{Config, Verbosity};
use crate::index::Index;

/// Flags of `cairn index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Folders (or files) to index; text files under them are chunked, binary files skipped.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `cairn index`.
pub fn run(config: &Config, printer: &Printer, args: &IndexArgs) -> anyhow::Result<ExitCode> {
    let start = std::time::Instant::now();
    check_output(
        "--index",
        &config.index,
        OutputKind::Index,
        &inputs_of(config, &[]),
        config.index_named,
    )?;
    let mut index = Index::open_or_create(&config.index)
        .with_context(|| format!("cannot open the index {}", config.index.display()))?;
    let report = index.update(&args.dirs)?;
    let mut out = printer.out();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        writeln!(
            out,
            "{}: {} files, {} chunks ({} added, {} changed, {} unchanged, {} removed, {} skipped)",
            config.index.display(),
            report.files,
            report.chunks,
            report.added,
            report.changed,
            report.unchanged,
            report.removed,
            report.skipped
        )?;
    }
    drop(out);
    if printer.shows(Verbosity::Normal) {
        // A folder of images would flood the terminal: ten lines unless -v asks for all.
        let shown = if printer.verbose() {
            report.skipped_files.len()
        } else {
            10
        };
        for s in report.skipped_files.iter().take(shown) {
            printer.info(&format!("skipped {}: {}", s.path.display(), s.why));
        }
        if report.skipped_files.len() > shown {
            printer.info(&format!(
                "skipped {} more files (-v lists them all)",
                report.skipped_files.len() - shown
            ));
        }
    }
    printer.detail(&format!(
        "indexed in {:.2} s",
        start.elapsed().as_secs_f64()
    ));
    Ok(ExitCode::SUCCESS)
}
