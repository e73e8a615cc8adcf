//! The naive baseline (`cairn eval --baseline naive`): the loop practitioners replaced, on the
//! same model, prompt and tools as cairn's. The reply is generated freely (no schema) and
//! parsed as JSON after stripping code fences; there are no retries, the first tool error or
//! unreadable reply ends the task, the prompt is never trimmed, and nothing forces a final
//! answer on the last round. Repeated actions are counted (for the dead-loop metric) but not
//! stopped.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::Value;

use crate::agent::prompt::{observation_text, system_text, task_message, worked_example};
use crate::agent::step::{partial_action, FINAL_ANSWER};
use crate::agent::{canonical_json, AgentResult, ModelPolicy, Policy, StopReason, ToolCall};
use crate::model::template::Message;
use crate::tools::ToolRegistry;

/// The reply with a surrounding Markdown code fence removed.
pub fn strip_fences(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// Runs one task the naive way.
pub fn run_naive(
    policy: &mut ModelPolicy,
    tools: &ToolRegistry,
    task: &str,
    max_rounds: usize,
    max_tokens: usize,
) -> AgentResult {
    let start = Instant::now();
    tools.new_task();
    let mut r = AgentResult::started(None);
    let (stop, error) = rounds(policy, tools, task, max_rounds, max_tokens, &mut r);
    r.stop_reason = stop;
    r.error = error;
    r.latency_ms = start.elapsed().as_millis() as u64;
    r
}

fn invalid(round: usize, text: &str, why: String) -> ToolCall {
    ToolCall {
        round,
        tool: String::new(),
        args: Value::String(text.to_string()),
        ok: false,
        valid: false,
        error: Some(why),
        error_class: Some(crate::tools::ErrorClass::InvalidInput),
        cached: false,
        attempts: 0,
    }
}

fn rounds(
    policy: &mut ModelPolicy,
    tools: &ToolRegistry,
    task: &str,
    max_rounds: usize,
    max_tokens: usize,
    r: &mut AgentResult,
) -> (StopReason, Option<String>) {
    let infos = tools.list();
    let mut messages = vec![Message::system(system_text(&infos))];
    messages.extend(worked_example(&infos, task));
    messages.push(task_message(task, None, 0));
    let mut seen = HashSet::new();
    for round in 1..=max_rounds {
        let tokens = match policy.prompt_tokens(&messages) {
            Ok(t) => t,
            Err(e) => return (StopReason::Error, Some(e.to_string())),
        };
        if tokens + max_tokens > policy.context() {
            return (
                StopReason::Budget,
                Some(format!(
                    "the prompt grew to {tokens} tokens and no longer fits the context (the naive loop does not trim)"
                )),
            );
        }
        let d = match policy.decode_free(&messages, max_tokens) {
            Ok(d) => d,
            Err(e) => return (StopReason::Error, Some(e.to_string())),
        };
        r.rounds = round;
        r.prompt_tokens += d.prompt_tokens;
        r.reused_tokens += d.reused_tokens;
        r.generated_tokens += d.generated_tokens;
        let body = strip_fences(&d.text);
        let step: Value = match serde_json::from_str(body) {
            Ok(v) => v,
            Err(e) => {
                let why = format!("the reply is not a JSON step ({e})");
                // Counted as a tool call unless it was meant as the final answer, exactly as
                // a cut-off step of cairn's loop is.
                if partial_action(body).as_deref() != Some(FINAL_ANSWER) {
                    r.tool_calls.push(invalid(round, &d.text, why.clone()));
                }
                return (StopReason::Failures, Some(why));
            }
        };
        let action = step
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let args = step.get("args").cloned().unwrap_or(Value::Null);
        if action == FINAL_ANSWER {
            return match args.get("answer").and_then(Value::as_str) {
                Some(a) => {
                    r.answer = a.trim().to_string();
                    (StopReason::FinalAnswer, None)
                }
                None => (
                    StopReason::Failures,
                    Some("final_answer without an `answer` string".to_string()),
                ),
            };
        }
        if !seen.insert(format!("{action} {}", canonical_json(&args))) {
            r.dead_loops += 1;
        }
        let valid = infos.iter().any(|t| {
            t.name == action && crate::tools::schema::validate(&t.args_schema, &args).is_ok()
        });
        let outcome = tools.call_value(action, &args);
        r.tool_calls.push(ToolCall {
            round,
            tool: action.to_string(),
            args: args.clone(),
            ok: outcome.is_ok(),
            valid,
            error: outcome.as_ref().err().map(|e| e.message.clone()),
            error_class: outcome.as_ref().err().map(|e| e.class),
            cached: false,
            attempts: 1,
        });
        match outcome {
            Ok(obs) => {
                messages.push(Message::assistant(d.text.clone()));
                messages.push(Message::tool(observation_text(action, &obs.text)));
            }
            Err(e) => return (StopReason::Failures, Some(e.message)),
        }
    }
    (
        StopReason::MaxRounds,
        Some(format!(
            "the round limit of {max_rounds} was reached without a final answer"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_fences_are_stripped() {
        assert_eq!(strip_fences("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(strip_fences("  {\"a\": 1} "), "{\"a\": 1}");
        assert_eq!(strip_fences("```\n{}\n```"), "{}");
    }
}
