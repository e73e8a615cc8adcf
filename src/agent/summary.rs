//! Old turns summarised, not only dropped: when a session's earlier turns no longer fit in
//! full in the prompt's budget for them, each is replaced by a short summary the model writes
//! under a JSON schema (what was asked, what the tools found, the answer), kept in the memory
//! file and shown in its place ([`crate::memory::MemoryStore::short_term`]).
//!
//! Why: a turn shown in full is its task and answer only; once it falls out of the budget it
//! was gone, and with it what its tools had found (the customer's id, the price looked up on
//! the way) that a later question may need. A summary is written once per turn, the first
//! time the turn would be dropped, in a context of its own (the agent's conversation stays
//! cached).

use serde_json::{json, Value};

use crate::memory::{Step, Turn, TurnSummary};
use crate::model::template::Message;

/// The most turns summarised before one task (the newest first). Normally one turn a task
/// falls out of the budget; a session written before summaries existed catches up this fast.
pub const MAX_NEW_SUMMARIES: usize = 2;

/// The history budget's share kept for summaries is one part in this many: the newest turns
/// in full take the rest.
pub const RESERVE_DIVISOR: usize = 3;

/// The most tokens of one summary.
pub const SUMMARY_MAX_TOKENS: usize = 200;

/// The most characters of one step's result shown to the summary's writer.
const STEP_CHARS: usize = 400;

/// A task or answer up to this many characters is kept as it is in its summary; a longer one
/// is written short by the model.
pub const KEPT_CHARS: usize = 100;

/// The schema a summary of `turn` is decoded under: what the tools found, always; the
/// question and the answer in short only where they are longer than [`KEPT_CHARS`] (shorter
/// ones are kept word for word: a model that rewrites them can only lose or invent).
pub fn schema(turn: &Turn) -> Value {
    let (long_task, long_answer) = long_parts(turn);
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    if long_task {
        properties.insert("asked".into(), json!({"type": "string", "maxLength": 100}));
        required.push("asked");
    }
    properties.insert("found".into(), json!({"type": "string", "maxLength": 200}));
    required.push("found");
    if long_answer {
        properties.insert("answer".into(), json!({"type": "string", "maxLength": 120}));
        required.push("answer");
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// Whether the task and the answer of `turn` are too long to be kept word for word.
fn long_parts(turn: &Turn) -> (bool, bool) {
    let answer = turn.end.as_ref().map_or("", |e| e.answer.as_str());
    (
        turn.task.trim().chars().count() > KEPT_CHARS,
        answer.trim().chars().count() > KEPT_CHARS,
    )
}

/// The prompt that asks for the summary of `turn`, whose steps were `steps`: its task, the
/// results of its tool calls (each cut to a few hundred characters, the reasoning's to its
/// end, where its answer is) and its answer. `None` for a turn without an answer.
pub fn messages(turn: &Turn, steps: &[Step]) -> Option<Vec<Message>> {
    let answer = &turn.end.as_ref()?.answer;
    let mut user = format!(
        "A finished task of this conversation.\nTask: {}\n",
        turn.task.trim()
    );
    let found = results(steps);
    if !found.is_empty() {
        user.push_str("What the tools found:\n");
        for f in &found {
            user.push_str(&format!("- {}\n", f.replace('\n', " ")));
        }
    }
    user.push_str(&format!("Answer: {}\n\n", answer.trim()));
    let (long_task, long_answer) = long_parts(turn);
    let mut parts = Vec::new();
    if long_task {
        parts.push("\"asked\": the question in a few words");
    }
    parts.push(
        "\"found\": the facts found on the way that a later question could need (names, ids, \
         numbers, dates), in one line, or \"\" when there are none",
    );
    if long_answer {
        parts.push("\"answer\": the answer in one line");
    }
    user.push_str(&format!(
        "Summarise it for later questions of the same conversation, as JSON: {}.",
        parts.join("; ")
    ));
    Some(vec![
        Message::system("You keep the memory of a conversation short and exact."),
        Message::user(user),
    ])
}

/// The results of the calls of `steps` that worked, as `tool {args}: result`, each cut to
/// [`STEP_CHARS`] (a reasoning to its end, where its answer is).
fn results(steps: &[Step]) -> Vec<String> {
    let mut out = Vec::new();
    for s in steps {
        let r = &s.record;
        // Results that worked ("ok"), and reasonings; not failed calls or send-backs.
        if r.action == "final_answer" || !matches!(r.outcome.as_str(), "ok" | "reason") {
            continue;
        }
        let obs = r.observation.trim();
        let obs = if r.action == super::reason::REASON {
            tail(obs, STEP_CHARS)
        } else {
            head(obs, STEP_CHARS)
        };
        out.push(format!("{} {}: {obs}", r.action, r.args_json));
    }
    out
}

/// The summary of `turn` from the model's decoded `text` ([`schema`]): the task and answer
/// kept where short, the model's parts on one line each. A part of the model's holding a
/// number found nowhere in the turn (its task, results, answer) is not used: the question or
/// answer is then kept cut, what was found left empty. `None` when `text` is not a summary
/// (cut by the token limit).
pub fn parse(text: &str, turn: &Turn, steps: &[Step]) -> Option<TurnSummary> {
    let v: Value = serde_json::from_str(text).ok()?;
    let one = |key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let answer = turn.end.as_ref()?.answer.trim();
    let task = turn.task.trim();
    let mut evidence: Vec<String> = vec![task.to_string(), answer.to_string()];
    evidence.extend(results(steps));
    let sources: Vec<&str> = evidence.iter().map(String::as_str).collect();
    let grounded = |t: &String| super::evidence::unsupported(t, &sources).is_empty();
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let found = one("found")?;
    Some(TurnSummary {
        asked: one("asked")
            .filter(|a| !a.is_empty() && grounded(a))
            .unwrap_or_else(|| head(&flat(task), KEPT_CHARS)),
        found: if grounded(&found) {
            found
        } else {
            String::new()
        },
        answer: one("answer")
            .filter(|a| !a.is_empty() && grounded(a))
            .unwrap_or_else(|| head(&flat(answer), KEPT_CHARS)),
    })
}

/// The first `max` characters of `s` (on a character boundary), with "…" when cut.
fn head(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The last `max` characters of `s`, with "…" when cut.
fn tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let (i, _) = s.char_indices().nth(n - max).unwrap_or((0, ' '));
    format!("…{}", &s[i..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{SessionId, StepId, StepRecord, TurnEnd, TurnId};

    fn turn(task: &str, answer: &str) -> Turn {
        Turn {
            id: TurnId(1),
            session: SessionId(1),
            task: task.into(),
            started_at: 0.0,
            finished_at: Some(1.0),
            end: Some(TurnEnd {
                answer: answer.into(),
                stop_reason: "final_answer".into(),
                latency_ms: 0,
                prompt_tokens: 0,
                generated_tokens: 0,
            }),
        }
    }

    fn step(action: &str, args: &str, observation: &str, outcome: &str) -> Step {
        Step {
            id: StepId(1),
            turn: TurnId(1),
            record: StepRecord {
                round: 1,
                thought: String::new(),
                action: action.into(),
                args_json: args.into(),
                observation: observation.into(),
                outcome: outcome.into(),
                error_class: None,
                latency_ms: 0,
                prompt_tokens: 0,
                generated_tokens: 0,
            },
            created_at: 0.0,
        }
    }

    #[test]
    fn the_prompt_holds_the_task_the_results_that_worked_and_the_answer() {
        let long = "x".repeat(1000);
        let steps = [
            step(
                "sql",
                r#"{"query":"SELECT id FROM customers"}"#,
                "id\n17",
                "ok",
            ),
            step(
                "sql",
                r#"{"query":"SELECT nope"}"#,
                "no such column",
                "error",
            ),
            step("search", r#"{"query":"returns"}"#, &long, "ok"),
            step("final_answer", r#"{"answer":"17"}"#, "", "ok"),
        ];
        let m = messages(&turn("Which id has Marek?", "Marek's id is 17."), &steps).unwrap();
        let user = &m[1].content;
        assert!(user.contains("Task: Which id has Marek?"), "{user}");
        assert!(
            user.contains(r#"- sql {"query":"SELECT id FROM customers"}: id 17"#),
            "{user}"
        );
        assert!(!user.contains("no such column"), "{user}");
        assert!(
            user.contains(&format!("{}…", "x".repeat(STEP_CHARS))),
            "{user}"
        );
        assert!(!user.contains(&"x".repeat(STEP_CHARS + 1)), "{user}");
        assert!(user.contains("Answer: Marek's id is 17."), "{user}");
        // A short task and answer are kept as they are: only what was found is asked for.
        assert!(!user.contains("\"asked\""), "{user}");
        let short = schema(&turn("Which id has Marek?", "Marek's id is 17."));
        assert_eq!(short["required"], json!(["found"]));
        let long = schema(&turn("Which id has Marek?", &"a long answer ".repeat(20)));
        assert_eq!(long["required"], json!(["found", "answer"]));
        let unfinished = Turn {
            end: None,
            ..turn("t", "a")
        };
        assert!(messages(&unfinished, &[]).is_none());
    }

    /// Regression: the 1.5B summarised "Who placed order number 5?", answered from the wrong
    /// document, as "Asked: What was the shipping cost for order number 5? … 4.90 euros". A
    /// short question and answer are now kept as they are, and a part holding a number the
    /// turn never saw is not used.
    #[test]
    fn a_summary_keeps_short_parts_and_drops_numbers_the_turn_never_saw() {
        let steps = [step("sql", "{}", "customer_id\n4", "ok")];
        let t = turn(
            "Who placed order number 5?",
            "Order 5 was placed by customer 4.",
        );
        let s = parse(r#"{"found":"order  5:\ncustomer 4"}"#, &t, &steps).unwrap();
        assert_eq!(s.asked, "Who placed order number 5?");
        assert_eq!(s.found, "order 5: customer 4");
        assert_eq!(s.answer, "Order 5 was placed by customer 4.");
        assert_eq!(
            s.line(),
            "Asked: Who placed order number 5? | Found: order 5: customer 4 | Answer: Order 5 was placed by customer 4."
        );
        let s = parse(r#"{"found":"shipping 4.90 euros"}"#, &t, &steps).unwrap();
        assert_eq!(s.found, "");
        assert_eq!(
            s.line(),
            "Asked: Who placed order number 5? | Answer: Order 5 was placed by customer 4."
        );
        let long = format!("Customer 4 placed it; {}", "more words ".repeat(20));
        let t = turn("Who placed order number 5?", &long);
        let s = parse(r#"{"found":"","answer":"customer 9"}"#, &t, &steps).unwrap();
        assert!(s.answer.starts_with("Customer 4 placed it;") && s.answer.ends_with('…'));
        let s = parse(r#"{"found":"","answer":"customer 4"}"#, &t, &steps).unwrap();
        assert_eq!(s.answer, "customer 4");
        assert!(parse(r#"{"found":"y","#, &t, &steps).is_none());
    }
}
