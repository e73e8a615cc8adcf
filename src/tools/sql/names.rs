//! The rows of the user's database that hold the names a task mentions, for the context shown
//! before round 1 ([`SqlTool::named_rows`]): "Milo's most recent visit" shows the `pet` row of
//! Milo and the `visit` rows that point to it; "Who borrowed Ice Maps" shows the `books` row of
//! Ice Maps and its `loans`. Tables are otherwise chosen for the context by the words of their
//! names and columns, which a name in the task ("Milo", "Ice Maps") does not share: the 1.5B
//! model, shown three unrelated visits, answered with the fee of one of them.
//!
//! A name is what the task writes capitalised (a run of capitalised words, not the lone first
//! word of a sentence) or in quotes. The lookup reads only text columns, scans at most
//! [`MAX_TABLES`] tables and stops at [`LOOKUP_TIME`], so a large database costs a bounded
//! moment before the first round and never an error.

use std::time::Duration;

use rusqlite::Connection;

use super::{column_types, foreign_keys, quote, run_query, SqlTool, NOT_TOPICS, PARTIAL_SAMPLE};

/// The most names taken from one text.
const MAX_NAMES: usize = 6;

/// The most tables searched for the names.
const MAX_TABLES: usize = 256;

/// The search for the names stops after this long (the tables not yet searched are skipped);
/// showing the rows it found has as long again.
const LOOKUP_TIME: Duration = Duration::from_millis(300);

/// Rows shown of each table that holds a name.
const NAMED_ROWS: usize = 3;

/// Tables shown that hold a name.
const NAMED_TABLES: usize = 2;

/// Rows shown of a table whose rows point to the named rows (`visit.pet_id` → Milo's `pet`).
const LINKED_ROWS: usize = 5;

/// Tables shown whose rows point to the named rows.
const LINKED_TABLES: usize = 2;

/// Words that begin sentences without being names, besides the sql tool's words that name no
/// topic (`NOT_TOPICS`: question words, articles, request verbs): the first word of a sentence
/// is capitalised whatever it is.
#[rustfmt::skip]
const SENTENCE_WORDS: &[&str] = &[
    "when", "where", "why", "is", "do", "may", "might", "shall", "a", "an", "but", "or", "so",
    "then", "also", "please", "compute", "calculate", "count", "sum", "use", "look", "if", "in",
    "on", "at", "of", "to", "by", "after", "before", "since", "during", "it", "its", "my", "his",
    "her", "i", "we", "they", "he", "she", "some", "no", "now", "ok", "yes", "here",
];

/// Whether `word` (any case) begins sentences without being a name.
fn sentence_word(word: &str) -> bool {
    let w = word.to_lowercase();
    SENTENCE_WORDS.contains(&w.as_str()) || NOT_TOPICS.contains(&w.as_str())
}

/// Small words that may stand inside a name ("Tea with the Vicar", "Ludwig van Beethoven");
/// not "and" or "or", which join two names.
#[rustfmt::skip]
const CONNECTORS: &[&str] = &[
    "of", "the", "with", "for", "in", "on", "a", "an", "to", "at", "de", "van", "von", "der",
    "la", "le", "du", "da",
];

/// The names `text` mentions: quoted phrases, and runs of capitalised words ("Ice Maps",
/// "Hugo Lambert", "Milo" from "Milo's"), where a single capitalised word that begins a
/// sentence ("Who", "What") does not count. At most [`MAX_NAMES`], each once (any case).
pub(crate) fn name_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim();
        // A name of small words only ("of the") has no word to look up.
        if s.chars().count() >= 2
            && s.split_whitespace().any(|w| !CONNECTORS.contains(&w))
            && s.chars().count() <= 60
            && !out.iter().any(|o| o.eq_ignore_ascii_case(s))
        {
            out.push(s.to_string());
        }
    };
    for (open, close) in [('"', '"'), ('“', '”'), ('\'', '\'')] {
        let mut rest = text;
        while let Some(at) = rest.find(open) {
            let before = rest[..at].chars().next_back();
            let after_open = &rest[at + open.len_utf8()..];
            // An apostrophe inside a word ("Milo's") opens nothing.
            if open == '\'' && before.is_some_and(char::is_alphanumeric) {
                rest = after_open;
                continue;
            }
            let Some(end) = after_open.find(close) else {
                break;
            };
            push(&after_open[..end]);
            rest = &after_open[end + close.len_utf8()..];
        }
    }
    let mut run: Vec<&str> = Vec::new();
    // Small words after a run, joined to it when a capitalised word comes next.
    let mut pending: Vec<&str> = Vec::new();
    let mut run_starts_sentence = false;
    let mut sentence_start = true;
    let flush = |run: &mut Vec<&str>, starts: bool, push: &mut dyn FnMut(&str)| {
        // A sentence's first word is capitalised whatever it is: it is part of a name only
        // when it is not a word that begins sentences ("Which Ann" is Ann; "Hugo Lambert"
        // stays whole), and alone it is taken for no name at all.
        let words: &[&str] = match run.split_first() {
            Some((first, rest)) if starts && sentence_word(first) => rest,
            Some((_, [])) if starts => &[],
            _ => run,
        };
        if !words.is_empty() && words != ["I"] {
            push(&words.join(" "));
        }
        run.clear();
    };
    for raw in text.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let word = word
            .strip_suffix("'s")
            .or_else(|| word.strip_suffix("’s"))
            .unwrap_or(word);
        let capitalised = word.chars().next().is_some_and(char::is_uppercase)
            && word
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '.');
        // Punctuation after the word ends a run ("Paris, Rome" are two names), and so does
        // a possessive ("Olivia Grant's email").
        let ends_run = raw.len() > raw.trim_end_matches(|c: char| !c.is_alphanumeric()).len()
            || raw.ends_with("'s")
            || raw.ends_with("’s");
        if capitalised {
            if run.is_empty() {
                run_starts_sentence = sentence_start;
            }
            run.append(&mut pending);
            run.push(word);
        } else if !run.is_empty() && !ends_run && CONNECTORS.contains(&word) && pending.len() < 2 {
            // "Tea with the Vicar": small words inside a title, kept when a capitalised word
            // follows them.
            pending.push(word);
            continue;
        } else {
            pending.clear();
            flush(&mut run, run_starts_sentence, &mut push);
        }
        if ends_run {
            flush(&mut run, run_starts_sentence, &mut push);
        }
        sentence_start = raw.ends_with(['.', '?', '!', ':', ';']);
    }
    flush(&mut run, run_starts_sentence, &mut push);
    out.truncate(MAX_NAMES);
    out
}

/// `term` as the body of a LIKE pattern with `\` as its escape: `%`, `_` and `\` taken
/// literally, quotes doubled.
fn like_body(term: &str) -> String {
    term.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
        .replace('\'', "''")
}

/// One table that holds a name: the SQL condition and score over its text columns, how many
/// rows hold a name, and the best number of names one row holds.
struct Holder {
    table: String,
    condition: String,
    score: String,
    rows: u64,
    best: u64,
    /// The names some row holds, in the task's order.
    held: Vec<String>,
}

/// The number a task writes right after a table's name, as the key of one of its rows:
/// "order number 5", "order 3", "invoice #12", "visit no. 7", "loan id 40" (the name singular
/// or plural, any case). `None` when the task writes none.
pub(crate) fn key_after(task: &str, table: &str) -> Option<i64> {
    let t = table.to_lowercase();
    if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let singular = t.strip_suffix('s').filter(|s| s.len() >= 3).unwrap_or(&t);
    let lower = task.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '!' | ';' | ':' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        let w = w.trim_end_matches(['.', '\'']);
        if w != singular && w != t && w != format!("{singular}s") {
            continue;
        }
        let mut rest = words[i + 1..].iter().map(|w| w.trim_end_matches('.'));
        let mut next = rest.next()?;
        if matches!(next, "number" | "no" | "id" | "#") {
            next = rest.next()?;
        }
        if let Ok(n) = next.trim_start_matches('#').parse::<i64>() {
            return Some(n);
        }
    }
    None
}

impl SqlTool {
    /// `heading`, the rows `r` that `sql` gave, and the rows their keys point to (a pet's
    /// owner, a loan's member), as one block of the context.
    fn block(&self, conn: &Connection, sql: &str, heading: &str, r: &super::QueryResult) -> String {
        let named = super::name_lookup(conn, sql, &self.tables, &r.keys, &self.options)
            .map(|n| format!("{n}\n"))
            .unwrap_or_default();
        format!("{heading}\n{}\n{named}", r.text.trim_end())
    }

    /// The rows the task names by their key ([`key_after`]: "Who placed order number 5?"
    /// shows the `orders` row whose integer primary key is 5, and the rows its keys point
    /// to, the customer and the product), within `max_chars`. Regression: the 1.5B searched
    /// the shop's documents for "5" twice and answered that order 5 was not in them.
    pub(super) fn keyed_rows(&self, task: &str, max_chars: usize) -> String {
        self.with_deadline(LOOKUP_TIME, |conn| {
            let mut out = String::new();
            for t in self.tables.iter().take(MAX_TABLES) {
                let Some(key) = key_after(task, t) else {
                    continue;
                };
                let Some(pk) = column_types(conn, t)
                    .into_iter()
                    .find(|(_, ty, pk)| *pk && ty.eq_ignore_ascii_case("INTEGER"))
                    .map(|(c, _, _)| c)
                else {
                    continue;
                };
                let condition = format!("{} = {key}", quote(&pk));
                let sql = format!("SELECT * FROM {} WHERE {condition}", quote(t));
                let Ok(r) = run_query(conn, &sql, &self.options) else {
                    continue;
                };
                let found = !r.text.contains("(no rows)");
                let heading = if found {
                    format!("-- {}: the row whose {pk} is {key}", self.bare.shown(t))
                } else {
                    format!("-- {}: no row has {pk} {key}", self.bare.shown(t))
                };
                let block = self.block(conn, &sql, &heading, &r);
                if out.len() + block.len() > max_chars {
                    break;
                }
                out.push_str(&block);
                if found {
                    // The rows that point to it (an order's lines, a visit's treatments):
                    // shown only the order row, the 1.5B model took its freight for the value
                    // of the goods in "Order 10252 comes back …: how much is the restocking
                    // fee (8% of the goods' value)?".
                    let linked = self.linked_rows(
                        conn,
                        (t, &condition),
                        max_chars.saturating_sub(out.len()),
                    );
                    out.push_str(&linked);
                }
            }
            out
        })
    }

    /// The rows that hold `names` (see the module's text), within `max_chars`: those of the
    /// [`NAMED_TABLES`] tables whose rows hold the most names, then the rows of up to
    /// [`LINKED_TABLES`] tables that point to the best table's named rows by a foreign key.
    /// Empty when no row holds a name.
    pub(super) fn named_rows(&self, names: &[String], max_chars: usize) -> String {
        if names.is_empty() {
            return String::new();
        }
        let holders = self.with_deadline(LOOKUP_TIME, |conn| {
            let mut holders = Vec::new();
            for t in self.tables.iter().take(MAX_TABLES) {
                let text_columns: Vec<String> = column_types(conn, t)
                    .into_iter()
                    .filter(|(_, ty, _)| {
                        let ty = ty.to_ascii_uppercase();
                        ty.is_empty() || ["CHAR", "CLOB", "TEXT"].iter().any(|k| ty.contains(k))
                    })
                    .map(|(c, _, _)| c)
                    .collect();
                if text_columns.is_empty() {
                    continue;
                }
                // A name holds when each of its words stands as a word in the row's text
                // columns: "Hugo Lambert" is a row of first and last names, and "Ann" is not
                // "Joanne".
                let row = text_columns
                    .iter()
                    .map(|c| format!("coalesce({}, '')", quote(c)))
                    .collect::<Vec<_>>()
                    .join(" || ' ' || ");
                let holds: Vec<String> = names
                    .iter()
                    .map(|n| {
                        // Its capitalised words: a title's small words ("with the") may
                        // be written otherwise in the data.
                        let all: Vec<String> = n
                            .split_whitespace()
                            .filter(|w| !CONNECTORS.contains(w))
                            .map(|w| {
                                format!(
                                    "(' ' || {row} || ' ') LIKE '% {} %' ESCAPE '\\'",
                                    like_body(w)
                                )
                            })
                            .collect();
                        format!("({})", all.join(" AND "))
                    })
                    .collect();
                let condition = holds.join(" OR ");
                let score = holds.join(" + ");
                let each: String = holds.iter().map(|h| format!(", MAX({h})")).collect();
                let counted = conn.query_row(
                    &format!(
                        "SELECT COUNT(*), COALESCE(MAX({score}), 0){each} FROM {} \
                         WHERE {condition}",
                        quote(t)
                    ),
                    [],
                    |r| {
                        let held = (0..names.len())
                            .map(|i| r.get::<_, Option<i64>>(i + 2))
                            .collect::<rusqlite::Result<Vec<_>>>()?;
                        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, held))
                    },
                );
                match counted {
                    Ok((rows, best, held)) if rows > 0 => holders.push(Holder {
                        table: t.clone(),
                        condition,
                        score,
                        rows: rows as u64,
                        best: best as u64,
                        held: names
                            .iter()
                            .zip(held)
                            .filter(|(_, h)| h.unwrap_or(0) > 0)
                            .map(|(n, _)| n.clone())
                            .collect(),
                    }),
                    Ok(_) => {}
                    // Out of time: what was found so far is what is shown.
                    Err(e)
                        if e.sqlite_error_code()
                            == Some(rusqlite::ErrorCode::OperationInterrupted) =>
                    {
                        break
                    }
                    Err(_) => {}
                }
            }
            // Most names in one row first, then the name mentioned first, then the fewest
            // rows (the most telling).
            let first = |h: &Holder| names.iter().position(|n| h.held.contains(n));
            holders.sort_by(|a, b| {
                b.best
                    .cmp(&a.best)
                    .then(first(a).cmp(&first(b)))
                    .then(a.rows.cmp(&b.rows))
            });
            holders.truncate(NAMED_TABLES);
            holders
        });
        // Showing them has a time of its own: a search that ran out of time still shows what
        // it found.
        self.with_deadline(LOOKUP_TIME, |conn| {
            let mut out = String::new();
            for h in &holders {
                let named = h
                    .held
                    .iter()
                    .map(|n| format!("\"{n}\""))
                    .collect::<Vec<_>>()
                    .join(" or ");
                let sql = format!(
                    "SELECT * FROM {} WHERE {} ORDER BY {} DESC LIMIT {NAMED_ROWS}",
                    quote(&h.table),
                    h.condition,
                    h.score
                );
                let Ok(r) = run_query(conn, &sql, &self.options) else {
                    continue;
                };
                let listed = (h.rows as usize).min(NAMED_ROWS) as u64;
                let heading = if h.rows > listed {
                    format!(
                        "-- {}: {listed} of the {} rows that hold {named} {PARTIAL_SAMPLE}",
                        self.bare.shown(&h.table),
                        h.rows
                    )
                } else {
                    format!(
                        "-- {}: every row that holds {named}",
                        self.bare.shown(&h.table)
                    )
                };
                // The rows their keys point to (a pet's owner).
                let block = self.block(conn, &sql, &heading, &r);
                if out.len() + block.len() > max_chars {
                    break;
                }
                out.push_str(&block);
            }
            if let Some(best) = holders.first().filter(|h| h.rows <= 2 && !out.is_empty()) {
                let linked = self.linked_rows(
                    conn,
                    (&best.table, &best.condition),
                    max_chars.saturating_sub(out.len()),
                );
                out.push_str(&linked);
            }
            out
        })
    }

    /// The rows of other tables whose foreign key points to the rows of `table` that
    /// `condition` (an SQL condition on them) picks: the named or keyed rows.
    fn linked_rows(
        &self,
        conn: &Connection,
        (table, condition): (&str, &str),
        max_chars: usize,
    ) -> String {
        let mut out = String::new();
        let mut tables = 0;
        for t in self.tables.iter().take(MAX_TABLES) {
            if tables == LINKED_TABLES {
                break;
            }
            if t == table {
                continue;
            }
            let Some((from, to)) = foreign_keys(conn, t)
                .into_iter()
                .find(|(_, to_table, _)| to_table.eq_ignore_ascii_case(table))
                .and_then(|(from, _, to)| {
                    let to = to.or_else(|| {
                        column_types(conn, table)
                            .into_iter()
                            .find(|(_, _, pk)| *pk)
                            .map(|(c, _, _)| c)
                    })?;
                    Some((from, to))
                })
            else {
                continue;
            };
            let keys = format!(
                "SELECT {} FROM {} WHERE {}",
                quote(&to),
                quote(table),
                condition
            );
            let filter = format!("{} IN ({keys})", quote(&from));
            let Ok(count) = conn.query_row(
                &format!("SELECT COUNT(*) FROM {} WHERE {filter}", quote(t)),
                [],
                |r| r.get::<_, i64>(0),
            ) else {
                continue;
            };
            if count == 0 {
                continue;
            }
            // The latest first when the rows have a date, and the result says so (see
            // `order_note`): Milo's two visits in rowid order were read first to last, and
            // the first taken for the most recent.
            let order = super::column_types(conn, t)
                .into_iter()
                .find(|(c, ty, _)| super::is_date_column(c, ty))
                .map(|(c, _, _)| format!(" ORDER BY {} DESC", quote(&c)))
                .unwrap_or_default();
            let sql = format!(
                "SELECT * FROM {} WHERE {filter}{order} LIMIT {LINKED_ROWS}",
                quote(t)
            );
            let Ok(r) = run_query(conn, &sql, &self.options) else {
                continue;
            };
            let listed = (count as usize).min(LINKED_ROWS);
            let shown = self.bare.shown(t);
            let heading = if count as usize > listed {
                format!(
                    "-- {shown}: {listed} of the {count} rows whose {from} is the {to} of the {} rows above {PARTIAL_SAMPLE}",
                    table
                )
            } else {
                format!(
                    "-- {shown}: every row whose {from} is the {to} of the {} rows above",
                    table
                )
            };
            // The rows their other keys point to (a loan's member): without them the model
            // answered "Member 1016" for who borrowed a book.
            let block = self.block(conn, &sql, &heading, &r);
            if out.len() + block.len() > max_chars {
                break;
            }
            out.push_str(&block);
            tables += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::name_terms;

    #[test]
    fn a_number_after_a_table_name_is_a_key() {
        use super::key_after;
        assert_eq!(key_after("Who placed order number 5?", "orders"), Some(5));
        assert_eq!(key_after("When was order 3 placed?", "orders"), Some(3));
        assert_eq!(key_after("What does invoice #12 say?", "invoice"), Some(12));
        assert_eq!(
            key_after("Which pet came to Visit no. 7?", "visit"),
            Some(7)
        );
        assert_eq!(key_after("How many orders are there?", "orders"), None);
        assert_eq!(key_after("Who placed 5 orders?", "orders"), None);
        assert_eq!(key_after("order 5", "visit_treatment"), None);
    }

    #[test]
    fn names_are_capitalised_runs_and_quotes_not_first_words() {
        assert_eq!(
            name_terms("Who borrowed Ice Maps most recently?"),
            ["Ice Maps"]
        );
        assert_eq!(
            name_terms("What was the consultation fee of Milo's most recent visit?"),
            ["Milo"]
        );
        assert_eq!(
            name_terms("Hugo Lambert borrowed Ice Maps most recently."),
            ["Hugo Lambert", "Ice Maps"]
        );
        assert_eq!(
            name_terms("What is the weather in Paris, Rome and Oslo?"),
            ["Paris", "Rome", "Oslo"]
        );
        assert_eq!(
            name_terms("Find the book 'a history of ink' please"),
            ["a history of ink"]
        );
        assert_eq!(
            name_terms("What is his email address?"),
            Vec::<String>::new()
        );
        assert_eq!(
            name_terms("How much is it? And what did I pay?"),
            Vec::<String>::new()
        );
    }
}
