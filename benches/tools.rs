//! Criterion benchmarks of the built-in tools as the agent calls them: the calculator on a
//! typical expression, a typical `sql` query (a join with GROUP BY over a few thousand rows),
//! and `search` over an index of 1 000 generated files. Each goes through
//! `ToolRegistry::call`, so validation, the timeout thread and truncation are included.

use std::sync::Arc;

use cairn::index::Index;
use cairn::tools::calculator::CalculatorTool;
use cairn::tools::search::SearchTool;
use cairn::tools::sql::{SqlOptions, SqlTool};
use cairn::tools::{RegistryOptions, ToolRegistry};
use criterion::{criterion_group, criterion_main, Criterion};

const WORDS: &[&str] = &[
    "deploy", "server", "invoice", "garden", "tomato", "kernel", "budget", "travel", "river",
    "meeting", "python", "recipe", "flour", "engine", "battery", "contract", "museum", "piano",
    "winter", "harbor",
];

fn word(i: usize) -> &'static str {
    WORDS[(i * 7 + i / 3) % WORDS.len()]
}

fn bench_tools(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");

    // A shop database: 200 customers, 50 products, 5 000 orders.
    let db = dir.path().join("shop.sqlite");
    {
        let conn = rusqlite::Connection::open(&db).expect("db");
        conn.execute_batch(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
             CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL);
             CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, product_id INTEGER, qty INTEGER);
             BEGIN;",
        )
        .expect("schema");
        for i in 0..200 {
            conn.execute(
                "INSERT INTO customers VALUES (?1, ?2, ?3)",
                rusqlite::params![i as i64, format!("customer {i}"), word(i)],
            )
            .expect("insert");
        }
        for i in 0..50 {
            conn.execute(
                "INSERT INTO products VALUES (?1, ?2, ?3)",
                rusqlite::params![i as i64, word(i), 1.0 + i as f64],
            )
            .expect("insert");
        }
        for i in 0..5000 {
            conn.execute(
                "INSERT INTO orders VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    i as i64,
                    (i % 200) as i64,
                    (i % 50) as i64,
                    (1 + i % 5) as i64
                ],
            )
            .expect("insert");
        }
        conn.execute_batch("COMMIT").expect("commit");
    }

    // 1 000 files of about 40 lines each.
    let docs = dir.path().join("docs");
    for f in 0..1000 {
        let sub = docs.join(format!("d{}", f % 20));
        std::fs::create_dir_all(&sub).expect("mkdir");
        let text: String = (0..40)
            .map(|l| {
                format!(
                    "line {l} of note {f}: the {} and the {} near the {}\n",
                    word(f + l),
                    word(f * 3 + l),
                    word(l * 11)
                )
            })
            .collect();
        std::fs::write(sub.join(format!("note{f}.md")), text).expect("write");
    }
    let index_path = dir.path().join("index.sqlite");
    Index::open_or_create(&index_path)
        .and_then(|mut i| i.update(&[docs]))
        .expect("index");

    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(CalculatorTool)).expect("calculator");
    reg.register(Arc::new(
        SqlTool::open(&db, SqlOptions::default()).expect("sql"),
    ))
    .expect("sql");
    reg.register(Arc::new(SearchTool::new(&index_path)))
        .expect("search");

    c.bench_function("calculator (sqrt(1234*5678) + 2^20 / 7)", |b| {
        b.iter(|| {
            reg.call(
                "calculator",
                r#"{"expression": "sqrt(1234*5678) + 2^20 / 7"}"#,
            )
            .expect("calc")
        })
    });
    c.bench_function("sql (join + group by, 5k orders)", |b| {
        b.iter(|| {
            reg.call(
                "sql",
                r#"{"query": "SELECT c.city, sum(o.qty * p.price) AS revenue FROM orders o JOIN customers c ON c.id = o.customer_id JOIN products p ON p.id = o.product_id GROUP BY c.city ORDER BY revenue DESC LIMIT 10"}"#,
            )
            .expect("sql")
        })
    });
    c.bench_function("search (1 000 files, top 5)", |b| {
        b.iter(|| {
            reg.call("search", r#"{"query": "tomato garden budget", "top_k": 5}"#)
                .expect("search")
        })
    });
}

criterion_group!(benches, bench_tools);
criterion_main!(benches);
