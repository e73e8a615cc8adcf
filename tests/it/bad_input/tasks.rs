//! Bad inputs: task and suite files.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
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
            &[
                "line 1 is not a cairn output line",
                "choose another file for --out",
            ],
            |d| {
                write(d, "out.jsonl", "my notes, not cairn's\n");
                batch(d, b"{\"id\":\"a\",\"task\":\"x\"}\n")
            },
        ),
        // Regression: one non-UTF-8 line ended `cairn chat` (exit 2), the lines after it unrun.
        case(
            "chat line not UTF-8",
            1,
            &[
                "standard input line 1: not valid UTF-8",
                "the line is skipped",
                "stop:",
            ],
            |d| {
                let m = tiny_agent(d);
                run([
                    "chat",
                    "--model",
                    &m,
                    "--max-rounds",
                    "1",
                    "--max-tokens",
                    "16",
                ])
                .env("CAIRN_MEMORY", "mem.sqlite")
                .stdin(b"\xff\xfe caf\xe9\nWhat is 2+2?\n")
            },
        ),
        case(
            "call --json-lines line not UTF-8",
            1,
            &["line 1: not valid UTF-8", "1 question,"],
            |d| {
                write(d, "q.jsonl", b"{\"id\": \"\xff\"}\n");
                let m = tiny(d);
                run(["call", "--json-lines", "q.jsonl", "--model", &m])
            },
        ),
        // Regression: chat and call read a line of any length into memory.
        case(
            "chat line over 1 MiB",
            1,
            &["standard input line 1: the line is", "limited to", "stop:"],
            |d| {
                let m = tiny_agent(d);
                let mut input = vec![b'x'; 3 << 20];
                input.extend(b"\nWhat is 2+2?\n");
                run([
                    "chat",
                    "--model",
                    &m,
                    "--max-rounds",
                    "1",
                    "--max-tokens",
                    "16",
                ])
                .env("CAIRN_MEMORY", "mem.sqlite")
                .stdin(&input)
            },
        ),
    ]
}
