//! Function-calling mode (`cairn call`): OpenAI-style function definitions in, calls that are
//! valid against their definitions out, without cairn's agent loop.
//!
//! A reply is made in three steps ([`FunctionCaller::call`]):
//!
//! 1. **Call or text**, the model's own decision: the share of the first token's probability
//!    that leans to a call, in any form the model starts one (the template's [`CallMarker`],
//!    `{`, a code fence, a tag), against text ([`call_share`]); where it leans to a call, the
//!    function it names when left free ([`Wanted`]) must be a defined one, or the defined
//!    names together at least as likely, else no function fits.
//! 2. **Decoding under a grammar** built from the definitions ([`call_grammar`]): a call in
//!    the template's trained form (`<tool_call>` … `</tool_call>` for Qwen2.5, JSON
//!    otherwise), `anyOf` one `{"name": const, "arguments": parameters}` per function, numbers
//!    bounded and formats a description names (`YYYY-MM-DD`) as patterns
//!    ([`crate::constrain::bounds`]); or text that can neither start like a call nor
//!    write one out inside it. So a call always names a defined function and its arguments
//!    always validate.
//! 3. **Arguments tidied** to what the question says ([`tidy`]): optional arguments the
//!    call left out but the question gives are filled in from a second decoding with them
//!    required (only when the question holds such a value: most calls are decoded once), then
//!    defaults and made-up values are left out and quoted strings copied.
//!
//! The prompt shows the functions in the model's own chat-template tool format when the
//! template takes `tools` (Qwen2.5's does), else as a compact listing in the system text.
//! [`FunctionCaller`] keeps one KV cache, so questions over the same functions reuse the
//! prompt prefix. [`score`] judges replies against expected calls.

pub mod functions;
pub mod score;
pub mod tidy;

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

pub use functions::{parse_functions, Function, FunctionError};

use crate::constrain::bounds::{
    bound_arrays, bound_numbers, patterns_from_descriptions, MAX_ARRAY_ITEMS,
};
use crate::constrain::{Constraint, ConstraintCompiler, ConstraintError, ConstraintSpec};
use crate::decode::generate::{GenerateError, StopReason};
use crate::decode::Decoder;
use crate::model::sampling::SamplingParams;
use crate::model::template::Message;
use crate::model::tokenizer::TokenKind;
use crate::model::LoadedModel;

/// The most calls in one parallel reply.
pub const MAX_PARALLEL_CALLS: usize = 16;

/// The most tokens of a reply when `--max-tokens` is not given. A call is bounded by its
/// grammar (number literals included) and ends long before this; a plain-text reply may be a
/// few paragraphs, and at 256 tokens the 1.5B preset's answers to questions no function fits
/// (a list of gift ideas, the steps to read an energy bill) were cut mid-sentence.
pub const DEFAULT_MAX_TOKENS: usize = 1024;

/// How a question is answered.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Allow several calls in one reply (a JSON array of calls).
    pub parallel: bool,
    /// Forbid the plain-reply branch: the model must call a function.
    pub require_call: bool,
    /// The most tokens of the reply.
    pub max_tokens: usize,
    /// Keep the arguments exactly as decoded, without the rules of [`tidy`] (defaults and
    /// made-up optional values left out, quoted strings copied exactly).
    pub raw_arguments: bool,
    /// Before a call is returned, ask the model apart whether the function does what the
    /// question asks ([`FunctionCaller::fit_probability`]); below one half the reply is text.
    /// `None`: for models of at least [`FIT_CHECK_MIN_PARAMETERS`] parameters.
    pub fit_check: Option<bool>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            parallel: false,
            require_call: false,
            max_tokens: DEFAULT_MAX_TOKENS,
            raw_arguments: false,
            fit_check: None,
        }
    }
}

/// One call the model made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// The function's name.
    pub name: String,
    /// Its arguments, valid against its parameter schema.
    pub arguments: Value,
}

/// The model's reply: calls, or a plain text when no function fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallOutput {
    /// The calls, in order; empty for a plain reply.
    pub calls: Vec<Call>,
    /// The plain reply; `None` when there are calls.
    pub text: Option<String>,
    /// The plain reply was cut at the token limit (only a plain reply is ever cut: a call
    /// cut short is an error).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A reply with what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct CallOutcome {
    /// The reply.
    #[serde(flatten)]
    pub output: CallOutput,
    /// The share of the first token's probability that leaned towards a call (1 with
    /// `require_call`); at 0.5 or more the reply is a call.
    pub call_probability: f64,
    /// The function the model named when left free to name one, where it leaned to a call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wanted: Option<Wanted>,
    /// The fit check of the first call's function, where one was made: the model's
    /// probability that the function does what is asked (below 0.5 the reply became text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit_probability: Option<f64>,
    /// What [`tidy`] changed in the arguments, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tidied: Vec<String>,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Of those, found in the KV cache.
    pub reused_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Wall time, ms.
    pub ms: f64,
}

/// Why a question could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A function's parameter schema cannot be compiled.
    #[error("function `{function}`: its parameters cannot be used for decoding: {message}")]
    Schema {
        /// The function.
        function: String,
        /// The constraint engine's message (it names the keyword).
        message: String,
    },
    /// The constraint engine failed.
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    /// The model runtime failed.
    #[error(transparent)]
    Generate(#[from] GenerateError),
    /// The reply hit the token limit before it was complete.
    #[error("the reply was cut off at {tokens} tokens before it was complete (it ends `{tail}`); raise --max-tokens")]
    Incomplete {
        /// Tokens generated.
        tokens: usize,
        /// The last characters of the reply.
        tail: String,
    },
    /// The question is empty.
    #[error("the question is empty; ask something the functions could answer")]
    EmptyQuestion,
}

fn call_branch(f: &Function) -> Value {
    let mut arguments = f.parameters.clone();
    bound_numbers(&mut arguments);
    bound_arrays(&mut arguments, MAX_ARRAY_ITEMS);
    patterns_from_descriptions(&mut arguments);
    json!({
        "type": "object",
        "properties": {"name": {"const": f.name}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": false
    })
}

/// How the model's chat template marks a tool call, as the call grammar writes it: the
/// template's own marker (Qwen2.5's `<tool_call>` … `</tool_call>`), one token each where the
/// vocabulary has it as a single special token. Then the choice between calling and writing
/// text is the model's trained decision (the probability of the marker token against text),
/// not a guess at whether a reply starts with `{`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallMarker {
    /// The text that opens one call (`<tool_call>`).
    pub open: String,
    /// The text that closes it (`</tool_call>`).
    pub close: String,
    /// Both are single special tokens of the vocabulary (written `<tool_call>` in the
    /// grammar, which matches the token, not the text).
    pub tokens: bool,
}

impl CallMarker {
    /// The marker of `lm`'s chat template, if it has one and shows tools.
    pub fn of(lm: &LoadedModel) -> Option<CallMarker> {
        if !lm.template.supports_tools() {
            return None;
        }
        let (open, close) = lm.template.tool_call_marker()?;
        let special = |t: &str| {
            lm.tokenizer.id_of(t).is_some_and(|id| {
                matches!(
                    lm.tokenizer.token_kind(id),
                    Some(TokenKind::Control | TokenKind::UserDefined)
                )
            })
        };
        Some(CallMarker {
            open: open.into(),
            close: close.into(),
            tokens: special(open) && special(close),
        })
    }

    fn lark(&self, text: &str) -> String {
        if self.tokens {
            text.to_string()
        } else {
            serde_json::to_string(text).unwrap_or_default()
        }
    }
}

/// The separators of Python's `json.dumps`, which chat templates' `tojson` writes and the
/// models saw in training: `{"name": "f", "arguments": {"a": 1, "b": 2}}`.
fn trained_json_format() -> Value {
    json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "})
}

/// The JSON Schema of a reply that calls: one call, or with `parallel` an array of 1 to
/// [`MAX_PARALLEL_CALLS`] calls.
pub fn call_schema(functions: &[Function], opts: &CallOptions) -> Value {
    let calls: Vec<Value> = functions.iter().map(call_branch).collect();
    let mut schema = if opts.parallel {
        json!({"type": "array", "items": {"anyOf": calls}, "minItems": 1, "maxItems": MAX_PARALLEL_CALLS})
    } else {
        json!({"anyOf": calls})
    };
    schema["x-guidance"] = trained_json_format();
    schema
}

/// The plain-reply branch: text that does not start like a call (`{`, `[`, a code fence, a
/// tag) and nowhere writes a tool tag (`<tools>`, `<tool_call>`) or an `"arguments"` key, so
/// the model can neither echo the definitions nor write a call out inside the text.
const TEXT_RULE: &str = r#"TEXT: /[^{\[`\s<](.|\n)*/ & ~/(.|\n)*(<\/?tool|"arguments")(.|\n)*/"#;

/// The grammar of a reply (llguidance's Lark). With the template's [`CallMarker`]: one call as
/// `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, the form the model was trained
/// to write. Without one, or with `parallel`: the call JSON of [`call_schema`] (several calls
/// as one array: in the marker form the 0.5B model did not stop adding calls after the
/// ones asked for, in an array it closes the list). Unless `require_call`, the alternative is plain text
/// ([`TEXT_RULE`]), what the model writes when it does not call, never an imitation of one.
pub fn call_grammar(
    functions: &[Function],
    opts: &CallOptions,
    marker: Option<&CallMarker>,
) -> String {
    let mut g = String::from(if opts.require_call {
        "start: calls\n"
    } else {
        "start: calls | reply\nreply: TEXT\n"
    });
    match marker.filter(|_| !opts.parallel) {
        Some(m) => {
            g.push_str(&format!(
                "calls: {} \"\\n\" call \"\\n\" {}\ncall: %json {}\n",
                m.lark(&m.open),
                m.lark(&m.close),
                call_schema(functions, opts)
            ));
        }
        None => {
            g.push_str(&format!("calls: %json {}\n", call_schema(functions, opts)));
        }
    }
    if !opts.require_call {
        g.push_str(TEXT_RULE);
        g.push('\n');
    }
    g
}

/// Reads a decoded reply: JSON call(s) (valid against [`call_schema`]), calls inside the
/// template's markers, or plain text.
pub fn read_reply(
    text: &str,
    marker: Option<&CallMarker>,
) -> Result<CallOutput, serde_json::Error> {
    let t = text.trim_start();
    let one = |c: &Value| Call {
        name: c["name"].as_str().unwrap_or_default().to_string(),
        arguments: c.get("arguments").cloned().unwrap_or_else(|| json!({})),
    };
    if let Some(m) = marker.filter(|m| t.starts_with(&m.open)) {
        let mut calls = Vec::new();
        for block in t.split(&m.open).skip(1) {
            let body = block.split(&m.close).next().unwrap_or_default();
            calls.push(one(&serde_json::from_str(body.trim())?));
        }
        return Ok(CallOutput {
            calls,
            text: None,
            truncated: false,
        });
    }
    if !(t.starts_with('{') || t.starts_with('[')) {
        return Ok(CallOutput {
            calls: Vec::new(),
            text: Some(text.trim().to_string()),
            truncated: false,
        });
    }
    let v: Value = serde_json::from_str(t)?;
    Ok(match &v {
        Value::Array(a) => CallOutput {
            calls: a.iter().map(one).collect(),
            text: None,
            truncated: false,
        },
        _ => CallOutput {
            calls: vec![one(&v)],
            text: None,
            truncated: false,
        },
    })
}

/// The system text of every prompt: when to call, and what goes into a call.
const SYSTEM_TEXT: &str = "You are a helpful assistant. Call a function only when one of them does what the user asks; otherwise answer briefly in plain text. In a call, use the values the user gives, written as the user writes them, and leave out optional arguments the user does not mention.";

/// The instructions on the reply format, for every prompt.
fn format_text(opts: &CallOptions) -> String {
    let mut s = String::from(
        "To call a function, reply with JSON only: {\"name\": <function-name>, \"arguments\": <args-json-object>}",
    );
    if opts.parallel {
        s.push_str(", or a JSON array of such objects to call several");
    }
    s.push('.');
    if !opts.require_call {
        s.push_str(" If no function fits the question, reply {\"text\": <your answer>} instead.");
    }
    s
}

/// The functions listed in the system text, for templates without tool support.
fn listing(functions: &[Function]) -> String {
    let mut s = String::from("You can call these functions:\n");
    for f in functions {
        s.push_str(&format!(
            "- {}: {} Parameters (JSON Schema): {}\n",
            f.name,
            f.description.trim(),
            f.parameters
        ));
    }
    s
}

/// The parameter and keyword that make `parameters` fail to compile: each parameter is
/// compiled alone, then without one keyword at a time.
fn locate_fault(compiler: &ConstraintCompiler, parameters: &Value) -> Option<(String, String)> {
    let compiles = |schema: &Value| {
        compiler
            .compile(&ConstraintSpec::JsonSchema(schema.clone()), "probe")
            .is_ok()
    };
    let props = parameters.get("properties")?.as_object()?;
    for (name, schema) in props {
        let wrap = |s: &Value| json!({"type": "object", "properties": {name.as_str(): s}});
        if compiles(&wrap(schema)) {
            continue;
        }
        let obj = schema.as_object()?;
        for key in obj.keys() {
            let mut without = obj.clone();
            without.remove(key);
            if compiles(&wrap(&Value::Object(without))) {
                return Some((name.clone(), key.clone()));
            }
        }
        return Some((name.clone(), "(several)".into()));
    }
    None
}

/// The function whose definition makes the grammar fail to compile, found by compiling each
/// alone, as an error that names it (and the parameter and keyword at fault when they can be
/// found); `None` when each compiles alone.
fn find_fault(compiler: &ConstraintCompiler, functions: &[Function]) -> Option<CallError> {
    for f in functions {
        let alone = ConstraintSpec::JsonSchema(call_branch(f));
        if let Err(e) = compiler.compile(&alone, &f.name) {
            let message = match e {
                ConstraintError::Schema { message, .. } => message,
                other => other.to_string(),
            };
            let place = locate_fault(compiler, &f.parameters)
                .map(|(p, k)| format!("parameter `{p}`, keyword `{k}`: "))
                .unwrap_or_default();
            return Some(CallError::Schema {
                function: f.name.clone(),
                message: format!("{place}{message}"),
            });
        }
    }
    None
}

/// How a reply's first token leans: towards a call, towards text, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lean {
    Call,
    Text,
    Neither,
}

/// Which way each token of the vocabulary leans as the first of a reply. A call, in any form
/// the models write one: the template's marker, `{`, `[`, a code fence, a tag (`<tools>` is
/// how Qwen2.5-Coder-1.5B begins echoing its definitions before a call). Neither: whitespace,
/// control tokens. Text: the rest.
fn first_token_leanings(lm: &LoadedModel, marker: Option<&CallMarker>) -> Vec<Lean> {
    let marker_id = marker.and_then(|m| lm.tokenizer.id_of(&m.open));
    (0..lm.model.config.vocab as u32)
        .map(|id| {
            if Some(id) == marker_id {
                return Lean::Call;
            }
            match lm.tokenizer.token_kind(id) {
                Some(TokenKind::Normal | TokenKind::Byte) => {}
                _ => return Lean::Neither,
            }
            let bytes = lm.tokenizer.token_bytes(id).unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            let head = text.trim_start();
            match head.chars().next() {
                None => Lean::Neither,
                Some('{' | '[' | '`' | '<') => Lean::Call,
                Some(_) => Lean::Text,
            }
        })
        .collect()
}

/// The share of the first token's probability that leans towards a call, of all that leans
/// either way: the model's own decision between calling and answering in text, summed over
/// every form of call it might start (greedy decoding would otherwise compare one call form's
/// best token against the best text token, and a model that splits its mass between a marker
/// and a code fence would lose to a single word of text).
fn call_share(logits: &[f32], leanings: &[Lean]) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (mut call, mut text) = (0f64, 0f64);
    for (l, lean) in logits.iter().zip(leanings) {
        let p = f64::from(l - max).exp();
        match lean {
            Lean::Call => call += p,
            Lean::Text => text += p,
            Lean::Neither => {}
        }
    }
    if call + text > 0.0 {
        call / (call + text)
    } else {
        0.0
    }
}

/// The grammar of a plain reply alone ([`TEXT_RULE`]), once the model has chosen not to call.
fn text_grammar() -> String {
    format!("start: reply\nreply: TEXT\n{TEXT_RULE}\n")
}

/// The most tokens of a function name the model is left to write freely.
const MAX_NAME_TOKENS: usize = 24;

/// The function a model wants to call: the name it writes when not held to the defined ones,
/// and whether a defined function is what it wants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wanted {
    /// The name written freely (greedy).
    pub name: String,
    /// The probability of that name.
    pub probability: f64,
    /// The probability of the defined names together (computed only when the free name is
    /// not one of them; else equal to `probability`).
    pub defined_probability: f64,
    /// A defined function is what the model wants: its free name is one, or the defined
    /// names together are at least as likely as the free one.
    pub fits: bool,
}

/// The probability of `token` under `logits`.
fn token_probability(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f64 = logits.iter().map(|l| f64::from(l - max).exp()).sum();
    logits
        .get(token as usize)
        .map_or(0.0, |l| f64::from(l - max).exp() / total)
}

/// The smallest model whose fit check is used unless asked otherwise: on the calls suite the
/// 1.5B preset's yes-or-no told fitting functions from unfitting ones well (a fitting one
/// rated higher 96% of the time), the 0.5B's barely (56%, near chance), so the check
/// turned its right calls into text.
pub const FIT_CHECK_MIN_PARAMETERS: u64 = 1_000_000_000;

/// What the fit check asks with: a decoder of its own and the first tokens of the answers
/// "yes" and "no" (each spelling's, once).
struct FitJudge {
    decoder: Decoder,
    yes: Vec<u32>,
    no: Vec<u32>,
}

impl FitJudge {
    fn new(decoder: &Decoder) -> Result<Self, CallError> {
        let tok = &decoder.model().tokenizer;
        let firsts = |words: [&str; 3]| -> Result<Vec<u32>, CallError> {
            let mut ids = Vec::new();
            for w in words {
                let t = tok.encode(w).map_err(|e| CallError::Generate(e.into()))?;
                if let Some(&first) = t.first() {
                    if !ids.contains(&first) {
                        ids.push(first);
                    }
                }
            }
            Ok(ids)
        };
        Ok(FitJudge {
            yes: firsts(["Yes", "yes", "YES"])?,
            no: firsts(["No", "no", "NO"])?,
            decoder: decoder.sibling(),
        })
    }
}

/// Answers questions over function definitions with one model and one KV cache.
pub struct FunctionCaller {
    decoder: Decoder,
    /// The fit check's decoder and answer tokens ([`FunctionCaller::fit_probability`]), made
    /// on first use: a KV cache of its own, so the functions' prompt stays cached for the
    /// next question.
    judge: Option<FitJudge>,
    marker: Option<CallMarker>,
    leanings: Vec<Lean>,
}

impl FunctionCaller {
    /// A caller on `lm`; builds the constraint engine's token trie once.
    pub fn new(lm: LoadedModel, sampling: SamplingParams) -> Result<Self, CallError> {
        let marker = CallMarker::of(&lm);
        let leanings = first_token_leanings(&lm, marker.as_ref());
        Ok(FunctionCaller {
            decoder: Decoder::new(lm, sampling)?,
            judge: None,
            marker,
            leanings,
        })
    }

    /// Turns prefix reuse between questions on or off (off: every prompt is prefilled whole).
    pub fn set_prefix_reuse(&mut self, reuse: bool) {
        self.decoder.set_prefix_reuse(reuse);
    }

    /// The loaded model.
    pub fn model(&self) -> &LoadedModel {
        self.decoder.model()
    }

    /// The tool-call marker of the model's chat template, which calls are written inside.
    pub fn marker(&self) -> Option<&CallMarker> {
        self.marker.as_ref()
    }

    /// Whether the model's chat template shows tools itself.
    pub fn template_takes_tools(&self) -> bool {
        self.decoder.model().template.supports_tools()
    }

    /// Compiles (once per schema) the constraint for `functions`; a definition that cannot be
    /// compiled is named.
    fn constraint(
        &mut self,
        functions: &[Function],
        opts: &CallOptions,
    ) -> Result<Constraint, CallError> {
        let grammar = call_grammar(functions, opts, self.marker.as_ref());
        self.compiled(grammar, functions)
    }

    /// The constraint of `grammar` (compiled once); when it fails, the function whose
    /// definition is at fault is named.
    fn compiled(
        &mut self,
        grammar: String,
        functions: &[Function],
    ) -> Result<Constraint, CallError> {
        self.decoder.constraint(&grammar, |compiler| {
            compiler
                .compile(
                    &ConstraintSpec::Lark(grammar.clone()),
                    "function definitions",
                )
                .map_err(|e| match find_fault(compiler, functions) {
                    Some(named) => named,
                    None => e.into(),
                })
        })
    }

    /// The prompt for `question`.
    pub fn prompt(
        &self,
        question: &str,
        functions: &[Function],
        opts: &CallOptions,
    ) -> Result<String, CallError> {
        let t = &self.decoder.model().template;
        let text = if t.supports_tools() {
            let tools: Vec<Value> = functions.iter().map(Function::to_openai).collect();
            // The template itself says how to call; only a parallel call needs a word more.
            let mut system = String::from(SYSTEM_TEXT);
            match (&self.marker, opts.parallel) {
                (_, false) => {}
                (Some(m), true) => system.push_str(&format!(
                    " To call several functions at once, write one {}…{} block per call.",
                    m.open, m.close
                )),
                (None, true) => system.push_str(
                    " To call several functions at once, reply with a JSON array of calls.",
                ),
            };
            let messages = [Message::system(system), Message::user(question.trim())];
            t.render_with_tools(&messages, Some(&tools), true)
        } else {
            let messages = [
                Message::system(format!(
                    "{SYSTEM_TEXT}\n{}{}",
                    listing(functions),
                    format_text(opts)
                )),
                Message::user(question.trim()),
            ];
            t.render(&messages, true)
        };
        text.map_err(|e| CallError::Generate(e.into()))
    }

    /// The text a call starts with, up to its name: the marker when the template has one,
    /// then `{"name":`.
    fn name_prefix(&self, prompt: &str) -> String {
        match &self.marker {
            Some(m) => format!("{prompt}{}\n{{\"name\":", m.open),
            None => format!("{prompt}{{\"name\":"),
        }
    }

    /// The tokens of `text`.
    fn encode(&self, text: &str) -> Result<Vec<u32>, CallError> {
        self.decoder
            .model()
            .tokenizer
            .encode(text)
            .map_err(|e| CallError::Generate(e.into()))
    }

    /// The probability that the model writes ` "NAME"` after `prefix` (whose tokens are
    /// `base`), token by token.
    fn name_probability(
        &mut self,
        prefix: &str,
        base: &[u32],
        name: &str,
    ) -> Result<f64, CallError> {
        let full = self.encode(&format!(
            "{prefix} {}",
            serde_json::to_string(name).unwrap_or_default()
        ))?;
        let common = full
            .iter()
            .zip(base)
            .take_while(|(a, b)| a == b)
            .count()
            .max(1);
        if full.len() > self.decoder.model().model.config.context {
            return Ok(0.0);
        }
        let mut p = 1.0;
        for j in common..full.len() {
            let (logits, _) = self.decoder.next_logits(&full[..j])?;
            p *= token_probability(&logits, full[j]);
        }
        Ok(p)
    }

    /// The function the model wants after `prompt`: its name written greedily with no
    /// grammar, then, when that is not a defined function, the defined names' probability
    /// against it. A model that would rather call a function nobody defined
    /// (`get_heating_energy` where only `set_thermostat` exists) has no function that fits.
    fn wanted_function(
        &mut self,
        prompt: &str,
        functions: &[Function],
    ) -> Result<Wanted, CallError> {
        let prefix = self.name_prefix(prompt);
        let base = self.encode(&prefix)?;
        let context = self.decoder.model().model.config.context;
        if base.len() + 2 * MAX_NAME_TOKENS > context {
            // No room to look: the call goes ahead as the first token chose.
            return Ok(Wanted {
                name: String::new(),
                probability: 0.0,
                defined_probability: 0.0,
                fits: true,
            });
        }
        let mut ids = base.clone();
        let mut free = Vec::new();
        let mut probability = 1.0;
        let mut name = None;
        for _ in 0..MAX_NAME_TOKENS {
            let (logits, _) = self.decoder.next_logits(&ids)?;
            let t = logits
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i as u32);
            probability *= token_probability(&logits, t);
            ids.push(t);
            free.push(t);
            let text = self
                .decoder
                .model()
                .tokenizer
                .decode(&free)
                .map_err(|e| CallError::Generate(e.into()))?;
            let t = text.trim_start();
            let Some(rest) = t.strip_prefix('"') else {
                // Not a name in quotes: the model does not name a function at all.
                name = Some(String::new());
                break;
            };
            if let Some(end) = rest.find('"') {
                name = Some(rest[..end].to_string());
                break;
            }
        }
        let name = name.unwrap_or_default();
        if functions.iter().any(|f| f.name == name) {
            return Ok(Wanted {
                name,
                probability,
                defined_probability: probability,
                fits: true,
            });
        }
        // The free name scored the same way as the defined ones, so the two compare.
        if !name.is_empty() {
            probability = self.name_probability(&prefix, &base, &name)?;
        }
        let mut defined = 0.0;
        for f in functions {
            defined += self.name_probability(&prefix, &base, &f.name)?;
        }
        Ok(Wanted {
            name,
            probability,
            defined_probability: defined,
            fits: defined >= probability,
        })
    }

    /// The model's own judgement, asked apart from the call, of whether calling `f` does what
    /// `question` asks: P(yes) / (P(yes) + P(no)) at the first token of its reply to a short
    /// yes-or-no question showing only that function, after two worked questions over another
    /// function (one it does, one only near it). A model primed by a list of functions
    /// to call one of them (the 1.5B preset called one for most questions no function fits)
    /// is asked once more without the pull of the listing. A question too long for the
    /// context cannot be asked this way: then the call stands (1.0).
    pub fn fit_probability(&mut self, question: &str, f: &Function) -> Result<f64, CallError> {
        let judge = match &mut self.judge {
            Some(j) => j,
            none => none.insert(FitJudge::new(&self.decoder)?),
        };
        let lm = judge.decoder.model().clone();
        let ask = |question: &str, name: &str, description: &str, params: &str| {
            Message::user(format!(
                "A user wrote: {question:?}\n\nThere is one function:\n{name}: {description}\n\
                 Parameters:\n{params}\nWould calling this function do what the user asks? \
                 Answer yes or no."
            ))
        };
        let params = crate::agent::prompt::describe_args(&f.parameters);
        // Two worked questions over one function, one it does and one only near it, so that
        // "related" is not taken for "does what is asked": alone, the 1.5B preset rated the
        // functions it should not call between 0.29 and 0.80.
        let stock = "- symbol (string, required): the ticker symbol, like AAPL\n";
        let stock_desc = "Returns the latest trading price of one stock.";
        let messages = [
            Message::system(
                "You are a careful assistant. Answer with yes or no: yes only when calling the \
                 function does what the user asks; no when it does something else, even \
                 something related, or when the user asks for no action.",
            ),
            ask(
                "How much revenue did Tesla make last year?",
                "get_stock_price",
                stock_desc,
                stock,
            ),
            Message::assistant("no"),
            ask(
                "What is Tesla trading at right now?",
                "get_stock_price",
                stock_desc,
                stock,
            ),
            Message::assistant("yes"),
            ask(question, &f.name, f.description.trim(), &params),
        ];
        let ids = lm
            .prompt_ids(&messages)
            .map_err(|e| CallError::Generate(e.into()))?;
        if ids.len() >= lm.model.config.context {
            return Ok(1.0);
        }
        let (logits, _) = judge.decoder.next_logits(&ids)?;
        let p =
            |tokens: &[u32]| -> f64 { tokens.iter().map(|&t| token_probability(&logits, t)).sum() };
        let (yes, no) = (p(&judge.yes), p(&judge.no));
        Ok(if yes + no > 0.0 {
            yes / (yes + no)
        } else {
            1.0
        })
    }

    /// The model's parameter count ([`crate::model::hparams::HParams::parameters`]).
    pub fn parameters(&self) -> u64 {
        self.decoder.model().model.config.parameters()
    }

    /// Whether `opts` has the fit check made: as asked, or by the model's size.
    pub fn fit_check(&self, opts: &CallOptions) -> bool {
        opts.fit_check
            .unwrap_or_else(|| self.parameters() >= FIT_CHECK_MIN_PARAMETERS)
    }

    /// Fills in the optional arguments `call` left out that the question gives
    /// ([`tidy::fill_candidates`]): the call is decoded again from the prompt `ids` with those
    /// parameters required, and the values the question holds are taken ([`tidy::fill_in`]).
    /// Returns what was added and the tokens the second decoding took (0 when there is
    /// nothing to fill, as for most calls).
    fn fill_left_out(
        &mut self,
        ids: &[u32],
        call: &mut Call,
        functions: &[Function],
        question: &str,
    ) -> Result<(Vec<String>, usize), CallError> {
        let Some(f) = functions.iter().find(|f| f.name == call.name) else {
            return Ok((Vec::new(), 0));
        };
        let candidates = tidy::fill_candidates(call, f, question);
        if candidates.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let mut forced = f.clone();
        let mut required: Vec<Value> = f
            .parameters
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        required.extend(candidates.iter().map(|k| Value::String(k.clone())));
        forced.parameters["required"] = Value::Array(required);
        let must_call = CallOptions {
            require_call: true,
            ..CallOptions::default()
        };
        let forced = [forced];
        let mut constraint = self.constraint(&forced, &must_call)?;
        let g = self
            .decoder
            .generate(ids, DEFAULT_MAX_TOKENS, Some(&mut constraint))?;
        let again = read_reply(&g.text, self.marker.as_ref())
            .ok()
            .and_then(|o| o.calls.into_iter().next());
        let notes = match again {
            Some(again) if !g.incomplete => tidy::fill_in(call, &again, f, question, &candidates),
            _ => Vec::new(),
        };
        Ok((
            notes
                .into_iter()
                .map(|n| format!("{}: {n}", call.name))
                .collect(),
            g.tokens.len(),
        ))
    }

    /// Answers one question: the calls (or text) the model chose among `functions`.
    pub fn call(
        &mut self,
        question: &str,
        functions: &[Function],
        opts: &CallOptions,
    ) -> Result<CallOutcome, CallError> {
        if question.trim().is_empty() {
            return Err(CallError::EmptyQuestion);
        }
        let start = Instant::now();
        let prompt = self.prompt(question, functions, opts)?;
        let ids = self.encode(&prompt)?;
        // The call grammar is compiled (once) whatever the reply: a definition that cannot be
        // used is an error before anything is decoded.
        let must_call = CallOptions {
            require_call: true,
            ..opts.clone()
        };
        let call_constraint = self.constraint(functions, &must_call)?;
        // Call or text: the model's own lean at the first token decides, then the reply is
        // decoded under the grammar of what it chose.
        let (call_probability, reused) = if opts.require_call {
            (1.0, None)
        } else {
            let (logits, reused) = self.decoder.next_logits(&ids)?;
            (call_share(&logits, &self.leanings), Some(reused))
        };
        // A call the model leans to, but to a function that is not defined: no function fits.
        let wanted = if call_probability >= 0.5 && !opts.require_call {
            Some(self.wanted_function(&prompt, functions)?)
        } else {
            None
        };
        let calls = call_probability >= 0.5 && wanted.as_ref().is_none_or(|w| w.fits);
        let mut constraint = if calls {
            call_constraint
        } else {
            self.compiled(text_grammar(), functions)?
        };
        let mut g = self
            .decoder
            .generate(&ids, opts.max_tokens, Some(&mut constraint))?;
        let mut fit_probability = None;
        if calls && self.fit_check(opts) && !opts.require_call && !g.incomplete {
            let first = read_reply(&g.text, self.marker.as_ref())
                .ok()
                .and_then(|o| o.calls.into_iter().next());
            if let Some(f) = first.and_then(|c| functions.iter().find(|f| f.name == c.name)) {
                let p = self.fit_probability(question, f)?;
                fit_probability = Some(p);
                if p < 0.5 {
                    let mut text = self.compiled(text_grammar(), functions)?;
                    g = self
                        .decoder
                        .generate(&ids, opts.max_tokens, Some(&mut text))?;
                }
            }
        }
        let head = g.text.trim_start();
        let is_call = matches!(head.chars().next(), Some('{' | '['))
            || self
                .marker
                .as_ref()
                .is_some_and(|m| head.starts_with(&m.open));
        if g.incomplete && is_call {
            let chars: Vec<char> = g.text.chars().collect();
            let tail: String = chars[chars.len().saturating_sub(80)..].iter().collect();
            return Err(CallError::Incomplete {
                tokens: g.tokens.len(),
                tail,
            });
        }
        let mut output = read_reply(&g.text, self.marker.as_ref()).map_err(|e| {
            CallError::Constraint(ConstraintError::Schema {
                origin: "the reply".into(),
                message: format!("the decoded call is not JSON ({e}): {}", g.text),
            })
        })?;
        output.truncated = !is_call && g.stop == StopReason::MaxTokens;
        let mut tidied = Vec::new();
        let mut generated_tokens = g.tokens.len();
        if !opts.raw_arguments && !opts.parallel && output.calls.len() == 1 {
            // The call stands without the second decoding if it fails; the note says so.
            match self.fill_left_out(&ids, &mut output.calls[0], functions, question) {
                Ok((notes, tokens)) => {
                    tidied.extend(notes);
                    generated_tokens += tokens;
                }
                Err(e) => tidied.push(format!(
                    "{}: optional arguments not filled in: {e}",
                    output.calls[0].name
                )),
            }
        }
        if !opts.raw_arguments {
            for c in &mut output.calls {
                if let Some(f) = functions.iter().find(|f| f.name == c.name) {
                    let notes = tidy::tidy(c, f, question);
                    tidied.extend(notes.into_iter().map(|n| format!("{}: {n}", c.name)));
                }
            }
        }
        Ok(CallOutcome {
            output,
            call_probability,
            wanted,
            fit_probability,
            tidied,
            prompt_tokens: ids.len(),
            reused_tokens: reused.unwrap_or(g.reused_tokens),
            generated_tokens,
            ms: start.elapsed().as_secs_f64() * 1000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker() -> CallMarker {
        CallMarker {
            open: "<tool_call>".into(),
            close: "</tool_call>".into(),
            tokens: true,
        }
    }

    #[test]
    fn calls_inside_the_template_marker_are_read_one_per_block() {
        let m = marker();
        let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
        let r = read_reply(text, Some(&m)).unwrap();
        assert_eq!(r.calls.len(), 2);
        assert_eq!(
            (r.calls[0].name.as_str(), &r.calls[0].arguments),
            ("a", &json!({"x": 1}))
        );
        assert_eq!(r.calls[1].name, "b");
        assert_eq!(r.text, None);
        let plain = read_reply("It is sunny.", Some(&m)).unwrap();
        assert_eq!(plain.text.as_deref(), Some("It is sunny."));
        assert!(read_reply("<tool_call>\n{oops\n</tool_call>", Some(&m)).is_err());
    }

    #[test]
    fn the_grammar_writes_calls_in_the_template_form_and_bars_call_syntax_from_text() {
        let fs = [Function {
            name: "f".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "number"}}}),
        }];
        let m = marker();
        let one = call_grammar(&fs, &CallOptions::default(), Some(&m));
        assert!(
            one.contains("calls: <tool_call> \"\\n\" call \"\\n\" </tool_call>"),
            "{one}"
        );
        assert!(one.contains("start: calls | reply"), "{one}");
        assert!(one.contains(TEXT_RULE), "{one}");
        // Numbers are bounded in the call's schema.
        assert!(one.contains("\"maximum\":999999999999999.0"), "{one}");
        let parallel = CallOptions {
            parallel: true,
            require_call: true,
            ..CallOptions::default()
        };
        let many = call_grammar(&fs, &parallel, Some(&m));
        assert!(many.starts_with("start: calls\n"), "{many}");
        assert!(many.contains("calls: %json {\"type\":\"array\""), "{many}");
        assert!(!many.contains("TEXT"), "{many}");
        let text_marker = CallMarker {
            tokens: false,
            ..marker()
        };
        let literal = call_grammar(&fs, &CallOptions::default(), Some(&text_marker));
        assert!(literal.contains("calls: \"<tool_call>\""), "{literal}");
    }

    #[test]
    fn the_call_share_sums_every_form_of_call_against_text() {
        let leanings = [Lean::Call, Lean::Call, Lean::Text, Lean::Neither];
        // Two call forms at 0.3 each outweigh one text token at 0.4.
        let l = |p: f64| p.ln() as f32;
        let logits = [l(0.3), l(0.3), l(0.4), l(0.9)];
        let share = call_share(&logits, &leanings);
        assert!((share - 0.6).abs() < 1e-6, "{share}");
    }
}
