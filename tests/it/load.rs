//! Under load: a 1 000-task batch with two jobs and memory on, on a tiny random-weight model
//! (so the run takes seconds and what grows is cairn's own state, not a big KV cache). Every
//! line must be there, in order, and the process's resident memory must stay flat: what it
//! holds after the first hundred tasks is what it holds at the end, within a small margin.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{tiny_model, two_job_batch, TinySpec};

const TASKS: usize = 1000;
/// Growth allowed from the 10% mark to the end. Per-task growth of even 20 KB would add
/// 18 MB over 900 tasks and fail this.
const MARGIN_KB: u64 = 16 * 1024;

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn a_thousand_task_batch_with_two_jobs_keeps_every_line_and_flat_memory() {
    let (mdir, model) = tiny_model(&TinySpec::qwen2());
    let dir = mdir.path();
    let mut tasks = String::new();
    for i in 1..=TASKS {
        let session = if i % 2 == 0 {
            format!(",\"session\":\"s{}\"", i % 40)
        } else {
            String::new()
        };
        tasks.push_str(&format!(
            "{{\"id\":\"t{i}\",\"task\":\"What is {i} * 7?\"{session}}}\n"
        ));
    }
    std::fs::write(dir.join("tasks.jsonl"), tasks).unwrap();
    let out = dir.join("out.jsonl");
    let mut child = two_job_batch(dir, &model)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // (lines done, RSS) samples while it runs.
    let mut samples: Vec<(usize, u64)> = Vec::new();
    while child.try_wait().unwrap().is_none() {
        let done = std::fs::read_to_string(&out)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if let Some(kb) = rss_kb(pid) {
            samples.push((done, kb));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    // Exit 1 says some task ended without an answer (random weights); 2 would be a failure.
    assert!(matches!(status.code(), Some(0 | 1)), "{status}: {stderr}");

    let text = std::fs::read_to_string(&out).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("whole JSON lines");
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    let expected: Vec<String> = (1..=TASKS).map(|i| format!("t{i}")).collect();
    assert_eq!(ids, expected);

    let early: Vec<u64> = samples
        .iter()
        .filter(|(d, _)| *d >= TASKS / 10 && *d < TASKS / 5)
        .map(|s| s.1)
        .collect();
    let late: Vec<u64> = samples
        .iter()
        .filter(|(d, _)| *d >= TASKS * 9 / 10)
        .map(|s| s.1)
        .collect();
    assert!(
        !early.is_empty() && !late.is_empty(),
        "too few samples to judge memory: {samples:?}"
    );
    let early_max = *early.iter().max().unwrap();
    let late_max = *late.iter().max().unwrap();
    eprintln!(
        "load: {} samples; RSS at 10-20% of the tasks up to {early_max} KB, at 90-100% up to {late_max} KB",
        samples.len()
    );
    assert!(
        late_max <= early_max + MARGIN_KB,
        "memory grew from {early_max} KB to {late_max} KB over {} tasks",
        TASKS * 8 / 10
    );
}
