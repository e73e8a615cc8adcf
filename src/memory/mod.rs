//! The agent's memory: one SQLite file holding sessions, their turns (a task and its answer),
//! the steps of each turn (thought, action, observation, timings), and long-term facts with a
//! full-text index.
//!
//! [`MemoryStore`] is the whole API. The agent loop opens it once ([`MemoryStore::open`]),
//! finds its session ([`MemoryStore::session`]), starts a turn ([`MemoryStore::begin_turn`]),
//! records each step as soon as it ends ([`MemoryStore::record_step`], committed at once, so a
//! crash loses at most the step in flight), and ends the turn ([`MemoryStore::finish_turn`]).
//! While building a prompt it asks for short-term memory ([`MemoryStore::short_term`]: this
//! turn's steps and the session's recent turns, newest first, within a token budget) and for
//! long-term memory ([`MemoryStore::recall`]: facts ranked by BM25 times `decay^(age_hours)`).
//! Facts are written with [`MemoryStore::add_fact`]; [`extract_facts`] picks the sentences or
//! table rows of an answer or observation that are worth keeping.
//!
//! Scope is the point of the design: steps are never read across sessions (the previous
//! task's SQL must not leak into another session's prompt), and a fact is visible only to
//! the session that wrote it unless it was stored as [`FactScope::Global`].
//!
//! The file runs in WAL mode with foreign keys on; its schema version lives in
//! `PRAGMA user_version` and is migrated forward on open. Several processes may write the same
//! file (`cairn batch --jobs N`): every write waits for the lock and retries, so "database is
//! locked" never reaches the user. A file that is not SQLite, or comes from a newer cairn, is
//! refused with a clear error and left untouched.

mod facts;
mod schema;
mod store;
mod time;

use std::path::PathBuf;

use serde::Serialize;

pub use facts::{extract_facts, fts_query};
pub use schema::SCHEMA_VERSION;
pub use store::MemoryStore;
pub use time::format_utc;

/// The default decay of a fact's score per hour of age (`score = bm25 × decay^age_hours`).
pub const DEFAULT_DECAY: f64 = 0.9;

/// What can go wrong with the memory file. Every message names the file or value at fault and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The file exists but is not an SQLite database.
    #[error(
        "{} is not a cairn memory file: it is not an SQLite database (its first bytes are not \
         `SQLite format 3`); it was left untouched. Pass another file with --memory FILE or \
         CAIRN_MEMORY",
        path.display()
    )]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The file is an SQLite database holding someone else's tables.
    #[error(
        "{} is an SQLite database but not a cairn memory file (it has the tables {tables}); \
         it was left untouched. Pass another file with --memory FILE or CAIRN_MEMORY",
        path.display()
    )]
    ForeignDatabase {
        /// The file.
        path: PathBuf,
        /// Its tables, comma-separated.
        tables: String,
    },
    /// The file was written by a newer cairn.
    #[error(
        "{} has memory schema version {found}, but this cairn reads versions up to {supported}; \
         use a newer cairn, or pass another file with --memory FILE",
        path.display()
    )]
    SchemaTooNew {
        /// The file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The folder for the file cannot be created.
    #[error("cannot create the folder {} for the memory file: {source}", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file cannot be read to check what it is.
    #[error("cannot read the memory file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Other writers held the lock for longer than cairn waits.
    #[error(
        "the memory file {} stayed locked by another process for {waited_s} s while {doing}; \
         is another cairn stuck? Try again, or pass another file with --memory FILE",
        path.display()
    )]
    Busy {
        /// The file.
        path: PathBuf,
        /// What cairn was doing.
        doing: &'static str,
        /// How long it waited, in seconds.
        waited_s: u64,
    },
    /// No session has this name (or id).
    #[error("no session named `{name}` in {}; known sessions: {known} (`cairn memory sessions` lists them)", path.display())]
    UnknownSession {
        /// The name asked for.
        name: String,
        /// The file.
        path: PathBuf,
        /// Up to ten known names, comma-separated, or `none`.
        known: String,
    },
    /// A session with this name already exists.
    #[error("a session named `{0}` already exists; pick another name or use it as it is")]
    SessionExists(String),
    /// No session has this id.
    #[error("no session with id {0} in the memory file; get ids from MemoryStore::session")]
    UnknownSessionId(i64),
    /// A session name that cannot be used.
    #[error("the session name `{0}` is empty or only spaces; give a name with letters or digits")]
    BadSessionName(String),
    /// No turn has this id.
    #[error("no turn with id {0} in the memory file")]
    UnknownTurn(i64),
    /// The turn exists but belongs to another session.
    #[error("turn {turn} belongs to another session than {session}; a session never reads another session's steps")]
    TurnNotInSession {
        /// The turn.
        turn: i64,
        /// The session asked for.
        session: i64,
    },
    /// No fact has this id.
    #[error("no fact with id {0} (`cairn memory search QUERY` shows fact ids)")]
    UnknownFact(i64),
    /// A fact with no text.
    #[error("a fact's text is empty or only spaces; there is nothing to remember")]
    EmptyFact,
    /// A decay outside (0, 1].
    #[error("the memory decay is {0}, but it must be above 0 and at most 1 (1 = no decay; default 0.9 per hour)")]
    BadDecay(f64),
    /// Any other SQLite failure, with what cairn was doing (and, for a damaged or incomplete
    /// file, what to do about it).
    #[error("memory file {}: {doing}: {source}{}", path.display(), damage_advice(source))]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What cairn was doing.
        doing: &'static str,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

/// What to do when SQLite's error says the memory file is damaged or lacks cairn's tables
/// (empty for other errors).
fn damage_advice(e: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode;
    let damaged = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => true,
        _ => {
            let text = e.to_string();
            text.contains("no such table") || text.contains("no such column")
        }
    };
    if damaged {
        " (the file is damaged or is not a complete cairn memory file; it was left as it is: \
         move it away to start a new memory, or pass another file with --memory FILE or \
         CAIRN_MEMORY)"
    } else {
        ""
    }
}

/// A session's id in the memory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SessionId(pub i64);

/// A turn's id (one task and its answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TurnId(pub i64);

/// A step's id (one round of a turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct StepId(pub i64);

/// A fact's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FactId(pub i64);

/// A session with its counts, as `cairn memory sessions` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    /// Its id.
    pub id: SessionId,
    /// Its name.
    pub name: String,
    /// When it was created, in seconds since the Unix epoch.
    pub created_at: f64,
    /// When its last turn began (its creation when it has none), seconds since the epoch.
    pub last_active_at: f64,
    /// How many turns it has.
    pub turns: i64,
    /// How many steps its turns have.
    pub steps: i64,
    /// How many facts are scoped to it.
    pub facts: i64,
}

/// What the agent records about one step, the moment the step ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepRecord {
    /// The round number within the turn (1 for the first).
    pub round: i64,
    /// The model's thought.
    pub thought: String,
    /// The action (tool) name, `final_answer` included.
    pub action: String,
    /// The action's arguments as JSON text.
    pub args_json: String,
    /// What the tool returned (or the error shown to the model).
    pub observation: String,
    /// How the step ended, e.g. `ok` or `error`.
    pub outcome: String,
    /// The error class when it failed (`transient`, `invalid_input`, `timeout`, `fatal`).
    pub error_class: Option<String>,
    /// Wall time of the step in milliseconds.
    pub latency_ms: i64,
    /// Prompt tokens fed for this step.
    pub prompt_tokens: i64,
    /// Tokens generated for this step.
    pub generated_tokens: i64,
}

/// A recorded step, as read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Its id.
    pub id: StepId,
    /// The turn it belongs to.
    pub turn: TurnId,
    /// When it was recorded, in seconds since the Unix epoch.
    pub created_at: f64,
    /// What was recorded.
    #[serde(flatten)]
    pub record: StepRecord,
}

/// How a turn ended, as the agent reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TurnEnd {
    /// The final answer given to the user.
    pub answer: String,
    /// Why the loop stopped (`final_answer`, `max_rounds`, `circuit_open`, ...).
    pub stop_reason: String,
    /// Wall time of the whole turn in milliseconds.
    pub latency_ms: i64,
    /// Prompt tokens fed over the turn.
    pub prompt_tokens: i64,
    /// Tokens generated over the turn.
    pub generated_tokens: i64,
}

/// A turn: one task, and how it ended once it has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// Its id.
    pub id: TurnId,
    /// Its session.
    pub session: SessionId,
    /// The user's task.
    pub task: String,
    /// When it began, in seconds since the Unix epoch.
    pub started_at: f64,
    /// When it ended; `None` while running or when the process died mid-turn.
    pub finished_at: Option<f64>,
    /// How it ended; `None` until [`MemoryStore::finish_turn`].
    pub end: Option<TurnEnd>,
}

/// Where a fact is visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FactScope {
    /// Only to this session.
    Session(SessionId),
    /// To every session.
    Global,
}

/// A long-term fact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    /// Its id.
    pub id: FactId,
    /// The text.
    pub text: String,
    /// Who can see it.
    pub scope: FactScope,
    /// The step it came from, if any.
    pub source_step: Option<StepId>,
    /// When it was stored, in seconds since the Unix epoch.
    pub created_at: f64,
    /// When [`MemoryStore::recall`] last returned it.
    pub last_used_at: Option<f64>,
    /// How many times [`MemoryStore::recall`] returned it.
    pub hits: i64,
}

/// A fact to store; [`MemoryStore::add_facts`] takes many at once.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFact {
    /// The text (stored trimmed; empty text is skipped).
    pub text: String,
    /// Who can see it.
    pub scope: FactScope,
    /// The step it came from, if any.
    pub source_step: Option<StepId>,
    /// When it was learned; `None` means now. Set it to import old facts (or in tests).
    pub created_at: Option<std::time::SystemTime>,
}

/// A fact returned by [`MemoryStore::recall`] with how it ranked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredFact {
    /// The fact.
    pub fact: Fact,
    /// BM25 relevance to the query (higher is better).
    pub relevance: f64,
    /// `relevance × decay^(age_hours)`, what the ranking uses.
    pub score: f64,
}

/// One item of short-term memory. [`MemoryItem::text`] is what the caller's token counter is
/// applied to, so a prompt built from it fits the budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum MemoryItem {
    /// An earlier finished turn of the same session: its task and answer (never its steps).
    PastTurn {
        /// The turn.
        turn: TurnId,
        /// Its place in the session: 1 for the session's first turn.
        number: usize,
        /// Its task.
        task: String,
        /// Its answer.
        answer: String,
    },
    /// An earlier finished turn of the same session that no longer fits in full, by its
    /// summary ([`MemoryStore::set_summary`]).
    TurnSummary {
        /// The turn.
        turn: TurnId,
        /// Its place in the session: 1 for the session's first turn.
        number: usize,
        /// Its summary.
        summary: TurnSummary,
    },
    /// A step of the current turn.
    Step(Step),
}

/// A finished turn in short: what was asked, what the tools found that a later question may
/// need, and the answer. Written by the model under a JSON schema when the turn no longer fits
/// in full in its session's prompts, and kept in the memory file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TurnSummary {
    /// The question, in short.
    pub asked: String,
    /// What the tools found that a later question could need (names, ids, numbers).
    pub found: String,
    /// The answer, in short.
    pub answer: String,
}

impl TurnSummary {
    /// The summary as one line of prompt text.
    pub fn line(&self) -> String {
        let mut s = format!("Asked: {}", self.asked.trim());
        if !self.found.trim().is_empty() {
            s.push_str(&format!(" | Found: {}", self.found.trim()));
        }
        s.push_str(&format!(" | Answer: {}", self.answer.trim()));
        s.replace('\n', " ")
    }
}

impl MemoryItem {
    /// The item as prompt text; the token budget is counted on this.
    pub fn text(&self) -> String {
        match self {
            MemoryItem::PastTurn { task, answer, .. } => {
                format!("Earlier task: {task}\nAnswer: {answer}")
            }
            MemoryItem::TurnSummary { summary, .. } => {
                format!("Earlier task (summary): {}", summary.line())
            }
            MemoryItem::Step(s) => {
                let r = &s.record;
                let mut t = format!("Round {}: {} {}", r.round, r.action, r.args_json);
                if !r.thought.is_empty() {
                    t.push_str(&format!("\nThought: {}", r.thought));
                }
                t.push_str(&format!("\nObservation: {}", r.observation));
                t
            }
        }
    }
}

/// What [`MemoryStore::forget_session`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Forgotten {
    /// Turns removed.
    pub turns: i64,
    /// Steps removed.
    pub steps: i64,
    /// Facts removed (those scoped to the session or learned from its steps).
    pub facts: i64,
}
