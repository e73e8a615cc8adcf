//! The `sql` tool: read-only queries on the user's SQLite database (`--db FILE`).
//!
//! Safety comes in layers. The file is opened read-only; an authorizer admits only reading
//! (`SELECT`, reads of columns, functions other than `load_extension`, recursive CTEs and a
//! list of read-only `PRAGMA`s) and refuses everything else, ATTACH and DETACH included, at
//! prepare time; a progress handler interrupts a query that runs over the time limit. Results
//! come back as a compact table capped at [`SqlOptions::max_rows`] with "(N more rows)".
//!
//! The tool's description carries the database's CREATE statements (capped), so the model
//! knows the tables without asking. Error messages help the model fix its query: an unknown
//! table lists the tables, an unknown column lists the columns of the tables the query names.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{parse_args, schema_of, Observation, Tool, ToolError};

/// Limits of the `sql` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlOptions {
    /// A query running longer than this is interrupted.
    pub time_limit: Duration,
    /// At most this many rows are shown; the rest are counted.
    pub max_rows: usize,
    /// The schema in the description is cut after this many characters.
    pub max_schema_chars: usize,
}

impl Default for SqlOptions {
    fn default() -> Self {
        SqlOptions {
            time_limit: Duration::from_secs(2),
            max_rows: 50,
            max_schema_chars: 4000,
        }
    }
}

/// The arguments of `sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SqlArgs {
    /// One read-only SQL statement (SQLite dialect).
    pub query: String,
}

/// The `sql` tool, holding one read-only connection.
pub struct SqlTool {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The deadline of the running query, in nanoseconds since `epoch`; read by the progress
    /// handler.
    deadline: Arc<AtomicU64>,
    epoch: Instant,
    schema: String,
    tables: Vec<String>,
    options: SqlOptions,
}

impl std::fmt::Debug for SqlTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlTool")
            .field("path", &self.path)
            .field("tables", &self.tables)
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
        let (schema, tables) =
            read_schema(&conn, options.max_schema_chars).map_err(|e| map_open_error(path, &e))?;
        let epoch = Instant::now();
        let deadline = Arc::new(AtomicU64::new(u64::MAX));
        let d = deadline.clone();
        conn.progress_handler(
            1000,
            Some(move || epoch.elapsed().as_nanos() as u64 > d.load(Ordering::Relaxed)),
        )
        .map_err(|e| map_open_error(path, &e))?;
        conn.authorizer(Some(authorize))
            .map_err(|e| map_open_error(path, &e))?;
        Ok(SqlTool {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            deadline,
            epoch,
            schema,
            tables,
            options,
        })
    }

    /// The tables of the database, sorted.
    pub fn tables(&self) -> &[String] {
        &self.tables
    }

    /// Runs one query and formats the result as a compact table.
    pub fn query(&self, sql: &str) -> Result<String, ToolError> {
        if !self.path.exists() {
            return Err(ToolError::fatal(format!(
                "the database file {} no longer exists",
                self.path.display()
            )));
        }
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let limit = self.options.time_limit;
        let start = self.epoch.elapsed();
        self.deadline
            .store((start + limit).as_nanos() as u64, Ordering::Relaxed);
        let result = run_query(&conn, sql, self.options.max_rows, limit);
        self.deadline.store(u64::MAX, Ordering::Relaxed);
        result.map_err(|e| self.explain(&conn, sql, e))
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
        // SQLite's own message, without rusqlite's "in <the whole query> at offset N" tail.
        let text = match &e {
            rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
            rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
            other => other.to_string(),
        };
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
                self.tables.join(", ")
            ))
            .with_hint("use one of the listed tables");
        }
        if let Some(rest) = text.strip_prefix("no such column: ") {
            let cols = columns_of_named_tables(conn, sql, &self.tables);
            let msg = if cols.is_empty() {
                format!("no such column: {rest}")
            } else {
                format!("no such column: {rest} (columns: {})", cols.join(", "))
            };
            return ToolError::invalid(msg).with_hint("use one of the listed columns");
        }
        ToolError::invalid(format!("SQL error: {text}"))
            .with_hint("fix the query; the tables and their columns are in the tool's description")
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

fn run_query(
    conn: &Connection,
    sql: &str,
    max_rows: usize,
    limit: Duration,
) -> Result<String, QueryError> {
    let trimmed = sql.trim().trim_end_matches(';').trim();
    if trimmed.is_empty() {
        return Err(QueryError::Empty);
    }
    let mut stmt = conn.prepare(trimmed).map_err(|e| match e {
        rusqlite::Error::MultipleStatement => QueryError::Multiple,
        e => QueryError::Sqlite(e),
    })?;
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    let ncols = names.len();
    let mut rows = stmt.query([])?;
    let mut shown: Vec<Vec<String>> = Vec::new();
    let mut more: u64 = 0;
    let mut counting_stopped = false;
    loop {
        let row = match rows.next() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e)
                if !shown.is_empty()
                    && shown.len() >= max_rows
                    && e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) =>
            {
                counting_stopped = true;
                break;
            }
            Err(e) => return Err(e.into()),
        };
        if shown.len() < max_rows {
            let mut cells = Vec::with_capacity(ncols);
            for i in 0..ncols {
                cells.push(cell(row.get_ref(i)?));
            }
            shown.push(cells);
        } else {
            more += 1;
        }
    }
    let mut out = String::new();
    if ncols > 0 {
        out.push_str(&names.join(" | "));
        out.push('\n');
    }
    for r in &shown {
        out.push_str(&r.join(" | "));
        out.push('\n');
    }
    if shown.is_empty() {
        out.push_str("(no rows)\n");
    }
    if counting_stopped {
        out.push_str(&format!(
            "(at least {more} more rows; counting stopped at the {:.1} s limit)\n",
            limit.as_secs_f64()
        ));
    } else if more > 0 {
        out.push_str(&format!("({more} more rows)\n"));
    }
    Ok(out.trim_end().to_string())
}

fn cell(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format!("{f}"),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            let s = s.replace('\n', "\\n").replace('|', "\\|");
            if s.chars().count() > 200 {
                let cut: String = s.chars().take(200).collect();
                format!("{cut}…")
            } else {
                s
            }
        }
        ValueRef::Blob(b) => format!("<blob, {} bytes>", b.len()),
    }
}

/// The CREATE statements of the database, cut at `max_chars`, and the table names.
fn read_schema(conn: &Connection, max_chars: usize) -> rusqlite::Result<(String, Vec<String>)> {
    let mut stmt = conn.prepare(
        "SELECT type, name, sql FROM sqlite_master \
         WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' \
         ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, name",
    )?;
    let mut rows = stmt.query([])?;
    let mut schema = String::new();
    let mut tables = Vec::new();
    let mut left_out = Vec::new();
    while let Some(r) = rows.next()? {
        let kind: String = r.get(0)?;
        let name: String = r.get(1)?;
        let sql: String = r.get(2)?;
        if kind == "table" || kind == "view" {
            tables.push(name.clone());
        }
        if schema.len() + sql.len() + 2 <= max_chars {
            schema.push_str(&sql);
            schema.push_str(";\n");
        } else if kind == "table" || kind == "view" {
            left_out.push(name);
        }
    }
    if !left_out.is_empty() {
        schema.push_str(&format!(
            "-- and {} more not shown: {}\n",
            left_out.len(),
            left_out.join(", ")
        ));
    }
    tables.sort();
    Ok((schema.trim_end().to_string(), tables))
}

/// `table.column` for every column of the tables whose names appear in `sql`.
fn columns_of_named_tables(conn: &Connection, sql: &str, tables: &[String]) -> Vec<String> {
    let lower = sql.to_ascii_lowercase();
    let mut out = Vec::new();
    for t in tables {
        if !lower.contains(&t.to_ascii_lowercase()) {
            continue;
        }
        let q = format!("PRAGMA table_info(\"{}\")", t.replace('"', "\"\""));
        let Ok(mut stmt) = conn.prepare(&q) else {
            continue;
        };
        let Ok(names) = stmt.query_map([], |r| r.get::<_, String>(1)) else {
            continue;
        };
        out.extend(names.flatten().map(|c| format!("{t}.{c}")));
    }
    out
}

impl Tool for SqlTool {
    fn name(&self) -> &str {
        "sql"
    }

    fn description(&self) -> String {
        format!(
            "The user's database (SQLite) with the tables {}. Use it for any question about \
             these records (names, prices, amounts, counts, dates). Runs one read-only SQL query \
             and returns the rows as a table (at most {} rows). The tables:\n{}",
            self.tables.join(", "),
            self.options.max_rows,
            self.schema
        )
    }

    fn args_schema(&self) -> Value {
        schema_of::<SqlArgs>()
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let args: SqlArgs = parse_args(args)?;
        self.query(&args.query).map(Observation::new)
    }
}
