//! The agent's step schema: one JSON object per step,
//! `{"thought": string, "action": tool name, "args": that tool's arguments}`, as an `anyOf`
//! with one branch per allowed tool plus `final_answer {"answer": string}`. A tool left out
//! of the list cannot be called; with an empty list only `final_answer` remains, so the step
//! always parses and the loop always ends with an answer.
//!
//! `grammars/agent_step.schema.json` is this schema for the built-in tools
//! ([`builtin_step_schema`]), written out for readers and checked by a test.

use serde_json::{json, Value};

use crate::constrain::bounds::{
    bound_arrays, bound_numbers, bound_strings, close_objects, patterns_from_descriptions,
    MAX_ARRAY_ITEMS,
};

/// The most characters of `thought`: room for a short plan and the results carried forward,
/// but bounded. Measured on the 0.5B model: an unbounded thought tries to compute the answer
/// inside it and runs on until the token limit; at 200 characters (one sentence) the model
/// put a whole word problem into one calculator expression.
pub const THOUGHT_MAX_CHARS: u64 = 400;

/// The most characters of a string argument that sets no `maxLength` of its own. Without a
/// bound a small model that falls into repetition (`1 + 1 + 1 ...`, `10000000...`) runs to the
/// step's token limit and the step is lost; with one, the string closes, the call is complete
/// and valid, and the tool's error tells the model what was wrong. 384 characters hold any
/// realistic query or expression and stay under the agent's 512 tokens per step.
pub const ARG_MAX_CHARS: u64 = 384;

/// The most characters of a final answer: the same bound as arguments, for the same reason
/// (the tiny preset falls into `1000000...` answers). An answer that reaches it is reported.
pub const ANSWER_MAX_CHARS: u64 = ARG_MAX_CHARS;

/// The action named in a step's text, even a step cut off before it was complete.
pub fn partial_action(text: &str) -> Option<String> {
    let at = text.find("\"action\"")?;
    let rest = text[at + 8..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

/// The string argument `key` of a step's text as far as it goes, unescaped, even in a step
/// cut off inside it (`"args":{"query":"SELECT … 'O''Neill) AND`).
pub fn partial_arg(text: &str, key: &str) -> Option<String> {
    let args = text.find("\"args\"")?;
    let at = args + text[args..].find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        out.push(ch);
                    }
                }
                Some(other) => out.push(other),
                None => break,
            },
            _ => out.push(c),
        }
    }
    Some(out)
}

/// Pieces of an argument shorter than this are not counted as repeated (`1`, `x`).
const MIN_REPEATED_CHARS: usize = 6;

/// The pieces of `text` between the separators of conditions, lists and sums (` AND `,
/// ` OR `, `, `, ` + `, newlines), trimmed, each with its byte offset.
fn pieces(text: &str) -> Vec<(usize, &str)> {
    const SEPARATORS: [&str; 7] = [" AND ", " OR ", " and ", " or ", ", ", " + ", "\n"];
    let mut out = Vec::new();
    let mut from = 0;
    let mut i = 0;
    while i < text.len() {
        if let Some(sep) = SEPARATORS.iter().find(|s| text[i..].starts_with(**s)) {
            out.push((from, &text[from..i]));
            i += sep.len();
            from = i;
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out.push((from, &text[from..]));
    out.into_iter()
        .map(|(at, p)| (at + (p.len() - p.trim_start().len()), p.trim()))
        .filter(|(_, p)| p.len() >= MIN_REPEATED_CHARS)
        .collect()
}

/// The piece of `text` written most often, when one is written twice or more: a condition,
/// list item or term the model fell into repeating. The first such piece on a tie.
pub fn repeated_piece(text: &str) -> Option<(String, usize)> {
    let pieces = pieces(text);
    let mut best: Option<(&str, usize)> = None;
    for (i, (_, p)) in pieces.iter().enumerate() {
        if pieces[..i].iter().any(|(_, q)| q == p) {
            continue;
        }
        let n = pieces[i..].iter().filter(|(_, q)| q == p).count();
        if n >= 2 && best.is_none_or(|(_, m)| n > m) {
            best = Some((p, n));
        }
    }
    best.map(|(p, n)| (p.to_string(), n))
}

/// The most characters of a cut-off step kept for the prompts after it.
const CUT_OFF_KEPT_CHARS: usize = 600;

/// A cut-off step's text as the prompts after it show it: up to where it starts to repeat a
/// piece it already wrote (or [`CUT_OFF_KEPT_CHARS`]), then `…`. Shown whole, 512 tokens of
/// repetition were the model's own example of what to write next: it wrote them again word
/// for word in each of the three rounds after.
pub fn cut_off_text(text: &str) -> String {
    let mut end = text.len();
    let pieces = pieces(text);
    if let Some((at, _)) = pieces
        .iter()
        .enumerate()
        .find(|(i, (_, p))| pieces[..*i].iter().any(|(_, q)| q == p))
        .map(|(_, piece)| *piece)
    {
        end = at;
    }
    if end > CUT_OFF_KEPT_CHARS {
        end = CUT_OFF_KEPT_CHARS;
    }
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end == text.len() {
        return text.to_string();
    }
    format!("{} …", text[..end].trim_end())
}

/// The call a step's text makes, as it wrote it: `"action":"sql","args":{"query":"…"}`, the
/// two members side by side as the step schema orders them. The text the loop forbids after
/// the call failed ([`crate::constrain::Constraint::forbid`]): the same bytes decoded again
/// would be the same call. `None` for text that is not a step.
pub fn call_text(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Call<'a> {
        #[serde(borrow)]
        action: &'a serde_json::value::RawValue,
        #[serde(borrow)]
        args: &'a serde_json::value::RawValue,
    }
    let call: Call = serde_json::from_str(text).ok()?;
    Some(format!(
        "\"action\":{},\"args\":{}",
        call.action.get(),
        call.args.get()
    ))
}

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

/// The schema of one step: `anyOf` one object per tool, then `final_answer`. String
/// arguments without a bound get [`ARG_MAX_CHARS`], the answer [`ANSWER_MAX_CHARS`], numbers
/// the bounds of [`bound_numbers`], objects no keys beyond their `properties`
/// ([`close_objects`]), and strings whose description names a format (`YYYY-MM-DD`) its
/// pattern ([`patterns_from_descriptions`]).
pub fn step_schema(tools: &[StepTool]) -> Value {
    step_schema_of(tools, true, None)
}

/// [`step_schema`], with `final_answer` among the branches only when `with_final` (a round
/// that must call a tool has none), its answer matching `answer_pattern` when one is given
/// (the numbers of the evidence only, once made-up ones were sent back).
pub fn step_schema_of(tools: &[StepTool], with_final: bool, answer_pattern: Option<&str>) -> Value {
    let mut answer = json!({"type": "string", "maxLength": ANSWER_MAX_CHARS});
    if let Some(p) = answer_pattern {
        answer["pattern"] = json!(p);
    }
    let final_answer = StepTool::new(
        FINAL_ANSWER,
        json!({
            "type": "object",
            "properties": {"answer": answer},
            "required": ["answer"],
            "additionalProperties": false
        }),
    );
    let branches: Vec<Value> = tools
        .iter()
        .chain(with_final.then_some(&final_answer))
        .map(|tool| {
            let mut args = tool.args.clone();
            bound_strings(&mut args, ARG_MAX_CHARS);
            bound_numbers(&mut args);
            bound_arrays(&mut args, MAX_ARRAY_ITEMS);
            close_objects(&mut args);
            patterns_from_descriptions(&mut args);
            json!({
                "type": "object",
                "properties": {
                    "thought": {"type": "string", "maxLength": THOUGHT_MAX_CHARS},
                    "action": {"const": tool.name},
                    "args": args
                },
                "required": ["thought", "action", "args"],
                "additionalProperties": false
            })
        })
        .collect();
    json!({"anyOf": branches})
}

/// The step schema for every built-in tool (`calculator`, `recall`, `search`, `sql`, in the
/// registry's order) and `final_answer`, built exactly as the loop builds it each round. `cairn
/// bench` measures constrained decoding under it, and `grammars/agent_step.schema.json` is
/// this value (a test rewrites the file and fails when they differ).
pub fn builtin_step_schema() -> Value {
    use crate::tools::{calculator, recall, schema_of, search, sql, Tool};
    step_schema(&[
        StepTool::new("calculator", calculator::CalculatorTool.args_schema()),
        StepTool::new("recall", schema_of::<recall::RecallArgs>()),
        StepTool::new("search", schema_of::<search::SearchArgs>()),
        StepTool::new("sql", schema_of::<sql::SqlArgs>()),
    ])
}

/// Where [`builtin_step_schema`] is written for readers, relative to the repository root.
pub const STEP_SCHEMA_FILE: &str = "grammars/agent_step.schema.json";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constrain::bounds::pattern_is_bounded;

    #[test]
    fn a_cut_off_argument_is_read_as_far_as_it_goes() {
        let text = r#"{"thought":"Sum \"km\".","action":"sql","args":{"query":"SELECT \"km\" FROM t WHERE a = 'x\u00e9"#;
        assert_eq!(
            partial_arg(text, "query").as_deref(),
            Some("SELECT \"km\" FROM t WHERE a = 'x\u{e9}")
        );
        assert_eq!(partial_arg(text, "expression"), None);
    }

    #[test]
    fn a_piece_written_again_is_found_and_the_text_kept_up_to_it() {
        let q =
            "a = 1 AND month LIKE '05' AND month LIKE '06' AND month LIKE '05' AND month LIKE '05'";
        assert_eq!(repeated_piece(q), Some(("month LIKE '05'".to_string(), 3)));
        assert_eq!(
            repeated_piece("1 + 2 + 3 + 2"),
            None,
            "pieces under 6 characters"
        );
        assert_eq!(repeated_piece("a = 1 AND month LIKE '05'"), None);
        assert_eq!(
            cut_off_text(q),
            "a = 1 AND month LIKE '05' AND month LIKE '06' AND …"
        );
        let long = "word ".repeat(200);
        assert!(cut_off_text(&long).chars().count() <= CUT_OFF_KEPT_CHARS + 2);
        assert_eq!(cut_off_text("short"), "short");
    }

    #[test]
    fn unbounded_string_arguments_get_a_bound_and_bounded_ones_keep_theirs() {
        let s = step_schema(&[StepTool::new(
            "t",
            json!({"type": "object", "properties": {
                "q": {"type": "string"},
                "k": {"type": "string", "maxLength": 5},
                "e": {"type": "string", "enum": ["a"]},
                "l": {"type": "array", "items": {"type": "string"}}}}),
        )]);
        let args = &s["anyOf"][0]["properties"]["args"]["properties"];
        assert_eq!(args["q"]["maxLength"], ARG_MAX_CHARS);
        assert_eq!(args["k"]["maxLength"], 5);
        assert!(pattern_is_bounded("^(?:a[b*+]|c{1,3}|\\*){0,9}$"));
        assert!(!pattern_is_bounded("^a+$"));
        assert!(!pattern_is_bounded("^(?:ab)*$"));
        assert!(!pattern_is_bounded("^a{2,}$"));
        assert!(args["e"].get("maxLength").is_none());
        assert_eq!(args["l"]["items"]["maxLength"], ARG_MAX_CHARS);
        assert_eq!(
            s["anyOf"][0]["properties"]["args"]["additionalProperties"], false,
            "the model cannot make up an argument"
        );
        let answer = &s["anyOf"][1]["properties"]["args"]["properties"]["answer"];
        assert_eq!(answer["maxLength"], ANSWER_MAX_CHARS);
    }

    /// Regression (issue 17): the file was a hand-made copy that drifted from the schema the
    /// agent uses (no `maxLength`, no `search.top_k`, no `recall`).
    #[test]
    fn the_schema_file_is_the_builtin_step_schema() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(STEP_SCHEMA_FILE);
        let want = serde_json::to_string_pretty(&builtin_step_schema()).unwrap() + "\n";
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            std::fs::write(&path, &want).unwrap();
            panic!("{STEP_SCHEMA_FILE} differed from builtin_step_schema() and was rewritten; commit it");
        }
    }

    #[test]
    fn the_call_of_a_step_is_its_action_and_args_as_written() {
        let t = r#"{"thought":"q \"action\"","action":"sql","args":{"query":"SELECT 'a\u0027'"}}"#;
        let call = call_text(t).unwrap();
        assert_eq!(
            call,
            r#""action":"sql","args":{"query":"SELECT 'a\u0027'"}"#
        );
        assert!(t.contains(&call), "the model's own bytes");
        assert_eq!(call_text("not a step"), None);
    }

    #[test]
    fn the_action_of_a_cut_off_step_is_read() {
        let t = r#"{"thought":"x","action": "final_answer","args":{"answer":"1000"#;
        assert_eq!(partial_action(t).as_deref(), Some("final_answer"));
        assert_eq!(partial_action(r#"{"thought":"x","act"#), None);
    }
}
