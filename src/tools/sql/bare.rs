//! Names SQLite reads only in double quotes, written bare: `Ship Country` for the column
//! `"Ship Country"`, `FROM Order` for the table `"Order"`. Databases people bring have them
//! (exports from spreadsheets and other engines name columns in words; `Order` and `Group` are
//! common table names), and the models write them as they read them in a sample row's header,
//! without quotes. Regression: over a table `"Order"` with columns `"Ship Country"` and
//! `"Order ID"`, the 1.5B model wrote `FROM Order WHERE SH IP COUNT = 'Germany'` (the query
//! pattern had only the quoted form of the column, so `Ship` could not go on) and answered 0
//! of 5 questions; each failed query came back as "near "Order": syntax error".
//!
//! [`BareNames`] is read from the schema when the tool opens. A query is rewritten before it
//! runs: a name of several words written bare (in any letter case and spacing, or with `_`
//! between its words where the database has no name spelt so) is put in quotes as the schema
//! spells it, and a table or column whose bare name SQLite reads as a
//! keyword is quoted where only a name can stand (after `FROM` or `JOIN`, before or after the
//! dot of a qualified column). Text inside string literals and quoted names is never touched.
//! The query pattern admits the bare forms ([`super::super::sql_pattern::query_pattern`]), and
//! the description shows such names quoted, as they are best written.

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;

use super::super::sql_pattern::{is_plain, is_spaced};
use super::quote;

/// The names of a database that need double quotes, and how to find them written bare.
#[derive(Debug, Default)]
pub(super) struct BareNames {
    /// Names of two or more words (`Ship Country`), by their words lowercased and joined with
    /// one space (and with `_`, `ship_country`, where that is no name of the database), to the
    /// name as the schema spells it.
    spaced: HashMap<String, String>,
    /// Matches any of `spaced` written bare: its words in any case, any spacing between them.
    spaced_re: Option<regex::Regex>,
    /// Tables and columns whose bare name SQLite reads as a keyword (`Order`, `group`), by
    /// their lowercase name, to the name as the schema spells it.
    keywords: HashMap<String, String>,
    /// `FROM` or `JOIN` and a table of `keywords`, written bare.
    after_from_re: Option<regex::Regex>,
    /// A name of `keywords` after the dot of a qualified column (`o.order`).
    after_dot_re: Option<regex::Regex>,
    /// A table of `keywords` before the dot of a qualified column (`Order.Freight`).
    before_dot_re: Option<regex::Regex>,
    /// Every name that needs quotes, lowercased.
    quoted: HashSet<String>,
    /// The first name found that needs quotes, as the schema spells it.
    example: Option<String>,
}

/// Whether SQLite knows `name` as a keyword (any case). Many keywords still work as names
/// (`key`, `action`), so only these are tried bare: a prepare per keyword-named table or
/// column at open, not one per name of the database.
fn is_keyword(name: &str) -> bool {
    let Ok(len) = std::os::raw::c_int::try_from(name.len()) else {
        return false;
    };
    // SAFETY: SQLite reads `len` bytes of `name`, which outlives the call; the function has
    // no other effect.
    unsafe { rusqlite::ffi::sqlite3_keyword_check(name.as_ptr().cast(), len) != 0 }
}

/// `words` as one alternation, longest first, each word escaped and `\s+` between words.
fn alternation<'a>(words: impl Iterator<Item = &'a String>) -> String {
    let mut alts: Vec<String> = words
        .map(|w| {
            w.split(' ')
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join(r"\s+")
        })
        .collect();
    alts.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    alts.join("|")
}

impl BareNames {
    /// Reads which of `tables` and their `columns` (`(table, column)` pairs) need quotes. A
    /// plain name needs them when it is an SQLite keyword and SQLite cannot prepare a query
    /// that writes it bare.
    pub(super) fn read(conn: &Connection, tables: &[String], columns: &[(String, String)]) -> Self {
        let mut out = BareNames::default();
        let mut keyword_tables = Vec::new();
        let names = tables
            .iter()
            .map(|t| (t, None))
            .chain(columns.iter().map(|(t, c)| (c, Some(t))));
        for (name, table) in names {
            let lower = name.to_lowercase();
            if out.quoted.contains(&lower) {
                continue;
            }
            if is_spaced(name) {
                out.spaced.insert(lower.clone(), name.clone());
            } else if is_plain(name) {
                let bare = match table {
                    None => format!("SELECT 1 FROM {name} LIMIT 0"),
                    Some(t) => format!("SELECT {name} FROM {} LIMIT 0", quote(t)),
                };
                if !is_keyword(name) || conn.prepare(&bare).is_ok() {
                    continue;
                }
                out.keywords.insert(lower.clone(), name.clone());
                if table.is_none() {
                    keyword_tables.push(lower.clone());
                }
            }
            out.quoted.insert(lower);
            out.example.get_or_insert_with(|| name.clone());
        }
        // The same words joined by `_` (`hire_date` for `Hire Date`), where no table or column
        // has that name: the model writes snake case where only any name can stand (after
        // `ORDER BY`), and `ORDER BY hire_date` was "no such column" three times over.
        let all: HashSet<String> = tables
            .iter()
            .chain(columns.iter().map(|(_, c)| c))
            .map(|n| n.to_lowercase())
            .collect();
        let snake: Vec<(String, String)> = out
            .spaced
            .iter()
            .map(|(key, name)| (key.replace(' ', "_"), name.clone()))
            .filter(|(s, _)| !all.contains(s))
            .collect();
        out.spaced.extend(snake);
        let build = |p: String| regex::Regex::new(&p).ok();
        if !out.spaced.is_empty() {
            // Words, so that `Order IDs` or `xOrder ID` is not taken for `Order ID`.
            out.spaced_re = build(format!(r"(?i)\b(?:{})\b", alternation(out.spaced.keys())));
        }
        if !out.keywords.is_empty() {
            let keys = alternation(out.keywords.keys());
            out.after_dot_re = build(format!(r"(?i)(\.\s*)({keys})\b"));
        }
        if !keyword_tables.is_empty() {
            let keys = alternation(keyword_tables.iter());
            out.after_from_re = build(format!(r"(?i)\b(FROM|JOIN)(\s+)({keys})\b"));
            out.before_dot_re = build(format!(r"(?i)\b({keys})(\s*\.)"));
        }
        out
    }

    /// Whether `name` (a table or column) must be written in double quotes.
    pub(super) fn needs_quotes(&self, name: &str) -> bool {
        self.quoted.contains(&name.to_lowercase())
    }

    /// A name of the database that needs quotes, for the description's example: a table's
    /// first, else a column's (`None` when no name needs them).
    pub(super) fn example(&self) -> Option<&str> {
        self.example.as_deref()
    }

    /// `name` as it is best written in a query: in double quotes when it needs them.
    pub(super) fn shown(&self, name: &str) -> String {
        if self.needs_quotes(name) {
            quote(name)
        } else {
            name.to_string()
        }
    }

    /// `sql` with the names of this database that it writes bare put in quotes; `None` when
    /// there is nothing to change.
    pub(super) fn quote_in(&self, sql: &str) -> Option<String> {
        if self.spaced_re.is_none() && self.after_dot_re.is_none() {
            return None;
        }
        let mut out = sql.to_string();
        if let Some(re) = &self.spaced_re {
            out = map_unquoted(&out, |part| {
                re.replace_all(part, |c: &regex::Captures| {
                    let key = c[0].split_whitespace().collect::<Vec<_>>().join(" ");
                    match self.spaced.get(&key.to_lowercase()) {
                        Some(name) => quote(name),
                        None => c[0].to_string(),
                    }
                })
                .into_owned()
            });
        }
        let name = |w: &str| {
            self.keywords
                .get(&w.to_lowercase())
                .map(|n| quote(n))
                .unwrap_or_else(|| w.to_string())
        };
        // After a dot first, so that `group.from FROM group` does not read `from FROM` as
        // `FROM` and a table; each pass sees the quotes the one before it wrote.
        if let Some(re) = &self.after_dot_re {
            out = map_unquoted(&out, |part| {
                re.replace_all(part, |c: &regex::Captures| {
                    format!("{}{}", &c[1], name(&c[2]))
                })
                .into_owned()
            });
        }
        if let Some(re) = &self.after_from_re {
            out = map_unquoted(&out, |part| {
                re.replace_all(part, |c: &regex::Captures| {
                    format!("{}{}{}", &c[1], &c[2], name(&c[3]))
                })
                .into_owned()
            });
        }
        if let Some(re) = &self.before_dot_re {
            out = map_unquoted(&out, |part| {
                re.replace_all(part, |c: &regex::Captures| {
                    format!("{}{}", name(&c[1]), &c[2])
                })
                .into_owned()
            });
        }
        (out != sql).then_some(out)
    }
}

/// `sql` with `f` applied to each stretch outside string literals (`'…'`) and quoted names
/// (`"…"`, `` `…` ``, `[…]`); those are copied as they are.
fn map_unquoted(sql: &str, f: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut plain_start = 0;
    let mut chars = sql.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let close = match c {
            '\'' => '\'',
            '"' => '"',
            '`' => '`',
            '[' => ']',
            _ => continue,
        };
        out.push_str(&f(&sql[plain_start..i]));
        // To the closing character; a doubled one ('') stays inside.
        let mut end = sql.len();
        while let Some((j, d)) = chars.next() {
            if d == close {
                if close != ']' && chars.peek().is_some_and(|&(_, n)| n == close) {
                    chars.next();
                    continue;
                }
                end = j + d.len_utf8();
                break;
            }
        }
        out.push_str(&sql[i..end]);
        plain_start = end;
    }
    out.push_str(&f(&sql[plain_start..]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> BareNames {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            r#"CREATE TABLE "Order" ("Order ID" INTEGER, "Ship Country" TEXT, Freight REAL);
               CREATE TABLE "Order Details" ("Order ID" INTEGER, "Unit Price" REAL, qty INT);
               CREATE TABLE "group" (id INTEGER, "from" TEXT, "Free Meal (K-12)" INT);"#,
        )
        .unwrap();
        let tables: Vec<String> = ["Order", "Order Details", "group"]
            .map(String::from)
            .to_vec();
        let columns = [
            ("Order", "Order ID"),
            ("Order", "Ship Country"),
            ("Order", "Freight"),
            ("Order Details", "Order ID"),
            ("Order Details", "Unit Price"),
            ("Order Details", "qty"),
            ("group", "id"),
            ("group", "from"),
            ("group", "Free Meal (K-12)"),
        ]
        .map(|(t, c)| (t.to_string(), c.to_string()))
        .to_vec();
        BareNames::read(&conn, &tables, &columns)
    }

    #[test]
    fn names_that_need_quotes_are_found_and_plain_ones_left() {
        let n = names();
        for q in [
            "Order",
            "order details",
            "Ship Country",
            "group",
            "from",
            "Free Meal (K-12)",
        ] {
            assert!(n.needs_quotes(q), "{q}");
        }
        for q in ["Freight", "qty", "id"] {
            assert!(!n.needs_quotes(q), "{q}");
        }
        assert_eq!(n.shown("Order"), "\"Order\"");
        assert_eq!(n.shown("qty"), "qty");
    }

    #[test]
    fn bare_names_are_quoted_where_only_a_name_can_stand() {
        let n = names();
        let cases = [
            (
                "SELECT COUNT(*) FROM Order WHERE Ship Country = 'Germany'",
                r#"SELECT COUNT(*) FROM "Order" WHERE "Ship Country" = 'Germany'"#,
            ),
            (
                "SELECT o.ship  country, SUM(d.Unit Price * d.qty) FROM Order o JOIN Order Details d ON d.Order ID = o.Order ID GROUP BY 1 ORDER BY 2 DESC",
                r#"SELECT o."Ship Country", SUM(d."Unit Price" * d.qty) FROM "Order" o JOIN "Order Details" d ON d."Order ID" = o."Order ID" GROUP BY 1 ORDER BY 2 DESC"#,
            ),
            (
                "SELECT group.from FROM group ORDER BY id",
                r#"SELECT "group"."from" FROM "group" ORDER BY id"#,
            ),
            (
                "SELECT Ship Country FROM Order ORDER BY ship_country",
                r#"SELECT "Ship Country" FROM "Order" ORDER BY "Ship Country""#,
            ),
        ];
        for (bare, quoted) in cases {
            assert_eq!(n.quote_in(bare).as_deref(), Some(quoted), "{bare}");
        }
    }

    #[test]
    fn literals_quoted_names_and_plain_queries_are_left_as_they_are() {
        let n = names();
        for q in [
            r#"SELECT "Ship Country" FROM "Order" WHERE "Ship Country" = 'Ship Country'"#,
            "SELECT qty FROM t ORDER BY qty",
            "SELECT 'from Order' AS x",
            "SELECT [Order ID] FROM `Order`",
            "SELECT Order IDs FROM t",
        ] {
            assert_eq!(n.quote_in(q), None, "{q}");
        }
    }
}
