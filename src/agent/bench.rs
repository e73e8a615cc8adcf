//! What prefix reuse saves in the agent loop: the same 6-round conversation decoded with the
//! KV cache carried from round to round, and with every round's prompt prefilled from scratch
//! (`cairn bench --agent`).
//!
//! The conversation is fixed so both passes see the same prompts: a chain of calculator steps
//! (run by the real tool, its results fed back with the loop's own prompt layout), then the
//! final answer. Each round the model really decodes one step under the round's step schema
//! (greedy); what it decodes is timed, and the scripted step, not the decoded one, goes into
//! the next round's prompt. Both passes decode the same tokens, so the difference is the
//! prompt work that reuse avoids.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use super::prompt::{observation_text, system_text, task_message, worked_example};
use super::step::{step_schema, StepTool};
use super::{AgentError, ModelPolicy, Policy};
use crate::model::template::Message;
use crate::tools::calculator::CalculatorTool;
use crate::tools::{RegistryOptions, ToolRegistry};

/// The task of the measured conversation.
pub const BENCH_TASK: &str = "Start with 3, multiply by 7, add 12, square it, subtract 100, \
     then divide by 4. Use the calculator for each operation.";

/// The calculator steps of the measured conversation (the last round is the final answer).
pub const BENCH_STEPS: [&str; 5] = ["3 * 7", "21 + 12", "33 ^ 2", "1089 - 100", "989 / 4"];

/// One round as measured.
#[derive(Debug, Clone, Serialize)]
pub struct RoundTiming {
    /// The round (1-based).
    pub round: usize,
    /// Tokens in the round's prompt.
    pub prompt_tokens: usize,
    /// Of those, tokens that had to be run through the model (not in the KV cache).
    pub computed_tokens: usize,
    /// Tokens decoded for the step.
    pub generated_tokens: usize,
    /// Wall time of the round's decode call (prefill and decode), in ms.
    pub ms: f64,
}

/// The measurement.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixReuseReport {
    /// Rounds in the conversation.
    pub rounds: usize,
    /// Each round with the KV cache carried over.
    pub with_reuse: Vec<RoundTiming>,
    /// Each round prefilled from scratch.
    pub without_reuse: Vec<RoundTiming>,
    /// Mean round latency with reuse, ms.
    pub mean_ms_with_reuse: f64,
    /// Mean round latency without reuse, ms.
    pub mean_ms_without_reuse: f64,
    /// `mean_ms_without_reuse / mean_ms_with_reuse`.
    pub speedup: f64,
    /// Round 1 of another task right after, with the system text and tools still cached
    /// (the batch case).
    pub next_task_first_round: RoundTiming,
}

/// The prompts of the measured conversation, one per round, and each round's schema.
fn conversation() -> Result<Vec<(Vec<Message>, serde_json::Value)>, AgentError> {
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(CalculatorTool))
        .map_err(|e| AgentError::Options(e.to_string()))?;
    let infos = reg.list();
    let mut messages = vec![Message::system(system_text(&infos))];
    messages.extend(worked_example(&infos, BENCH_TASK));
    messages.push(task_message(BENCH_TASK, None, 0));
    let tools: Vec<StepTool> = infos
        .iter()
        .map(|t| StepTool::new(t.name.clone(), t.args_schema.clone()))
        .collect();
    let mut out = Vec::new();
    for expr in BENCH_STEPS {
        out.push((messages.clone(), step_schema(&tools)));
        let step = json!({"thought": "Next operation.", "action": "calculator", "args": {"expression": expr}});
        let obs = reg
            .call_value("calculator", &step["args"])
            .map_err(|e| AgentError::Script(e.to_string()))?;
        messages.push(Message::assistant(step.to_string()));
        messages.push(Message::tool(observation_text("calculator", &obs.text)));
    }
    out.push((messages, step_schema(&[])));
    Ok(out)
}

fn timed(
    policy: &mut ModelPolicy,
    round: usize,
    messages: &[Message],
    schema: &serde_json::Value,
) -> Result<RoundTiming, AgentError> {
    let start = Instant::now();
    let d = policy.decode(messages, schema, 128, &[])?;
    Ok(RoundTiming {
        round,
        prompt_tokens: d.prompt_tokens,
        computed_tokens: d.prompt_tokens - d.reused_tokens,
        generated_tokens: d.generated_tokens,
        ms: start.elapsed().as_secs_f64() * 1000.0,
    })
}

fn mean(r: &[RoundTiming]) -> f64 {
    r.iter().map(|t| t.ms).sum::<f64>() / r.len().max(1) as f64
}

/// Runs the measurement; `progress` hears what is being measured.
pub fn prefix_reuse(
    policy: &mut ModelPolicy,
    progress: &mut dyn FnMut(&str),
) -> Result<PrefixReuseReport, AgentError> {
    let conv = conversation()?;
    progress("warm-up");
    policy.set_prefix_reuse(false);
    timed(policy, 0, &conv[0].0, &conv[0].1)?;
    progress("rounds without prefix reuse");
    let mut without = Vec::new();
    for (i, (m, s)) in conv.iter().enumerate() {
        without.push(timed(policy, i + 1, m, s)?);
    }
    progress("rounds with prefix reuse");
    policy.set_prefix_reuse(true);
    policy.clear_cache();
    let mut with = Vec::new();
    for (i, (m, s)) in conv.iter().enumerate() {
        with.push(timed(policy, i + 1, m, s)?);
    }
    progress("first round of a second task");
    let mut other = conv[0].0.clone();
    other.pop();
    other.push(task_message("What is 12.5 percent of 640?", None, 0));
    let next = timed(policy, 1, &other, &conv[0].1)?;
    let (mw, mo) = (mean(&with), mean(&without));
    Ok(PrefixReuseReport {
        rounds: conv.len(),
        speedup: if mw > 0.0 { mo / mw } else { 0.0 },
        mean_ms_with_reuse: mw,
        mean_ms_without_reuse: mo,
        with_reuse: with,
        without_reuse: without,
        next_task_first_round: next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_conversation_has_six_rounds_with_real_results() {
        let conv = conversation().unwrap();
        assert_eq!(conv.len(), 6);
        let last = &conv[5].0;
        assert!(last
            .iter()
            .any(|m| m.content.contains("Result of calculator:\n989")));
        assert!(last
            .iter()
            .any(|m| m.content.contains("Result of calculator:\n247.25")));
        // The last round offers only the final answer, as the loop's last round does.
        assert_eq!(conv[5].1["anyOf"].as_array().unwrap().len(), 1);
    }
}
