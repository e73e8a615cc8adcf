//! The bad-input matrix: every entry point fed input that is wrong in one way (flags, task and
//! suite files, GGUF files, memory files, databases, document folders, tool manifests, a full
//! disk). Each case checks what a user sees: the exit code, a message that names the problem,
//! no panic, and every file that was there before left byte for byte as it was.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{write_tiny_gguf, TinySpec};

/// What a case holds while the command runs (a lock of another connection), taken after the
/// files are read for comparison: closing any descriptor of a file drops this process's
/// POSIX locks on it, so reading the file after locking it would undo the lock.
type Hold = Box<dyn FnOnce() -> Box<dyn std::any::Any>>;

/// How to run one case: arguments (relative paths are inside the case's folder), extra
/// environment, a file-size limit standing in for a full disk, and anything to hold.
struct Run {
    args: Vec<OsString>,
    env: Vec<(&'static str, String)>,
    fsize_limit: Option<u64>,
    hold: Option<Hold>,
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
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start cairn: {e}"))?;
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

fn cases() -> Vec<Case> {
    vec![
        // --- Flags and environment.
        case(
            "unknown subcommand",
            2,
            &["unrecognized subcommand 'frobnicate'"],
            |_| run(["frobnicate"]),
        ),
        case("zero threads", 2, &["--threads must be at least 1"], |_| {
            run(["--threads", "0", "tools", "list"])
        }),
        case(
            "threads not a number",
            2,
            &["invalid value 'abc' for '--threads"],
            |_| run(["--threads", "abc", "tools", "list"]),
        ),
        case(
            "CAIRN_THREADS not a number",
            2,
            &["CAIRN_THREADS is `abc`"],
            |_| run(["tools", "list"]).env("CAIRN_THREADS", "abc"),
        ),
        case(
            "memory decay out of range",
            2,
            &["--memory-decay is 1.5"],
            |_| run(["--memory-decay", "1.5", "memory", "sessions"]),
        ),
        case("empty task", 2, &["the task is empty"], |_| {
            run(["run", ""])
        }),
        case(
            "zero rounds",
            2,
            &["--max-rounds must be at least 1"],
            |_| run(["run", "--max-rounds", "0", "hi"]),
        ),
        case("zero jobs", 2, &["--jobs must be at least 1"], |d| {
            write(d, "t.jsonl", "{\"task\":\"x\"}\n");
            run(["batch", "--jobs", "0", "t.jsonl"])
        }),
        case(
            "shard out of range",
            2,
            &["expected I/N with 0 <= I < N"],
            |_| run(["batch", "--shard", "3/2", "t.jsonl"]),
        ),
        case(
            "bad --stop-when regex",
            2,
            &["is not a valid regular expression"],
            |_| run(["run", "--stop-when", "(", "hi"]),
        ),
        case(
            "unknown model name",
            2,
            &["is not a model file, a preset"],
            |_| run(["--model", "nosuchpreset", "run", "hi"]),
        ),
        case(
            "batch --out is the task file",
            2,
            &["is the task file itself"],
            |d| {
                write(d, "t.jsonl", "{\"id\":\"a\",\"task\":\"x\"}\n");
                let m = tiny(d);
                run(["batch", "t.jsonl", "--out", "./t.jsonl", "--model", &m])
            },
        ),
        case(
            "eval --report is the suite",
            2,
            &["is the task file itself"],
            |d| {
                write(
                    d,
                    "s.jsonl",
                    "{\"id\":\"a\",\"task\":\"x\",\"expect\":[\"1\"]}\n",
                );
                let m = tiny(d);
                run(["eval", "s.jsonl", "--report", "s.jsonl", "--model", &m])
            },
        ),
        // --- Task and suite files.
        case(
            "task file missing",
            2,
            &["cannot read the tasks", "nope.jsonl"],
            |d| {
                let m = tiny(d);
                run(["batch", "nope.jsonl", "--model", &m])
            },
        ),
        case(
            "task file is a folder",
            2,
            &["cannot read the tasks", "Is a directory"],
            |d| {
                std::fs::create_dir(d.join("tasks")).unwrap();
                let m = tiny(d);
                run(["batch", "tasks", "--model", &m])
            },
        ),
        case("invalid JSON line", 1, &["line 1: not valid JSON"], |d| {
            batch(d, b"{\"id\":\"a\",\"task\":\n")
        }),
        case(
            "line without a task",
            1,
            &["line 1: missing field `task`"],
            |d| batch(d, b"{\"id\":\"a\"}\n"),
        ),
        case(
            "id of the wrong type",
            1,
            &["`id` must be a string or a number"],
            |d| batch(d, b"{\"id\":[1],\"task\":\"x\"}\n"),
        ),
        case(
            "line not an object",
            1,
            &["line 1: not a JSON object"],
            |d| batch(d, b"[1, 2]\n"),
        ),
        case(
            "empty task in a line",
            1,
            &["line 1: `task` is empty"],
            |d| batch(d, b"{\"id\":\"a\",\"task\":\"   \"}\n"),
        ),
        case(
            "repeated id",
            1,
            &["line 2: the id `a` is used by an earlier line"],
            |d| {
                batch(
                    d,
                    b"{\"id\":\"a\",\"task\":\"say hi\"}\n{\"id\":\"a\",\"task\":\"again\"}\n",
                )
            },
        ),
        // Regression: one line that was not UTF-8 used to fail the whole file.
        case(
            "invalid UTF-8 in a line",
            1,
            &["line 2: not valid UTF-8"],
            |d| batch(d, b"\n{\"id\":\"a\",\"task\":\"\xff\xfe\"}\n"),
        ),
        case(
            "huge line",
            1,
            &["line 1: the line is", "limited to"],
            |d| {
                let mut line = b"{\"id\":\"a\",\"task\":\"".to_vec();
                line.extend(std::iter::repeat_n(b'x', 2 << 20));
                line.extend(b"\"}\n");
                batch(d, &line)
            },
        ),
        case(
            "suite expect not a list",
            2,
            &["line 1: invalid type", "a suite must be whole"],
            |d| suite(d, "{\"id\":\"a\",\"task\":\"x\",\"expect\":5}\n"),
        ),
        case(
            "suite task without expect",
            2,
            &["has no \"expect\" answers"],
            |d| suite(d, "{\"id\":\"a\",\"task\":\"x\"}\n"),
        ),
        // Regression: an --out file that was not cairn's output had its lines dropped.
        case(
            "--out is someone else's file",
            2,
            &["line 1 is not a cairn output line", "choose another --out"],
            |d| {
                write(d, "out.jsonl", "my notes, not cairn's\n");
                batch(d, b"{\"id\":\"a\",\"task\":\"x\"}\n")
            },
        ),
        // --- GGUF files.
        case(
            "empty GGUF",
            2,
            &["only 0 bytes, too short for a GGUF header"],
            |d| {
                write(d, "e.gguf", b"");
                gen("e.gguf")
            },
        ),
        case("wrong magic", 2, &["is not a GGUF file (bad magic"], |d| {
            write(d, "w.gguf", b"GGML\x03\0\0\0 and then some text");
            gen("w.gguf")
        }),
        case(
            "header cut short",
            2,
            &["is truncated", "the header ends early"],
            |d| {
                write(d, "h.gguf", gguf(3, 0, 1, &[]));
                gen("h.gguf")
            },
        ),
        case(
            "tensor data cut short",
            2,
            &["is truncated", "tensor `w` needs bytes up to"],
            |d| {
                write(d, "t.gguf", gguf_tensor(&[64, 4], 0, 100));
                gen("t.gguf")
            },
        ),
        case(
            "unsupported GGUF version",
            2,
            &["unsupported magic/version"],
            |d| {
                write(d, "v.gguf", gguf(7, 0, 0, &[]));
                gen("v.gguf")
            },
        ),
        case(
            "absurd string length",
            2,
            &["string length", "exceeds max"],
            |d| {
                let mut rest = gguf_str("general.architecture");
                rest.extend(8u32.to_le_bytes());
                rest.extend((1u64 << 60).to_le_bytes());
                write(d, "s.gguf", gguf(3, 0, 1, &rest));
                gen("s.gguf")
            },
        ),
        case(
            "absurd metadata count",
            2,
            &["metadata_kv_count", "exceeds max"],
            |d| {
                write(d, "k.gguf", gguf(3, 0, 1 << 40, &[]));
                gen("k.gguf")
            },
        ),
        case(
            "absurd tensor count",
            2,
            &["tensor_count", "exceeds max"],
            |d| {
                write(d, "c.gguf", gguf(3, 1 << 50, 0, &[]));
                gen("c.gguf")
            },
        ),
        case("absurd tensor size", 2, &["tensor `w`"], |d| {
            write(d, "z.gguf", gguf_tensor(&[1 << 40, 1 << 40], 0, 64));
            gen("z.gguf")
        }),
        // Found by fuzzing: candle divided by the alignment, so 0 panicked.
        case(
            "zero alignment",
            2,
            &["general.alignment", "must be greater than 0"],
            |d| {
                let mut rest = gguf_str("general.alignment");
                rest.extend(4u32.to_le_bytes());
                rest.extend(0u32.to_le_bytes());
                write(d, "a.gguf", gguf(3, 0, 1, &rest));
                gen("a.gguf")
            },
        ),
        case(
            "unsupported quant type",
            2,
            &["unknown dtype for tensor 99"],
            |d| {
                write(d, "q.gguf", gguf_tensor(&[32], 99, 64));
                gen("q.gguf")
            },
        ),
        case(
            "too many tensor dimensions",
            2,
            &["has 9 dimensions, max is 4"],
            |d| {
                write(d, "n.gguf", gguf_tensor(&[1; 9], 0, 64));
                gen("n.gguf")
            },
        ),
        case("model path is a folder", 2, &["is not a file"], |d| {
            std::fs::create_dir(d.join("dir.gguf")).unwrap();
            gen("dir.gguf")
        }),
        // --- Memory files.
        case(
            "memory file not SQLite",
            2,
            &["is not a cairn memory file", "left untouched"],
            |d| {
                write(d, "mem.sqlite", "plain text\n");
                run(["--memory", "mem.sqlite", "memory", "sessions"])
            },
        ),
        case(
            "memory file is another database",
            2,
            &["not a cairn memory file (it has the tables customers"],
            |d| {
                let db = shop(d, "mem.sqlite");
                run(["--memory", &db, "memory", "sessions"])
            },
        ),
        case(
            "memory file corrupted",
            2,
            &["mem.sqlite", "malformed"],
            |d| {
                let m = memory_file(d, "mem.sqlite");
                scribble(&d.join(&m), 100, 8000);
                run(["--memory", &m, "memory", "sessions"])
            },
        ),
        case(
            "memory file locked by another writer",
            2,
            &["mem.sqlite", "locked"],
            |d| {
                let m = memory_file(d, "mem.sqlite");
                let path = d.join(&m);
                run(["--memory", &m, "memory", "forget", "work"]).hold(move || {
                    let conn = rusqlite::Connection::open(path).unwrap();
                    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
                    conn
                })
            },
        ),
        case(
            "memory folder is a file",
            2,
            &["not/mem.sqlite", "Not a directory"],
            |d| {
                write(d, "not", "a file, not a folder\n");
                let m = tiny(d);
                run([
                    "--memory",
                    "not/mem.sqlite",
                    "run",
                    "--model",
                    &m,
                    "--max-rounds",
                    "1",
                    "hi",
                ])
            },
        ),
        case("disk full writing memory", 2, &["mem.sqlite"], |d| {
            let m = tiny(d);
            run([
                "--memory",
                "mem.sqlite",
                "run",
                "--model",
                &m,
                "--max-rounds",
                "1",
                "hi",
            ])
            .fsize(2048)
        }),
        // --- Databases for the sql tool.
        case(
            "database not SQLite",
            1,
            &["notes.txt is not a SQLite database"],
            |d| {
                write(d, "notes.txt", "not a database\n");
                sql("notes.txt", "SELECT 1")
            },
        ),
        case(
            "database encrypted",
            1,
            &["secret.db is not a SQLite database"],
            |d| {
                let noise: Vec<u8> = (0..65536u32)
                    .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                    .collect();
                write(d, "secret.db", noise);
                sql("secret.db", "SELECT 1")
            },
        ),
        case("database corrupted", 1, &["c.sqlite", "malformed"], |d| {
            let db = shop(d, "c.sqlite");
            scribble(&d.join(&db), 100, 60000);
            sql(&db, "SELECT count(*) FROM orders")
        }),
        case("database locked", 1, &["l.sqlite is busy"], |d| {
            let db = shop(d, "l.sqlite");
            let path = d.join(&db);
            sql(&db, "SELECT count(*) FROM customers").hold(move || {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.execute_batch("BEGIN EXCLUSIVE; UPDATE customers SET name = name;")
                    .unwrap();
                conn
            })
        }),
        case(
            "database missing",
            1,
            &["the database file gone.sqlite does not exist"],
            |_| sql("gone.sqlite", "SELECT 1"),
        ),
        case(
            "database is a folder",
            1,
            &["dbdir", "is a directory"],
            |d| {
                std::fs::create_dir(d.join("dbdir")).unwrap();
                sql("dbdir", "SELECT 1")
            },
        ),
        case("sql that writes", 1, &["the sql tool is read-only"], |d| {
            let db = shop(d, "shop.sqlite");
            sql(&db, "DROP TABLE customers")
        }),
        case(
            "tool arguments not JSON",
            1,
            &["the arguments are not valid JSON"],
            |_| run(["tools", "call", "calculator", "2 + 2"]),
        ),
        case("unknown tool", 1, &["no tool named `nosuch`"], |_| {
            run(["tools", "call", "nosuch", "{}"])
        }),
        // --- Documents to index.
        case(
            "folder to index missing",
            2,
            &["the folder nodocs does not exist"],
            |_| run(["index", "nodocs", "--index", "idx.sqlite"]),
        ),
        case("binary document", 0, &["skipped", "bin.dat: binary"], |d| {
            write(d, "docs/a.md", "returns within 30 days\n");
            write(d, "docs/bin.dat", b"\x7fELF\0\0\x01binary");
            run(["index", "docs", "--index", "idx.sqlite"])
        }),
        case("document not UTF-8", 0, &["latin1.txt: not UTF-8"], |d| {
            write(d, "docs/latin1.txt", b"caf\xe9 cr\xe8me\n");
            run(["index", "docs", "--index", "idx.sqlite"])
        }),
        case(
            "huge document",
            0,
            &["huge.txt", "over the 8 MiB limit"],
            |d| {
                write(d, "docs/huge.txt", "word ".repeat(2 << 20));
                run(["index", "docs", "--index", "idx.sqlite"])
            },
        ),
        case("symlink loop", 0, &["loop", "a symbolic link"], |d| {
            write(d, "docs/a.md", "text\n");
            std::os::unix::fs::symlink("..", d.join("docs/loop")).unwrap();
            run(["index", "docs", "--index", "idx.sqlite"])
        }),
        case(
            "named pipe among documents",
            0,
            &["pipe.md: not a regular file"],
            |d| {
                write(d, "docs/a.md", "text\n");
                let p = std::ffi::CString::new(d.join("docs/pipe.md").to_str().unwrap()).unwrap();
                // SAFETY: mkfifo(3) on a NUL-terminated path we own.
                assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o644) }, 0);
                run(["index", "docs", "--index", "idx.sqlite"])
            },
        ),
        case("unreadable document", 0, &["cannot be read"], |_| {
            // Unreadable even for root: reading a process's memory file at offset 0 fails.
            run(["index", "/proc/self/mem", "--index", "idx.sqlite"])
        }),
        case(
            "index file not SQLite",
            2,
            &["idx.sqlite is not a cairn index", "left untouched"],
            |d| {
                write(d, "docs/a.md", "text\n");
                write(d, "idx.sqlite", "my notes\n");
                run(["index", "docs", "--index", "idx.sqlite"])
            },
        ),
        // Regression: `--index` naming a database used to add the index's tables to it.
        case(
            "index file is another database",
            2,
            &["is not a cairn index", "other tables (customers"],
            |d| {
                write(d, "docs/a.md", "text\n");
                let db = shop(d, "shop.sqlite");
                run(["index", "docs", "--index", &db])
            },
        ),
        case(
            "search with no index",
            2,
            &["there is no index at none.sqlite"],
            |_| run(["search", "--index", "none.sqlite", "returns"]),
        ),
        case("disk full while indexing", 2, &["idx.sqlite"], |d| {
            for i in 0..40 {
                write(
                    d,
                    &format!("docs/{i}.md"),
                    format!("line {i} of many words\n").repeat(400),
                );
            }
            let _ = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
                .args(["index", "docs/0.md", "--index"])
                .arg(d.join("idx.sqlite"))
                .env("CAIRN_HOME", d.join("home"))
                .output()
                .unwrap();
            run(["index", "docs", "--index", "idx.sqlite"]).fsize(64 * 1024)
        }),
        // --- Tool manifests.
        case(
            "manifest missing",
            2,
            &["cannot read the tools manifest nosuch.toml"],
            |_| run(["--tools", "nosuch.toml", "tools", "list"]),
        ),
        case(
            "manifest not TOML",
            2,
            &["tools.toml is not valid", "line 3"],
            |d| manifest(d, "[[tool]]\nname = \"x\"\nargv = [\n"),
        ),
        case("manifest not UTF-8", 2, &["tools.toml", "UTF-8"], |d| {
            write(d, "tools.toml", b"\xff\xfe[[tool]]\n");
            run(["--tools", "tools.toml", "tools", "list"])
        }),
        case(
            "manifest tool without args",
            2,
            &["missing field `args`"],
            |d| {
                manifest(
                    d,
                    "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n",
                )
            },
        ),
        case("manifest empty argv", 2, &["`argv` is empty"], |d| {
            manifest(
                d,
                &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = []\n{ARGS}"),
            )
        }),
        case(
            "manifest bad tool name",
            2,
            &["tool name `x y` is not valid"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x y\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}"))
            },
        ),
        case(
            "manifest duplicate tool",
            2,
            &["a tool named `x` is already registered"],
            |d| {
                let t = format!(
                    "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}"
                );
                manifest(d, &format!("{t}{t}"))
            },
        ),
        case(
            "manifest misspelt schema keyword",
            2,
            &["unsupported keyword `propertys`"],
            |d| {
                manifest(d, "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\nargs = { type = \"object\", propertys = {} }\n")
            },
        ),
        case(
            "manifest unknown field",
            2,
            &["unknown field `timeout_s`"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}timeout_s = 5\n"))
            },
        ),
        case("manifest zero timeout", 2, &["`timeout_secs` is 0"], |d| {
            manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\n{ARGS}timeout_secs = 0\n"))
        }),
        case(
            "manifest schema string not JSON",
            2,
            &["`args` is a string but not valid JSON"],
            |d| {
                manifest(d, "[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/bin/echo\"]\nargs = '{not json'\n")
            },
        ),
        // Regression: a missing program was found only when the tool was called, so a batch
        // failed every task on it.
        case(
            "manifest program missing",
            2,
            &["names the program `/no/such/prog`, which does not exist"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"/no/such/prog\"]\n{ARGS}"))
            },
        ),
        case(
            "manifest program not on PATH",
            2,
            &["`no-such-program-xyz`, which is not in any folder on PATH"],
            |d| {
                manifest(d, &format!("[[tool]]\nname = \"x\"\ndescription = \"d\"\nargv = [\"no-such-program-xyz\"]\n{ARGS}"))
            },
        ),
    ]
}

#[test]
fn every_bad_input_fails_clearly_without_a_panic_and_leaves_its_files_alone() {
    let home = tempfile::tempdir().unwrap();
    let cases = cases();
    assert!(cases.len() >= 40, "the matrix has {} cases", cases.len());
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
