//! `cairn run` and `cairn chat` end to end with the real default preset on the demo data the
//! project ships (`examples/shop.sqlite`, `examples/docs`): every step allowed by its round's
//! schema, every run ending with a stop reason; and the bad inputs that must fail clearly
//! before any model work.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{cairn, preset_path};

const DEFAULT: &str = "qwen2.5-coder-0.5b";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// Reads a trace file and checks what every run must satisfy: one JSON event a line, each
/// step's action among the actions its round allowed, a thought within its bound, arguments
/// that passed the tool's schema, and a stop event at the end. Returns the events.
fn check_trace(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let mut allowed: Vec<String> = Vec::new();
    let mut stops = 0;
    for e in &events {
        match e["event"].as_str().unwrap() {
            "prompt" => {
                allowed = e["allowed"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect()
            }
            "step" => {
                let action = e["action"].as_str().unwrap();
                assert!(
                    allowed.iter().any(|a| a == action),
                    "{action} not in {allowed:?}"
                );
                assert!(e["thought"].as_str().unwrap().chars().count() <= 400);
                if action == "final_answer" {
                    assert!(e["args"]["answer"].is_string(), "{e}");
                }
            }
            "bad_step" => panic!("a step could not be used: {e}"),
            "tool_result" => {
                let obs = e["observation"].as_str().unwrap();
                assert!(
                    !obs.contains("invalid arguments for"),
                    "schema-invalid args: {e}"
                );
            }
            // Issue 19: the plan before round 1 is prose, never a JSON step.
            "plan" => {
                let text = e["text"].as_str().unwrap();
                assert!(!text.contains('{') && !text.contains('}'), "{e}");
            }
            "stop" => stops += 1,
            _ => {}
        }
    }
    assert_eq!(stops, 1, "one stop event per task");
    // A plan, when asked for, comes first, before any round's prompt.
    let plan = events.iter().position(|e| e["event"] == "plan");
    let prompt = events.iter().position(|e| e["event"] == "prompt");
    assert!(plan.is_none() || plan < prompt, "the plan precedes round 1");
    assert_eq!(events.last().unwrap()["event"], "stop");
    events
}

fn run_json(home: &Path, extra: &[&str], task: &str) -> (Value, Vec<Value>) {
    let model = preset_path(DEFAULT);
    let trace = home.join("trace.jsonl");
    let out = cairn(home)
        .arg("run")
        .arg("--json")
        .arg("--model")
        .arg(&model)
        .arg("--trace")
        .arg(&trace)
        .args(extra)
        .arg(task)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert!(stderr.contains("stop: "), "progress on stderr: {stderr}");
    (result, check_trace(&trace))
}

#[test]
fn run_answers_an_arithmetic_task_with_the_calculator() {
    let home = tempfile::tempdir().unwrap();
    let (r, events) = run_json(home.path(), &["--plan-tokens", "96"], "What is 17 * 23?");
    assert!(events.iter().any(|e| e["event"] == "plan"), "{events:?}");
    assert_eq!(r["stop_reason"], "final_answer", "{r}");
    assert!(r["answer"].as_str().unwrap().contains("391"), "{r}");
    assert_eq!(r["tool_calls"][0]["tool"], "calculator", "{r}");
    assert!(r["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(r["generated_tokens"].as_u64().unwrap() > 0);
    assert!(r["rounds"].as_u64().unwrap() >= 2);
}

/// A count the context before round 1 does not hold: the model must query. (A product's
/// price is shown before round 1 with the row of the product the task names, so "What is the
/// price of the Helmet Pro?" needs no query any more; the 0.5B answered it with `1 * 89.9`.)
#[test]
fn run_answers_a_question_about_the_database_with_sql() {
    let home = tempfile::tempdir().unwrap();
    let db = examples().join("shop.sqlite");
    let (r, _) = run_json(
        home.path(),
        &["--db", db.to_str().unwrap()],
        "How many products are in the helmets category?",
    );
    assert_eq!(r["stop_reason"], "final_answer", "{r}");
    assert_eq!(r["tool_calls"][0]["tool"], "sql", "{r}");
    let answer = r["answer"].as_str().unwrap();
    assert!(
        answer.contains('2') && !answer.contains('3') && !answer.contains('8'),
        "{r}"
    );
}

#[test]
fn run_answers_a_question_about_the_documents_with_search() {
    let home = tempfile::tempdir().unwrap();
    let docs = examples().join("docs");
    let db = examples().join("shop.sqlite");
    let (r, events) = run_json(
        home.path(),
        &[
            "--docs",
            docs.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ],
        "How long is the warranty of the Rain Jacket?",
    );
    assert_eq!(r["stop_reason"], "final_answer", "{r}");
    let a = r["answer"].as_str().unwrap();
    assert!(a.contains("3-year") || a.contains("3 year"), "{r}");
    // The passage came from search: shown before round 1 (issue 19), or asked for.
    let context = events.iter().find(|e| e["event"] == "context");
    let shown = context.is_some_and(|c| {
        c["tools"].as_array().unwrap().iter().any(|t| t == "search")
            && c["text"].as_str().unwrap().contains("warranty.md")
    });
    assert!(shown || r["tool_calls"][0]["tool"] == "search", "{r}");
    // --docs without --index keeps its index under HOME/indexes/.
    let indexes: Vec<_> = std::fs::read_dir(home.path().join("indexes"))
        .unwrap()
        .collect();
    assert_eq!(indexes.len(), 1);
    assert!(events[0]["tools"].as_array().unwrap().len() >= 3);
}

/// Two turns of one chat session, then the session resumed. With the default preset (the
/// 1.5B): the 0.5B's first answer here is a coin flip between the price the context shows and
/// `1/89.9 * 89.9` = 1, decided by the order of float sums in the kernels (AVX2 and AVX-512
/// took different sides), which is not what this test is about.
#[test]
fn chat_carries_the_session_from_one_turn_to_the_next_and_resumes() {
    let home = tempfile::tempdir().unwrap();
    let db = examples().join("shop.sqlite");
    let model = preset_path("qwen2.5-coder-1.5b");
    let out = cairn(home.path())
        .args(["chat", "--json", "--session", "shop", "--db"])
        .arg(&db)
        .arg("--model")
        .arg(&model)
        .write_stdin("What is the price of the Helmet Pro?\n\nAnd what would 10 of them cost?\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 2, "one result per non-empty line");
    assert!(
        results[0]["answer"].as_str().unwrap().contains("89.9"),
        "{results:?}"
    );
    assert!(
        results[1]["answer"].as_str().unwrap().contains("899"),
        "{results:?}"
    );
    assert!(results.iter().all(|r| r["session"] == "shop"));

    // The session is in the memory file and a new chat resumes it.
    let out = cairn(home.path())
        .args(["memory", "show", "shop"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("2 turns"), "{shown}");
    let out = cairn(home.path())
        .args(["chat", "--session", "shop", "--model"])
        .arg(&model)
        .write_stdin("/exit\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resumed with 2 earlier turns"), "{stderr}");
}

/// Issue 19, item 8, end to end with the real 0.5B preset: `cairn chat --summaries` with a
/// small history budget writes the summary of a turn that no longer fits (under its schema,
/// the short question kept word for word) into the memory file, and `cairn memory show`
/// prints it.
#[test]
fn chat_with_summaries_keeps_a_summary_of_a_turn_that_no_longer_fits() {
    let home = tempfile::tempdir().unwrap();
    let model = preset_path(DEFAULT);
    let out = cairn(home.path())
        .args([
            "chat",
            "--session",
            "long",
            "--summaries",
            "--history-tokens",
            "60",
            "--model",
        ])
        .arg(&model)
        .write_stdin(
            "Please work out for me what 17 * 23 is, as a whole number, thank you.\n\
             Please work out for me what 120 / 8 is, as a whole number, thank you.\n\
             And what is 2 + 2?\n",
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let out = cairn(home.path())
        .args(["memory", "show", "long"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("3 turns"), "{shown}");
    assert!(
        shown.contains("summary: Asked: Please work out for me what 17 * 23 is"),
        "{stderr}\n{shown}"
    );
}

#[test]
fn an_empty_task_is_refused_before_loading_anything() {
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .args(["run", "  "])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("the task is empty"));
}

#[test]
fn a_db_that_does_not_exist_is_refused_before_loading_the_model() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("nope.sqlite");
    cairn(home.path())
        .args(["run", "--model", "/nonexistent/model.gguf", "--db"])
        .arg(&missing)
        .arg("How many orders?")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("nope.sqlite does not exist"));
    assert!(!missing.exists(), "nothing was created");
}

#[test]
fn a_task_longer_than_the_context_exits_2_with_the_sizes() {
    let home = tempfile::tempdir().unwrap();
    let model = preset_path("smollm2-135m");
    let task = "count these words ".repeat(3000);
    cairn(home.path())
        .args(["run", "--no-memory", "--model"])
        .arg(&model)
        .arg(&task)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "does not fit the model's context",
        ))
        .stderr(predicates::str::contains("shorten the task"));
}

#[test]
fn bad_loop_flags_are_refused_with_the_flag_named() {
    let home = tempfile::tempdir().unwrap();
    for (flag, value, says) in [
        ("--max-rounds", "0", "--max-rounds must be at least 1"),
        ("--stop-when", "(", "is not a valid regular expression"),
        ("--timeout", "-1", "--timeout is -1"),
        ("--self-check", "1.5", "between 0 and 1"),
    ] {
        cairn(home.path())
            .args(["run", &format!("{flag}={value}"), "task"])
            .assert()
            .code(2)
            .stderr(predicates::str::contains(says));
    }
}

/// Issue 19 (room to reason): a word problem is worked out with arithmetic the calculator
/// checked. With `--reason` the 0.5B either works it in plain text with the `reason` action,
/// where each calculation it writes is completed by the calculator, not by the model; or it
/// answers at once showing its arithmetic (`37 * 24 + 100 = 888 + 100 = 988`), which the
/// evidence check confirms with the calculator instead of sending it back. Which of the two it
/// takes is a near-tie that the order of float sums in the kernels decides (AVX2 and AMX
/// answer at once here, AVX-512 reasons first), so either passes, and each is checked.
#[test]
fn run_works_a_word_problem_out_with_checked_arithmetic() {
    let home = tempfile::tempdir().unwrap();
    let (r, events) = run_json(
        home.path(),
        &["--reason"],
        "A shop sells 37 boxes of 24 pens each, and 100 loose pens. How many pens does it sell?",
    );
    assert_eq!(r["stop_reason"], "final_answer", "{r}");
    let answer = r["answer"].as_str().unwrap();
    assert!(answer.contains("988"), "{r}");
    let Some(reason) = events.iter().find(|e| e["event"] == "reason") else {
        // Answered at once: its numbers passed the evidence check on the first try.
        assert_eq!(r["rounds"], 1, "{r}");
        assert!(
            !events.iter().any(|e| e["event"] == "evidence_check"),
            "{events:?}"
        );
        assert!(answer.contains("888"), "the arithmetic shown: {r}");
        return;
    };
    assert_eq!(r["tool_calls"][0]["tool"], "reason", "{r}");
    let checked = reason["checked"].as_array().unwrap();
    assert!(!checked.is_empty(), "{reason}");
    let text = reason["text"].as_str().unwrap();
    for c in checked {
        let (expr, value) = (c[0].as_str().unwrap(), c[1].as_str().unwrap());
        let want = cairn::tools::calculator::evaluate(expr)
            .unwrap()
            .to_string();
        assert_eq!(value, want, "{reason}");
        assert!(text.contains(&format!("= {value}")), "{reason}");
    }
}

/// `--no-reason` leaves the action out of every round's schema.
#[test]
fn no_reason_leaves_the_action_out() {
    let offered = |flags: &[&str]| {
        let home = tempfile::tempdir().unwrap();
        let (_, events) = run_json(home.path(), flags, "What is 6 * 7?");
        let prompts: Vec<&Value> = events.iter().filter(|e| e["event"] == "prompt").collect();
        assert!(!prompts.is_empty());
        prompts.iter().any(|e| {
            e["allowed"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == "reason")
        })
    };
    assert!(!offered(&["--no-reason"]));
    // By default the 0.5B preset is not offered it (under 1 billion parameters: it copied the
    // reasoned example's answer instead of reasoning); --reason offers it.
    assert!(!offered(&[]));
    assert!(offered(&["--reason"]));
    // --reason with a plan is a clear error, not a silent choice of one.
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path())
        .args(["run", "--reason", "--plan-tokens", "64", "What is 6 * 7?"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--reason and --plan-tokens 64"), "{stderr}");
}
