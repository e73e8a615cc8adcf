//! The tool registry and the `sql` tool and user-declared tools behind it: validation,
//! timeouts, truncation, error classes; every write refused with the database file left
//! byte-identical; runaway queries interrupted; `cairn tools` on the command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::tools::manifest::{Manifest, ManifestError};
use cairn::tools::sql::{SqlOptions, SqlTool};
use cairn::tools::{ErrorClass, Observation, RegistryOptions, Tool, ToolError, ToolRegistry};
use predicates::prelude::*;
use serde_json::{json, Value};

use crate::common::cairn;

/// A small shop database: customers, orders, products.
pub fn shop_db(dir: &Path) -> PathBuf {
    let path = dir.join("shop.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT);
         CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, product_id INTEGER, qty INTEGER);
         INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Linus', 'Helsinki'), (3, 'Grace', NULL);
         INSERT INTO products VALUES (1, 'pen', 1.5), (2, 'book', 12.0);
         INSERT INTO orders VALUES (1, 1, 2, 3), (2, 2, 1, 10), (3, 1, 1, 1);",
    )
    .unwrap();
    drop(conn);
    path
}

fn sql_registry(db: &Path) -> ToolRegistry {
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(SqlTool::open(db, SqlOptions::default()).unwrap()))
        .unwrap();
    reg
}

fn sql(reg: &ToolRegistry, q: &str) -> Result<Observation, ToolError> {
    reg.call_value("sql", &json!({ "query": q }))
}

#[test]
fn sql_answers_with_a_compact_table() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let obs = sql(
        &reg,
        "SELECT c.name, sum(o.qty) AS n FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY n DESC",
    )
    .unwrap();
    assert_eq!(obs.text, "name | n\nLinus | 10\nAda | 4");
    let obs = sql(&reg, "SELECT name, city FROM customers WHERE id = 3;").unwrap();
    assert_eq!(obs.text, "name | city\nGrace | NULL");
    let obs = sql(&reg, "SELECT * FROM customers WHERE id = 99").unwrap();
    assert!(obs.text.contains("(no rows)"), "{}", obs.text);
    // Read-only pragmas are fine.
    let obs = sql(&reg, "PRAGMA table_info(orders)").unwrap();
    assert!(obs.text.contains("customer_id"), "{}", obs.text);
}

/// Regression (issue 19): asked for the oldest member, the model ordered by `dob DESC`, read
/// the first row (born 2016) as the oldest and answered with a child. A result ordered by a
/// date says which end comes first.
#[test]
fn a_result_ordered_by_a_date_says_which_end_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("members.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE members (member_no INTEGER PRIMARY KEY, name TEXT, dob TEXT);
         CREATE TABLE visits (id INTEGER PRIMARY KEY, member_no INTEGER, visit_date TEXT, fee REAL);
         INSERT INTO members VALUES (1, 'Olivia', '1985-02-11'), (2, 'Mia', '2016-01-14'), (3, 'George', '1948-07-30');
         INSERT INTO visits VALUES (1, 1, '2025-03-10', 48), (2, 1, '2025-06-02', 75);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let obs = sql(
        &reg,
        "SELECT name, dob FROM members ORDER BY dob DESC LIMIT 1",
    )
    .unwrap();
    assert_eq!(
        obs.text,
        "name | dob\nMia | 2016-01-14\n(ordered by dob DESC: the latest birth date first: the youngest first)"
    );
    // Not selected, qualified, ascending.
    let obs = sql(&reg, "SELECT m.name FROM members m ORDER BY m.dob LIMIT 1").unwrap();
    assert!(
        obs.text
            .ends_with("(ordered by dob: the earliest birth date first: the oldest first)"),
        "{}",
        obs.text
    );
    let obs = sql(
        &reg,
        "SELECT fee, visit_date FROM visits ORDER BY visit_date DESC",
    )
    .unwrap();
    assert!(
        obs.text.ends_with(
            "(ordered by visit_date DESC: the latest date first: the most recent first)"
        ),
        "{}",
        obs.text
    );
    // Not a date, an expression, or no rows: no note.
    for q in [
        "SELECT name FROM members ORDER BY name DESC",
        "SELECT fee FROM visits ORDER BY fee * 2 DESC",
        "SELECT name FROM members WHERE dob > '2100' ORDER BY dob",
    ] {
        let obs = sql(&reg, q).unwrap();
        assert!(!obs.text.contains("(ordered by"), "{q}: {}", obs.text);
    }
}

/// Regression (issue 19): asked to "List the names in the employees table." of a shop with no
/// such table, the model (its queries can name only real tables) listed the customers as
/// employees. The context before round 1 says the table does not exist.
#[test]
fn a_table_the_task_names_that_does_not_exist_is_named_before_round_one() {
    let dir = tempfile::tempdir().unwrap();
    let tool = SqlTool::open(&shop_db(dir.path()), SqlOptions::default()).unwrap();
    let ctx = tool
        .context_for("List the names in the employees table.", None)
        .unwrap();
    assert!(
        ctx.starts_with("This database has no table named employees (its tables: "),
        "{ctx}"
    );
    assert!(ctx.contains("customers") && ctx.contains("orders"), "{ctx}");
    assert_eq!(
        tool.missing_tables("Show table `staff` and the Staff table"),
        ["Staff"]
    );
    // Tables that exist, in either number and any case, and words that are no table's name.
    for task in [
        "List the names in the customers table.",
        "What is in the Customer table?",
        "Which column of the orders table holds the quantity?",
        "Is the whole table sorted?",
    ] {
        assert!(tool.missing_tables(task).is_empty(), "{task}");
    }
}

/// Regression (issue 19): asked for the unpaid consultation fees, the model wrote
/// `reason = 'consultation'` (the visits' reasons are "vaccination", "annual check-up", …), got
/// NULL and answered from a guess. A query that finds nothing says which values the column
/// it compared holds.
#[test]
fn a_query_that_finds_nothing_names_the_values_its_condition_missed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clinic.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE visit (visit_id INTEGER PRIMARY KEY, reason TEXT, fee REAL, paid_at TEXT);
         INSERT INTO visit VALUES (1, 'vaccination', 48, NULL), (2, 'annual check-up', 48, '2025-01-08'),
             (3, 'vaccination', 48, '2025-01-21'), (4, 'owner''s request', 62, NULL);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let obs = sql(
        &reg,
        "SELECT SUM(fee) FROM visit v WHERE v.reason = 'consultation' AND paid_at IS NULL",
    )
    .unwrap();
    assert_eq!(
        obs.text,
        "SUM(fee)\nNULL\n(no row of visit has reason = 'consultation'; the values of reason there \
         are: 'vaccination', 'annual check-up', 'owner''s request')"
    );
    let obs = sql(&reg, "SELECT * FROM visit WHERE reason LIKE '%consult%'").unwrap();
    assert!(
        obs.text.starts_with("visit_id | reason | fee | paid_at\n(no rows)\n(no row of visit has reason LIKE '%consult%'"),
        "{}",
        obs.text
    );
    // A count of no rows is as empty. Regression: "How many of the people he manages work
    // part-time?" counted `job_title = 'Part-time Support Specialist'` (no such title), got 0,
    // and the model answered that none did.
    let obs = sql(
        &reg,
        "SELECT COUNT(*) FROM visit WHERE reason = 'consultation'",
    )
    .unwrap();
    assert!(
        obs.text
            .starts_with("COUNT(*)\n0\n(no row of visit has reason = 'consultation';"),
        "{}",
        obs.text
    );
    // Rows found, a count of some, or a condition whose value is there: no note.
    for q in [
        "SELECT SUM(fee) FROM visit WHERE paid_at IS NULL",
        "SELECT fee FROM visit WHERE reason = 'vaccination' AND fee > 100",
        "SELECT COUNT(*) FROM visit WHERE reason = 'vaccination' AND fee > 100",
        "SELECT COUNT(*), SUM(fee) FROM visit WHERE reason = 'vaccination'",
    ] {
        let obs = sql(&reg, q).unwrap();
        assert!(!obs.text.contains("no row of"), "{q}: {}", obs.text);
    }
}

#[test]
fn the_sql_description_carries_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let d = reg.get("sql").unwrap().description();
    assert!(d.contains("CREATE TABLE customers"), "{d}");
    assert!(d.contains("CREATE TABLE orders"), "{d}");
}

#[test]
fn unknown_tables_and_columns_list_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let e = sql(&reg, "SELECT * FROM employees").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert_eq!(
        e.message,
        "no such table: employees (tables: customers, orders, products)"
    );
    let e = sql(&reg, "SELECT salary FROM customers").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("no such column: salary"),
        "{}",
        e.message
    );
    assert!(e.message.contains("customers.city"), "{}", e.message);
    // A column of a table the query does not name: the hint says which and how to join it.
    let e = sql(&reg, "SELECT name, qty FROM orders").unwrap_err();
    assert_eq!(
        e.hint.as_deref(),
        Some(
            "name is a column of customers (also in products), which the query does not name: \
             join it, JOIN customers ON customers.id = orders.customer_id"
        )
    );
    let e = sql(&reg, "SELEKT 1").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.hint.is_some());
}

#[test]
fn a_column_of_another_table_is_answered_with_the_join_its_keys_give() {
    // Regression: asked `SELECT title, COUNT(*) FROM loans GROUP BY title`, the 1.5B model was
    // told only the loans columns and counted rows of the books table instead of joining it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("library.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT);
         CREATE TABLE loans (loan_id INTEGER PRIMARY KEY,
                             book_id INTEGER REFERENCES books(book_id), member_no INTEGER);
         INSERT INTO books VALUES (1, 'Ice Maps');
         INSERT INTO loans VALUES (1, 1, 7);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let e = sql(&reg, "SELECT title, COUNT(*) FROM loans GROUP BY title").unwrap_err();
    assert!(
        e.message.starts_with("no such column: title"),
        "{}",
        e.message
    );
    assert_eq!(
        e.hint.as_deref(),
        Some(
            "title is a column of books, which the query does not name: join it, \
             JOIN books ON books.book_id = loans.book_id"
        )
    );
    // A column no table has keeps the plain hint.
    let e = sql(&reg, "SELECT author FROM loans").unwrap_err();
    assert_eq!(e.hint.as_deref(), Some("use one of the listed columns"));

    // Regression: `T1.member_no` with `books AS T1 JOIN loans AS T2` was answered "join
    // members" (a table the query did not name that has the column); the model sent the same
    // query again. The column is in a table the query names, under another name: the query
    // runs with that name, and a note says so (the hint below said it, and the 1.5B model
    // sent the same query again all the same).
    for (query, name, written) in [
        (
            "SELECT T1.member_no FROM books AS T1 JOIN loans AS T2 ON T1.book_id = T2.book_id",
            "T2",
            "T1",
        ),
        (
            "SELECT b.member_no FROM books b JOIN loans l ON b.book_id = l.book_id",
            "l",
            "b",
        ),
        (
            "SELECT books.member_no FROM books JOIN loans ON books.book_id = loans.book_id",
            "loans",
            "books",
        ),
    ] {
        let obs = sql(&reg, query).unwrap().text;
        assert!(
            obs.starts_with("member_no\n"),
            "the query ran: {query}\n{obs}"
        );
        assert!(
            obs.contains(&format!(
                "(note: the query was run with {name}.member_no for {written}.member_no: \
                 member_no is a column of loans, which this query calls {name})"
            )),
            "{query}\n{obs}"
        );
    }
    // Where the change would join the column with itself, the query is not run; the hint
    // says which name has the column.
    let e = sql(
        &reg,
        "SELECT T1.title FROM books AS T1 JOIN loans AS T2 ON T2.member_no = T1.member_no",
    )
    .unwrap_err();
    assert_eq!(
        e.hint.as_deref(),
        Some("member_no is a column of loans, which this query calls T2: write T2.member_no")
    );
}

#[test]
fn a_result_of_keys_only_shows_the_rows_its_keys_name() {
    // Regression: asked who borrowed the most books, the 1.5B model selected `member_no,
    // COUNT(*)` from loans and answered "Member 1001"; asked which member may not borrow, it
    // made up a name for the member_no its query returned, even when told which table to join.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("library.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE members (member_no INTEGER PRIMARY KEY, first_nm TEXT, last_nm TEXT,
                               fee REAL);
         CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER,
                             member_no INTEGER REFERENCES members(member_no), loan_date TEXT);
         INSERT INTO members VALUES (1001, 'Olivia', 'Grant', 14), (1002, 'Ben', 'Carter', 0);
         INSERT INTO loans VALUES (1, 5, 1001, '2025-01-04'), (2, 6, 1001, '2025-01-05'),
                                  (3, 7, 1002, '2025-01-06');",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let out = sql(
        &reg,
        "SELECT member_no, COUNT(*) AS n FROM loans GROUP BY member_no ORDER BY n DESC LIMIT 1",
    )
    .unwrap();
    assert_eq!(
        out.text,
        "member_no | n\n1001 | 2\n(member_no is the key of members; its rows for these keys, in the order above:)\n\
         member_no | first_nm | last_nm\n1001 | Olivia | Grant"
    );
    let out = sql(&reg, "SELECT member_no FROM loans ORDER BY loan_id").unwrap();
    assert!(
        out.text.ends_with(
            "member_no | first_nm | last_nm\n1001 | Olivia | Grant\n1002 | Ben | Carter"
        ),
        "{}",
        out.text
    );
    // A result that names something, a count, a query of the key's own table, no rows: no note.
    for q in [
        "SELECT member_no, loan_date FROM loans WHERE loan_id = 1",
        "SELECT COUNT(*) FROM loans",
        "SELECT member_no FROM members WHERE fee > 1",
        "SELECT member_no FROM loans WHERE loan_id = 99",
    ] {
        let out = sql(&reg, q).unwrap().text;
        assert!(!out.contains("is the key of"), "{q}: {out}");
    }
    // The customer_id -> customers.id convention, with no declared key.
    let reg = sql_registry(&shop_db(dir.path()));
    let out = sql(
        &reg,
        "SELECT customer_id, SUM(qty) FROM orders GROUP BY customer_id ORDER BY 2 DESC LIMIT 1",
    )
    .unwrap()
    .text;
    assert!(
        out.contains("(customer_id is the key of customers; its rows for these keys, in the order above:)\nid | name"),
        "{out}"
    );
}

/// Regression (the office suite, tables named as a web framework names them): asked which
/// course had the most enrolments, the model counted `course_id` in `training_enrolment`, was
/// shown `1 | 5` and named another course. The declared foreign key `course_id` →
/// `training_course(id)` names the course, as does the name rule with the app's prefix
/// (`room_id` → `booking_room`) where no key is declared.
#[test]
fn a_key_is_named_through_its_declared_foreign_key_and_a_prefixed_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("office.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE training_course (id INTEGER PRIMARY KEY, title TEXT, cost REAL);
         CREATE TABLE training_enrolment (id INTEGER PRIMARY KEY,
             employee_id INTEGER, course_id INTEGER REFERENCES training_course(id));
         CREATE TABLE booking_room (id INTEGER PRIMARY KEY, label TEXT);
         CREATE TABLE booking_stay (id INTEGER PRIMARY KEY, room_id INTEGER, nights INTEGER);
         INSERT INTO training_course VALUES (1, 'First Aid at Work', 295), (2, 'Advanced SQL', 650);
         INSERT INTO training_enrolment VALUES (1, 8, 2), (2, 4, 1), (3, 5, 1);
         INSERT INTO booking_room VALUES (7, 'Dune view');
         INSERT INTO booking_stay VALUES (1, 7, 3);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let out = sql(
        &reg,
        "SELECT course_id, COUNT(*) FROM training_enrolment GROUP BY course_id ORDER BY COUNT(*) DESC LIMIT 1",
    )
    .unwrap()
    .text;
    assert_eq!(
        out,
        "course_id | COUNT(*)\n1 | 2\n(course_id is the key of training_course; its rows for these keys, in the order above:)\n\
         id | title\n1 | First Aid at Work"
    );
    let out = sql(&reg, "SELECT room_id, nights FROM booking_stay")
        .unwrap()
        .text;
    assert!(
        out.ends_with("(room_id is the key of booking_room; its rows for these keys, in the order above:)\nid | label\n7 | Dune view"),
        "{out}"
    );
}

/// Regression (issue 19): asked who Lena Fischer's manager is, the 1.5B model queried her
/// `manager_id`, read `manager_id | 22` and answered that she was her own manager. A key that
/// points into the queried table itself (a declared foreign key to its own `id`) is named
/// from that table's rows like any other; the table's own key is not.
#[test]
fn a_key_into_the_queried_table_itself_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staff.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE hr_employee (id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT,
             manager_id INTEGER REFERENCES hr_employee(id));
         INSERT INTO hr_employee VALUES (1, 'Joris', 'van Leeuwen', NULL),
             (2, 'Lena', 'Fischer', 1), (3, 'Omar', 'Haddad', 2);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let out = sql(
        &reg,
        "SELECT manager_id FROM hr_employee WHERE first_name = 'Lena'",
    )
    .unwrap()
    .text;
    assert_eq!(
        out,
        "manager_id\n1\n(manager_id is the key of hr_employee; its rows for these keys, in the order above:)\n\
         id | first_name | last_name\n1 | Joris | van Leeuwen"
    );
    let out = sql(&reg, "SELECT id FROM hr_employee WHERE first_name = 'Omar'")
        .unwrap()
        .text;
    assert_eq!(out, "id\n3");
}

#[test]
fn an_ambiguous_column_is_answered_with_the_names_to_write() {
    // Regression: "ambiguous column name: GenreId" came with "fix the query" only, and the
    // 1.5B model spent a round on new aliases and made another mistake beside them.
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let e = sql(
        &reg,
        "SELECT id, qty FROM orders o JOIN customers c ON c.id = o.customer_id",
    )
    .unwrap_err();
    assert!(
        e.message.contains("ambiguous column name: id"),
        "{}",
        e.message
    );
    let hint = e.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("write c.id or o.id"), "{hint}");
}

/// Titles and their loans: each title once in `titles`, the borrowings in `loans`.
fn loans_db(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("loans.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE titles (title_id INTEGER PRIMARY KEY, title TEXT, genre TEXT);
         CREATE TABLE loans (loan_id INTEGER PRIMARY KEY,
                             title_id INTEGER REFERENCES titles(title_id), out_on TEXT);
         INSERT INTO titles VALUES (1, 'Ice Maps', 'travel'), (2, 'Tea with the Vicar', 'crime'),
                                   (3, 'The Polder Detective', 'crime');
         INSERT INTO loans VALUES (1, 3, '2025-01-02'), (2, 3, '2025-02-03'), (3, 1, '2025-02-04'),
                                  (4, 3, '2025-03-05');",
    )
    .unwrap();
    path
}

#[test]
fn a_count_of_one_for_every_title_names_the_table_of_how_often() {
    // Regression: "Which title has been borrowed most often?" counted the titles of the
    // titles table itself (each once), got 1, and the model answered with the first title.
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&loans_db(dir.path()));
    let out = sql(
        &reg,
        "SELECT title, COUNT(*) FROM titles GROUP BY title ORDER BY COUNT(*) DESC LIMIT 1",
    )
    .unwrap()
    .text;
    let joined = "SELECT title, COUNT(*) FROM titles JOIN loans ON loans.title_id = \
                  titles.title_id GROUP BY title ORDER BY COUNT(*) DESC LIMIT 1";
    assert!(
        out.contains("(the most any group above counts is 1: each title is one row of titles"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "rows that point to titles are in loans: {joined} counts those)"
        )),
        "{out}"
    );
    // The query the note gives runs, and counts the loans.
    assert_eq!(
        sql(&reg, joined).unwrap().text,
        "title | COUNT(*)\nThe Polder Detective | 3"
    );
    // An alias is kept, and a count over the loans themselves, or over a column that repeats,
    // gets no note.
    let out = sql(
        &reg,
        "SELECT t.title, COUNT(*) AS n FROM titles AS t GROUP BY t.title ORDER BY n DESC",
    )
    .unwrap()
    .text;
    assert!(
        out.contains("FROM titles AS t JOIN loans ON loans.title_id = t.title_id GROUP BY"),
        "{out}"
    );
    for q in [
        "SELECT title_id, COUNT(*) FROM loans WHERE title_id = 1 GROUP BY title_id ORDER BY 2 DESC",
        "SELECT genre, COUNT(*) FROM titles WHERE title_id < 3 GROUP BY genre ORDER BY 2 DESC",
    ] {
        let out = sql(&reg, q).unwrap().text;
        assert!(!out.contains("the most any group"), "{q}: {out}");
    }
}

#[test]
fn a_string_one_quote_short_is_named_in_the_error_of_its_query() {
    // Regression: `last_name = 'O''Neill) AND …` (one quote short) got "fix the query" only;
    // the string ran on over the rest of the query and the 1.5B model could not see why.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staff.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE staff (first_name TEXT, last_name TEXT, km INTEGER);
         INSERT INTO staff VALUES ('Siobhan', 'O''Neill', 310);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let e = sql(
        &reg,
        "SELECT km FROM staff WHERE last_name = 'O''Neill) AND first_name = 'Siobhan'",
    )
    .unwrap_err();
    assert!(e.message.starts_with("SQL error: "), "{e:?}");
    let hint = e.hint.unwrap();
    assert!(
        hint.starts_with("the string 'O''Neill) AND first_name = ' runs on into the query's own text: a closing quote is missing after O''Neill"),
        "{hint}"
    );
    // What the hint says to write runs.
    let out = sql(&reg, "SELECT km FROM staff WHERE last_name = 'O''Neill'").unwrap();
    assert_eq!(out.text, "km\n310");
}

#[test]
fn a_function_sqlite_lacks_is_answered_with_sqlites_way() {
    // Regression: told to use MONTH(visit_date), the 1.5B model wrote MOD(...), FLOOR(...) and
    // TRUE(...), which this SQLite build lacked, was told only "fix the query" three times, and
    // the circuit breaker ended the task unanswered. (MONTH and the math functions are now
    // provided; the hints remain for the functions that are not.)
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("visits.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE visit (visit_id INTEGER PRIMARY KEY, visit_date TEXT, fee REAL);
         INSERT INTO visit VALUES (1, '2025-04-02', 48), (2, '2025-05-03', 62);",
    )
    .unwrap();
    drop(conn);
    let reg = sql_registry(&path);
    let hint = |q: &str| {
        let e = sql(&reg, q).unwrap_err();
        assert!(
            e.message.starts_with("SQL error: no such function: "),
            "{e:?}"
        );
        e.hint.unwrap()
    };
    let h = hint("SELECT COUNT(*) FROM visit WHERE DAYOFMONTH(visit_date) = 2");
    assert!(h.contains("strftime('%d', col)"), "{h}");
    let h = hint("SELECT COUNT(*) FROM visit WHERE DATE_PART('month', visit_date) = 4");
    assert!(h.contains("strftime('%m', col)"), "{h}");
    let h = hint("SELECT DATEDIFF(visit_date, '2025-01-01') FROM visit");
    assert!(h.contains("julianday(a) - julianday(b)"), "{h}");
    let h = hint("SELECT SHOUT(fee) FROM visit");
    assert!(
        h.starts_with("SQLite has no SHOUT(); its functions include, for dates, strftime("),
        "{h}"
    );
    // What the hints propose runs.
    let out = sql(
        &reg,
        "SELECT COUNT(*) FROM visit WHERE strftime('%m', visit_date) = '04'",
    )
    .unwrap();
    assert_eq!(out.text, "COUNT(*)\n1");
    // MONTH() and the math functions the pattern admits are provided (`sql/math.rs`).
    let out = sql(
        &reg,
        "SELECT COUNT(*) FROM visit WHERE MONTH(visit_date) = 4 AND MOD(visit_id, 2) = 1",
    )
    .unwrap();
    assert_eq!(out.text, "COUNT(*)\n1");
}

#[test]
fn names_sqlite_reads_only_in_quotes_run_when_the_query_writes_them_bare() {
    // Regression: over a table `"Order"` with a column `"Ship Country"` (an export's names),
    // the 1.5B model wrote `FROM Order WHERE SH IP COUNT = 'Germany'`: the pattern held only
    // the quoted column, and `FROM Order` is a syntax error. It answered 0 of 5 questions.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("export.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        r#"CREATE TABLE "Order" ("Order ID" INTEGER PRIMARY KEY, Customer TEXT, "Ship Country" TEXT);
           CREATE TABLE "Order Details" ("Order ID" INTEGER, "Unit Price" REAL, Quantity INTEGER);
           INSERT INTO "Order" VALUES (1, 'Alfreds', 'Germany'), (2, 'Bon app', 'France'), (3, 'QUICK', 'Germany');
           INSERT INTO "Order Details" VALUES (1, 10.0, 2), (1, 2.5, 4), (2, 7.0, 1), (3, 1.0, 3);"#,
    )
    .unwrap();
    drop(conn);
    let before = std::fs::read(&path).unwrap();
    let tool = SqlTool::open(&path, SqlOptions::default()).unwrap();
    let pattern = tool.args_schema()["properties"]["query"]["pattern"]
        .as_str()
        .unwrap()
        .to_string();
    let pattern = regex::RegexBuilder::new(&pattern)
        .size_limit(1 << 30)
        .build()
        .unwrap();
    let reg = sql_registry(&path);
    for (query, rows) in [
        (
            "SELECT COUNT(*) AS n FROM Order WHERE Ship Country = 'Germany'",
            "n\n2",
        ),
        (
            "SELECT o.Ship Country, SUM(d.Unit Price * d.Quantity) AS total FROM Order o JOIN Order Details d ON d.Order ID = o.Order ID GROUP BY 1 ORDER BY 2 DESC",
            "Ship Country | total\nGermany | 33\nFrance | 7",
        ),
        // Quoted as it should be, and text in literals, are left alone.
        (
            r#"SELECT "Customer" FROM "Order" WHERE Customer <> 'Order ID' AND "Ship Country" = 'France'"#,
            "Customer\nBon app",
        ),
    ] {
        assert!(pattern.is_match(query), "the pattern refuses {query}");
        assert_eq!(sql(&reg, query).unwrap().text, rows, "{query}");
    }
    // What the model reads writes those names as they must be written.
    let description = tool.description();
    assert!(
        description.contains(r#"the tables "Order", "Order Details""#),
        "{description}"
    );
    assert!(description.contains("go in double quotes"), "{description}");
    let context = tool
        .context_for("How many orders went to Germany?", None)
        .unwrap();
    assert!(context.contains(r#"-- "Order""#), "{context}");
    // A plain schema gets no such sentence.
    let plain = SqlTool::open(&shop_db(dir.path()), SqlOptions::default()).unwrap();
    assert!(!plain.description().contains("double quotes"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn sample_rows_before_a_task_say_how_many_rows_the_table_has() {
    // Regression: shown three sample rows of the members table, the 1.5B model named the
    // oldest of those three as the oldest member, without a query.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("members.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE members (member_no INTEGER PRIMARY KEY, name TEXT, dob TEXT);",
    )
    .unwrap();
    for i in 0..40 {
        let name = if i == 39 {
            "Zed".to_string()
        } else if i < 10 {
            format!("Ann {i}")
        } else {
            format!("Bob {i}")
        };
        conn.execute(
            "INSERT INTO members VALUES (?1, ?2, ?3)",
            rusqlite::params![i, name, format!("19{:02}-01-01", 40 + i)],
        )
        .unwrap();
    }
    drop(conn);
    let tool = SqlTool::open(&path, SqlOptions::default()).unwrap();
    // No row holds the task's words: the first rows, out of the whole table.
    let context = tool.context_for("Who is the oldest member?", None).unwrap();
    assert!(
        context.contains("-- members: 3 of its 40 rows (query for the others)"),
        "{context}"
    );
    // Rows that hold the task's words, more than are shown.
    let context = tool
        .context_for("Which oldest member is an ann?", None)
        .unwrap();
    assert!(
        context.contains(
            "-- members: 3 of the 10 rows that hold the task's words (query for the others)"
        ),
        "{context}"
    );
    // Rows that hold a name the task mentions, more than are shown.
    let context = tool
        .context_for("Which Ann is the oldest member?", None)
        .unwrap();
    assert!(
        context.contains("-- members: 3 of the 10 rows that hold \"Ann\" (query for the others)"),
        "{context}"
    );
    // Every row that holds it is shown: nothing is left out of what the task names.
    let context = tool
        .context_for("When was the member Zed born?", None)
        .unwrap();
    assert!(
        context.contains("-- members: every row that holds \"Zed\"\n"),
        "{context}"
    );
    assert!(context.contains("39 | Zed | 1979-01-01"), "{context}");
}

/// Regression (issue 19): the loans linked to "Ice Maps" showed member numbers only, and the
/// model answered "Member 1016 borrowed Ice Maps most recently". The rows the linked rows'
/// other keys point to (the members) come with them.
#[test]
fn linked_rows_come_with_the_names_their_keys_point_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("library.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE members (member_no INTEGER PRIMARY KEY, first_nm TEXT, last_nm TEXT);
         CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT);
         CREATE TABLE loans (loan_id INTEGER PRIMARY KEY,
             book_id INTEGER REFERENCES books(book_id),
             member_no INTEGER REFERENCES members(member_no), loan_date TEXT);
         INSERT INTO members VALUES (1011, 'Ada', 'Berg'), (1016, 'Hugo', 'Lambert'), (1020, 'Eva', 'Lind');
         INSERT INTO books VALUES (16, 'Ice Maps'), (17, 'Tea with the Vicar');
         INSERT INTO loans VALUES (12, 16, 1011, '2025-02-10'), (21, 17, 1020, '2025-03-12'),
             (34, 16, 1016, '2025-05-06');",
    )
    .unwrap();
    drop(conn);
    let tool = SqlTool::open(&path, SqlOptions::default()).unwrap();
    let context = tool
        .context_for("Who borrowed Ice Maps most recently?", None)
        .unwrap();
    assert!(
        context.contains(
            "loan_id | book_id | member_no | loan_date\n\
             34 | 16 | 1016 | 2025-05-06\n\
             12 | 16 | 1011 | 2025-02-10\n\
             (ordered by loan_date DESC: the latest date first: the most recent first)\n\
             (member_no is the key of members; its rows for these keys, in the order above:)\n\
             member_no | first_nm | last_nm\n"
        ),
        "{context}"
    );
    // In the order of the loans, the latest borrower first.
    assert!(
        context
            .contains("member_no | first_nm | last_nm\n1016 | Hugo | Lambert\n1011 | Ada | Berg"),
        "{context}"
    );
    // Only the members of these loans.
    assert!(!context.contains("Eva"), "{context}");
}

/// Regression: asked for "the consultation fee of Milo's most recent visit", the 1.5B model
/// was shown three unrelated rows of the visit table (its words point there; "Milo" is a pet's
/// name, in another table) and answered with one of their fees. The context now holds the rows
/// that hold the names the task mentions and the rows that point to them; a follow-up without a
/// name of its own ("What is his email address?") takes the names of the turn before. Rows with
/// a date come the latest first, and say so (the model took the first of Milo's two visits, in
/// rowid order, for the most recent).
#[test]
fn the_context_shows_the_rows_of_the_names_a_task_mentions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clinic.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE owner (owner_id INTEGER PRIMARY KEY, full_name TEXT, email TEXT);
         CREATE TABLE pet (pet_id INTEGER PRIMARY KEY, name TEXT,
             owner_id INTEGER REFERENCES owner(owner_id));
         CREATE TABLE visit (visit_id INTEGER PRIMARY KEY,
             pet_id INTEGER REFERENCES pet(pet_id), visit_date TEXT, fee REAL);
         INSERT INTO owner VALUES (1, 'Hugo Lambert', 'hugo@post.example'),
             (2, 'Ann Berg', 'ann@post.example');
         INSERT INTO pet VALUES (1, 'Rex', 2), (2, 'Luna', 2), (3, 'Milo', 1), (4, 'Bella', 2);",
    )
    .unwrap();
    for i in 0..30 {
        conn.execute(
            "INSERT INTO visit VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                i,
                if i % 10 == 9 { 3 } else { 1 + i % 2 },
                format!("2025-01-{:02}", i + 1),
                40 + i
            ],
        )
        .unwrap();
    }
    drop(conn);
    let tool = SqlTool::open(&path, SqlOptions::default()).unwrap();
    let context = tool
        .context_for("What was the fee of Milo's most recent visit?", None)
        .unwrap();
    assert!(
        context.contains(
            "-- pet: every row that holds \"Milo\"\npet_id | name | owner_id\n3 | Milo | 1"
        ),
        "{context}"
    );
    assert!(
        context.contains(
            "-- visit: every row whose pet_id is the pet_id of the pet rows above\n\
             visit_id | pet_id | visit_date | fee\n\
             29 | 3 | 2025-01-30 | 69\n\
             19 | 3 | 2025-01-20 | 59\n\
             9 | 3 | 2025-01-10 | 49\n\
             (ordered by visit_date DESC: the latest date first: the most recent first)"
        ),
        "{context}"
    );
    // Visits of other pets are not shown as if they were the answer.
    assert!(!context.contains("| 40\n"), "{context}");

    // A follow-up names no one: the names of the turn before are looked up.
    let context = tool
        .context_for(
            "What is his email address?",
            Some("Milo belongs to Hugo Lambert.\nWhose pet is Milo?"),
        )
        .unwrap_or_default();
    assert!(
        context.contains("1 | Hugo Lambert | hugo@post.example"),
        "{context}"
    );
    // One that names someone looks up only that name.
    let context = tool
        .context_for(
            "What is the email address of Ann Berg?",
            Some("Milo belongs to Hugo Lambert.\nWhose pet is Milo?"),
        )
        .unwrap_or_default();
    assert!(
        context.contains("2 | Ann Berg | ann@post.example"),
        "{context}"
    );
    assert!(!context.contains("Hugo"), "{context}");
}

#[test]
fn every_write_is_refused_and_the_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let before = std::fs::read(&db).unwrap();
    let reg = sql_registry(&db);
    let other = dir.path().join("other.sqlite");
    let attempts = [
        "DROP TABLE customers".to_string(),
        "INSERT INTO customers VALUES (9, 'Eve', 'Paris')".into(),
        "UPDATE customers SET name = 'Eve'".into(),
        "DELETE FROM orders".into(),
        format!("ATTACH DATABASE '{}' AS other", other.display()),
        "DETACH DATABASE main".into(),
        "PRAGMA writable_schema=1".into(),
        "PRAGMA user_version=7".into(),
        "PRAGMA journal_mode=DELETE".into(),
        "SELECT load_extension('/tmp/nothing.so')".into(),
        "CREATE TABLE t(x)".into(),
        "CREATE TEMP TABLE t(x)".into(),
        "CREATE INDEX i ON customers(name)".into(),
        "VACUUM".into(),
        "SELECT 1; DROP TABLE customers".into(),
    ];
    for q in &attempts {
        let e = sql(&reg, q).unwrap_err();
        assert_eq!(e.class, ErrorClass::InvalidInput, "{q}: {e:?}");
    }
    let e = sql(&reg, "DROP TABLE customers").unwrap_err();
    assert!(e.message.contains("read-only"), "{}", e.message);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database file changed"
    );
    assert!(!other.exists(), "ATTACH created a file");
    // Still usable afterwards.
    assert!(sql(&reg, "SELECT count(*) AS n FROM customers")
        .unwrap()
        .text
        .ends_with('3'));
}

#[test]
fn a_never_ending_recursive_query_is_interrupted_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let opts = SqlOptions {
        time_limit: Duration::from_millis(500),
        ..SqlOptions::default()
    };
    let tool = SqlTool::open(&db, opts).unwrap();
    let start = Instant::now();
    let e = tool
        .query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        .unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("limit"), "{}", e.message);
    // Endless rows: the first 50 are shown, the counting stops at the limit.
    let text = tool
        .query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
        .unwrap();
    assert!(text.contains("counting stopped"), "{text}");
}

#[test]
fn a_hundred_thousand_rows_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let reg = sql_registry(&shop_db(dir.path()));
    let obs = sql(
        &reg,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) SELECT x FROM c",
    )
    .unwrap();
    let lines: Vec<&str> = obs.text.lines().collect();
    assert_eq!(lines[0], "x");
    assert_eq!(lines[50], "50");
    assert_eq!(lines[51], "(99950 more rows)");
    assert_eq!(lines.len(), 52);
}

#[test]
fn a_missing_database_is_fatal_and_a_non_database_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let e = SqlTool::open(&dir.path().join("nope.sqlite"), SqlOptions::default()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("nope.sqlite"), "{}", e.message);
    assert!(e.message.contains("does not exist"), "{}", e.message);
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, "this is not a database, just some text that is long enough.............................................................................").unwrap();
    let e = SqlTool::open(&junk, SqlOptions::default()).unwrap_err();
    assert_eq!(e.class, ErrorClass::Fatal);
    assert!(e.message.contains("not a SQLite database"), "{}", e.message);
}

#[test]
fn a_locked_database_is_transient() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let tool = SqlTool::open(&db, SqlOptions::default()).unwrap();
    let writer = rusqlite::Connection::open(&db).unwrap();
    writer
        .execute_batch("BEGIN EXCLUSIVE; INSERT INTO products VALUES (3, 'ink', 2.0);")
        .unwrap();
    let e = tool.query("SELECT count(*) FROM products").unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient, "{e:?}");
    writer.execute_batch("ROLLBACK").unwrap();
    assert!(tool.query("SELECT count(*) FROM products").is_ok());
}

/// A tool that sleeps, then echoes a long text.
struct Slow(Duration, usize);

impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "sleeps".into()
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}}, "required": ["n"], "additionalProperties": false})
    }
    fn run(&self, _args: &Value) -> Result<Observation, ToolError> {
        std::thread::sleep(self.0);
        Ok(Observation::new("é".repeat(self.1)))
    }
}

#[test]
fn the_registry_validates_times_out_and_cuts() {
    let mut reg = ToolRegistry::new(RegistryOptions {
        timeout: Duration::from_millis(200),
        max_chars: 100,
    });
    reg.register(Arc::new(Slow(Duration::ZERO, 250))).unwrap();
    let obs = reg.call("slow", r#"{"n": 2}"#).unwrap();
    assert_eq!(obs.cut_chars, 150);
    assert!(obs.text.starts_with(&"é".repeat(100)));
    assert!(
        obs.text.ends_with("[… cut 150 of 250 characters]"),
        "{}",
        obs.text
    );

    let e = reg.call("slow", r#"{"n": "two"}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("args.n: expected an integer"),
        "{}",
        e.message
    );
    let e = reg.call("slow", r#"{"n": 9}"#).unwrap_err();
    assert!(e.message.contains("maximum 5"), "{}", e.message);
    let e = reg.call("slow", r#"{"n": 1, "m": 2}"#).unwrap_err();
    assert!(e.message.contains("unknown property `m`"), "{}", e.message);
    let e = reg.call("slow", r#"{}"#).unwrap_err();
    assert!(e.message.contains("`n` is missing"), "{}", e.message);
    let e = reg.call("slow", "{not json").unwrap_err();
    assert!(e.message.contains("not valid JSON"), "{}", e.message);
    let e = reg.call("nope", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(
        e.message.contains("no tool named `nope` (tools: slow)"),
        "{}",
        e.message
    );

    let mut reg2 = ToolRegistry::new(RegistryOptions {
        timeout: Duration::from_millis(100),
        max_chars: 100,
    });
    reg2.register(Arc::new(Slow(Duration::from_secs(2), 1)))
        .unwrap();
    let start = Instant::now();
    let e = reg2.call("slow", r#"{"n": 1}"#).unwrap_err();
    // Regression (issue 16): the registry's timeout was `Transient`, so the agent retried a
    // call that had just run out of time.
    assert_eq!(e.class, ErrorClass::Timeout);
    assert!(start.elapsed() < Duration::from_secs(1));

    assert!(
        reg.register(Arc::new(Slow(Duration::ZERO, 1))).is_err(),
        "duplicate name"
    );
}

#[test]
fn builtin_schemas_pass_the_checker_and_reject_bad_args() {
    let reg = ToolRegistry::new(RegistryOptions::default());
    let mut reg = reg;
    reg.register(Arc::new(cairn::tools::calculator::CalculatorTool))
        .unwrap();
    let list = reg.list();
    assert_eq!(list[0].name, "calculator");
    assert_eq!(list[0].args_schema["required"], json!(["expression"]));
    let e = reg.call("calculator", r#"{"expr": "1+1"}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert_eq!(
        reg.call("calculator", r#"{"expression": "1234*5678"}"#)
            .unwrap()
            .text,
        "7006652"
    );
}

/// Writes a tools manifest `tools.toml` with `body` into `dir`.
pub(crate) fn write_manifest(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("tools.toml");
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn manifest_tools_run_without_a_shell_with_args_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "echo_args"
description = "Echoes its arguments."
argv = ["cat"]
args = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }

[[tool]]
name = "fails"
description = "Always fails."
argv = ["sh", "-c", "echo 'city not found' >&2; exit 3"]
args = '{"type": "object"}'

[[tool]]
name = "hangs"
description = "Never ends."
argv = ["sleep", "30"]
timeout_secs = 0.3
args = { type = "object" }
"#,
    );
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    for t in Manifest::load(&m).unwrap().into_tools() {
        reg.register(Arc::new(t)).unwrap();
    }
    let obs = reg
        .call("echo_args", r#"{"city": "Oslo; rm -rf /"}"#)
        .unwrap();
    assert_eq!(obs.text, r#"{"city":"Oslo; rm -rf /"}"#);
    let e = reg.call("echo_args", r#"{"city": 3}"#).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);

    let e = reg.call("fails", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput);
    assert!(e.message.contains("exit code 3"), "{}", e.message);
    assert!(e.message.contains("city not found"), "{}", e.message);

    let start = Instant::now();
    let e = reg.call("hangs", "{}").unwrap_err();
    assert_eq!(e.class, ErrorClass::Timeout);
    assert!(e.message.contains("killed"), "{}", e.message);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_relative_program_runs_from_the_manifest_folder() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("shout.sh");
    std::fs::write(&script, "#!/bin/sh\ntr a-z A-Z\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = write_manifest(
        dir.path(),
        "[[tool]]\nname = \"shout\"\ndescription = \"d\"\nargv = [\"./shout.sh\"]\nargs = { type = \"object\" }\n",
    );
    let tool = Manifest::load(&m).unwrap().into_tools().remove(0);
    assert_eq!(tool.run(&json!({"a": "b"})).unwrap().text, r#"{"A":"B"}"#);
}

#[test]
fn a_hanging_command_that_forks_is_killed_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "forks"
description = "Starts a child that holds stdout."
argv = ["sh", "-c", "sleep 30; echo done"]
timeout_secs = 0.3
args = { type = "object" }
"#,
    );
    let tool = Manifest::load(&m).unwrap().into_tools().remove(0);
    let start = Instant::now();
    let e = tool.run(&json!({})).unwrap_err();
    assert_eq!(e.class, ErrorClass::Timeout);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn bad_manifests_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"object\" }\nshell = true\n",
            &["unknown field `shell`", "argv"],
        ),
        (
            "[[tools]]\nname = \"t\"\n",
            &["unknown field `tools`"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"objekt\" }\n",
            &["tool `t`", "not a valid JSON Schema", "unknown type \"objekt\""],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"object\", propertes = { a = { type = \"string\" } } }\n",
            &["unsupported keyword `propertes`"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"string\" }\n",
            &["\"type\": \"object\""],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = '{not json'\n",
            &["not valid JSON"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = []\nargs = { type = \"object\" }\n",
            &["`argv` is empty"],
        ),
        (
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = { type = \"object\", required = [\"x\"] }\n",
            &["`x` is required but not among the properties"],
        ),
        (
            "[[tool]]\nname = \"t\"\nargv = [\"cat\"]\nargs = { type = \"object\" }\n",
            &["missing field `description`"],
        ),
    ];
    for (body, needles) in cases {
        let m = write_manifest(dir.path(), body);
        let e: ManifestError = Manifest::load(&m).unwrap_err();
        let msg = e.to_string();
        for n in *needles {
            assert!(
                msg.contains(n),
                "manifest:\n{body}\nerror: {msg}\nlacks: {n}"
            );
        }
    }
}

#[test]
fn cairn_tools_lists_and_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    cairn(dir.path())
        .args(["tools", "--db"])
        .arg(&db)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("calculator")
                .and(predicate::str::contains("\"expression\""))
                .and(predicate::str::contains("CREATE TABLE customers"))
                .and(predicate::str::contains(
                    "the tool `search` is not available",
                )),
        );
    cairn(dir.path())
        .args(["tools", "call", "calculator", r#"{"expression": "2^20"}"#])
        .assert()
        .success()
        .stdout("1048576\n");
    cairn(dir.path())
        .args(["tools", "call", "calculator", r#"{"expression": "1/0"}"#])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("error (invalid_input)")
                .and(predicate::str::contains("division by zero"))
                .and(predicate::str::contains("hint:")),
        );
    cairn(dir.path())
        .args([
            "tools",
            "call",
            "sql",
            r#"{"query": "DROP TABLE orders"}"#,
            "--db",
        ])
        .arg(&db)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("read-only"));
    cairn(dir.path())
        .args([
            "tools",
            "--json",
            "call",
            "sql",
            r#"{"query": "SELECT 1"}"#,
            "--db",
        ])
        .arg(dir.path().join("missing.sqlite"))
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("\"class\":\"fatal\"")
                .or(predicate::str::contains("not available")),
        );
    cairn(dir.path())
        .args(["tools", "call", "sql", r#"{"query": "SELECT 1"}"#, "--db"])
        .arg(dir.path().join("missing.sqlite"))
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("missing.sqlite")
                .and(predicate::str::contains("does not exist")),
        );
}

#[test]
fn cairn_tools_reports_a_broken_manifest_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(dir.path(), "[[tool]]\nname = 1\n");
    cairn(dir.path())
        .arg("tools")
        .arg("--tools")
        .arg(&m)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("tools.toml").and(predicate::str::contains("panicked").not()),
        );
}

#[test]
fn recall_searches_memory_facts() {
    use cairn::memory::{FactScope, MemoryStore};
    use cairn::tools::recall::RecallTool;
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::open(&dir.path().join("memory.sqlite")).unwrap();
    store
        .add_fact("The user's cat is called Miso.", FactScope::Global, None)
        .unwrap();
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    reg.register(Arc::new(RecallTool::new(store, None, 0.9, 5)))
        .unwrap();
    let obs = reg
        .call("recall", r#"{"query": "what is the cat called"}"#)
        .unwrap();
    assert!(obs.text.contains("Miso"), "{}", obs.text);
    let obs = reg.call("recall", r#"{"query": "spaceship"}"#).unwrap();
    assert!(obs.text.contains("no remembered facts"), "{}", obs.text);
}

/// The one tool of the manifest `body`, written to `dir`.
fn manifest_tool(dir: &Path, body: &str) -> cairn::tools::manifest::CommandTool {
    Manifest::load(&write_manifest(dir, body))
        .unwrap()
        .into_tools()
        .remove(0)
}

/// The pid a tool's script wrote to `bg.pid` in `dir`.
fn background_pid(dir: &Path) -> i32 {
    let text = std::fs::read_to_string(dir.join("bg.pid")).expect("the script wrote bg.pid");
    text.trim().parse().expect("a pid")
}

/// Whether process `pid` has ended (gone, or a zombie waiting to be reaped), within 3 s.
fn ended(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            // The state follows the command name in parentheses.
            Ok(s) if s.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')) => return true,
            Ok(_) if Instant::now() >= deadline => return false,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Regression (issue 16): with `sh -c "sleep 40 & echo started"` and `timeout_secs = 3` the
/// call took 40 s and succeeded: the timeout watched only `sh`, which exits at once, while
/// the background `sleep` held stdout open; and the `sleep` was left running.
#[test]
fn the_timeout_bounds_a_call_whose_background_child_holds_the_pipes_and_kills_it() {
    let dir = tempfile::tempdir().unwrap();
    let tool = manifest_tool(
        dir.path(),
        r#"
[[tool]]
name = "bg"
description = "Leaves a child holding stdout."
argv = ["sh", "-c", "sleep 40 & echo $! > bg.pid; echo started"]
timeout_secs = 1
args = { type = "object" }
"#,
    );
    let start = Instant::now();
    let e = tool.run(&json!({})).unwrap_err();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert!(took >= Duration::from_millis(900), "took {took:?}");
    assert_eq!(e.class, ErrorClass::Timeout, "{e:?}");
    assert!(e.message.contains("within 1.0 s"), "{}", e.message);
    assert!(
        ended(background_pid(dir.path())),
        "the background sleep still runs"
    );
}

/// Regression (issue 16): a tool that exited normally left its background children running.
#[test]
fn what_a_tool_leaves_running_is_killed_when_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    let tool = manifest_tool(
        dir.path(),
        r#"
[[tool]]
name = "leaves"
description = "Leaves a quiet child behind."
argv = ["sh", "-c", "sleep 40 > /dev/null 2>&1 & echo $! > bg.pid; echo done"]
timeout_secs = 3
args = { type = "object" }
"#,
    );
    let start = Instant::now();
    assert_eq!(tool.run(&json!({})).unwrap().text, "done");
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(
        ended(background_pid(dir.path())),
        "the background sleep still runs"
    );
}

/// Regression (issue 16): a manifest tool with a longer timeout than the registry's went on
/// running (and was left to PID 1) after the registry gave up on the call.
#[test]
fn a_manifest_tool_is_killed_at_the_registry_timeout_when_that_is_shorter() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "long"
description = "Waits for its child."
argv = ["sh", "-c", "sleep 40 & echo $! > bg.pid; wait"]
timeout_secs = 600
args = { type = "object" }
"#,
    );
    let sources = cairn::tools::ToolSources {
        tools: Some(m),
        db: None,
        sql_names_pattern: true,
        index: dir.path().join("no-index"),
        memory: dir.path().join("no-memory"),
        memory_decay: 0.9,
        mcp: Vec::new(),
    };
    let reg = ToolRegistry::from_sources(
        &sources,
        RegistryOptions {
            timeout: Duration::from_secs(1),
            max_chars: 2000,
        },
    )
    .unwrap();
    let start = Instant::now();
    let e = reg.call("long", "{}").unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(4));
    assert_eq!(e.class, ErrorClass::Timeout, "{e:?}");
    assert!(
        ended(background_pid(dir.path())),
        "the background sleep still runs"
    );
}

/// Regression (issue 16): a timeout was `Transient`, so the agent retried a call that had just
/// run out of time. It is not retried, and it still counts toward the circuit breaker.
#[test]
fn the_agent_does_not_retry_a_timeout_but_counts_it_as_a_failure() {
    use cairn::agent::{Agent, AgentOptions, ScriptedPolicy};
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "hangs"
description = "Never ends."
argv = ["sleep", "30"]
timeout_secs = 0.3
args = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
"#,
    );
    let mut reg = ToolRegistry::new(RegistryOptions::default());
    for t in Manifest::load(&m).unwrap().into_tools() {
        reg.register(Arc::new(t)).unwrap();
    }
    let steps = vec![
        crate::common::step("hangs", json!({"n": 1})),
        crate::common::step("hangs", json!({"n": 2})),
        crate::common::answer("gave up"),
    ];
    let options = AgentOptions {
        circuit_threshold: 2,
        max_failed_rounds: 5,
        ..AgentOptions::default()
    };
    let mut a = Agent::new(ScriptedPolicy::new(steps, 4096), reg, None, options).unwrap();
    let start = Instant::now();
    let r = a.run_task("wait", None);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(r.retries, 0);
    assert_eq!(r.tool_calls.len(), 2);
    for c in &r.tool_calls {
        assert_eq!(c.error_class, Some(ErrorClass::Timeout), "{c:?}");
        assert_eq!(c.attempts, 1);
    }
    assert_eq!(r.circuits_opened, vec!["hangs".to_string()]);
}

/// Regression (issue 16): a tool printing 100 MB made cairn hold it all (303 MB resident).
/// The output beyond the tool's limit is read and dropped, and the observation says so.
#[test]
fn a_tool_printing_50_mb_is_cut_without_holding_it() {
    let dir = tempfile::tempdir().unwrap();
    let tool = manifest_tool(
        dir.path(),
        r#"
[[tool]]
name = "flood"
description = "Prints 50 MB."
argv = ["sh", "-c", "head -c 50000000 /dev/zero | tr '\\0' a"]
args = { type = "object" }
"#,
    );
    let max = cairn::tools::manifest::MAX_OUTPUT_BYTES;
    let obs = tool.run(&json!({})).unwrap();
    assert_eq!(obs.text.len(), max);
    assert_eq!(obs.cut_chars, 50_000_000 - max);
    let mut reg = ToolRegistry::new(RegistryOptions {
        timeout: Duration::from_secs(30),
        max_chars: 100,
    });
    reg.register(Arc::new(tool)).unwrap();
    let obs = reg.call("flood", "{}").unwrap();
    assert_eq!(
        obs.text,
        format!(
            "{}\n[… cut 49999900 of 50000000 characters]",
            "a".repeat(100)
        )
    );
    assert_eq!(obs.cut_chars, 49_999_900);
}

#[test]
fn output_cut_inside_a_character_keeps_whole_characters() {
    let dir = tempfile::tempdir().unwrap();
    // 30,000 three-byte characters: the byte limit falls inside one.
    let tool = manifest_tool(
        dir.path(),
        "[[tool]]\nname = \"euros\"\ndescription = \"d\"\nargv = [\"python3\", \"-c\", \"print('€' * 30000, end='')\"]\nargs = { type = \"object\" }\n",
    );
    let obs = tool.run(&json!({})).unwrap();
    let kept = cairn::tools::manifest::MAX_OUTPUT_BYTES / 3;
    assert_eq!(obs.text, "€".repeat(kept));
    assert_eq!(obs.cut_chars, 30_000 - kept);
}

/// Regression (issue 16): `cairn tools call` on a tool printing 100 MB took 303 MB of memory.
/// Here cairn runs with a 40 MB data limit, which holding 50 MB of output cannot fit in.
#[test]
fn cairn_tools_call_stays_small_on_a_flood_of_output() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "flood"
description = "Prints 50 MB."
argv = ["sh", "-c", "head -c 50000000 /dev/zero | tr '\\0' a"]
args = { type = "object" }
"#,
    );
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    // One thread: the limit is for holding output, not for thread stacks on a big machine.
    cmd.env("CAIRN_HOME", dir.path().join("home"))
        .env("CAIRN_OFFLINE", "1")
        .env("CAIRN_THREADS", "1")
        .arg("--tools")
        .arg(&m)
        .args(["tools", "call", "flood", "{}"]);
    // SAFETY: setrlimit(2) is async-signal-safe and touches only the child's limits. Only the
    // soft limit is lowered, so the tool may raise its own.
    unsafe {
        cmd.pre_exec(|| {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_DATA, &mut lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lim.rlim_cur = 40 << 20;
            if libc::setrlimit(libc::RLIMIT_DATA, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.ends_with("[… cut 49998000 of 50000000 characters]\n"),
        "{}",
        &stdout[stdout.len().saturating_sub(200)..]
    );
}

/// A manifest tool's processes get `max_memory_mb` of memory each (issue 16: there was no
/// limit); the default leaves room for ordinary programs.
#[test]
fn a_manifest_tool_cannot_take_more_memory_than_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let body = |limit: &str| {
        format!(
            "[[tool]]\nname = \"hog\"\ndescription = \"d\"\nargv = [\"python3\", \"-c\", \"x = bytearray(200 * 1024 * 1024); print(len(x))\"]\n{limit}args = {{ type = \"object\" }}\n"
        )
    };
    let tool = manifest_tool(dir.path(), &body("max_memory_mb = 64\n"));
    assert_eq!(tool.max_memory_mb(), 64);
    let e = tool.run(&json!({})).unwrap_err();
    assert_eq!(e.class, ErrorClass::InvalidInput, "{e:?}");
    assert!(e.message.contains("MemoryError"), "{}", e.message);
    assert!(
        e.message.contains("at most 64 MB: `max_memory_mb`"),
        "{}",
        e.message
    );
    let tool = manifest_tool(dir.path(), &body(""));
    assert_eq!(
        tool.max_memory_mb(),
        cairn::tools::manifest::DEFAULT_MAX_MEMORY_MB
    );
    assert_eq!(tool.run(&json!({})).unwrap().text, "209715200");
}

/// Regression (issue 16): a manifest tool named `final_answer` was accepted and never ran, and
/// one named `recall` silently replaced the built-in.
#[test]
fn manifest_tools_cannot_take_reserved_or_repeated_names() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |name: &str| {
        format!("[[tool]]\nname = \"{name}\"\ndescription = \"d\"\nargv = [\"cat\"]\nargs = {{ type = \"object\" }}\n")
    };
    for name in cairn::tools::manifest::RESERVED_NAMES {
        let m = write_manifest(dir.path(), &entry(name));
        let msg = Manifest::load(&m).unwrap_err().to_string();
        assert!(msg.contains(&format!("tool `{name}` in ")), "{msg}");
        assert!(msg.contains("tools.toml"), "{msg}");
        assert!(msg.contains("rename this tool in the manifest"), "{msg}");
        // The command line refuses it too, with no --db, index or memory file.
        cairn(dir.path())
            .arg("--tools")
            .arg(&m)
            .args(["tools", "list"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("tool `{name}` in ")));
    }
    let m = write_manifest(dir.path(), &format!("{}{}", entry("x"), entry("x")));
    let msg = Manifest::load(&m).unwrap_err().to_string();
    assert!(msg.contains("`x` is declared twice"), "{msg}");
}

/// Regression (issue 16): control bytes from a database cell or a program's output reached the
/// terminal of `cairn tools call` (and the model) raw.
#[test]
fn control_characters_are_escaped_in_every_observation_and_error() {
    use cairn::tools::escape_controls;
    assert_eq!(
        escape_controls("a\r\nb\rc\u{9b}d\u{7f}\te\u{0}"),
        "a\nb\\x0dc\\x9bd\\x7f\te\\x00"
    );
    assert!(matches!(
        escape_controls("plain\ttext\n"),
        std::borrow::Cow::Borrowed(_)
    ));
    let clean = |bytes: &[u8]| {
        !bytes
            .iter()
            .any(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
    };
    let dir = tempfile::tempdir().unwrap();
    let db = shop_db(dir.path());
    let out = cairn(dir.path())
        .arg("--db")
        .arg(&db)
        .args([
            "tools",
            "call",
            "sql",
            r#"{"query": "SELECT char(0,1,7,27)||'[31mred' AS x"}"#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        clean(&out.stdout),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\\x01\\x07\\x1b[31mred"), "{stdout}");

    let m = write_manifest(
        dir.path(),
        r#"
[[tool]]
name = "colors"
description = "Prints \u001b[31mred."
argv = ["printf", "ok \\033[2J\\007\\r\\n"]
args = { type = "object" }

[[tool]]
name = "fails"
description = "Fails in color."
argv = ["sh", "-c", "printf 'bad \\033[31mred\\n' >&2; exit 1"]
args = { type = "object" }
"#,
    );
    let out = cairn(dir.path())
        .arg("--tools")
        .arg(&m)
        .args(["tools", "call", "colors", "{}"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok \\x1b[2J\\x07\n");
    let out = cairn(dir.path())
        .arg("--tools")
        .arg(&m)
        .args(["tools", "call", "fails", "{}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        clean(&out.stderr),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad \\x1b[31mred"),
        "{out:?}"
    );
    let out = cairn(dir.path())
        .arg("--tools")
        .arg(&m)
        .args(["tools", "list"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        clean(&out.stdout),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Prints \\x1b[31mred."));
}

/// Regression: "Who placed order number 5?" showed no row of `orders` before the first round
/// ("order" names no topic for the table scoring), and the 1.5B searched the documents for
/// "5". A number right after a table's name is read as a row's key: the row is shown, with
/// the rows its keys point to.
#[test]
fn a_row_named_by_its_key_is_shown_before_the_first_round() {
    let db = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/shop.sqlite");
    let tool = SqlTool::open(&db, SqlOptions::default()).unwrap();
    let context = tool
        .context_for("Who placed order number 5?", None)
        .unwrap();
    assert!(
        context.contains("-- orders: the row whose id is 5"),
        "{context}"
    );
    assert!(context.contains("2026-10-07"), "{context}");
    assert!(
        context.contains("Marek Novak"),
        "the customer it points to: {context}"
    );
    let context = tool.context_for("When was order 42 placed?", None).unwrap();
    assert!(context.contains("-- orders: no row has id 42"), "{context}");
}

/// Regression: "Order 10252 comes back unopened … How much is the restocking fee?" (8% of
/// the returned goods' value) showed the order row alone before the first round, and the
/// 1.5B model took its freight for the goods' value. The rows that point to a keyed row (the
/// order's lines, with the products they point to) are shown after it.
#[test]
fn the_rows_that_point_to_a_keyed_row_are_shown_with_it() {
    let db = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/trade.sqlite");
    let tool = SqlTool::open(&db, SqlOptions::default()).unwrap();
    let context = tool
        .context_for("What is order 10252 worth?", None)
        .unwrap();
    let order = context
        .find("the row whose Order ID is 10252")
        .unwrap_or_else(|| panic!("{context}"));
    let lines = context
        .find("every row whose Order ID is the Order ID of the Order rows above")
        .unwrap_or_else(|| panic!("{context}"));
    assert!(order < lines, "{context}");
    assert!(
        context[lines..].contains("10252 | 8 | 31 | 9 | 0"),
        "{context}"
    );
    assert!(context[lines..].contains("Ikura"), "the product: {context}");
    // A key no row has shows no lines.
    let context = tool.context_for("What is order 99 worth?", None).unwrap();
    assert!(context.contains("no row has Order ID 99"), "{context}");
    assert!(!context.contains("every row whose"), "{context}");
}

/// Regression: over the hotel's bookings (dates stored as text), "How many nights did Greta
/// Novak stay with us in total?" ran `SUM(Departure - Arrival)`, which SQLite computes as
/// 2025 - 2025 for every row; the 1.5B model answered "0 nights" (it is 9). The difference
/// of two date columns is run as the days between them, and the result says so.
#[test]
fn dates_stored_as_text_subtract_to_the_days_between_them() {
    let db = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hotel.sqlite");
    let reg = sql_registry(&db);
    let obs = sql(
        &reg,
        "SELECT SUM(Departure - Arrival) AS TotalNights FROM Booking WHERE GuestId = \
         (SELECT GuestId FROM Guest WHERE Name = 'Greta Novak') AND State = 'completed'",
    )
    .unwrap()
    .text;
    assert!(obs.starts_with("TotalNights\n9"), "{obs}");
    assert!(
        obs.contains("(note: the query was run with Departure - Arrival as julianday(Departure) - julianday(Arrival)"),
        "{obs}"
    );
    // Through aliases, in a condition too.
    let obs = sql(
        &reg,
        "SELECT COUNT(*) FROM Booking AS b WHERE b.Departure - b.Arrival >= 7",
    )
    .unwrap()
    .text;
    assert!(obs.starts_with("COUNT(*)\n4"), "{obs}");
    // Numbers subtract as numbers, with no note.
    let obs = sql(&reg, "SELECT MAX(Rate) - MIN(Rate) FROM Room")
        .unwrap()
        .text;
    assert!(!obs.contains("note"), "{obs}");
}
