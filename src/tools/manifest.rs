//! Tools the user declares in a TOML manifest (`--tools FILE`) and cairn runs as programs.
//!
//! ```toml
//! [[tool]]
//! name = "weather"
//! description = "Today's forecast for a city."
//! argv = ["python3", "weather.py"]   # run without a shell, in the manifest's folder
//! timeout_secs = 5                    # optional, default 10, at most 3600
//! max_memory_mb = 512                 # optional, default 1024, 16 to 1048576
//! args = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
//! ```
//!
//! MCP servers (see [`super::mcp`]) are declared beside the tools, in the shape other MCP
//! clients use, so an entry can be copied over:
//!
//! ```toml
//! [[mcp]]
//! name = "fs"                                  # its tools are fs.read_file, fs.list_directory, ...
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
//! env = { NOTES_LANG = "en" }                  # it gets these, PATH and HOME, nothing else
//! cwd = "."                                    # optional, relative to the manifest's folder
//! timeout_secs = 30                            # optional, per call, default 30
//! allow = ["read_file", "list_directory"]      # optional: only these of its tools
//! deny = ["write_file"]                        # optional: never these
//! names = { read_file = "read_note" }          # optional: names other than fs.TOOL
//! ```
//!
//! `args` of a `[[tool]]` is a JSON Schema, written as a TOML table or as a string of JSON. At each call the
//! arguments go to the program's stdin as one line of JSON; its stdout is the observation. A
//! non-zero exit is `InvalidInput` carrying its stderr.
//!
//! Each call has a budget:
//! - **time**: the program runs in its own process group, and the call lasts until the program
//!   has exited *and* its stdout and stderr are closed (a background child that holds them
//!   keeps the call going). At `timeout_secs` the whole group is killed and the call fails as
//!   `Timeout` (not retried). When the call ends normally, whatever the program left running
//!   in its group is killed too. A process that leaves the group (`setsid`) escapes this.
//! - **output**: at most [`MAX_OUTPUT_BYTES`] of stdout and of stderr are kept in memory; the
//!   rest is read and dropped, so the program can finish, and the observation says how many
//!   characters were cut.
//! - **memory**: each process of the tool gets `RLIMIT_DATA` (heap and other private writable
//!   memory) of `max_memory_mb`; an allocation beyond it fails in the program (Python raises
//!   `MemoryError`), and the failure names the limit.
//!
//! Unknown fields, schemas cairn cannot validate, bad limits, and names that are not valid,
//! repeated, or taken by a built-in tool (`sql`, `calculator`, `search`, `recall`) or by
//! `final_answer` are errors when the manifest is loaded, naming the tool and the field.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::schema::{check_schema, SchemaError};
use super::{Observation, Tool, ToolError};

/// How long a manifest tool may run when its entry gives no `timeout_secs`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most `timeout_secs` may be.
pub const MAX_TIMEOUT_SECS: f64 = 3600.0;

/// The memory limit (`RLIMIT_DATA`, per process) when an entry gives no `max_memory_mb`: room
/// for ordinary programs (a Python interpreter with its libraries), not for a runaway one.
pub const DEFAULT_MAX_MEMORY_MB: u64 = 1024;

/// The least and the most `max_memory_mb` may be.
pub const MEMORY_MB_RANGE: std::ops::RangeInclusive<u64> = 16..=1_048_576;

/// How many bytes of a program's stdout, and of its stderr, a call keeps in memory; the rest
/// is read and dropped. Far more than an observation shows (the registry cuts at 2,000
/// characters by default).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Names a manifest tool cannot take: the built-in tools and the agent's `final_answer`.
pub const RESERVED_NAMES: [&str; 5] = ["final_answer", "sql", "calculator", "search", "recall"];

/// Why a manifest could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file cannot be read.
    #[error("cannot read the tools manifest {path}: {source}")]
    Read {
        /// The manifest.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not valid TOML, or fields that are unknown, missing or of the wrong type.
    #[error("the tools manifest {path} is not valid: {message}")]
    Parse {
        /// The manifest.
        path: PathBuf,
        /// The TOML parser's message (with line and column).
        message: String,
    },
    /// A tool's `args` is not a usable JSON Schema.
    #[error("tool `{tool}` in {path}: `args` is not a valid JSON Schema: {source}")]
    Schema {
        /// The manifest.
        path: PathBuf,
        /// The tool.
        tool: String,
        /// What is wrong.
        source: SchemaError,
    },
    /// `args` given as a string that is not JSON.
    #[error("tool `{tool}` in {path}: `args` is a string but not valid JSON: {message}")]
    SchemaJson {
        /// The manifest.
        path: PathBuf,
        /// The tool.
        tool: String,
        /// The JSON parser's message.
        message: String,
    },
    /// Any other bad value in one tool's entry.
    #[error("tool `{tool}` in {path}: {message}")]
    Invalid {
        /// The manifest.
        path: PathBuf,
        /// The tool.
        tool: String,
        /// What is wrong and what would be valid.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    #[serde(default)]
    tool: Vec<ToolEntry>,
    #[serde(default)]
    mcp: Vec<McpEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpEntry {
    name: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    timeout_secs: Option<f64>,
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    names: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolEntry {
    name: String,
    description: String,
    argv: Vec<String>,
    args: Value,
    #[serde(default)]
    timeout_secs: Option<f64>,
    #[serde(default)]
    max_memory_mb: Option<i64>,
}

/// A loaded manifest: its tools, checked.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The tools, in file order.
    pub tools: Vec<CommandTool>,
    /// The MCP servers, in file order (not started yet).
    pub mcp: Vec<super::mcp::ServerSpec>,
}

impl Manifest {
    /// Reads and checks the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        Manifest::parse(&text, path, &dir)
    }

    /// Parses manifest text; `path` names it in errors and `dir` is where its programs run.
    pub fn parse(text: &str, path: &Path, dir: &Path) -> Result<Manifest, ManifestError> {
        let file: ManifestFile = toml::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let mut tools: Vec<CommandTool> = Vec::new();
        for entry in file.tool {
            let invalid = |message: String| ManifestError::Invalid {
                path: path.to_path_buf(),
                tool: entry.name.clone(),
                message,
            };
            if !super::valid_tool_name(&entry.name) {
                return Err(invalid(format!(
                    "the name `{}` is not valid: use 1-64 letters, digits, `_`, `-` or `.`, starting with a letter",
                    entry.name
                )));
            }
            if entry.name == "final_answer" {
                return Err(invalid(
                    "`final_answer` is the action the agent answers with, not a tool name; rename this tool in the manifest".into(),
                ));
            }
            if RESERVED_NAMES.contains(&entry.name.as_str()) {
                return Err(invalid(format!(
                    "`{0}` is the name of a built-in tool (built-ins: sql, calculator, search, recall); rename this tool in the manifest, e.g. `my_{0}`",
                    entry.name
                )));
            }
            if tools.iter().any(|t| t.name == entry.name) {
                return Err(invalid(format!(
                    "the name `{}` is declared twice in the manifest; give each tool its own name",
                    entry.name
                )));
            }
            if entry.argv.is_empty() || entry.argv[0].trim().is_empty() {
                return Err(invalid(
                    "`argv` is empty; give the program and its arguments, e.g. [\"python3\", \"tool.py\"]".into(),
                ));
            }
            let timeout = timeout_of(entry.timeout_secs, DEFAULT_TIMEOUT).map_err(invalid)?;
            let max_memory_mb = match entry.max_memory_mb {
                None => DEFAULT_MAX_MEMORY_MB,
                Some(mb) if u64::try_from(mb).is_ok_and(|mb| MEMORY_MB_RANGE.contains(&mb)) => {
                    mb as u64
                }
                Some(mb) => {
                    return Err(invalid(format!(
                        "`max_memory_mb` is {mb}; give a whole number of megabytes from {} to {} (default {DEFAULT_MAX_MEMORY_MB})",
                        MEMORY_MB_RANGE.start(),
                        MEMORY_MB_RANGE.end()
                    )))
                }
            };
            let schema = match entry.args {
                Value::String(s) => {
                    serde_json::from_str(&s).map_err(|e| ManifestError::SchemaJson {
                        path: path.to_path_buf(),
                        tool: entry.name.clone(),
                        message: e.to_string(),
                    })?
                }
                v => v,
            };
            check_schema(&schema).map_err(|source| ManifestError::Schema {
                path: path.to_path_buf(),
                tool: entry.name.clone(),
                source,
            })?;
            let mut program = PathBuf::from(&entry.argv[0]);
            if program.components().count() > 1 && program.is_relative() {
                program = dir.join(program);
            }
            if let Some(why) = missing_program(&program) {
                return Err(ManifestError::Invalid {
                    path: path.to_path_buf(),
                    tool: entry.name.clone(),
                    message: format!("`argv` names the program `{}`, which {why}; give its full path or install it", entry.argv[0]),
                });
            }
            tools.push(CommandTool {
                name: entry.name,
                description: entry.description,
                program,
                args: entry.argv[1..].to_vec(),
                schema,
                timeout,
                max_memory_mb,
                dir: dir.to_path_buf(),
            });
        }
        let mut mcp: Vec<super::mcp::ServerSpec> = Vec::new();
        for entry in file.mcp {
            let invalid = |message: String| ManifestError::Invalid {
                path: path.to_path_buf(),
                tool: format!("[[mcp]] {}", entry.name),
                message,
            };
            if !super::mcp::valid_server_name(&entry.name) {
                return Err(invalid(format!(
                    "the server name `{}` is not valid: use 1-32 letters, digits, `_` or `-`, starting with a letter",
                    entry.name
                )));
            }
            if mcp.iter().any(|m| m.name == entry.name) {
                return Err(invalid(format!(
                    "the server name `{}` is declared twice in the manifest; give each server its own name",
                    entry.name
                )));
            }
            if entry.command.trim().is_empty() {
                return Err(invalid(
                    "`command` is empty; give the server's program, e.g. \"npx\"".into(),
                ));
            }
            for (k, v) in &entry.env {
                if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                    return Err(invalid(format!(
                        "`env` has the variable `{k}`, which cannot be passed to a program; use a name without `=`"
                    )));
                }
            }
            for (remote, local) in &entry.names {
                if !super::valid_tool_name(local) || RESERVED_NAMES.contains(&local.as_str()) {
                    return Err(invalid(format!(
                        "`names` gives `{remote}` the name `{local}`, which is not valid or is taken by a built-in; use 1-64 letters, digits, `_`, `-` or `.`, starting with a letter"
                    )));
                }
            }
            let timeout =
                timeout_of(entry.timeout_secs, super::mcp::DEFAULT_TIMEOUT).map_err(invalid)?;
            let mut command = PathBuf::from(&entry.command);
            if command.components().count() > 1 && command.is_relative() {
                command = dir.join(command);
            }
            if let Some(why) = missing_program(&command) {
                return Err(invalid(format!(
                    "`command` names the program `{}`, which {why}; give its full path or install it",
                    entry.command
                )));
            }
            let cwd = entry.cwd.as_deref().map(|c| dir.join(c)); // an absolute `cwd` stays as it is
            if let Some(c) = &cwd {
                if !c.is_dir() {
                    return Err(invalid(format!(
                        "`cwd` is {}, which is not a folder",
                        c.display()
                    )));
                }
            }
            mcp.push(super::mcp::ServerSpec {
                name: entry.name,
                command: command.to_string_lossy().into_owned(),
                args: entry.args,
                env: entry.env,
                cwd,
                timeout,
                allow: entry.allow,
                deny: entry.deny,
                names: entry.names,
            });
        }
        Ok(Manifest { tools, mcp })
    }

    /// The tools, to register.
    pub fn into_tools(self) -> Vec<CommandTool> {
        self.tools
    }
}

/// A `timeout_secs` as a duration: `default` when absent; above 0 and at most
/// [`MAX_TIMEOUT_SECS`].
fn timeout_of(secs: Option<f64>, default: Duration) -> Result<Duration, String> {
    match secs {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s <= MAX_TIMEOUT_SECS => {
            Ok(Duration::from_secs_f64(s))
        }
        Some(s) => Err(format!(
            "`timeout_secs` is {s}; give a number of seconds above 0 and at most {MAX_TIMEOUT_SECS}"
        )),
    }
}

/// Why `program` cannot be started, found at load time so a batch does not fail every task
/// on it: a path that is not a file, or a bare name on no `PATH` folder.
fn missing_program(program: &Path) -> Option<String> {
    if program.components().count() > 1 {
        return (!program.is_file()).then(|| {
            if program.exists() {
                "is not a file".to_string()
            } else {
                "does not exist".to_string()
            }
        });
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| d.join(program).is_file());
    (!found).then(|| "is not in any folder on PATH".to_string())
}

/// A tool that runs a program: args JSON on stdin, the observation on stdout.
#[derive(Debug, Clone)]
pub struct CommandTool {
    name: String,
    description: String,
    program: PathBuf,
    args: Vec<String>,
    schema: Value,
    timeout: Duration,
    max_memory_mb: u64,
    dir: PathBuf,
}

impl CommandTool {
    /// How long one run may take before it is killed with its process group.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The memory limit of each of its processes, in MB (`RLIMIT_DATA`).
    pub fn max_memory_mb(&self) -> u64 {
        self.max_memory_mb
    }

    /// The same tool with its timeout lowered to `limit` if it was longer: the registry stops
    /// waiting at its own timeout, and the program should not outlive the call.
    pub fn with_timeout_at_most(mut self, limit: Duration) -> Self {
        self.timeout = self.timeout.min(limit);
        self
    }
}

fn cap(s: &str, n: usize) -> String {
    let t = s.trim();
    if t.chars().count() > n {
        let c: String = t.chars().take(n).collect();
        format!("{c}…")
    } else {
        t.to_string()
    }
}

/// What a call kept of one output stream.
#[derive(Debug, Default)]
struct Captured {
    /// The first bytes, at most [`MAX_OUTPUT_BYTES`], ending on a whole UTF-8 character.
    kept: Vec<u8>,
    /// About how many characters were read and dropped after those (bytes that start a UTF-8
    /// character).
    dropped_chars: usize,
}

/// Reads `r` to its end, keeping the first [`MAX_OUTPUT_BYTES`] and dropping the rest, so a
/// program that prints without end costs a call no more memory than that.
fn capture(mut r: impl Read) -> Captured {
    let mut c = Captured::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let room = MAX_OUTPUT_BYTES - c.kept.len();
        let keep = n.min(room);
        c.kept.extend_from_slice(&buf[..keep]);
        c.dropped_chars += buf[keep..n].iter().filter(|&&b| b & 0xc0 != 0x80).count();
    }
    if c.dropped_chars > 0 {
        // The cut may have split a character: drop its first bytes too.
        if let Err(e) = std::str::from_utf8(&c.kept) {
            if e.error_len().is_none() {
                c.kept.truncate(e.valid_up_to());
                c.dropped_chars += 1;
            }
        }
    }
    c
}

impl Tool for CommandTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn args_schema(&self) -> Value {
        self.schema.clone()
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Its own process group, so a timeout kills whatever it started too.
            cmd.process_group(0);
            let limit = data_limit(self.max_memory_mb);
            // SAFETY: setrlimit(2) is async-signal-safe and changes only the child's own
            // limits; `limit` was computed before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut spawned = cmd.spawn();
        // A program file that was just written may still be open for writing in a process
        // forked meanwhile ("text file busy"); that passes within milliseconds.
        for _ in 0..5 {
            match &spawned {
                Err(e) if is_text_busy(e) => {
                    std::thread::sleep(Duration::from_millis(20));
                    spawned = cmd.spawn();
                }
                _ => break,
            }
        }
        let mut child = spawned.map_err(|e| {
            ToolError::fatal(format!(
                "cannot start `{}` for tool `{}`: {e}",
                self.program.display(),
                self.name
            ))
        })?;
        let start = Instant::now();
        let input = format!("{args}\n");
        if let Some(mut stdin) = child.stdin.take() {
            // A program that exits without reading its input is fine: ignore a broken pipe.
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let out_reader = child
            .stdout
            .take()
            .map(|s| std::thread::spawn(|| capture(s)));
        let err_reader = child
            .stderr
            .take()
            .map(|s| std::thread::spawn(|| capture(s)));
        let closed = |r: &Option<std::thread::JoinHandle<Captured>>| {
            r.as_ref().is_none_or(|h| h.is_finished())
        };
        // The call lasts until the program has exited and its output pipes are closed: a
        // child it left in the background may hold them, and is the program's work too.
        let mut exited = false;
        let timed_out = loop {
            if !exited {
                match has_exited(&mut child) {
                    Ok(e) => exited = e,
                    Err(e) => {
                        let _ = kill_group(&mut child);
                        return Err(ToolError::transient(format!(
                            "cannot wait for tool `{}`: {e}",
                            self.name
                        )));
                    }
                }
            }
            if exited && closed(&out_reader) && closed(&err_reader) {
                break false;
            }
            let left = self.timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                break true;
            }
            std::thread::sleep(left.min(Duration::from_millis(5)));
        };
        // The call is over: nothing it started may go on running. The program itself is not
        // reaped before this, so its process group id cannot be taken by another process.
        let status = kill_group(&mut child);
        if timed_out {
            // The readers are not joined: a process that left the group may hold the pipes.
            return Err(ToolError::timeout(format!(
                "tool `{}` did not finish within {:.1} s (its timeout) and was killed, with every process it started",
                self.name,
                self.timeout.as_secs_f64()
            ))
            .with_hint("ask for less at once, or use another tool"));
        }
        let join = |r: Option<std::thread::JoinHandle<Captured>>| {
            r.and_then(|h| h.join().ok()).unwrap_or_default()
        };
        let stdout = join(out_reader);
        let stderr = join(err_reader);
        let text = String::from_utf8_lossy(&stdout.kept);
        let errs = String::from_utf8_lossy(&stderr.kept);
        let status = status.map_err(|e| {
            ToolError::transient(format!("cannot wait for tool `{}`: {e}", self.name))
        })?;
        if !status.success() {
            let how = exit_text(&status);
            let detail = if errs.trim().is_empty() {
                cap(&text, 1000)
            } else {
                cap(&errs, 1000)
            };
            let mut message = format!("tool `{}` failed with {how}: {detail}", self.name);
            if detail.to_lowercase().contains("memory") {
                message.push_str(&format!(
                    " (each of its processes may use at most {} MB: `max_memory_mb` in the manifest)",
                    self.max_memory_mb
                ));
            }
            return Err(ToolError::invalid(message));
        }
        let mut obs = Observation::new(text.trim_end());
        obs.cut_chars = stdout.dropped_chars;
        Ok(obs)
    }
}

/// How the program ended, for an error message: `exit code 3`, `signal 9`.
fn exit_text(status: &std::process::ExitStatus) -> String {
    if let Some(c) = status.code() {
        return format!("exit code {c}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("signal {sig}");
        }
    }
    "a signal".into()
}

/// The `RLIMIT_DATA` for a tool's processes: `mb` megabytes, or the hard limit cairn itself
/// runs under when that is lower (a process cannot raise its hard limit).
#[cfg(unix)]
fn data_limit(mb: u64) -> libc::rlimit {
    let want = mb.saturating_mul(1024 * 1024) as libc::rlim_t;
    let mut cur = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: getrlimit(2) writes only into `cur`.
    let hard = if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut cur) } == 0 {
        cur.rlim_max
    } else {
        libc::RLIM_INFINITY
    };
    let v = if hard == libc::RLIM_INFINITY {
        want
    } else {
        want.min(hard)
    };
    libc::rlimit {
        rlim_cur: v,
        rlim_max: v,
    }
}

/// Whether the program has exited, without reaping it: while it is a zombie its pid, which
/// is also its process group's id, cannot be reused, so [`kill_group`] cannot hit another
/// group.
#[cfg(unix)]
fn has_exited(child: &mut std::process::Child) -> std::io::Result<bool> {
    let pid = child.id() as libc::id_t;
    // SAFETY: an all-zero siginfo_t is valid; waitid(2) writes only into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; WNOWAIT leaves the child waitable for `Child::wait`.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    // SAFETY: waitid filled `info` (si_pid stays 0 when the child has not exited).
    Ok(unsafe { info.si_pid() } != 0)
}

#[cfg(not(unix))]
fn has_exited(child: &mut std::process::Child) -> std::io::Result<bool> {
    child.try_wait().map(|s| s.is_some())
}

fn is_text_busy(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ETXTBSY)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Kills the program's whole process group (the program, if it still runs, and every process
/// it left in the group), then reaps the program and returns how it ended.
fn kill_group(child: &mut std::process::Child) -> std::io::Result<std::process::ExitStatus> {
    #[cfg(unix)]
    {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group the child leads
            // (it was started with process_group(0) and is not reaped yet); it touches no
            // memory.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = child.kill();
    }
    child.wait()
}
