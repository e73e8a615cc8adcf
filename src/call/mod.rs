//! Function-calling mode (`cairn call`): OpenAI-style function definitions in, calls that are
//! valid against their definitions out, without cairn's agent loop.
//!
//! The model's reply is decoded under a grammar built from the definitions ([`call_grammar`]):
//! a JSON call, `anyOf` one `{"name": const, "arguments": parameters}` object per function (an
//! array of them with `parallel`), or, unless a call is required, plain text that does not
//! start like JSON or a code fence. So a call always names a defined function and its arguments always validate.
//! The prompt shows the functions in the model's own chat-template tool format when the
//! template takes `tools` (Qwen2.5's does), else as a compact listing in the system text.
//! [`FunctionCaller`] keeps one KV cache, so questions over the same functions reuse the
//! prompt prefix.

pub mod functions;

use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

pub use functions::{parse_functions, Function, FunctionError};

use crate::constrain::{Constraint, ConstraintCompiler, ConstraintError, ConstraintSpec};
use crate::decode::generate::{GenerateError, StopReason};
use crate::decode::Decoder;
use crate::model::sampling::SamplingParams;
use crate::model::template::Message;
use crate::model::LoadedModel;

/// The most calls in one parallel reply.
pub const MAX_PARALLEL_CALLS: usize = 16;

/// How a question is answered.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Allow several calls in one reply (a JSON array of calls).
    pub parallel: bool,
    /// Forbid the plain-reply branch: the model must call a function.
    pub require_call: bool,
    /// The most tokens of the reply.
    pub max_tokens: usize,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            parallel: false,
            require_call: false,
            max_tokens: 256,
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
    json!({
        "type": "object",
        "properties": {"name": {"const": f.name}, "arguments": f.parameters},
        "required": ["name", "arguments"],
        "additionalProperties": false
    })
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
    schema["x-guidance"] = json!({"whitespace_flexible": false});
    schema
}

/// The grammar of a reply (llguidance's Lark): the call JSON of [`call_schema`], or, unless
/// `require_call`, plain text that does not start with `{` or `[`. A plain reply is then what
/// the model writes when it does not call, not a JSON imitation of one.
pub fn call_grammar(functions: &[Function], opts: &CallOptions) -> String {
    let schema = call_schema(functions, opts);
    if opts.require_call {
        format!("start: call\ncall: %json {schema}\n")
    } else {
        format!(
            "start: call | reply\ncall: %json {schema}\nreply: TEXT\nTEXT: /[^{{\\[`\\s](.|\\n)*/\n"
        )
    }
}

/// Reads a decoded reply: JSON call(s) (valid against [`call_schema`]), or plain text.
pub fn read_reply(text: &str) -> Result<CallOutput, serde_json::Error> {
    let t = text.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return Ok(CallOutput {
            calls: Vec::new(),
            text: Some(text.trim().to_string()),
            truncated: false,
        });
    }
    let v: Value = serde_json::from_str(t)?;
    let one = |c: &Value| Call {
        name: c["name"].as_str().unwrap_or_default().to_string(),
        arguments: c.get("arguments").cloned().unwrap_or_else(|| json!({})),
    };
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

/// Answers questions over function definitions with one model and one KV cache.
pub struct FunctionCaller {
    decoder: Decoder,
}

impl FunctionCaller {
    /// A caller on `lm`; builds the constraint engine's token trie once.
    pub fn new(lm: LoadedModel, sampling: SamplingParams) -> Result<Self, CallError> {
        Ok(FunctionCaller {
            decoder: Decoder::new(lm, sampling)?,
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
        let grammar = call_grammar(functions, opts);
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
            let system = if opts.parallel {
                "You are a helpful assistant. To call several functions at once, reply with a JSON array of calls."
            } else {
                "You are a helpful assistant."
            };
            let messages = [Message::system(system), Message::user(question.trim())];
            t.render_with_tools(&messages, Some(&tools), true)
        } else {
            let messages = [
                Message::system(format!("{}{}", listing(functions), format_text(opts))),
                Message::user(question.trim()),
            ];
            t.render(&messages, true)
        };
        text.map_err(|e| CallError::Generate(e.into()))
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
        let mut constraint = self.constraint(functions, opts)?;
        let prompt = self.prompt(question, functions, opts)?;
        let ids = self
            .decoder
            .model()
            .tokenizer
            .encode(&prompt)
            .map_err(|e| CallError::Generate(e.into()))?;
        let g = self
            .decoder
            .generate(&ids, opts.max_tokens, Some(&mut constraint))?;
        let is_call = matches!(g.text.trim_start().chars().next(), Some('{' | '['));
        if g.incomplete && is_call {
            let chars: Vec<char> = g.text.chars().collect();
            let tail: String = chars[chars.len().saturating_sub(80)..].iter().collect();
            return Err(CallError::Incomplete {
                tokens: g.tokens.len(),
                tail,
            });
        }
        let mut output = read_reply(&g.text).map_err(|e| {
            CallError::Constraint(ConstraintError::Schema {
                origin: "the reply".into(),
                message: format!("the decoded call is not JSON ({e}): {}", g.text),
            })
        })?;
        output.truncated = !is_call && g.stop == StopReason::MaxTokens;
        Ok(CallOutcome {
            output,
            prompt_tokens: ids.len(),
            reused_tokens: g.reused_tokens,
            generated_tokens: g.tokens.len(),
            ms: start.elapsed().as_secs_f64() * 1000.0,
        })
    }
}
