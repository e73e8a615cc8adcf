//! `cairn run TASK`: one task through the agent loop; the answer on stdout (`--json`: the
//! result object of a batch output line), one line per round on stderr.
//!
//! Also home of the flags `run` and `chat` share ([`AgentArgs`]); the agent is built from them
//! by [`super::agents`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::agents::build_agent;
use super::generate::SamplingArgs;
use crate::agent::{AgentOptions, AgentResult, StopReason};
use crate::cli::printer::Printer;
use crate::config::Config;
use crate::tools::escape_controls;

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
    /// Token budget of the session's earlier turns in the prompt (at most 8192): the newest
    /// in full while they fit (with --summaries, older ones by their summaries).
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub history_tokens: usize,
    /// Show the session's earlier turns that no longer fit in full by a short summary the
    /// model writes of each (once per turn, a few seconds, kept in the memory file), in a
    /// third of the --history-tokens budget kept for them, instead of leaving them out.
    #[arg(long)]
    pub summaries: bool,
    /// The most rounds (steps) of a task; the last one may only give the final answer.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub max_rounds: usize,
    /// Consecutive failed rounds that stop a task (stop reason `failures`); one more than
    /// --circuit-after by default, so a tool turned off leaves a round to answer.
    #[arg(long, default_value_t = 4, value_name = "N")]
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
    /// Do not show what the tools find for the task before its first round (the search
    /// passages that share its words, the database rows its words point to); the model then
    /// sees only the tools' descriptions until it calls them.
    #[arg(long)]
    pub no_task_context: bool,
    /// Accept a final answer even when it holds numbers found in no tool result, the task or
    /// its context (by default such an answer is sent back once, naming the numbers).
    #[arg(long)]
    pub no_evidence_check: bool,
    /// Show no worked example before the task (by default the one of cairn's bank closest
    /// to the task is shown, for the model to follow).
    #[arg(long)]
    pub no_examples: bool,
    /// Let the model write a plan in plain text before round 1, at most N tokens (default 0:
    /// no plan; on the word problems of tests/suites the 0.5B preset did no better with one).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub plan_tokens: usize,
    /// Offer the `reason` action: the model works the task out in plain text, each
    /// calculation checked by the calculator, in a context of its own. By default it is offered
    /// to models of 1 billion parameters or more (a smaller one copied the worked example's
    /// answer instead of reasoning). With --plan-tokens it is not offered: the plan takes its
    /// place.
    #[arg(long, conflicts_with = "no_reason")]
    pub reason: bool,
    /// Never offer the `reason` action (see --reason).
    #[arg(long)]
    pub no_reason: bool,
    /// The most reasonings one `reason` step takes (self-consistency): with more than 1,
    /// reasonings are sampled beside the greedy one until its answer can no longer be
    /// outvoted, at most N in all; it stands unless more than half reach another answer.
    /// Default 1: the greedy reasoning alone (votes cost 40-50% more time per word problem
    /// and did not answer more of the suite's; BENCHMARKS.md).
    #[arg(long, default_value_t = crate::agent::DEFAULT_REASON_VOTES, value_name = "N")]
    pub reason_votes: usize,
    /// Which calls already made the step grammar forbids in the task's later rounds, word for
    /// word: `none` (a repeat is answered from its first result and turns its tool off for
    /// the rest of the task), `failed` ones (the tool stays on for other calls), or `all`.
    #[arg(long, default_value = "none", value_name = "WHICH")]
    pub forbid_repeats: crate::agent::ForbidRepeats,
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
            task_context: !self.no_task_context,
            evidence_check: !self.no_evidence_check,
            examples: !self.no_examples,
            plan_tokens: self.plan_tokens,
            reason: super::on_off(self.reason, self.no_reason),
            reason_votes: self.reason_votes,
            history_tokens: self.history_tokens,
            summaries: self.summaries,
            forbid_repeats: self.forbid_repeats,
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

/// A new session name for a `cairn run` without `--session`: `run-` and the UTC time.
fn fresh_session_name() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let t = crate::memory::format_utc(now).replace([' ', ':'], "-");
    format!("run-{t}-{}", std::process::id())
}

/// Runs `cairn run`.
pub fn run(config: &Config, printer: &Printer, args: &RunArgs) -> anyhow::Result<ExitCode> {
    if args.task.trim().is_empty() {
        anyhow::bail!(
            "the task is empty: say what cairn should do, e.g. cairn run \"What is 17 * 23?\""
        );
    }
    let mut agent = build_agent(config, printer, &args.agent)?;
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
