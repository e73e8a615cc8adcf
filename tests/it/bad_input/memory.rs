//! Bad inputs: memory files.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        case(
            "memory file not SQLite",
            2,
            &["is not a cairn memory file", "left untouched"],
            |d| {
                write(d, "mem.sqlite", "plain text\n");
                run(["--memory", "mem.sqlite", "memory", "sessions"])
            },
        ),
        case(
            "memory file is another database",
            2,
            &["not a cairn memory file (it has the tables customers"],
            |d| {
                let db = shop(d, "mem.sqlite");
                run(["--memory", &db, "memory", "sessions"])
            },
        ),
        case(
            "memory file corrupted",
            2,
            &["mem.sqlite", "malformed", "pass another file with --memory"],
            |d| {
                let m = memory_file(d, "mem.sqlite");
                scribble(&d.join(&m), 100, 8000);
                run(["--memory", &m, "memory", "sessions"])
            },
        ),
        case(
            "memory file locked by another writer",
            2,
            &["mem.sqlite", "locked"],
            |d| {
                let m = memory_file(d, "mem.sqlite");
                let path = d.join(&m);
                run(["--memory", &m, "memory", "forget", "work"]).hold(move || {
                    let conn = rusqlite::Connection::open(path).unwrap();
                    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
                    conn
                })
            },
        ),
        case(
            "memory folder is a file",
            2,
            &["not/mem.sqlite", "not is not a folder"],
            |d| {
                write(d, "not", "a file, not a folder\n");
                let m = tiny(d);
                run([
                    "--memory",
                    "not/mem.sqlite",
                    "run",
                    "--model",
                    &m,
                    "--max-rounds",
                    "1",
                    "hi",
                ])
            },
        ),
        case("disk full writing memory", 2, &["mem.sqlite"], |d| {
            let m = tiny(d);
            run([
                "--memory",
                "mem.sqlite",
                "run",
                "--model",
                &m,
                "--max-rounds",
                "1",
                "hi",
            ])
            .fsize(2048)
        }),
        // Regression: "no such table: facts" said nothing of the file or what to do.
        case(
            "memory file missing a table",
            2,
            &[
                "mem.sqlite",
                "no such table: facts",
                "pass another file with --memory",
            ],
            |d| {
                let m = memory_file(d, "mem.sqlite");
                let conn = rusqlite::Connection::open(d.join(&m)).unwrap();
                conn.execute_batch("DROP TABLE facts").unwrap();
                drop(conn);
                run(["--memory", &m, "memory", "search", "anything"])
            },
        ),
    ]
}
