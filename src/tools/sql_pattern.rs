//! The pattern a `sql` query is decoded under, built from the live database's own schema: every
//! word of the query is an SQLite keyword or function, a table or column name that exists (in
//! any letter case, or double-quoted), a short alias (a letter and at most one more letter or
//! digit, as in `o.qty` or `T1.qty`), a name given with `AS` (and, right after `ORDER BY` or
//! `HAVING`, any name, so that a result column named with `AS` can be sorted on: `ORDER BY
//! num_loans`), a number, or text inside a string literal. So the model cannot name a table or
//! column the database does not have (`o.quantity` where the column is `qty`), nor call a
//! function SQLite lacks (`DATEPART(year, order_date)`, `EXTRACT(year FROM …)`; `YEAR`,
//! `MONTH` and `DAY`, which the models write for dates, the sql tool provides), and the query
//! is bounded in length ([`MAX_WORDS`]).
//!
//! The pattern is a regular expression in the JSON Schema `pattern` of the tool's `query`
//! argument, so it constrains the step like any other schema keyword; a table or column whose
//! name is a keyword or needs quoting can always be written double-quoted, and one of several
//! words also bare (`Ship Country`), which the sql tool quotes before running the query.

/// SQLite keywords a read-only query uses (matched in upper, lower or capitalised form).
/// `ORDER`, `GROUP` and `PARTITION` are admitted only with their `BY`: alone they are no SQL,
/// and as words of their own they let a model that meant a name write the keyword instead
/// (`COUNT(order)`, `WHERE order = '7'` over a table `orders` with no such column), which
/// SQLite refused with a bare "syntax error" and the model sent again unchanged. Type
/// names (`INTEGER`, `REAL`, …) are not among them: they follow `AS` in a `CAST`, where any
/// name may stand, and elsewhere they only offered a wrong way out to a model that was
/// writing a name the pattern did not hold (`ORDER BY num_loans` decoded as `ORDER BY numeric`).
const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "LIKE",
    "GLOB",
    "BETWEEN",
    "EXISTS",
    "AS",
    "ON",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "OUTER",
    "CROSS",
    "NATURAL",
    "USING",
    "GROUP BY",
    "HAVING",
    "ORDER BY",
    "ASC",
    "DESC",
    "NULLS",
    "FIRST",
    "LAST",
    "LIMIT",
    "OFFSET",
    "DISTINCT",
    "ALL",
    "UNION",
    "INTERSECT",
    "EXCEPT",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "WITH",
    "RECURSIVE",
    "CAST",
    "COLLATE",
    "NOCASE",
    "ESCAPE",
    "TRUE",
    "FALSE",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "PRAGMA",
    "OVER",
    "PARTITION BY",
    "ROWID",
];

/// SQLite's functions (core, date and time, aggregate, window, math), and `YEAR`, `MONTH`,
/// `DAY`. The math ones (`MOD`, `FLOOR`, …) exist only in SQLite builds that enable them, which
/// the bundled one is not, and the date parts not at all: the sql tool registers them on its
/// connection (`sql/math.rs`). Taken out of the pattern, the 1.5B model still meant `MOD` and
/// the pattern led it on to a pragma's name, `MODULE_LIST(`.
pub(crate) const FUNCTIONS: &[&str] = &[
    "COUNT",
    "SUM",
    "AVG",
    "MIN",
    "MAX",
    "TOTAL",
    "GROUP_CONCAT",
    "ROUND",
    "ABS",
    "LOWER",
    "UPPER",
    "LENGTH",
    "SUBSTR",
    "SUBSTRING",
    "TRIM",
    "LTRIM",
    "RTRIM",
    "REPLACE",
    "INSTR",
    "COALESCE",
    "IFNULL",
    "NULLIF",
    "IIF",
    "DATE",
    "TIME",
    "DATETIME",
    "JULIANDAY",
    "STRFTIME",
    "YEAR",
    "MONTH",
    "DAY",
    "UNIXEPOCH",
    "PRINTF",
    "FORMAT",
    "TYPEOF",
    "SIGN",
    "CEIL",
    "CEILING",
    "FLOOR",
    "SQRT",
    "POWER",
    "POW",
    "MOD",
    "ROW_NUMBER",
    "RANK",
    "DENSE_RANK",
];

/// Names every database has (the schema table and its columns).
const SCHEMA_NAMES: &[&str] = &[
    "sqlite_master",
    "sqlite_schema",
    "name",
    "type",
    "sql",
    "tbl_name",
];

/// The most words (and numbers) in a query. Every repetition in the pattern is counted, so it
/// bounds the query's length by itself: a `maxLength` beside it would make the constraint
/// engine intersect the two, which for a pattern this size ran out of its per-token budget
/// ("too many expressions constructed") on the 150k-token vocabulary.
pub const MAX_WORDS: usize = 80;

/// The most characters of a string literal.
pub const MAX_LITERAL_CHARS: usize = 100;

/// A name that can be written without quotes (unless it is a keyword).
pub(crate) fn is_plain(name: &str) -> bool {
    let mut c = name.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Whether `name` is words of letters, digits and `_` joined by single spaces (two words or
/// more, the first starting with a letter or `_`): names that SQLite reads only quoted but
/// that can be recognised written bare (`Ship Country`), so the pattern admits them bare too
/// and the sql tool quotes them before the query runs.
pub(crate) fn is_spaced(name: &str) -> bool {
    let parts: Vec<&str> = name.split(' ').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        && parts[0].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// `word` as written in upper, lower and capitalised case, and with each of its words
/// capitalised (duplicates removed).
fn cases(word: &str) -> Vec<String> {
    let lower = word.to_ascii_lowercase();
    let mut cap = lower.clone();
    if let Some(f) = cap.get_mut(0..1) {
        f.make_ascii_uppercase();
    }
    // Each word capitalised, for names of several words (`Ship Country`).
    let title = lower
        .split(' ')
        .map(|w| {
            let mut w = w.to_string();
            if let Some(f) = w.get_mut(0..1) {
                f.make_ascii_uppercase();
            }
            w
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = vec![
        word.to_string(),
        word.to_ascii_uppercase(),
        lower,
        cap,
        title,
    ];
    out.sort();
    out.dedup();
    out
}

/// The pattern (anchored) for queries over a database whose tables and columns are `names`,
/// and whose allowed pragmas are `pragmas`.
pub fn query_pattern(names: &[String], pragmas: &[&str]) -> String {
    let mut words: Vec<String> = Vec::new();
    for w in KEYWORDS.iter().chain(FUNCTIONS) {
        words.extend(cases(w));
    }
    let mut quoted: Vec<String> = Vec::new();
    for n in names
        .iter()
        .map(String::as_str)
        .chain(SCHEMA_NAMES.iter().copied())
        .chain(pragmas.iter().copied())
    {
        if is_plain(n) || is_spaced(n) {
            words.extend(cases(n));
        }
        quoted.push(regex::escape(&n.replace('"', "\"\"")));
    }
    // Longest first, so that no alternative is a prefix taken before a longer one (the
    // matcher does not need it, but it keeps the pattern readable in `cairn tools --json`).
    words.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    words.dedup();
    quoted.sort();
    quoted.dedup();
    // A name the query gives with `AS` is not in the schema, and a regular expression cannot
    // remember it; it is used mostly to sort or filter the groups, so any name may follow
    // `ORDER BY` and `HAVING` (SQLite itself answers a wrong one with "no such column").
    let name = "[A-Za-z_][A-Za-z0-9_]{0,30}";
    let named = format!(
        "(?:AS|as|As)[ ]{{1,3}}{name}|(?:ORDER|order|Order)[ ]{{1,3}}(?:BY|by|By)[ ]{{1,3}}{name}|(?:HAVING|having|Having)[ ]{{1,3}}{name}"
    );
    let word = format!(
        "(?:{}|\"(?:{})\"|[A-Za-z][A-Za-z0-9]?|{named}|[0-9]{{1,15}}(?:[.][0-9]{{1,10}})?)",
        words.join("|"),
        quoted.join("|")
    );
    let sep = format!("(?:[ \\n\\t(),.*=<>!+/%|;-]|'(?:[^'\\n]|''){{0,{MAX_LITERAL_CHARS}}}')");
    let start = cases("SELECT")
        .into_iter()
        .chain(cases("WITH"))
        .chain(cases("PRAGMA"))
        .collect::<Vec<_>>()
        .join("|");
    format!("^[ ]?(?:{start})(?:{sep}{{1,8}}{word}){{0,{MAX_WORDS}}}{sep}{{0,8}}$")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, q: &str) -> bool {
        regex::RegexBuilder::new(pattern)
            .size_limit(1 << 30)
            .build()
            .unwrap()
            .is_match(q)
    }

    #[test]
    fn real_names_pass_and_made_up_names_and_foreign_functions_do_not() {
        let names: Vec<String> = ["orders", "qty", "order_date", "products", "price", "name"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = query_pattern(&names, &["table_info"]);
        for ok in [
            "SELECT SUM(o.qty) FROM orders o",
            "select price from products where name = 'Helmet Pro'",
            "SELECT COUNT(*) AS n FROM orders WHERE strftime('%Y', order_date) = '2025'",
            "SELECT p.name, SUM(o.qty * p.price) AS total FROM orders AS o JOIN products p ON p.rowid = o.rowid GROUP BY p.name ORDER BY 2 DESC LIMIT 3",
            "SELECT \"name\" FROM \"products\" WHERE price >= 10.5",
            "SELECT name FROM products WHERE name LIKE '%it''s%'",
            "PRAGMA table_info(orders)",
            "WITH t AS (SELECT price FROM products) SELECT MAX(price) FROM t",
            "SELECT CAST(price AS INTEGER) FROM products",
            // Regression: `T1`, the alias style of much text-to-SQL data, could not be written
            // and the 1.5B model's `T1.member_no` was decoded as `Tbl_name` to the word limit.
            "SELECT T1.name FROM products AS T1 JOIN orders AS T2 ON T1.rowid = T2.rowid",
            // The date parts the sql tool provides (`sql/math.rs`).
            "SELECT COUNT(*) FROM orders WHERE YEAR(order_date) = 2025 AND MONTH(order_date) = 4",
            "select name, count(*) from products group by name order by count(*) desc",
            "SELECT name, RANK() OVER (PARTITION BY price ORDER BY qty) FROM orders",
        ] {
            assert!(matches(&p, ok), "{ok}");
        }
        for bad in [
            "SELECT SUM(o.quantity) FROM orders o",
            "SELECT DATEPART(year, order_date) FROM orders",
            "SELECT EXTRACT(year FROM order_date) FROM orders",
            "SELECT * FROM purchases",
            "DELETE FROM orders",
            "SELECT pricename FROM products",
            // Regression: keywords written where a column was meant (the shop suite's
            // recover-1 with the 1.5B preset, doc-8 with the 0.5B): "syntax error", then the
            // same query again.
            "SELECT COUNT(order) FROM orders WHERE price = 2",
            "SELECT name FROM orders WHERE order = '7'",
            "SELECT name FROM products GROUP name",
        ] {
            assert!(!matches(&p, bad), "{bad}");
        }
    }

    #[test]
    fn a_name_given_with_as_can_be_sorted_and_filtered_on() {
        // Regression: `ORDER BY num_loans` could not be written, and the 1.5B model's query
        // was decoded as `ORDER BY numeric` (a type name), then as `ORDER BY total Copies`.
        let names: Vec<String> = ["loans", "member_no", "copies"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = query_pattern(&names, &[]);
        for ok in [
            "SELECT member_no, COUNT(*) AS num_loans FROM loans GROUP BY member_no ORDER BY num_loans DESC LIMIT 1",
            "SELECT member_no, SUM(copies) as total_copies FROM loans GROUP BY member_no HAVING total_copies > 2",
        ] {
            assert!(matches(&p, ok), "{ok}");
        }
        // Elsewhere a name still has to exist, and type names are no words of their own.
        for bad in [
            "SELECT member_no, COUNT(*) AS n FROM loans WHERE num_loans > 1",
            "SELECT numeric FROM loans",
        ] {
            assert!(!matches(&p, bad), "{bad}");
        }
    }

    #[test]
    fn names_that_need_quotes_are_written_quoted_and_names_of_words_also_bare() {
        // Regression: with `"Ship Country"` admitted only quoted, the 1.5B model's bare
        // `Ship Country` was decoded as `SH IP COUNT` (an alias, an alias, a function).
        let names = vec!["order items".to_string(), "unit-price".to_string()];
        let p = query_pattern(&names, &[]);
        assert!(matches(&p, "SELECT \"unit-price\" FROM \"order items\""));
        assert!(matches(&p, "SELECT \"unit-price\" FROM order items"));
        assert!(matches(&p, "SELECT \"unit-price\" FROM Order Items"));
        assert!(!matches(&p, "SELECT unit-price FROM \"order items\""));
        assert!(!matches(&p, "SELECT \"unit-price\" FROM order  items"));
    }

    #[test]
    fn queries_are_bounded() {
        let p = query_pattern(&["t".to_string()], &[]);
        let long = format!("SELECT {}", vec!["t"; MAX_WORDS + 2].join(", "));
        assert!(!matches(&p, &long));
        let literal = format!(
            "SELECT t FROM t WHERE t = '{}'",
            "x".repeat(MAX_LITERAL_CHARS + 1)
        );
        assert!(!matches(&p, &literal));
    }
}
