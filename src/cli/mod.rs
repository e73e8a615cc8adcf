//! The command line: clap structs that mirror the flags exactly as typed ([`Cli`]), the step
//! that turns them into a validated [`Config`], and error reporting with the documented exit
//! codes (0 success; 1 the task ran but did not succeed; 2 bad usage or input).
//!
//! Each subcommand lives in its own file under [`commands`] and receives the `Config`, the
//! [`Printer`] it writes everything through, and its own argument struct, never the raw `Cli`.

pub mod commands;
pub mod outputs;
pub mod printer;
pub mod report;

pub use printer::Printer;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Verbosity};

/// `cairn`: an offline AI agent on a local quantized model.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, propagate_version = true)]
pub struct Cli {
    /// Settings shared by every subcommand.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand accepts (see `config::SETTINGS`).
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Model: a GGUF path, a preset name (`cairn model list`), or hf:REPO/FILE. [env: CAIRN_MODEL]
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// cairn's home folder (fetched models go to HOME/models). [env: CAIRN_HOME]
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<std::path::PathBuf>,
    /// Never fetch anything. [env: CAIRN_OFFLINE, HF_HUB_OFFLINE]
    #[arg(long, global = true)]
    pub offline: bool,
    /// Threads for the model's matrix multiplications (default: all cores; at most four per
    /// core). [env: CAIRN_THREADS]
    #[arg(long, global = true, value_name = "N")]
    pub threads: Option<usize>,
    /// Native engine on Linux: read the model file into memory backed by 2 MB pages instead
    /// of mapping it (faster decoding where memory bandwidth bounds it, a slower load).
    /// [env: CAIRN_HUGE_PAGES]
    #[arg(long, global = true)]
    pub huge_pages: bool,
    /// With `--engine candle`: keep Q4_1/Q5_0/Q5_1 tensors as stored instead of
    /// re-quantizing them to Q8_0 at load (the native engine always keeps them).
    /// [env: CAIRN_KEEP_QUANT]
    #[arg(long, global = true)]
    pub keep_quant: bool,
    /// The forward pass: `native` (cairn's own CPU kernels, the default) or `candle` (the
    /// candle engine; on the CPU, the reference the native one is tested against).
    /// [env: CAIRN_ENGINE]
    #[arg(long, global = true, value_name = "ENGINE")]
    pub engine: Option<String>,
    /// Where the model runs: `cpu` (the default), `cuda` or `cuda:N` (an NVIDIA GPU; needs a
    /// build with `--features cuda`), `metal` (needs `--features metal`). A GPU runs the
    /// candle engine. [env: CAIRN_DEVICE]
    #[arg(long, global = true, value_name = "DEVICE")]
    pub device: Option<String>,
    /// The memory file (sessions, turns, steps, facts). [env: CAIRN_MEMORY]
    #[arg(long, global = true, value_name = "FILE")]
    pub memory: Option<std::path::PathBuf>,
    /// Per-hour decay of a fact's recall score, above 0 and at most 1 (default 0.9).
    /// [env: CAIRN_MEMORY_DECAY]
    #[arg(long, global = true, value_name = "X")]
    pub memory_decay: Option<f64>,
    /// Do not keep the state of the agent's system prompt in HOME/prompts/ for the next run
    /// (native engine). [env: CAIRN_NO_PROMPT_CACHE]
    #[arg(long, global = true)]
    pub no_prompt_cache: bool,
    /// Decode the sql tool's queries without the pattern built from the database's own names
    /// (for comparison). [env: CAIRN_FREE_SQL]
    #[arg(long, global = true)]
    pub free_sql: bool,
    /// The SQLite database the sql tool queries (read-only). [env: CAIRN_DB]
    #[arg(long, global = true, value_name = "FILE")]
    pub db: Option<std::path::PathBuf>,
    /// The search index built by `cairn index`. [env: CAIRN_INDEX]
    #[arg(long, global = true, value_name = "FILE")]
    pub index: Option<std::path::PathBuf>,
    /// A TOML manifest of user-declared tools. [env: CAIRN_TOOLS]
    #[arg(long, global = true, value_name = "FILE")]
    pub tools: Option<std::path::PathBuf>,
    /// An MCP server to start over stdio: 'COMMAND ARGS...' or 'NAME=COMMAND ARGS...'; its tools
    /// become NAME.TOOL. Repeat for more servers. [env: CAIRN_MCP]
    #[arg(long, global = true, value_name = "COMMAND")]
    pub mcp: Vec<String>,
    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// More detail on stderr.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task through the agent loop and print the answer.
    Run(commands::run::RunArgs),
    /// Talk to the agent: one task per line, multi-turn, resumable (`--session S`).
    Chat(commands::chat::ChatArgs),
    /// Run many tasks from a JSONL file; resumable, sharded, several jobs.
    Batch(commands::batch::BatchArgs),
    /// Run a task suite, score it, and print the metrics (side by side with --baseline naive).
    Eval(commands::batch::EvalArgs),
    /// Function calling: pick a function and fill its arguments, valid by construction.
    Call(commands::call::CallArgs),
    /// Raw generation from a prompt, streamed to stdout.
    Generate(commands::generate::GenerateArgs),
    /// Prefill and decode throughput, like llama-bench.
    Bench(commands::bench::BenchArgs),
    /// List, fetch and inspect models.
    Model {
        /// What to do.
        #[command(subcommand)]
        command: commands::model::ModelCommand,
    },
    /// Inspect, search, export or forget memory: sessions, turns, steps and facts.
    Memory {
        /// What to do.
        #[command(subcommand)]
        command: commands::memory::MemoryCommand,
    },
    /// List the tools with their argument schemas, or call one as the agent would.
    Tools(commands::tools::ToolsArgs),
    /// Build or update the search index from folders of documents.
    Index(commands::index::IndexArgs),
    /// Check a Model Context Protocol server: start it, list its tools, stop it.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: commands::mcp::McpCommand,
    },
    /// Search the index and print the best passages with file:line.
    Search(commands::search::SearchArgs),
}

impl GlobalArgs {
    /// Turns the flags into a validated [`Config`]: flags over `CAIRN_*` variables over defaults.
    pub fn to_config(&self) -> anyhow::Result<Config> {
        let mut config = Config::default();
        if let Some(m) = &self.model {
            config.model = Some(m.clone());
        }
        if let Some(h) = &self.home {
            config.home = h.clone();
        }
        config.offline |= self.offline;
        if let Some(v) = crate::config::env_nonempty("CAIRN_THREADS") {
            config.threads = v.trim().parse().map_err(|_| {
                anyhow::anyhow!(
                    "CAIRN_THREADS is `{v}`: expected a whole number of threads, at least 1"
                )
            })?;
        }
        if let Some(t) = self.threads {
            config.threads = t;
        }
        let from = if self.threads.is_some() {
            "--threads"
        } else {
            "CAIRN_THREADS"
        };
        if self.threads.is_some() || crate::config::env_nonempty("CAIRN_THREADS").is_some() {
            crate::config::check_threads(from, config.threads).map_err(anyhow::Error::msg)?;
        }
        if let Some(v) = crate::config::env_nonempty("CAIRN_ISA") {
            // A typo is an error instead of silently running the best kernels.
            config.isa = Some(crate::model::cpu::kernels::Isa::parse(v.trim()).ok_or_else(|| {
                anyhow::anyhow!(
                    "CAIRN_ISA is `{v}`: expected scalar, avx2, avx512 or amx (or leave it unset for the best this CPU has)"
                )
            })?);
        }
        if self.keep_quant {
            config.requantize = false;
        }
        config.huge_pages |= self.huge_pages;
        if let Some(v) = crate::config::env_nonempty("CAIRN_ENGINE") {
            config.engine = v
                .trim()
                .parse()
                .map_err(|e: String| anyhow::anyhow!("CAIRN_ENGINE: {e}"))?;
        }
        let engine_named =
            self.engine.is_some() || crate::config::env_nonempty("CAIRN_ENGINE").is_some();
        if let Some(e) = &self.engine {
            config.engine = e
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--engine: {e}"))?;
        }
        let device_from = if self.device.is_some() {
            "--device"
        } else {
            "CAIRN_DEVICE"
        };
        if let Some(d) = self
            .device
            .clone()
            .or_else(|| crate::config::env_nonempty("CAIRN_DEVICE"))
        {
            config.device = d
                .parse()
                .map_err(|e: String| anyhow::anyhow!("{device_from}: {e}"))?;
        }
        if !config.device.is_cpu() {
            // Said now, before a model is fetched or loaded.
            config
                .device
                .check_compiled()
                .map_err(|e| anyhow::anyhow!("{device_from}: {e}"))?;
            if engine_named && config.engine == crate::model::Engine::Native {
                anyhow::bail!(
                    "{device_from} is {}: the native engine runs on the CPU only; leave out --engine (a GPU runs the candle engine) or use --device cpu",
                    config.device
                );
            }
            config.engine = crate::model::Engine::Candle;
        }
        if config.huge_pages && config.engine != crate::model::Engine::Native {
            // The candle engine reads tensors its own way: the flag would do nothing.
            anyhow::bail!(
                "{} with the candle engine: the 2 MB pages are for the native engine's weights only; leave it out, or use --engine native on the CPU",
                if self.huge_pages { "--huge-pages" } else { "CAIRN_HUGE_PAGES" }
            );
        }
        if let Some(m) = &self.memory {
            config.memory = m.clone();
            config.memory_named = true;
        } else if let (Some(h), None) = (&self.home, crate::config::env_nonempty("CAIRN_MEMORY")) {
            config.memory = h.join("memory.sqlite");
        }
        if let Some(db) = &self.db {
            config.db = Some(db.clone());
        }
        if self.free_sql {
            config.free_sql = true;
        }
        if self.no_prompt_cache {
            config.prompt_cache = false;
        }
        if let Some(i) = &self.index {
            config.index = i.clone();
            config.index_named = true;
        } else if let (Some(h), None) = (&self.home, crate::config::env_nonempty("CAIRN_INDEX")) {
            config.index = h.join("index.sqlite");
        }
        if let Some(t) = &self.tools {
            config.tools = Some(t.clone());
        }
        let mcp_lines = if self.mcp.is_empty() {
            crate::config::env_nonempty("CAIRN_MCP")
                .into_iter()
                .collect()
        } else {
            self.mcp.clone()
        };
        for line in &mcp_lines {
            config.mcp.push(
                crate::tools::mcp::ServerSpec::from_command_line(line)
                    .map_err(|e| anyhow::anyhow!("--mcp: {e}"))?,
            );
        }
        if let Some(v) = crate::config::env_nonempty("CAIRN_MEMORY_DECAY") {
            config.memory_decay = v.trim().parse().map_err(|_| {
                anyhow::anyhow!("CAIRN_MEMORY_DECAY is `{v}`: expected a number above 0 and at most 1, like 0.9")
            })?;
        }
        if let Some(d) = self.memory_decay {
            config.memory_decay = d;
        }
        if !(config.memory_decay > 0.0 && config.memory_decay <= 1.0) {
            anyhow::bail!(
                "--memory-decay is {}: it must be above 0 and at most 1 (1 = no decay; default 0.9 per hour)",
                config.memory_decay
            );
        }
        config.verbosity = if self.quiet {
            Verbosity::Quiet
        } else if self.verbose {
            Verbosity::Verbose
        } else {
            Verbosity::Normal
        };
        Ok(config)
    }
}

/// Runs the parsed command line and maps the outcome to an exit code. The [`Printer`] is made
/// here, once, from the validated settings. Errors are printed with their whole chain; a
/// closed stdout (e.g. `| head`) ends quietly.
pub fn run(cli: Cli) -> ExitCode {
    ignore_file_size_signal();
    let config = cli.global.to_config();
    // Settings that do not validate still get their error shown.
    let printer = match &config {
        Ok(config) => Printer::from_config(config),
        Err(_) => Printer::new(Verbosity::Normal, std::io::stderr().is_terminal()),
    };
    let out = &printer;
    let result = config.and_then(|config| {
        init_runtime(config.threads, config.isa, config.huge_pages);
        let config = &config;
        match cli.command {
            Command::Run(args) => commands::run::run(config, out, &args),
            Command::Chat(args) => commands::chat::run(config, out, &args),
            Command::Batch(args) => commands::batch::run(config, out, &args),
            Command::Eval(args) => commands::batch::eval(config, out, &args),
            Command::Call(args) => commands::call::run(config, out, &args),
            Command::Generate(args) => commands::generate::run(config, out, &args),
            Command::Bench(args) => commands::bench::run(config, out, &args),
            Command::Model { command } => commands::model::run(config, out, &command),
            Command::Memory { command } => commands::memory::run(config, out, &command),
            Command::Tools(args) => commands::tools::run(config, out, &args),
            Command::Index(args) => commands::index::run(config, out, &args),
            Command::Mcp { command } => commands::mcp::run(config, out, &command),
            Command::Search(args) => commands::search::run(config, out, &args),
        }
    });
    match result {
        Ok(code) => {
            printer.end_line();
            code
        }
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            let _ = std::io::Write::flush(&mut printer.out());
            printer.error(&error_chain(&err));
            ExitCode::from(2)
        }
    }
}

/// Under a file-size limit (`ulimit -f`), a write past it raises SIGXFSZ, whose default
/// action kills the process mid-write. Ignored, the write fails with "File too large" and
/// the command reports it like any other full disk. (Tool processes inherit this.)
fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: signal(2) with SIG_IGN installs no handler code and touches no memory of ours;
    // it runs before any other thread is started.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Sets what the model runtime fixes once per process, before its first use: the CPU pool's
/// threads, the cap on the kernels' instruction set (`CAIRN_ISA`), and whether model files
/// are read into memory of 2 MB pages (`--huge-pages`).
fn init_runtime(threads: usize, isa: Option<crate::model::cpu::kernels::Isa>, huge_pages: bool) {
    crate::model::gguf::set_huge_pages(huge_pages);
    // The candle engine sizes its threads (candle's and rayon's) from the same setting when a
    // model is loaded on it (`LoadOptions::threads`).
    crate::model::cpu::pool::set_threads(threads);
    if let Some(isa) = isa {
        crate::model::cpu::kernels::Isa::limit_to(isa);
    }
}

/// The error and its causes joined with `: `, leaving out a cause whose text the message
/// already holds (many errors name their source in their own message; printed with the chain
/// as well, "No such file or directory" would appear twice).
pub fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for e in err.chain() {
        let text = e.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
