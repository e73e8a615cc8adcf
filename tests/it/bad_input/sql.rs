//! Bad inputs: databases for the sql tool.

use super::*;

pub(super) fn cases() -> Vec<Case> {
    vec![
        case(
            "database not SQLite",
            1,
            &["notes.txt is not a SQLite database"],
            |d| {
                write(d, "notes.txt", "not a database\n");
                sql("notes.txt", "SELECT 1")
            },
        ),
        case(
            "database encrypted",
            1,
            &["secret.db is not a SQLite database"],
            |d| {
                let noise: Vec<u8> = (0..65536u32)
                    .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                    .collect();
                write(d, "secret.db", noise);
                sql("secret.db", "SELECT 1")
            },
        ),
        case("database corrupted", 1, &["c.sqlite", "malformed"], |d| {
            let db = shop(d, "c.sqlite");
            scribble(&d.join(&db), 100, 60000);
            sql(&db, "SELECT count(*) FROM orders")
        }),
        case("database locked", 1, &["l.sqlite is busy"], |d| {
            let db = shop(d, "l.sqlite");
            let path = d.join(&db);
            sql(&db, "SELECT count(*) FROM customers").hold(move || {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.execute_batch("BEGIN EXCLUSIVE; UPDATE customers SET name = name;")
                    .unwrap();
                conn
            })
        }),
        case(
            "database missing",
            1,
            &["the database file gone.sqlite does not exist"],
            |_| sql("gone.sqlite", "SELECT 1"),
        ),
        case(
            "database is a folder",
            1,
            &["dbdir", "is a directory"],
            |d| {
                std::fs::create_dir(d.join("dbdir")).unwrap();
                sql("dbdir", "SELECT 1")
            },
        ),
        case("sql that writes", 1, &["the sql tool is read-only"], |d| {
            let db = shop(d, "shop.sqlite");
            sql(&db, "DROP TABLE customers")
        }),
        // Issue 16: a NUL made SQLite drop the rest of the query silently ("SELECT 1\0;
        // SELECT 2" returned 1).
        case(
            "sql query with a NUL",
            1,
            &[
                "the query holds a NUL character",
                "remove the NUL character",
            ],
            |d| {
                let db = shop(d, "shop.sqlite");
                sql(&db, "SELECT 1\\u0000; SELECT 2")
            },
        ),
        // Issue 16: three 700 MB blobs in one row reached 2.06 GB of memory.
        case(
            "sql three 700 MB blobs",
            1,
            &["longer than the sql tool's limit of 256 KiB", "hint:"],
            |d| {
                let db = shop(d, "shop.sqlite");
                sql(
                    &db,
                    "SELECT randomblob(700000000) a, randomblob(700000000) b, randomblob(700000000) c",
                )
            },
        ),
        // Issue 16: eleven 900 MB blobs ran inside single function calls, past the 2 s limit
        // to the 30 s timeout.
        case(
            "sql eleven 900 MB blobs in one expression",
            1,
            &["longer than the sql tool's limit of 256 KiB"],
            |d| {
                let db = shop(d, "shop.sqlite");
                let q = ["length(randomblob(900000000))"; 11].join(" + ");
                sql(&db, &format!("SELECT {q}"))
            },
        ),
        // Issue 16: a zeroblob is not allocated, but its length is still bounded.
        case(
            "sql zeroblob of 2 GB",
            1,
            &["longer than the sql tool's limit of 256 KiB"],
            |d| {
                let db = shop(d, "shop.sqlite");
                sql(&db, "SELECT length(zeroblob(2000000000))")
            },
        ),
        // Issue 16: a value grown row by row hits the same limit.
        case(
            "sql group_concat past the length limit",
            1,
            &["longer than the sql tool's limit of 256 KiB"],
            |d| {
                let db = shop(d, "shop.sqlite");
                sql(
                    &db,
                    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000) SELECT length(group_concat(printf('%.10d', n))) FROM r",
                )
            },
        ),
        // Issue 16: many values each within the length limit meet the heap limit.
        case(
            "sql 1900 columns of 256 KiB blobs",
            1,
            &["the query needs more memory than the sql tool allows"],
            |d| {
                let db = shop(d, "shop.sqlite");
                let q = vec!["randomblob(262000)"; 1900].join(", ");
                sql(&db, &format!("SELECT {q}"))
            },
        ),
        // Issue 16: the query text itself is bounded.
        case(
            "sql query over 100,000 bytes",
            1,
            &["the sql tool takes at most 100000"],
            |d| {
                let db = shop(d, "shop.sqlite");
                sql(&db, &format!("SELECT 1 -- {}", "x".repeat(100_000)))
            },
        ),
        // Issue 16: a stored value over the length limit cannot be read; the hint says how to
        // measure it.
        case(
            "sql stored value over the length limit",
            1,
            &[
                "longer than the sql tool's limit of 256 KiB",
                "octet_length",
            ],
            |d| {
                let conn = rusqlite::Connection::open(d.join("docs.sqlite")).unwrap();
                conn.execute_batch(
                    "CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT);
                     INSERT INTO docs VALUES (1, printf('%.*c', 1000000, 'x'));",
                )
                .unwrap();
                drop(conn);
                sql("docs.sqlite", "SELECT body FROM docs")
            },
        ),
        // Issue 16: with 6,000 tables, an unknown table's error listed every name.
        case(
            "sql unknown table among 6,000",
            1,
            &["no such table: nosuch", "more", "sqlite_master"],
            |d| {
                let mut conn = rusqlite::Connection::open(d.join("many.sqlite")).unwrap();
                let tx = conn.transaction().unwrap();
                for i in 0..6000 {
                    tx.execute_batch(&format!("CREATE TABLE t{i:04} (id INTEGER, v TEXT);"))
                        .unwrap();
                }
                tx.commit().unwrap();
                drop(conn);
                sql("many.sqlite", "SELECT * FROM nosuch")
            },
        ),
        // Issue 16: slow single calls (instr over two long strings) still stop near the
        // limit.
        case(
            "sql quadratic calls past the time limit",
            1,
            &["the query ran longer than the 2.0 s limit"],
            |d| {
                let db = shop(d, "shop.sqlite");
                sql(
                    &db,
                    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT instr(printf('%.*c', 262000 - n % 2, 'a'), printf('%.*c', 131000 - n % 2, 'a') || 'b') FROM r",
                )
            },
        ),
        case("sql two statements", 1, &["only one SQL statement"], |d| {
            let db = shop(d, "shop.sqlite");
            sql(&db, "SELECT 1; SELECT 2")
        }),
        case("sql empty query", 1, &["the query is empty"], |d| {
            let db = shop(d, "shop.sqlite");
            sql(&db, " ; ")
        }),
        case(
            "tool arguments not JSON",
            1,
            &["the arguments are not valid JSON"],
            |_| run(["tools", "call", "calculator", "2 + 2"]),
        ),
        case("unknown tool", 1, &["no tool named `nosuch`"], |_| {
            run(["tools", "call", "nosuch", "{}"])
        }),
    ]
}
