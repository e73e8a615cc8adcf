//! [`Agent`]: the loop of one task, round by round, with every stop condition, retry,
//! circuit breaker and dead-loop rule of the agent's design.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::checks::{first_failed, grounded_numbers, Answered, Check};
use super::events::{Event, EventKind, EventSink};
use super::guards::{backoff, Guards, Seen};
use super::prompt::{fit, system_text, RoundText, TaskContext};
use super::reason::REASON;
use super::step::{
    cut_off_text, partial_action, partial_arg, repeated_piece, step_schema_of, ANSWER_MAX_CHARS,
    FINAL_ANSWER,
};
use super::{
    canonical_json, AgentError, AgentOptions, AgentResult, Decoded, ForbidRepeats, Policy,
    StopReason, ToolCall,
};
use crate::memory::{
    extract_facts, FactScope, MemoryItem, MemoryStore, SessionId, StepId, StepRecord, TurnEnd,
    TurnId,
};
use crate::model::template::Message;
use crate::tools::recall::{RecallTool, DEFAULT_K};
use crate::tools::{ErrorClass, Observation, ToolError, ToolInfo, ToolRegistry};

/// The token count short-term memory is budgeted with: a quarter of the characters.
fn count_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The agent: a policy (the model), the tools, the memory, the options, and who hears about
/// what happens. One agent runs any number of tasks, one after the other; the model's KV
/// cache carries the shared prompt prefix from one task to the next.
pub struct Agent<P: Policy> {
    policy: P,
    tools: ToolRegistry,
    memory: Option<MemoryStore>,
    options: AgentOptions,
    sinks: Vec<Box<dyn EventSink>>,
}

/// A step the way the schema shapes it.
struct ParsedStep {
    thought: String,
    action: String,
    args: Value,
}

fn parse_step(text: &str) -> Result<ParsedStep, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let thought = v.get("thought").and_then(Value::as_str).unwrap_or_default();
    let action = v
        .get("action")
        .and_then(Value::as_str)
        .ok_or("the step has no action")?;
    let args = v.get("args").cloned().unwrap_or_else(|| json!({}));
    Ok(ParsedStep {
        thought: thought.to_string(),
        action: action.to_string(),
        args,
    })
}

/// The schema of the self-check question.
fn self_check_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"done": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["done"],
        "additionalProperties": false
    })
}

/// State of one task while it runs.
struct TaskRun {
    start: Instant,
    deadline: Option<Instant>,
    result: AgentResult,
    session: Option<(SessionId, TurnId)>,
    /// The newest successful observation and its step, for fact extraction.
    last_ok: Option<(String, Option<StepId>)>,
}

/// What the rounds of one task share: the tools, the fixed prompt prefix, the guards and the
/// text of the rounds so far.
struct Rounds {
    infos: Vec<ToolInfo>,
    /// Context the tools give for this task (the tables that match its words).
    notes: Vec<String>,
    prefix: Vec<Message>,
    guards: Guards,
    texts: Vec<RoundText>,
    /// Rounds already dropped from the prompt (never brought back).
    min_dropped: usize,
    /// The checks that already sent an answer back (each does at most once a task).
    checked: Vec<Check>,
    /// The values the evidence check found no ground for (as the answer wrote them), kept for
    /// the check of a later answer that gives them again.
    flagged: Vec<String>,
    /// Texts the next round may not write (then cleared): the values an answer gave again
    /// after they were sent back. Told only, the model wrote them a third time.
    forbid_next: Vec<String>,
    /// The worked example shown before the task, if any.
    example: Option<&'static super::examples::Example>,
    /// How many of `texts` are the plan (0 or 1, first): not evidence for the answer.
    plan_rounds: usize,
    /// The next round must call a tool (`final_answer` is not in its grammar): set by the
    /// checks whose message asks for a query or a calculation (the evidence, amount and order
    /// checks), which the model otherwise answered by repeating its answer.
    /// Regression: "the science book that has no author recorded" was answered from three
    /// sample rows, sent back for a query, and answered again word for word.
    must_call: bool,
    /// The next round must query the database (only the `sql` action in its grammar, where
    /// the task has it): set when an answer rested on values seen only in the sample rows of
    /// a table shown before the first round, whose remedy is a query of the whole table. A
    /// free choice of tool let the model confirm the sampled value instead. Regression: "How
    /// much in consultation fees is still unpaid?" answered from one sampled visit's 48 plus
    /// the documents' late fee, sent back, then `48 + 7.50` on the calculator and the same
    /// answer again.
    must_query: bool,
}

impl Rounds {
    /// What the checks read of the task so far, with `(answer, thought)` as the answer of
    /// `round` (empty before one is decoded).
    fn answered<'a>(
        &'a self,
        run: &'a TaskRun,
        (task, ctx): (&'a str, &'a TaskContext),
        round: usize,
        (answer, thought): (&'a str, &'a str),
    ) -> Answered<'a> {
        Answered {
            task,
            answer,
            thought,
            round,
            ctx,
            notes: &self.notes,
            infos: &self.infos,
            example: self.example,
            texts: &self.texts,
            plan_rounds: self.plan_rounds,
            calls: &run.result.tool_calls,
            sql_on: self.sql_on(),
            flagged: &self.flagged,
        }
    }

    /// Whether the task has the sql tool and it is still on: a check that sends an answer
    /// back for a query only applies then (the round after may only query).
    fn sql_on(&self) -> bool {
        self.infos.iter().any(|t| t.name == crate::tools::sql::NAME)
            && self.guards.is_on(crate::tools::sql::NAME)
    }
}

/// Whether the task goes on after a round.
enum Flow {
    Continue,
    Stop(StopReason, Option<String>),
}

/// A decoded step on its way to memory: its record, when it started, and its text.
struct Done {
    record: StepRecord,
    started: Instant,
    text: String,
}

/// What a tool call came to.
struct CallOutcome {
    ok: bool,
    class: Option<ErrorClass>,
    /// The error's message, when it failed.
    error: Option<String>,
    /// Whether the arguments passed the tool's schema.
    valid: bool,
    /// The result, or the error as the model is shown it.
    observation: String,
    attempts: usize,
    /// Answered from the first result of the same call.
    cached: bool,
    /// What the loop adds after the result (a repeat, a circuit opening).
    note: Option<String>,
}

impl<P: Policy> Agent<P> {
    /// An agent over `policy` with `tools`, recording in `memory` when given.
    pub fn new(
        policy: P,
        tools: ToolRegistry,
        memory: Option<MemoryStore>,
        options: AgentOptions,
    ) -> Result<Self, AgentError> {
        options.validate().map_err(AgentError::Options)?;
        Ok(Agent {
            policy,
            tools,
            memory,
            options,
            sinks: Vec::new(),
        })
    }

    /// Adds a receiver of events (a trace file, progress on stderr).
    pub fn add_sink(&mut self, sink: Box<dyn EventSink>) {
        self.sinks.push(sink);
    }

    /// The policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The policy, mutably.
    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }

    /// The policy and the tools at once (the naive baseline drives both).
    pub fn parts_mut(&mut self) -> (&mut P, &ToolRegistry) {
        (&mut self.policy, &self.tools)
    }

    /// The tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The memory store, when memory is on.
    pub fn memory(&self) -> Option<&MemoryStore> {
        self.memory.as_ref()
    }

    /// The options.
    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    fn emit(&mut self, start: Instant, kind: EventKind) {
        let e = Event {
            t_ms: start.elapsed().as_millis() as u64,
            kind,
        };
        for s in &mut self.sinks {
            s.event(&e);
        }
    }

    fn warn(&mut self, run: &mut TaskRun, message: String) {
        if !run.result.warnings.contains(&message) {
            run.result.warnings.push(message.clone());
            self.emit(run.start, EventKind::Warning { message });
        }
    }

    /// Runs one task to its end. With `session`, the task's turn and steps are recorded in
    /// memory under that session (created if new), its facts and earlier turns go into the
    /// prompt, and facts from its answer are stored. Never fails: every way a task can end is
    /// a [`StopReason`] in the result.
    pub fn run_task(&mut self, task: &str, session: Option<&str>) -> AgentResult {
        let start = Instant::now();
        let mut run = TaskRun {
            start,
            deadline: self.options.timeout.and_then(|t| start.checked_add(t)),
            result: AgentResult::started(session),
            session: None,
            last_ok: None,
        };
        let ctx = self.begin(&mut run, task, session);
        let (stop, error) = match self.rounds(&mut run, task, &ctx) {
            Ok(s) => s,
            Err(e) => (StopReason::Error, Some(e.to_string())),
        };
        self.finish(run, task, stop, error)
    }

    /// Opens a task: tells the tools ([`crate::tools::Tool::new_task`]), then the memory side:
    /// session, turn, facts, earlier turns, and the `recall` tool bound to the session.
    fn begin(&mut self, run: &mut TaskRun, task: &str, session: Option<&str>) -> TaskContext {
        self.tools.new_task();
        let mut ctx = TaskContext::default();
        let mut bound_recall = false;
        if let (Some(store), Some(name)) = (&self.memory, session) {
            let opened = (|| {
                let sid = store.session(name)?;
                let turn = store.begin_turn(sid, task)?;
                let facts =
                    store.recall(sid, task, self.options.facts, self.options.memory_decay)?;
                let has_facts = !store.session_facts(sid)?.is_empty() || !facts.is_empty();
                Ok::<_, crate::memory::MemoryError>((sid, turn, facts, has_facts))
            })();
            match opened {
                Ok((sid, turn, facts, has_facts)) => {
                    run.session = Some((sid, turn));
                    ctx.facts = facts.into_iter().map(|f| f.fact.text).collect();
                    if self.options.summaries {
                        self.summarise_old_turns(run, sid, turn);
                    }
                    self.short_term(run, sid, turn, &mut ctx);
                    let store = self.memory.as_ref().expect("memory is on");
                    if has_facts && store.path().to_str() != Some(":memory:") {
                        match MemoryStore::open(store.path()) {
                            Ok(s) => {
                                let t = RecallTool::new(
                                    s,
                                    Some(sid),
                                    self.options.memory_decay,
                                    DEFAULT_K,
                                );
                                bound_recall = self.tools.replace(Arc::new(t)).is_ok();
                            }
                            Err(e) => self.warn(run, format!("recall is off: {e}")),
                        }
                    }
                }
                Err(e) => self.warn(
                    run,
                    format!("memory is off for this task: {e}; the task runs without it"),
                ),
            }
        }
        if !bound_recall {
            // An unbound recall would see every session's facts.
            self.tools.remove("recall");
        }
        let tools = self.tools.list().into_iter().map(|t| t.name).collect();
        self.emit(
            run.start,
            EventKind::TaskStart {
                task: task.to_string(),
                session: session.map(str::to_string),
                tools,
                facts: ctx.facts.len(),
                history_turns: ctx.history.len(),
                summaries: ctx.summaries.len(),
            },
        );
        ctx
    }

    /// The session's earlier turns for the task's prompt ([`MemoryStore::short_term`]): in
    /// full while they fit the budget, then by their summaries.
    fn short_term(
        &mut self,
        run: &mut TaskRun,
        sid: SessionId,
        turn: TurnId,
        ctx: &mut TaskContext,
    ) {
        let Some(store) = &self.memory else { return };
        match store.short_term_reserving(
            sid,
            turn,
            self.options.history_tokens,
            self.summary_reserve(),
            &count_tokens,
        ) {
            Ok(items) => {
                for item in items {
                    match item {
                        MemoryItem::PastTurn {
                            task,
                            answer,
                            number,
                            ..
                        } => {
                            ctx.history.push((task, answer));
                            ctx.numbers.push(number);
                        }
                        MemoryItem::TurnSummary {
                            summary, number, ..
                        } => ctx.summaries.push((number, summary.line())),
                        MemoryItem::Step(_) => {}
                    }
                }
            }
            Err(e) => self.warn(
                run,
                format!("the session's earlier turns are left out of this task: {e}"),
            ),
        }
    }

    /// The part of the history budget kept for summaries of older turns: a third with
    /// summaries on, none without.
    fn summary_reserve(&self) -> usize {
        if self.options.summaries {
            self.options.history_tokens / super::summary::RESERVE_DIVISOR
        } else {
            0
        }
    }

    /// Writes the summaries of the session's earlier turns that no longer fit in full and
    /// have none yet (at most [`super::summary::MAX_NEW_SUMMARIES`], newest first), so that
    /// they are shown in short rather than dropped. A summary that cannot be written is
    /// reported; the turn is then left out, as before summaries.
    fn summarise_old_turns(&mut self, run: &mut TaskRun, sid: SessionId, turn: TurnId) {
        let Some(store) = &self.memory else { return };
        let pending = store
            .turns_to_summarise(
                sid,
                turn,
                self.options.history_tokens,
                self.summary_reserve(),
                &count_tokens,
                super::summary::MAX_NEW_SUMMARIES,
            )
            .and_then(|turns| {
                turns
                    .into_iter()
                    .map(|t| {
                        let steps = store.steps(t.id)?;
                        Ok((t, steps))
                    })
                    .collect::<Result<Vec<_>, _>>()
            });
        let pending = match pending {
            Ok(p) => p,
            Err(e) => {
                self.warn(run, format!("no summary of earlier turns: {e}"));
                return;
            }
        };
        for (old, steps) in pending {
            let Some(messages) = super::summary::messages(&old, &steps) else {
                continue;
            };
            let schema = super::summary::schema(&old);
            let decoded = match self.policy.decode_aside(
                &messages,
                &schema,
                super::summary::SUMMARY_MAX_TOKENS,
            ) {
                Ok(Some(d)) => d,
                // A policy without a model to write it: the turn is left out, as before.
                Ok(None) => return,
                Err(e) => {
                    self.warn(run, format!("no summary of an earlier turn: {e}"));
                    return;
                }
            };
            let r = &mut run.result;
            r.prompt_tokens += decoded.prompt_tokens;
            r.generated_tokens += decoded.generated_tokens;
            r.decode_ms += decoded.decode_ms;
            let summary = super::summary::parse(&decoded.text, &old, &steps);
            self.emit(
                run.start,
                EventKind::Summary {
                    turn: old.id.0,
                    text: summary.as_ref().map(|s| s.line()),
                    prompt_tokens: decoded.prompt_tokens,
                    tokens: decoded.generated_tokens,
                    ms: decoded.prefill_ms + decoded.decode_ms,
                },
            );
            let Some(summary) = summary else { continue };
            let kept = self
                .memory
                .as_ref()
                .map(|store| store.set_summary(old.id, &summary));
            if let Some(Err(e)) = kept {
                self.warn(
                    run,
                    format!("a summary of an earlier turn was not kept: {e}"),
                );
            }
        }
    }

    fn timed_out(run: &TaskRun) -> bool {
        run.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The rounds of a task; returns the stop reason and the error for stops without an
    /// answer (the answer itself goes into `run.result`).
    fn rounds(
        &mut self,
        run: &mut TaskRun,
        task: &str,
        ctx: &TaskContext,
    ) -> Result<(StopReason, Option<String>), AgentError> {
        let mut infos = self.tools.list();
        if self.offers_reason(&infos) {
            infos.push(super::reason::info());
        }
        let notes = if self.options.task_context {
            super::prompt::tool_context(&self.tools, &infos, task, ctx)
        } else {
            Vec::new()
        };
        let example = if self.options.examples {
            super::examples::choose(task, &infos)
        } else {
            None
        };
        if !notes.is_empty() || example.is_some() {
            self.emit(
                run.start,
                EventKind::Context {
                    example: example.map(|e| e.name.to_string()),
                    tools: notes.iter().map(|(t, _)| t.clone()).collect(),
                    text: notes
                        .iter()
                        .map(|(_, n)| n.as_str())
                        .collect::<Vec<_>>()
                        .join("\n\n"),
                },
            );
        }
        let notes: Vec<String> = notes.into_iter().map(|(_, n)| n).collect();
        let mut prefix = vec![Message::system(system_text(&infos))];
        if let Some(e) = example {
            prefix.extend(super::examples::messages(e));
        }
        self.policy.set_fixed_messages(prefix.len());
        let mut st = Rounds {
            infos,
            notes,
            prefix,
            guards: Guards::default(),
            texts: Vec::new(),
            min_dropped: 0,
            checked: Vec::new(),
            must_call: false,
            must_query: false,
            flagged: Vec::new(),
            forbid_next: Vec::new(),
            example,
            plan_rounds: 0,
        };
        if self.options.plan_tokens > 0 {
            self.plan(run, &mut st, task, ctx)?;
        }
        let max_rounds = self.options.max_rounds;
        for round in 1..=max_rounds {
            if let Flow::Stop(reason, error) = self.round(run, &mut st, task, ctx, round)? {
                return Ok((reason, error));
            }
        }
        // Only reached when the last round's step could not be used.
        Ok((
            StopReason::MaxRounds,
            Some(format!(
                "the round limit of {max_rounds} was reached without a usable final answer{}",
                st.guards
                    .last_error()
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            )),
        ))
    }

    /// The plan before round 1: the model thinks the task through in plain text, and the plan
    /// stays in the conversation (as the first exchange of the rounds) for the steps that
    /// follow. Its numbers are not evidence for the answer: they come from the model's head.
    fn plan(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        task: &str,
        ctx: &TaskContext,
    ) -> Result<(), AgentError> {
        let budget = self.budget().saturating_sub(self.options.plan_tokens);
        let Some(fitted) = fit(
            &mut self.policy,
            &st.prefix,
            task,
            ctx,
            &st.notes,
            &[],
            0,
            budget,
        )?
        else {
            return Ok(());
        };
        let mut messages = fitted.messages;
        if let Some(last) = messages.last_mut() {
            last.content = format!("{}\n\n{}", last.content, super::prompt::PLAN_REQUEST);
        }
        let start = Instant::now();
        let Some(d) = self
            .policy
            .decode_text(&messages, self.options.plan_tokens)?
        else {
            return Ok(());
        };
        let r = &mut run.result;
        r.prompt_tokens += d.prompt_tokens;
        r.reused_tokens += d.reused_tokens;
        r.generated_tokens += d.generated_tokens;
        r.decode_ms += d.decode_ms;
        let text = d.text.trim().to_string();
        self.emit(
            run.start,
            EventKind::Plan {
                text: text.clone(),
                tokens: d.generated_tokens,
                ms: start.elapsed().as_secs_f64() * 1000.0,
            },
        );
        if !text.is_empty() {
            st.plan_rounds = 1;
            st.texts.push(RoundText {
                step: text,
                observation: super::prompt::PLAN_FOLLOW_UP.to_string(),
            });
        }
        Ok(())
    }

    /// One round: the prompt, the step decoded under this round's schema, and what the step
    /// does (a bad step, the final answer or a tool call).
    fn round(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        task: &str,
        ctx: &TaskContext,
        round: usize,
    ) -> Result<Flow, AgentError> {
        if Self::timed_out(run) {
            return Ok(Flow::Stop(
                StopReason::Timeout,
                Some(format!(
                    "the task ran past its time limit of {:.1} s after {} rounds",
                    self.options.timeout.unwrap_or_default().as_secs_f64(),
                    round - 1
                )),
            ));
        }
        let last_round = round == self.options.max_rounds;
        let mut allowed = st.guards.allowed(&st.infos, last_round);
        if std::mem::take(&mut st.must_query)
            && allowed.iter().any(|t| t.name == crate::tools::sql::NAME)
        {
            allowed.retain(|t| t.name == crate::tools::sql::NAME);
        }
        let with_final = !std::mem::take(&mut st.must_call) || allowed.is_empty();
        let mut names: Vec<String> = allowed.iter().map(|t| t.name.clone()).collect();
        if with_final {
            names.push(FINAL_ANSWER.to_string());
        }
        let Some(fitted) = self.prompt(run, st, task, ctx, round, names)? else {
            return self.budget_stop(&st.prefix, task);
        };
        let step_start = Instant::now();
        let forbid_next = std::mem::take(&mut st.forbid_next);
        let forbidden: Cow<[String]> = if forbid_next.is_empty() {
            Cow::Borrowed(st.guards.forbidden())
        } else {
            Cow::Owned([st.guards.forbidden(), &forbid_next].concat())
        };
        let pattern = if with_final {
            self.grounded_pattern(run, st, (task, ctx), round)
        } else {
            None
        };
        let decoded = self.policy.decode(
            &fitted.messages,
            &step_schema_of(&allowed, with_final, pattern.as_deref()),
            self.options.max_step_tokens,
            &forbidden,
        )?;
        let mut record = self.count_step(run, round, &decoded);
        let step = if decoded.complete {
            parse_step(&decoded.text).map_err(|why| (why, decoded.text.clone()))
        } else {
            Err(cut_off(&decoded.text, self.options.max_step_tokens))
        };
        let step = match step {
            Ok(s) => s,
            Err((why, shown)) => {
                let texts = (decoded.text, shown);
                return Ok(self.bad_step(run, st, round, texts, why, record, step_start));
            }
        };
        self.emit(
            run.start,
            EventKind::Step {
                round,
                thought: step.thought.clone(),
                action: step.action.clone(),
                args: step.args.clone(),
                prompt_tokens: decoded.prompt_tokens,
                reused_tokens: decoded.reused_tokens,
                sampled_tokens: decoded.sampled_tokens,
                forced_tokens: decoded.forced_tokens,
                prefill_ms: decoded.prefill_ms,
                decode_ms: decoded.decode_ms,
                mask_ms: decoded.mask_ms,
            },
        );
        record.thought = step.thought.clone();
        record.action = step.action.clone();
        record.args_json = step.args.to_string();
        let done = Done {
            record,
            started: step_start,
            text: decoded.text,
        };
        if step.action == FINAL_ANSWER {
            let turn = (&fitted.messages[..], task, ctx, round, last_round);
            return self.final_answer(run, st, turn, step, done);
        }
        if step.action == REASON && self.tools.get(REASON).is_none() {
            return self.reason_step(run, st, (task, ctx), round, step, done);
        }
        Ok(self.tool_step(run, st, round, step, done))
    }

    /// The reasoning a `reason` step shows, and the vote behind it when there was one: (how
    /// many reasonings reached its answer, how many there were). The greedy reasoning first;
    /// with [`AgentOptions::reason_votes`] above 1, sampled ones until the vote is settled
    /// ([`super::reason::vote_settled`]), the greedy answer standing unless more than half
    /// reached another ([`super::reason::tally`]). Each reasoning is an event of the trace;
    /// no more are started once the task's time limit has passed.
    fn reasonings(
        &mut self,
        run: &mut TaskRun,
        round: usize,
        messages: &[crate::model::template::Message],
    ) -> Result<(super::Reasoned, Option<(usize, usize)>), AgentError> {
        let most = self.options.reason_votes.max(1);
        let mut all: Vec<super::Reasoned> = Vec::new();
        let mut keys: Vec<Option<String>> = Vec::new();
        while all.len() < most {
            if !all.is_empty() && Self::timed_out(run) {
                break;
            }
            let vote = all.len();
            let start = Instant::now();
            let sample = (vote > 0).then_some(vote as u64);
            let reasoned = self
                .policy
                .reason(messages, super::reason::REASON_MAX_TOKENS, sample)?
                .unwrap_or_default();
            let r = &mut run.result;
            r.prompt_tokens += reasoned.prompt_tokens;
            r.generated_tokens += reasoned.generated_tokens;
            r.decode_ms += reasoned.decode_ms;
            let key = super::reason::answer_key(&reasoned.text);
            self.emit(
                run.start,
                EventKind::Reason {
                    round,
                    vote,
                    answer: key.clone(),
                    text: reasoned.text.trim().to_string(),
                    checked: reasoned.checked.clone(),
                    prompt_tokens: reasoned.prompt_tokens,
                    tokens: reasoned.generated_tokens,
                    ms: start.elapsed().as_secs_f64() * 1000.0,
                },
            );
            all.push(reasoned);
            keys.push(key);
            if super::reason::vote_settled(&keys, most) {
                break;
            }
        }
        let votes = (all.len() > 1)
            .then(|| super::reason::tally(&keys))
            .flatten();
        let winner = votes.map_or(0, |(i, _)| i);
        let counted = votes.map(|(_, n)| (n, all.len()));
        Ok((all.swap_remove(winner), counted))
    }

    /// Whether the loop offers the `reason` action beside `infos`: asked for (by default, for
    /// models of [`super::REASON_MIN_PARAMETERS`] parameters or more), the policy can,
    /// no plan is written (the plan is the task's free-text reasoning then: with both, the
    /// 0.5B model took its plan for a result and answered 17 * 23 = 421 without a call), and
    /// no tool of the registry has the name.
    fn offers_reason(&self, infos: &[ToolInfo]) -> bool {
        let by_size = || {
            self.policy
                .parameters()
                .is_some_and(|p| p >= super::REASON_MIN_PARAMETERS)
        };
        self.options.reason.unwrap_or_else(by_size)
            && self.options.plan_tokens == 0
            && self.policy.can_reason()
            && !infos.iter().any(|i| i.name == REASON)
    }

    /// The `reason` action: the model reasons in plain text in a context of its own (the task
    /// and the results so far), each calculation completed by the calculator; the reasoning is
    /// the observation. Offered once per task: a second one would see the same context.
    fn reason_step(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        (task, ctx): (&str, &TaskContext),
        round: usize,
        step: ParsedStep,
        mut done: Done,
    ) -> Result<Flow, AgentError> {
        let found: Vec<String> = st.texts[st.plan_rounds..]
            .iter()
            .map(|r| r.observation.clone())
            .collect();
        // Earlier turns known only by their summaries go in with the facts.
        let known: Vec<String> = ctx
            .summaries
            .iter()
            .map(|(n, l)| format!("Earlier task {n} of this conversation, in short: {l}"))
            .chain(ctx.facts.iter().cloned())
            .collect();
        let messages = super::reason::messages(task, &ctx.history, &known, &st.notes, &found);
        st.guards.bench(REASON);
        let (reasoned, votes) = self.reasonings(run, round, &messages)?;
        let text = reasoned.text.trim().to_string();
        let ok = !text.is_empty();
        run.result.tool_calls.push(ToolCall {
            round,
            tool: REASON.to_string(),
            args: step.args.clone(),
            ok,
            valid: true,
            error: (!ok).then(|| "the reasoning was empty".to_string()),
            error_class: (!ok).then_some(ErrorClass::Transient),
            cached: false,
            attempts: 1,
        });
        let mut shown = if ok {
            // The count goes first, so the observation still ends with the reasoning's
            // `Answer:` line, as the worked examples' do. With the count after it, in both
            // runs of the word problems with votes, the step after it answered with the
            // example's own number ("The bakery sells 232 rolls" where both reasonings had
            // found 250; right without votes).
            let text = match votes {
                Some((agree, of)) => {
                    format!("[{agree} of {of} independent reasonings reached this answer]\n{text}")
                }
                None => text,
            };
            super::prompt::observation_text(REASON, &text)
        } else {
            super::prompt::error_text(REASON, "the reasoning was empty")
        };
        if !reasoned.complete {
            shown.push_str(&format!(
                "\n[the reasoning reached its limit of {} tokens and was cut there]",
                super::reason::REASON_MAX_TOKENS
            ));
        }
        if ok {
            st.guards.succeeded(REASON, false);
        } else {
            st.guards.bad_step("the reasoning was empty".into());
        }
        self.end_step(run, &mut done.record, "reason", &shown, done.started);
        Ok(self.next_round(
            st,
            RoundText {
                step: done.text,
                observation: shown,
            },
        ))
    }

    /// This round's prompt fitted to the budget, with the events that say what was trimmed and
    /// what the step may do (`allowed`: the actions of its grammar); `None` when even the bare
    /// prompt does not fit.
    fn prompt(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        task: &str,
        ctx: &TaskContext,
        round: usize,
        allowed: Vec<String>,
    ) -> Result<Option<super::prompt::Fitted>, AgentError> {
        let budget = self.budget();
        let fitted = fit(
            &mut self.policy,
            &st.prefix,
            task,
            ctx,
            &st.notes,
            &st.texts,
            st.min_dropped,
            budget,
        )?;
        let Some(fitted) = fitted else {
            return Ok(None);
        };
        if fitted.dropped_rounds > st.min_dropped || fitted.cut_chars > 0 || fitted.dropped_context
        {
            self.emit(
                run.start,
                EventKind::Trim {
                    round,
                    dropped_rounds: fitted.dropped_rounds,
                    cut_chars: fitted.cut_chars,
                    dropped_context: fitted.dropped_context,
                },
            );
        }
        st.min_dropped = fitted.dropped_rounds;
        run.result.dropped_rounds = fitted.dropped_rounds;
        self.emit(
            run.start,
            EventKind::Prompt {
                round,
                tokens: fitted.tokens,
                budget,
                allowed,
            },
        );
        Ok(Some(fitted))
    }

    /// The prompt tokens a round may use: the context less the step's allowance.
    fn budget(&self) -> usize {
        self.policy
            .context()
            .saturating_sub(self.options.max_step_tokens)
    }

    /// The stop when the instructions, tools and task alone do not fit the context.
    fn budget_stop(&mut self, prefix: &[Message], task: &str) -> Result<Flow, AgentError> {
        let mut bare = prefix.to_vec();
        bare.push(super::prompt::task_message(task, None, 0));
        let bare = self.policy.prompt_tokens(&bare)?;
        // A step allowance that eats the context is the flag's fault, not the task's.
        let advice = if self.options.max_step_tokens >= self.policy.context() / 2 {
            "lower --max-tokens (a step rarely needs more than 512)"
        } else {
            "shorten the task"
        };
        Ok(Flow::Stop(
            StopReason::Budget,
            Some(format!(
                "the prompt does not fit the model's context: the instructions, tools and task alone are {bare} tokens, \
                 but at most {} fit ({} tokens of context minus {} for the step); {advice}",
                self.budget(),
                self.policy.context(),
                self.options.max_step_tokens
            )),
        ))
    }

    /// Adds a decoded step's tokens to the task's counts; returns the step's record so far.
    fn count_step(&mut self, run: &mut TaskRun, round: usize, decoded: &Decoded) -> StepRecord {
        for used in &decoded.prompt_cache {
            match used {
                Err(message) => self.warn(run, message.clone()),
                Ok(u) => self.emit(
                    run.start,
                    EventKind::PromptCache {
                        action: if u.written { "written" } else { "read" }.to_string(),
                        tokens: u.tokens,
                        bytes: u.bytes,
                        ms: u.ms,
                        file: u.file.display().to_string(),
                    },
                ),
            }
        }
        let r = &mut run.result;
        r.rounds = round;
        r.prompt_tokens += decoded.prompt_tokens;
        r.reused_tokens += decoded.reused_tokens;
        r.generated_tokens += decoded.generated_tokens;
        r.forced_tokens += decoded.forced_tokens;
        r.decode_ms += decoded.decode_ms;
        r.mask_ms += decoded.mask_ms;
        StepRecord {
            round: round as i64,
            prompt_tokens: decoded.prompt_tokens as i64,
            generated_tokens: decoded.generated_tokens as i64,
            ..StepRecord::default()
        }
    }

    /// A step that could not be used (cut off, or not a step): a failed round whose
    /// observation tells the model what to do. `text` is the step as decoded (the trace and
    /// memory keep it), `shown` as the prompts after it show it ([`cut_off`]).
    #[allow(clippy::too_many_arguments)]
    fn bad_step(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        round: usize,
        (text, shown): (String, String),
        why: String,
        mut record: StepRecord,
        started: Instant,
    ) -> Flow {
        self.emit(
            run.start,
            EventKind::BadStep {
                round,
                error: why.clone(),
                text: text.clone(),
            },
        );
        let observation = format!(
            "error: your step could not be used ({why}). Write one complete step: a short thought and short arguments."
        );
        record.args_json = text.clone();
        self.end_step(run, &mut record, "bad_step", &observation, started);
        // A cut-off final answer is a lost round, not a tool call.
        let action = partial_action(&text);
        if action.as_deref() != Some(FINAL_ANSWER) {
            run.result.tool_calls.push(ToolCall {
                round,
                tool: action.unwrap_or_default(),
                args: Value::String(text.clone()),
                ok: false,
                valid: false,
                error: Some(why.clone()),
                error_class: Some(ErrorClass::InvalidInput),
                cached: false,
                attempts: 0,
            });
        }
        st.guards.bad_step(why);
        self.next_round(
            st,
            RoundText {
                step: shown,
                observation,
            },
        )
    }

    /// The pattern of the round's final answer once the evidence check has sent back made-up
    /// numbers: the evidence's numbers only ([`grounded_numbers`]), with an event saying so.
    /// `None` when the check is off, has sent back no number, or the evidence holds too many.
    fn grounded_pattern(
        &mut self,
        run: &TaskRun,
        st: &Rounds,
        (task, ctx): (&str, &TaskContext),
        round: usize,
    ) -> Option<String> {
        if !self.options.evidence_check || st.flagged.is_empty() {
            return None;
        }
        let literals = grounded_numbers(&st.answered(run, (task, ctx), round, ("", "")))?;
        self.emit(
            run.start,
            EventKind::GroundedAnswer {
                round,
                numbers: literals.len(),
            },
        );
        Some(super::evidence::grounded_answer_pattern(&literals))
    }

    /// Keeps a round's text for the next prompts, and stops the task when too many rounds in
    /// a row have failed.
    fn next_round(&self, st: &mut Rounds, text: RoundText) -> Flow {
        st.texts.push(text);
        if st.guards.exhausted(self.options.max_failed_rounds) {
            return Flow::Stop(
                StopReason::Failures,
                st.guards.last_error().map(str::to_string),
            );
        }
        Flow::Continue
    }

    /// The final answer: checked by the model itself when `--self-check` asks for it (and
    /// this is not the last round), else the end of the task.
    fn final_answer(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        (messages, task, ctx, round, last_round): (&[Message], &str, &TaskContext, usize, bool),
        step: ParsedStep,
        mut done: Done,
    ) -> Result<Flow, AgentError> {
        let answer = super::reason::plain_answer(
            step.args
                .get("answer")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim(),
        );
        if !last_round {
            let answered = st.answered(run, (task, ctx), round, (&answer, &step.thought));
            let back = first_failed(&answered, &st.checked, self.options.evidence_check);
            if let Some(back) = back {
                st.checked.push(back.check);
                st.must_call |= back.must_call;
                st.must_query |= back.must_query;
                st.forbid_next = back.forbid_next;
                if !back.flagged.is_empty() {
                    st.flagged = back.flagged;
                }
                self.emit(run.start, back.event);
                let kind = back.check.step_kind();
                let how = (kind, back.hide_thought);
                return Ok(self.send_back(run, st, done, how, back.observation));
            }
        }
        if let (Some(threshold), false) = (self.options.self_check, last_round) {
            let score = self.self_check(messages, &done.text, task)?;
            let accepted = score >= threshold;
            self.emit(
                run.start,
                EventKind::SelfCheck {
                    round,
                    done: score,
                    accepted,
                },
            );
            if !accepted {
                let observation = format!(
                    "A check rated this answer {score:.2} of 1 for completing the task (it needs {threshold:.2}). \
                     Keep working on what is missing, then give a complete final_answer."
                );
                return Ok(self.send_back(run, st, done, ("self_check", false), observation));
            }
        }
        if answer.chars().count() as u64 >= ANSWER_MAX_CHARS {
            self.warn(
                run,
                format!("the answer reached the step's limit of {ANSWER_MAX_CHARS} characters and may be cut short"),
            );
        }
        self.end_step(run, &mut done.record, "answer", &answer, done.started);
        run.result.answer = answer;
        let reason = if last_round && self.options.max_rounds > 1 {
            StopReason::MaxRounds
        } else {
            StopReason::FinalAnswer
        };
        Ok(Flow::Stop(reason, None))
    }

    /// A final answer not accepted (by the evidence check or the self-check, named by `kind`):
    /// recorded with `observation`, which the next round shows the model; the step is shown
    /// without its thought when `hide_thought` ([`super::checks::SendBack::hide_thought`]).
    fn send_back(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        mut done: Done,
        (kind, hide_thought): (&str, bool),
        observation: String,
    ) -> Flow {
        self.end_step(run, &mut done.record, kind, &observation, done.started);
        let step = if hide_thought {
            without_thought(&done.text)
        } else {
            done.text
        };
        st.texts.push(RoundText { step, observation });
        Flow::Continue
    }

    /// A tool call: run (or answered from its first result when repeated), counted by the
    /// guards, recorded, and shown to the model as the next observation.
    fn tool_step(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        round: usize,
        step: ParsedStep,
        mut done: Done,
    ) -> Flow {
        let call_start = Instant::now();
        let mut call = self.call_or_repeat(run, st, round, &step);
        if call.ok && !call.cached {
            self.same_result(run, st, round, &step.action, &mut call);
        }
        let forbid = match self.options.forbid_repeats {
            ForbidRepeats::None => false,
            ForbidRepeats::Failed => !call.ok,
            ForbidRepeats::All => true,
        };
        // A transient failure may well work when made again; a repeat is already known.
        if forbid && !call.cached && call.class != Some(ErrorClass::Transient) {
            if let Some(call) = super::step::call_text(&done.text) {
                st.guards.forbid(call.clone());
                self.emit(run.start, EventKind::Forbidden { round, call });
            }
        }
        run.result.tool_calls.push(ToolCall {
            round,
            tool: step.action.clone(),
            args: step.args.clone(),
            ok: call.ok,
            valid: call.valid,
            error: call.error.clone(),
            error_class: call.class,
            cached: call.cached,
            attempts: call.attempts,
        });
        if call.ok {
            st.guards.succeeded(&step.action, call.cached);
        } else if let Some(n) = st.guards.failed(
            &step.action,
            call.class,
            call.cached,
            call.error.clone(),
            self.options.circuit_threshold,
        ) {
            run.result.circuits_opened.push(step.action.clone());
            self.emit(
                run.start,
                EventKind::CircuitOpen {
                    round,
                    tool: step.action.clone(),
                    failures: n,
                },
            );
            call.note = Some(format!(
                "[the tool {} failed {n} times in a row and is turned off for the rest of this task]",
                step.action
            ));
        }
        self.record_call(run, round, &step, &call, call_start, &mut done);
        if call.class == Some(ErrorClass::Fatal) {
            return Flow::Stop(StopReason::Fatal, call.error);
        }
        if call.ok {
            if let Some(re) = &self.options.stop_when {
                if re.is_match(&call.observation) {
                    run.result.answer = call.observation.trim().to_string();
                    return Flow::Stop(StopReason::StopWhen, None);
                }
            }
        }
        let mut shown = if call.ok {
            super::prompt::observation_text(&step.action, &call.observation)
        } else {
            super::prompt::error_text(&step.action, &call.observation)
        };
        if let Some(n) = &call.note {
            shown = format!("{shown}\n{n}");
        }
        self.next_round(
            st,
            RoundText {
                step: done.text,
                observation: shown,
            },
        )
    }

    /// The dead-loop rule for calls that differ and keep bringing back the same result (a
    /// search for "Corolla's Corolla", then "Corolla's Corolla's", … each time the same
    /// passage): the first time, a note says so; the second, the tool is turned off like a
    /// call repeated word for word. Regression: the 1.5B model spent six rounds on such
    /// searches, never queried the price it needed, and answered with its last thought.
    fn same_result(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        round: usize,
        tool: &str,
        call: &mut CallOutcome,
    ) {
        let Some((first, times)) = st.guards.same_result(tool, &call.observation, round) else {
            return;
        };
        let note = if times >= 2 {
            st.guards.bench(tool);
            run.result.dead_loops += 1;
            self.emit(
                run.start,
                EventKind::DeadLoop {
                    round,
                    tool: tool.to_string(),
                    times: times + 1,
                },
            );
            format!("[note: this is the same result your call of round {first} gave, now {} times: other arguments found nothing else. {tool} is turned off for the rest of this task: use this result, try another tool, or give the final_answer.]", times + 1)
        } else {
            format!("[note: this is the same result your call of round {first} gave: the other arguments changed nothing. Use this result, try another tool, or give the final_answer.]")
        };
        // A call that worked has no other note (those come with failures and repeats).
        call.note = Some(note);
    }

    /// Runs the step's call with retries, or, for a call already made word for word, answers
    /// with its first result and a note that turns the tool off (the dead-loop rule).
    fn call_or_repeat(
        &mut self,
        run: &mut TaskRun,
        st: &mut Rounds,
        round: usize,
        step: &ParsedStep,
    ) -> CallOutcome {
        let key = format!("{} {}", step.action, canonical_json(&step.args));
        if let Some(seen) = st.guards.repeat(&key, &step.action) {
            run.result.dead_loops += 1;
            self.emit(
                run.start,
                EventKind::DeadLoop {
                    round,
                    tool: step.action.clone(),
                    times: seen.times,
                },
            );
            // Shown after the result's data block, so it is never read as part of the data.
            let note = if seen.failed {
                format!("[note: you already called {0} with these same arguments and it failed the same way; {0} is turned off for the rest of this task. Use another tool, or give the final_answer with what you know.]", step.action)
            } else {
                format!("[note: you already called {0} with these same arguments; this is the same result as before. {0} is turned off for the rest of this task: use this result, try another tool, or give the final_answer.]", step.action)
            };
            return CallOutcome {
                ok: !seen.failed,
                class: seen.failed.then_some(ErrorClass::InvalidInput),
                error: seen.error,
                valid: seen.valid,
                observation: seen.observation,
                attempts: 0,
                cached: true,
                note: Some(note),
            };
        }
        let (r, attempts) = self.call_with_retries(run, round, &step.action, &step.args);
        let call = match r {
            Ok(o) => CallOutcome {
                ok: true,
                class: None,
                error: None,
                valid: true,
                observation: o.text,
                attempts,
                cached: false,
                note: None,
            },
            Err(e) => CallOutcome {
                ok: false,
                class: Some(e.class),
                valid: !e.arguments_rejected,
                observation: e.to_observation_text(),
                error: Some(e.message),
                attempts,
                cached: false,
                note: None,
            },
        };
        let seen = Seen {
            times: 1,
            observation: call.observation.clone(),
            failed: !call.ok,
            valid: call.valid,
            error: call.error.clone(),
        };
        st.guards.remember(key, seen, call.class);
        call
    }

    /// The trace event and the memory record of a call (with the loop's note kept with the
    /// result), and the newest good result for the facts learned.
    fn record_call(
        &mut self,
        run: &mut TaskRun,
        round: usize,
        step: &ParsedStep,
        call: &CallOutcome,
        call_start: Instant,
        done: &mut Done,
    ) {
        let recorded = match &call.note {
            Some(n) => format!("{}\n{n}", call.observation),
            None => call.observation.clone(),
        };
        self.emit(
            run.start,
            EventKind::ToolResult {
                round,
                tool: step.action.clone(),
                args: step.args.clone(),
                ok: call.ok,
                error_class: call.class.map(|c| c.as_str().to_string()),
                observation: recorded.clone(),
                ms: call_start.elapsed().as_secs_f64() * 1000.0,
                cached: call.cached,
            },
        );
        let outcome = match (call.ok, call.cached) {
            (true, false) => "ok",
            (_, true) => "repeat",
            (false, false) => "error",
        };
        done.record.error_class = call.class.map(|c| c.as_str().to_string());
        let step_id = self.end_step(run, &mut done.record, outcome, &recorded, done.started);
        if call.ok && !call.cached {
            run.last_ok = Some((call.observation.clone(), step_id));
        }
    }

    /// Runs a tool, retrying transient errors with exponential backoff; returns the outcome and
    /// the attempts made.
    fn call_with_retries(
        &mut self,
        run: &mut TaskRun,
        round: usize,
        tool: &str,
        args: &Value,
    ) -> (Result<Observation, ToolError>, usize) {
        let attempts = self.options.retry_attempts;
        let mut attempt = 1;
        loop {
            let r = self.tools.call_value(tool, args);
            match r {
                Err(e) if e.class == ErrorClass::Transient && attempt < attempts => {
                    let wait = backoff(self.options.retry_base, attempt);
                    let ends_after =
                        |d: Instant| Instant::now().checked_add(wait).is_none_or(|t| t >= d);
                    if run.deadline.is_some_and(ends_after) {
                        return (Err(e), attempt);
                    }
                    run.result.retries += 1;
                    self.emit(
                        run.start,
                        EventKind::Retry {
                            round,
                            tool: tool.to_string(),
                            attempt,
                            wait_ms: wait.as_millis() as u64,
                            error: e.message.clone(),
                        },
                    );
                    std::thread::sleep(wait);
                    attempt += 1;
                }
                other => return (other, attempt),
            }
        }
    }

    /// Asks the model, under `{"done": 0..1}`, whether `step` (its final answer) completes the
    /// task.
    fn self_check(
        &mut self,
        messages: &[Message],
        step: &str,
        task: &str,
    ) -> Result<f64, AgentError> {
        let mut m = messages.to_vec();
        m.push(Message::assistant(step));
        m.push(Message::user(format!(
            "Check: does the answer you just gave fully complete the task \"{}\"? Rate it from 0 (not at all) to 1 (completely), as {{\"done\": number}}.",
            task.trim()
        )));
        let d = self.policy.decode(&m, &self_check_schema(), 24, &[])?;
        let v: Value = serde_json::from_str(&d.text).unwrap_or(Value::Null);
        Ok(v.get("done").and_then(Value::as_f64).unwrap_or(0.0))
    }

    /// Completes a step's record (outcome, observation, latency) and saves it.
    fn end_step(
        &mut self,
        run: &mut TaskRun,
        record: &mut StepRecord,
        outcome: &str,
        observation: &str,
        started: Instant,
    ) -> Option<StepId> {
        record.outcome = outcome.to_string();
        record.observation = observation.to_string();
        record.latency_ms = started.elapsed().as_millis() as i64;
        self.record(run, record)
    }

    /// Records a step in memory; a failure becomes a warning.
    fn record(&mut self, run: &mut TaskRun, record: &StepRecord) -> Option<StepId> {
        let (store, (_, turn)) = (self.memory.as_ref()?, run.session?);
        match store.record_step(turn, record) {
            Ok(id) => Some(id),
            Err(e) => {
                self.warn(run, format!("a step was not saved in memory: {e}"));
                None
            }
        }
    }

    /// Ends a task: the stop event, the turn's end and the facts learned, in memory.
    fn finish(
        &mut self,
        mut run: TaskRun,
        task: &str,
        stop: StopReason,
        error: Option<String>,
    ) -> AgentResult {
        run.result.stop_reason = stop;
        run.result.error = error;
        run.result.latency_ms = run.start.elapsed().as_millis() as u64;
        if let (Some(store), Some((sid, turn))) = (&self.memory, run.session) {
            let r = &run.result;
            let end = TurnEnd {
                answer: r.answer.clone(),
                stop_reason: stop.as_str().to_string(),
                latency_ms: r.latency_ms as i64,
                prompt_tokens: r.prompt_tokens as i64,
                generated_tokens: r.generated_tokens as i64,
            };
            let mut problems = Vec::new();
            if let Err(e) = store.finish_turn(turn, &end) {
                problems.push(format!("the end of the turn was not saved in memory: {e}"));
            }
            if r.answered() {
                let mut facts: Vec<(String, Option<StepId>)> = extract_facts(task, &r.answer)
                    .into_iter()
                    .map(|f| (f, None))
                    .collect();
                if let Some((obs, step)) = &run.last_ok {
                    facts.extend(extract_facts(task, obs).into_iter().map(|f| (f, *step)));
                }
                for (f, step) in facts {
                    if let Err(e) = store.add_fact(&f, FactScope::Session(sid), step) {
                        problems.push(format!("a fact was not saved in memory: {e}"));
                        break;
                    }
                }
            }
            for p in problems {
                self.warn(&mut run, p);
            }
        }
        let r = &run.result;
        let kind = EventKind::Stop {
            reason: stop.as_str().to_string(),
            rounds: r.rounds,
            answer: r.answer.clone(),
            error: r.error.clone(),
            latency_ms: r.latency_ms,
        };
        self.emit(run.start, kind);
        run.result
    }
}

/// Why a step cut off at the token limit of `limit` could not be used, with what went wrong
/// in it where that can be seen (a piece of its arguments written again, and in a query, a
/// string that ran on over the query's own text: [`crate::tools::sql::runaway_literal`]), and
/// the step's text as the prompts after it show it ([`cut_off_text`]; a query whose string ran
/// on, up to where the string should have closed: what follows was written with every quote
/// the wrong way round). Regression: told only that the step was cut off, and shown its 512
/// tokens, the 1.5B model wrote the same query, one quote short in `'O''Neill)`, to the limit
/// again in each of the three rounds after.
fn cut_off(text: &str, limit: usize) -> (String, String) {
    let mut why = format!("the step was cut off at the limit of {limit} tokens");
    let action = partial_action(text);
    let arg = match action.as_deref() {
        Some(crate::tools::sql::NAME) => partial_arg(text, "query"),
        Some("calculator") => partial_arg(text, "expression"),
        _ => None,
    };
    let args = arg
        .clone()
        .or_else(|| text.find("\"args\"").map(|at| text[at..].to_string()));
    let mut said = Vec::new();
    if let Some((piece, times)) = args.as_deref().and_then(repeated_piece) {
        said.push(format!("it writes `{piece}` {times} times"));
    }
    let mut shown = cut_off_text(text);
    let runaway = arg
        .as_deref()
        .filter(|_| action.as_deref() == Some(crate::tools::sql::NAME))
        .and_then(crate::tools::sql::runaway_literal);
    if let Some(r) = runaway {
        said.push(r.message);
        // The query as the step's JSON writes it, up to the value's end.
        let escaped = Value::String(r.meant).to_string();
        let meant = &escaped[1..escaped.len() - 1];
        if let Some(at) = text.find(meant) {
            shown = format!("{} …", &text[..at + meant.len()]);
        }
    }
    if !said.is_empty() {
        why.push_str(": ");
        why.push_str(&said.join("; "));
    }
    (why, shown)
}

/// A step's JSON with its thought taken out (the step is shown as it was decoded when it is
/// no JSON object).
fn without_thought(step: &str) -> String {
    match serde_json::from_str::<Value>(step) {
        Ok(Value::Object(mut m)) => {
            m.remove("thought");
            Value::Object(m).to_string()
        }
        _ => step.to_string(),
    }
}
