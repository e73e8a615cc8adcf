//! What the loop reports as it runs: [`Event`]s, given to each [`EventSink`] of the agent:
//! written one JSON object a line by [`TraceWriter`] (`--trace FILE`), and shown a line a
//! round on stderr by the CLI's sink. Nothing here prints.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

/// One thing that happened, with the milliseconds since the task began.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Milliseconds since the task started.
    pub t_ms: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// The kinds of trace events.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A task began.
    TaskStart {
        /// The task text.
        task: String,
        /// The memory session, when memory is on.
        session: Option<String>,
        /// The tools the model may call.
        tools: Vec<String>,
        /// Long-term facts put in the prompt.
        facts: usize,
        /// Earlier turns of the session put in the prompt in full.
        history_turns: usize,
        /// Earlier turns of the session put in the prompt by their summaries.
        summaries: usize,
    },
    /// An earlier turn that no longer fits in full was summarised (`agent::summary`).
    Summary {
        /// The turn's id in the memory file.
        turn: i64,
        /// The summary as shown in prompts; `None` when the model's output was not one (the
        /// turn is then left out).
        text: Option<String>,
        /// Prompt tokens of the summary's own context.
        prompt_tokens: usize,
        /// Tokens generated.
        tokens: usize,
        /// Time it took, ms.
        ms: f64,
    },
    /// What the tools found for the task before its first round (search passages, database
    /// schemas and rows), put in the task's message: never added silently.
    Context {
        /// The worked example shown before the task (see `agent::examples`), if any.
        example: Option<String>,
        /// The tools that added something, in order.
        tools: Vec<String>,
        /// The text added, as shown to the model.
        text: String,
    },
    /// The model's plan in plain text, written before round 1.
    Plan {
        /// The plan.
        text: String,
        /// Tokens generated.
        tokens: usize,
        /// Time it took, ms.
        ms: f64,
    },
    /// The `reason` action ran: the model's reasoning in its own context, with the
    /// calculations the calculator checked.
    Reason {
        /// The round.
        round: usize,
        /// Which reasoning of the step's vote: 0 the greedy one, then the sampled ones.
        vote: usize,
        /// Its answer as the vote compared it ([`super::reason::answer_key`]); `None`: none.
        answer: Option<String>,
        /// The reasoning, with the checked values written in.
        text: String,
        /// The calculations checked: (expression, value written after its `=`).
        checked: Vec<(String, String)>,
        /// Prompt tokens of its own context.
        prompt_tokens: usize,
        /// Tokens generated.
        tokens: usize,
        /// Time it took, ms.
        ms: f64,
    },
    /// A round's prompt was built.
    Prompt {
        /// The round.
        round: usize,
        /// Its length in tokens.
        tokens: usize,
        /// The most tokens it may have.
        budget: usize,
        /// The actions the step schema allows this round.
        allowed: Vec<String>,
    },
    /// Something was cut from the prompt to fit the budget.
    Trim {
        /// The round.
        round: usize,
        /// Earlier rounds dropped (in total, for this round's prompt).
        dropped_rounds: usize,
        /// Characters cut from observations.
        cut_chars: usize,
        /// History (earlier turns, facts) left out.
        dropped_context: bool,
    },
    /// A step was decoded.
    Step {
        /// The round.
        round: usize,
        /// The model's thought.
        thought: String,
        /// The action.
        action: String,
        /// Its arguments.
        args: Value,
        /// Prompt tokens, and how many of them came from the KV cache.
        prompt_tokens: usize,
        /// Prompt tokens reused from the KV cache.
        reused_tokens: usize,
        /// Tokens picked by sampling.
        sampled_tokens: usize,
        /// Tokens forced by the schema.
        forced_tokens: usize,
        /// Time to process the prompt and pick the first token.
        prefill_ms: f64,
        /// Time to decode the rest of the step.
        decode_ms: f64,
        /// Of the step's time, computing the token masks of its constraint, in ms.
        mask_ms: f64,
    },
    /// A decoded step could not be used (cut off by the token limit, not parseable).
    BadStep {
        /// The round.
        round: usize,
        /// What was wrong.
        error: String,
        /// The text decoded.
        text: String,
    },
    /// A transient error is being retried.
    Retry {
        /// The round.
        round: usize,
        /// The tool.
        tool: String,
        /// The attempt that failed (1 for the first).
        attempt: usize,
        /// The wait before the next attempt.
        wait_ms: u64,
        /// The error.
        error: String,
    },
    /// A tool call ended.
    ToolResult {
        /// The round.
        round: usize,
        /// The tool.
        tool: String,
        /// Its arguments.
        args: Value,
        /// Whether it returned an observation.
        ok: bool,
        /// The error class when it failed.
        error_class: Option<String>,
        /// The observation (or error) shown to the model.
        observation: String,
        /// Wall time of the call, retries included.
        ms: f64,
        /// Whether the observation came from the dead-loop cache.
        cached: bool,
    },
    /// A call the steps of the rest of the task may not make again (`--forbid-repeats`).
    Forbidden {
        /// The round that made it.
        round: usize,
        /// The call, as the step wrote it (`"action":"sql","args":{…}`).
        call: String,
    },
    /// The same action with the same arguments came again.
    DeadLoop {
        /// The round.
        round: usize,
        /// The tool.
        tool: String,
        /// How many times it has now been chosen.
        times: usize,
    },
    /// A tool failed too often in a row and left the schema.
    CircuitOpen {
        /// The round.
        round: usize,
        /// The tool.
        tool: String,
        /// Its consecutive failures.
        failures: usize,
    },
    /// The model rated its own answer.
    SelfCheck {
        /// The round.
        round: usize,
        /// Its score, 0..1.
        done: f64,
        /// Whether the answer was accepted.
        accepted: bool,
    },
    /// A final answer held numbers found in no observation, the task or its context, and was
    /// sent back once for the model to look them up or compute them.
    EvidenceCheck {
        /// The round.
        round: usize,
        /// The numbers, as written in the answer.
        unsupported: Vec<String>,
    },
    /// A final answer to a task asking which row is at one end of a comparison rested on a
    /// query of only the value there (`MIN(price)`), and was sent back once to query the row.
    ExtremeCheck {
        /// The round.
        round: usize,
        /// The task's word for the end (`cheapest`).
        word: String,
    },
    /// A final answer rested on an sql result that counted groups of one row each (the rows
    /// of the table itself, each title once in `books`) where the task asks how often; it was
    /// sent back once, with a query to make.
    GroupsCheck {
        /// The round.
        round: usize,
        /// The result's note, naming the tables whose rows point to the counted one.
        note: String,
    },
    /// A final answer listed, from one result's rows, the amounts of a total the task asks
    /// for instead of their sum, and was sent back once to add them up.
    TotalCheck {
        /// The round.
        round: usize,
        /// The amounts, as written in the answer.
        amounts: Vec<String>,
    },
    /// A final answer gave its amount per unit (`20 euros per night`, a room's `Rate`) where
    /// the task asks for the whole of a stay or total, and was sent back once to multiply it
    /// out.
    RateCheck {
        /// The round.
        round: usize,
        /// The rate, as written in the answer (`20 euros per night`), or the value and its
        /// column (`249 (Rate)`).
        rate: String,
    },
    /// A final answer to a task asking how many days gave a count that is not the days
    /// between two dates of a row shown, with no call that worked with dates, and was sent
    /// back once to compute it.
    DaysCheck {
        /// The round.
        round: usize,
        /// The answer's count, as written.
        count: String,
        /// The dates of the row.
        dates: Vec<String>,
    },
    /// A final answer gave a sum of money that a calculation with no price in it worked out,
    /// and was sent back once.
    PriceCheck {
        /// The round.
        round: usize,
        /// The answer's amount, as written.
        amount: String,
        /// The calculator expression that gave it.
        expression: String,
    },
    /// A final answer gave, for a name a search said no passage holds, a value found only in
    /// that search's passages, and was sent back once.
    AnotherCheck {
        /// The round.
        round: usize,
        /// The value, as written in the answer.
        value: String,
        /// The name.
        name: String,
    },
    /// A later final answer gave again values an evidence check had sent back, still found in
    /// no result, and was sent back once more with the last tool result quoted.
    AgainCheck {
        /// The round.
        round: usize,
        /// The values, as written in the answer.
        values: Vec<String>,
    },
    /// The round's final answer may write only the numbers of the evidence, in one of the
    /// listed forms: made-up numbers were sent back before.
    GroundedAnswer {
        /// The round.
        round: usize,
        /// How many forms of numbers the answer may write.
        numbers: usize,
    },
    /// A final answer gave a number of its own while an amount the task gives (`6 nights`,
    /// `15%`) went into no call or reasoning, and was sent back once.
    AmountCheck {
        /// The round.
        round: usize,
        /// The amounts, as the task writes them.
        unused: Vec<String>,
    },
    /// A final answer held words of the worked example's own data ("Blue Hall") that the task
    /// and its results do not, and was sent back once.
    ExampleCheck {
        /// The round.
        round: usize,
        /// The example's words in the answer.
        words: Vec<String>,
    },
    /// A final answer named one end of an order (`oldest`) while the result it rested on,
    /// cut by a `LIMIT`, showed the other end first, and was sent back once.
    OrderCheck {
        /// The round.
        round: usize,
        /// The end the answer named.
        said: String,
        /// The end the result showed first.
        shown: String,
    },
    /// A task asked for one end of a comparison (`most`, `oldest`) and its answer rested on
    /// sql results of which none compared rows (no ORDER BY, GROUP BY, MAX or MIN); it was
    /// sent back once, with a query to make.
    ComparisonCheck {
        /// The round.
        round: usize,
        /// The task's word for the end it asked for.
        word: String,
    },
    /// A final answer rested on an sql result that found nothing because a condition asked
    /// for a value no row holds (`reason = 'consultation'`); it was sent back once, with a
    /// query to make.
    EmptyResultCheck {
        /// The round.
        round: usize,
        /// The conditions, as `column = 'value'`.
        conditions: Vec<String>,
    },
    /// A final answer repeated cairn's own message about a tool (a note of the guards, an
    /// error or its hint) instead of answering, and was sent back once.
    EchoCheck {
        /// The round.
        round: usize,
        /// The words of cairn's message the answer repeated.
        repeated: String,
    },
    /// The prompt's fixed beginning (the system message) was read from the prompt cache, or
    /// computed and written to it for the next process (`decode::prompt_cache`).
    PromptCache {
        /// `read` or `written`.
        action: String,
        /// Tokens of the beginning.
        tokens: usize,
        /// Bytes of the file.
        bytes: u64,
        /// Time it took, in ms (for `written`, computing the beginning included).
        ms: f64,
        /// The file.
        file: String,
    },
    /// Something failed that did not stop the task (a memory write).
    Warning {
        /// What failed.
        message: String,
    },
    /// The task stopped.
    Stop {
        /// Why.
        reason: String,
        /// Rounds decoded.
        rounds: usize,
        /// The answer.
        answer: String,
        /// The error, for stops without an answer.
        error: Option<String>,
        /// Wall time of the task.
        latency_ms: u64,
    },
}

/// Receives the events of a task as they happen.
pub trait EventSink: Send {
    /// Called once per event, in order.
    fn event(&mut self, event: &Event);
}

/// Writes each event as one JSON line and flushes, so a trace survives a crash. A write error
/// is kept ([`TraceWriter::error`]) for the caller to report; the events after it are dropped.
pub struct TraceWriter {
    out: Box<dyn Write + Send>,
    /// The first write error; later events are dropped after it.
    error: Option<std::io::Error>,
}

impl TraceWriter {
    /// A trace into `out`.
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        TraceWriter { out, error: None }
    }

    /// A trace appended to the file at `path` (created if missing).
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(TraceWriter::new(Box::new(std::io::BufWriter::new(f))))
    }

    /// The first write error, if writing failed.
    pub fn error(&self) -> Option<&std::io::Error> {
        self.error.as_ref()
    }
}

impl EventSink for TraceWriter {
    fn event(&mut self, event: &Event) {
        if self.error.is_some() {
            return;
        }
        let line = serde_json::to_string(event).unwrap_or_default();
        let r = writeln!(self.out, "{line}").and_then(|_| self.out.flush());
        if let Err(e) = r {
            self.error = Some(e);
        }
    }
}
