//! The bad-input matrix: every entry point fed input that is wrong in one way (flags, task and
//! suite files, GGUF files, memory files, databases, document folders, tool manifests, a full
//! disk). Each case checks what a user sees: the exit code, a message that names the problem,
//! no panic, and every file that was there before left byte for byte as it was.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{write_tiny_gguf, TinySpec};

mod calculator;
mod documents;
mod flags;
mod gguf;
mod manifest;
mod memory;
mod outputs;
mod sql;
mod tasks;

/// What a case holds while the command runs (a lock of another connection), taken after the
/// files are read for comparison: closing any descriptor of a file drops this process's
/// POSIX locks on it, so reading the file after locking it would undo the lock.
type Hold = Box<dyn FnOnce() -> Box<dyn std::any::Any>>;

/// How to run one case: arguments (relative paths are inside the case's folder), extra
/// environment, a file-size limit standing in for a full disk, anything to hold, and what to
/// write to its standard input (closed after it).
struct Run {
    args: Vec<OsString>,
    env: Vec<(&'static str, String)>,
    fsize_limit: Option<u64>,
    hold: Option<Hold>,
    stdin: Vec<u8>,
}

fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    Run {
        args: args.into_iter().map(Into::into).collect(),
        env: Vec::new(),
        fsize_limit: None,
        hold: None,
        stdin: Vec::new(),
    }
}

impl Run {
    fn env(mut self, k: &'static str, v: &str) -> Self {
        self.env.push((k, v.to_string()));
        self
    }
    fn fsize(mut self, bytes: u64) -> Self {
        self.fsize_limit = Some(bytes);
        self
    }
    fn stdin(mut self, bytes: &[u8]) -> Self {
        self.stdin = bytes.to_vec();
        self
    }
    fn hold<T: 'static>(mut self, take: impl FnOnce() -> T + 'static) -> Self {
        self.hold = Some(Box::new(move || Box::new(take()) as Box<dyn std::any::Any>));
        self
    }
}

/// One bad input: how to set it up, the exit code, and the words the message must hold.
struct Case {
    name: &'static str,
    setup: Box<dyn Fn(&Path) -> Run + Send + Sync>,
    code: i32,
    needles: Vec<&'static str>,
}

fn case(
    name: &'static str,
    code: i32,
    needles: &[&'static str],
    setup: impl Fn(&Path) -> Run + Send + Sync + 'static,
) -> Case {
    Case {
        name,
        setup: Box::new(setup),
        code,
        needles: needles.to_vec(),
    }
}

/// Every regular file under `dir` with its bytes (links and special files are not followed).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                if let Ok(bytes) = std::fs::read(e.path()) {
                    out.insert(e.path(), bytes);
                }
            }
        }
    }
    out
}

/// Runs one case; `Err` says what was wrong.
fn check(c: &Case, home: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut r = (c.setup)(dir.path());
    let before = snapshot(dir.path());
    let _held = r.hold.take().map(|take| take());
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.args(&r.args)
        .current_dir(dir.path())
        .env("CAIRN_HOME", home)
        .env("CAIRN_OFFLINE", "1")
        .env_remove("CAIRN_MODEL")
        .env_remove("CAIRN_MEMORY")
        .env_remove("CAIRN_DB")
        .env_remove("CAIRN_INDEX")
        .env_remove("CAIRN_TOOLS")
        .env("HF_HOME", home.join("hf"))
        .env("CAIRN_THREADS", "1");
    for (k, v) in &r.env {
        cmd.env(k, v);
    }
    if let Some(limit) = r.fsize_limit {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit(2) is async-signal-safe and touches only the child's limits.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start cairn: {e}"))?;
    if let Some(mut input) = child.stdin.take() {
        use std::io::Write;
        // A command that exits before reading all of it closes the pipe: not this test's concern.
        let _ = input.write_all(&r.stdin);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot wait for cairn: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut problems = Vec::new();
    if out.status.code() != Some(c.code) {
        problems.push(format!(
            "exit status {:?}, expected {}",
            out.status.code(),
            c.code
        ));
    }
    for n in &c.needles {
        if !stderr.contains(n) {
            problems.push(format!("stderr lacks `{n}`"));
        }
    }
    // A cause printed twice ("No such file or directory: No such file or directory").
    for line in stderr.lines().filter(|l| l.starts_with("error")) {
        let parts: Vec<&str> = line.split(": ").collect();
        if parts.windows(2).any(|w| w[0] == w[1]) {
            problems.push(format!("a cause is repeated in `{line}`"));
        }
    }
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        problems.push("it panicked".into());
    }
    let after = snapshot(dir.path());
    for (p, bytes) in &before {
        match after.get(p) {
            Some(b) if b == bytes => {}
            Some(_) => problems.push(format!("{} was changed", p.display())),
            None => problems.push(format!("{} was removed", p.display())),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n    stderr: {}",
            problems.join("; "),
            stderr.trim()
        ))
    }
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, bytes).unwrap();
    p
}

fn tiny(dir: &Path) -> String {
    write_tiny_gguf(&dir.join("m.gguf"), &TinySpec::llama());
    "m.gguf".into()
}

/// The tiny model with a context long enough for the agent's whole prompt, so a task gets to
/// decode its steps.
fn tiny_agent(dir: &Path) -> String {
    let spec = TinySpec {
        context: 4096,
        ..TinySpec::llama()
    };
    write_tiny_gguf(&dir.join("m.gguf"), &spec);
    "m.gguf".into()
}

/// A batch of `lines` (as bytes) run with the tiny model, briefly.
fn batch(dir: &Path, lines: &[u8]) -> Run {
    write(dir, "tasks.jsonl", lines);
    let m = tiny(dir);
    run([
        "batch",
        "tasks.jsonl",
        "--out",
        "out.jsonl",
        "--model",
        &m,
        "--max-rounds",
        "1",
        "--max-tokens",
        "16",
    ])
}

fn suite(dir: &Path, lines: &str) -> Run {
    write(dir, "suite.jsonl", lines);
    let m = tiny(dir);
    run(["eval", "suite.jsonl", "--model", &m])
}

/// A GGUF header with the given metadata count, then `rest`.
fn gguf(version: u32, tensors: u64, kvs: u64, rest: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(version.to_le_bytes());
    b.extend(tensors.to_le_bytes());
    b.extend(kvs.to_le_bytes());
    b.extend(rest);
    b
}

fn gguf_str(s: &str) -> Vec<u8> {
    let mut b = (s.len() as u64).to_le_bytes().to_vec();
    b.extend(s.as_bytes());
    b
}

/// One metadata pair `general.architecture = llama` and one tensor `w` with `dims` and
/// ggml type `dtype`, padded, with `data` bytes after.
fn gguf_tensor(dims: &[u64], dtype: u32, data: usize) -> Vec<u8> {
    let mut rest = gguf_str("general.architecture");
    rest.extend(8u32.to_le_bytes());
    rest.extend(gguf_str("llama"));
    rest.extend(gguf_str("w"));
    rest.extend((dims.len() as u32).to_le_bytes());
    for d in dims {
        rest.extend(d.to_le_bytes());
    }
    rest.extend(dtype.to_le_bytes());
    rest.extend(0u64.to_le_bytes());
    let mut b = gguf(3, 1, 1, &rest);
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b.extend(vec![0u8; data]);
    b
}

fn gen(model: &str) -> Run {
    run(["generate", "--model", model, "--max-tokens", "4", "hi"])
}

fn sql(db: &str, query: &str) -> Run {
    run([
        "--db",
        db,
        "tools",
        "call",
        "sql",
        &format!("{{\"query\": \"{query}\"}}"),
    ])
}

fn shop(dir: &Path, name: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop.sqlite");
    std::fs::copy(src, dir.join(name)).unwrap();
    name.into()
}

/// A real cairn memory file with one session.
fn memory_file(dir: &Path, name: &str) -> String {
    let store = cairn::memory::MemoryStore::open(&dir.join(name)).unwrap();
    store.create_session("work").unwrap();
    drop(store);
    name.into()
}

/// Overwrites `len` bytes of `path` from `at` with a pattern.
fn scribble(path: &Path, at: usize, len: usize) {
    let mut b = std::fs::read(path).unwrap();
    let end = (at + len).min(b.len());
    for (i, x) in b[at..end].iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(37) ^ 0xa5;
    }
    std::fs::write(path, b).unwrap();
}

fn manifest(dir: &Path, body: &str) -> Run {
    write(dir, "tools.toml", body);
    run(["--tools", "tools.toml", "tools", "list"])
}

const ARGS: &str = "args = { type = \"object\" }\n";

/// Every case, grouped by area.
fn cases() -> Vec<Case> {
    [
        flags::cases(),
        tasks::cases(),
        gguf::cases(),
        memory::cases(),
        sql::cases(),
        documents::cases(),
        manifest::cases(),
        calculator::cases(),
        outputs::cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[test]
fn every_bad_input_fails_clearly_without_a_panic_and_leaves_its_files_alone() {
    let home = tempfile::tempdir().unwrap();
    let cases = cases();
    assert!(cases.len() >= 120, "the matrix has {} cases", cases.len());
    // Four at a time: the locked memory file alone waits out cairn's full minute of retries.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(c) = cases.get(i) else { break };
                if let Err(e) = check(c, home.path()) {
                    failures.lock().unwrap().push(format!("- {}: {e}", c.name));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs were not handled as they should be:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
