//! `cairn batch` and `cairn eval` end to end: output in input order, bad lines reported and
//! skipped, resumption after a kill with no line lost or repeated, shards that cover every
//! task once, and the eval report's metrics on the real default preset.

use std::path::Path;
use std::time::{Duration, Instant};

use predicates::prelude::*;
use serde_json::Value;

use crate::common::{cairn, preset_path};

fn write_tasks(path: &Path, n: usize, with_sessions: bool) {
    let mut text = String::new();
    for i in 1..=n {
        let session = if with_sessions && i % 2 == 0 {
            ",\"session\":\"even\""
        } else {
            ""
        };
        text.push_str(&format!(
            "{{\"id\":\"t{i}\",\"task\":\"What is {i} + {i}?\"{session}}}\n"
        ));
    }
    std::fs::write(path, text).unwrap();
}

fn ids(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("every output line is whole JSON");
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

fn tiny() -> std::path::PathBuf {
    preset_path("smollm2-135m")
}

#[test]
fn batch_writes_one_line_per_task_in_input_order_and_skips_bad_lines() {
    let home = tempfile::tempdir().unwrap();
    let input = home.path().join("in.jsonl");
    write_tasks(&input, 4, true);
    let mut text = std::fs::read_to_string(&input).unwrap();
    text.insert_str(0, "{\"id\": \"broken\", \"task\": \n");
    std::fs::write(&input, text).unwrap();
    let out = home.path().join("out.jsonl");
    let o = cairn(home.path())
        .args(["batch", "--jobs", "2", "--max-rounds", "2", "--model"])
        .arg(tiny())
        .arg("--out")
        .arg(&out)
        .arg(&input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a bad line means exit 1: {stderr}"
    );
    assert!(stderr.contains("line 1: not valid JSON"), "{stderr}");
    assert!(stderr.contains("4/4 done"), "progress: {stderr}");
    assert_eq!(ids(&out), vec!["t1", "t2", "t3", "t4"]);
    for l in std::fs::read_to_string(&out).unwrap().lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        for key in [
            "answer",
            "stop_reason",
            "rounds",
            "tool_calls",
            "prompt_tokens",
            "generated_tokens",
            "latency_ms",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {l}");
        }
    }
    // The tasks of session `even` were recorded in it, in file order.
    let shown = cairn(home.path())
        .args(["memory", "show", "even"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    let (a, b) = (shown.find("What is 2 + 2?"), shown.find("What is 4 + 4?"));
    assert!(a.is_some() && b.is_some() && a < b, "{shown}");
}

#[test]
fn an_interrupted_batch_resumes_without_losing_or_repeating_a_line() {
    let home = tempfile::tempdir().unwrap();
    let input = home.path().join("in.jsonl");
    write_tasks(&input, 6, false);
    let out = home.path().join("out.jsonl");
    let bin = assert_cmd::cargo::cargo_bin("cairn");
    let mut child = std::process::Command::new(&bin)
        .env("CAIRN_HOME", home.path())
        .env("CAIRN_OFFLINE", "1")
        .env("CAIRN_THREADS", "2")
        .args(["batch", "-q", "--no-memory", "--max-rounds", "2", "--model"])
        .arg(tiny())
        .arg("--out")
        .arg(&out)
        .arg(&input)
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let n = std::fs::read_to_string(&out)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n >= 2 || start.elapsed() > Duration::from_secs(240) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = ids(&out);
    assert!(
        !before.is_empty() && before.len() < 6,
        "killed midway: {before:?}"
    );
    cairn(home.path())
        .args(["batch", "--no-memory", "--max-rounds", "2", "--model"])
        .arg(tiny())
        .arg("--out")
        .arg(&out)
        .arg(&input)
        .assert()
        .success()
        .stderr(predicates::str::contains(format!(
            "{} already in",
            before.len()
        )));
    assert_eq!(ids(&out), vec!["t1", "t2", "t3", "t4", "t5", "t6"]);
}

#[test]
fn shards_split_a_file_so_every_task_runs_exactly_once() {
    let home = tempfile::tempdir().unwrap();
    let input = home.path().join("in.jsonl");
    write_tasks(&input, 5, true);
    let mut all = Vec::new();
    for shard in ["0/2", "1/2"] {
        let out = home.path().join(format!("out-{}.jsonl", &shard[..1]));
        cairn(home.path())
            .args([
                "batch",
                "--no-memory",
                "--max-rounds",
                "1",
                "--shard",
                shard,
                "--model",
            ])
            .arg(tiny())
            .arg("--out")
            .arg(&out)
            .arg(&input)
            .assert()
            .success();
        all.extend(ids(&out));
    }
    all.sort();
    assert_eq!(all, vec!["t1", "t2", "t3", "t4", "t5"]);
}

#[test]
fn eval_reports_cairn_beside_the_naive_baseline() {
    let home = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // One task of each of three kinds from the suite in the repo.
    let suite = std::fs::read_to_string(root.join("tests/suites/shop.jsonl")).unwrap();
    let subset: Vec<&str> = suite
        .lines()
        .filter(|l| {
            l.contains("\"id\": \"calc-1\"")
                || l.contains("\"id\": \"sql-1\"")
                || l.contains("\"id\": \"doc-1\"")
        })
        .collect();
    assert_eq!(subset.len(), 3);
    let path = home.path().join("subset.jsonl");
    std::fs::write(&path, subset.join("\n") + "\n").unwrap();
    let report = home.path().join("report.md");
    let o = cairn(home.path())
        .args(["eval", "--json", "--baseline", "naive,alone", "--model"])
        .arg(preset_path("qwen2.5-coder-0.5b"))
        .arg("--db")
        .arg(root.join("examples/shop.sqlite"))
        .arg("--docs")
        .arg(root.join("examples/docs"))
        .arg("--report")
        .arg(&report)
        .arg(&path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["loop"], "cairn");
    assert_eq!(v["tasks"], 3);
    assert_eq!(v["valid_call_rate"], 1.0, "{v}");
    for key in [
        "success_rate",
        "tool_success_rate",
        "avg_rounds",
        "avg_latency_ms",
        "p95_latency_ms",
        "dead_loop_rate",
        "avg_prompt_tokens",
        "avg_generated_tokens",
        "forced_share",
        "mask_share",
        "stop_reasons",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert!(v["forced_share"].as_f64().unwrap() > 0.0);
    assert_eq!(v["by_kind"].as_object().unwrap().len(), 3);
    assert_eq!(v["baseline"]["loop"], "naive");
    assert_eq!(v["baseline"]["forced_share"], 0.0);
    // Issue 19: the model alone, reasoning with no tools, beside both loops.
    assert_eq!(v["baselines"][1]["loop"], "alone");
    assert_eq!(v["baselines"][1]["tool_calls"], 0);
    assert_eq!(v["baselines"][1]["avg_rounds"], 1.0);
    let mask = v["mask_share"].as_f64().unwrap();
    assert!(mask > 0.0 && mask < 1.0, "{v}");
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(md.contains("| metric | cairn | naive | alone |"), "{md}");
    assert!(md.contains("| schema-valid tool calls | 100% |"), "{md}");
}

#[test]
fn eval_refuses_a_suite_task_without_expected_answers() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("suite.jsonl");
    std::fs::write(&path, "{\"id\": \"a\", \"task\": \"What is 1 + 1?\"}\n").unwrap();
    cairn(home.path())
        .args(["eval", "--model", "/nonexistent.gguf"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "task `a` has no \"expect\" answers",
        ));
}

/// Regression: every `cairn eval` stopped before its end (Ctrl-C, a kill) left its private
/// memory file in the temp folder for good. An eval now removes its own when it ends, and
/// those of evals whose process is gone when it starts; a running process's file stays.
#[test]
fn eval_removes_its_memory_file_and_those_of_killed_evals() {
    let (dir, model) = crate::common::tiny_model(&crate::common::TinySpec::llama());
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // A process id no system hands out (above Linux's limit of 2^22), and this test's own.
    let dead = tmp.join("cairn-eval-4999999-cairn-17.sqlite");
    let live = tmp.join(format!("cairn-eval-{}-cairn-17.sqlite", std::process::id()));
    let other = tmp.join("cairn-eval-notes.sqlite");
    for f in [&dead, &live, &other] {
        std::fs::write(f, "x").unwrap();
    }
    let mut wal = dead.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::write(&wal, "x").unwrap();
    let suite = dir.path().join("suite.jsonl");
    std::fs::write(
        &suite,
        "{\"id\": \"a\", \"task\": \"What is 1 + 1?\", \"expect\": [\"2\"]}\n",
    )
    .unwrap();
    cairn(dir.path())
        .env("TMPDIR", &tmp)
        .args(["eval", "-q", "--max-rounds", "1", "--model"])
        .arg(&model)
        .arg(&suite)
        .assert()
        .success();
    let mut left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    let mut want = vec![
        "cairn-eval-notes.sqlite".to_string(),
        live.file_name().unwrap().to_string_lossy().into_owned(),
    ];
    want.sort();
    assert_eq!(left, want);
}

/// A finished task's output line, as a batch writes it.
fn done_line(id: &str) -> String {
    format!(
        "{{\"id\":\"{id}\",\"answer\":\"x\",\"stop_reason\":\"final_answer\",\"rounds\":1,\"tool_calls\":[],\"prompt_tokens\":1,\"generated_tokens\":1,\"latency_ms\":1}}\n"
    )
}

/// Regression: a batch killed after its last line was written but before the file was put
/// in input order stayed in finishing order, because a re-run with nothing left to run
/// returned before that step (found by the crash test).
#[test]
fn a_rerun_with_nothing_left_still_puts_the_output_in_input_order() {
    let (dir, model) = crate::common::tiny_model(&crate::common::TinySpec::llama());
    let input = dir.path().join("in.jsonl");
    write_tasks(&input, 3, false);
    let out = dir.path().join("out.jsonl");
    std::fs::write(
        &out,
        [done_line("t3"), done_line("t1"), done_line("t2")].concat(),
    )
    .unwrap();
    cairn(dir.path())
        .args(["batch", "--no-memory", "--model"])
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .arg(&input)
        .assert()
        .success()
        .stderr(
            predicates::str::contains("3 already in").and(predicates::str::contains("0 to run")),
        );
    assert_eq!(ids(&out), vec!["t1", "t2", "t3"]);
}

/// Regression: a line cut short by a kill (no newline at the end) had the next run's first
/// line appended to it, so that task's line was unreadable and dropped at the end.
#[test]
fn a_cut_last_line_is_removed_before_new_lines_are_appended() {
    let (dir, model) = crate::common::tiny_model(&crate::common::TinySpec::llama());
    let input = dir.path().join("in.jsonl");
    write_tasks(&input, 2, false);
    let out = dir.path().join("out.jsonl");
    std::fs::write(&out, done_line("t1") + "{\"id\":\"t2\",\"answ").unwrap();
    let o = cairn(dir.path())
        .args([
            "batch",
            "--no-memory",
            "--max-rounds",
            "1",
            "--max-tokens",
            "32",
            "--model",
        ])
        .arg(&model)
        .arg("--out")
        .arg(&out)
        .arg(&input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{stderr}");
    assert!(stderr.contains("1 unreadable lines"), "{stderr}");
    assert!(stderr.contains("1 to run"), "{stderr}");
    assert_eq!(ids(&out), vec!["t1", "t2"]);
}
