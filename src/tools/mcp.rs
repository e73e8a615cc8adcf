//! Model Context Protocol servers as tools: each server a program cairn starts and talks to
//! over stdio with the official Rust SDK (`rmcp`), each of its tools a [`Tool`] named
//! `SERVER.TOOL` whose JSON Schema goes into the step grammar like any other tool's.
//!
//! A server comes from `--mcp 'COMMAND ARGS...'` ([`ServerSpec::from_command_line`], the
//! name taken from the command or given as `NAME=COMMAND ...`) or from an `[[mcp]]` entry of
//! the tools manifest (`name`, `command`, `args`, `env`, `cwd`, `timeout_secs`, `allow`,
//! `deny`, `names`: the shape of other MCP clients' settings, so an entry can be copied over).
//!
//! What a server gets and what it can do:
//! - **environment**: only `PATH`, `HOME` and the variables its entry names, never cairn's own;
//! - **process**: its own process group, killed when cairn closes the server (so what `npx`
//!   starts goes too);
//! - **time**: each call fails as `Timeout` after `timeout_secs` (the request is dropped, the
//!   server keeps running); the handshake and tool list get [`START_TIMEOUT`];
//! - **output**: a message over [`MAX_MESSAGE_BYTES`] is read and dropped, never held, and the
//!   call fails saying so; a result is kept up to [`MAX_OUTPUT_BYTES`] and cut with a count;
//!   stderr is drained, only its last [`STDERR_TAIL_BYTES`] kept for error messages;
//! - **errors**: a result with `isError` is `InvalidInput` (shown to the model, as the protocol
//!   means it); a JSON-RPC error is `Transient` when it is an internal error (-32603, retried
//!   with backoff), `InvalidInput` otherwise; a server that exits during a call is restarted
//!   for the next call once per task ([`Tool::new_task`]); exiting again is `Fatal`, with the
//!   exit status and the tail of its stderr.
//!
//! Text and structured content are both shown (structured content once, when the text does
//! not already hold the same JSON); images, audio and binary resources are named with their
//! type and size, never dumped.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::watch;

use super::schema::check_schema;
use super::{Observation, Tool, ToolError};

/// How long a call may run when the server's entry gives no `timeout_secs`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long starting a server may take: the process, the handshake and the list of tools.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest message read from a server; a longer one is read and dropped as it comes.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How many bytes of a call's result are kept for the observation (the registry then cuts
/// what the model sees, 2,000 characters by default).
pub const MAX_OUTPUT_BYTES: usize = super::manifest::MAX_OUTPUT_BYTES;

/// How much of a server's stderr is kept, the end of it, for error messages.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// The variables of cairn's environment a server gets, besides those its entry names.
pub const PASSED_VARIABLES: [&str; 2] = ["PATH", "HOME"];

/// Programs that start the server named by their first argument (`npx -y
/// @modelcontextprotocol/server-filesystem`): the server's default name comes from that
/// argument, not from the program.
const LAUNCHERS: &[&str] = &[
    "npx", "node", "bunx", "bun", "deno", "uvx", "uv", "pipx", "python", "python3", "docker",
];

/// One MCP server to start: what [`ServerSpec::from_command_line`] or an `[[mcp]]` manifest
/// entry says.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    /// The server's name, the first part of its tools' names (`fs` in `fs.read_file`).
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The variables it gets, besides [`PASSED_VARIABLES`].
    pub env: BTreeMap<String, String>,
    /// Where it runs; `None`: cairn's current folder.
    pub cwd: Option<PathBuf>,
    /// The time limit of one call.
    pub timeout: Duration,
    /// Only these of its tools (server names), when given.
    pub allow: Option<Vec<String>>,
    /// None of these of its tools.
    pub deny: Vec<String>,
    /// Names for its tools other than `SERVER.TOOL`: server name → cairn name.
    pub names: BTreeMap<String, String>,
}

/// A server that could not be set up or started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{server}`: {message}")]
pub struct McpError {
    /// The server's name (or the command line, before it has one).
    pub server: String,
    /// What went wrong, with its stderr's tail when it said something.
    pub message: String,
}

impl ServerSpec {
    /// A server from `--mcp`: `COMMAND ARGS...` split as a shell would (quotes, backslashes),
    /// optionally `NAME=COMMAND ARGS...`. Without a name, the name is the program's (or, for a
    /// launcher such as `npx` or `python3`, its first argument's) base name without
    /// `@scope/`, `server-`, `mcp-server-`, `-server`, `-mcp` or an extension:
    /// `npx -y @modelcontextprotocol/server-filesystem /tmp` is `filesystem`.
    pub fn from_command_line(line: &str) -> Result<ServerSpec, McpError> {
        let bad = |message: String| McpError {
            server: line.to_string(),
            message,
        };
        let mut words = shell_words::split(line)
            .map_err(|e| bad(format!("the command cannot be split into words: {e}")))?;
        let mut name = None;
        if let Some(first) = words.first() {
            if let Some((n, rest)) = first.split_once('=') {
                if !n.is_empty() && !n.contains('/') {
                    name = Some(n.to_string());
                    if rest.is_empty() {
                        words.remove(0);
                    } else {
                        words[0] = rest.to_string();
                    }
                }
            }
        }
        if words.is_empty() {
            return Err(bad(
                "no command: pass the server's program and its arguments, e.g. --mcp 'npx -y @modelcontextprotocol/server-memory'".into(),
            ));
        }
        let name = match name {
            Some(n) => n,
            None => default_name(&words),
        };
        if !valid_server_name(&name) {
            return Err(bad(format!(
                "`{name}` cannot name a server: use 1-32 letters, digits, `_` or `-`, starting with a letter (give one as NAME=COMMAND ...)"
            )));
        }
        Ok(ServerSpec {
            name,
            command: words.remove(0),
            args: words,
            env: BTreeMap::new(),
            cwd: None,
            timeout: DEFAULT_TIMEOUT,
            allow: None,
            deny: Vec::new(),
            names: BTreeMap::new(),
        })
    }

    /// The command line, for messages.
    pub fn command_line(&self) -> String {
        shell_words::join(std::iter::once(&self.command).chain(&self.args))
    }

    /// The same server with its call time limit at most `limit`.
    pub fn with_timeout_at_most(mut self, limit: Duration) -> Self {
        self.timeout = self.timeout.min(limit);
        self
    }

    /// The cairn name of the server's tool `remote`.
    pub fn tool_name(&self, remote: &str) -> String {
        self.names
            .get(remote)
            .cloned()
            .unwrap_or_else(|| format!("{}.{remote}", self.name))
    }

    /// Whether `allow` and `deny` let the server's tool `remote` in.
    pub fn admits(&self, remote: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|n| n == remote))
            && !self.deny.iter().any(|n| n == remote)
    }

    fn error(&self, message: impl Into<String>) -> McpError {
        McpError {
            server: self.name.clone(),
            message: message.into(),
        }
    }
}

/// Whether `name` can name a server: 1-32 ASCII letters, digits, `_`, `-`, starting with a
/// letter.
pub fn valid_server_name(name: &str) -> bool {
    name.len() <= 32
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn default_name(words: &[String]) -> String {
    // The base name of a path or package, without version or extension; a generic file name
    // (`dist/index.js`, `server.py`) gives way to the folder that holds it.
    let base = |w: &str| {
        let parts: Vec<&str> = w.split('/').filter(|p| !p.is_empty()).collect();
        let stem = |p: &str| -> String {
            let p = p.split('@').next().unwrap_or(p);
            p.split('.').next().unwrap_or(p).to_string()
        };
        const GENERIC: &[&str] = &["index", "main", "server", "cli", "__main__", "mod", "app"];
        const FOLDERS: &[&str] = &["dist", "build", "src", "lib", "bin", "out"];
        let mut i = parts.len();
        while i > 0 {
            i -= 1;
            let s = stem(parts[i]);
            if !s.is_empty() && !GENERIC.contains(&s.as_str()) && !FOLDERS.contains(&s.as_str()) {
                return s;
            }
        }
        parts.last().map(|p| stem(p)).unwrap_or_default()
    };
    // Launcher options that take a value (`npx --prefix DIR PKG`, `uvx --from PKG NAME`).
    const VALUED: &[&str] = &[
        "--prefix",
        "-p",
        "--package",
        "--from",
        "--with",
        "--directory",
    ];
    let program = base(&words[0]);
    let mut name = if LAUNCHERS.contains(&program.as_str()) {
        let mut rest = words[1..].iter();
        let mut found = None;
        while let Some(w) = rest.next() {
            if VALUED.contains(&w.as_str()) {
                rest.next();
            } else if !w.starts_with('-') && !matches!(w.as_str(), "run" | "exec") {
                found = Some(base(w));
                break;
            }
        }
        found.filter(|n| !n.is_empty()).unwrap_or(program)
    } else {
        program
    };
    for prefix in ["mcp-server-", "server-", "mcp-"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if !rest.is_empty() {
                name = rest.to_string();
            }
        }
    }
    for suffix in ["-mcp-server", "-server", "-mcp", "_server", "_mcp"] {
        if let Some(rest) = name.strip_suffix(suffix) {
            if !rest.is_empty() {
                name = rest.to_string();
            }
        }
    }
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    if cleaned
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
    {
        cleaned
    } else {
        format!("mcp{}", cleaned.chars().take(29).collect::<String>())
    }
}

/// The one tokio runtime every MCP connection runs on (one worker thread: the servers' I/O
/// is light; the model's threads are elsewhere).
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-mcp")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime for MCP servers: {e}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A server's stdout as the transport reads it, counting the bytes of each line: a line
/// longer than [`MAX_MESSAGE_BYTES`] (which the transport drops) is signalled on `over`, so
/// the call waiting for it fails at once instead of at its timeout.
struct Watched<R> {
    inner: R,
    line: usize,
    over: watch::Sender<u64>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let new = &buf.filled()[before..];
            let mut overflowed = false;
            let mut line = self.line;
            for part in new.split_inclusive(|&b| b == b'\n') {
                let ends = part.last() == Some(&b'\n');
                let len = part.len() - usize::from(ends);
                if line <= MAX_MESSAGE_BYTES && line + len > MAX_MESSAGE_BYTES {
                    overflowed = true;
                }
                line = if ends { 0 } else { line + len };
            }
            self.line = line;
            if overflowed {
                self.over.send_modify(|n| *n += 1);
            }
        }
        r
    }
}

/// The last [`STDERR_TAIL_BYTES`] of a server's stderr, filled by a task that drains it.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        t.extend_from_slice(bytes);
        if t.len() > 2 * STDERR_TAIL_BYTES {
            let cut = t.len() - STDERR_TAIL_BYTES;
            t.drain(..cut);
        }
    }

    /// `"; its stderr ends with: ..."`, or nothing when it wrote nothing.
    fn describe(&self) -> String {
        let t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let start = t.len().saturating_sub(STDERR_TAIL_BYTES);
        let text = String::from_utf8_lossy(&t[start..]);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with:\n{text}")
        }
    }
}

/// A running server: the client side of the protocol, the process, and what it wrote.
struct Connection {
    service: RunningService<RoleClient, ()>,
    child: tokio::process::Child,
    /// The server's process group (its pid: it leads the group).
    pgid: Option<u32>,
    stderr: StderrTail,
    over: watch::Receiver<u64>,
}

impl Connection {
    /// Closes the protocol, gives the server a moment to exit, then kills its process group.
    async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.service.cancel()).await;
        let _ = tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await;
        // What the server started (node under npx) may outlive it: the whole group goes.
        kill_pgid(self.pgid);
        let _ = self.child.wait().await;
    }

    /// The exit status, once the process has ended.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// Kills the process group of a child not yet reaped.
fn kill_group(child: &tokio::process::Child) {
    kill_pgid(child.id());
}

#[cfg(unix)]
fn kill_pgid(pgid: Option<u32>) {
    if let Some(pgid) = pgid {
        // SAFETY: killpg only sends a signal; the group is the one the server leads.
        unsafe {
            libc::killpg(pgid as libc::pid_t, libc::SIGKILL);
        }
    }
}

#[cfg(not(unix))]
fn kill_pgid(_pgid: Option<u32>) {}

/// Tools left out of a server's: each one's cairn name and why.
pub type LeftOut = Vec<(String, String)>;

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// Its name on the server.
    pub name: String,
    /// Its description (title and description, as the server gives them).
    pub description: String,
    /// Its input schema, as the server gives it.
    pub schema: Value,
}

/// What a server said about itself at the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdent {
    /// Its implementation's name.
    pub name: String,
    /// Its implementation's version.
    pub version: String,
    /// The protocol version agreed.
    pub protocol: String,
}

async fn connect(
    spec: &ServerSpec,
) -> Result<(Connection, ServerIdent, Vec<RemoteTool>), McpError> {
    let mut cmd = tokio::process::Command::new(&spec.command);
    cmd.args(&spec.args).env_clear();
    for k in PASSED_VARIABLES {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.envs(&spec.env);
    if let Some(d) = &spec.cwd {
        cmd.current_dir(d);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            match &spec.cwd {
                Some(d) if !d.is_dir() => format!("its folder {} does not exist", d.display()),
                _ => format!(
                    "there is no program `{}` (on PATH or at that path); install it or give its full path",
                    spec.command
                ),
            }
        } else {
            e.to_string()
        };
        spec.error(format!("cannot start `{}`: {why}", spec.command_line()))
    })?;
    let (Some(stdout), Some(stdin), Some(mut stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(spec.error("the server's stdio could not be piped"));
    };
    let tail = StderrTail::default();
    let sink = tail.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            sink.push(&buf[..n]);
        }
    });
    let (over_tx, over) = watch::channel(0u64);
    let reader = Watched {
        inner: stdout,
        line: 0,
        over: over_tx,
    };
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(reader, stdin)
        .with_max_line_length(MAX_MESSAGE_BYTES);
    let started = async {
        let service = ().serve(transport).await.map_err(|e| e.to_string())?;
        let tools = service.list_all_tools().await.map_err(|e| e.to_string());
        Ok::<_, String>((service, tools))
    };
    let failed = |child: &mut tokio::process::Child, tail: &StderrTail, what: String| {
        kill_group(child);
        let status = child
            .try_wait()
            .ok()
            .flatten()
            .map(|s| format!(" (it exited: {s})"))
            .unwrap_or_default();
        spec.error(format!(
            "`{}` {what}{status}{}",
            spec.command_line(),
            tail.describe()
        ))
    };
    let (service, tools) = match tokio::time::timeout(START_TIMEOUT, started).await {
        Ok(Ok((service, Ok(tools)))) => (service, tools),
        Ok(Ok((_, Err(e)))) => {
            settle(&mut child).await;
            return Err(failed(
                &mut child,
                &tail,
                format!("did not list its tools: {e}"),
            ));
        }
        Ok(Err(e)) => {
            settle(&mut child).await;
            return Err(failed(
                &mut child,
                &tail,
                format!("did not complete the MCP handshake: {e}"),
            ));
        }
        Err(_) => {
            return Err(failed(
                &mut child,
                &tail,
                format!(
                    "did not complete the MCP handshake and list its tools within {} s",
                    START_TIMEOUT.as_secs()
                ),
            ))
        }
    };
    let ident = match service.peer_info() {
        Some(info) => ServerIdent {
            name: info
                .server_info
                .as_ref()
                .map(|i| i.name.clone())
                .unwrap_or_else(|| spec.name.clone()),
            version: info
                .server_info
                .as_ref()
                .map(|i| i.version.clone())
                .unwrap_or_default(),
            protocol: info.protocol_version.to_string(),
        },
        None => ServerIdent {
            name: spec.name.clone(),
            version: String::new(),
            protocol: String::new(),
        },
    };
    let tools = tools
        .into_iter()
        .map(|t| {
            let description = match (&t.title, &t.description) {
                (Some(title), Some(d)) if !d.starts_with(title.as_str()) => format!("{title}: {d}"),
                (_, Some(d)) => d.to_string(),
                (Some(title), None) => title.clone(),
                (None, None) => String::new(),
            };
            RemoteTool {
                name: t.name.to_string(),
                description,
                schema: Value::Object((*t.input_schema).clone()),
            }
        })
        .collect();
    Ok((
        Connection {
            service,
            pgid: child.id(),
            child,
            stderr: tail,
            over,
        },
        ident,
        tools,
    ))
}

/// Waits a moment for a failing server to exit and its stderr to be read, so the message
/// can say why.
async fn settle(child: &mut tokio::process::Child) {
    let _ = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A started MCP server, shared by the tools it serves.
pub struct McpServer {
    spec: ServerSpec,
    ident: ServerIdent,
    listed: Vec<RemoteTool>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    conn: Option<Connection>,
    /// Exits during calls in this task (see [`Tool::new_task`]).
    crashes: u32,
    /// Why the server is off for the rest of this task.
    dead: Option<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.spec.name)
            .field("command", &self.spec.command_line())
            .finish()
    }
}

impl McpServer {
    /// Starts the server: the process, the handshake, the list of its tools.
    pub fn start(spec: ServerSpec) -> Result<Arc<McpServer>, McpError> {
        let rt = runtime().map_err(|e| spec.error(e))?;
        let (conn, ident, listed) = rt.block_on(connect(&spec))?;
        Ok(Arc::new(McpServer {
            spec,
            ident,
            listed,
            state: Mutex::new(State {
                conn: Some(conn),
                ..Default::default()
            }),
        }))
    }

    /// What it is.
    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// What it said about itself.
    pub fn ident(&self) -> &ServerIdent {
        &self.ident
    }

    /// Its tools as cairn tools: those `allow` and `deny` let in and whose schema cairn can
    /// validate and decode, and, for the others, the cairn name and why each was left out.
    pub fn tools(self: &Arc<Self>) -> (Vec<McpTool>, LeftOut) {
        let mut tools = Vec::new();
        let mut left_out = Vec::new();
        for t in &self.listed {
            let name = self.spec.tool_name(&t.name);
            if !self.spec.admits(&t.name) {
                left_out.push((
                    name,
                    format!(
                        "left out by the `allow`/`deny` of server `{}`",
                        self.spec.name
                    ),
                ));
                continue;
            }
            match usable_schema(&t.schema) {
                Ok(schema) => tools.push(McpTool {
                    server: self.clone(),
                    name,
                    remote: t.name.clone(),
                    description: t.description.clone(),
                    schema,
                }),
                Err(why) => left_out.push((
                    name,
                    format!("its input schema is not one cairn can check and decode: {why}"),
                )),
            }
        }
        (tools, left_out)
    }

    /// The peer to send a call to, starting the server again after an exit when this task
    /// has not restarted it yet.
    fn peer(&self) -> Result<(Peer<RoleClient>, watch::Receiver<u64>), ToolError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &st.dead {
            return Err(ToolError::fatal(why.clone()));
        }
        if st.conn.is_none() {
            let rt = runtime().map_err(ToolError::fatal)?;
            match rt.block_on(connect(&self.spec)) {
                Ok((conn, _, _)) => st.conn = Some(conn),
                Err(e) => {
                    let why = format!("{e}; its tools are off for the rest of this task");
                    st.dead = Some(why.clone());
                    return Err(ToolError::fatal(why));
                }
            }
        }
        let conn = st.conn.as_ref().expect("connected above");
        Ok((conn.service.peer().clone(), conn.over.clone()))
    }

    /// Calls the server's tool `remote`, as [`Tool::run`] of `name`.
    fn call(&self, name: &str, remote: &str, args: &Value) -> Result<Observation, ToolError> {
        let (peer, mut over) = self.peer()?;
        let rt = runtime().map_err(ToolError::fatal)?;
        let mut params = CallToolRequestParams::new(remote.to_string());
        if let Value::Object(m) = args {
            params = params.with_arguments(m.clone());
        }
        let timeout = self.spec.timeout;
        let start = Instant::now();
        let outcome = rt.block_on(async {
            over.borrow_and_update();
            // A closed channel means the reader is gone (the server exited): that is the
            // call's own error to report, not an oversized reply.
            let too_long = async {
                if over.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                r = peer.call_tool(params) => Reply::Done(r),
                _ = too_long => Reply::TooLong,
                _ = tokio::time::sleep(timeout) => Reply::TimedOut,
            }
        });
        match outcome {
            Reply::Done(Ok(result)) => result_observation(name, result),
            Reply::Done(Err(ServiceError::McpError(e))) => {
                let text = format!(
                    "`{name}` refused the call: {} (JSON-RPC error {})",
                    e.message, e.code.0
                );
                Err(if e.code.0 == -32603 {
                    ToolError::transient(text)
                } else {
                    ToolError::invalid(text)
                })
            }
            Reply::Done(Err(e)) => Err(self.lost(name, e, start)),
            Reply::TooLong => Err(ToolError::invalid(format!(
                "`{name}` sent a reply longer than {} MiB; it was dropped unread",
                MAX_MESSAGE_BYTES >> 20
            ))
            .with_hint("ask for less at once")),
            Reply::TimedOut => Err(ToolError::timeout(format!(
                "`{name}` did not answer within {:.1} s",
                timeout.as_secs_f64()
            ))
            .with_hint("ask for less at once, or use another tool")),
        }
    }

    /// The error of a call that lost its server: transient the first time in a task (the next
    /// call starts it again), fatal after.
    fn lost(&self, name: &str, e: ServiceError, start: Instant) -> ToolError {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut conn) = st.conn.take() else {
            return ToolError::transient(format!("`{name}` failed: {e}"));
        };
        // The reader sees the end of stdout before the process is reaped.
        let rt = runtime().ok();
        let status = match rt {
            Some(rt) => rt.block_on(async {
                let _ = tokio::time::timeout(Duration::from_millis(500), conn.child.wait()).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                conn.exited()
            }),
            None => conn.exited(),
        };
        let Some(status) = status else {
            // Alive but the protocol broke: keep the process only as long as it takes to kill it.
            if let Some(rt) = rt {
                rt.block_on(conn.close());
            }
            st.crashes += 1;
            return self.after_crash(&mut st, format!(
                "the MCP server `{}` stopped speaking the protocol during `{name}` ({e}) and was stopped",
                self.spec.name
            ));
        };
        st.crashes += 1;
        let what = format!(
            "the MCP server `{}` exited ({status}) during `{name}`, {:.1} s into the call{}",
            self.spec.name,
            start.elapsed().as_secs_f64(),
            conn.stderr.describe()
        );
        if let Some(rt) = rt {
            rt.block_on(conn.close());
        }
        self.after_crash(&mut st, what)
    }

    fn after_crash(&self, st: &mut State, what: String) -> ToolError {
        if st.crashes <= 1 {
            ToolError::transient(format!("{what}; it is started again for the next call"))
        } else {
            let why = format!(
                "{what}; it had already been restarted once in this task, so its tools are off for the rest of it"
            );
            st.dead = Some(why.clone());
            ToolError::fatal(why)
        }
    }

    /// A new task: a server that exited in the last one gets its one restart again.
    fn new_task(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.crashes = 0;
        st.dead = None;
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let conn = self
            .state
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .conn
            .take();
        if let (Some(conn), Ok(rt)) = (conn, runtime()) {
            rt.block_on(conn.close());
        }
    }
}

enum Reply {
    Done(Result<CallToolResult, ServiceError>),
    TooLong,
    TimedOut,
}

/// A call's result as the observation: every content block (text as it is, the rest named),
/// then structured content unless a text block already holds the same JSON; `isError` makes
/// it an `InvalidInput` error carrying that text.
fn result_observation(name: &str, result: CallToolResult) -> Result<Observation, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    let mut texts_as_json = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        let mime = v
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("unknown type");
        let size = |s: Option<&str>| s.map(|d| d.len() / 4 * 3).unwrap_or(0);
        match kind {
            "text" => {
                let t = v.get("text").and_then(Value::as_str).unwrap_or("");
                if let Ok(j) = serde_json::from_str::<Value>(t) {
                    texts_as_json.push(j);
                }
                parts.push(t.to_string());
            }
            "image" | "audio" => parts.push(format!(
                "[{kind}: {mime}, about {} bytes, not shown]",
                size(v.get("data").and_then(Value::as_str))
            )),
            "resource" => {
                let r = &v["resource"];
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => parts.push(format!("[resource {uri}]\n{t}")),
                    None => parts.push(format!(
                        "[resource {uri}: {}, about {} bytes, not shown]",
                        r.get("mimeType")
                            .and_then(Value::as_str)
                            .unwrap_or("binary"),
                        size(r.get("blob").and_then(Value::as_str))
                    )),
                }
            }
            "resource_link" => parts.push(format!(
                "[resource link: {} {}]",
                v.get("uri").and_then(Value::as_str).unwrap_or(""),
                v.get("name").and_then(Value::as_str).unwrap_or("")
            )),
            other => parts.push(format!("[{other} content, not shown]")),
        }
    }
    if let Some(s) = &result.structured_content {
        // Shown only when it adds something: SDKs put the same data in a text block, or
        // wrap a plain result as `{"result": ...}` beside its text.
        let texts: Vec<Value> = parts.iter().map(|t| Value::from(t.trim())).collect();
        let inner = match s {
            Value::Object(m) if m.len() == 1 => m.values().next(),
            _ => None,
        };
        let repeats = |v: &Value| {
            let trimmed = v.as_str().map(|t| Value::from(t.trim()));
            trimmed.is_some_and(|t| texts.contains(&t))
                || texts_as_json.contains(v)
                || texts.contains(v)
                || (v.is_array() && *v == Value::Array(texts.clone()))
        };
        if !repeats(s) && !inner.is_some_and(repeats) {
            parts.push(format!(
                "structured: {}",
                serde_json::to_string(s).unwrap_or_default()
            ));
        }
    }
    let text = parts.join("\n");
    let (text, cut) = cut_bytes(text, MAX_OUTPUT_BYTES);
    if result.is_error == Some(true) {
        let shown = if text.trim().is_empty() {
            "no message".to_string()
        } else {
            text
        };
        return Err(ToolError::invalid(format!(
            "`{name}` reported an error: {shown}"
        )));
    }
    Ok(Observation {
        text,
        cut_chars: cut,
    })
}

/// `text` cut to at most `max` bytes at a character boundary, and how many characters went.
fn cut_bytes(mut text: String, max: usize) -> (String, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let cut = text[at..].chars().count();
    text.truncate(at);
    (text, cut)
}

/// The string formats the constraint engine decodes; any other `format` (`uint32`, which
/// schema generators write on integers) is an annotation it would refuse, so it is dropped.
const DECODED_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
];

/// A server's input schema as cairn can use it: `$ref`s to its own `$defs` or `definitions`
/// written in place (a recursive one is refused), those tables and `$schema` removed,
/// string `title`s and formats the decoder does not know dropped, then [`check_schema`]: keywords cairn cannot
/// validate or decode make the tool unusable.
pub fn usable_schema(schema: &Value) -> Result<Value, String> {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut out = schema.clone();
    inline_refs(&mut out, &defs, 0)?;
    strip_annotations(&mut out);
    if let Value::Object(m) = &mut out {
        m.remove("$defs");
        m.remove("definitions");
        m.remove("$id");
        m.remove("$schema");
        m.entry("type").or_insert_with(|| Value::from("object"));
    }
    check_schema(&out).map_err(|e| e.to_string())?;
    Ok(out)
}

fn strip_annotations(v: &mut Value) {
    match v {
        Value::Object(m) => {
            // `title` is an annotation that costs the model tokens (`"title": "Min Length"`);
            // an object under that key is a property named so and stays.
            if m.get("title").is_some_and(Value::is_string) {
                m.remove("title");
            }
            let known = m
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| DECODED_FORMATS.contains(&f))
                && m.get("type").and_then(Value::as_str) == Some("string");
            // Only a string `format` is the keyword; an object one is a property named so.
            if !known && m.get("format").is_some_and(Value::is_string) {
                m.remove("format");
            }
            m.values_mut().for_each(strip_annotations);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_annotations),
        _ => {}
    }
}

fn inline_refs(v: &mut Value, defs: &Value, depth: usize) -> Result<(), String> {
    if depth > 16 {
        return Err("its `$ref`s nest more than 16 deep (a recursive type)".into());
    }
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let key = r
                    .strip_prefix("#/$defs/")
                    .or_else(|| r.strip_prefix("#/definitions/"))
                    .ok_or_else(|| {
                        format!("`$ref` to `{r}` (only its own `$defs` are followed)")
                    })?;
                let mut target = defs
                    .get(key)
                    .cloned()
                    .ok_or_else(|| format!("`$ref` to `{r}`, which it does not define"))?;
                inline_refs(&mut target, defs, depth + 1)?;
                m.remove("$ref");
                if let Value::Object(t) = target {
                    for (k, val) in t {
                        m.entry(k).or_insert(val);
                    }
                }
                return Ok(());
            }
            for (k, val) in m.iter_mut() {
                if k != "$defs" && k != "definitions" {
                    inline_refs(val, defs, depth)?;
                }
            }
            Ok(())
        }
        Value::Array(a) => a.iter_mut().try_for_each(|x| inline_refs(x, defs, depth)),
        _ => Ok(()),
    }
}

/// One tool of an MCP server, called through the server it shares with its siblings.
#[derive(Debug, Clone)]
pub struct McpTool {
    server: Arc<McpServer>,
    name: String,
    remote: String,
    description: String,
    schema: Value,
}

impl McpTool {
    /// The tool's name on its server.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        if self.description.trim().is_empty() {
            format!(
                "`{}` of the MCP server `{}`.",
                self.remote, self.server.spec.name
            )
        } else {
            self.description.clone()
        }
    }

    fn args_schema(&self) -> Value {
        self.schema.clone()
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        self.server.call(&self.name, &self.remote, args)
    }

    fn new_task(&self) {
        self.server.new_task();
    }
}

/// Starts every server of `specs` and returns their tools, and the tools left out with why.
/// Two servers with one name are an error before anything starts.
pub fn start_all(specs: &[ServerSpec]) -> Result<(Vec<McpTool>, LeftOut), McpError> {
    let mut seen = std::collections::BTreeSet::new();
    for s in specs {
        if !seen.insert(s.name.as_str()) {
            return Err(s.error(format!(
                "two MCP servers are named `{}`; name them apart (NAME=COMMAND ... with --mcp, `name` in the manifest)",
                s.name
            )));
        }
    }
    let mut tools = Vec::new();
    let mut left_out = Vec::new();
    for s in specs {
        let server = McpServer::start(s.clone())?;
        let (t, l) = server.tools();
        tools.extend(t);
        left_out.extend(l);
    }
    Ok((tools, left_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_server_is_named_after_what_it_runs_or_as_told() {
        let name = |l: &str| ServerSpec::from_command_line(l).unwrap().name;
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-filesystem /tmp"),
            "filesystem"
        );
        assert_eq!(
            name("npx -y @modelcontextprotocol/server-memory@1.2"),
            "memory"
        );
        assert_eq!(name("python3 tools/notes_server.py"), "notes");
        assert_eq!(name("uvx mcp-server-git --repository ."), "git");
        assert_eq!(name("/opt/bin/weather-mcp --city x"), "weather");
        assert_eq!(
            name("npx --prefix /opt/mcp mcp-server-filesystem /notes"),
            "filesystem"
        );
        assert_eq!(name("node /opt/m/server-memory/dist/index.js"), "memory");
        assert_eq!(name("python3 -m notes_server"), "notes");
        assert_eq!(
            name("fs=npx -y @modelcontextprotocol/server-filesystem /tmp"),
            "fs"
        );
        let s = ServerSpec::from_command_line("notes= python3 'my server.py' --flag").unwrap();
        assert_eq!((s.name.as_str(), s.command.as_str()), ("notes", "python3"));
        assert_eq!(s.args, ["my server.py", "--flag"]);
        assert_eq!(s.command_line(), "python3 'my server.py' --flag");
    }

    #[test]
    fn a_bad_command_line_says_what_is_wrong() {
        let e = ServerSpec::from_command_line("   ").unwrap_err();
        assert!(e.message.contains("no command"), "{e}");
        let e = ServerSpec::from_command_line("npx 'unclosed").unwrap_err();
        assert!(e.message.contains("cannot be split"), "{e}");
        let e = ServerSpec::from_command_line("9fs=server").unwrap_err();
        assert!(e.message.contains("cannot name a server"), "{e}");
    }

    #[test]
    fn allow_and_deny_choose_tools_and_names_can_be_given() {
        let mut s = ServerSpec::from_command_line("fs=srv").unwrap();
        s.allow = Some(vec!["read".into(), "write".into()]);
        s.deny = vec!["write".into()];
        s.names.insert("read".into(), "read_file".into());
        assert!(s.admits("read") && !s.admits("write") && !s.admits("list"));
        assert_eq!(s.tool_name("read"), "read_file");
        assert_eq!(s.tool_name("list"), "fs.list");
    }

    #[test]
    fn schemas_with_their_own_definitions_are_written_out() {
        let s = json!({
            "type": "object",
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"entity": {"$ref": "#/$defs/Entity"}},
            "required": ["entity"],
            "$defs": {"Entity": {"type": "object", "properties": {"name": {"type": "string"}}}}
        });
        let u = usable_schema(&s).unwrap();
        assert_eq!(
            u["properties"]["entity"]["properties"]["name"]["type"],
            "string"
        );
        assert!(u.get("$defs").is_none());
        let rec = json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}},
            "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}});
        assert!(usable_schema(&rec).unwrap_err().contains("recursive"));
        let formats = json!({"type": "object", "properties": {
            "n": {"type": "integer", "format": "uint32"},
            "at": {"type": "string", "format": "date"},
            "format": {"type": "string"}}});
        let u = usable_schema(&formats).unwrap();
        assert!(u["properties"]["n"].get("format").is_none());
        assert_eq!(u["properties"]["at"]["format"], "date");
        assert_eq!(u["properties"]["format"]["type"], "string");
        let odd = json!({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}});
        assert!(usable_schema(&odd).is_err());
    }

    #[test]
    fn content_is_text_as_is_and_the_rest_named() {
        let r: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}}
            ],
            "structuredContent": {"k": 1}
        }))
        .unwrap();
        let o = result_observation("s.t", r).unwrap();
        assert_eq!(
            o.text,
            "hello\n[image: image/png, about 3 bytes, not shown]\n[resource file:///a.txt]\ninside\nstructured: {\"k\":1}"
        );
        let same: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "{\"k\": 1}"}], "structuredContent": {"k": 1}
        }))
        .unwrap();
        assert_eq!(result_observation("s.t", same).unwrap().text, "{\"k\": 1}");
        let wrapped: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "structuredContent": {"result": ["a", "b"]}
        }))
        .unwrap();
        assert_eq!(result_observation("s.t", wrapped).unwrap().text, "a\nb");
        let err: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "no such file"}], "isError": true
        }))
        .unwrap();
        let e = result_observation("s.t", err).unwrap_err();
        assert_eq!(e.class, super::super::ErrorClass::InvalidInput);
        assert!(e.message.contains("no such file"));
    }

    #[test]
    fn long_output_is_cut_at_a_character_boundary_and_counted() {
        let (t, cut) = cut_bytes("ééé".to_string(), 3);
        assert_eq!((t.as_str(), cut), ("é", 2));
    }
}
