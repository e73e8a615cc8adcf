//! A string literal that runs on into the SQL after it, found and named.
//!
//! A name with an apostrophe is written `'O''Neill'` in SQL: two quotes inside the string
//! stand for one. Regression: the 1.5B model wrote `last_name = 'O''Neill) AND category = '`,
//! one quote short, so the string went on over `) AND category = ` and every quote after it
//! opened a string where the model meant to close one (and the other way round); under the
//! query pattern the text inside strings is free, so the query never ended and the step was
//! cut off at its token limit, four rounds in a row, with no answer. [`runaway_literal`] names
//! the string and where it should have closed, for the message of a cut-off step and the
//! hint of a query that failed.

/// SQL keywords that, written in capitals inside a string, show that the string has run on
/// over the query's own text.
const KEYWORDS: [&str; 10] = [
    "AND", "OR", "WHERE", "FROM", "JOIN", "ON", "GROUP", "ORDER", "LIMIT", "LIKE",
];

/// How a string literal of a query ends when its closing quote is really the opening quote
/// of the next value: after a comparison.
const OPERATOR_ENDS: [&str; 8] = ["=", "<", ">", "LIKE", "IN (", "(", ",", "IS"];

/// The string literals of `sql` as written between their quotes (`''` kept), each with
/// whether it was closed.
fn literals(sql: &str) -> Vec<(&str, bool)> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\'' {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut j = start;
        let mut closed = false;
        while j < bytes.len() {
            if bytes[j] == b'\'' {
                if bytes.get(j + 1) == Some(&b'\'') {
                    j += 2;
                    continue;
                }
                closed = true;
                break;
            }
            j += 1;
        }
        out.push((&sql[start..j.min(bytes.len())], closed));
        i = j + 1;
    }
    out
}

/// Where the query's own text starts inside the content of a literal: the first `)` or space
/// before a capital keyword of [`KEYWORDS`], when the content ends as a comparison does
/// ([`OPERATOR_ENDS`]) or the literal was never closed. `None` for a literal that reads as a
/// value ("Tom AND Jerry" closed after it, `'%it''s%'`).
fn sql_start(content: &str, closed: bool) -> Option<usize> {
    let trimmed = content.trim_end();
    if closed && !OPERATOR_ENDS.iter().any(|e| trimmed.ends_with(e)) {
        return None;
    }
    // The words of `content` with their offsets, the last one too (a string cut off just
    // after `AND`).
    let keyword = content
        .split(|c: char| !c.is_ascii_alphabetic())
        .map(|w| (w.as_ptr() as usize - content.as_ptr() as usize, w))
        .find(|(at, w)| *at > 0 && KEYWORDS.contains(w))
        .map(|(at, _)| at)?;
    // Back over the spaces and brackets in front of the keyword.
    let before = content[..keyword].trim_end_matches([' ', ')', '\n', '\t']);
    (!before.is_empty()).then_some(before.len())
}

/// A string literal that runs on into the SQL after it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunawayLiteral {
    /// The query up to where the string should have closed (`… last_name = 'O''Neill`).
    pub meant: String,
    /// What went wrong, as a sentence for the model: the string as written, and where it
    /// should have closed.
    pub message: String,
}

/// The first string literal of `sql` that runs on into the SQL after it. `None` when every
/// literal reads as a value.
pub fn runaway_literal(sql: &str) -> Option<RunawayLiteral> {
    literals(sql).into_iter().find_map(|(content, closed)| {
        let at = sql_start(content, closed)?;
        let value = &content[..at];
        let shown = if closed {
            format!("'{content}'")
        } else {
            format!("'{}", content.trim_end())
        };
        let doubled = if value.contains("''") {
            format!(
                "; inside a string '' stands for one quote and does not end it, so {} is \
                 written '{value}'",
                value.replace("''", "'")
            )
        } else {
            String::new()
        };
        // `content` is a slice of `sql`: the query up to the value's end is what was meant.
        let end = content.as_ptr() as usize - sql.as_ptr() as usize + at;
        Some(RunawayLiteral {
            meant: sql[..end].to_string(),
            message: format!(
                "the string {shown} runs on into the query's own text: a closing quote is \
                 missing after {value}{doubled}"
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_an_apostrophe_one_quote_short_is_named() {
        // Regression: office-sql-5's query, which ran to the step's token limit four times.
        let sql = "SELECT SUM(km) FROM expenses_claim WHERE employee_id = (SELECT id FROM \
                   hr_employee WHERE first_name = 'Siobhan' AND last_name = 'O''Neill) AND \
                   category = 'm' AND status = 'payroll";
        let found = runaway_literal(sql).unwrap();
        assert!(
            found.meant.ends_with("last_name = 'O''Neill"),
            "{}",
            found.meant
        );
        let said = found.message;
        assert!(
            said.starts_with("the string 'O''Neill) AND category = ' runs on"),
            "{said}"
        );
        assert!(said.contains("missing after O''Neill;"), "{said}");
        assert!(said.contains("so O'Neill is written 'O''Neill'"), "{said}");
    }

    #[test]
    fn a_string_never_closed_is_named_where_the_sql_starts() {
        let sql = "SELECT * FROM t WHERE city = 'Paris AND year > 2020";
        let found = runaway_literal(sql).unwrap();
        assert_eq!(found.meant, "SELECT * FROM t WHERE city = 'Paris");
        let said = found.message;
        assert!(
            said.starts_with("the string 'Paris AND year > 2020 runs on"),
            "{said}"
        );
        assert!(said.ends_with("missing after Paris"), "{said}");
        // A step cut off right after the keyword.
        let found = runaway_literal("SELECT km FROM t WHERE last_name = 'O''Neill) AND").unwrap();
        assert!(found.meant.ends_with("'O''Neill"), "{}", found.meant);
    }

    #[test]
    fn values_that_hold_capitals_or_quotes_are_not_named() {
        for sql in [
            "SELECT * FROM shows WHERE title = 'Tom AND Jerry' AND year = 1990",
            "SELECT name FROM products WHERE name LIKE '%it''s%'",
            "SELECT * FROM staff WHERE last_name = 'O''Neill' AND dept = 'Sales'",
            "SELECT 'a', 'b' FROM t",
        ] {
            assert_eq!(runaway_literal(sql), None, "{sql}");
        }
    }
}
