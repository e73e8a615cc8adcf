//! The `sql` tool: read-only queries on the user's SQLite database (`--db FILE`).
//!
//! Safety comes in layers. The file is opened read-only; an authorizer admits only reading
//! (`SELECT`, reads of columns, functions other than `load_extension`, recursive CTEs and a
//! list of read-only `PRAGMA`s) and refuses everything else, ATTACH and DETACH included, at
//! prepare time; a progress handler interrupts a query that runs over the time limit. Memory is
//! bounded too: the connection refuses any string or blob longer than
//! [`SqlOptions::max_value_bytes`] (which also bounds the time one SQL function call can take,
//! where the progress handler cannot reach), and SQLite's heap for the whole process is capped
//! at [`HEAP_LIMIT_BYTES`]. Results come back as a compact table capped in rows
//! ([`SqlOptions::max_rows`]), columns ([`SqlOptions::max_columns`]) and characters
//! ([`SqlOptions::max_result_chars`]), with a line saying what was left out.
//!
//! The tool's description carries the database's CREATE statements within a budget: full text
//! while it fits, then table names only, then a count with the queries that list the rest, so
//! a database of thousands of tables still fits the prompt. When tables were left out,
//! [`Tool::context_for`] gives the task message the full schemas of the tables whose names or
//! columns match the task's words; it always adds rows: those that hold the names the task
//! mentions and the rows that point to them (`names`), else a few rows of the tables its words
//! point to. Error messages help the model fix its query: an unknown
//! table lists the tables, an unknown column lists the columns of the tables the query names.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{parse_args, schema_of, Observation, Tool, ToolError};

mod bare;
mod literal;
mod math;
mod names;
mod repair;
pub use literal::{runaway_literal, RunawayLiteral};
pub(crate) use names::name_terms;

/// SQLite's heap limit for the whole process (`sqlite3_hard_heap_limit64`), set when a sql
/// tool is opened: a query that needs more fails with an error instead of growing the process.
/// It is process-wide, so it also covers the memory store's and the index's connections, whose
/// normal use (page caches of a few MiB) is far below it; only a query near the limit at the
/// same moment could make one of their calls fail for lack of memory, as an error, not a crash.
/// A lower limit set before is kept.
pub const HEAP_LIMIT_BYTES: i64 = 192 << 20;

/// Limits of the `sql` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlOptions {
    /// A query running longer than this is interrupted.
    pub time_limit: Duration,
    /// At most this many rows are shown; the rest are counted.
    pub max_rows: usize,
    /// At most this many columns are shown; the others are named in a note.
    pub max_columns: usize,
    /// The shown result is at most about this many characters; the rows after are counted.
    pub max_result_chars: usize,
    /// The longest string or blob the connection makes or reads (`SQLITE_LIMIT_LENGTH`): a
    /// query that needs a longer one fails. This bounds each value's memory and the time of
    /// one SQL function call, which the progress handler cannot interrupt.
    pub max_value_bytes: usize,
    /// The longest query text accepted, in bytes.
    pub max_query_bytes: usize,
    /// The full CREATE statements in the description stop at this many characters.
    pub max_schema_chars: usize,
    /// The names of the tables whose statements did not fit stop at this many characters;
    /// the rest are counted.
    pub max_names_chars: usize,
    /// The schemas [`Tool::context_for`] adds to a task's message stop at this many
    /// characters.
    pub max_context_chars: usize,
    /// Decode `query` under the pattern of [`super::sql_pattern`], built from the database's
    /// own table and column names (a database with more than [`MAX_PATTERN_NAMES`] names gets
    /// none: its pattern would be too large to keep the per-token mask cheap).
    pub names_pattern: bool,
}

/// The most table and column names (together) a query pattern is built over.
pub const MAX_PATTERN_NAMES: usize = 4000;

impl Default for SqlOptions {
    fn default() -> Self {
        SqlOptions {
            time_limit: Duration::from_secs(2),
            max_rows: 50,
            max_columns: 30,
            max_result_chars: 1800,
            max_value_bytes: 256 << 10,
            max_query_bytes: 100_000,
            max_schema_chars: 6000,
            max_names_chars: 2000,
            max_context_chars: 2000,
            names_pattern: true,
        }
    }
}

/// How many characters of a text cell (and of a column name) are shown.
const MAX_CELL_CHARS: usize = 200;

/// How many tables [`Tool::context_for`] shows rows of.
const SAMPLE_TABLES: usize = 2;

/// How many rows of each such table it shows.
const SAMPLE_ROWS: usize = 3;

/// How the heading of a table's sample rows in a task's context ends when they are not all the
/// rows they stand for (`-- members: 3 of its 17 rows (query for the others)`, `-- visit: 3 of
/// the 12 rows that hold the task's words (query for the others)`): the evidence check reads it
/// to tell values seen only in such a sample ([`crate::agent::evidence::from_sample`]).
pub const PARTIAL_SAMPLE: &str = "(query for the others)";

/// Room kept in a result for the line that counts the rows not shown.
const ROW_NOTE_CHARS: usize = 200;

/// The arguments of `sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqlArgs {
    /// One read-only SQL statement (SQLite dialect).
    pub query: String,
}

/// A table or view of the database, as read when the tool opened.
#[derive(Debug, Clone)]
struct TableEntry {
    name: String,
    /// Its CREATE statement.
    sql: String,
    /// Whether the description shows the statement in full.
    in_description: bool,
}

/// The `sql` tool, holding one read-only connection.
pub struct SqlTool {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The deadline of the running query, in nanoseconds since `epoch`; read by the progress
    /// handler.
    deadline: Arc<AtomicU64>,
    epoch: Instant,
    /// The schema part of the description.
    schema: String,
    /// Every table and view name, sorted.
    tables: Vec<String>,
    /// Every table and view with its statement, in description order.
    entries: Vec<TableEntry>,
    /// Whether the description shows every table's statement.
    complete: bool,
    /// The pattern `query` is decoded under, when there is one.
    pattern: Option<String>,
    /// The names that need double quotes, which a query may write bare.
    bare: bare::BareNames,
    options: SqlOptions,
}

impl std::fmt::Debug for SqlTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlTool")
            .field("path", &self.path)
            .field("tables", &self.tables.len())
            .finish()
    }
}

/// Pragmas that only read, allowed with an argument (`PRAGMA table_info(t)`).
const READ_PRAGMAS_WITH_ARG: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
];
/// Pragmas allowed only as a query, without a value (`PRAGMA user_version`).
const READ_PRAGMAS_QUERY: &[&str] = &[
    "database_list",
    "collation_list",
    "function_list",
    "module_list",
    "pragma_list",
    "compile_options",
    "user_version",
    "schema_version",
    "application_id",
    "page_count",
    "page_size",
    "freelist_count",
    "encoding",
    "data_version",
];

fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => {
            Authorization::Allow
        }
        AuthAction::Function { function_name } => {
            if function_name.eq_ignore_ascii_case("load_extension") {
                Authorization::Deny
            } else {
                Authorization::Allow
            }
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            let ok = READ_PRAGMAS_WITH_ARG.contains(&name.as_str())
                || (pragma_value.is_none() && READ_PRAGMAS_QUERY.contains(&name.as_str()));
            if ok {
                Authorization::Allow
            } else {
                Authorization::Deny
            }
        }
        _ => Authorization::Deny,
    }
}

fn map_open_error(path: &Path, e: &rusqlite::Error) -> ToolError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            ToolError::fatal(format!("{} is not a SQLite database ({e})", path.display()))
                .with_hint("pass --db with the path of a SQLite database file")
        }
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
            ToolError::transient(format!("the database {} is busy: {e}", path.display()))
        }
        _ => ToolError::fatal(format!("cannot open the database {}: {e}", path.display())),
    }
}

impl SqlTool {
    /// Opens `path` read-only and reads its schema. A missing file or one that is not a
    /// database is a `Fatal` error.
    pub fn open(path: &Path, options: SqlOptions) -> Result<SqlTool, ToolError> {
        if !path.is_file() {
            let what = if path.is_dir() {
                format!("{} is a directory, not a database file", path.display())
            } else if path.exists() {
                format!("{} is not a regular file", path.display())
            } else {
                format!("the database file {} does not exist", path.display())
            };
            return Err(ToolError::fatal(what)
                .with_hint("pass --db with the path of an existing SQLite database"));
        }
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| map_open_error(path, &e))?;
        let _ = conn.busy_timeout(Duration::from_millis(250));
        limit_resources(&conn, &options);
        // A double-quoted name that is no column would otherwise be read as a string: over
        // `"Order Details"`, the 1.5B model's `SELECT "Product Name", SUM(Quantity) … GROUP BY
        // "Product ID"` (the name is a column of another table) returned the text "Product
        // Name" beside the sum, and the model named a product it had seen in a sample row.
        // Off, it is "no such column", whose hint lists the columns and the join.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DQS_DML, false)
            .map_err(|e| map_open_error(path, &e))?;
        math::register(&conn).map_err(|e| map_open_error(path, &e))?;
        let schema = read_schema(&conn, &options).map_err(|e| map_open_error(path, &e))?;
        let epoch = Instant::now();
        let deadline = Arc::new(AtomicU64::new(u64::MAX));
        let d = deadline.clone();
        // Checked every 10 virtual-machine steps, about once per row of a loop: one step can be
        // a function call over values of up to `max_value_bytes` (the slowest, instr() over
        // two such strings, takes about 0.3 s at 256 KiB), so the checks must not be far apart.
        // The check itself is a clock read.
        conn.progress_handler(
            10,
            Some(move || epoch.elapsed().as_nanos() as u64 > d.load(Ordering::Relaxed)),
        )
        .map_err(|e| map_open_error(path, &e))?;
        // Every (table, column) pair, unless the tables alone are too many to build a pattern
        // over (their columns are then not read: one PRAGMA per table).
        let columns: Vec<(String, String)> = if schema.tables.len() <= MAX_PATTERN_NAMES {
            schema
                .tables
                .iter()
                .flat_map(|t| {
                    table_columns(&conn, t)
                        .into_iter()
                        .map(move |c| (t.clone(), c))
                })
                .collect()
        } else {
            Vec::new()
        };
        let bare = bare::BareNames::read(&conn, &schema.tables, &columns);
        let pattern = if options.names_pattern && schema.tables.len() <= MAX_PATTERN_NAMES {
            let mut names = schema.tables.clone();
            names.extend(columns.iter().map(|(_, c)| c.clone()));
            (names.len() <= MAX_PATTERN_NAMES).then(|| {
                let pragmas: Vec<&str> = READ_PRAGMAS_WITH_ARG
                    .iter()
                    .chain(READ_PRAGMAS_QUERY)
                    .copied()
                    .collect();
                super::sql_pattern::query_pattern(&names, &pragmas)
            })
        } else {
            None
        };
        conn.authorizer(Some(authorize))
            .map_err(|e| map_open_error(path, &e))?;
        Ok(SqlTool {
            pattern,
            bare,
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            deadline,
            epoch,
            schema: schema.text,
            tables: schema.tables,
            entries: schema.entries,
            complete: schema.complete,
            options,
        })
    }

    /// The tables of the database, sorted.
    pub fn tables(&self) -> &[String] {
        &self.tables
    }

    /// A few rows of each of `tables`, for the context shown before a task's first round:
    /// rows that hold one of `words` when there are any, else the first rows; at most
    /// [`SAMPLE_ROWS`] a table and [`SqlOptions::max_context_chars`] in all. Tables whose query
    /// fails are left out.
    fn sample_rows<'a>(
        &self,
        tables: impl Iterator<Item = &'a str>,
        words: &[String],
        max_chars: usize,
    ) -> String {
        let mut out = String::new();
        for t in tables {
            let quoted = quote(t);
            let name = self.bare.shown(t);
            let columns: Vec<String> = {
                let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
                table_columns(&conn, t)
            };
            if columns.is_empty() {
                continue;
            }
            let row_text = columns
                .iter()
                .map(|c| format!("coalesce(\"{}\", '')", c.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(" || ' ' || ");
            // `words_of` keeps letters and digits only, so a word cannot end the literal.
            let any_word = words
                .iter()
                .map(|w| format!("({row_text}) LIKE '%{w}%'"))
                .collect::<Vec<_>>()
                .join(" OR ");
            let matching = format!("SELECT * FROM {quoted} WHERE {any_word} LIMIT {SAMPLE_ROWS}");
            let first = format!("SELECT * FROM {quoted} LIMIT {SAMPLE_ROWS}");
            let (shown, which) = match self.query(&matching) {
                Ok(r) if !r.contains("(no rows)") => (r, format!(" WHERE {any_word}")),
                _ => match self.query(&first) {
                    Ok(r) => (r, String::new()),
                    Err(_) => continue,
                },
            };
            // How many rows there are of what is shown (those that hold the task's words, or
            // the whole table), so that a few shown rows are not taken for all of them: asked
            // for the oldest member, the 1.5B model named the oldest of three shown members.
            // When every row holding the task's words is shown (the one Repair Kit row), they
            // are the whole story of what the task names, and no note is added.
            let count = self
                .query(&format!("SELECT COUNT(*) FROM {quoted}{which}"))
                .ok()
                .and_then(|r| r.lines().nth(1).and_then(|l| l.trim().parse::<u64>().ok()));
            // The lines after the header, less the notes in parentheses.
            let listed = shown
                .lines()
                .skip(1)
                .filter(|l| !l.starts_with('('))
                .count() as u64;
            let heading = match count {
                Some(n) if n > listed && which.is_empty() => {
                    format!("-- {name}: {listed} of its {n} rows {PARTIAL_SAMPLE}")
                }
                Some(n) if n > listed => {
                    format!(
                        "-- {name}: {listed} of the {n} rows that hold the task's words {PARTIAL_SAMPLE}"
                    )
                }
                _ => format!("-- {name}"),
            };
            let block = format!("{heading}\n{}\n", shown.trim_end());
            if out.len() + block.len() > max_chars {
                break;
            }
            out.push_str(&block);
        }
        out
    }

    /// The tables `task` names ("the employees table", "table `staff`") that the database
    /// does not have, as the task writes them. Regression: asked to list the names in the
    /// employees table of a shop with none, the model (whose queries can name only real
    /// tables) listed the customers and called them employees.
    pub fn missing_tables(&self, task: &str) -> Vec<String> {
        static BEFORE: OnceLock<regex::Regex> = OnceLock::new();
        static AFTER: OnceLock<regex::Regex> = OnceLock::new();
        let before = BEFORE.get_or_init(|| {
            regex::Regex::new(r"(?i)\b(?:the|a|an|your|my|our)\s+[`'\x22]?([A-Za-z_][A-Za-z0-9_]*)[`'\x22]?\s+table\b")
                .expect("the pattern is valid")
        });
        let after = AFTER.get_or_init(|| {
            regex::Regex::new(
                r"(?i)\btable\s+(?:named\s+|called\s+)?[`'\x22]([A-Za-z_][A-Za-z0-9_]*)[`'\x22]",
            )
            .expect("the pattern is valid")
        });
        const NOT_NAMES: &[&str] = &[
            "same",
            "whole",
            "following",
            "this",
            "that",
            "which",
            "each",
            "every",
            "sql",
            "database",
            "new",
            "other",
            "first",
            "last",
            "main",
            "one",
            "right",
            "wrong",
            "previous",
            "next",
            "entire",
            "data",
            "lookup",
            "join",
            "big",
            "small",
            "full",
        ];
        let mut out: Vec<String> = Vec::new();
        for c in before.captures_iter(task).chain(after.captures_iter(task)) {
            let name = &c[1];
            let lower = name.to_lowercase();
            if NOT_NAMES.contains(&lower.as_str())
                || out.iter().any(|o| o.eq_ignore_ascii_case(name))
            {
                continue;
            }
            let known = self.tables.iter().any(|t| {
                t.eq_ignore_ascii_case(name)
                    || (!words_of(t).is_empty() && words_of(t) == words_of(name))
            });
            if !known {
                out.push(name.to_string());
            }
        }
        out
    }

    /// Runs one query and formats the result as a compact table.
    pub fn query(&self, sql: &str) -> Result<String, ToolError> {
        if !self.path.exists() {
            return Err(ToolError::fatal(format!(
                "the database file {} no longer exists",
                self.path.display()
            )));
        }
        // SQLite reads a query only up to its first NUL byte and would run the part before
        // it as if the rest were not there.
        if let Some(at) = sql.find('\0') {
            return Err(ToolError::invalid(format!(
                "the query holds a NUL character (\\u0000) at byte {at}; SQLite would ignore \
                 everything after it"
            ))
            .with_hint("remove the NUL character and send one SELECT statement"));
        }
        if sql.len() > self.options.max_query_bytes {
            return Err(ToolError::invalid(format!(
                "the query is {} bytes long; the sql tool takes at most {}",
                sql.len(),
                self.options.max_query_bytes
            ))
            .with_hint("send a shorter query"));
        }
        // Names SQLite reads only in quotes, written bare (`FROM Order`, `Ship Country`).
        let quoted = self.bare.quote_in(sql);
        let mut sql = quoted.unwrap_or_else(|| sql.to_string());
        // What the query was changed in (see `repair`), said after its result or error.
        let mut repairs: Vec<String> = Vec::new();
        loop {
            let result = self.with_deadline(self.options.time_limit, |conn| {
                // Under the same time limit as the query: it reads a few values.
                if let Some((fixed, note)) = repair::days_between(conn, &sql, &self.tables) {
                    sql = fixed;
                    repairs.push(note);
                }
                run_query(conn, &sql, &self.options).map(|r| {
                    // Under the same time limit as the query.
                    let note = if r.empty {
                        value_hint(conn, &sql, &self.tables)
                    } else if r.keys_only {
                        name_lookup(conn, &sql, &self.tables, &r.keys, &self.options)
                    } else {
                        let shown = |n: &str| self.bare.shown(n);
                        groups_of_one(conn, &sql, &self.tables, &r.text, &shown)
                    };
                    let mut text = r.text;
                    for n in repairs.iter().chain(&note) {
                        text.push('\n');
                        text.push_str(n);
                    }
                    text
                })
            });
            let e = match result {
                Ok(text) => return Ok(text),
                Err(e) => e,
            };
            let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
            if repairs.len() < MAX_REPAIRS {
                if let Some((fixed, note)) = missing_column(&e)
                    .and_then(|m| repair::other_alias(&conn, &sql, &self.tables, m))
                {
                    sql = fixed;
                    repairs.push(note);
                    continue;
                }
            }
            let mut err = self.explain(&conn, &sql, e);
            for n in &repairs {
                err.message.push('\n');
                err.message.push_str(n);
            }
            return Err(err);
        }
    }

    /// Runs `f` on the connection with the progress handler's deadline at `until` from now.
    fn with_deadline<T>(&self, until: Duration, f: impl FnOnce(&Connection) -> T) -> T {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let start = self.epoch.elapsed();
        self.deadline
            .store((start + until).as_nanos() as u64, Ordering::Relaxed);
        let out = f(&conn);
        self.deadline.store(u64::MAX, Ordering::Relaxed);
        out
    }

    /// The table names for an error message, those sharing a word with `near` first, cut at
    /// about `max_chars` with the count of the rest.
    fn table_list(&self, near: &str, max_chars: usize) -> String {
        let words = words_of(near);
        let mut names: Vec<&String> = self.tables.iter().collect();
        names.sort_by_cached_key(|t| !words_of(t).iter().any(|w| words.contains(w)));
        join_within(names.iter().map(|s| s.as_str()), max_chars)
    }

    fn explain(&self, conn: &Connection, sql: &str, e: QueryError) -> ToolError {
        let e = match e {
            QueryError::Sqlite(e) => e,
            QueryError::Multiple => {
                return ToolError::invalid("only one SQL statement is allowed per call")
                    .with_hint("send one SELECT statement")
            }
            QueryError::Empty => {
                return ToolError::invalid("the query is empty")
                    .with_hint("send one SELECT statement")
            }
        };
        let text = sqlite_message(&e).map_or_else(|| e.to_string(), str::to_string);
        let code = e.sqlite_error_code();
        match code {
            Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
                return ToolError::transient(format!("the database is busy: {text}"))
            }
            Some(ErrorCode::OperationInterrupted) => {
                // The query itself is too slow; running it again would time out again, so the
                // model is told to change it rather than the loop retrying it.
                return ToolError::invalid(format!(
                    "the query ran longer than the {:.1} s limit and was stopped",
                    self.options.time_limit.as_secs_f64()
                ))
                .with_hint("add a LIMIT, a narrower WHERE, or avoid unbounded recursion");
            }
            Some(ErrorCode::TooBig) => {
                return ToolError::invalid(format!(
                    "a value in the query is longer than the sql tool's limit of {} ({text})",
                    bytes(self.options.max_value_bytes)
                ))
                .with_hint(
                    "a value that large can be neither read nor made (randomblob, zeroblob, \
                     long group_concat); select other columns, and octet_length(col) for the \
                     size of a stored one",
                )
            }
            Some(ErrorCode::OutOfMemory) => return ToolError::invalid(format!(
                "the query needs more memory than the sql tool allows ({} for all of \
                     cairn's SQLite work) and was stopped",
                bytes(HEAP_LIMIT_BYTES as usize)
            ))
            .with_hint(
                "select fewer columns and rows, and avoid large sorts or joins without a condition",
            ),
            Some(ErrorCode::AuthorizationForStatementDenied) => return refused(&text),
            Some(ErrorCode::ReadOnly) => {
                return ToolError::invalid(format!("refused: the database is read-only ({text})"))
                    .with_hint("use a SELECT statement")
            }
            Some(ErrorCode::NotADatabase) => {
                return ToolError::fatal(format!(
                    "{} is not a SQLite database ({text})",
                    self.path.display()
                ))
            }
            _ => {}
        }
        // A denied function (`load_extension`) comes back as a plain error, not as SQLITE_AUTH.
        if text.starts_with("not authorized") {
            return refused(&text);
        }
        if let Some(rest) = text.strip_prefix("no such table: ") {
            return ToolError::invalid(format!(
                "no such table: {rest} (tables: {})",
                self.table_list(rest, 1000)
            ))
            .with_hint(
                "use one of the listed tables; SELECT name FROM sqlite_master WHERE \
                 type='table' lists them all",
            );
        }
        if let Some(rest) = text.strip_prefix("no such column: ") {
            // A double-quoted name that is no column (see `open`): SQLite adds a question.
            let (rest, double_quoted) = match rest.strip_suffix(DQS_QUESTION) {
                Some(name) => (name, true),
                None => (rest, false),
            };
            let cols = columns_of_named_tables(conn, sql, &self.tables);
            let msg = if cols.is_empty() {
                format!("no such column: {rest}")
            } else {
                format!(
                    "no such column: {rest} (columns: {})",
                    join_within(cols.iter().map(String::as_str), 1000)
                )
            };
            let hint = alias_hint(conn, sql, &self.tables, rest)
                .or_else(|| join_hint(conn, sql, &self.tables, rest))
                .unwrap_or_else(|| {
                    if double_quoted {
                        let value = rest.trim_matches('"').replace('\'', "''");
                        format!(
                            "use one of the listed columns; a text value goes in single quotes \
                             ('{value}'), double quotes are for names"
                        )
                    } else {
                        "use one of the listed columns".to_string()
                    }
                });
            return ToolError::invalid(msg).with_hint(hint);
        }
        if let Some(column) = text.strip_prefix("ambiguous column name: ") {
            let hint = ambiguity_hint(conn, sql, &self.tables, column).unwrap_or_else(|| {
                format!("{column} is in more than one table of the query: write it with its table or alias in front (t.{column})")
            });
            return ToolError::invalid(format!("SQL error: {text}")).with_hint(hint);
        }
        if let Some(name) = text.strip_prefix("no such function: ") {
            return ToolError::invalid(format!("SQL error: {text}"))
                .with_hint(function_hint(name.trim()));
        }
        let hint = runaway_literal(sql).map(|r| r.message).unwrap_or_else(|| {
            "fix the query; the tables and their columns are in the tool's description".into()
        });
        ToolError::invalid(format!("SQL error: {text}")).with_hint(hint)
    }
}

/// The most changes [`repair`] makes to one query.
const MAX_REPAIRS: usize = 3;

/// SQLite's own message of `e`, without rusqlite's "in <the whole query> at offset N" tail;
/// `None` for an error that is not SQLite's.
fn sqlite_message(e: &rusqlite::Error) -> Option<&str> {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => Some(m),
        rusqlite::Error::SqlInputError { msg, .. } => Some(msg),
        _ => None,
    }
}

/// The column SQLite names in a "no such column: X" error.
fn missing_column(e: &QueryError) -> Option<&str> {
    match e {
        QueryError::Sqlite(e) => sqlite_message(e)?.strip_prefix("no such column: "),
        _ => None,
    }
}

/// What SQLite adds to "no such column: \"NAME\"" when the name was double-quoted.
const DQS_QUESTION: &str = " - should this be a string literal in single-quotes?";

/// The hint for "no such function: NAME": SQLite's way to do what another dialect's
/// function does, else the functions for dates, numbers and text that it has.
fn function_hint(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    let date = |part: &str, fmt: &str| {
        format!(
            "SQLite has no {upper}(); the {part} of a date column is strftime('{fmt}', col) \
             (text: compare with '04', or CAST(strftime('{fmt}', col) AS INTEGER))"
        )
    };
    match upper.as_str() {
        "DAYOFMONTH" => date("day", "%d"),
        "EXTRACT" | "DATE_PART" | "DATEPART" | "TO_CHAR" | "DATE_FORMAT" => {
            "SQLite has no such function; parts of a date column come from strftime('%Y', col), \
             strftime('%m', col), strftime('%d', col)"
                .to_string()
        }
        "DATEDIFF" | "DATE_DIFF" | "AGE" => "SQLite has no such function; days between two dates \
             are julianday(a) - julianday(b)"
            .to_string(),
        "NOW" | "GETDATE" | "CURDATE" | "SYSDATE" => {
            "SQLite has no such function; today is date('now')".to_string()
        }
        "CONCAT" => "join text with the || operator: a || ' ' || b".to_string(),
        "LEN" | "CHAR_LENGTH" => "the length of text is length(col)".to_string(),
        "TRUNC" | "TRUNCATE" => "the whole part of a number is CAST(x AS INTEGER)".to_string(),
        _ => format!(
            "SQLite has no {upper}(); its functions include, for dates, strftime('%Y', col), \
             strftime('%m', col), date(col), julianday(col); for numbers, round(x, 2), abs(x), \
             a % b, floor(x), ceil(x), CAST(x AS INTEGER); for text, substr(s, start, n), \
             instr(s, t), lower(s), a || b"
        ),
    }
}

/// The error for a statement the authorizer denied, quoting SQLite's `text`.
fn refused(text: &str) -> ToolError {
    ToolError::invalid(format!(
        "refused: the sql tool is read-only ({text}); writes, ATTACH, DETACH, \
         load_extension and PRAGMAs that change state are not allowed"
    ))
    .with_hint("use a SELECT statement")
}

enum QueryError {
    Sqlite(rusqlite::Error),
    Multiple,
    Empty,
}

impl From<rusqlite::Error> for QueryError {
    fn from(e: rusqlite::Error) -> Self {
        QueryError::Sqlite(e)
    }
}

/// Sets the connection's own limits and the process's heap limit.
fn limit_resources(conn: &Connection, options: &SqlOptions) {
    let length = i32::try_from(options.max_value_bytes).unwrap_or(i32::MAX);
    // SAFETY: the handle is the open connection `conn` owns, used on this thread only;
    // sqlite3_limit only changes a limit of that connection. sqlite3_hard_heap_limit64 is
    // thread-safe, and a negative argument only reads the current limit.
    unsafe {
        rusqlite::ffi::sqlite3_limit(conn.handle(), rusqlite::ffi::SQLITE_LIMIT_LENGTH, length);
        let current = rusqlite::ffi::sqlite3_hard_heap_limit64(-1);
        if current <= 0 || current > HEAP_LIMIT_BYTES {
            rusqlite::ffi::sqlite3_hard_heap_limit64(HEAP_LIMIT_BYTES);
        }
    }
}

/// `n` bytes in words: "256 KiB", "192 MiB".
fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// `items` joined with ", " up to about `max_chars`, then "… and N more".
fn join_within<'a>(items: impl ExactSizeIterator<Item = &'a str>, max_chars: usize) -> String {
    let total = items.len();
    let mut out = String::new();
    let mut n = 0;
    for it in items {
        if n > 0 && out.len() + it.len() + 2 > max_chars {
            break;
        }
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(it);
        n += 1;
    }
    if n < total {
        out.push_str(&format!(", … and {} more", total - n));
    }
    out
}

/// `s` cut to `max` characters, with "…" when cut.
fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// A query's shown result, and, when it holds no text (a result of keys and numbers only:
/// [`name_lookup`]), its id-like columns with the values shown in them.
struct QueryResult {
    text: String,
    /// The id-like columns of the shown rows, with their values.
    keys: Vec<(String, Vec<rusqlite::types::Value>)>,
    /// Whether the rows hold keys and numbers only (no text but ids).
    keys_only: bool,
    /// No rows, one row of NULLs only (an aggregate over no rows), or one row of zero counts
    /// (`COUNT(*)` over no rows).
    empty: bool,
}

fn run_query(
    conn: &Connection,
    sql: &str,
    options: &SqlOptions,
) -> Result<QueryResult, QueryError> {
    let max_rows = options.max_rows;
    let trimmed = sql.trim().trim_end_matches(';').trim();
    if trimmed.is_empty() {
        return Err(QueryError::Empty);
    }
    let mut stmt = conn.prepare(trimmed).map_err(|e| match e {
        rusqlite::Error::MultipleStatement => QueryError::Multiple,
        e => QueryError::Sqlite(e),
    })?;
    let names: Vec<String> = stmt
        .column_names()
        .map(|s| cut_chars(s, MAX_CELL_CHARS))
        .collect();
    let ncols = names.len();
    let shown_cols = ncols.min(options.max_columns.max(1));
    let mut out = String::new();
    if ncols > 0 {
        let mut header = names[..shown_cols].join(" | ");
        if shown_cols < ncols {
            header.push_str(" | …");
        }
        // Long column names must leave room for the rows.
        out.push_str(&cut_chars(&header, options.max_result_chars / 3));
        out.push('\n');
    }
    // The notes after the rows must fit in `max_result_chars` too: the registry cuts what is
    // longer, and they are what tells the model what it is not seeing.
    let col_note = if shown_cols < ncols {
        let rest: Vec<&str> = names[shown_cols..].iter().map(String::as_str).collect();
        format!(
            "({} more columns not shown: {}; select the columns you need by name)\n",
            ncols - shown_cols,
            join_within(rest.into_iter(), 300)
        )
    } else {
        String::new()
    };
    let rows_budget = options
        .max_result_chars
        .saturating_sub(col_note.len() + ROW_NOTE_CHARS);
    let mut rows = stmt.query([])?;
    let mut shown = 0usize;
    let mut more: u64 = 0;
    let mut counting_stopped = false;
    let mut full = false;
    let mut text_seen = false;
    let mut keys: Vec<Vec<rusqlite::types::Value>> = vec![Vec::new(); shown_cols];
    let order = order_term(trimmed);
    let order_col = order
        .as_ref()
        .and_then(|(c, _)| names.iter().position(|n| n.eq_ignore_ascii_case(c)));
    let mut order_first: Option<String> = None;
    let mut all_null = true;
    // Every cell of the first row is 0 or NULL, in a query that counts: a count of no rows.
    let counts = trimmed.to_ascii_uppercase().contains("COUNT(");
    let mut no_count = counts;
    loop {
        let row = match rows.next() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e)
                if (shown >= max_rows || full)
                    && e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) =>
            {
                counting_stopped = true;
                break;
            }
            Err(e) => return Err(e.into()),
        };
        if shown >= max_rows || full {
            more += 1;
            continue;
        }
        let mut cells = Vec::with_capacity(shown_cols);
        for i in 0..shown_cols {
            let v = row.get_ref(i)?;
            text_seen |= matches!(v, ValueRef::Text(_)) && !id_like(&names[i]);
            if id_like(&names[i]) && keys[i].len() < MAX_LOOKUP_KEYS {
                if let Ok(key) = rusqlite::types::Value::try_from(v) {
                    keys[i].push(key);
                }
            }
            if shown == 0 && order_col == Some(i) {
                order_first = Some(cell(v));
            }
            all_null &= matches!(v, ValueRef::Null);
            no_count &= matches!(v, ValueRef::Null | ValueRef::Integer(0));
            cells.push(cell(v));
        }
        let mut line = cells.join(" | ");
        if shown_cols < ncols {
            line.push_str(" | …");
        }
        if out.len() + line.len() + 1 > rows_budget {
            full = true;
            if shown > 0 {
                more += 1;
                continue;
            }
            // Not even one row fits: show its start.
            let room = rows_budget.saturating_sub(out.len()).max(80);
            line = cut_chars(&line, room);
        }
        out.push_str(&line);
        out.push('\n');
        shown += 1;
    }
    if shown == 0 {
        out.push_str("(no rows)\n");
    } else if let Some(note) =
        order.and_then(|(c, desc)| order_note(&c, desc, order_first.as_deref()))
    {
        out.push_str(&note);
    }
    out.push_str(&col_note);
    let why = if full {
        format!(
            " not shown: the result is limited to {} characters; select fewer columns or rows",
            options.max_result_chars
        )
    } else {
        String::new()
    };
    if counting_stopped {
        out.push_str(&format!(
            "(at least {more} more rows{why}; counting stopped at the {:.1} s limit)\n",
            options.time_limit.as_secs_f64()
        ));
    } else if more > 0 {
        out.push_str(&format!("({more} more rows{why})\n"));
    }
    let keys = names
        .iter()
        .cloned()
        .zip(keys)
        .filter(|(n, k)| id_like(n) && !k.is_empty())
        .collect();
    Ok(QueryResult {
        text: out.trim_end().to_string(),
        keys,
        keys_only: shown > 0 && !text_seen,
        empty: shown == 0 || (shown == 1 && (all_null || no_count)),
    })
}

/// How a [`groups_of_one`] note begins.
pub const GROUPS_OF_ONE: &str = "(the most any group above counts is 1:";

/// The most tables a [`groups_of_one`] note names.
const MAX_POINTING_TABLES: usize = 3;

/// When a query over one table counts its groups and orders them by the count, most first,
/// the most is 1, and the grouped column holds a different value in every row of the table:
/// every group is one row, so the count is of the table's own rows (each title is in `books`
/// once), not of how often something happened. A note ([`GROUPS_OF_ONE`]) names the tables
/// whose rows point to that table ([`pointing_tables`]), whose rows are what such a count
/// means, and gives the query with the first of them joined. Regression: "Which title has been
/// borrowed most often?" ran `SELECT title, COUNT(*) FROM books GROUP BY title ORDER BY
/// COUNT(*) DESC LIMIT 1`, got `Winter at Vardo | 1`, and the model answered with that title;
/// the loans are in `loans`, which points to `books` through `book_id`.
fn groups_of_one(
    conn: &Connection,
    sql: &str,
    tables: &[String],
    result: &str,
    shown: &dyn Fn(&str) -> String,
) -> Option<String> {
    let upper = sql.to_ascii_uppercase();
    let order = &upper[upper.rfind("ORDER BY")? + "ORDER BY".len()..];
    if !upper.contains("GROUP BY") || !order.contains("DESC") {
        return None;
    }
    let mut lines = result.lines();
    let header: Vec<&str> = lines.next()?.split(" | ").collect();
    let first: Vec<&str> = lines.next()?.split(" | ").collect();
    // The count the rows are ordered by: written in the ORDER BY, or a column of the result
    // that is a count and whose name (an alias) the ORDER BY gives.
    let order_term = order
        .split(|c: char| c == ',' || c.is_whitespace())
        .find(|w| !w.is_empty())?;
    let counts = upper.contains("COUNT(");
    let counted = header.iter().enumerate().position(|(i, h)| {
        let h = h.to_ascii_uppercase();
        (h.starts_with("COUNT(") && order_term.starts_with("COUNT("))
            || (counts && (h == order_term || order_term.parse::<usize>() == Ok(i + 1)))
    })?;
    if first.get(counted)?.trim() != "1" {
        return None;
    }
    let named: Vec<&String> = tables.iter().filter(|t| names_table(sql, t)).collect();
    let [table] = named.as_slice() else {
        return None;
    };
    // Every group is one row by the data: the grouped column holds a different value in
    // each row of the table (a title, a name), not only in the rows this query kept.
    let group_at = upper.find("GROUP BY")? + "GROUP BY".len();
    let group_term = sql[group_at..]
        .split(|c: char| c == ',' || c.is_whitespace())
        .find(|w| !w.is_empty())?;
    let group_col = group_term.rsplit('.').next()?.trim_matches(['"', '`']);
    let columns = column_types(conn, table);
    let group_col = columns
        .iter()
        .find(|(c, _, _)| c.eq_ignore_ascii_case(group_col))
        .map(|(c, _, _)| c.clone())?;
    let distinct: Option<bool> = conn
        .query_row(
            &format!(
                "SELECT COUNT(DISTINCT {c}) = COUNT(*) FROM {t}",
                c = quote(&group_col),
                t = quote(table)
            ),
            [],
            |r| r.get(0),
        )
        .ok();
    if distinct != Some(true) {
        return None;
    }
    let key = columns
        .into_iter()
        .find(|(_, _, pk)| *pk)
        .map(|(name, _, _)| name);
    let pointing = pointing_tables(conn, table, key.as_deref(), tables);
    let (other, col, to) = pointing.first()?;
    // The same query with the first of them joined: its count is of their rows.
    let name = regex::Regex::new(&format!(
        r#"(?i)\bFROM\s+(?:"{0}"|{0}\b)"#,
        regex::escape(table)
    ))
    .ok()?;
    let name_end = name.find(sql)?.end();
    static ALIAS: OnceLock<regex::Regex> = OnceLock::new();
    let alias_re = ALIAS.get_or_init(|| {
        regex::Regex::new(r"(?i)^\s+(?:AS\s+)?([A-Za-z_][A-Za-z0-9_]*)")
            .expect("the pattern is valid")
    });
    let (end, alias) = match alias_re.captures(&sql[name_end..]).and_then(|c| c.get(1)) {
        Some(a) if !NOT_ALIASES.contains(&a.as_str().to_ascii_lowercase().as_str()) => {
            (name_end + a.end(), a.as_str().to_string())
        }
        _ => (name_end, shown(table)),
    };
    // A grouped column the joined table has too is written with its table.
    let rest = if !group_term.contains('.')
        && table_columns(conn, other)
            .iter()
            .any(|c| c.eq_ignore_ascii_case(&group_col))
    {
        let at = group_at.checked_sub(end)? + sql[group_at..].find(group_term)?;
        let rest = &sql[end..];
        format!(
            "{}{alias}.{}{}",
            &rest[..at],
            shown(&group_col),
            &rest[at + group_term.len()..]
        )
    } else {
        sql[end..].to_string()
    };
    let joined = format!(
        "{} JOIN {o} ON {o}.{c} = {alias}.{to}{rest}",
        sql[..end].trim_end(),
        o = shown(other),
        c = shown(col),
        to = shown(to)
    );
    let others: Vec<String> = pointing[1..].iter().map(|(o, _, _)| shown(o)).collect();
    let also = if others.is_empty() {
        String::new()
    } else {
        format!(" (also {})", others.join(", "))
    };
    Some(format!(
        "{GROUPS_OF_ONE} each {group} is one row of {t}, so the count is of the rows of {t}, \
         not of how often something happened; rows that point to {t} are in {o}{also}: \
         {joined} counts those)",
        group = shown(&group_col),
        t = shown(table),
        o = shown(other),
    ))
}

/// The tables whose rows point to `table` (whose primary key is `key`), at most
/// [`MAX_POINTING_TABLES`], each as (table, its column, the column of `table` it holds):
/// through a declared foreign key, else through a column named as `table`'s key when that
/// name reads as a key (`book_id`, not `id`).
fn pointing_tables<'t>(
    conn: &Connection,
    table: &str,
    key: Option<&str>,
    tables: &'t [String],
) -> Vec<(&'t String, String, String)> {
    let mut pointing = Vec::new();
    for other in tables.iter().filter(|t| !t.eq_ignore_ascii_case(table)) {
        let declared = foreign_keys(conn, other)
            .into_iter()
            .find(|(_, to, _)| to.eq_ignore_ascii_case(table))
            .map(|(col, _, to_col)| (col, to_col.or_else(|| key.map(str::to_string))));
        let by_name = || {
            let key = key.filter(|k| id_like(k))?;
            table_columns(conn, other)
                .into_iter()
                .find(|c| c.eq_ignore_ascii_case(key))
                .map(|c| (c, Some(key.to_string())))
        };
        if let Some((col, Some(to))) = declared.or_else(by_name) {
            pointing.push((other, col, to));
        }
        if pointing.len() == MAX_POINTING_TABLES {
            break;
        }
    }
    pointing
}

/// The most values of a column a [`value_hint`] lists.
const HINT_VALUES: usize = 8;

/// When a query found nothing: for each `column = 'text'` (or `LIKE`) of its conditions whose
/// text no row of the tables it names holds in that column, a note with the values the column
/// does hold (the most frequent first), so the model can match what is there. Regression:
/// asked for the unpaid consultation fees, the model wrote `reason = 'consultation'` (the
/// visits' reasons are "annual check-up", "vaccination", …), got NULL and answered from a
/// guess.
fn value_hint(conn: &Connection, sql: &str, tables: &[String]) -> Option<String> {
    static CONDITION: OnceLock<regex::Regex> = OnceLock::new();
    let condition = CONDITION.get_or_init(|| {
        regex::Regex::new(r"(?i)([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*(=|\bLIKE\b)\s*'((?:[^']|'')*)'")
            .expect("the pattern is valid")
    });
    let named: Vec<&String> = tables.iter().filter(|t| names_table(sql, t)).collect();
    let mut notes: Vec<String> = Vec::new();
    for c in condition.captures_iter(sql).take(4) {
        let column = c[1].rsplit('.').next().unwrap_or(&c[1]);
        let like = c[2].eq_ignore_ascii_case("like");
        let text = c[3].replace("''", "'");
        for t in &named {
            let Some((col, _, _)) = column_types(conn, t)
                .into_iter()
                .find(|(n, _, _)| n.eq_ignore_ascii_case(column))
            else {
                continue;
            };
            let (tq, cq) = (quote(t), quote(&col));
            let op = if like { "LIKE" } else { "=" };
            let found: Option<i64> = conn
                .query_row(
                    &format!("SELECT 1 FROM {tq} WHERE {cq} {op} ?1 LIMIT 1"),
                    [&text],
                    |r| r.get(0),
                )
                .ok();
            if found.is_some() {
                continue;
            }
            let Ok(mut stmt) = conn.prepare(&format!(
                "SELECT {cq} FROM {tq} WHERE typeof({cq}) = 'text' GROUP BY {cq} \
                 ORDER BY COUNT(*) DESC, {cq} LIMIT {}",
                HINT_VALUES + 1
            )) else {
                continue;
            };
            let values: Vec<String> = match stmt.query_map([], |r| r.get::<_, String>(0)) {
                Ok(rows) => rows.flatten().collect(),
                Err(_) => continue,
            };
            if values.is_empty() {
                continue;
            }
            let mut shown: Vec<String> = values
                .iter()
                .take(HINT_VALUES)
                .map(|v| format!("'{}'", cut_chars(&v.replace('\'', "''"), 40)))
                .collect();
            if values.len() > HINT_VALUES {
                shown.push("…".to_string());
            }
            notes.push(format!(
                "(no row of {t} has {col} {op} '{}'; the values of {col} there are: {})",
                cut_chars(&text, 60),
                shown.join(", ")
            ));
        }
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}

/// `name` as an SQL identifier in double quotes (quotes inside doubled).
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether a column's name reads as a key (`member_no`, `book_id`, `branch_code`; not a bare
/// `id`, which every table has).
/// The first term of a query's last `ORDER BY` when it is a plain column (`dob`, `m.dob`,
/// `"Date"`), without its table, and whether it is `DESC`; `None` for an expression.
fn order_term(sql: &str) -> Option<(String, bool)> {
    let upper = sql.to_ascii_uppercase();
    let at = upper.rfind("ORDER BY")? + "ORDER BY".len();
    let rest = &sql[at..];
    let end = rest.find([',', ')', ';']).unwrap_or(rest.len()).min(
        rest.to_ascii_uppercase()
            .find(" LIMIT")
            .unwrap_or(rest.len()),
    );
    let words: Vec<&str> = rest[..end].split_whitespace().collect();
    let (column, dir) = match words.as_slice() {
        [c] => (*c, ""),
        [c, d] => (*c, *d),
        _ => return None,
    };
    let desc = match dir.to_ascii_uppercase().as_str() {
        "DESC" => true,
        "" | "ASC" => false,
        _ => return None,
    };
    let column = column
        .rsplit('.')
        .next()?
        .trim_matches(['"', '`', '[', ']']);
    let plain = !column.is_empty()
        && column
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ' ');
    plain.then(|| (column.to_string(), desc))
}

/// A note on what an order by a date puts first, when the ordered `column` holds dates (its
/// `first` shown value reads `YYYY-MM-DD`, or, not shown, its name says date or birth: [`is_date_column`]).
/// Regression: asked for the oldest member, the model ordered by `dob DESC`, read the first
/// row (born 2016) as the oldest, and answered with a child.
fn order_note(column: &str, desc: bool, first: Option<&str>) -> Option<String> {
    let lower = column.to_ascii_lowercase();
    let birth = lower == "dob" || lower.contains("birth");
    let dated = match first {
        Some(v) => {
            let b = v.as_bytes();
            b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-'
        }
        None => birth || is_date_column(column, ""),
    };
    if !dated {
        return None;
    }
    let first = match (desc, birth) {
        (true, true) => "the latest birth date first: the youngest first",
        (false, true) => "the earliest birth date first: the oldest first",
        (true, false) => "the latest date first: the most recent first",
        (false, false) => "the earliest date first: the longest ago first",
    };
    Some(format!(
        "(ordered by {column}{}: {first})\n",
        if desc { " DESC" } else { "" }
    ))
}

/// Whether a column (its name and declared type) holds dates: a DATE or TIME type, or a name
/// that says date (`visit_date`, `dob`, `joined_on`, `paid_at`).
fn is_date_column(name: &str, declared: &str) -> bool {
    let (n, ty) = (name.to_ascii_lowercase(), declared.to_ascii_lowercase());
    ty.contains("date")
        || ty.contains("time")
        || n.contains("date")
        || n == "dob"
        || n.ends_with("_on")
        || n.ends_with("_at")
}

fn id_like(column: &str) -> bool {
    let c = column
        .rsplit('.')
        .next()
        .unwrap_or(column)
        .to_ascii_lowercase();
    c != "id"
        && ["id", "_no", "code", "_key", "_num"]
            .iter()
            .any(|e| c.ends_with(e))
}

fn cell(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => {
            // Display writes every digit of 1e300; past 24 characters use the exponent form.
            let plain = format!("{f}");
            if plain.len() > 24 {
                format!("{f:e}")
            } else {
                plain
            }
        }
        ValueRef::Text(t) => {
            // Only the start can be shown: decode no more than it needs.
            let head = &t[..t.len().min(MAX_CELL_CHARS * 4 + 4)];
            let s = String::from_utf8_lossy(head);
            let s = s.replace('\n', "\\n").replace('|', "\\|");
            if s.chars().count() > MAX_CELL_CHARS || head.len() < t.len() {
                let cut: String = s.chars().take(MAX_CELL_CHARS).collect();
                format!("{cut}…")
            } else {
                s
            }
        }
        ValueRef::Blob(b) => format!("<blob, {} bytes>", b.len()),
    }
}

/// The schema as read when the tool opens.
struct Schema {
    /// The part of the description that shows it.
    text: String,
    /// Every table and view name, sorted.
    tables: Vec<String>,
    /// Every table and view with its statement, in description order.
    entries: Vec<TableEntry>,
    /// Whether every table's statement is in `text`.
    complete: bool,
}

/// The database's CREATE statements within the budgets of `options`: tables and views in
/// full while they fit in `max_schema_chars` (then indexes and triggers, when every table
/// fit), the names of the other tables within `max_names_chars`, and a count of the rest with
/// the queries that list them.
fn read_schema(conn: &Connection, options: &SqlOptions) -> rusqlite::Result<Schema> {
    let mut stmt = conn.prepare(
        "SELECT type, name, sql FROM sqlite_master \
         WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' \
         ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, name",
    )?;
    let mut rows = stmt.query([])?;
    let mut text = String::new();
    let mut entries = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    while let Some(r) = rows.next()? {
        let kind: String = r.get(0)?;
        let name: String = r.get(1)?;
        let sql: String = r.get(2)?;
        let is_table = kind == "table" || kind == "view";
        let fits = text.len() + sql.len() + 2 <= options.max_schema_chars;
        if is_table {
            if fits {
                text.push_str(&sql);
                text.push_str(";\n");
            } else {
                left_out.push(name.clone());
            }
            entries.push(TableEntry {
                name,
                sql,
                in_description: fits,
            });
        } else if fits && left_out.is_empty() {
            text.push_str(&sql);
            text.push_str(";\n");
        }
    }
    let complete = left_out.is_empty();
    if !complete {
        let mut listed = 0;
        let mut names = String::new();
        for n in &left_out {
            if names.len() + n.len() + 2 > options.max_names_chars {
                break;
            }
            if listed > 0 {
                names.push_str(", ");
            }
            names.push_str(n);
            listed += 1;
        }
        if listed > 0 {
            text.push_str(&format!(
                "-- {listed} more tables, names only (PRAGMA table_info(name) gives a table's \
                 columns): {names}\n"
            ));
        }
        let rest = left_out.len() - listed;
        if rest > 0 {
            text.push_str(&format!(
                "-- … {rest} more tables not listed here; ask with sql: SELECT name FROM \
                 sqlite_master WHERE type='table' AND name LIKE '%word%', then PRAGMA \
                 table_info(name) for a table's columns\n"
            ));
        }
    }
    let mut tables: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    tables.sort();
    Ok(Schema {
        text: text.trim_end().to_string(),
        tables,
        entries,
        complete,
    })
}

/// Words that say nothing about which table a task needs: common English words and the SQL
/// words every CREATE statement holds.
const NOT_TOPICS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "was",
    "were",
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "how",
    "many",
    "much",
    "with",
    "from",
    "that",
    "this",
    "these",
    "those",
    "there",
    "their",
    "have",
    "has",
    "had",
    "does",
    "did",
    "can",
    "could",
    "would",
    "should",
    "will",
    "all",
    "any",
    "each",
    "every",
    "our",
    "your",
    "you",
    "list",
    "show",
    "give",
    "tell",
    "find",
    "get",
    "number",
    "total",
    "per",
    "than",
    "more",
    "most",
    "less",
    "least",
    "not",
    "null",
    "into",
    "about",
    "create",
    "table",
    "view",
    "integer",
    "int",
    "text",
    "real",
    "blob",
    "numeric",
    "primary",
    "key",
    "references",
    "default",
    "unique",
    "check",
    "foreign",
    "autoincrement",
    "varchar",
    "constraint",
    "collate",
    "nocase",
    "rowid",
    "without",
    "select",
    "where",
    "order",
    "group",
    "join",
    "end",
    "date",
    "time",
    "name",
    "value",
    "type",
];

/// The lowercase words of `s` (letters and digits; `_` splits), three characters or more,
/// with a plural `s` taken off, and without [`NOT_TOPICS`].
fn words_of(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
    {
        let w = w.to_lowercase();
        if NOT_TOPICS.contains(&w.as_str()) {
            continue;
        }
        let w = match w.strip_suffix('s') {
            Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_string(),
            _ => w,
        };
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// `table.column` for every column of the tables `sql` names as whole words ([`names_table`]:
/// `visit_id` does not name the table `visit`).
fn columns_of_named_tables(conn: &Connection, sql: &str, tables: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for t in tables.iter().filter(|t| names_table(sql, t)) {
        out.extend(
            table_columns(conn, t)
                .into_iter()
                .map(|c| format!("{t}.{c}")),
        );
    }
    out
}

/// The names of a table's columns.
fn table_columns(conn: &Connection, table: &str) -> Vec<String> {
    column_types(conn, table)
        .into_iter()
        .map(|(name, _, _)| name)
        .collect()
}

/// The foreign keys of `table`: (its column, the table it points to, that table's column, or
/// `None` for its primary key).
fn foreign_keys(conn: &Connection, table: &str) -> Vec<(String, String, Option<String>)> {
    let q = format!(
        "PRAGMA foreign_key_list(\"{}\")",
        table.replace('"', "\"\"")
    );
    let Ok(mut stmt) = conn.prepare(&q) else {
        return Vec::new();
    };
    let Ok(rows) = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(3)?,
            r.get::<_, String>(2)?,
            r.get::<_, Option<String>>(4)?,
        ))
    }) else {
        return Vec::new();
    };
    rows.flatten().collect()
}

/// Whether `sql` names `table` as a whole word (any letter case); the keywords of `ORDER BY`
/// and `GROUP BY` do not name the tables `Order` and `Group`.
fn names_table(sql: &str, table: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    let t = table.to_ascii_lowercase();
    lower.match_indices(&t).any(|(i, _)| {
        let before = lower[..i].chars().next_back();
        let rest = &lower[i + t.len()..];
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let by = rest
            .trim_start()
            .strip_prefix("by")
            .is_some_and(|r| !part(r.chars().next()))
            && rest.starts_with(char::is_whitespace);
        !part(before) && !part(rest.chars().next()) && !by
    })
}

/// How `holder` joins one of the tables `used` by a query, as `holder.col = used.col`: a
/// foreign key either way, else a shared id-like column (`book_id` in both), else the
/// `customer_id` → `customers.id` convention either way. A bare `id` is each table's own key,
/// never a link by itself.
fn join_on(conn: &Connection, holder: &str, used: &[&String]) -> Option<String> {
    let has = |cols: &[String], c: &str| cols.iter().any(|t| t.eq_ignore_ascii_case(c));
    let stem = |t: &str| {
        let t = t.to_ascii_lowercase();
        t.strip_suffix('s').map(str::to_string).unwrap_or(t)
    };
    let theirs = table_columns(conn, holder);
    for q in used {
        for (from, to_table, to) in foreign_keys(conn, q) {
            if to_table.eq_ignore_ascii_case(holder) {
                let to = to.unwrap_or_else(|| from.clone());
                return Some(format!("{holder}.{to} = {q}.{from}"));
            }
        }
        for (from, to_table, to) in foreign_keys(conn, holder) {
            if to_table.eq_ignore_ascii_case(q) {
                let to = to.unwrap_or_else(|| from.clone());
                return Some(format!("{holder}.{from} = {q}.{to}"));
            }
        }
        let ours = table_columns(conn, q);
        if let Some(c) = ours.iter().find(|c| id_like(c) && has(&theirs, c)) {
            return Some(format!("{holder}.{c} = {q}.{c}"));
        }
        let key = format!("{}_id", stem(holder));
        if has(&theirs, "id") && has(&ours, &key) {
            return Some(format!("{holder}.id = {q}.{key}"));
        }
        let key = format!("{}_id", stem(q));
        if has(&ours, "id") && has(&theirs, &key) {
            return Some(format!("{holder}.{key} = {q}.id"));
        }
    }
    None
}

/// Keys looked up for a result of keys and numbers only: at most this many per result.
const MAX_LOOKUP_KEYS: usize = 10;

/// For a result of keys and numbers only (`member_no | num_loans` → `1001 | 4`), where a key
/// column is the key of a table the query does not name (its primary key, or `id` of the
/// table a `customer_id` is named after) and that table has text columns: the rows of that
/// table the shown keys point to, with up to three of its text columns, as a note under the
/// result. The 1.5B model, asked who borrowed most, answered "Member 1001"; asked which
/// member may not borrow, it made up a name for member 1014; told only which table to join,
/// it answered the same.
fn name_lookup(
    conn: &Connection,
    sql: &str,
    tables: &[String],
    ids: &[(String, Vec<rusqlite::types::Value>)],
    options: &SqlOptions,
) -> Option<String> {
    let used: Vec<&String> = tables.iter().filter(|t| names_table(sql, t)).collect();
    if used.is_empty() {
        return None;
    }
    for (id, values) in ids {
        let column = id.rsplit('.').next().unwrap_or(id);
        let named_after = column
            .to_ascii_lowercase()
            .strip_suffix("_id")
            .map(str::to_string);
        // The table a queried table's declared foreign key of this name points to, and its
        // column: `training_enrolment.course_id` → `training_course.id`, which no rule of
        // names finds; or the queried table itself, for a key that points into its own table
        // (`hr_employee.manager_id` → `hr_employee.id`). Regression: asked who Lena Fischer's
        // manager is, the 1.5B model read `manager_id | 22` and answered "Lena Fischer
        // herself".
        let declared: Option<(String, Option<String>)> = used.iter().find_map(|t| {
            foreign_keys(conn, t)
                .into_iter()
                .find(|(from, to_table, _)| {
                    from.eq_ignore_ascii_case(column)
                        && (to_table.eq_ignore_ascii_case(t)
                            || !used.iter().any(|u| u.eq_ignore_ascii_case(to_table)))
                })
                .map(|(_, to_table, to)| (to_table, to))
        });
        // A key into a queried table is looked up in that table only.
        let own = declared
            .as_ref()
            .map(|(to_table, _)| to_table)
            .filter(|to_table| used.iter().any(|u| u.eq_ignore_ascii_case(to_table)));
        let holders = tables.iter().filter(|t| match own {
            Some(to_table) => to_table.eq_ignore_ascii_case(t),
            None => !used.contains(t),
        });
        for holder in holders {
            let info = column_types(conn, holder);
            let h = holder.to_ascii_lowercase();
            let key = if let Some((_, to)) = declared
                .as_ref()
                .filter(|(to_table, _)| to_table.eq_ignore_ascii_case(holder))
            {
                match to.clone().or_else(|| {
                    info.iter()
                        .find(|(_, _, pk)| *pk)
                        .map(|(c, _, _)| c.clone())
                }) {
                    Some(c) => c,
                    None => continue,
                }
            } else if declared.is_some() {
                continue;
            } else if let Some((c, _, _)) = info
                .iter()
                .find(|(c, _, pk)| *pk && c.eq_ignore_ascii_case(column))
            {
                c.clone()
            } else if named_after.as_ref().is_some_and(|n| {
                [n.clone(), format!("{n}s"), format!("{n}es")]
                    .iter()
                    .any(|name| h == *name || h.ends_with(&format!("_{name}")))
            }) {
                match info.iter().find(|(c, _, _)| c.eq_ignore_ascii_case("id")) {
                    Some((c, _, _)) => c.clone(),
                    None => continue,
                }
            } else {
                continue;
            };
            let texts: Vec<&str> = info
                .iter()
                .filter(|(c, ty, _)| {
                    let ty = ty.to_ascii_uppercase();
                    (ty.contains("CHAR") || ty.contains("TEXT")) && !id_like(c)
                })
                .map(|(c, _, _)| c.as_str())
                .take(3)
                .collect();
            if texts.is_empty() {
                continue;
            }
            let marks = vec!["?"; values.len()].join(", ");
            let lookup = format!(
                "SELECT {}, {} FROM {} WHERE {} IN ({marks})",
                quote(&key),
                texts
                    .iter()
                    .map(|t| quote(t))
                    .collect::<Vec<_>>()
                    .join(", "),
                quote(holder),
                quote(&key),
            );
            let Ok(mut stmt) = conn.prepare(&lookup) else {
                continue;
            };
            let Ok(mut rows) = stmt.query(rusqlite::params_from_iter(values.iter())) else {
                continue;
            };
            // (where its key first stands in the result, the line)
            let mut found: Vec<(usize, String)> = Vec::new();
            while let Ok(Some(row)) = rows.next() {
                let cells: Option<Vec<String>> = (0..=texts.len())
                    .map(|i| row.get_ref(i).ok().map(cell))
                    .collect();
                let Some(cells) = cells else { break };
                let at = row
                    .get::<_, rusqlite::types::Value>(0)
                    .ok()
                    .and_then(|k| values.iter().position(|v| *v == k))
                    .unwrap_or(usize::MAX);
                found.push((at, cells.join(" | ")));
                if found.len() >= MAX_LOOKUP_KEYS {
                    break;
                }
            }
            if found.is_empty() {
                continue;
            }
            // In the order of the result, so the first row's key comes first: listed by key,
            // the member of an older loan stood first and was taken for the latest borrower.
            found.sort_by_key(|(at, _)| *at);
            let mut lines = vec![format!("{key} | {}", texts.join(" | "))];
            lines.extend(found.into_iter().map(|(_, l)| l));
            let note = format!(
                "({column} is the key of {holder}; its rows for these keys, in the order above:)\n{}",
                lines.join("\n")
            );
            return Some(cut_chars(&note, options.max_result_chars / 2));
        }
    }
    None
}

/// (name, declared type, part of the primary key) of a table's columns.
fn column_types(conn: &Connection, table: &str) -> Vec<(String, String, bool)> {
    let q = format!("PRAGMA table_info(\"{}\")", table.replace('"', "\"\""));
    let Ok(mut stmt) = conn.prepare(&q) else {
        return Vec::new();
    };
    let Ok(rows) = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(5)? > 0,
        ))
    }) else {
        return Vec::new();
    };
    rows.flatten().collect()
}

/// Words that may follow a table's name in FROM or JOIN without being its alias.
const NOT_ALIASES: &[&str] = &[
    "on",
    "where",
    "join",
    "left",
    "right",
    "inner",
    "outer",
    "cross",
    "natural",
    "full",
    "group",
    "order",
    "limit",
    "having",
    "using",
    "union",
    "except",
    "intersect",
    "window",
    "as",
    "select",
    "from",
    "and",
    "or",
    "set",
    "values",
];

/// The names `sql` gives `table` (`loans AS T2`, `loans l`), or the table's own name when it
/// is not aliased.
fn aliases_of(sql: &str, table: &str) -> Vec<String> {
    let tokens: Vec<&str> = sql
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == ';')
        .filter(|t| !t.is_empty())
        .collect();
    let unquote = |t: &str| {
        t.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']')
            .to_string()
    };
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !unquote(t).eq_ignore_ascii_case(table) {
            continue;
        }
        let mut next = tokens.get(i + 1).copied();
        if next.is_some_and(|n| n.eq_ignore_ascii_case("as")) {
            next = tokens.get(i + 2).copied();
        }
        match next.map(unquote) {
            Some(a)
                if !a.is_empty()
                    && a.chars().all(|c| c.is_alphanumeric() || c == '_')
                    && !NOT_ALIASES.contains(&a.to_ascii_lowercase().as_str()) =>
            {
                out.push(a)
            }
            _ => out.push(table.to_string()),
        }
    }
    out.dedup();
    out
}

/// For "ambiguous column name: col": the tables of the query that have `col`, as the query
/// calls them, and the qualified names to write. Regression: told only to fix the query, the
/// 1.5B model's `SELECT GenreId … FROM Track JOIN Genre ON Track.GenreId = Genre.GenreId`
/// took a round to become `T2.GenreId` with new aliases, and a mistake beside it.
fn ambiguity_hint(conn: &Connection, sql: &str, tables: &[String], column: &str) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    for t in tables.iter().filter(|t| names_table(sql, t)) {
        if table_columns(conn, t)
            .iter()
            .any(|c| c.eq_ignore_ascii_case(column))
        {
            for a in aliases_of(sql, t) {
                if !names.contains(&a) {
                    names.push(a);
                }
            }
        }
    }
    if names.len() < 2 {
        return None;
    }
    let written: Vec<String> = names.iter().map(|n| format!("{n}.{column}")).collect();
    Some(format!(
        "{column} is a column of more than one table in the query ({}): write {}",
        names.join(", "),
        written.join(" or ")
    ))
}

/// The names a query gives the tables of it that have `column` (their aliases, or their own
/// names), other than `qualifier`, each with its table, in the order of `tables`.
fn other_names_with(
    conn: &Connection,
    sql: &str,
    tables: &[String],
    qualifier: &str,
    column: &str,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for t in tables.iter().filter(|t| names_table(sql, t)) {
        if !table_columns(conn, t)
            .iter()
            .any(|c| c.eq_ignore_ascii_case(column))
        {
            continue;
        }
        for a in aliases_of(sql, t) {
            if !a.eq_ignore_ascii_case(qualifier) && !out.iter().any(|(n, _)| *n == a) {
                out.push((a, t.clone()));
            }
        }
    }
    out
}

/// For "no such column: T1.col" where `col` is a column of another table the query names
/// under another name: that name. Asked for `T1.member_no` with `fines AS T1 JOIN loans AS
/// T2`, the 1.5B model was told to join members (the table the query did not name that has
/// the column) and sent the same query again. (Where that name is the only one, the query
/// has been run with it already: see [`repair::other_alias`].)
fn alias_hint(conn: &Connection, sql: &str, tables: &[String], missing: &str) -> Option<String> {
    let (qualifier, column) = missing.rsplit_once('.')?;
    let column = column.trim_matches('"');
    let qualifier = qualifier.trim_matches('"');
    let (name, t) = other_names_with(conn, sql, tables, qualifier, column)
        .into_iter()
        .next()?;
    Some(format!(
        "{column} is a column of {t}, which this query calls {name}: write {name}.{column}"
    ))
}

/// For "no such column: X" where X is a column of a table the query does not name: which
/// table holds it and how that table joins one the query does name ([`join_on`]; a holder
/// that joins is preferred), as the hint of the error. The 1.5B model asked the loans table
/// for `title` and, told only the loans columns, counted rows of the books table instead.
fn join_hint(conn: &Connection, sql: &str, tables: &[String], missing: &str) -> Option<String> {
    let column = missing.rsplit('.').next()?.trim_matches('"');
    let used: Vec<&String> = tables.iter().filter(|t| names_table(sql, t)).collect();
    if used.is_empty() {
        return None;
    }
    let holders: Vec<&String> = tables
        .iter()
        .filter(|t| !used.contains(t))
        .filter(|t| {
            table_columns(conn, t)
                .iter()
                .any(|c| c.eq_ignore_ascii_case(column))
        })
        .collect();
    let (holder, link) = holders
        .iter()
        .find_map(|h| join_on(conn, h, &used).map(|on| (*h, Some(on))))
        .or_else(|| holders.first().map(|h| (*h, None)))?;
    let others: Vec<&str> = holders
        .iter()
        .filter(|h| **h != holder)
        .map(|h| h.as_str())
        .collect();
    let others = if others.is_empty() {
        String::new()
    } else {
        format!(" (also in {})", others.join(", "))
    };
    Some(match link {
        Some(on) => format!(
            "{column} is a column of {holder}{others}, which the query does not name: join it, \
             JOIN {holder} ON {on}"
        ),
        None => format!(
            "{column} is a column of {holder}{others}, which the query does not name: select \
             from {holder}, or join it"
        ),
    })
}

/// The sql tool's name, as the model calls it.
pub const NAME: &str = "sql";

impl Tool for SqlTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> String {
        let tables = if self.complete {
            let shown: Vec<String> = self.tables.iter().map(|t| self.bare.shown(t)).collect();
            format!("the tables {}", shown.join(", "))
        } else {
            format!("{} tables (not all shown below)", self.tables.len())
        };
        let quotes = match self.bare.example() {
            Some(name) => format!(
                " Names with spaces or that are SQL keywords go in double quotes, as in {}.",
                quote(name)
            ),
            None => String::new(),
        };
        format!(
            "The user's database (SQLite) with {tables}. Use it for any question about \
             these records (names, prices, amounts, counts, dates). Runs one read-only SQL query \
             and returns the rows as a table (at most {} rows). To answer who or which, select \
             the name (joining the table that holds it), not only an id.{quotes} The tables:\n{}",
            self.options.max_rows, self.schema
        )
    }

    /// When the description could not show every table's statement: the full statements of
    /// the tables whose names or columns share words with the task, best matches first (a
    /// word in the name counts three times one in the columns), within `max_context_chars`.
    /// Then rows: those that hold the names the task mentions and the rows that point to them
    /// ([`SqlTool::named_rows`]; a follow-up without names of its own, "What is his email
    /// address?", takes those of `earlier`), and a few rows of the tables its words point to.
    fn context_for(&self, task: &str, earlier: Option<&str>) -> Option<String> {
        let mut parts = Vec::new();
        let missing = self.missing_tables(task);
        if !missing.is_empty() {
            parts.push(format!(
                "This database has no table named {} (its tables: {}).",
                missing.join(" or "),
                join_within(self.tables.iter().map(String::as_str), 400)
            ));
        }
        let words = words_of(task);
        let mut names = names::name_terms(task);
        if names.is_empty() {
            names = earlier.map(names::name_terms).unwrap_or_default();
        }
        let keyed = self.keyed_rows(task, self.options.max_context_chars);
        if words.is_empty() && names.is_empty() && keyed.is_empty() {
            return (!parts.is_empty()).then(|| parts.join("\n\n"));
        }
        let mut scored: Vec<(usize, &TableEntry)> = self
            .entries
            .iter()
            .filter_map(|e| {
                let in_name = words_of(&e.name);
                let in_sql = words_of(&e.sql);
                let score: usize = words
                    .iter()
                    .map(|w| {
                        if in_name.contains(w) {
                            3
                        } else if in_sql.contains(w) {
                            1
                        } else {
                            0
                        }
                    })
                    .sum();
                (score > 0).then_some((score, e))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        let mut schemas = String::new();
        for (_, e) in scored.iter().filter(|(_, e)| !e.in_description) {
            if schemas.len() + e.sql.len() + 2 > self.options.max_context_chars {
                continue;
            }
            schemas.push_str(&e.sql);
            schemas.push_str(";\n");
        }
        if !schemas.is_empty() {
            parts.push(format!(
                "Tables of the sql database that match this task's words (the sql tool's \
                 description could not show all {} tables):\n{}",
                self.tables.len(),
                schemas.trim_end()
            ));
        }
        let budget = self.options.max_context_chars;
        let named = self.named_rows(&names, budget.saturating_sub(keyed.len()));
        // The rows of what the task names say more than a sample of the tables its other
        // words point to; those come only when no name was found.
        let rows = if !keyed.is_empty() {
            // The rows the task names by key say the most; a sample of the tables beside
            // them only adds rows to mistake for them.
            format!("{keyed}{named}")
        } else if named.is_empty() {
            self.sample_rows(
                scored
                    .iter()
                    .take(SAMPLE_TABLES)
                    .map(|(_, e)| e.name.as_str()),
                &words,
                budget,
            )
        } else {
            named
        };
        if !rows.is_empty() {
            parts.push(format!(
                "Some rows of the tables this task's words point to (read before the first \
                 step; query the sql tool for the answer):\n{}",
                rows.trim_end()
            ));
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Calls are checked without the pattern: SQLite's own error, with the columns the query
    /// may use, says more than "does not match the pattern" (a query from the model always
    /// matches it; one from `cairn tools call` or a baseline may not).
    fn call_schema(&self) -> Option<Value> {
        Some(schema_of::<SqlArgs>())
    }

    fn args_schema(&self) -> Value {
        let mut schema = schema_of::<SqlArgs>();
        if let (Some(p), Some(q)) = (
            &self.pattern,
            schema
                .pointer_mut("/properties/query")
                .and_then(Value::as_object_mut),
        ) {
            q.insert("pattern".into(), Value::String(p.clone()));
        }
        schema
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let args: SqlArgs = parse_args(args)?;
        self.query(&args.query).map(Observation::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the query pattern admitted `MOD`, `FLOOR`, … but the SQLite compiled in
    /// lacks them, so a query the pattern let through failed with "no such function". Every
    /// function the pattern admits must be one the tool's connection has.
    #[test]
    fn every_function_the_query_pattern_admits_exists_on_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (id INTEGER);")
            .unwrap();
        let tool = SqlTool::open(&path, SqlOptions::default()).unwrap();
        let conn = tool.conn.lock().unwrap();
        let known: std::collections::HashSet<String> = conn
            .prepare("SELECT name FROM pragma_function_list")
            .unwrap()
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(|n| n.unwrap().to_ascii_uppercase())
            .collect();
        for f in crate::tools::sql_pattern::FUNCTIONS {
            assert!(
                known.contains(*f),
                "{f} is in the pattern but not in SQLite"
            );
        }
    }

    #[test]
    fn task_words_drop_common_words_and_plurals() {
        assert_eq!(
            words_of("How many crates are in Warehouse_5821's bays?"),
            vec!["crate", "warehouse", "5821", "bay"]
        );
        assert_eq!(
            words_of("CREATE TABLE t (id INTEGER, class TEXT)"),
            vec!["class"]
        );
    }

    #[test]
    fn lists_and_numbers_stay_short() {
        let names = ["alpha", "beta", "gamma", "delta"];
        assert_eq!(
            join_within(names.into_iter(), 12),
            "alpha, beta, … and 2 more"
        );
        assert_eq!(
            join_within(names.into_iter(), 100),
            "alpha, beta, gamma, delta"
        );
        assert_eq!(cell(ValueRef::Real(1e300)), "1e300");
        assert_eq!(cell(ValueRef::Real(2.5)), "2.5");
        assert_eq!(cell(ValueRef::Blob(&[0; 7])), "<blob, 7 bytes>");
        let long = "é".repeat(5000);
        assert_eq!(cell(ValueRef::Text(long.as_bytes())).chars().count(), 201);
        assert_eq!(bytes(256 << 10), "256 KiB");
        assert_eq!(bytes(192 << 20), "192 MiB");
    }
}
