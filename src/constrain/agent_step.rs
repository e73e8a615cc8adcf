//! The agent's step schema (design.md, "Constrained decoding"): one JSON object per step,
//! `{"thought": string, "action": tool name, "args": that tool's arguments}`, as an `anyOf`
//! with one branch per allowed tool plus `final_answer {"answer": string}`. A tool left out
//! of the list cannot be called; with an empty list only `final_answer` remains, so the step
//! always parses and the loop always ends with an answer.
//!
//! `grammars/agent_step.schema.json` is this schema for the built-in tools (`sql`,
//! `calculator`, `search`): [`BUILTIN_STEP_SCHEMA`].

use serde_json::{json, Value};

/// The most characters of `thought`. Measured on the 0.5B model: an unbounded thought tries to
/// compute the answer inside it and runs on until the token limit (design.md, "Prompt").
pub const THOUGHT_MAX_CHARS: u64 = 200;

/// The action that ends a task.
pub const FINAL_ANSWER: &str = "final_answer";

/// A tool as the step schema sees it: its name and the JSON Schema of its arguments.
#[derive(Debug, Clone)]
pub struct StepTool {
    /// The tool's name (`sql`).
    pub name: String,
    /// The JSON Schema of its arguments (an object schema).
    pub args: Value,
}

impl StepTool {
    /// A tool from its name and argument schema.
    pub fn new(name: impl Into<String>, args: Value) -> Self {
        StepTool {
            name: name.into(),
            args,
        }
    }
}

/// The schema of one step: `anyOf` one object per tool, then `final_answer`.
pub fn step_schema(tools: &[StepTool]) -> Value {
    let final_answer = StepTool::new(
        FINAL_ANSWER,
        json!({
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": false
        }),
    );
    let branches: Vec<Value> = tools
        .iter()
        .chain(std::iter::once(&final_answer))
        .map(|tool| {
            json!({
                "type": "object",
                "properties": {
                    "thought": {"type": "string", "maxLength": THOUGHT_MAX_CHARS},
                    "action": {"const": tool.name},
                    "args": tool.args
                },
                "required": ["thought", "action", "args"],
                "additionalProperties": false
            })
        })
        .collect();
    json!({"anyOf": branches})
}

/// `grammars/agent_step.schema.json`: the step schema for `sql {query}`,
/// `calculator {expression}`, `search {query}` and `final_answer {answer}`, as text. Used by
/// `cairn bench` and the tests, so the documented file is the one measured.
pub const BUILTIN_STEP_SCHEMA: &str = include_str!("../../grammars/agent_step.schema.json");
