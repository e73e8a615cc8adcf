//! Tools the agent can call: the [`Tool`] trait, the [`ToolRegistry`] that runs them, and the
//! built-in tools ([`sql`], [`calculator`], [`search`], [`recall`]) plus tools users declare
//! in a TOML manifest ([`manifest`]) and the tools of Model Context Protocol servers ([`mcp`]).
//!
//! A tool has a name, a description written for the model, a JSON Schema of its arguments and
//! a `run` method. The registry is the one way tools are called — by the agent loop, by
//! `cairn tools call`, by tests and batch replays — and every call goes through the same three
//! steps: the arguments are validated against the tool's schema ([`schema`]), the tool runs
//! under a per-call timeout, and an observation longer than the limit is cut with a marker that
//! says how much was cut. Failures are [`ToolError`]s whose [`ErrorClass`] tells the loop what
//! to do: retry (`Transient`), show the model its mistake (`InvalidInput`), count a call that
//! ran out of time as a failure without retrying it (`Timeout`), or stop (`Fatal`).
//!
//! Every observation, error message and hint the registry returns, and every description it
//! lists, has its control characters made visible ([`escape_controls`]): a byte such as ESC
//! from a database cell or a program's output reaches neither the terminal of `cairn tools
//! call` nor the model as a control character, but as the four characters `\x1b`.

pub mod calculator;
pub mod manifest;
pub mod mcp;
pub mod recall;
pub mod schema;
pub mod search;
pub mod sql;
pub mod sql_pattern;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// What a tool returns to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// The text shown to the model (already cut to the registry's limit when it came from
    /// [`ToolRegistry::call`]).
    pub text: String,
    /// How many characters were cut from the end, by the tool at its own output limit (a
    /// manifest tool keeps at most [`manifest::MAX_OUTPUT_BYTES`] of its output) and by the
    /// registry at `max_chars`; 0 when nothing was cut.
    pub cut_chars: usize,
}

impl Observation {
    /// An observation holding `text`, nothing cut.
    pub fn new(text: impl Into<String>) -> Self {
        Observation {
            text: text.into(),
            cut_chars: 0,
        }
    }
}

/// How the agent loop should treat a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Worth retrying as is: a busy or locked database.
    Transient,
    /// The arguments are wrong (bad SQL, bad expression, unknown column): shown to the model
    /// with a hint so it can fix them.
    InvalidInput,
    /// The call ran out of time and was stopped (a manifest tool's `timeout_secs`, or the
    /// registry's own timeout). Not retried: the same call would most likely run out of time
    /// again; it counts as a failure of the tool, shown to the model.
    Timeout,
    /// Nothing the model can do about it (a missing database file): the task ends with this
    /// reason.
    Fatal,
}

impl ErrorClass {
    /// The class as written in traces and on the command line: `transient`, `invalid_input`,
    /// `timeout`, `fatal`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::InvalidInput => "invalid_input",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Fatal => "fatal",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call: its class, a message naming the bad value and what would be valid, and
/// an optional hint for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What the loop should do about it.
    pub class: ErrorClass,
    /// What went wrong, with the values that explain it.
    pub message: String,
    /// How to fix the input, when there is something useful to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Whether the registry refused the arguments before the tool ran (they do not match the
    /// tool's schema), as opposed to an error of the tool itself.
    #[serde(skip)]
    pub arguments_rejected: bool,
}

impl ToolError {
    /// A transient failure (retry as is).
    pub fn transient(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorClass::Transient,
            message: message.into(),
            hint: None,
            arguments_rejected: false,
        }
    }

    /// Bad arguments (show the model).
    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorClass::InvalidInput,
            message: message.into(),
            hint: None,
            arguments_rejected: false,
        }
    }

    /// A call that ran out of time (not retried).
    pub fn timeout(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorClass::Timeout,
            message: message.into(),
            hint: None,
            arguments_rejected: false,
        }
    }

    /// A failure that ends the task.
    pub fn fatal(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorClass::Fatal,
            message: message.into(),
            hint: None,
            arguments_rejected: false,
        }
    }

    /// The same error with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The text the model sees for this error: the class, the message, and the hint.
    pub fn to_observation_text(&self) -> String {
        match &self.hint {
            Some(h) => format!("error ({}): {}\nhint: {h}", self.class, self.message),
            None => format!("error ({}): {}", self.class, self.message),
        }
    }
}

/// A tool the agent can call. Implementations must be cheap to call repeatedly and safe to
/// share between threads: the registry runs each call on its own thread to enforce the timeout.
pub trait Tool: Send + Sync {
    /// The name the model writes in its action, e.g. `sql`.
    fn name(&self) -> &str;
    /// What the tool does and what its source holds, written for the model.
    fn description(&self) -> String;
    /// The JSON Schema of the arguments (an object schema).
    fn args_schema(&self) -> Value;
    /// Runs the tool on arguments that already passed validation against `args_schema`.
    fn run(&self, args: &Value) -> Result<Observation, ToolError>;
    /// Text for one task's message about what this tool's source holds that the description
    /// (the same for every task) had to leave out, chosen by the task's words; `earlier` is the
    /// session's previous turn (its answer, then its task), which a follow-up ("What is his
    /// email address?") refers to. `None` by default.
    fn context_for(&self, _task: &str, _earlier: Option<&str>) -> Option<String> {
        None
    }
    /// The schema a call's arguments are checked against, when it differs from
    /// [`Tool::args_schema`]: a tool whose argument schema carries a decoding grammar that its
    /// own errors explain better (the sql tool names the columns a query may use; its pattern
    /// would only say "does not match") checks calls against the schema without it.
    fn call_schema(&self) -> Option<Value> {
        None
    }
    /// A new task begins: a tool with per-task state resets it (an MCP server gets its one
    /// restart back). Nothing by default.
    fn new_task(&self) {}
}

/// Limits every call through a [`ToolRegistry`] obeys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryOptions {
    /// A call still running after this long fails as `Timeout`.
    pub timeout: Duration,
    /// Observations longer than this many characters are cut, with a marker.
    pub max_chars: usize,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            timeout: Duration::from_secs(30),
            max_chars: 2000,
        }
    }
}

/// A tool as listed by [`ToolRegistry::list`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// Its description for the model.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub args_schema: Value,
}

/// Where the built-in tools and the manifest tools come from (the CLI fills it from its
/// settings): the database, the index, the memory file with its decay, and the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSources {
    /// The sql tool's database (`--db`); none leaves the tool out.
    pub db: Option<std::path::PathBuf>,
    /// Decode the sql tool's queries under the pattern of the database's names
    /// ([`sql::SqlOptions::names_pattern`]).
    pub sql_names_pattern: bool,
    /// The search index; the search tool is there when the file exists.
    pub index: std::path::PathBuf,
    /// The memory file; `recall` is there when the file exists.
    pub memory: std::path::PathBuf,
    /// Per-hour decay of a fact's recall score.
    pub memory_decay: f64,
    /// The `--tools` manifest.
    pub tools: Option<std::path::PathBuf>,
    /// MCP servers from `--mcp` (the manifest's `[[mcp]]` entries are added to them).
    pub mcp: Vec<mcp::ServerSpec>,
}

/// The tools available to one agent, by name, and the one way to call them.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// The schema each tool's calls are checked against ([`Tool::call_schema`], else its
    /// argument schema), computed once at registration.
    schemas: BTreeMap<String, Value>,
    /// Tools that could not be set up, with the error a call to them returns.
    unavailable: BTreeMap<String, ToolError>,
    options: RegistryOptions,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("unavailable", &self.unavailable)
            .field("options", &self.options)
            .finish()
    }
}

/// Why a tool could not be added to a registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("a tool named `{0}` is already registered; tool names must be unique")]
    Duplicate(String),
    /// A name the action schema cannot carry.
    #[error("tool name `{0}` is not valid: use 1-64 letters, digits, `_`, `-` or `.`, starting with a letter")]
    BadName(String),
    /// The tool's argument schema is not one the registry can validate.
    #[error("the arguments schema of tool `{name}` is not valid: {source}")]
    BadSchema {
        /// The tool.
        name: String,
        /// What is wrong with the schema.
        source: schema::SchemaError,
    },
    /// The `--tools` manifest could not be loaded.
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    /// An MCP server could not be started.
    #[error(transparent)]
    Mcp(#[from] mcp::McpError),
}

impl ToolRegistry {
    /// An empty registry with the given limits.
    pub fn new(options: RegistryOptions) -> Self {
        ToolRegistry {
            options,
            ..Default::default()
        }
    }

    /// The registry the agent gets from `sources`: `calculator` always; `sql` when `--db` is
    /// set; `search` when the index file exists; `recall` when the memory file exists (over
    /// every session's facts: the agent loop re-registers it bound to its session); every tool
    /// of the `--tools` manifest, its timeout capped at the registry's (so the program is
    /// killed when the call ends); every tool of every MCP server (`--mcp`, then the
    /// manifest's `[[mcp]]`), each server started here, its call timeout capped the same way.
    /// A built-in that cannot be set up is left out and remembered with its reason (see
    /// [`ToolRegistry::unavailable`]), and so is an MCP tool `allow`/`deny` keeps out or whose
    /// schema cairn cannot use; a broken manifest or a server that does not start is an error
    /// (a manifest tool named like a built-in is one, whether or not the built-in is
    /// available).
    pub fn from_sources(
        config: &ToolSources,
        options: RegistryOptions,
    ) -> Result<Self, RegistryError> {
        let mut reg = ToolRegistry::new(options);
        reg.register(Arc::new(calculator::CalculatorTool))?;
        match &config.db {
            Some(db) => match sql::SqlTool::open(
                db,
                sql::SqlOptions {
                    names_pattern: config.sql_names_pattern,
                    ..Default::default()
                },
            ) {
                Ok(t) => reg.register(Arc::new(t))?,
                Err(e) => reg.mark_unavailable("sql", e),
            },
            None => reg.mark_unavailable(
                "sql",
                ToolError::invalid("the tool `sql` is not available: no database given")
                    .with_hint("pass --db FILE"),
            ),
        }
        if config.index.is_file() {
            reg.register(Arc::new(search::SearchTool::new(&config.index)))?;
        } else {
            reg.mark_unavailable(
                "search",
                ToolError::invalid(format!(
                    "the tool `search` is not available: there is no index at {}",
                    config.index.display()
                ))
                .with_hint("build one with `cairn index DIR...`"),
            );
        }
        if config.memory.is_file() {
            match crate::memory::MemoryStore::open(&config.memory) {
                Ok(store) => reg.register(Arc::new(recall::RecallTool::new(
                    store,
                    None,
                    config.memory_decay,
                    recall::DEFAULT_K,
                )))?,
                Err(e) => reg.mark_unavailable("recall", ToolError::fatal(e.to_string())),
            }
        } else {
            reg.mark_unavailable(
                "recall",
                ToolError::invalid(format!(
                    "the tool `recall` is not available: there is no memory file at {}",
                    config.memory.display()
                )),
            );
        }
        let mut servers = config.mcp.clone();
        if let Some(path) = &config.tools {
            let m = manifest::Manifest::load(path)?;
            servers.extend(m.mcp.iter().cloned());
            for t in m.into_tools() {
                reg.register(Arc::new(t.with_timeout_at_most(options.timeout)))?;
            }
        }
        let servers: Vec<_> = servers
            .into_iter()
            .map(|s| s.with_timeout_at_most(options.timeout))
            .collect();
        let (tools, left_out) = mcp::start_all(&servers)?;
        for t in tools {
            reg.register(Arc::new(t))?;
        }
        for (name, why) in left_out {
            reg.mark_unavailable(
                &name,
                ToolError::invalid(format!("the tool `{name}` is not available: {why}")),
            );
        }
        Ok(reg)
    }

    /// Adds a tool. Its name must be unique and its schema one [`schema::check_schema`] accepts.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.name().to_string();
        if !valid_tool_name(&name) {
            return Err(RegistryError::BadName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let args_schema = tool.args_schema();
        schema::check_schema(&args_schema).map_err(|source| RegistryError::BadSchema {
            name: name.clone(),
            source,
        })?;
        self.unavailable.remove(&name);
        let checked = tool.call_schema().unwrap_or(args_schema);
        self.schemas.insert(name.clone(), checked);
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Adds `tool`, replacing a tool of the same name (e.g. `recall` bound to the task's
    /// session); returns the tool it replaced.
    pub fn replace(&mut self, tool: Arc<dyn Tool>) -> Result<Option<Arc<dyn Tool>>, RegistryError> {
        let name = tool.name().to_string();
        let old = self.tools.remove(&name);
        let old_schema = self.schemas.remove(&name);
        if let Err(e) = self.register(tool) {
            if let (Some(o), Some(s)) = (old, old_schema) {
                self.tools.insert(name.clone(), o);
                self.schemas.insert(name, s);
            }
            return Err(e);
        }
        Ok(old)
    }

    /// Removes the tool called `name`, returning it.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.schemas.remove(name);
        self.tools.remove(name)
    }

    /// Records that a tool could not be set up: a call to it returns `error` (a missing
    /// database stays `Fatal`).
    pub fn mark_unavailable(&mut self, name: &str, error: ToolError) {
        if !self.tools.contains_key(name) {
            self.unavailable.insert(name.to_string(), error);
        }
    }

    /// The tools that could not be set up, with the reason.
    pub fn unavailable(&self) -> impl Iterator<Item = (&str, &str)> {
        self.unavailable
            .iter()
            .map(|(k, v)| (k.as_str(), v.message.as_str()))
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Every tool, sorted by name, with its description and schema.
    pub fn list(&self) -> Vec<ToolInfo> {
        self.tools
            .values()
            .map(|t| ToolInfo {
                name: t.name().to_string(),
                description: escape_controls(&t.description()).into_owned(),
                args_schema: t.args_schema(),
            })
            .collect()
    }

    /// Tells every tool a new task begins ([`Tool::new_task`]).
    pub fn new_task(&self) {
        self.tools.values().for_each(|t| t.new_task());
    }

    /// The limits calls obey.
    pub fn options(&self) -> RegistryOptions {
        self.options
    }

    /// Calls `name` with arguments given as JSON text, exactly as the agent does.
    pub fn call(&self, name: &str, args_json: &str) -> Result<Observation, ToolError> {
        let args: Value = serde_json::from_str(args_json).map_err(|e| {
            escape_error(
                ToolError::invalid(format!("the arguments are not valid JSON: {e}"))
                    .with_hint("pass one JSON object, e.g. {\"key\": \"value\"}"),
            )
        })?;
        self.call_value(name, &args)
    }

    /// Calls `name` with parsed arguments: validation, then the run under the timeout, then
    /// control characters made visible ([`escape_controls`]) in the observation or the error,
    /// then the cut to `max_chars`.
    pub fn call_value(&self, name: &str, args: &Value) -> Result<Observation, ToolError> {
        match self.call_unescaped(name, args) {
            Ok(mut obs) => {
                if let Cow::Owned(text) = escape_controls(&obs.text) {
                    obs.text = text;
                }
                Ok(truncate(obs, self.options.max_chars))
            }
            Err(e) => Err(escape_error(e)),
        }
    }

    fn call_unescaped(&self, name: &str, args: &Value) -> Result<Observation, ToolError> {
        let tool = self
            .tools
            .get(name)
            .ok_or_else(|| self.unknown_tool(name))?;
        let computed;
        let schema = match self.schemas.get(name) {
            Some(s) => s,
            None => {
                computed = tool.args_schema();
                &computed
            }
        };
        if let Err(errors) = schema::validate(schema, args) {
            let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            let mut e = ToolError::invalid(format!(
                "invalid arguments for `{name}`: {}",
                list.join("; ")
            ))
            .with_hint(format!(
                "the arguments must match this schema: {}",
                serde_json::to_string(schema).unwrap_or_default()
            ));
            e.arguments_rejected = true;
            return Err(e);
        }
        self.run_with_timeout(name, tool.clone(), args.clone())
    }

    fn run_with_timeout(
        &self,
        name: &str,
        tool: Arc<dyn Tool>,
        args: Value,
    ) -> Result<Observation, ToolError> {
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("tool-{name}"))
            .spawn(move || {
                let result = tool.run(&args);
                // Let go of the tool before answering: the caller may then drop the last
                // reference and exit, and a tool that cleans up when dropped (an MCP server
                // killing its process group) must do so on the caller's side, not be cut off
                // by the exit in this thread.
                drop(tool);
                let _ = tx.send(result);
            });
        if let Err(e) = spawned {
            return Err(ToolError::transient(format!(
                "cannot start a thread for `{name}`: {e}"
            )));
        }
        match rx.recv_timeout(self.options.timeout) {
            Ok(result) => result,
            // The thread is left to finish on its own: a tool cannot be stopped from outside,
            // so tools with their own limits (sql, manifest commands, whose timeout
            // `from_sources` caps at this one) enforce them inside.
            Err(mpsc::RecvTimeoutError::Timeout) => Err(ToolError::timeout(format!(
                "`{name}` did not finish within {:.1} s",
                self.options.timeout.as_secs_f64()
            ))
            .with_hint("ask for less at once, or use another tool")),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(ToolError::fatal(format!(
                "`{name}` stopped without a result (it panicked)"
            ))),
        }
    }

    fn unknown_tool(&self, name: &str) -> ToolError {
        if let Some(e) = self.unavailable.get(name) {
            return e.clone();
        }
        let names: Vec<&str> = self.tools.keys().map(|s| s.as_str()).collect();
        ToolError::invalid(format!(
            "no tool named `{name}` (tools: {})",
            names.join(", ")
        ))
    }
}

fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// Cuts `obs` to at most `max_chars` characters of text plus a marker saying how many were cut.
/// Characters the tool already cut (`obs.cut_chars`, e.g. a manifest tool's output beyond its
/// byte limit) count in the marker too, and get it even when the text left is short enough.
pub fn truncate(mut obs: Observation, max_chars: usize) -> Observation {
    let chars = obs.text.chars().count();
    if chars <= max_chars && obs.cut_chars == 0 {
        return obs;
    }
    let keep_bytes = obs
        .text
        .char_indices()
        .nth(max_chars)
        .map(|(i, _)| i)
        .unwrap_or(obs.text.len());
    obs.text.truncate(keep_bytes);
    obs.cut_chars += chars.saturating_sub(max_chars);
    let total = chars.min(max_chars) + obs.cut_chars;
    obs.text.push_str(&format!(
        "\n[… cut {} of {total} characters]",
        obs.cut_chars
    ));
    obs
}

/// Whether `text` holds `word` (any case) as a whole word or phrase: "oldest" is in "the
/// oldest member", not in "boldest".
pub fn holds_word(text: &str, word: &str) -> bool {
    let (text, word) = (text.to_lowercase(), word.to_lowercase());
    text.match_indices(&word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// `text` with every control character other than newline and tab made visible as `\xNN`
/// (two lowercase hex digits): C0 (U+0000 to U+001F), DEL (U+007F) and C1 (U+0080 to U+009F),
/// so `ESC [31m` becomes `\x1b[31m`. A carriage return before a newline is dropped (a CRLF
/// line end becomes a newline); a lone one is escaped. Text without such characters is
/// returned as is.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let is_control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if is_control(c) {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `e` with control characters made visible in its message and hint.
fn escape_error(mut e: ToolError) -> ToolError {
    if let Cow::Owned(m) = escape_controls(&e.message) {
        e.message = m;
    }
    if let Some(Cow::Owned(h)) = e.hint.as_deref().map(escape_controls) {
        e.hint = Some(h);
    }
    e
}

/// The JSON Schema of a Rust argument type, derived with schemars and stripped of the
/// annotations (`$schema`, `title`, the top-level `description`) that only cost the model
/// tokens.
pub fn schema_of<T: schemars::JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    strip_formats(&mut v);
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
        // The type's doc comment ("The arguments of `sql`.") says nothing the tool's own
        // description does not.
        m.remove("description");
    }
    v
}

/// Removes schemars' `format` annotations (`uint32`, ...): they are not JSON Schema formats,
/// and a constraint engine may refuse formats it does not know.
fn strip_formats(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("format").is_some_and(Value::is_string) && m.contains_key("type") {
                m.remove("format");
            }
            m.values_mut().for_each(strip_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

/// Reads the tool's (already validated) argument object into `T`.
pub fn parse_args<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T, ToolError> {
    T::deserialize(args).map_err(|e| ToolError::invalid(format!("invalid arguments: {e}")))
}
