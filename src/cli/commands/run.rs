//! `cairn run TASK`: one task through the agent loop; the answer on stdout (`--json`: the
//! result object of a batch output line), one line per round on stderr.
//!
//! Also home of the flags `run` and `chat` share ([`AgentArgs`]) and of building the agent
//! from them ([`build_agent`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sha2::Digest;

use super::generate::SamplingArgs;
use crate::agent::{Agent, AgentOptions, AgentResult, ModelPolicy, StopReason, TraceWriter};
use crate::cli::outputs::{check_output, inputs_of, OutputKind};
use crate::cli::printer::Printer;
use crate::cli::report::{RoundPrinter, TraceSink};
use crate::config::{Config, Verbosity};
use crate::index::Index;
use crate::memory::MemoryStore;
use crate::tools::{escape_controls, RegistryOptions, ToolRegistry};

/// Flags of the agent loop, shared by `run` and `chat`.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// The memory session: its earlier turns and facts go into the prompt, and this task is
    /// recorded in it (created if new). `run` uses a new session per task without it.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Record nothing in memory and read nothing from it.
    #[arg(long)]
    pub no_memory: bool,
    /// The most rounds (steps) of a task; the last one may only give the final answer.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub max_rounds: usize,
    /// Consecutive failed rounds that stop a task (stop reason `failures`).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub max_failures: usize,
    /// Consecutive failures of one tool that turn it off for the rest of the task.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub circuit_after: usize,
    /// Attempts of a tool call that fails with a transient error (1 = no retry).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub retries: usize,
    /// Wait before the first retry, in milliseconds; it doubles on each further retry.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub retry_base_ms: u64,
    /// Wall-clock limit of a task, in seconds (stop reason `timeout`).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Stop as soon as a tool's result matches this regular expression; that result is the
    /// answer (stop reason `stop_when`).
    #[arg(long, value_name = "REGEX")]
    pub stop_when: Option<String>,
    /// After the final answer, ask the model whether it completes the task (0..1) and go on
    /// when it rates it below THRESHOLD (default 0.5).
    #[arg(long, value_name = "THRESHOLD", num_args = 0..=1, default_missing_value = "0.5")]
    pub self_check: Option<f64>,
    /// Write one JSON event per line to FILE (appended): prompts, steps with token counts and
    /// timings, tool calls and results, retries, circuits, trims, the stop.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Index these folders (unchanged files are skipped) and let the search tool read them.
    /// Without --index the index is kept in HOME/indexes/, one per set of folders.
    #[arg(long, value_name = "DIR")]
    pub docs: Vec<PathBuf>,
    /// Sampling (`--max-tokens` is the most tokens of one step).
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

impl AgentArgs {
    /// The validated loop options.
    pub fn options(&self, config: &Config) -> anyhow::Result<AgentOptions> {
        let stop_when = match &self.stop_when {
            Some(re) => Some(regex::Regex::new(re).map_err(|e| {
                anyhow::anyhow!("--stop-when `{re}` is not a valid regular expression: {e}")
            })?),
            None => None,
        };
        let timeout = self
            .timeout
            .map(|t| crate::config::seconds("--timeout", t))
            .transpose()
            .map_err(anyhow::Error::msg)?;
        if self.retry_base_ms > MAX_RETRY_BASE_MS {
            anyhow::bail!(
                "--retry-base-ms is {}: at most {MAX_RETRY_BASE_MS} (one minute; the wait doubles on each retry)",
                self.retry_base_ms
            );
        }
        if self.retries > MAX_RETRIES {
            anyhow::bail!(
                "--retries is {}: at most {MAX_RETRIES} attempts (the wait doubles on each one)",
                self.retries
            );
        }
        let o = AgentOptions {
            max_rounds: self.max_rounds,
            max_failed_rounds: self.max_failures,
            circuit_threshold: self.circuit_after,
            retry_attempts: self.retries,
            retry_base: Duration::from_millis(self.retry_base_ms),
            timeout,
            stop_when,
            max_step_tokens: self
                .sampling
                .max_tokens
                .unwrap_or(AgentOptions::default().max_step_tokens),
            self_check: self.self_check,
            memory_decay: config.memory_decay,
            ..AgentOptions::default()
        };
        o.validate().map_err(anyhow::Error::msg)?;
        Ok(o)
    }
}

/// The longest first wait between retries `--retry-base-ms` may set.
const MAX_RETRY_BASE_MS: u64 = 60_000;
/// The most attempts `--retries` may set.
const MAX_RETRIES: usize = 10;

/// Flags of `cairn run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task, in plain words.
    pub task: String,
    /// Print the result as one JSON object (answer, stop_reason, rounds, tool_calls, tokens,
    /// latency) instead of the answer alone.
    #[arg(long)]
    pub json: bool,
    /// The agent loop's flags.
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// The index file for `--docs` when no `--index` (or `CAIRN_INDEX`) was given: one per set
/// of folders, under `HOME/indexes/`, so demo folders never mix with the user's own index.
fn docs_index_path(config: &Config, docs: &[PathBuf]) -> anyhow::Result<PathBuf> {
    let mut canon = Vec::new();
    for d in docs {
        let c = d.canonicalize().with_context(|| {
            format!(
                "--docs {}: the folder does not exist or cannot be read",
                d.display()
            )
        })?;
        canon.push(c.to_string_lossy().into_owned());
    }
    canon.sort();
    canon.dedup();
    let digest = sha2::Sha256::digest(canon.join("\n").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(config.home.join("indexes").join(format!("{hex}.sqlite")))
}

/// Indexes `--docs` and points the config's index at the result.
fn index_docs(
    config: &mut Config,
    printer: &Printer,
    docs: &[PathBuf],
    index_given: bool,
) -> anyhow::Result<()> {
    if docs.is_empty() {
        return Ok(());
    }
    if !index_given {
        config.index = docs_index_path(config, docs)?;
        if let Some(dir) = config.index.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the folder {}", dir.display()))?;
        }
    }
    check_output(
        "--index",
        &config.index,
        OutputKind::Index,
        &inputs_of(config, &[]),
        index_given,
    )?;
    let mut index = Index::open_or_create(&config.index)
        .with_context(|| format!("cannot open the index {}", config.index.display()))?;
    let report = index.update(docs)?;
    printer.detail(&format!(
        "index {}: {} files, {} chunks ({} added, {} changed, {} unchanged)",
        config.index.display(),
        report.files,
        report.chunks,
        report.added,
        report.changed,
        report.unchanged
    ));
    Ok(())
}

/// Checks what the agent needs before the (slow) model load, builds the tools, opens memory,
/// loads the model, and returns the agent with its round printer and trace attached.
pub fn build_agent(
    config: &Config,
    printer: &Printer,
    args: &AgentArgs,
    index_given: bool,
) -> anyhow::Result<Agent<ModelPolicy>> {
    let memory = (!args.no_memory).then(|| config.memory.clone());
    let mut agents = build_agents(
        config,
        printer,
        args,
        index_given,
        1,
        memory.as_deref(),
        true,
    )?;
    agents
        .pop()
        .ok_or_else(|| anyhow::anyhow!("no agent was built"))
}

/// Like [`build_agent`], `jobs` agents sharing one loaded model and one token trie, each
/// with its own KV cache and memory connection (`memory`: the memory file, or none). Rounds
/// are printed through `printer` when `rounds_on_stderr` (or at -v).
pub fn build_agents(
    config: &Config,
    printer: &Printer,
    args: &AgentArgs,
    index_given: bool,
    jobs: usize,
    memory: Option<&Path>,
    rounds_on_stderr: bool,
) -> anyhow::Result<Vec<Agent<ModelPolicy>>> {
    let options = args.options(config)?;
    if jobs > 1 {
        // Each job runs its own forward passes: split the threads between them instead of
        // having every job's steps contend for one pool (measured on the smollm2 preset, 40
        // tasks: two jobs sharing a 2-thread pool took 33.4 s, longer than one job's 28.5 s).
        crate::model::cpu::pool::set_threads((config.threads / jobs).max(1));
    }
    let mut config = config.clone();
    if let Some(db) = &config.db {
        if !db.is_file() {
            anyhow::bail!(
                "the database {} does not exist; pass an existing SQLite file with --db FILE",
                db.display()
            );
        }
    }
    if memory == Some(config.memory.as_path()) {
        check_output(
            "--memory",
            &config.memory,
            OutputKind::Memory,
            &inputs_of(&config, &[]),
            config.memory_named,
        )?;
    }
    index_docs(&mut config, printer, &args.docs, index_given)?;
    let tools = ToolRegistry::from_sources(&config.tool_sources(), RegistryOptions::default())?;
    if config.db.is_some() {
        if let Some((_, why)) = tools.unavailable().find(|(n, _)| *n == "sql") {
            anyhow::bail!("--db: {why}");
        }
    }
    let opts = args.sampling.options()?;
    if let Some(p) = &args.trace {
        // Fail before the model load when the trace cannot be written.
        check_output(
            "--trace",
            p,
            OutputKind::Trace,
            &inputs_of(&config, &[]),
            true,
        )?;
        TraceWriter::create(p)
            .with_context(|| format!("cannot open the trace file {}", p.display()))?;
    }
    let lm = super::load_model(&config, printer, args.sampling.tokenizer.as_deref())?;
    let first = ModelPolicy::new(lm.clone(), opts.sampling)?;
    let compiler = first.compiler().clone();
    let mut policies = vec![first];
    for _ in 1..jobs.max(1) {
        policies.push(ModelPolicy::with_compiler(
            lm.clone(),
            compiler.clone(),
            opts.sampling,
        ));
    }
    let mut agents = Vec::new();
    for policy in policies {
        let store = match memory {
            Some(m) => Some(MemoryStore::open(m)?),
            None => None,
        };
        let mut agent = Agent::new(policy, tools.clone(), store, options.clone())?;
        if (rounds_on_stderr && printer.shows(Verbosity::Normal)) || printer.verbose() {
            agent.add_sink(Box::new(RoundPrinter::new(printer.clone())));
        }
        if let Some(p) = &args.trace {
            let t = TraceWriter::create(p)
                .with_context(|| format!("cannot open the trace file {}", p.display()))?;
            agent.add_sink(Box::new(TraceSink::new(t, printer.clone())));
        }
        agents.push(agent);
    }
    Ok(agents)
}

/// A new session name for a `cairn run` without `--session`: `run-` and the UTC time.
fn fresh_session_name() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let t = crate::memory::format_utc(now).replace([' ', ':'], "-");
    format!("run-{t}-{}", std::process::id())
}

/// Whether `--index` or `CAIRN_INDEX` named the index file.
pub fn index_given(global_index: Option<&Path>) -> bool {
    global_index.is_some() || crate::config::env_nonempty("CAIRN_INDEX").is_some()
}

/// Runs `cairn run`.
pub fn run(
    config: &Config,
    printer: &Printer,
    args: &RunArgs,
    index_given: bool,
) -> anyhow::Result<ExitCode> {
    if args.task.trim().is_empty() {
        anyhow::bail!(
            "the task is empty: say what cairn should do, e.g. cairn run \"What is 17 * 23?\""
        );
    }
    let mut agent = build_agent(config, printer, &args.agent, index_given)?;
    let session = if args.agent.no_memory {
        None
    } else {
        Some(
            args.agent
                .session
                .clone()
                .unwrap_or_else(fresh_session_name),
        )
    };
    let result = agent.run_task(&args.task, session.as_deref());
    print_result(printer, &result, args.json)?;
    Ok(exit_code(&result))
}

/// Prints a task's result: the answer (or the JSON object) on stdout, and why it stopped on
/// stderr when it did not answer.
pub fn print_result(printer: &Printer, result: &AgentResult, json: bool) -> anyhow::Result<()> {
    let mut out = printer.out();
    if json {
        writeln!(out, "{}", serde_json::to_string(result)?)?;
    } else if !result.answer.is_empty() {
        // The answer is the model's text: control bytes (an escape sequence) are shown, not
        // sent to the terminal. JSON output escapes them already.
        writeln!(out, "{}", escape_controls(&result.answer))?;
    }
    out.flush()?;
    drop(out);
    if !result.answered() {
        printer.error(&format!(
            "the task stopped without an answer ({}): {}",
            result.stop_reason,
            result.error.as_deref().unwrap_or("no detail")
        ));
    }
    Ok(())
}

/// 0 when the task was answered; 2 when its prompt could not fit at all (bad input: a task
/// longer than the context); 1 for every other stop.
pub fn exit_code(result: &AgentResult) -> ExitCode {
    if result.answered() {
        ExitCode::SUCCESS
    } else if result.stop_reason == StopReason::Budget && result.rounds == 0 {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
