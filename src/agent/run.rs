//! [`Agent`]: the loop of one task, round by round, with every stop condition, retry,
//! circuit breaker and dead-loop rule of the agent's design.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::events::{Event, EventKind, EventSink};
use super::prompt::{fit, system_text, worked_example, RoundText, TaskContext};
use super::{canonical_json, AgentError, AgentOptions, AgentResult, Policy, StopReason, ToolCall};
use crate::constrain::agent_step::{
    partial_action, step_schema, StepTool, ANSWER_MAX_CHARS, FINAL_ANSWER,
};
use crate::memory::{
    extract_facts, FactScope, MemoryItem, MemoryStore, SessionId, StepId, StepRecord, TurnEnd,
    TurnId,
};
use crate::model::template::Message;
use crate::tools::recall::{RecallTool, DEFAULT_K};
use crate::tools::{ErrorClass, Observation, ToolError, ToolRegistry};

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

    /// Opens the memory side of a task: session, turn, facts, earlier turns, and the `recall`
    /// tool bound to the session.
    fn begin(&mut self, run: &mut TaskRun, task: &str, session: Option<&str>) -> TaskContext {
        let mut ctx = TaskContext::default();
        let mut bound_recall = false;
        if let (Some(store), Some(name)) = (&self.memory, session) {
            let opened = (|| {
                let sid = store.session(name)?;
                let turn = store.begin_turn(sid, task)?;
                let facts =
                    store.recall(sid, task, self.options.facts, self.options.memory_decay)?;
                let history = store.short_term(sid, turn, self.options.history_tokens, &|t| {
                    t.chars().count().div_ceil(4)
                })?;
                let has_facts = !store.session_facts(sid)?.is_empty() || !facts.is_empty();
                Ok::<_, crate::memory::MemoryError>((sid, turn, facts, history, has_facts))
            })();
            match opened {
                Ok((sid, turn, facts, history, has_facts)) => {
                    run.session = Some((sid, turn));
                    ctx.facts = facts.into_iter().map(|f| f.fact.text).collect();
                    ctx.history = history
                        .into_iter()
                        .filter_map(|i| match i {
                            MemoryItem::PastTurn { task, answer, .. } => Some((task, answer)),
                            MemoryItem::Step(_) => None,
                        })
                        .collect();
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
            },
        );
        ctx
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
        let infos = self.tools.list();
        let notes = super::prompt::tool_context(&self.tools, &infos, task);
        let mut prefix = vec![Message::system(system_text(&infos))];
        prefix.extend(worked_example(&infos));
        let budget = self
            .policy
            .context()
            .saturating_sub(self.options.max_step_tokens);
        let max_rounds = self.options.max_rounds;
        let mut open: HashSet<String> = HashSet::new();
        let mut tool_failures: HashMap<String, usize> = HashMap::new();
        let mut failed_rounds = 0usize;
        // Tools turned off for the rest of the task because a call to them was repeated word
        // for word: the model is stuck on that call, and cannot choose it a third time.
        let mut benched: HashSet<String> = HashSet::new();
        // Canonical action → (times chosen, observation, failed).
        let mut seen: HashMap<String, (usize, String, bool)> = HashMap::new();
        let mut rounds: Vec<RoundText> = Vec::new();
        let mut min_dropped = 0usize;
        let mut last_error: Option<String> = None;
        for round in 1..=max_rounds {
            if Self::timed_out(run) {
                return Ok((
                    StopReason::Timeout,
                    Some(format!(
                        "the task ran past its time limit of {:.1} s after {} rounds",
                        self.options.timeout.unwrap_or_default().as_secs_f64(),
                        round - 1
                    )),
                ));
            }
            let last_round = round == max_rounds;
            let allowed: Vec<StepTool> = if last_round {
                Vec::new()
            } else {
                infos
                    .iter()
                    .filter(|t| !open.contains(&t.name) && !benched.contains(&t.name))
                    .map(|t| StepTool::new(t.name.clone(), t.args_schema.clone()))
                    .collect()
            };
            let schema = step_schema(&allowed);
            let Some(fitted) = fit(
                &mut self.policy,
                &prefix,
                task,
                ctx,
                &notes,
                &rounds,
                min_dropped,
                budget,
            )?
            else {
                let mut bare = prefix.clone();
                bare.push(super::prompt::task_message(task, None, 0));
                let bare = self.policy.prompt_tokens(&bare)?;
                // A step allowance that eats the context is the flag's fault, not the task's.
                let advice = if self.options.max_step_tokens >= self.policy.context() / 2 {
                    "lower --max-tokens (a step rarely needs more than 512)"
                } else {
                    "shorten the task"
                };
                return Ok((
                    StopReason::Budget,
                    Some(format!(
                        "the prompt does not fit the model's context: the instructions, tools and task alone are {bare} tokens, \
                         but at most {budget} fit ({} tokens of context minus {} for the step); {advice}",
                        self.policy.context(),
                        self.options.max_step_tokens
                    )),
                ));
            };
            if fitted.dropped_rounds > min_dropped || fitted.cut_chars > 0 || fitted.dropped_context
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
            min_dropped = fitted.dropped_rounds;
            run.result.dropped_rounds = fitted.dropped_rounds;
            let mut allowed_names: Vec<String> = allowed.iter().map(|t| t.name.clone()).collect();
            allowed_names.push(FINAL_ANSWER.to_string());
            self.emit(
                run.start,
                EventKind::Prompt {
                    round,
                    tokens: fitted.tokens,
                    budget,
                    allowed: allowed_names,
                },
            );
            let step_start = Instant::now();
            let decoded =
                self.policy
                    .decode(&fitted.messages, &schema, self.options.max_step_tokens)?;
            run.result.rounds = round;
            run.result.prompt_tokens += decoded.prompt_tokens;
            run.result.reused_tokens += decoded.reused_tokens;
            run.result.generated_tokens += decoded.generated_tokens;
            run.result.forced_tokens += decoded.forced_tokens;
            let mut record = StepRecord {
                round: round as i64,
                prompt_tokens: decoded.prompt_tokens as i64,
                generated_tokens: decoded.generated_tokens as i64,
                ..StepRecord::default()
            };
            let parsed = if decoded.complete {
                parse_step(&decoded.text)
            } else {
                Err(format!(
                    "the step was cut off at the limit of {} tokens",
                    self.options.max_step_tokens
                ))
            };
            let step = match parsed {
                Ok(s) => s,
                Err(why) => {
                    self.emit(
                        run.start,
                        EventKind::BadStep {
                            round,
                            error: why.clone(),
                            text: decoded.text.clone(),
                        },
                    );
                    let observation = format!(
                        "error: your step could not be used ({why}). Write one complete step: a short thought and short arguments."
                    );
                    record.args_json = decoded.text.clone();
                    self.end_step(run, &mut record, "bad_step", &observation, step_start);
                    // A cut-off final answer is a lost round, not a tool call.
                    let action = partial_action(&decoded.text);
                    if action.as_deref() != Some(FINAL_ANSWER) {
                        run.result.tool_calls.push(ToolCall {
                            round,
                            tool: action.unwrap_or_default(),
                            args: Value::String(decoded.text.clone()),
                            ok: false,
                            valid: false,
                            error: Some(why.clone()),
                            error_class: Some(ErrorClass::InvalidInput),
                            cached: false,
                            attempts: 0,
                        });
                    }
                    rounds.push(RoundText {
                        step: decoded.text,
                        observation,
                    });
                    failed_rounds += 1;
                    last_error = Some(why);
                    if failed_rounds >= self.options.max_failed_rounds {
                        return Ok((StopReason::Failures, last_error));
                    }
                    continue;
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
                },
            );
            record.thought = step.thought.clone();
            record.action = step.action.clone();
            record.args_json = step.args.to_string();

            if step.action == FINAL_ANSWER {
                let answer = step
                    .args
                    .get("answer")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                if let (Some(threshold), false) = (self.options.self_check, last_round) {
                    let done = self.self_check(&fitted.messages, &decoded.text, task)?;
                    let accepted = done >= threshold;
                    self.emit(
                        run.start,
                        EventKind::SelfCheck {
                            round,
                            done,
                            accepted,
                        },
                    );
                    if !accepted {
                        let observation = format!(
                            "A check rated this answer {done:.2} of 1 for completing the task (it needs {threshold:.2}). \
                             Keep working on what is missing, then give a complete final_answer."
                        );
                        self.end_step(run, &mut record, "self_check", &observation, step_start);
                        rounds.push(RoundText {
                            step: decoded.text,
                            observation,
                        });
                        continue;
                    }
                }
                if answer.chars().count() as u64 >= ANSWER_MAX_CHARS {
                    self.warn(
                        run,
                        format!("the answer reached the step's limit of {ANSWER_MAX_CHARS} characters and may be cut short"),
                    );
                }
                self.end_step(run, &mut record, "answer", &answer, step_start);
                run.result.answer = answer;
                let reason = if last_round && max_rounds > 1 {
                    StopReason::MaxRounds
                } else {
                    StopReason::FinalAnswer
                };
                return Ok((reason, None));
            }

            // A tool call.
            let key = format!("{} {}", step.action, canonical_json(&step.args));
            let call_start = Instant::now();
            // What the loop adds after the tool's result (a repeat, a circuit opening): shown
            // after the result's data block, so it is never read as part of the data.
            let mut loop_note: Option<String> = None;
            let (observation, ok, class, attempts, cached, error_text) = if let Some((
                times,
                obs,
                failed,
            )) = seen.get_mut(&key)
            {
                *times += 1;
                let times = *times;
                let failed = *failed;
                let obs = obs.clone();
                run.result.dead_loops += 1;
                self.emit(
                    run.start,
                    EventKind::DeadLoop {
                        round,
                        tool: step.action.clone(),
                        times,
                    },
                );
                benched.insert(step.action.clone());
                loop_note = Some(if failed {
                    format!("[note: you already called {0} with these same arguments and it failed the same way; {0} is turned off for the rest of this task. Use another tool, or give the final_answer with what you know.]", step.action)
                } else {
                    format!("[note: you already called {0} with these same arguments; this is the same result as before. {0} is turned off for the rest of this task: use this result, try another tool, or give the final_answer.]", step.action)
                });
                let class = failed.then_some(ErrorClass::InvalidInput);
                let error_text = failed.then(|| obs.clone());
                (obs, !failed, class, 0, true, error_text)
            } else {
                let (r, attempts) = self.call_with_retries(run, round, &step.action, &step.args);
                match r {
                    Ok(o) => {
                        seen.insert(key, (1, o.text.clone(), false));
                        (o.text, true, None, attempts, false, None)
                    }
                    Err(e) => {
                        let text = e.to_observation_text();
                        if e.class != ErrorClass::Transient {
                            seen.insert(key, (1, text.clone(), true));
                        }
                        (text, false, Some(e.class), attempts, false, Some(e.message))
                    }
                }
            };
            run.result.tool_calls.push(ToolCall {
                round,
                tool: step.action.clone(),
                args: step.args.clone(),
                ok,
                valid: !error_text
                    .as_deref()
                    .is_some_and(|e| e.starts_with("invalid arguments for `")),
                error: error_text.clone(),
                error_class: class,
                cached,
                attempts,
            });
            if ok {
                failed_rounds = 0;
                if !cached {
                    tool_failures.insert(step.action.clone(), 0);
                }
            } else if cached {
                // A repeated failing call is the dead-loop rule's to end (only final_answer
                // after the third time), not a new failure: counting it too would stop the
                // task with `failures` before the model could answer.
                last_error = error_text.clone();
            } else {
                failed_rounds += 1;
                last_error = error_text.clone();
                if !cached && class != Some(ErrorClass::Fatal) {
                    let n = tool_failures.entry(step.action.clone()).or_insert(0);
                    *n += 1;
                    let n = *n;
                    if n >= self.options.circuit_threshold && open.insert(step.action.clone()) {
                        run.result.circuits_opened.push(step.action.clone());
                        self.emit(
                            run.start,
                            EventKind::CircuitOpen {
                                round,
                                tool: step.action.clone(),
                                failures: n,
                            },
                        );
                        loop_note = Some(format!(
                            "[the tool {} failed {n} times in a row and is turned off for the rest of this task]",
                            step.action
                        ));
                    }
                }
            }
            // The trace and memory keep the note with the result.
            let recorded = match &loop_note {
                Some(n) => format!("{observation}\n{n}"),
                None => observation.clone(),
            };
            self.emit(
                run.start,
                EventKind::ToolResult {
                    round,
                    tool: step.action.clone(),
                    args: step.args.clone(),
                    ok,
                    error_class: class.map(|c| c.as_str().to_string()),
                    observation: recorded.clone(),
                    ms: call_start.elapsed().as_secs_f64() * 1000.0,
                    cached,
                },
            );
            let outcome = match (ok, cached) {
                (true, false) => "ok",
                (_, true) => "repeat",
                (false, false) => "error",
            };
            record.error_class = class.map(|c| c.as_str().to_string());
            let step_id = self.end_step(run, &mut record, outcome, &recorded, step_start);
            if ok && !cached {
                run.last_ok = Some((observation.clone(), step_id));
            }
            if class == Some(ErrorClass::Fatal) {
                return Ok((StopReason::Fatal, error_text));
            }
            if ok {
                if let Some(re) = &self.options.stop_when {
                    if re.is_match(&observation) {
                        run.result.answer = observation.trim().to_string();
                        return Ok((StopReason::StopWhen, None));
                    }
                }
            }
            let mut shown = if ok {
                super::prompt::observation_text(&step.action, &observation)
            } else {
                super::prompt::error_text(&step.action, &observation)
            };
            if let Some(n) = &loop_note {
                shown = format!("{shown}\n{n}");
            }
            rounds.push(RoundText {
                step: decoded.text,
                observation: shown,
            });
            if failed_rounds >= self.options.max_failed_rounds {
                return Ok((StopReason::Failures, last_error));
            }
        }
        // Only reached when the last round's step could not be used.
        Ok((
            StopReason::MaxRounds,
            Some(format!(
                "the round limit of {max_rounds} was reached without a usable final answer{}",
                last_error
                    .map(|e| format!(" (last error: {e})"))
                    .unwrap_or_default()
            )),
        ))
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
                    // Checked: a huge base or attempt count must not overflow (a panic).
                    let wait = self
                        .options
                        .retry_base
                        .checked_mul(2u32.saturating_pow(attempt as u32 - 1))
                        .unwrap_or(Duration::MAX);
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
        let d = self.policy.decode(&m, &self_check_schema(), 24)?;
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
            if stop.answered() && !r.answer.is_empty() {
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
