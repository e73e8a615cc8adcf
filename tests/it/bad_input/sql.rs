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
