//! The batch/suite task-file parser on any bytes: every line ends up a task or a bad line
//! with its 1-based number, ids stay unique, and nothing panics.

#![no_main]

use std::collections::HashSet;

use cairn::eval::parse_task_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (tasks, bad) = parse_task_bytes(data);
    let lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    let mut ids = HashSet::new();
    for (n, t) in &tasks {
        assert!((1..=lines).contains(n), "task line {n} of {lines}");
        assert!(ids.insert(t.id.as_str()), "id `{}` returned twice", t.id);
        assert!(!t.task.trim().is_empty(), "empty task on line {n}");
    }
    for b in &bad {
        assert!(
            (1..=lines).contains(&b.line),
            "bad line {} of {lines}",
            b.line
        );
        assert!(!b.error.is_empty());
    }
    // Text and bytes go through one parser.
    if let Ok(text) = std::str::from_utf8(data) {
        let (t2, b2) = cairn::eval::parse_tasks(text);
        assert_eq!(t2, tasks);
        assert_eq!(b2, bad);
    }
});
