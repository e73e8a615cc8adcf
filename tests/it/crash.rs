//! Crash safety: `cairn batch` killed with SIGKILL at random points, again and again, on the
//! same output and memory files. After every kill the output holds whole lines (but for a last
//! line the kill cut mid-write, never counted as done), each finished task once, and the
//! memory file passes SQLite's integrity check; a last run completes the rest, in input order,
//! with only whole lines.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{tiny_model, two_job_batch, TinySpec};

const TASKS: usize = 200;
const KILLS: usize = 12;

/// The ids of the whole lines of the output, and whether it ends in a line cut short. Only
/// the last line may be cut: a kill can land inside the write of a line that crosses a page
/// boundary (Linux stops a write to a regular file between pages on SIGKILL). Such a line
/// has no newline, is not counted as done, and the next run removes it before appending.
/// Panics on any other line that is not whole JSON.
fn read_output(out: &Path) -> (Vec<String>, bool) {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    let (body, cut) = match text.rfind('\n') {
        Some(i) => (&text[..=i], i + 1 < text.len()),
        None => ("", !text.is_empty()),
    };
    let ids = body
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a line that is not whole JSON ({e}): {l}"));
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    (ids, cut)
}

fn whole_lines(out: &Path) -> Vec<String> {
    read_output(out).0
}

/// A small xorshift generator: the kill points differ between kills but a failing seed can
/// be replayed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn batch_killed_at_random_points_loses_no_line_and_keeps_memory_whole() {
    let (mdir, model) = tiny_model(&TinySpec::llama());
    let dir = mdir.path();
    let mut tasks = String::new();
    for i in 1..=TASKS {
        // Half the tasks share two sessions; the others get one each (batch's default).
        let session = match i % 4 {
            0 => ",\"session\":\"a\"",
            2 => ",\"session\":\"b\"",
            _ => "",
        };
        tasks.push_str(&format!(
            "{{\"id\":\"t{i}\",\"task\":\"What is {i} times 3?\"{session}}}\n"
        ));
    }
    std::fs::write(dir.join("tasks.jsonl"), &tasks).unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let out = dir.join("out.jsonl");
    let mut survived = 0;
    let mut cut_lines = 0;
    for kill in 0..KILLS {
        let done_before = whole_lines(&out).len();
        if done_before >= TASKS {
            break;
        }
        let mut child = two_job_batch(dir, &model).spawn().unwrap();
        // Kill after a random number of new lines (0: before the first), plus a random few
        // milliseconds, so kills land before, during and between task writes. (A release
        // build runs a task of the tiny model in about a millisecond.)
        let wait_lines = done_before + rng.below(8) as usize;
        let start = Instant::now();
        while whole_lines(&out).len() < wait_lines && start.elapsed() < Duration::from_secs(120) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            survived += 1;
        }
        child.wait().unwrap();

        let (ids, cut) = read_output(&out);
        cut_lines += usize::from(cut);
        let unique: HashSet<&String> = ids.iter().collect();
        assert_eq!(
            unique.len(),
            ids.len(),
            "kill {kill} (seed {seed}): a task is in the output twice: {ids:?}"
        );
        assert!(
            ids.len() >= done_before,
            "kill {kill} (seed {seed}): finished lines were lost"
        );
        if dir.join("mem.sqlite").exists() {
            let conn = rusqlite::Connection::open(dir.join("mem.sqlite")).unwrap();
            let check: String = conn
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap();
            assert_eq!(
                check, "ok",
                "kill {kill} (seed {seed}): memory file damaged"
            );
        }
    }
    assert!(
        survived >= 3,
        "only {survived} kills landed before the batch ended (seed {seed})"
    );

    let last = two_job_batch(dir, &model)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&last.stderr);
    // Exit 1 says some task ended without an answer (random weights); 2 would be a failure.
    assert!(
        matches!(last.status.code(), Some(0 | 1)) && !stderr.contains("panicked"),
        "the last run failed: {}: {stderr}",
        last.status
    );
    let (ids, cut) = read_output(&out);
    assert!(!cut, "the finished output ends in a cut line");
    let expected: Vec<String> = (1..=TASKS).map(|i| format!("t{i}")).collect();
    assert_eq!(ids, expected, "seed {seed}");
    let conn = rusqlite::Connection::open(dir.join("mem.sqlite")).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    // Every task of a session is in memory (a kill between storing the turn and writing the
    // line leaves an unfinished turn behind and the task runs again, so count distinct tasks).
    let turns: i64 = conn
        .query_row(
            "SELECT count(DISTINCT task) FROM turns JOIN sessions ON sessions.id = turns.session_id",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(turns as usize, TASKS, "seed {seed}");
    eprintln!(
        "crash test: {survived} kills survived, {cut_lines} left a cut last line (seed {seed})"
    );
}
