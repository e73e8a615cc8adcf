//! The agent loop: think → act → observe, one step per round, every step decoded under the
//! action schema of the tools that are allowed *this* round.
//!
//! [`Agent::run_task`] runs one task to an [`AgentResult`] that always carries a
//! [`StopReason`]. Each round it builds the prompt within the token budget ([`prompt`]),
//! rebuilds the step schema from the live state (a tool whose circuit is open leaves it, and so
//! does a tool just called again with the same arguments; on the last round only
//! `final_answer` remains), asks the [`Policy`] for one step (never one that makes a call
//! forbidden by [`ForbidRepeats`]), runs the tool through the [`ToolRegistry`] with retries
//! and exponential backoff for transient faults, records the step in memory and feeds the
//! observation back.
//!
//! The model is one [`Policy`] ([`ModelPolicy`]); [`ScriptedPolicy`] replays fixed steps and
//! is the only stand-in for the model, used to test the loop's control logic. What happens is
//! reported as [`Event`]s to the [`EventSink`]s the caller adds (`--trace FILE`, the progress
//! lines on stderr).

pub mod bench;
mod checks;
mod events;
pub mod evidence;
pub mod examples;
mod guards;
mod policy;
pub mod program;
pub mod prompt;
pub mod reason;
mod run;
pub mod step;
pub mod summary;

pub use events::{Event, EventKind, EventSink, TraceWriter};
pub use policy::{scripted_tokens, Decoded, ModelPolicy, Policy, Reasoned, ScriptedPolicy};
pub use run::Agent;

use std::time::Duration;

use serde::Serialize;

/// How the loop behaves: every limit of a task (rounds, failures, circuit breaker, retries,
/// timeout, stop pattern, step tokens, self-check), with their defaults.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The most rounds (decoded steps) of one task; the last one may only be `final_answer`.
    pub max_rounds: usize,
    /// Consecutive failed rounds (tool errors, cut-off steps) that stop the task. One more
    /// than `circuit_threshold` by default, so that a tool whose circuit opens leaves the model
    /// a round to answer or to use another tool: at three and three, the third failed query in
    /// a row stopped the task without an answer (the 1.5B model, told which alias to write,
    /// never got to write it).
    pub max_failed_rounds: usize,
    /// Consecutive failures of one tool that open its circuit (the tool leaves the schema).
    pub circuit_threshold: usize,
    /// Attempts of a call that fails with a transient error (1 = no retry).
    pub retry_attempts: usize,
    /// The wait before the first retry; it doubles on each further retry.
    pub retry_base: Duration,
    /// Wall-clock limit of the task, checked between rounds and before retries.
    pub timeout: Option<Duration>,
    /// Stops the task when an observation matches; the observation becomes the answer.
    pub stop_when: Option<regex::Regex>,
    /// The most tokens of one step; the prompt leaves this much room in the context.
    pub max_step_tokens: usize,
    /// Ask the model whether its answer completes the task, and go on when its score is
    /// below this threshold (0..=1).
    pub self_check: Option<f64>,
    /// Token budget for the session's earlier turns in the prompt.
    pub history_tokens: usize,
    /// Show the session's earlier turns that no longer fit in full by a summary the model
    /// writes once per turn ([`summary`]), rather than leaving them out. Off by default: on
    /// the long sessions of the suite it won nothing and cost time (BENCHMARKS.md).
    pub summaries: bool,
    /// How many long-term facts go into the prompt.
    pub facts: usize,
    /// Per-hour decay of a fact's score.
    pub memory_decay: f64,
    /// Show what the tools find for the task's words before its first round
    /// ([`crate::tools::Tool::context_for`]: search passages, database schemas and rows).
    pub task_context: bool,
    /// Send a final answer back once when it holds numbers found in no tool result, the task
    /// or its context ([`evidence`]).
    pub evidence_check: bool,
    /// Show the worked example closest to the task ([`examples`]) before it.
    pub examples: bool,
    /// Before round 1, let the model think the task through in plain text, at most this many
    /// tokens (0: no plan). Small models reason better in free text than inside a JSON
    /// string; the plan stays in the conversation for the steps that follow.
    pub plan_tokens: usize,
    /// Offer the `reason` action ([`reason`]): the model works the task out in plain text in
    /// a context of its own, with each calculation checked by the calculator. `None`: for
    /// models of at least [`REASON_MIN_PARAMETERS`] parameters. Not offered when a plan is
    /// written (`plan_tokens` > 0): the plan takes its place.
    pub reason: Option<bool>,
    /// The most reasonings one `reason` step takes (self-consistency; [`reason`]): 1 = the
    /// greedy one alone (the default); above 1, sampled ones beside it until the greedy
    /// answer can no longer be outvoted, which it is when more than half reach another.
    pub reason_votes: usize,
    /// Which calls the next steps may not make again, word for word ([`ForbidRepeats`]).
    /// `None` by default: forbidding failed calls won no task on the suites, and a model sure
    /// of its failed query, refused the token that closed it, wrote on to the step's token
    /// limit or made small variants of it (`… LIMIT 1 LIMIT 1`) until the tool's circuit
    /// opened (BENCHMARKS.md).
    pub forbid_repeats: ForbidRepeats,
}

/// Which calls already made the step grammar forbids in the task's later rounds. A call it
/// does not forbid and that is made again anyway falls to the dead-loop rule: it is answered
/// from its first result and its tool is turned off for the rest of the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForbidRepeats {
    /// None: every repeat falls to the dead-loop rule.
    None,
    /// Calls that failed (not with a transient error, which a retry may cure): the model can
    /// still fix its query, where the dead-loop rule took the whole tool away.
    Failed,
    /// Every call already made: a repeat of one that worked only shows its result again.
    All,
}

/// The default of `--reason-votes`: the greedy reasoning alone. With 4 the 1.5B preset
/// answered the suite's word problems no better (23 and 21 of 30 against 23) and the
/// held-out ones one better (12 of 15 against 11), in 40–50% more time per problem
/// (BENCHMARKS.md), so votes are asked for, not the default.
pub const DEFAULT_REASON_VOTES: usize = 1;

/// The most tokens `--history-tokens` may give the session's earlier turns.
pub const MAX_HISTORY_TOKENS: usize = 8192;

/// The smallest model the `reason` action is offered to unless asked otherwise. On the word
/// problems of the suite, offering it took the 1.5B preset from 17 to 23 of 30, and the 0.5B
/// from 6 to 3: shown the worked example that reasons first, the 0.5B copied its answer step
/// ("The reasoning found …") as its first step in 26 of 30 tasks, without reasoning at all.
pub const REASON_MIN_PARAMETERS: u64 = 1_000_000_000;

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            max_rounds: 8,
            max_failed_rounds: 4,
            circuit_threshold: 3,
            retry_attempts: 3,
            retry_base: Duration::from_millis(200),
            timeout: None,
            stop_when: None,
            max_step_tokens: 512,
            self_check: None,
            history_tokens: 512,
            summaries: false,
            facts: 5,
            memory_decay: crate::memory::DEFAULT_DECAY,
            task_context: true,
            evidence_check: true,
            examples: true,
            plan_tokens: 0,
            reason: None,
            reason_votes: DEFAULT_REASON_VOTES,
            forbid_repeats: ForbidRepeats::None,
        }
    }
}

impl AgentOptions {
    /// Checks the values, naming the bad one and what would be valid.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_rounds == 0 {
            return Err("--max-rounds must be at least 1".into());
        }
        if self.max_failed_rounds == 0 {
            return Err("--max-failures must be at least 1".into());
        }
        if self.circuit_threshold == 0 {
            return Err("--circuit-after must be at least 1".into());
        }
        if self.retry_attempts == 0 {
            return Err("--retries must be at least 1 (1 = no retry)".into());
        }
        if self.max_step_tokens < 16 {
            return Err(format!(
                "--max-tokens is {}: a step needs at least 16 tokens",
                self.max_step_tokens
            ));
        }
        if self.reason == Some(true) && self.plan_tokens > 0 {
            return Err(format!(
                "--reason and --plan-tokens {} both give the model room to reason: the plan is \
                 written in the agent's conversation, the reason action in a context of its own \
                 with checked arithmetic. Use one of them",
                self.plan_tokens
            ));
        }
        if self.reason_votes == 0 || self.reason_votes > reason::MAX_VOTES {
            return Err(format!(
                "--reason-votes is {}: give 1 (the greedy reasoning alone) to {}",
                self.reason_votes,
                reason::MAX_VOTES
            ));
        }
        if self.history_tokens > MAX_HISTORY_TOKENS {
            return Err(format!(
                "--history-tokens is {}: at most {MAX_HISTORY_TOKENS} (the earlier turns share the \
                 model's context with the task and its rounds)",
                self.history_tokens
            ));
        }
        if let Some(t) = self.self_check {
            if !(0.0..=1.0).contains(&t) {
                return Err(format!(
                    "--self-check threshold is {t}: it must be between 0 and 1"
                ));
            }
        }
        if !(self.memory_decay > 0.0 && self.memory_decay <= 1.0) {
            return Err(format!(
                "the memory decay is {}: it must be above 0 and at most 1",
                self.memory_decay
            ));
        }
        Ok(())
    }
}

impl std::str::FromStr for ForbidRepeats {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(ForbidRepeats::None),
            "failed" => Ok(ForbidRepeats::Failed),
            "all" => Ok(ForbidRepeats::All),
            _ => Err(format!(
                "unknown value `{s}`: expected `none`, `failed` or `all`"
            )),
        }
    }
}

/// Why a task stopped. Every [`AgentResult`] has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave its final answer.
    FinalAnswer,
    /// The round limit was reached; the last round was limited to `final_answer`, so there is
    /// an answer.
    MaxRounds,
    /// An observation matched `--stop-when`; it is the answer.
    StopWhen,
    /// Too many consecutive failed rounds; `error` holds the last error.
    Failures,
    /// A tool failed in a way the model cannot fix (a missing database file).
    Fatal,
    /// The wall-clock limit passed.
    Timeout,
    /// The prompt cannot fit the context even after dropping old rounds and cutting
    /// observations (for instance a task longer than the context).
    Budget,
    /// The model runtime failed.
    Error,
}

impl StopReason {
    /// The reason as written in results and traces.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::FinalAnswer => "final_answer",
            StopReason::MaxRounds => "max_rounds",
            StopReason::StopWhen => "stop_when",
            StopReason::Failures => "failures",
            StopReason::Fatal => "fatal",
            StopReason::Timeout => "timeout",
            StopReason::Budget => "budget",
            StopReason::Error => "error",
        }
    }

    /// Whether a task that stopped this way may have an answer (see
    /// [`AgentResult::answered`], which also needs the answer to be there).
    pub fn answered(self) -> bool {
        matches!(
            self,
            StopReason::FinalAnswer | StopReason::MaxRounds | StopReason::StopWhen
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call of a task, as the batch output line lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    /// The round it happened in.
    pub round: usize,
    /// The tool.
    pub tool: String,
    /// The arguments the model gave.
    pub args: serde_json::Value,
    /// Whether it returned an observation.
    pub ok: bool,
    /// Whether the step was a well-formed call: a known tool with arguments valid against its
    /// schema (always, under cairn's step schema, unless the step was cut off).
    pub valid: bool,
    /// The error text when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error class when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<crate::tools::ErrorClass>,
    /// Whether the observation came from the dead-loop cache instead of a new call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// Attempts made (more than 1 when a transient error was retried).
    pub attempts: usize,
}

/// How a task ended: the answer, the stop reason and the metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentResult {
    /// The answer for the user; empty when the task stopped without one.
    pub answer: String,
    /// Why the loop stopped.
    pub stop_reason: StopReason,
    /// Steps decoded.
    pub rounds: usize,
    /// Every tool call, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Prompt tokens over all rounds (reused ones included).
    pub prompt_tokens: usize,
    /// Of those, tokens found in the KV cache and not recomputed.
    pub reused_tokens: usize,
    /// Tokens generated over all rounds.
    pub generated_tokens: usize,
    /// Of those, tokens forced by the step schema (fed without sampling).
    pub forced_tokens: usize,
    /// Wall time of the task in milliseconds.
    pub latency_ms: u64,
    /// Of the steps' time, decoding after the first token, in ms.
    #[serde(default)]
    pub decode_ms: f64,
    /// Of that, computing the constraints' token masks, in ms.
    #[serde(default)]
    pub mask_ms: f64,
    /// What went wrong, for stops without an answer (and the last error for `failures`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Times the same action with the same arguments came again.
    pub dead_loops: usize,
    /// Transient errors retried.
    pub retries: usize,
    /// Tools whose circuit opened during the task.
    pub circuits_opened: Vec<String>,
    /// Earlier rounds dropped from the prompt to fit the context.
    pub dropped_rounds: usize,
    /// The memory session the task ran in, when memory is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Problems that did not stop the task (a memory write that failed), said once each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AgentResult {
    /// Whether the task ended with an answer for the user: a stop that may carry one and a
    /// non-empty answer (a round limit reached while the last step was cut off has none).
    pub fn answered(&self) -> bool {
        self.stop_reason.answered() && !self.answer.trim().is_empty()
    }

    /// The result of a task that has just started: nothing done yet, stop reason `error`
    /// until the loop sets the real one.
    pub fn started(session: Option<&str>) -> Self {
        AgentResult {
            answer: String::new(),
            stop_reason: StopReason::Error,
            rounds: 0,
            tool_calls: Vec::new(),
            prompt_tokens: 0,
            reused_tokens: 0,
            generated_tokens: 0,
            forced_tokens: 0,
            latency_ms: 0,
            decode_ms: 0.0,
            mask_ms: 0.0,
            error: None,
            dead_loops: 0,
            retries: 0,
            circuits_opened: Vec::new(),
            dropped_rounds: 0,
            session: session.map(str::to_string),
            warnings: Vec::new(),
        }
    }
}

/// Why an agent could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The options are not valid.
    #[error("{0}")]
    Options(String),
    /// The step schema could not be compiled.
    #[error(transparent)]
    Constraint(#[from] crate::constrain::ConstraintError),
    /// The model runtime failed.
    #[error(transparent)]
    Generate(#[from] crate::decode::generate::GenerateError),
    /// The memory file failed.
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// The scripted policy ran out of steps, or its script was not valid.
    #[error("{0}")]
    Script(String),
}

impl From<crate::model::ModelError> for AgentError {
    fn from(e: crate::model::ModelError) -> Self {
        AgentError::Generate(e.into())
    }
}

impl From<crate::model::tokenizer::TokenizerError> for AgentError {
    fn from(e: crate::model::tokenizer::TokenizerError) -> Self {
        AgentError::Generate(e.into())
    }
}

impl From<crate::model::template::TemplateError> for AgentError {
    fn from(e: crate::model::template::TemplateError) -> Self {
        AgentError::Generate(e.into())
    }
}

/// The canonical text of a JSON value: object keys sorted at every level, no spaces. Two
/// actions are the same for dead-loop detection when their canonical arguments are equal.
pub fn canonical_json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap_or_default(),
                        canonical_json(&m[k])
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical_json).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}
