//! Bad inputs: the files cairn writes (--out, --report, --results, --trace, --memory, --index, chat history) named as one of the inputs or as a file that is not cairn's.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        // Regression: `eval --report x.sqlite --db x.sqlite` replaced the database with a report.
        case(
            "eval --report is the database",
            2,
            &["--report x.sqlite is the same file as --db x.sqlite"],
            |d| {
                let db = shop(d, "x.sqlite");
                eval_suite(d, &["--db", &db, "--report", "x.sqlite"])
            },
        ),
        // Regression: `run --db t.sqlite --trace t.sqlite` appended JSON into the database.
        case(
            "run --trace is the database",
            2,
            &["--trace t.sqlite is the same file as --db t.sqlite"],
            |d| {
                let db = shop(d, "t.sqlite");
                agent_run(d, &["--db", &db, "--trace", "t.sqlite"])
            },
        ),
        case(
            "--trace is a symbolic link to the database",
            2,
            &["--trace link.jsonl is the same file as --db"],
            |d| {
                let db = shop(d, "t.sqlite");
                std::os::unix::fs::symlink("t.sqlite", d.join("link.jsonl")).unwrap();
                agent_run(d, &["--db", &db, "--trace", "link.jsonl"])
            },
        ),
        case(
            "--trace is a hard link to the database",
            2,
            &["--trace hard.jsonl is the same file as --db"],
            |d| {
                let db = shop(d, "t.sqlite");
                std::fs::hard_link(d.join("t.sqlite"), d.join("hard.jsonl")).unwrap();
                agent_run(d, &["--db", &db, "--trace", "hard.jsonl"])
            },
        ),
        case(
            "--trace is someone's notes",
            2,
            &[
                "--trace notes.md exists and is not a cairn trace",
                "left untouched",
            ],
            |d| {
                write(d, "notes.md", "# my notes\n");
                agent_run(d, &["--trace", "notes.md"])
            },
        ),
        case(
            "--trace is the tools manifest",
            2,
            &["--trace tools.toml is the same file as --tools tools.toml"],
            |d| {
                write(d, "tools.toml", "");
                agent_run(d, &["--tools", "tools.toml", "--trace", "tools.toml"])
            },
        ),
        case(
            "--trace in a missing folder",
            2,
            &["--trace nodir/t.jsonl: the folder nodir does not exist"],
            |d| agent_run(d, &["--trace", "nodir/t.jsonl"]),
        ),
        case(
            "eval --report over someone's notes",
            2,
            &["--report notes.md exists and is not a cairn eval report"],
            |d| {
                write(d, "notes.md", "# my notes\nkeep these\n");
                eval_suite(d, &["--report", "notes.md"])
            },
        ),
        case(
            "eval --results over someone's notes",
            2,
            &["--results notes.jsonl exists and is not cairn's result lines"],
            |d| {
                write(d, "notes.jsonl", "{\"mine\": true}\n");
                eval_suite(d, &["--results", "notes.jsonl"])
            },
        ),
        case(
            "eval --results is the database",
            2,
            &["--results x.sqlite is the same file as --db"],
            |d| {
                let db = shop(d, "x.sqlite");
                eval_suite(d, &["--db", &db, "--results", "x.sqlite"])
            },
        ),
        case(
            "batch --out is the database",
            2,
            &["--out shop.sqlite is the same file as --db"],
            |d| {
                let db = shop(d, "shop.sqlite");
                write(d, "t.jsonl", "{\"id\":\"a\",\"task\":\"x\"}\n");
                let m = tiny(d);
                run(["batch", "t.jsonl", "--db", &db, "--out", &db, "--model", &m])
            },
        ),
        case(
            "batch --out is the model",
            2,
            &["--out m.gguf is the same file as --model m.gguf"],
            |d| {
                write(d, "t.jsonl", "{\"id\":\"a\",\"task\":\"x\"}\n");
                let m = tiny(d);
                run(["batch", "t.jsonl", "--out", &m, "--model", &m])
            },
        ),
        // Regression: `batch --out /nonexistent/x.jsonl` created the folders without saying so.
        case(
            "batch --out in a missing folder",
            2,
            &["--out nodir/o.jsonl: the folder nodir does not exist"],
            |d| {
                write(d, "t.jsonl", "{\"id\":\"a\",\"task\":\"x\"}\n");
                let m = tiny(d);
                run(["batch", "t.jsonl", "--out", "nodir/o.jsonl", "--model", &m])
            },
        ),
        case(
            "run --memory is the database",
            2,
            &["--memory shop.sqlite is the same file as --db shop.sqlite"],
            |d| {
                let db = shop(d, "shop.sqlite");
                agent_run_with_memory(d, &["--db", &db, "--memory", &db])
            },
        ),
        case(
            "memory forget with --memory as the database",
            2,
            &["--memory m.sqlite is the same file as --db m.sqlite"],
            |d| {
                let m = memory_file(d, "m.sqlite");
                run(["--db", &m, "--memory", &m, "memory", "forget", "work"])
            },
        ),
        case(
            "run --memory in a missing folder",
            2,
            &["--memory nodir/m.sqlite: the folder nodir does not exist"],
            |d| agent_run_with_memory(d, &["--memory", "nodir/m.sqlite"]),
        ),
        case(
            "index --index is the database",
            2,
            &["--index shop.sqlite is the same file as --db shop.sqlite"],
            |d| {
                write(d, "docs/a.md", "text\n");
                let db = shop(d, "shop.sqlite");
                run(["--db", &db, "index", "docs", "--index", &db])
            },
        ),
        // Regression: `--index /nonexistent/dir/idx.sqlite` created the folders without saying so.
        case(
            "index --index in a missing folder",
            2,
            &["--index nodir/idx.sqlite: the folder nodir does not exist"],
            |d| {
                write(d, "docs/a.md", "text\n");
                run(["index", "docs", "--index", "nodir/idx.sqlite"])
            },
        ),
        case(
            "run --docs with --index as the memory file",
            2,
            &["--memory m.sqlite is the same file as --index m.sqlite"],
            |d| {
                write(d, "docs/a.md", "text\n");
                let m = memory_file(d, "m.sqlite");
                agent_run_with_memory(d, &["--memory", &m, "--index", &m, "--docs", "docs"])
            },
        ),
    ]
}

/// `cairn run` on the tiny model with `extra` flags and no memory.
fn agent_run(d: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--no-memory", "--max-rounds", "1"];
    args.extend_from_slice(extra);
    let m = tiny(d);
    args.extend(["--model", m.as_str(), "hi"]);
    run(args)
}

/// `cairn run` on the tiny model with `extra` flags, memory on.
fn agent_run_with_memory(d: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--max-rounds", "1"];
    args.extend_from_slice(extra);
    let m = tiny(d);
    args.extend(["--model", m.as_str(), "hi"]);
    run(args)
}

/// `cairn eval` of a one-task suite on the tiny model with `extra` flags.
fn eval_suite(d: &Path, extra: &[&str]) -> Run {
    write(
        d,
        "s.jsonl",
        "{\"id\":\"a\",\"task\":\"x\",\"expect\":[\"1\"]}\n",
    );
    let m = tiny(d);
    let mut args = vec!["eval", "s.jsonl", "--model", m.as_str()];
    args.extend_from_slice(extra);
    run(args)
}
