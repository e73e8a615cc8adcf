//! The sql tool's resource limits and its schema budget, against hostile queries and
//! databases (issue 16, "hostile inputs"): memory and time per call, NUL bytes, wide results,
//! and a database of 6,000 tables, whose schema must still leave room for the task.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::agent::{Agent, AgentOptions, ScriptedPolicy};
use cairn::model::template::Role;
use cairn::tools::sql::{SqlOptions, SqlTool};
use cairn::tools::{ErrorClass, RegistryOptions, Tool, ToolRegistry};

use crate::common::{answer, write_tiny_gguf, TinySpec};

/// How many tables the big database has: the number in the issue.
const TABLES: usize = 6000;

/// A shop-like database with one table and a few rows.
fn small_db(dir: &Path) -> PathBuf {
    let path = dir.join("small.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);
         INSERT INTO items VALUES (1, 'Helmet', 89.5), (2, 'Gloves', 19.0);",
    )
    .unwrap();
    path
}

/// A database of [`TABLES`] tables `warehouse_0000` … (id, item, crates, bay), and one table
/// `zz_misc` whose only telling word is in a column name.
fn big_db(dir: &Path) -> PathBuf {
    let path = dir.join("big.sqlite");
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    let tx = conn.transaction().unwrap();
    for i in 0..TABLES {
        tx.execute_batch(&format!(
            "CREATE TABLE warehouse_{i:04} (id INTEGER PRIMARY KEY, item TEXT NOT NULL, \
             crates INTEGER NOT NULL, bay TEXT);"
        ))
        .unwrap();
    }
    tx.execute_batch(
        "INSERT INTO warehouse_5821 VALUES (1, 'lanterns', 42, 'B7');
         CREATE TABLE zz_misc (id INTEGER PRIMARY KEY, fluxcapacitor_serial TEXT);",
    )
    .unwrap();
    tx.commit().unwrap();
    path
}

/// What one `cairn` run left: exit code, stderr, wall time, and peak resident memory in KiB
/// (from wait4(2), for this child alone).
struct Ran {
    code: i32,
    stderr: String,
    took: Duration,
    max_rss_kib: i64,
}

/// Runs `cairn ARGS` in `dir`, offline, and measures it.
// The child is reaped by wait4(2), which std's `wait` cannot replace: it gives no rusage.
#[allow(clippy::zombie_processes)]
fn cairn(dir: &Path, args: &[&str]) -> Ran {
    let start = Instant::now();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(args)
        .current_dir(dir)
        .env("CAIRN_HOME", dir.join("home"))
        .env("CAIRN_OFFLINE", "1")
        .env("CAIRN_THREADS", "1")
        .env_remove("CAIRN_MODEL")
        .env_remove("CAIRN_DB")
        .env_remove("CAIRN_MEMORY")
        .env_remove("CAIRN_INDEX")
        .env_remove("CAIRN_TOOLS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in; the pid is our own child, reaped here
    // and not waited for again (dropping a `Child` does not wait).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert!(pid > 0, "wait4 failed: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ran {
        code,
        stderr,
        took: start.elapsed(),
        max_rss_kib: usage.ru_maxrss,
    }
}

/// `cairn --db DB tools call sql {"query": QUERY}`.
fn call(dir: &Path, db: &Path, query: &str) -> Ran {
    let args = serde_json::json!({ "query": query }).to_string();
    cairn(
        dir,
        &["--db", db.to_str().unwrap(), "tools", "call", "sql", &args],
    )
}

// Guards the bug "SQL memory unbounded": three 700 MB blobs in one row reached 2.06 GB RSS.
// Each value is now at most 256 KiB, and SQLite's heap at most 192 MiB, so no call grows the
// process by more than 256 MB, however many large values a row holds.
#[test]
fn no_sql_call_grows_cairn_by_more_than_256_mb() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let base = call(dir.path(), &db, "SELECT 1");
    assert_eq!(base.code, 0, "{}", base.stderr);
    let wide_blobs = format!("SELECT {}", vec!["randomblob(262000)"; 1900].join(", "));
    let wide_copies = format!(
        "SELECT {} FROM (SELECT zeroblob(262000) x)",
        vec!["x"; 1900].join(", ")
    );
    for (query, says) in [
        (
            "SELECT randomblob(700000000) a, randomblob(700000000) b, randomblob(700000000) c",
            "longer than the sql tool's limit of 256 KiB",
        ),
        (
            wide_blobs.as_str(),
            "needs more memory than the sql tool allows",
        ),
        (
            wide_copies.as_str(),
            "needs more memory than the sql tool allows",
        ),
    ] {
        let r = call(dir.path(), &db, query);
        let grew_mb = (r.max_rss_kib - base.max_rss_kib) / 1024;
        assert!(
            grew_mb < 256,
            "{}…: {grew_mb} MB over cairn's own {} MB",
            &query[..60],
            base.max_rss_kib / 1024
        );
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(says), "{}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
}

// Guards the bug "query time limit bypassed inside one function call": eleven
// length(randomblob(900000000)) ran past the 2 s limit to the registry's 30 s timeout, since
// the progress handler does not fire inside a function. Such a value is now an error at once.
#[test]
fn huge_values_inside_one_function_call_fail_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let query = format!(
        "SELECT {}",
        ["length(randomblob(900000000))"; 11].join(" + ")
    );
    let r = call(dir.path(), &db, &query);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.took < Duration::from_secs(2), "took {:?}", r.took);
    assert!(
        r.stderr
            .contains("a value in the query is longer than the sql tool's limit of 256 KiB"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("hint:"), "{}", r.stderr);
}

// Guards the same bug for the slowest single calls that stay within the length limit:
// instr() over two long strings is quadratic (about 0.3 s per call at 256 KiB). One call is
// short enough, and the progress handler, checked about once a row, stops the query soon
// after its limit (before, with values up to 1 GB and checks every 1,000 steps, it ran on for
// tens of seconds).
#[test]
fn quadratic_calls_at_the_length_limit_stop_near_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SqlOptions {
        time_limit: Duration::from_millis(500),
        ..SqlOptions::default()
    };
    let tool = SqlTool::open(&small_db(dir.path()), opts).unwrap();
    let start = Instant::now();
    let e = tool
        .query(
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) \
             SELECT instr(printf('%.*c', 262000 - n % 2, 'a'), printf('%.*c', 131000 - n % 2, 'a') || 'b') FROM r",
        )
        .unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("0.5 s limit"), "{}", e.message);
}

// Guards the bug "a NUL inside a SQL query drops the rest silently": "SELECT 1\0; SELECT 2"
// returned 1, SQLite having read the query only up to the NUL.
#[test]
fn a_nul_in_a_query_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tool = SqlTool::open(&small_db(dir.path()), SqlOptions::default()).unwrap();
    for q in [
        "SELECT 1\0; SELECT 2",
        "SELECT name FROM items\0 WHERE id = 1",
    ] {
        let e = tool.query(q).unwrap_err();
        assert_eq!(e.class, ErrorClass::InvalidInput, "{q:?}");
        assert!(e.message.contains("NUL character"), "{}", e.message);
        assert!(e.hint.as_deref().unwrap_or("").contains("remove"), "{e:?}");
    }
    assert_eq!(tool.query("SELECT 1 AS one").unwrap(), "one\n1");
}

// Guards rows and cells: 50 rows of 200 characters were the only bounds, so 2,000 columns,
// a row of a 100-column table or a number written out in 301 digits came back in full.
#[test]
fn wide_results_are_bounded_with_a_note_of_what_was_cut() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_db(dir.path());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let cols: Vec<String> = (0..100).map(|i| format!("c{i:02} TEXT")).collect();
    conn.execute_batch(&format!("CREATE TABLE wide ({});", cols.join(", ")))
        .unwrap();
    let vals = vec!["printf('%.*c', 300, 'w')"; 100].join(", ");
    for _ in 0..60 {
        conn.execute_batch(&format!("INSERT INTO wide VALUES ({vals});"))
            .unwrap();
    }
    drop(conn);
    let opts = SqlOptions::default();
    let tool = SqlTool::open(&db, opts).unwrap();

    let many: Vec<String> = (1..=2000).map(|i| i.to_string()).collect();
    let text = tool.query(&format!("SELECT {}", many.join(", "))).unwrap();
    assert!(text.chars().count() <= opts.max_result_chars, "{text}");
    assert!(
        text.contains("(1970 more columns not shown: 31, 32, 33"),
        "{text}"
    );
    assert!(text.lines().next().unwrap().ends_with("| 30 | …"), "{text}");

    let text = tool.query("SELECT * FROM wide").unwrap();
    assert!(text.chars().count() <= opts.max_result_chars, "{text}");
    assert!(
        text.contains("(70 more columns not shown: c30, c31"),
        "{text}"
    );
    assert!(
        text.contains("more rows not shown: the result is limited to 1800 characters"),
        "{text}"
    );

    let text = tool
        .query("SELECT 1e300 AS big, -2.5e-300 AS tiny, randomblob(200000) AS b")
        .unwrap();
    assert_eq!(
        text,
        "big | tiny | b\n1e300 | -2.5e-300 | <blob, 200000 bytes>"
    );
}

/// The description of the sql tool over `db`.
fn description(db: &Path) -> String {
    SqlTool::open(db, SqlOptions::default())
        .unwrap()
        .description()
}

// Guards the bug "a database with many tables makes every task fail": with 6,000 tables the
// description alone was 106,909 tokens. It now holds full statements within 6,000 characters,
// then names within 2,000, then the count of the rest and the queries that list them.
#[test]
fn the_description_of_6000_tables_stays_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let db = big_db(dir.path());
    let d = description(&db);
    assert!(d.len() < 9000, "{} characters", d.len());
    assert!(d.contains("with 6001 tables (not all shown below)"), "{d}");
    assert!(d.contains("CREATE TABLE warehouse_0000 (id INTEGER"), "{d}");
    assert!(d.contains("more tables, names only"), "{d}");
    assert!(
        d.contains("more tables not listed here; ask with sql"),
        "{d}"
    );
    assert!(
        d.contains("SELECT name FROM sqlite_master WHERE type='table'"),
        "{d}"
    );
    assert!(d.contains("PRAGMA table_info(name)"), "{d}");
    // The queries it names are ones the tool runs.
    let tool = SqlTool::open(&db, SqlOptions::default()).unwrap();
    let names = tool
        .query("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE '%5821%'")
        .unwrap();
    assert_eq!(names, "name\nwarehouse_5821");
    let cols = tool.query("PRAGMA table_info(warehouse_5821)").unwrap();
    assert!(cols.contains("crates"), "{cols}");
    // An unknown table lists a bounded part of the 6,001 names, the nearest first.
    let e = tool.query("SELECT * FROM warehouse").unwrap_err();
    assert!(e.message.len() < 1200, "{}", e.message.len());
    assert!(e.message.contains("more"), "{}", e.message);
    // A small database's description is as it always was: every name, every statement.
    let small = description(&small_db(dir.path()));
    assert!(small.starts_with("The user's database (SQLite) with the tables items."));
    assert!(small.ends_with("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);"));
}

/// A scripted agent over `db` that answers each task at once.
fn agent_over(db: &Path, tasks: usize) -> Agent<ScriptedPolicy> {
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(SqlTool::open(db, SqlOptions::default()).unwrap()))
        .unwrap();
    let steps = (0..tasks).map(|_| answer("done")).collect();
    Agent::new(
        ScriptedPolicy::new(steps, 32768),
        reg,
        None,
        AgentOptions::default(),
    )
    .unwrap()
}

// Guards the same bug's other half: the tables left out of the description are found by the
// task's words, and their full statements go into the task's message, while the system text
// stays the same for every task (its KV cache is reused).
#[test]
fn the_task_message_carries_the_schemas_of_the_tables_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = big_db(dir.path());
    let mut a = agent_over(&db, 3);
    a.run_task("How many crates of lanterns are in warehouse 5821?", None);
    a.run_task("Which fluxcapacitor serial numbers are known?", None);
    a.run_task("What is 2 + 2?", None);
    let p = a.policy();
    let system: Vec<&str> = p.prompts.iter().map(|m| m[0].content.as_str()).collect();
    assert_eq!(system.len(), 3);
    assert!(system.iter().all(|s| *s == system[0]));
    let user = |i: usize| {
        p.prompts[i]
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .unwrap()
            .content
            .clone()
    };
    let first = user(0);
    assert!(
        first.contains("Tables of the sql database that match this task's words"),
        "{first}"
    );
    // The named table comes first (two words of its name match), within the budget.
    let at = first.find("CREATE TABLE warehouse_5821 (").unwrap();
    assert!(first[..at].matches("CREATE TABLE").count() == 0, "{first}");
    // Issue 19: and a few rows of it, the ones that hold the task's words.
    assert!(first.contains("Some rows of the tables"), "{first}");
    assert!(first.contains("1 | lanterns | 42 | B7"), "{first}");
    assert!(first.len() < 4600, "{}", first.len());
    assert!(first.ends_with("Task: How many crates of lanterns are in warehouse 5821?"));
    let second = user(1);
    assert!(
        second.contains("CREATE TABLE zz_misc (id INTEGER PRIMARY KEY, fluxcapacitor_serial TEXT)"),
        "{second}"
    );
    assert_eq!(user(2), "Task: What is 2 + 2?");
}

// Guards the bug end to end: `cairn run` over 6,000 tables exited 2 ("shorten the task")
// before the model ran at all. With a tiny model whose context holds the budgeted schema, it
// now runs its round.
#[test]
fn cairn_run_over_6000_tables_does_not_run_out_of_context() {
    let dir = tempfile::tempdir().unwrap();
    let db = big_db(dir.path());
    let model = dir.path().join("m.gguf");
    write_tiny_gguf(
        &model,
        &TinySpec {
            context: 16384,
            ..TinySpec::llama()
        },
    );
    let r = cairn(
        dir.path(),
        &[
            "run",
            "How many crates are in warehouse 5821?",
            "--db",
            db.to_str().unwrap(),
            "--model",
            model.to_str().unwrap(),
            "--max-rounds",
            "1",
            "--max-tokens",
            "16",
            "--no-memory",
        ],
    );
    assert_ne!(r.code, 2, "{}", r.stderr);
    assert!(!r.stderr.contains("does not fit"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}
