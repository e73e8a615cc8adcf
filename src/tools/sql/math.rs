//! Functions the query pattern admits that the SQLite compiled into cairn lacks, registered on
//! the tool's connection.
//!
//! SQLite's math functions (`mod`, `floor`, `ceil`, `ceiling`, `sqrt`, `power`, `pow`) need
//! `SQLITE_ENABLE_MATH_FUNCTIONS`, which the bundled build is without, so a query the pattern
//! let the model write failed at run time. Regression: the 1.5B model's `SELECT COUNT(*) FROM
//! visit WHERE … MOD(visit_date, 100) …` came back "no such function: MOD"; it sent the same
//! query again, the sql tool was turned off for the task, and the answer was the error's text.
//! Their semantics are SQLite's own (a NULL, a value that is not a number, or a result that is
//! not a number gives NULL; `floor` and `ceil` keep an integer as it is), except that `mod` of
//! two integers is an integer, as the `%` operator gives it, where SQLite's returns a real.
//!
//! `year`, `month` and `day` of a date (MySQL's and SQL Server's, which the models write for
//! "in April 2025": `MONTH(visit_date) = 4`): the year, month or day of a text date written
//! `YYYY-MM-DD` (alone, or followed by a time after a space or `T`), as an integer, the same
//! as `CAST(strftime('%m', col) AS INTEGER)`; NULL for anything else. Kept out of the pattern,
//! the model meant them anyway and reached for the nearest function it could write (`MOD`).

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

/// A numeric argument.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Real(f64),
}

impl Num {
    fn real(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Real(r) => r,
        }
    }
}

/// Argument `i` as a number: integers and reals as they are, text written as a decimal
/// number (surrounding spaces allowed; not `inf` or `nan`, which Rust would parse and SQLite
/// does not), anything else (NULL, other text, a blob) `None`.
fn arg(ctx: &Context<'_>, i: usize) -> Option<Num> {
    match ctx.get_raw(i) {
        ValueRef::Integer(v) => Some(Num::Int(v)),
        ValueRef::Real(v) => Some(Num::Real(v)),
        ValueRef::Text(t) => {
            let t = std::str::from_utf8(t).ok()?.trim();
            if !t
                .bytes()
                .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c))
            {
                return None;
            }
            t.parse::<i64>()
                .map(Num::Int)
                .ok()
                .or_else(|| t.parse::<f64>().ok().map(Num::Real))
        }
        ValueRef::Null | ValueRef::Blob(_) => None,
    }
}

/// A real result, NULL where it is not a number.
fn real(v: f64) -> Value {
    if v.is_nan() {
        Value::Null
    } else {
        Value::Real(v)
    }
}

/// `mod(x, y)`: the remainder of `x / y` with the sign of `x`; NULL when `y` is zero.
fn modulo(x: Num, y: Num) -> Value {
    match (x, y) {
        (Num::Int(a), Num::Int(b)) => a.checked_rem(b).map_or(Value::Null, Value::Integer),
        _ => real(x.real() % y.real()),
    }
}

/// `floor(x)` (`up` false) or `ceil(x)` (`up` true): integers unchanged, reals rounded.
fn round_to_whole(x: Num, up: bool) -> Value {
    match x {
        Num::Int(i) => Value::Integer(i),
        Num::Real(r) => real(if up { r.ceil() } else { r.floor() }),
    }
}

/// The year, month and day of a text date `YYYY-MM-DD` (leading spaces allowed; a time may
/// follow after a space or `T`); `None` for anything else, or a month outside 1–12 or a day
/// outside 1–31 (a day past its month's end, `2025-02-30`, is taken as written).
fn date_parts(v: ValueRef<'_>) -> Option<(i64, i64, i64)> {
    let ValueRef::Text(t) = v else { return None };
    let t = std::str::from_utf8(t).ok()?.trim_start();
    let b = t.as_bytes();
    if b.len() < 10
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b.get(10), None | Some(b' ' | b'T'))
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = &t[r];
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some((y, m, d))
}

/// One part of a date's `(year, month, day)`.
type DatePart = fn((i64, i64, i64)) -> i64;

/// Registers the functions on `conn` (see the module's documentation).
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("mod", 2, flags, |ctx| {
        Ok(match (arg(ctx, 0), arg(ctx, 1)) {
            (Some(x), Some(y)) => modulo(x, y),
            _ => Value::Null,
        })
    })?;
    for (name, up) in [("floor", false), ("ceil", true), ("ceiling", true)] {
        conn.create_scalar_function(name, 1, flags, move |ctx| {
            Ok(arg(ctx, 0).map_or(Value::Null, |x| round_to_whole(x, up)))
        })?;
    }
    conn.create_scalar_function("sqrt", 1, flags, |ctx| {
        Ok(arg(ctx, 0).map_or(Value::Null, |x| real(x.real().sqrt())))
    })?;
    for name in ["power", "pow"] {
        conn.create_scalar_function(name, 2, flags, |ctx| {
            Ok(match (arg(ctx, 0), arg(ctx, 1)) {
                (Some(x), Some(y)) => real(x.real().powf(y.real())),
                _ => Value::Null,
            })
        })?;
    }
    let parts: [(&str, DatePart); 3] = [("year", |p| p.0), ("month", |p| p.1), ("day", |p| p.2)];
    for (name, part) in parts {
        conn.create_scalar_function(name, 1, flags, move |ctx| {
            Ok(date_parts(ctx.get_raw(0)).map_or(Value::Null, |p| Value::Integer(part(p))))
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(conn: &Connection, expr: &str) -> Value {
        conn.query_row(&format!("SELECT {expr}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn math_and_date_functions_give_sqlites_results() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let cases: &[(&str, Value)] = &[
            ("mod(7, 3)", Value::Integer(1)),
            ("MOD(-7, 3)", Value::Integer(-1)),
            ("mod(7.5, 2)", Value::Real(1.5)),
            ("mod(7, 0)", Value::Null),
            ("mod(7.0, 0)", Value::Null),
            ("mod(NULL, 3)", Value::Null),
            ("mod('10', '4')", Value::Integer(2)),
            ("mod('ten', 4)", Value::Null),
            ("floor('inf')", Value::Null),
            ("sqrt('nan')", Value::Null),
            ("floor(' 2.5 ')", Value::Real(2.0)),
            ("mod(-9223372036854775808, -1)", Value::Null),
            ("floor(2.7)", Value::Real(2.0)),
            ("floor(-2.2)", Value::Real(-3.0)),
            ("FLOOR(5)", Value::Integer(5)),
            ("ceil(2.1)", Value::Real(3.0)),
            ("ceiling(-2.7)", Value::Real(-2.0)),
            ("ceil(NULL)", Value::Null),
            ("sqrt(16)", Value::Real(4.0)),
            ("sqrt(-1)", Value::Null),
            ("power(2, 10)", Value::Real(1024.0)),
            ("pow(9, 0.5)", Value::Real(3.0)),
            ("power(2, NULL)", Value::Null),
        ];
        let dates: &[(&str, Value)] = &[
            ("month('2025-04-05')", Value::Integer(4)),
            ("YEAR('2025-04-05 10:30:00')", Value::Integer(2025)),
            ("day('2025-04-05T10:30')", Value::Integer(5)),
            ("month('  2025-12-31')", Value::Integer(12)),
            ("month('2025-13-01')", Value::Null),
            ("month('05/04/2025')", Value::Null),
            ("month('2025-04-05x')", Value::Null),
            ("month('2025-4-5')", Value::Null),
            ("month(20250405)", Value::Null),
            ("month(NULL)", Value::Null),
        ];
        for (expr, want) in cases.iter().chain(dates) {
            assert_eq!(&eval(&conn, expr), want, "{expr}");
        }
        // In a query over a column, as the model writes them.
        conn.execute_batch(
            "CREATE TABLE visit (id INTEGER, fee REAL, visit_date TEXT); \
             INSERT INTO visit VALUES (1, 48.5, '2025-04-02'), (2, 62.0, '2025-05-03'), \
             (3, 17.25, '2024-04-30');",
        )
        .unwrap();
        let april: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM visit WHERE MONTH(visit_date) = 4 AND YEAR(visit_date) = 2025",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(april, 1);
        let odd: i64 = conn
            .query_row("SELECT COUNT(*) FROM visit WHERE MOD(id, 2) = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(odd, 2);
        let total: f64 = conn
            .query_row("SELECT SUM(FLOOR(fee)) FROM visit", [], |r| r.get(0))
            .unwrap();
        assert_eq!(total, 127.0);
    }
}
