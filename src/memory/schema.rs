//! Opening the memory file: refusing files that are not ours (before SQLite touches them),
//! connection settings (WAL, foreign keys, busy timeout), the schema and its migrations keyed
//! on `PRAGMA user_version`, and the retry that keeps "database is locked" from the user.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use super::MemoryError;

/// The schema version this build writes and the newest it reads.
pub const SCHEMA_VERSION: i64 = 2;

/// How long SQLite itself waits on a lock before answering "busy".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long cairn keeps retrying a busy write in all before giving up with a clear error.
pub(crate) const RETRY_FOR: Duration = Duration::from_secs(60);

/// Migration `i` takes the file from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 -> 1: the first schema.
    r#"
    CREATE TABLE sessions (
        id          INTEGER PRIMARY KEY,
        name        TEXT NOT NULL UNIQUE,
        created_at  REAL NOT NULL
    );
    CREATE TABLE turns (
        id               INTEGER PRIMARY KEY,
        session_id       INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        task             TEXT NOT NULL,
        started_at       REAL NOT NULL,
        finished_at      REAL,
        answer           TEXT,
        stop_reason      TEXT,
        latency_ms       INTEGER,
        prompt_tokens    INTEGER,
        generated_tokens INTEGER
    );
    CREATE INDEX turns_by_session ON turns(session_id, id);
    CREATE TABLE steps (
        id               INTEGER PRIMARY KEY,
        turn_id          INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
        round            INTEGER NOT NULL,
        thought          TEXT NOT NULL,
        action           TEXT NOT NULL,
        args_json        TEXT NOT NULL,
        observation      TEXT NOT NULL,
        outcome          TEXT NOT NULL,
        error_class      TEXT,
        latency_ms       INTEGER NOT NULL,
        prompt_tokens    INTEGER NOT NULL,
        generated_tokens INTEGER NOT NULL,
        created_at       REAL NOT NULL
    );
    CREATE INDEX steps_by_turn ON steps(turn_id, id);
    CREATE TABLE facts (
        id           INTEGER PRIMARY KEY,
        text         TEXT NOT NULL,
        session_id   INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
        source_step  INTEGER REFERENCES steps(id) ON DELETE SET NULL,
        created_at   REAL NOT NULL,
        last_used_at REAL,
        hits         INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX facts_by_session ON facts(session_id, text);
    CREATE INDEX facts_by_step ON facts(source_step);
    CREATE VIRTUAL TABLE facts_fts USING fts5(
        text, content='facts', content_rowid='id', tokenize='porter unicode61'
    );
    CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
        INSERT INTO facts_fts(rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
        INSERT INTO facts_fts(facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TRIGGER facts_fts_update AFTER UPDATE OF text ON facts BEGIN
        INSERT INTO facts_fts(facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO facts_fts(rowid, text) VALUES (new.id, new.text);
    END;
    "#,
    // 1 -> 2: a turn's summary (JSON: asked, found, answer), written when the turn no longer
    // fits in full in a prompt of its session.
    r#"
    ALTER TABLE turns ADD COLUMN summary TEXT;
    "#,
];

/// Our tables; any other table in a version-0 file means it belongs to someone else.
const OUR_TABLES: &[&str] = &["sessions", "turns", "steps", "facts"];

/// Opens (creating if absent) and migrates the memory file at `path`.
pub(crate) fn open_file(path: &Path) -> Result<Connection, MemoryError> {
    check_header(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| MemoryError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite(path, "opening it"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sqlite(path, "setting the busy timeout"))?;
    // Read the version before anything can write, so a newer or foreign file stays as it was.
    let version = retry(path, "reading the schema version", || user_version(&conn))?;
    if version > SCHEMA_VERSION {
        return Err(MemoryError::SchemaTooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == 0 {
        refuse_foreign_tables(&conn, path)?;
    }
    retry(path, "switching to WAL mode", || {
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
    })?;
    configure(&conn, path)?;
    migrate(conn, path)
}

/// Opens a private in-memory store with the same schema.
pub(crate) fn open_memory() -> Result<Connection, MemoryError> {
    let path = Path::new(":memory:");
    let conn = Connection::open_in_memory().map_err(sqlite(path, "opening it"))?;
    configure(&conn, path)?;
    migrate(conn, path)
}

fn configure(conn: &Connection, path: &Path) -> Result<(), MemoryError> {
    // NORMAL in WAL mode: a committed step survives any crash of the process (the WAL is in
    // the OS's hands once a commit returns); only a power loss can drop the last commits.
    // FULL would add an fsync to every step.
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
        .map_err(sqlite(path, "setting foreign keys and sync mode"))?;
    // Recall looks up every matching fact's row; with SQLite's default 2 MB page cache those
    // lookups went to the OS and a top-5 recall over 100 000 facts took 3.3 ms of SQL, with
    // a memory-mapped file and a larger cache 1.2 ms (measured on a 2-core VM). Both are
    // upper bounds, used only as the file grows.
    conn.execute_batch("PRAGMA cache_size = -65536; PRAGMA mmap_size = 268435456;")
        .map_err(sqlite(path, "sizing the page cache"))
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

fn migrate(mut conn: Connection, path: &Path) -> Result<Connection, MemoryError> {
    retry(path, "migrating the schema", || {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        let mut version = user_version(&tx)?;
        while version < SCHEMA_VERSION {
            let Some(sql) = usize::try_from(version)
                .ok()
                .and_then(|v| MIGRATIONS.get(v))
            else {
                break;
            };
            tx.execute_batch(sql)?;
            version += 1;
            tx.pragma_update(None, "user_version", version)?;
        }
        tx.commit()
    })?;
    let version = user_version(&conn).map_err(sqlite(path, "reading the schema version"))?;
    if version > SCHEMA_VERSION {
        return Err(MemoryError::SchemaTooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(conn)
}

fn refuse_foreign_tables(conn: &Connection, path: &Path) -> Result<(), MemoryError> {
    let names: Vec<String> = retry(path, "listing the tables", || {
        let mut stmt = conn.prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name",
        )?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    })?;
    let foreign: Vec<&String> = names
        .iter()
        .filter(|n| !OUR_TABLES.contains(&n.as_str()) && !n.starts_with("facts_fts"))
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    Err(MemoryError::ForeignDatabase {
        path: path.to_path_buf(),
        tables: foreign
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Refuses a non-empty file whose first 16 bytes are not SQLite's magic, without opening it
/// through SQLite (which could otherwise create a journal beside it).
fn check_header(path: &Path) -> Result<(), MemoryError> {
    use std::io::Read;
    const MAGIC: &[u8; 16] = b"SQLite format 3\0";
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(MemoryError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut head = Vec::with_capacity(16);
    file.by_ref()
        .take(16)
        .read_to_end(&mut head)
        .map_err(|source| MemoryError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if head.is_empty() || head == MAGIC {
        return Ok(());
    }
    Err(MemoryError::NotADatabase {
        path: path.to_path_buf(),
    })
}

/// Whether SQLite says another connection holds the lock.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Runs `f`, retrying with growing pauses while the file is busy, for up to [`RETRY_FOR`].
/// SQLite's own busy timeout covers most waits; this covers the cases where SQLite answers
/// "busy" without waiting (WAL recovery, a lock held across the whole timeout).
pub(crate) fn retry<T>(
    path: &Path,
    doing: &'static str,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> Result<T, MemoryError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if is_busy(&e) => {
                if start.elapsed() >= RETRY_FOR {
                    return Err(MemoryError::Busy {
                        path: path.to_path_buf(),
                        doing,
                        waited_s: start.elapsed().as_secs(),
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            Err(source) => {
                return Err(MemoryError::Sqlite {
                    path: path.to_path_buf(),
                    doing,
                    source,
                })
            }
        }
    }
}

/// Maps a SQLite error to [`MemoryError::Sqlite`] with what was being done.
pub(crate) fn sqlite(
    path: &Path,
    doing: &'static str,
) -> impl FnOnce(rusqlite::Error) -> MemoryError {
    let path = path.to_path_buf();
    move |source| MemoryError::Sqlite {
        path,
        doing,
        source,
    }
}
