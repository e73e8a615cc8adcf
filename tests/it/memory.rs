//! Memory as the agent and the user meet it: sessions never see each other's steps or private
//! facts, short-term memory fits the token budget without splitting a step, newer facts outrank
//! older equally relevant ones, any text is a safe query, a process killed mid-write loses no
//! committed step, two processes can write one file, foreign or newer files are refused and left
//! untouched, and `cairn memory` shows, searches, exports and forgets.
//!
//! The crash and concurrency tests re-run this test binary as the writing process
//! (`writer_child`, an ignored test that the crash and concurrency tests start by name).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use cairn::memory::{
    FactScope, MemoryError, MemoryItem, MemoryStore, NewFact, StepRecord, TurnEnd, TurnSummary,
    SCHEMA_VERSION,
};
use predicates::prelude::*;

use crate::common::cairn;

fn step(round: i64, action: &str, args: &str, observation: &str) -> StepRecord {
    StepRecord {
        round,
        thought: format!("round {round}"),
        action: action.to_string(),
        args_json: args.to_string(),
        observation: observation.to_string(),
        outcome: "ok".to_string(),
        latency_ms: 5,
        prompt_tokens: 100,
        generated_tokens: 20,
        ..StepRecord::default()
    }
}

fn end(answer: &str) -> TurnEnd {
    TurnEnd {
        answer: answer.to_string(),
        stop_reason: "final_answer".to_string(),
        latency_ms: 50,
        prompt_tokens: 300,
        generated_tokens: 40,
    }
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

#[test]
fn a_second_session_never_sees_the_first_sessions_sql_or_private_facts() {
    let store = MemoryStore::open_in_memory().unwrap();
    let a = store.session("alice").unwrap();
    let b = store.session("bob").unwrap();
    let ta = store.begin_turn(a, "total salary of secret staff").unwrap();
    let sa = store
        .record_step(
            ta,
            &step(
                1,
                "sql",
                r#"{"query":"SELECT SUM(salary) FROM secret_staff"}"#,
                "SUM(salary)\n99000",
            ),
        )
        .unwrap();
    store.finish_turn(ta, &end("99000")).unwrap();
    store
        .add_fact(
            "secret_staff salary total is 99000",
            FactScope::Session(a),
            Some(sa),
        )
        .unwrap();
    store
        .add_fact("salary figures are in dollars", FactScope::Global, None)
        .unwrap();

    let tb = store.begin_turn(b, "total salary of staff").unwrap();
    let short = store.short_term(b, tb, 100_000, &words).unwrap();
    let seen: String = short.iter().map(|i| i.text()).collect();
    assert!(!seen.contains("secret_staff"), "{seen}");
    assert!(
        short.is_empty(),
        "bob has no earlier turns or steps: {short:?}"
    );

    let recalled = store
        .recall(b, "secret_staff salary total", 10, 0.9)
        .unwrap();
    let texts: Vec<&str> = recalled.iter().map(|f| f.fact.text.as_str()).collect();
    assert_eq!(texts, vec!["salary figures are in dollars"]);

    // Asking for another session's turn is refused, not answered.
    let err = store.short_term(b, ta, 100_000, &words).unwrap_err();
    assert!(matches!(err, MemoryError::TurnNotInSession { .. }), "{err}");

    // Alice sees her own fact and the global one; her next turn sees her earlier answer.
    let mine = store.recall(a, "secret_staff salary", 10, 0.9).unwrap();
    assert_eq!(mine.len(), 2);
    let ta2 = store.begin_turn(a, "and the average?").unwrap();
    let short = store.short_term(a, ta2, 100_000, &words).unwrap();
    assert_eq!(short.len(), 1);
    assert!(
        matches!(&short[0], MemoryItem::PastTurn { answer, .. } if answer == "99000"),
        "{short:?}"
    );
    // An earlier turn contributes its task and answer, never its SQL.
    assert!(!short[0].text().contains("SELECT"));
}

#[test]
fn short_term_memory_takes_the_newest_items_that_fit_and_never_splits_a_step() {
    let store = MemoryStore::open_in_memory().unwrap();
    let s = store.session("s").unwrap();
    for (task, answer) in [("first task", "one"), ("second task", "two")] {
        let t = store.begin_turn(s, task).unwrap();
        store.finish_turn(t, &end(answer)).unwrap();
    }
    // A turn that never finished (a crash) is not offered as history.
    store.begin_turn(s, "crashed task").unwrap();
    let t = store.begin_turn(s, "current task").unwrap();
    for round in 1..=3 {
        store
            .record_step(t, &step(round, "calculator", "{}", &"word ".repeat(10)))
            .unwrap();
    }
    let all = store.short_term(s, t, usize::MAX, &words).unwrap();
    let kinds: Vec<String> = all
        .iter()
        .map(|i| match i {
            MemoryItem::PastTurn { task, .. } => task.clone(),
            MemoryItem::TurnSummary { .. } => "summary".to_string(),
            MemoryItem::Step(st) => format!("round {}", st.record.round),
        })
        .collect();
    assert_eq!(
        kinds,
        ["first task", "second task", "round 1", "round 2", "round 3"]
    );

    let cost: Vec<usize> = all.iter().map(|i| words(&i.text())).collect();
    // Exactly the last two steps fit; one token less and only the last one does.
    let two = cost[3] + cost[4];
    let got = store.short_term(s, t, two, &words).unwrap();
    assert_eq!(got, all[3..].to_vec());
    let got = store.short_term(s, t, two - 1, &words).unwrap();
    assert_eq!(got, all[4..].to_vec());
    // The whole history but one token: the oldest turn drops, order stays chronological.
    let total: usize = cost.iter().sum();
    let got = store.short_term(s, t, total - 1, &words).unwrap();
    assert_eq!(got, all[1..].to_vec());
    assert!(store.short_term(s, t, 0, &words).unwrap().is_empty());
}

fn summary(answer: &str) -> TurnSummary {
    TurnSummary {
        asked: "a question".into(),
        found: String::new(),
        answer: answer.into(),
    }
}

/// Issue 19, item 8: earlier turns that no longer fit in full are shown by their summaries
/// (newest first while they fit) instead of being dropped; a turn still without one is the
/// one to summarise, and nothing older than it is shown until it has one.
#[test]
fn turns_that_no_longer_fit_come_by_their_summaries() {
    let store = MemoryStore::open_in_memory().unwrap();
    let s = store.session("s").unwrap();
    let long = "word ".repeat(20);
    let mut turns = Vec::new();
    for i in 1..=4 {
        let t = store.begin_turn(s, &format!("task {i} {long}")).unwrap();
        store.finish_turn(t, &end(&format!("answer {i}"))).unwrap();
        turns.push(t);
    }
    let now = store.begin_turn(s, "current task").unwrap();
    // Room for one turn in full (27 words) and two summaries (9 words each), not three.
    let budget = 27 + 24;
    let names = |items: &[MemoryItem]| -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                MemoryItem::PastTurn { answer, .. } => answer.clone(),
                MemoryItem::TurnSummary { summary, .. } => format!("({})", summary.answer),
                MemoryItem::Step(_) => "step".into(),
            })
            .collect()
    };
    let got = store.short_term(s, now, budget, &words).unwrap();
    assert_eq!(names(&got), ["answer 4"], "no summaries yet: as before");
    let pending = store
        .turns_to_summarise(s, now, budget, 0, &words, 10)
        .unwrap();
    let ids: Vec<_> = pending.iter().map(|t| t.id).collect();
    assert_eq!(ids, [turns[2], turns[1], turns[0]], "newest first");
    assert_eq!(
        store
            .turns_to_summarise(s, now, budget, 0, &words, 1)
            .unwrap()[0]
            .id,
        turns[2]
    );

    // Only the second turn has a summary: the third, without one, ends the selection.
    store.set_summary(turns[1], &summary("two")).unwrap();
    let got = store.short_term(s, now, budget, &words).unwrap();
    assert_eq!(names(&got), ["answer 4"]);
    store.set_summary(turns[2], &summary("three")).unwrap();
    store.set_summary(turns[0], &summary("one")).unwrap();
    let got = store.short_term(s, now, budget, &words).unwrap();
    assert_eq!(
        names(&got),
        ["(two)", "(three)", "answer 4"],
        "oldest first"
    );
    assert_eq!(store.summary(turns[0]).unwrap(), Some(summary("one")));
    assert!(store
        .turns_to_summarise(s, now, budget, 0, &words, 10)
        .unwrap()
        .is_empty());
    // Too little room left for a summary: none is shown, none is asked for.
    let got = store.short_term(s, now, 27 + 23, &words).unwrap();
    assert_eq!(names(&got), ["answer 4"]);
    store.set_summary(turns[2], &summary("three")).unwrap();
    // A part of the budget kept for summaries: fewer turns in full, more turns in all.
    let got = store.short_term(s, now, 60, &words).unwrap();
    assert_eq!(names(&got), ["answer 3", "answer 4"]);
    let got = store.short_term_reserving(s, now, 60, 20, &words).unwrap();
    assert_eq!(names(&got), ["(one)", "(two)", "(three)", "answer 4"]);
    // With room for everything, every turn comes in full.
    let got = store.short_term(s, now, usize::MAX, &words).unwrap();
    assert_eq!(
        names(&got),
        ["answer 1", "answer 2", "answer 3", "answer 4"]
    );
}

/// A memory file written before summaries existed (schema version 1) is migrated in place:
/// its turns are kept and can be summarised.
#[test]
fn a_version_1_memory_file_is_migrated_and_keeps_its_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let turn = {
        let store = MemoryStore::open(&path).unwrap();
        let s = store.session("old").unwrap();
        let t = store.begin_turn(s, "What is 6 * 7?").unwrap();
        store.finish_turn(t, &end("42")).unwrap();
        t
    };
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("ALTER TABLE turns DROP COLUMN summary; PRAGMA user_version = 1;")
            .unwrap();
    }
    let store = MemoryStore::open(&path).unwrap();
    let s = store.find_session("old").unwrap();
    let turns = store.turns(s.id).unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].end.as_ref().unwrap().answer, "42");
    assert_eq!(store.summary(turn).unwrap(), None);
    store.set_summary(turn, &summary("42")).unwrap();
    assert_eq!(store.summary(turn).unwrap(), Some(summary("42")));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
}

#[test]
fn a_newer_fact_outranks_an_older_equally_relevant_one() {
    let store = MemoryStore::open_in_memory().unwrap();
    let s = store.session("s").unwrap();
    let old = store
        .add_fact(
            "the quarterly revenue report lives in sales.csv",
            FactScope::Session(s),
            None,
        )
        .unwrap();
    let new = store
        .add_fact(
            "the quarterly revenue report lives in money.csv",
            FactScope::Session(s),
            None,
        )
        .unwrap();
    // Make the first one two days old, the second one an hour old.
    let now = SystemTime::now();
    store
        .set_fact_created(old, now - Duration::from_secs(48 * 3600))
        .unwrap();
    store
        .set_fact_created(new, now - Duration::from_secs(3600))
        .unwrap();

    let got = store.recall(s, "quarterly revenue report", 5, 0.9).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].fact.id, new);
    assert_eq!(got[1].fact.id, old);
    assert!((got[0].relevance - got[1].relevance).abs() < 1e-9);
    assert!(got[0].score > got[1].score);
    // Recall marks what it returned as used.
    assert_eq!(store.fact(new).unwrap().hits, 1);
    assert!(store.fact(new).unwrap().last_used_at.is_some());

    // A fact months old still ranks by relevance among old facts instead of tying at zero.
    let a = store
        .add_facts(&[
            NewFact {
                text: "ancient invoice numbers invoice".into(),
                scope: FactScope::Global,
                source_step: None,
                created_at: Some(now - Duration::from_secs(400 * 24 * 3600)),
            },
            NewFact {
                text: "ancient invoice ledger from long ago somewhere".into(),
                scope: FactScope::Global,
                source_step: None,
                created_at: Some(now - Duration::from_secs(400 * 24 * 3600)),
            },
        ])
        .unwrap();
    let got = store.recall(s, "invoice", 5, 0.9).unwrap();
    assert_eq!(got[0].fact.id, a[0]);
    assert_eq!(got[1].fact.id, a[1]);

    // A decay outside (0, 1] is refused with the value named.
    let err = store.recall(s, "invoice", 5, 1.5).unwrap_err().to_string();
    assert!(err.contains("1.5"), "{err}");
}

#[test]
fn any_text_is_a_safe_query() {
    let store = MemoryStore::open_in_memory().unwrap();
    let s = store.session("s").unwrap();
    store
        .add_fact(
            "revenue in 2023 was 1.2 million",
            FactScope::Session(s),
            None,
        )
        .unwrap();
    for q in [
        "\"unbalanced",
        "AND OR NOT",
        "NEAR(revenue",
        "revenue:2023",
        "reven*",
        "-revenue",
        "^revenue",
        "'; DROP TABLE facts; --",
        "{col}: [x] + (y)",
        "revenue\" * (2023) OR",
        "💰 revenue",
        "",
        "   ",
        "the of and",
    ] {
        let got = store.recall(s, q, 5, 0.9);
        assert!(got.is_ok(), "query {q:?} failed: {:?}", got.err());
    }
    let got = store.recall(s, "revenue\" * (2023) OR", 5, 0.9).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].fact.text, "revenue in 2023 was 1.2 million");
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

/// Not a test: the writing process of the crash and concurrency tests, which start this test
/// binary with `--ignored --exact memory::writer_child`. It writes steps (and facts) to the
/// file in `CAIRN_TEST_MEMORY_WRITER` and prints `committed ID` after each step is committed.
/// Ignored, so a plain `cargo test` lists it as ignored instead of counting it as a pass.
#[test]
#[ignore = "the writing process of the memory crash and concurrency tests, started by them"]
fn writer_child() {
    let path = std::env::var("CAIRN_TEST_MEMORY_WRITER")
        .expect("run by the crash and concurrency tests with CAIRN_TEST_MEMORY_WRITER set");
    let steps: usize = std::env::var("CAIRN_TEST_MEMORY_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    let session = std::env::var("CAIRN_TEST_MEMORY_SESSION").unwrap_or_else(|_| "crash".into());
    let store = MemoryStore::open(Path::new(&path)).unwrap();
    let shared = store.session("shared").unwrap();
    let s = store.session(&session).unwrap();
    let t = store.begin_turn(s, "write many steps").unwrap();
    let payload = "observation ".repeat(200);
    let mut out = std::io::stdout().lock();
    for round in 0..steps {
        let id = store
            .record_step(t, &step(round as i64, "sql", "{}", &payload))
            .unwrap();
        if round % 10 == 0 {
            store
                .add_fact(
                    &format!("{session} fact number {round}"),
                    FactScope::Session(shared),
                    Some(id),
                )
                .unwrap();
        }
        writeln!(out, "committed {}", id.0).unwrap();
        out.flush().unwrap();
    }
    store.finish_turn(t, &end("done")).unwrap();
}

fn writer(path: &Path, session: &str, steps: Option<usize>) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "memory::writer_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("CAIRN_TEST_MEMORY_WRITER", path)
    .env("CAIRN_TEST_MEMORY_SESSION", session)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(n) = steps {
        cmd.env("CAIRN_TEST_MEMORY_STEPS", n.to_string());
    }
    cmd
}

/// The step id of a `committed ID` line. libtest may print `test NAME ... ` before the first
/// one on the same line, so the marker is searched for, not expected at the start.
fn committed_ids(line: &str) -> Option<i64> {
    let at = line.find("committed ")?;
    line[at + "committed ".len()..].trim().parse().ok()
}

#[test]
fn a_process_killed_mid_write_loses_no_committed_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let mut child = writer(&path, "crash", None).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut ids = Vec::new();
    while ids.len() < 300 {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!("the writer stopped after {} steps", ids.len());
        };
        ids.extend(committed_ids(&line));
    }
    // SIGKILL while it keeps writing; whatever it reported before dying must be on disk.
    child.kill().unwrap();
    for line in lines.map_while(Result::ok) {
        ids.extend(committed_ids(&line));
    }
    let _ = child.wait();

    let store = MemoryStore::open(&path).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let s = store.find_session("crash").unwrap();
    let turns = store.turns(s.id).unwrap();
    assert_eq!(turns.len(), 1);
    assert!(turns[0].end.is_none(), "the killed turn stays unfinished");
    let stored: std::collections::HashSet<i64> = store
        .steps(turns[0].id)
        .unwrap()
        .iter()
        .map(|s| s.id.0)
        .collect();
    let lost: Vec<&i64> = ids.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "committed steps lost: {lost:?}");
    // The file is still writable after the crash.
    store
        .record_step(turns[0].id, &step(999, "sql", "{}", "after"))
        .unwrap();
}

#[test]
fn two_processes_write_one_file_without_lock_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let n = 400;
    let children: Vec<_> = ["one", "two"]
        .iter()
        .map(|name| writer(&path, name, Some(n)).spawn().unwrap())
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "a writer failed:\n{stderr}");
        assert!(
            !stderr.contains("locked") && !stderr.contains("busy"),
            "{stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().filter_map(committed_ids).count(), n);
    }
    let store = MemoryStore::open(&path).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    for name in ["one", "two"] {
        let s = store.find_session(name).unwrap();
        assert_eq!(s.steps, n as i64, "{name}");
    }
    let shared = store.find_session("shared").unwrap();
    assert_eq!(shared.facts, 2 * n.div_ceil(10) as i64);
}

#[test]
fn a_file_from_a_newer_cairn_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    drop(MemoryStore::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 41)
            .unwrap();
        conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = MemoryStore::open(&path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, MemoryError::SchemaTooNew { .. }));
    assert!(
        msg.contains(&format!("version {}", SCHEMA_VERSION + 41))
            && msg.contains(&format!("up to {SCHEMA_VERSION}")),
        "{msg}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .arg("--memory")
        .arg(&path)
        .args(["memory", "sessions"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("newer cairn").and(predicate::str::contains("panicked").not()),
        );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = b"my precious notes, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let err = MemoryStore::open(&path).unwrap_err();
    assert!(matches!(err, MemoryError::NotADatabase { .. }), "{err}");
    assert!(err.to_string().contains("notes.txt"));
    assert_eq!(std::fs::read(&path).unwrap(), text);
    let home = tempfile::tempdir().unwrap();
    cairn(home.path())
        .arg("--memory")
        .arg(&path)
        .args(["memory", "show", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not an SQLite database"));
    assert_eq!(std::fs::read(&path).unwrap(), text);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no journal or WAL beside it: {names:?}");

    // Someone else's SQLite database is refused too, not filled with our tables.
    let other = dir.path().join("shop.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE orders(id INTEGER); INSERT INTO orders VALUES (1);")
        .unwrap();
    let before = std::fs::read(&other).unwrap();
    let err = MemoryStore::open(&other).unwrap_err().to_string();
    assert!(
        err.contains("orders") && err.contains("not a cairn memory file"),
        "{err}"
    );
    assert_eq!(std::fs::read(&other).unwrap(), before);
}

#[test]
fn reopening_keeps_everything_and_the_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("memory.sqlite");
    let s = {
        let store = MemoryStore::open(&path).unwrap();
        let s = store.session("keep").unwrap();
        let t = store.begin_turn(s, "remember me").unwrap();
        store
            .record_step(t, &step(1, "calculator", "{}", "4"))
            .unwrap();
        store
            .add_fact("two plus two is 4", FactScope::Global, None)
            .unwrap();
        s
    };
    let store = MemoryStore::open(&path).unwrap();
    assert_eq!(store.session("keep").unwrap(), s);
    let info = store.find_session("keep").unwrap();
    assert_eq!((info.turns, info.steps), (1, 1));
    assert_eq!(store.recall(s, "two plus two", 3, 0.9).unwrap().len(), 1);
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    // The same fact text in the same scope is stored once.
    let a = store
        .add_fact("two plus two is 4", FactScope::Global, None)
        .unwrap();
    let b = store
        .add_fact("two plus two is 4", FactScope::Global, None)
        .unwrap();
    assert_eq!(a, b);
    assert!(matches!(
        store.create_session("keep"),
        Err(MemoryError::SessionExists(_))
    ));
    // Ids that do not exist are named, not reported as a constraint failure.
    let err = store
        .begin_turn(cairn::memory::SessionId(999), "x")
        .unwrap_err();
    assert!(matches!(err, MemoryError::UnknownSessionId(999)), "{err}");
    let err = store
        .record_step(cairn::memory::TurnId(999), &step(1, "sql", "{}", ""))
        .unwrap_err();
    assert!(matches!(err, MemoryError::UnknownTurn(999)), "{err}");
}

/// A memory file with two sessions, written through the API as the agent would.
fn sample_memory(path: &Path) {
    let store = MemoryStore::open(path).unwrap();
    let a = store.session("payroll").unwrap();
    let t = store
        .begin_turn(a, "How many employees are in sales?")
        .unwrap();
    let mut failed = step(
        1,
        "sql",
        r#"{"query":"SELECT COUNT(*) FROM employes"}"#,
        "no such table: employes",
    );
    failed.outcome = "error".into();
    failed.error_class = Some("invalid_input".into());
    store.record_step(t, &failed).unwrap();
    let ok = store
        .record_step(
            t,
            &step(
                2,
                "sql",
                r#"{"query":"SELECT COUNT(*) FROM employees WHERE dept = 'sales'"}"#,
                "COUNT(*)\n12",
            ),
        )
        .unwrap();
    store
        .finish_turn(t, &end("There are 12 employees in sales."))
        .unwrap();
    store
        .add_fact(
            "There are 12 employees in sales.",
            FactScope::Session(a),
            Some(ok),
        )
        .unwrap();
    let b = store.session("notes").unwrap();
    let t = store.begin_turn(b, "what is 6*7").unwrap();
    store
        .record_step(t, &step(1, "calculator", r#"{"expression":"6*7"}"#, "42"))
        .unwrap();
    store.finish_turn(t, &end("42")).unwrap();
    store
        .add_fact("6*7 is 42", FactScope::Global, None)
        .unwrap();
    // A global fact learned from a payroll step: forgetting payroll forgets it too.
    store
        .add_fact(
            "the employees table has a dept column",
            FactScope::Global,
            Some(ok),
        )
        .unwrap();
}

#[test]
fn cairn_memory_lists_shows_searches_exports_and_forgets() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("memory.sqlite");
    sample_memory(&path);
    let run = |args: &[&str]| {
        let mut cmd = cairn(home.path());
        cmd.arg("--memory").arg(&path).arg("memory").args(args);
        cmd
    };

    run(&["sessions"]).assert().success().stdout(
        predicate::str::contains("payroll")
            .and(predicate::str::contains("notes"))
            .and(predicate::str::is_match(r"payroll\s+1\s+2\s+1").unwrap()),
    );
    let out = run(&["sessions", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);

    run(&["show", "payroll"]).assert().success().stdout(
        predicate::str::contains("task: How many employees are in sales?")
            .and(predicate::str::contains(
                "round 1 · sql · error (invalid_input)",
            ))
            .and(predicate::str::contains(
                "observation: no such table: employes",
            ))
            .and(predicate::str::contains(
                "FROM employees WHERE dept = 'sales'",
            ))
            .and(predicate::str::contains(
                "answer: There are 12 employees in sales.",
            ))
            .and(predicate::str::contains("6*7").not()),
    );

    run(&["search", "employees \"sales"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("There are 12 employees in sales.")
                .and(predicate::str::contains("session payroll")),
        );
    run(&["search", "42"])
        .assert()
        .success()
        .stdout(predicate::str::contains("global"));

    let out = run(&["export", "payroll", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["session"]["name"], "payroll");
    assert_eq!(v["turns"][0]["steps"].as_array().unwrap().len(), 2);
    assert_eq!(v["turns"][0]["steps"][0]["error_class"], "invalid_input");
    assert_eq!(v["facts"][0]["text"], "There are 12 employees in sales.");

    run(&["show", "nobody"]).assert().code(2).stderr(
        predicate::str::contains("no session named `nobody`")
            .and(predicate::str::contains("payroll"))
            .and(predicate::str::contains("panicked").not()),
    );
    run(&["forget", "--fact", "999"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no fact with id 999"));

    let fact_id = MemoryStore::open(&path)
        .unwrap()
        .search_facts("42", 1, 0.9)
        .unwrap()[0]
        .fact
        .id
        .0;
    run(&["forget", "--fact", &fact_id.to_string()])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("forgot fact #{fact_id}")));
    run(&["search", "42", "--json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("6*7 is 42").not());

    run(&["forget", "payroll"])
        .assert()
        .success()
        .stdout(predicate::str::contains("2 steps, 2 facts"));
    run(&["sessions"])
        .assert()
        .success()
        .stdout(predicate::str::contains("payroll").not());
    run(&["search", "employees"]).assert().success().stdout(
        predicate::str::contains("12 employees")
            .not()
            .and(predicate::str::contains("dept column").not()),
    );
    assert_eq!(
        MemoryStore::open(&path).unwrap().integrity_check().unwrap(),
        "ok"
    );
}

#[test]
fn reading_commands_never_create_the_memory_file() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("none").join("memory.sqlite");
    cairn(home.path())
        .arg("--memory")
        .arg(&path)
        .args(["memory", "sessions"])
        .assert()
        .success();
    cairn(home.path())
        .arg("--memory")
        .arg(&path)
        .args(["memory", "show", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not exist yet"));
    assert!(!path.exists());
    // By default the memory file lives in the private home the tests give cairn.
    cairn(home.path())
        .args(["memory", "sessions", "--json"])
        .assert()
        .success()
        .stdout("[]\n");
    cairn(home.path())
        .args(["--memory-decay", "0", "memory", "sessions"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--memory-decay"));
}
