//! MCP tool servers: cairn starting a real server (examples/mcp_test_server.rs, built with the
//! same SDK by `cargo test`) and using its tools through `--mcp`, `[[mcp]]`, `cairn tools`,
//! `cairn mcp ping` and the agent loop, with its errors, hangs, crashes and floods.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::agent::{Agent, AgentOptions, ScriptedPolicy, StopReason};
use cairn::tools::mcp::{McpServer, ServerSpec};
use cairn::tools::{ErrorClass, RegistryOptions, ToolRegistry};
use serde_json::{json, Value};

use crate::common::{answer, cairn, step};
use crate::tools::write_manifest;

/// The test server, built by `cargo test` beside the cairn binary.
fn server() -> PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("cairn");
    let p = bin
        .parent()
        .unwrap()
        .join("examples")
        .join(format!("mcp_test_server{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --release --example mcp_test_server`)",
        p.display()
    );
    p
}

fn flag() -> String {
    format!("t={}", server().display())
}

fn registry(timeout: Duration) -> ToolRegistry {
    let spec = ServerSpec::from_command_line(&flag()).unwrap();
    let mut reg = ToolRegistry::new(RegistryOptions {
        timeout,
        max_chars: 2000,
    });
    let server = McpServer::start(spec.with_timeout_at_most(timeout)).unwrap();
    for t in server.tools().0 {
        reg.register(Arc::new(t)).unwrap();
    }
    reg
}

/// An agent taking `steps` from a script, with the test server's tools and quick retries.
fn scripted_agent(steps: Vec<Value>) -> Agent<ScriptedPolicy> {
    let options = AgentOptions {
        retry_base: Duration::from_millis(1),
        ..AgentOptions::default()
    };
    let tools = registry(Duration::from_secs(10));
    Agent::new(ScriptedPolicy::new(steps, 4096), tools, None, options).unwrap()
}

/// Runs cairn with `args` in `home`, checks it succeeded, and returns its stdout.
fn stdout_of(home: &Path, args: &[&str]) -> String {
    let out = cairn(home).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cairn {args:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tools_json(home: &Path, extra: &[&str]) -> Value {
    let args: Vec<&str> = extra.iter().copied().chain(["tools", "--json"]).collect();
    serde_json::from_str(&stdout_of(home, &args)).unwrap()
}

#[test]
fn mcp_tools_are_listed_with_their_schemas_and_called_like_any_tool() {
    let home = tempfile::tempdir().unwrap();
    let v = tools_json(home.path(), &["--mcp", &flag()]);
    let tools = v["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "t.echo")
        .expect("t.echo listed");
    let schema = &echo["args_schema"];
    assert_eq!(
        schema["properties"]["options"]["properties"]["repeat"]["maximum"],
        5
    );
    assert!(schema.get("$schema").is_none(), "{schema}");
    assert!(
        schema["properties"]["options"]["properties"]["repeat"]
            .get("format")
            .is_none(),
        "a format the decoder does not know is dropped: {schema}"
    );
    assert!(
        tools.iter().any(|t| t["name"] == "calculator"),
        "built-ins stay"
    );

    let echo = r#"{"text": "hi", "options": {"upper": true, "repeat": 2}, "tags": ["x"]}"#;
    assert_eq!(
        stdout_of(
            home.path(),
            &["--mcp", &flag(), "tools", "call", "t.echo", echo]
        ),
        "HI HI\nstructured: {\"text\":\"HI HI\",\"tags\":[\"x\"]}\n"
    );
    // Arguments are checked against the server's schema before the server sees them.
    let out = cairn(home.path())
        .args([
            "--mcp",
            &flag(),
            "tools",
            "call",
            "t.echo",
            r#"{"text": 1}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid_input") && err.contains("options"),
        "{err}"
    );
}

#[test]
fn mcp_errors_keep_the_kind_the_server_gave_them() {
    let reg = registry(Duration::from_secs(10));
    let e = reg
        .call("t.fail", r#"{"message": "no such note"}"#)
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("no such note"), "{e:?}");
    let e = reg.call("t.reject", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("-32602"), "{e:?}");
    let e = reg.call("t.flaky", "{}").unwrap_err();
    assert_eq!(
        e.class,
        ErrorClass::Transient,
        "an internal error is worth a retry: {e:?}"
    );
    let o = reg.call("t.picture", "{}").unwrap();
    assert_eq!(
        o.text,
        "here is the picture\n[image: image/png, about 72 bytes, not shown]"
    );
}

#[test]
fn the_agent_retries_a_transient_mcp_error_and_shows_a_tool_error_to_the_model() {
    let steps = vec![
        step("t.flaky", json!({})),
        step("t.fail", json!({"message": "the note is locked"})),
        answer("done"),
    ];
    let mut a = scripted_agent(steps);
    let r = a.run_task("use the server", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{r:?}");
    assert_eq!(
        r.tool_calls[0].attempts, 3,
        "two internal errors, then ok: {r:?}"
    );
    assert!(r.tool_calls[0].ok);
    assert_eq!(r.tool_calls[1].error_class, Some(ErrorClass::InvalidInput));
    assert!(r.tool_calls[1]
        .error
        .as_deref()
        .unwrap()
        .contains("the note is locked"));
}

#[test]
fn a_hanging_mcp_tool_times_out_and_the_server_keeps_serving() {
    let reg = registry(Duration::from_secs(1));
    let start = Instant::now();
    let e = reg.call("t.hang", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::Timeout, "{e:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(reg.call("t.add", r#"{"a": 2, "b": 3}"#).unwrap().text, "5");
}

/// A server whose tool returns 100 MB: the reply is read and dropped as it comes (never held),
/// and the call fails at once saying why; a 1 MB reply is kept to the output limit and cut
/// with a count.
#[test]
fn an_mcp_reply_of_100_mb_is_dropped_without_holding_it() {
    let reg = registry(Duration::from_secs(60));
    let e = reg.call("t.flood", r#"{"megabytes": 100}"#).unwrap_err();
    assert!(e.message.contains("longer than 16 MiB"), "{e:?}");
    let o = reg.call("t.flood", r#"{"megabytes": 1}"#).unwrap();
    assert!(
        o.text.ends_with("[… cut 1046576 of 1048576 characters]"),
        "{}",
        &o.text[1990..]
    );
    assert_eq!(reg.call("t.add", r#"{"a": 1, "b": 1}"#).unwrap().text, "2");
}

/// A server that exits during a call is started again for the next call, once per task; the
/// second exit ends the task as fatal, naming the exit and the server's last stderr line. The
/// next task gets its restart back.
#[test]
fn a_crashing_mcp_server_is_restarted_once_per_task_then_fatal() {
    let steps = vec![
        step("t.crash", json!({})),
        step("t.add", json!({"a": 1, "b": 2})),
        answer("3"),
    ];
    let mut a = scripted_agent(steps);
    let r = a.run_task("crash it", None);
    assert_eq!(r.stop_reason, StopReason::Fatal, "{r:?}");
    assert_eq!(r.tool_calls[0].attempts, 2, "restarted once: {r:?}");
    let why = r.error.unwrap();
    assert!(why.contains("exit status: 3"), "{why}");
    assert!(
        why.contains("crashing on purpose"),
        "the stderr tail: {why}"
    );
    assert!(why.contains("restarted once"), "{why}");
    let r = a.run_task("add", None);
    assert_eq!(r.stop_reason, StopReason::FinalAnswer, "{r:?}");
    assert!(r.tool_calls[0].ok, "{r:?}");
}

/// A server sees PATH, HOME and what its entry names, not cairn's environment (which may hold
/// secrets); `allow`/`deny` and `names` choose and name its tools.
#[test]
fn manifest_mcp_entries_set_environment_tools_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        &format!(
            r#"
[[mcp]]
name = "notes"
command = "{}"
env = {{ NOTES_LANG = "en" }}
allow = ["add", "environment", "fail"]
deny = ["fail"]
names = {{ add = "plus" }}
"#,
            server().display()
        ),
    );
    let home = tempfile::tempdir().unwrap();
    let v = tools_json(home.path(), &["--tools", m.to_str().unwrap()]);
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"plus") && names.contains(&"notes.environment"),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.contains("echo") || n.contains("fail")),
        "{names:?}"
    );
    let unavailable = v["unavailable"].to_string();
    assert!(
        unavailable.contains("notes.fail") && unavailable.contains("deny"),
        "{unavailable}"
    );

    let out = cairn(home.path())
        .env("SECRET_TOKEN", "do-not-pass")
        .args([
            "--tools",
            m.to_str().unwrap(),
            "tools",
            "call",
            "notes.environment",
            "{}",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = String::from_utf8_lossy(&out.stdout);
    let mut seen: Vec<&str> = seen.lines().collect();
    seen.sort();
    assert_eq!(seen, ["HOME", "NOTES_LANG", "PATH"]);
}

#[test]
fn bad_mcp_entries_and_servers_that_do_not_start_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = cairn(home.path()).args(args).arg("tools").output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--mcp", "no-such-mcp-program-xyz --stdio"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no program `no-such-mcp-program-xyz`"),
        "{err}"
    );
    let (code, err) = run(&[
        "--mcp",
        "bad=sh -c 'echo cannot open the notes >&2; exit 4'",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("MCP server `bad`") && err.contains("handshake"),
        "{err}"
    );
    assert!(
        err.contains("cannot open the notes"),
        "the server's stderr: {err}"
    );
    let (code, err) = run(&["--mcp", &flag(), "--mcp", &flag()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("two MCP servers are named `t`"), "{err}");
    for (entry, want) in [
        (
            "name = \"a\"\ncommand = \"sh\"\nport = 3",
            "unknown field `port`",
        ),
        (
            "name = \"a\"\ncommand = \"sh\"\ntimeout_secs = -1",
            "`timeout_secs` is -1",
        ),
        (
            "name = \"a b\"\ncommand = \"sh\"",
            "server name `a b` is not valid",
        ),
        (
            "name = \"a\"\ncommand = \"./missing\"",
            "`command` names the program `./missing`",
        ),
        (
            "name = \"a\"\ncommand = \"sh\"\nnames = { x = \"sql\" }",
            "taken by a built-in",
        ),
    ] {
        let m = write_manifest(dir.path(), &format!("[[mcp]]\n{entry}\n"));
        let (code, err) = run(&["--tools", m.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{entry}: {err}");
        assert!(err.contains(want), "{entry}: {err}");
    }
}

#[test]
fn mcp_ping_says_whether_a_server_is_usable() {
    let home = tempfile::tempdir().unwrap();
    let text = stdout_of(home.path(), &["mcp", "ping", &flag()]);
    assert!(text.starts_with("t: rmcp"), "{text}");
    assert!(text.contains("with 10 tools, 10 usable"), "{text}");
    assert!(text.contains("  t.echo  Send the text back"), "{text}");
    let out = cairn(home.path())
        .args(["mcp", "ping", "--json", "sh -c 'exit 7'"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(
        v["error"].as_str().unwrap().contains("exit status: 7"),
        "{v}"
    );
}

/// The default preset driving an MCP tool end to end: the tool's schema is in the step
/// grammar, the call is valid, and the server's answer is the one the model reports.
#[test]
fn the_agent_calls_an_mcp_tool_with_the_default_preset() {
    let home = tempfile::tempdir().unwrap();
    let model = crate::common::preset_path("qwen2.5-coder-0.5b");
    let out = cairn(home.path())
        .args(["run", "--json", "--no-memory", "--mcp", &flag(), "--model"])
        .arg(&model)
        .arg("Use the t.echo tool to send back the text 'cairn', upper-cased, repeated 2 times.")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let call = &r["tool_calls"][0];
    assert_eq!(call["tool"], "t.echo", "{r}");
    assert_eq!(call["ok"], true, "{r}");
    assert!(r["answer"].as_str().unwrap().contains("CAIRN CAIRN"), "{r}");
}

/// What a server starts (node under npx, here a `sleep` beside the server) is in its process
/// group and is killed with it when cairn is done. Regression: under load the `sleep`
/// survived, because the registry's call thread held the last reference to the server and
/// the process exited before that thread let go of it, so the server was never closed.
#[test]
fn what_an_mcp_server_starts_is_killed_with_it() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("started");
    let line = format!(
        "t=sh -c 'sleep 3171 & echo $! > {}; exec {}'",
        marker.display(),
        server().display()
    );
    let out = cairn(home.path())
        .args([
            "--mcp",
            &line,
            "tools",
            "call",
            "t.add",
            r#"{"a": 1, "b": 1}"#,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // A killed child of the server is a zombie until init reaps it: gone or `Z` is dead.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(),
        "the server's background child {pid} outlived cairn"
    );
}
