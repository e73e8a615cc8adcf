//! Tools the user declares in a TOML manifest (`--tools FILE`) and cairn runs as programs.
//!
//! ```toml
//! [[tool]]
//! name = "weather"
//! description = "Today's forecast for a city."
//! argv = ["python3", "weather.py"]   # run without a shell, in the manifest's folder
//! timeout_secs = 5                    # optional, default 10
//! args = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
//! ```
//!
//! `args` is a JSON Schema, written as a TOML table or as a string of JSON. At each call the
//! arguments go to the program's stdin as one line of JSON; its stdout is the observation. A
//! non-zero exit is `InvalidInput` carrying its stderr; a program still running at the timeout
//! is killed (with its process group) and the call fails as `Transient`. Unknown fields and
//! schemas cairn cannot validate are errors when the manifest is loaded, naming the tool and
//! the field.

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
}

/// A loaded manifest: its tools, checked.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The tools, in file order.
    pub tools: Vec<CommandTool>,
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
        let mut tools = Vec::new();
        for entry in file.tool {
            let invalid = |message: String| ManifestError::Invalid {
                path: path.to_path_buf(),
                tool: entry.name.clone(),
                message,
            };
            if entry.argv.is_empty() || entry.argv[0].trim().is_empty() {
                return Err(invalid(
                    "`argv` is empty; give the program and its arguments, e.g. [\"python3\", \"tool.py\"]".into(),
                ));
            }
            let timeout = match entry.timeout_secs {
                None => DEFAULT_TIMEOUT,
                Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
                Some(s) => {
                    return Err(invalid(format!(
                        "`timeout_secs` is {s}; give a number of seconds above 0 and at most 3600"
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
                dir: dir.to_path_buf(),
            });
        }
        Ok(Manifest { tools })
    }

    /// The tools, to register.
    pub fn into_tools(self) -> Vec<CommandTool> {
        self.tools
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
    dir: PathBuf,
}

impl CommandTool {
    /// How long one run may take before it is killed.
    pub fn timeout(&self) -> Duration {
        self.timeout
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
        let input = format!("{args}\n");
        if let Some(mut stdin) = child.stdin.take() {
            // A program that exits without reading its input is fine: ignore a broken pipe.
            std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
        }
        let read_all = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut buf);
                }
                buf
            })
        };
        let out_reader = read_all(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let err_reader = read_all(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        );
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if start.elapsed() >= self.timeout => {
                    kill_group(&mut child);
                    // The readers are not joined: a grandchild may still hold the pipes.
                    return Err(ToolError::transient(format!(
                        "tool `{}` did not finish within {:.1} s and was killed",
                        self.name,
                        self.timeout.as_secs_f64()
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    kill_group(&mut child);
                    return Err(ToolError::transient(format!(
                        "cannot wait for tool `{}`: {e}",
                        self.name
                    )));
                }
            }
        };
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        let stdout = String::from_utf8_lossy(&stdout).into_owned();
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        if !status.success() {
            let code = status
                .code()
                .map(|c| format!("exit code {c}"))
                .unwrap_or_else(|| "a signal".into());
            let detail = if stderr.trim().is_empty() {
                cap(&stdout, 1000)
            } else {
                cap(&stderr, 1000)
            };
            return Err(ToolError::invalid(format!(
                "tool `{}` failed with {code}: {detail}",
                self.name
            )));
        }
        Ok(Observation::new(stdout.trim_end().to_string()))
    }
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

fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group the child leads
            // (it was started with process_group(0)); it touches no memory.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}
