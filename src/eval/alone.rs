//! The model-alone baseline (`cairn eval --baseline alone`): the same model answering the task
//! by itself, with no tools and no schema, asked to reason step by step and end with an
//! `Answer:` line. It is the yardstick an agent must beat: a loop whose tools make its model
//! answer worse than the model alone is not helping (word problems are where this shows).

use std::time::Instant;

use crate::agent::{AgentResult, ModelPolicy, StopReason};
use crate::model::template::Message;

/// The instruction that follows the task.
const INSTRUCTION: &str =
    "Think step by step, then give the final answer on the last line, as: Answer: <the answer>";

/// Runs one task with the model alone: one free generation of at most `max_tokens` tokens.
pub fn run_alone(policy: &mut ModelPolicy, task: &str, max_tokens: usize) -> AgentResult {
    let start = Instant::now();
    let mut r = AgentResult::started(None);
    let messages = [
        Message::system("You are a helpful assistant."),
        Message::user(format!("{}\n\n{INSTRUCTION}", task.trim())),
    ];
    match policy.decode_free(&messages, max_tokens) {
        Ok(d) => {
            r.rounds = 1;
            r.prompt_tokens += d.prompt_tokens;
            r.reused_tokens += d.reused_tokens;
            r.generated_tokens += d.generated_tokens;
            r.answer = final_line(&d.text).to_string();
            r.stop_reason = StopReason::FinalAnswer;
        }
        Err(e) => {
            r.stop_reason = StopReason::Error;
            r.error = Some(e.to_string());
        }
    }
    r.latency_ms = start.elapsed().as_millis() as u64;
    r
}

/// The answer of a reasoned reply: the content of its last `\boxed{…}` (the form the Qwen
/// models were trained to end a solution with), else what follows its last `Answer:` (any
/// letter case), else its last line that holds a letter or a digit. The reasoning before it
/// is not the answer: scoring the whole text would count every number written on the way.
/// (Found by reading the baseline's answers: a reply ending in a display-math block scored
/// its closing `\]` line, so right answers were counted wrong.)
pub fn final_line(text: &str) -> &str {
    if let Some(boxed) = crate::agent::reason::last_boxed(text) {
        return boxed;
    }
    let lower = text.to_ascii_lowercase();
    if let Some(at) = lower.rfind("answer:") {
        let rest = text[at + "answer:".len()..].trim();
        if !rest.is_empty() {
            return rest.lines().next().unwrap_or(rest).trim();
        }
    }
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| l.chars().any(char::is_alphanumeric))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::final_line;

    #[test]
    fn the_answer_is_the_last_answer_line_not_the_reasoning() {
        let text = "First, 3 * 4 = 12.\nThen 12 + 5 = 17.\nAnswer: 17 apples";
        assert_eq!(final_line(text), "17 apples");
        assert_eq!(final_line("answer: 3\nwait.\nANSWER: 4\n"), "4");
        assert_eq!(final_line("So it is 9.\n\n"), "So it is 9.");
        assert_eq!(final_line("Answer:\n42"), "42");
        assert_eq!(final_line(""), "");
    }

    /// Regression: a reply ending in display math (`\[ \boxed{220} \]`) was scored by its
    /// last line, `\]`, so a right answer counted as wrong.
    #[test]
    fn a_boxed_answer_is_the_answer_and_a_closing_bracket_is_not() {
        let text = "So Finley gets:\n\\[\n\\frac{11}{15} \\times 300 = \\boxed{220}\n\\]\ntickets.";
        assert_eq!(final_line(text), "220");
        assert_eq!(
            final_line("x \\boxed{\\frac{1}{2}} y \\boxed{7 apples}"),
            "7 apples"
        );
        assert_eq!(final_line("It is 12.\n\\]\n"), "It is 12.");
        // Not closed (cut by the limit): the other rules apply.
        assert_eq!(final_line("Answer: 5\n\\boxed{5"), "5");
    }
}
