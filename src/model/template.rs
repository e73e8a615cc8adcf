//! The chat template: turning a conversation into the exact prompt text the model was trained on.
//!
//! [`ChatTemplate::from_gguf`] uses the GGUF's own `tokenizer.chat_template` (a Jinja template
//! written for Hugging Face transformers) and renders it with minijinja, set up the way
//! transformers sets up Jinja: `trim_blocks` and `lstrip_blocks` on, Python string methods
//! (`.strip()`, `.startswith()`, …) through `minijinja_contrib::pycompat`, a `raise_exception`
//! function, and a `tojson` filter that writes JSON the way Python's `json.dumps` does. The
//! template sees `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and `tools`
//! (none for the agent, which describes its tools in the system prompt; the function
//! definitions in `cairn call`).
//!
//! A file without a template gets a named fallback for its family ([`TemplateSource::Fallback`]):
//! ChatML when the vocabulary has `<|im_start|>`, Llama 3 headers when it has
//! `<|start_header_id|>`.
//!
//! ```
//! use cairn::model::template::{ChatTemplate, Message};
//! let chat = ChatTemplate::chatml();
//! let prompt = chat.render(&[Message::user("hi")], true).unwrap();
//! assert_eq!(prompt, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
//! ```

use candle_core::quantized::gguf_file::{Content, Value as GgufValue};
use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};

use super::tokenizer::Tokenizer;

const TEMPLATE_NAME: &str = "chat_template";

/// ChatML, the format of Qwen2.5 and SmolLM2.
const CHATML: &str = "{%- for message in messages %}\
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\
{%- endfor %}\
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// Llama 3 headers; tool results use Llama 3.1's `ipython` role.
const LLAMA3: &str = "{{- bos_token or '' }}\
{%- for message in messages %}\
{%- set role = 'ipython' if message.role == 'tool' else message.role %}\
{{- '<|start_header_id|>' + role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}\
{%- endfor %}\
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person (or the agent loop speaking for the task).
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, fed back to the model.
    Tool,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A message with the given role.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result.
    pub fn tool(content: impl Into<String>) -> Self {
        Self::new(Role::Tool, content)
    }
}

/// Why a chat template could not be loaded or rendered.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template text is not valid Jinja.
    #[error("the chat template does not parse{}: {reason}", at_line(*line))]
    Parse {
        /// The line of the template, when known.
        line: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// Rendering failed, including a `raise_exception(...)` inside the template.
    #[error("the chat template failed to render{}: {reason}", at_line(*line))]
    Render {
        /// The line of the template, when known.
        line: Option<usize>,
        /// What went wrong.
        reason: String,
    },
    /// `tokenizer.chat_template` is present but not a string.
    #[error("GGUF metadata key `tokenizer.chat_template` is not a string but {0}")]
    NotAString(String),
    /// The file has no template and its vocabulary matches no known family.
    #[error(
        "the GGUF has no `tokenizer.chat_template` and its vocabulary has neither <|im_start|> \
         (ChatML) nor <|start_header_id|> (Llama 3), so the chat format is unknown"
    )]
    NoTemplate,
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" at line {l}")).unwrap_or_default()
}

impl TemplateError {
    fn from_jinja(e: &Error, parsing: bool) -> Self {
        let reason = match e.detail() {
            Some(detail) => format!("{}: {detail}", e.kind()),
            None => e.kind().to_string(),
        };
        let line = e.line();
        if parsing {
            TemplateError::Parse { line, reason }
        } else {
            TemplateError::Render { line, reason }
        }
    }
}

/// Where a template came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateSource {
    /// The GGUF's `tokenizer.chat_template`.
    Gguf,
    /// A built-in template for a model family (`chatml`, `llama3`), used when the file has none.
    Fallback(&'static str),
    /// Text given to [`ChatTemplate::new`].
    Custom,
}

/// Tool-call markers of chat-template families, (open, close).
const TOOL_CALL_MARKERS: &[(&str, &str)] = &[("<tool_call>", "</tool_call>")];

/// A compiled chat template with the BOS/EOS texts it may refer to.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: TemplateSource,
    bos: Option<String>,
    eos: Option<String>,
}

impl ChatTemplate {
    /// The GGUF's own template, or the fallback for its family when it has none.
    pub fn from_gguf(content: &Content, tokenizer: &Tokenizer) -> Result<Self, TemplateError> {
        let (text, source) = match content.metadata.get("tokenizer.chat_template") {
            Some(GgufValue::String(text)) => (text.as_str(), TemplateSource::Gguf),
            Some(other) => {
                return Err(TemplateError::NotAString(format!(
                    "{:?}",
                    other.value_type()
                )))
            }
            None if tokenizer.id_of("<|start_header_id|>").is_some() => {
                (LLAMA3, TemplateSource::Fallback("llama3"))
            }
            None if tokenizer.id_of("<|im_start|>").is_some() => {
                (CHATML, TemplateSource::Fallback("chatml"))
            }
            None => return Err(TemplateError::NoTemplate),
        };
        Self::compile(text, source, tokenizer.bos_token(), tokenizer.eos_token())
    }

    /// A template from its Jinja text; `bos` and `eos` become `bos_token` and `eos_token`.
    pub fn new(
        source: &str,
        bos: Option<String>,
        eos: Option<String>,
    ) -> Result<Self, TemplateError> {
        Self::compile(source, TemplateSource::Custom, bos, eos)
    }

    /// The built-in ChatML template (`<|im_start|>role\n…<|im_end|>\n`).
    pub fn chatml() -> Self {
        Self::compile(
            CHATML,
            TemplateSource::Fallback("chatml"),
            None,
            Some("<|im_end|>".into()),
        )
        .expect("the built-in ChatML template parses (checked by the tests)")
    }

    fn compile(
        text: &str,
        source: TemplateSource,
        bos: Option<String>,
        eos: Option<String>,
    ) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        // As transformers renders chat templates.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, text.to_string())
            .map_err(|e| TemplateError::from_jinja(&e, true))?;
        Ok(ChatTemplate {
            env,
            source,
            bos,
            eos,
        })
    }

    /// Renders a conversation; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        self.render_with_tools(messages, None, add_generation_prompt)
    }

    /// Whether the template shows a `tools` list itself (Qwen2.5's does; ChatML and the
    /// Llama 3 fallback do not).
    pub fn supports_tools(&self) -> bool {
        self.env
            .get_template(TEMPLATE_NAME)
            .map(|t| t.source().contains("tools"))
            .unwrap_or(false)
    }

    /// The texts that open and close one tool call in the model's trained format, when the
    /// template writes calls that way: Qwen2.5 and Hermes-style templates put each call in
    /// `<tool_call>` … `</tool_call>`. `None` for templates without such a marker.
    pub fn tool_call_marker(&self) -> Option<(&'static str, &'static str)> {
        let source = self
            .env
            .get_template(TEMPLATE_NAME)
            .ok()?
            .source()
            .to_string();
        TOOL_CALL_MARKERS
            .iter()
            .find(|(open, close)| source.contains(open) && source.contains(close))
            .copied()
    }

    /// Renders a conversation with function definitions (OpenAI's tools format) passed to the
    /// template as `tools`, for templates that show them ([`ChatTemplate::supports_tools`]).
    pub fn render_with_tools(
        &self,
        messages: &[Message],
        tools: Option<&[serde_json::Value]>,
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TemplateError::from_jinja(&e, true))?;
        let tools = match tools {
            Some(t) => Value::from_serialize(t),
            None => Value::from(()),
        };
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos.as_deref().unwrap_or(""),
            eos_token => self.eos.as_deref().unwrap_or(""),
            tools => tools,
        };
        template
            .render(ctx)
            .map_err(|e| TemplateError::from_jinja(&e, false))
    }

    /// Where this template came from.
    pub fn source(&self) -> TemplateSource {
        self.source
    }

    /// Whether this is a built-in fallback rather than the model's own template.
    pub fn is_fallback(&self) -> bool {
        matches!(self.source, TemplateSource::Fallback(_))
    }
}

/// `raise_exception(message)`, which templates call to reject a conversation.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("raise_exception: {message}"),
    ))
}

/// `value | tojson(indent=N)` as transformers defines it: Python's `json.dumps` with
/// `ensure_ascii=False`, so `", "` and `": "` separators and no HTML escaping. Other keyword
/// arguments are accepted and ignored.
fn tojson(value: &Value, indent: Option<usize>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(n) => Some(n),
        None => kwargs.get::<Option<usize>>("indent")?,
    };
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = " ".repeat(n);
            let formatter = serde_json::ser::PrettyFormatter::with_indent(pad.as_bytes());
            serde::Serialize::serialize(
                value,
                &mut serde_json::Serializer::with_formatter(&mut out, formatter),
            )
        }
        None => serde::Serialize::serialize(
            value,
            &mut serde_json::Serializer::with_formatter(&mut out, PythonSeparators),
        ),
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let json = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(json))
}

/// JSON on one line with Python's default separators.
struct PythonSeparators;

impl serde_json::ser::Formatter for PythonSeparators {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}
