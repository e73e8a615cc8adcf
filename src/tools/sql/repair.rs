//! Two mistakes in a query that have one meaning, put right before or after it runs, each
//! said in a note the model reads with the result (nothing is changed silently):
//!
//! - **Dates written as text, subtracted.** SQLite reads `'2025-03-17' - '2025-03-10'` as
//!   `2025 - 2025` and answers 0; `Departure - Arrival` over two such columns is always the
//!   days between them, which is `julianday(Departure) - julianday(Arrival)`. Regression: over
//!   a hotel's bookings, "How many nights did Greta Novak stay with us in total?" ran
//!   `SUM(Departure - Arrival)`, got 0, and the 1.5B model answered "0 nights" (it is 9).
//!   [`days_between`] rewrites such a difference when both sides are columns whose stored
//!   values read `YYYY-MM-DD`, and a difference of their aggregates (`SUM(Departure) -
//!   SUM(Arrival)`, `MAX(Departure) - MIN(Arrival)`) likewise.
//! - **A column under the wrong alias.** `SELECT T2.Name FROM Booking AS T1 JOIN Guest AS T2
//!   … WHERE T2.RoomNo = 303` fails with "no such column: T2.RoomNo" where only one other
//!   table of the query, T1, has `RoomNo`. The error's hint said to write `T1.RoomNo`; the
//!   1.5B model sent the same query again, which turned the tool off, and answered that no one
//!   was booked. [`other_alias`] gives the query with that one name changed, unless the change
//!   would compare a column with itself (`T1.BookingId = T1.BookingId` in a join condition is
//!   true for every pair of rows, not what a join on it meant).

use rusqlite::Connection;

use super::{aliases_of, names_table, quote, table_columns};

/// A piece of a query: a name (plain, quoted, or qualified `a.b`), a string literal, or any
/// other text (operators, spaces, numbers, punctuation).
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// The parts of a name as written (quotes kept), split at its dots.
    Name(Vec<String>),
    Other(String),
}

/// `sql` cut into pieces; string literals (`'…'`, with `''` inside) are `Other`.
fn pieces(sql: &str) -> Vec<Piece> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out: Vec<Piece> = Vec::new();
    let mut other = String::new();
    let mut i = 0;
    let is_start = |c: char| c.is_alphabetic() || c == '_';
    let is_part = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            other.push(c);
            i += 1;
            while i < chars.len() {
                other.push(chars[i]);
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        other.push('\'');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
            continue;
        }
        let starts_name = is_start(c) || c == '"' || c == '`' || c == '[';
        // A name does not start inside a number (`1e5`, `0x1F`).
        let in_number = other
            .chars()
            .next_back()
            .is_some_and(|p| p.is_ascii_digit() || p == '.');
        if !starts_name || in_number {
            other.push(c);
            i += 1;
            continue;
        }
        let mut parts = Vec::new();
        loop {
            let start = i;
            match chars.get(i) {
                Some(&q @ ('"' | '`' | '[')) => {
                    let close = if q == '[' { ']' } else { q };
                    i += 1;
                    while i < chars.len() && chars[i] != close {
                        i += 1;
                    }
                    i = (i + 1).min(chars.len());
                }
                Some(&c) if is_start(c) => {
                    while i < chars.len() && is_part(chars[i]) {
                        i += 1;
                    }
                }
                _ => break,
            }
            parts.push(chars[start..i].iter().collect::<String>());
            if chars.get(i) == Some(&'.')
                && chars
                    .get(i + 1)
                    .is_some_and(|&n| is_start(n) || n == '"' || n == '`' || n == '[')
            {
                i += 1;
                continue;
            }
            break;
        }
        if parts.is_empty() {
            other.push(c);
            i += 1;
            continue;
        }
        if !other.is_empty() {
            out.push(Piece::Other(std::mem::take(&mut other)));
        }
        out.push(Piece::Name(parts));
    }
    if !other.is_empty() {
        out.push(Piece::Other(other));
    }
    out
}

/// A name part without its quotes.
fn bare(part: &str) -> &str {
    part.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']')
}

fn written(parts: &[String]) -> String {
    parts.join(".")
}

/// The table of the query a column reference (`[qualifier, column]` or `[column]`) is in:
/// the table the qualifier names (its own name or its alias), or for a bare column the
/// first named table that has it.
fn table_of(conn: &Connection, sql: &str, tables: &[String], parts: &[String]) -> Option<String> {
    let named = tables.iter().filter(|t| names_table(sql, t));
    match parts {
        [column] => {
            let column = bare(column);
            named
                .into_iter()
                .find(|t| {
                    table_columns(conn, t)
                        .iter()
                        .any(|c| c.eq_ignore_ascii_case(column))
                })
                .cloned()
        }
        [qualifier, column] => {
            let (qualifier, column) = (bare(qualifier), bare(column));
            named
                .into_iter()
                .find(|t| {
                    (t.eq_ignore_ascii_case(qualifier)
                        || aliases_of(sql, t)
                            .iter()
                            .any(|a| a.eq_ignore_ascii_case(qualifier)))
                        && table_columns(conn, t)
                            .iter()
                            .any(|c| c.eq_ignore_ascii_case(column))
                })
                .cloned()
        }
        _ => None,
    }
}

/// Whether `column` of `table` holds dates as text: its first 20 values that are not NULL
/// are all text starting `YYYY-MM-DD` (and there is at least one).
fn holds_text_dates(conn: &Connection, table: &str, column: &str) -> bool {
    let q = format!(
        "SELECT {c} FROM {t} WHERE {c} IS NOT NULL LIMIT 20",
        c = quote(column),
        t = quote(table)
    );
    let Ok(mut stmt) = conn.prepare(&q) else {
        return false;
    };
    let Ok(mut rows) = stmt.query([]) else {
        return false;
    };
    let mut seen = 0;
    while let Ok(Some(row)) = rows.next() {
        let Ok(rusqlite::types::ValueRef::Text(t)) = row.get_ref(0) else {
            return false;
        };
        let b = t.get(..10).unwrap_or(t);
        let date = b.len() == 10
            && b.iter().enumerate().all(|(i, &c)| match i {
                4 | 7 => c == b'-',
                _ => c.is_ascii_digit(),
            });
        if !date {
            return false;
        }
        seen += 1;
    }
    seen > 0
}

/// Whether the column reference `parts` of `sql` is a column holding dates as text.
fn is_date_column(conn: &Connection, sql: &str, tables: &[String], parts: &[String]) -> bool {
    table_of(conn, sql, tables, parts)
        .is_some_and(|t| holds_text_dates(conn, &t, bare(parts.last().expect("a name has a part"))))
}

/// `sql` with each `A - B` whose sides are both columns holding dates as text written as
/// `(julianday(A) - julianday(B))`, and a note saying so; `None` when there is none.
pub(super) fn days_between(
    conn: &Connection,
    sql: &str,
    tables: &[String],
) -> Option<(String, String)> {
    let ps = pieces(sql);
    let mut out = String::new();
    let mut changed: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    while i < ps.len() {
        if let Some((new, rest, written_as, used)) = aggregates_between(conn, sql, tables, &ps, i) {
            out.push_str(&new);
            out.push_str(rest);
            changed.push((written_as, new));
            i += used;
            continue;
        }
        if let (Some(Piece::Name(a)), Some(Piece::Other(op)), Some(Piece::Name(b))) =
            (ps.get(i), ps.get(i + 1), ps.get(i + 2))
        {
            // A name right before `(` is a function; a product or quotient next to either
            // side would bind to it first.
            let before = match i.checked_sub(1).and_then(|j| ps.get(j)) {
                Some(Piece::Other(s)) => s.trim_end().chars().next_back(),
                _ => None,
            };
            let after = match ps.get(i + 3) {
                Some(Piece::Other(s)) => s.trim_start().chars().next(),
                _ => None,
            };
            let binds = |c: Option<char>| matches!(c, Some('*' | '/' | '%' | '(' | '.'));
            if op.trim() == "-"
                && !matches!(before, Some('*' | '/' | '%' | '-' | '.'))
                && !binds(after)
            {
                let dates = [a, b]
                    .iter()
                    .all(|parts| is_date_column(conn, sql, tables, parts));
                if dates {
                    let (a, b) = (written(a), written(b));
                    let new = format!("(julianday({a}) - julianday({b}))");
                    out.push_str(&new);
                    changed.push((format!("{a} - {b}"), new));
                    i += 3;
                    continue;
                }
            }
        }
        match &ps[i] {
            Piece::Name(parts) => out.push_str(&written(parts)),
            Piece::Other(s) => out.push_str(s),
        }
        i += 1;
    }
    if changed.is_empty() {
        return None;
    }
    let said: Vec<String> = changed
        .iter()
        .map(|(old, new)| {
            let new = new
                .strip_prefix('(')
                .and_then(|n| n.strip_suffix(')'))
                .unwrap_or(new);
            format!("{old} as {new}")
        })
        .collect();
    Some((
        out,
        format!(
            "(note: the query was run with {}, the days between the dates: SQLite subtracts \
             dates written as text by their years only)",
            said.join(", ")
        ),
    ))
}

/// The aggregates whose difference [`days_between`] counts in days: over dates as text,
/// `SUM` and `AVG` add up years, `MIN` and `MAX` pick the earliest and latest date.
const DATE_AGGREGATES: [&str; 5] = ["SUM", "AVG", "TOTAL", "MIN", "MAX"];

/// At `ps[i]`, `F(A) - G(B)` with `F` and `G` of [`DATE_AGGREGATES`] and `A`, `B` columns
/// holding dates as text: the same difference in days (`SUM(julianday(A))`, and
/// `julianday(MAX(A))` for the earliest and latest), the text after it in its last piece,
/// the difference as it was written, and how many pieces it took. Regression: "How many
/// nights did Greta Novak stay with us in total?" ran `SUM(Departure) - SUM(Arrival)`, which
/// SQLite reads as a sum of years, got 0, and the 1.5B model answered "0 nights" (it is 9).
fn aggregates_between<'p>(
    conn: &Connection,
    sql: &str,
    tables: &[String],
    ps: &'p [Piece],
    i: usize,
) -> Option<(String, &'p str, String, usize)> {
    let aggregate = |k: usize| match ps.get(k) {
        Some(Piece::Name(p)) if p.len() == 1 => DATE_AGGREGATES
            .iter()
            .find(|f| f.eq_ignore_ascii_case(&p[0]))
            .copied(),
        _ => None,
    };
    let other = |k: usize| -> Option<&'p str> {
        match ps.get(k) {
            Some(Piece::Other(s)) => Some(s.as_str()),
            _ => None,
        }
    };
    let date_column = |k: usize| match ps.get(k) {
        Some(Piece::Name(parts)) if is_date_column(conn, sql, tables, parts) => {
            Some(written(parts))
        }
        _ => None,
    };
    let (f, g) = (aggregate(i)?, aggregate(i + 4)?);
    if other(i + 1)?.trim() != "(" || other(i + 5)?.trim() != "(" {
        return None;
    }
    let minus = other(i + 3)?.trim().strip_prefix(')')?.trim();
    let close = other(i + 7)?.trim_start();
    if minus != "-" || !close.starts_with(')') {
        return None;
    }
    // A product or quotient on either side would bind to it first.
    let before = match i.checked_sub(1).and_then(|j| ps.get(j)) {
        Some(Piece::Other(s)) => s.trim_end().chars().next_back(),
        _ => None,
    };
    let after = close[1..].trim_start().chars().next();
    if matches!(before, Some('*' | '/' | '%' | '-' | '.')) || matches!(after, Some('*' | '/' | '%'))
    {
        return None;
    }
    let (a, b) = (date_column(i + 2)?, date_column(i + 6)?);
    let days = |f: &str, c: &str| match f {
        "MIN" | "MAX" => format!("julianday({f}({c}))"),
        _ => format!("{f}(julianday({c}))"),
    };
    let new = format!("({} - {})", days(f, &a), days(g, &b));
    let written_as = format!("{f}({a}) - {g}({b})");
    Some((new, &close[1..], written_as, 8))
}

/// For "no such column: Q.col", where the query names a table as Q that lacks `col` and
/// exactly one other name of the query (a table or its alias) is a table that has it: `sql`
/// with every `Q.col` written with that name, and a note saying so. `None` when no one name
/// fits, or when the change would compare a column with itself.
pub(super) fn other_alias(
    conn: &Connection,
    sql: &str,
    tables: &[String],
    missing: &str,
) -> Option<(String, String)> {
    let (qualifier, column) = missing.rsplit_once('.')?;
    let (qualifier, column) = (bare(qualifier), bare(column));
    let named: Vec<&String> = tables.iter().filter(|t| names_table(sql, t)).collect();
    // The qualifier must be a name the query gives one of its tables, not a table it
    // leaves out (that needs a join, which is the model's to write).
    let is_qualifier = |t: &String| {
        t.eq_ignore_ascii_case(qualifier)
            || aliases_of(sql, t)
                .iter()
                .any(|a| a.eq_ignore_ascii_case(qualifier))
    };
    if !named.iter().any(|t| is_qualifier(t)) {
        return None;
    }
    let names = super::other_names_with(conn, sql, tables, qualifier, column);
    let [(name, table)] = names.as_slice() else {
        return None;
    };
    let ps = pieces(sql);
    let mut out = String::new();
    let mut changed = false;
    for p in &ps {
        match p {
            Piece::Name(parts)
                if parts.len() == 2
                    && bare(&parts[0]).eq_ignore_ascii_case(qualifier)
                    && bare(&parts[1]).eq_ignore_ascii_case(column) =>
            {
                out.push_str(&format!("{name}.{}", parts[1]));
                changed = true;
            }
            Piece::Name(parts) => out.push_str(&written(parts)),
            Piece::Other(s) => out.push_str(s),
        }
    }
    if !changed || compares_with_itself(&out, name, column) {
        return None;
    }
    Some((
        out,
        format!(
            "(note: the query was run with {name}.{column} for {qualifier}.{column}: {column} \
             is a column of {table}, which this query calls {name})"
        ),
    ))
}

/// Whether `sql` compares `name.column` with itself (`x.c = x.c`).
fn compares_with_itself(sql: &str, name: &str, column: &str) -> bool {
    let ps = pieces(sql);
    let is_it = |p: Option<&Piece>| match p {
        Some(Piece::Name(parts)) => {
            parts.len() == 2
                && bare(&parts[0]).eq_ignore_ascii_case(name)
                && bare(&parts[1]).eq_ignore_ascii_case(column)
        }
        _ => false,
    };
    (0..ps.len()).any(|i| {
        is_it(ps.get(i))
            && matches!(ps.get(i + 1), Some(Piece::Other(s)) if s.trim() == "=")
            && is_it(ps.get(i + 2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hotel() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE Guest (GuestId INTEGER PRIMARY KEY, Name TEXT);
             CREATE TABLE Booking (BookingId INTEGER PRIMARY KEY, GuestId INTEGER,
                 RoomNo INTEGER, Arrival TEXT, Departure TEXT, Note TEXT);
             CREATE TABLE Charge (ChargeId INTEGER PRIMARY KEY, BookingId INTEGER, Amount REAL);
             INSERT INTO Guest VALUES (3, 'Greta Novak');
             INSERT INTO Booking VALUES (3, 3, 203, '2025-03-10', '2025-03-17', 'late'),
                                        (13, 3, 201, '2025-05-01', '2025-05-03', NULL);",
        )
        .unwrap();
        conn
    }

    fn tables() -> Vec<String> {
        vec!["Guest".into(), "Booking".into(), "Charge".into()]
    }

    #[test]
    fn a_difference_of_text_dates_is_counted_in_days() {
        let conn = hotel();
        let sql = "SELECT SUM(Departure - Arrival) AS TotalNights FROM Booking WHERE GuestId = 3";
        let (fixed, note) = days_between(&conn, sql, &tables()).unwrap();
        assert_eq!(
            fixed,
            "SELECT SUM((julianday(Departure) - julianday(Arrival))) AS TotalNights FROM Booking WHERE GuestId = 3"
        );
        assert!(
            note.contains("julianday(Departure) - julianday(Arrival)"),
            "{note}"
        );
        let nights: f64 = conn.query_row(&fixed, [], |r| r.get(0)).unwrap();
        assert_eq!(nights, 9.0);
        // Qualified, through an alias.
        let sql =
            "SELECT b.Departure - b.Arrival FROM Booking b JOIN Guest g ON g.GuestId = b.GuestId";
        let (fixed, _) = days_between(&conn, sql, &tables()).unwrap();
        assert!(
            fixed.starts_with("SELECT (julianday(b.Departure) - julianday(b.Arrival)) FROM"),
            "{fixed}"
        );
    }

    #[test]
    fn a_difference_of_aggregates_of_text_dates_is_counted_in_days() {
        // Regression: `SUM(Departure) - SUM(Arrival)` summed years and answered 0 nights.
        let conn = hotel();
        let sql = "SELECT SUM(Departure) - SUM(Arrival) FROM Booking WHERE GuestId = 3";
        let (fixed, note) = days_between(&conn, sql, &tables()).unwrap();
        assert_eq!(
            fixed,
            "SELECT (SUM(julianday(Departure)) - SUM(julianday(Arrival))) FROM Booking WHERE GuestId = 3"
        );
        assert!(
            note.contains("SUM(Departure) - SUM(Arrival) as SUM(julianday(Departure)) - SUM(julianday(Arrival))"),
            "{note}"
        );
        let nights: f64 = conn.query_row(&fixed, [], |r| r.get(0)).unwrap();
        assert_eq!(nights, 9.0);
        // The latest departure less the earliest arrival, through an alias.
        let sql = "SELECT max(b.Departure) - MIN(b.Arrival) AS span FROM Booking b";
        let (fixed, _) = days_between(&conn, sql, &tables()).unwrap();
        assert_eq!(
            fixed,
            "SELECT (julianday(MAX(b.Departure)) - julianday(MIN(b.Arrival))) AS span FROM Booking b"
        );
        let span: f64 = conn.query_row(&fixed, [], |r| r.get(0)).unwrap();
        assert_eq!(span, 54.0);
    }

    #[test]
    fn other_differences_are_left_alone() {
        let conn = hotel();
        for sql in [
            // Not dates.
            "SELECT RoomNo - GuestId FROM Booking",
            "SELECT Note - Arrival FROM Booking",
            // Already days, a literal, or text inside a string.
            "SELECT julianday(Departure) - julianday(Arrival) FROM Booking",
            "SELECT Departure - '2025-01-01' FROM Booking",
            "SELECT 'Departure - Arrival' FROM Booking",
            // A product binds first.
            "SELECT 2 * Departure - Arrival FROM Booking",
            // Aggregates of what is not dates, or with a product binding first.
            "SELECT SUM(RoomNo) - SUM(GuestId) FROM Booking",
            "SELECT 2 * SUM(Departure) - SUM(Arrival) FROM Booking",
            "SELECT SUM(Departure) - SUM(Arrival) * 2 FROM Booking",
        ] {
            assert_eq!(days_between(&conn, sql, &tables()), None, "{sql}");
        }
    }

    #[test]
    fn a_column_under_the_wrong_alias_takes_the_one_that_has_it() {
        let conn = hotel();
        let sql = "SELECT T2.Name FROM Booking AS T1 INNER JOIN Guest AS T2 ON T1.GuestId = \
                   T2.GuestId WHERE T2.RoomNo = 303 AND T1.Departure LIKE '2025-06-%'";
        let (fixed, note) = other_alias(&conn, sql, &tables(), "T2.RoomNo").unwrap();
        assert!(fixed.contains("WHERE T1.RoomNo = 303 AND"), "{fixed}");
        assert!(fixed.contains("ON T1.GuestId = T2.GuestId"), "{fixed}");
        assert!(
            note.contains("T1.RoomNo for T2.RoomNo") && note.contains("Booking"),
            "{note}"
        );
    }

    #[test]
    fn an_alias_is_not_changed_where_that_is_not_the_one_meaning() {
        let conn = hotel();
        // The change would join a column with itself.
        let sql = "SELECT c.Amount FROM Charge AS c JOIN Guest AS g ON c.BookingId = g.BookingId";
        assert_eq!(other_alias(&conn, sql, &tables(), "g.BookingId"), None);
        // The table that has the column is not in the query: a join is needed.
        let sql =
            "SELECT T1.Name FROM Booking AS T1 JOIN Charge AS T2 ON T1.BookingId = T2.BookingId";
        assert_eq!(other_alias(&conn, sql, &tables(), "T1.Name"), None);
        // Two other tables have it.
        let sql = "SELECT g.Name FROM Guest g JOIN Booking b ON b.GuestId = g.GuestId \
                   JOIN Charge c ON c.BookingId = b.BookingId WHERE g.BookingId = 3";
        assert_eq!(other_alias(&conn, sql, &tables(), "g.BookingId"), None);
        // A qualifier that is no name of the query.
        let sql = "SELECT x.RoomNo FROM Booking";
        assert_eq!(other_alias(&conn, sql, &tables(), "x.RoomNo"), None);
    }
}
