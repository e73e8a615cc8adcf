//! The tool registry and the `sql` tool and user-declared tools behind it: validation,
//! timeouts, truncation, error classes; every write refused with the database file left
//! byte-identical; runaway queries interrupted; `cairn tools` on the command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::tools::manifest::{Manifest, ManifestError};
use cairn::tools::sql::{SqlOptions, SqlTool};
use cairn::tools::{ErrorClass, Observation, RegistryOptions, Tool, ToolError, ToolRegistry};
use predicates::prelude::*;
use serde_json::{json, Value};

use crate::common::cairn;

/// A small shop database: customers, orders, products.
pub fn shop_db(dir: &Path) -> PathBuf {
    let path = dir.join("shop.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT);
         CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, product_id INTEGER, qty INTEGER);
         INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Linus', 'Helsinki'), (3, 'Grace', NULL);
         INSERT INTO products VALUES (1, 'pen', 1.5), (2, 'book', 12.0);
         INSERT INTO orders VALUES (1, 1, 2, 3), (2, 2, 1, 10), (3, 1, 1, 1);",
    )
    .unwrap();
    drop(conn);
    path
}

fn sql_registry(db: &Path) -> ToolRegistry {
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(SqlTool::open(db, SqlOptions::default()).unwrap()))
        .unwrap();
    reg
}

fn sql(reg: &ToolRegistry, q: &str) -> Result<Observation, ToolError> {
    reg.call_value("sql", &json!({ "query": q }))
}

#[test]
fn sql_answers_with_a_compact_table() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let obs = sql(
        &reg,
        "SELECT c.name, sum(o.qty) AS n FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY n DESC",
    )
    .unwrap();
    assert_eq!(obs.text, "name | n\nLinus | 10\nAda | 4");
    let obs = sql(&reg, "SELECT name, city FROM customers WHERE id = 3;").unwrap();
    assert_eq!(obs.text, "name | city\nGrace | NULL");
    let obs = sql(&reg, "SELECT * FROM customers WHERE id = 99").unwrap();
    assert!(obs.text.contains("(no rows)"), "{}", obs.text);
    // Read-only pragmas are fine.
    let obs = sql(&reg, "PRAGMA table_info(orders)").unwrap();
    assert!(obs.text.contains("customer_id"), "{}", obs.text);
}

#[test]
fn the_sql_description_carries_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let d = reg.get("sql").unwrap().description();
    assert!(d.contains("CREATE TABLE customers"), "{d}");
    assert!(d.contains("CREATE TABLE orders"), "{d}");
}

#[test]
fn unknown_tables_and_columns_list_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let e = sql(&reg, "SELECT * FROM employees").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert_eq!(
        e.message,
        "no such table: employees (tables: customers, orders, products)"
    );
    let e = sql(&reg, "SELECT salary FROM customers").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("no such column: salary"),
        "{}",
        e.message
    );
    assert!(e.message.contains("customers.city"), "{}", e.message);
    let e = sql(&reg, "SELEKT 1").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.hint.is_some());
}

#[test]
fn every_write_is_refused_and_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let before = std::fs::read(&db).unwrap();
    let reg = sql_registry(&db);
    let other = dir.path().join("other.sqlite");
    let attempts = [
        "DROP TABLE customers".to_string(),
        "INSERT INTO customers VALUES (9, 'Eve', 'Paris')".into(),
        "UPDATE customers SET name = 'Eve'".into(),
        "DELETE FROM orders".into(),
        format!("ATTACH DATABASE '{}' AS other", other.display()),
        "DETACH DATABASE main".into(),
        "PRAGMA writable_schema=1".into(),
        "PRAGMA user_version=7".into(),
        "PRAGMA journal_mode=DELETE".into(),
        "SELECT load_extension('/tmp/nothing.so')".into(),
        "CREATE TABLE t(x)".into(),
        "CREATE TEMP TABLE t(x)".into(),
        "CREATE INDEX i ON customers(name)".into(),
        "VACUUM".into(),
        "SELECT 1; DROP TABLE customers".into(),
    ];
    for q in &attempts {
        let e = sql(&reg, q).unwrap_err();
        assert_eq!(e.class, ErrorClass::InvalidInput, "{q}: {e:?}");
    }
    let e = sql(&reg, "DROP TABLE customers").unwrap_err();
    assert!(e.message.contains("read-only"), "{}", e.message);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database file changed"
    );
    assert!(!other.exists(), "ATTACH created a file");
    // Still usable afterwards.
    assert!(sql(&reg, "SELECT count(*) AS n FROM customers")
        .unwrap()
        .text
        .ends_with('3'));
}

#[test]
fn a_never_ending_recursive_query_is_interrupted_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let opts = SqlOptions {
        time_limit: Duration::from_millis(500),
        ..SqlOptions::default()
    };
    let tool = SqlTool::open(&db, opts).unwrap();
    let start = Instant::now();
    let e = tool
        .query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        .unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("limit"), "{}", e.message);
    // Endless rows: the first 50 are shown, the counting stops at the limit.
    let text = tool
        .query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
        .unwrap();
    assert!(text.contains("counting stopped"), "{text}");
}

#[test]
fn a_hundred_thousand_rows_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let obs = sql(
        &reg,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) SELECT x FROM c",
    )
    .unwrap();
    let lines: Vec<&str> = obs.text.lines().collect();
    assert_eq!(lines[0], "x");
    assert_eq!(lines[50], "50");
    assert_eq!(lines[51], "(99950 more rows)");
    assert_eq!(lines.len(), 52);
}

#[test]
fn a_missing_database_is_fatal_and_a_non_database_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let e = SqlTool::open(&dir.path().join("nope.sqlite"), SqlOptions::default()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("nope.sqlite"), "{}", e.message);
    assert!(e.message.contains("does not exist"), "{}", e.message);
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, "this is not a database, just some text that is long enough.............................................................................").unwrap();
    let e = SqlTool::open(&junk, SqlOptions::default()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("not a SQLite database"), "{}", e.message);
}

#[test]
fn a_locked_database_is_transient() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let tool = SqlTool::open(&db, SqlOptions::default()).unwrap();
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer
        .execute_batch("BEGIN EXCLUSIVE; INSERT INTO products VALUES (3, 'ink', 2.0);")
        .unwrap();
    let e = tool.query("SELECT count(*) FROM products").unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient, "{e:?}");
    writer.execute_batch("ROLLBACK").unwrap();
    assert!(tool.query("SELECT count(*) FROM products").is_ok());
}

/// A tool that sleeps, then echoes a long text.
struct Slow(Duration, usize);

impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "sleeps".into()
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["n"], "additionalProperties": false})
    }
    fn run(&self, _args: &Value) -> Result<Observation, ToolError> {
        std::thread::sleep(self.0);
        Ok(Observation::new("é".repeat(self.1)))
    }
}

#[test]
fn the_registry_validates_times_out_and_cuts() {
    let mut reg = ToolRegistry::new(RegistryOptions {
        timeout: Duration::from_millis(200),
        max_chars: 100,
    });
    reg.register(Arc::new(Slow(Duration::ZERO, 250))).unwrap();
    let obs = reg.call("slow", r#"{"n": 2}"#).unwrap();
    assert_eq!(obs.cut_chars, 150);
    assert!(obs.text.starts_with(&"é".repeat(100)));
    assert!(
        obs.text.ends_with("[… cut 150 of 250 characters]"),
        "{}",
        obs.text
    );

    let e = reg.call("slow", r#"{"n": "two"}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("args.n: expected an integer"),
        "{}",
        e.message
    );
    let e = reg.call("slow", r#"{"n": 9}"#).unwrap_err();
    assert!(e.message.contains("maximum 5"), "{}", e.message);
    let e = reg.call("slow", r#"{"n": 1, "m": 2}"#).unwrap_err();
    assert!(e.message.contains("unknown property `m`"), "{}", e.message);
    let e = reg.call("slow", r#"{}"#).unwrap_err();
    assert!(e.message.contains("`n` is missing"), "{}", e.message);
    let e = reg.call("slow", "{not json").unwrap_err();
    assert!(e.message.contains("not valid JSON"), "{}", e.message);
    let e = reg.call("nope", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("no tool named `nope` (tools: slow)"),
        "{}",
        e.message
    );

    let mut reg2 = ToolRegistry::new(RegistryOptions {
        timeout: Duration::from_millis(100),
        max_chars: 100,
    });
    reg2.register(Arc::new(Slow(Duration::from_secs(2), 1)))
        .unwrap();
    let start = Instant::now();
    let e = reg2.call("slow", r#"{"n": 1}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(start.elapsed() < Duration::from_secs(1));

    assert!(
        reg.register(Arc::new(Slow(Duration::ZERO, 1))).is_err(),
        "duplicate name"
    );
}

#[test]
fn builtin_schemas_pass_the_checker_and_reject_bad_args() {
    let reg = ToolRegistry::new(RegistryOptions::default());
    let mut reg = reg;
    reg.register(Arc::new(cairn::tools::calculator::CalculatorTool))
        .unwrap();
    let list = reg.list();
    assert_eq!(list[0].name, "calculator");
    assert_eq!(list[0].args_schema["required"], json!(["expression"]));
    let e = reg.call("calculator", r#"{"expr": "1+1"}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert_eq!(
        reg.call("calculator", r#"{"expression": "1234*5678"}"#)
            .unwrap()
            .text,
        "7006652"
    );
}

fn write_manifest(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("tools.toml");
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn manifest_tools_run_without_a_shell_with_args_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "echo_args"
description = "Echoes its arguments."
argv = ["cat"]
args = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }

[[tool]]
name = "fails"
description = "Always fails."
argv = ["sh", "-c", "echo 'city not found' >&2; exit 3"]
args = '{"type": "object"}'

[[tool]]
name = "hangs"
description = "Never ends."
argv = ["sleep", "30"]
timeout_secs = 0.3
args = { type = "object" }
"#,
    );
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    for t in Manifest::load(&m).unwrap().into_tools() {
        reg.register(Arc::new(t)).unwrap();
    }
    let obs = reg
        .call("echo_args", r#"{"city": "Oslo; rm -rf /"}"#)
        .unwrap();
    assert_eq!(obs.text, r#"{"city":"Oslo; rm -rf /"}"#);
    let e = reg.call("echo_args", r#"{"city": 3}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);

    let e = reg.call("fails", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("exit code 3"), "{}", e.message);
    assert!(e.message.contains("city not found"), "{}", e.message);

    let start = Instant::now();
    let e = reg.call("hangs", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(e.message.contains("killed"), "{}", e.message);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_relative_program_runs_from_the_manifest_folder() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("shout.sh");
    std::fs::write(&script, "#!/bin/sh\ntr a-z A-Z\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = write_manifest(
        dir.path(),
        "[[tool]]\nname = \"shout\"\ndescription = \"d\"\nargv = [\"./shout.sh\"]\nargs = { type = \"object\" }\n",
    );
    let tool = Manifest::load(&m).unwrap().into_tools().remove(0);
    assert_eq!(tool.run(&json!({"a": "b"})).unwrap().text, r#"{"A":"B"}"#);
}

#[test]
fn a_hanging_command_that_forks_is_killed_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "forks"
description = "Starts a child that holds stdout."
argv = ["sh", "-c", "sleep 30; echo done"]
timeout_secs = 0.3
args = { type = "object" }
"#,
    );
    let tool = Manifest::load(&m).unwrap().into_tools().remove(0);
    let start = Instant::now();
    let e = tool.run(&json!({})).unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn bad_manifests_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"object\" }\nshell = true\n",
            &["unknown field `shell`", "argv"],
        ),
        (
            "[[tools]]\nname = \"t\"\n",
            &["unknown field `tools`"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"objekt\" }\n",
            &["tool `t`", "not a valid JSON Schema", "unknown type \"objekt\""],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"object\", propertes = { a = { type = \"string\" } } }\n",
            &["unsupported keyword `propertes`"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"string\" }\n",
            &["\"type\": \"object\""],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = '{not json'\n",
            &["not valid JSON"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = []\nargs = { type = \"object\" }\n",
            &["`argv` is empty"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"object\", required = [\"x\"] }\n",
            &["`x` is required but not among the properties"],
        ),
        (
            "[[tool]]\nname = \"t\"\nargv = [\"cat\"]\nargs = { type = \"object\" }\n",
            &["missing field `description`"],
        ),
    ];
    for (body, needles) in cases {
        let m = write_manifest(dir.path(), body);
        let e: ManifestError = Manifest::load(&m).unwrap_err();
        let msg = e.to_string();
        for n in *needles {
            assert!(
                msg.contains(n),
                "manifest:\n{body}\nerror: {msg}\nlacks: {n}"
            );
        }
    }
}

#[test]
fn cairn_tools_lists_and_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    cairn(dir.path())
        .args(["tools", "--db"])
        .arg(&db)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("calculator")
                .and(predicate::str::contains("\"expression\""))
                .and(predicate::str::contains("CREATE TABLE customers"))
                .and(predicate::str::contains(
                    "the tool `search` is not available",
                )),
        );
    cairn(dir.path())
        .args(["tools", "call", "calculator", r#"{"expression": "2^20"}"#])
        .assert()
        .success()
        .stdout("1048576\n");
    cairn(dir.path())
        .args(["tools", "call", "calculator", r#"{"expression": "1/0"}"#])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("error (invalid_input)")
                .and(predicate::str::contains("division by zero"))
                .and(predicate::str::contains("hint:")),
        );
    cairn(dir.path())
        .args([
            "tools",
            "call",
            "sql",
            r#"{"query": "DROP TABLE orders"}"#,
            "--db",
        ])
        .arg(&db)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("read-only"));
    cairn(dir.path())
        .args([
            "tools",
            "--json",
            "call",
            "sql",
            r#"{"query": "SELECT 1"}"#,
            "--db",
        ])
        .arg(dir.path().join("missing.sqlite"))
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("\"class\":\"fatal\"")
                .or(predicate::str::contains("not available")),
        );
    cairn(dir.path())
        .args(["tools", "call", "sql", r#"{"query": "SELECT 1"}"#, "--db"])
        .arg(dir.path().join("missing.sqlite"))
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("missing.sqlite")
                .and(predicate::str::contains("does not exist")),
        );
}

#[test]
fn cairn_tools_reports_a_broken_manifest_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(dir.path(), "[[tool]]\nname = 1\n");
    cairn(dir.path())
        .arg("tools")
        .arg("--tools")
        .arg(&m)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("tools.toml").and(predicate::str::contains("panicked").not()),
        );
}

#[test]
fn recall_searches_memory_facts() {
    use cairn::memory::{FactScope, MemoryStore};
    use cairn::tools::recall::RecallTool;
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::open(&dir.path().join("memory.sqlite")).unwrap();
    store
        .add_fact("The user's cat is called Miso.", FactScope::Global, None)
        .unwrap();
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(RecallTool::new(store, None, 0.9, 5)))
        .unwrap();
    let obs = reg
        .call("recall", r#"{"query": "what is the cat called"}"#)
        .unwrap();
    assert!(obs.text.contains("Miso"), "{}", obs.text);
    let obs = reg.call("recall", r#"{"query": "spaceship"}"#).unwrap();
    assert!(obs.text.contains("no remembered facts"), "{}", obs.text);
}
