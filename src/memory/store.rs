//! [`MemoryStore`]: sessions, turns and steps, short-term memory, and the inspection and
//! forgetting that `cairn memory` offers. Facts and recall are in `facts.rs`.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use super::schema::{self, retry};
use super::time::now;
use super::{
    Forgotten, MemoryError, MemoryItem, SessionId, SessionInfo, Step, StepId, StepRecord, Turn,
    TurnEnd, TurnId, TurnSummary,
};

/// The least room (in the caller's tokens) left after the turns shown in full for summaries
/// of older turns to be shown, or written.
pub const SUMMARY_ROOM: usize = 24;

/// How many earlier turns of a session short-term memory looks at, at most.
const PAST_TURNS_SCANNED: i64 = 64;

/// The memory file, open. One connection: use one store per thread (several stores, even in
/// several processes, may share one file).
#[derive(Debug)]
pub struct MemoryStore {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
}

impl MemoryStore {
    /// Opens the memory file at `path`, creating it (and its folder) if absent and migrating
    /// an older schema. Refuses, without changing a byte, a file that is not SQLite, an SQLite
    /// file with other tables, or a file from a newer cairn.
    pub fn open(path: &Path) -> Result<MemoryStore, MemoryError> {
        let conn = schema::open_file(path)?;
        Ok(MemoryStore {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// A private store that lives in memory only and vanishes when dropped (tests, or a run
    /// that must leave no trace).
    pub fn open_in_memory() -> Result<MemoryStore, MemoryError> {
        Ok(MemoryStore {
            conn: schema::open_memory()?,
            path: PathBuf::from(":memory:"),
        })
    }

    /// The file this store was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs one read or single-statement write, retrying while another process holds the lock.
    pub(crate) fn run<T>(
        &self,
        doing: &'static str,
        mut f: impl FnMut(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, MemoryError> {
        retry(&self.path, doing, || f(&self.conn))
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction (taking the write lock up front, so
    /// two writers never deadlock on an upgrade), retrying the whole of it while busy.
    pub(crate) fn write<T>(
        &self,
        doing: &'static str,
        mut f: impl FnMut(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, MemoryError> {
        retry(&self.path, doing, || {
            let tx =
                rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            let v = f(&tx)?;
            tx.commit()?;
            Ok(v)
        })
    }

    /// Creates a session named `name`; an error if one exists.
    pub fn create_session(&self, name: &str) -> Result<SessionId, MemoryError> {
        let name = check_name(name)?;
        let created = self.write("creating a session", |c| {
            let exists: Option<i64> = c
                .query_row("SELECT id FROM sessions WHERE name = ?1", [name], |r| {
                    r.get(0)
                })
                .optional()?;
            if exists.is_some() {
                return Ok(None);
            }
            c.execute(
                "INSERT INTO sessions(name, created_at) VALUES (?1, ?2)",
                params![name, now()],
            )?;
            Ok(Some(c.last_insert_rowid()))
        })?;
        created
            .map(SessionId)
            .ok_or_else(|| MemoryError::SessionExists(name.to_string()))
    }

    /// The session named `name`, created if it does not exist yet (`cairn chat --session S`).
    pub fn session(&self, name: &str) -> Result<SessionId, MemoryError> {
        let name = check_name(name)?;
        if let Some(id) = self.session_id(name)? {
            return Ok(id);
        }
        self.write("creating a session", |c| {
            c.execute(
                "INSERT INTO sessions(name, created_at) VALUES (?1, ?2) \
                 ON CONFLICT(name) DO NOTHING",
                params![name, now()],
            )?;
            c.query_row("SELECT id FROM sessions WHERE name = ?1", [name], |r| {
                r.get(0).map(SessionId)
            })
        })
    }

    fn session_id(&self, name: &str) -> Result<Option<SessionId>, MemoryError> {
        self.run("looking up a session", |c| {
            c.query_row("SELECT id FROM sessions WHERE name = ?1", [name], |r| {
                r.get(0).map(SessionId)
            })
            .optional()
        })
    }

    /// Finds a session by name, or by its numeric id when no session has that name; an error
    /// listing the known sessions when neither exists.
    pub fn find_session(&self, name_or_id: &str) -> Result<SessionInfo, MemoryError> {
        let by_name = self.session_id(name_or_id)?;
        let id = match by_name {
            Some(id) => Some(id),
            None => match name_or_id.trim().parse::<i64>() {
                Ok(n) => self.run("looking up a session", |c| {
                    c.query_row("SELECT id FROM sessions WHERE id = ?1", [n], |r| {
                        r.get(0).map(SessionId)
                    })
                    .optional()
                })?,
                Err(_) => None,
            },
        };
        let found = match id {
            Some(id) => self.sessions()?.into_iter().find(|s| s.id == id),
            None => None,
        };
        match found {
            Some(s) => Ok(s),
            None => {
                let names: Vec<String> = self
                    .sessions()?
                    .into_iter()
                    .take(10)
                    .map(|s| s.name)
                    .collect();
                Err(MemoryError::UnknownSession {
                    name: name_or_id.to_string(),
                    path: self.path.clone(),
                    known: if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    },
                })
            }
        }
    }

    /// Every session with its counts, most recently active first.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>, MemoryError> {
        self.run("listing sessions", |c| {
            let mut stmt = c.prepare_cached(
                "SELECT s.id, s.name, s.created_at, \
                    COALESCE((SELECT MAX(started_at) FROM turns WHERE session_id = s.id), s.created_at), \
                    (SELECT COUNT(*) FROM turns WHERE session_id = s.id), \
                    (SELECT COUNT(*) FROM steps JOIN turns t ON t.id = steps.turn_id WHERE t.session_id = s.id), \
                    (SELECT COUNT(*) FROM facts WHERE session_id = s.id) \
                 FROM sessions s ORDER BY 4 DESC, s.id DESC",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(SessionInfo {
                    id: SessionId(r.get(0)?),
                    name: r.get(1)?,
                    created_at: r.get(2)?,
                    last_active_at: r.get(3)?,
                    turns: r.get(4)?,
                    steps: r.get(5)?,
                    facts: r.get(6)?,
                })
            })?;
            rows.collect()
        })
    }

    /// Starts a turn of `session` for the user's `task`.
    pub fn begin_turn(&self, session: SessionId, task: &str) -> Result<TurnId, MemoryError> {
        self.run("starting a turn", |c| {
            c.prepare_cached("INSERT INTO turns(session_id, task, started_at) VALUES (?1, ?2, ?3)")?
                .insert(params![session.0, task, now()])
                .map(TurnId)
        })
        .map_err(|e| on_missing_parent(e, MemoryError::UnknownSessionId(session.0)))
    }

    /// Records one step of `turn`, committed before this returns: a crash afterwards cannot
    /// lose it.
    pub fn record_step(&self, turn: TurnId, step: &StepRecord) -> Result<StepId, MemoryError> {
        self.run("recording a step", |c| {
            c.prepare_cached(
                "INSERT INTO steps(turn_id, round, thought, action, args_json, observation, \
                 outcome, error_class, latency_ms, prompt_tokens, generated_tokens, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?
            .insert(params![
                turn.0,
                step.round,
                step.thought,
                step.action,
                step.args_json,
                step.observation,
                step.outcome,
                step.error_class,
                step.latency_ms,
                step.prompt_tokens,
                step.generated_tokens,
                now()
            ])
            .map(StepId)
        })
        .map_err(|e| on_missing_parent(e, MemoryError::UnknownTurn(turn.0)))
    }

    /// Ends `turn` with its answer, stop reason and totals.
    pub fn finish_turn(&self, turn: TurnId, end: &TurnEnd) -> Result<(), MemoryError> {
        let changed = self.run("finishing a turn", |c| {
            c.prepare_cached(
                "UPDATE turns SET finished_at = ?2, answer = ?3, stop_reason = ?4, \
                 latency_ms = ?5, prompt_tokens = ?6, generated_tokens = ?7 WHERE id = ?1",
            )?
            .execute(params![
                turn.0,
                now(),
                end.answer,
                end.stop_reason,
                end.latency_ms,
                end.prompt_tokens,
                end.generated_tokens
            ])
        })?;
        if changed == 0 {
            return Err(MemoryError::UnknownTurn(turn.0));
        }
        Ok(())
    }

    /// The turns of `session`, oldest first.
    pub fn turns(&self, session: SessionId) -> Result<Vec<Turn>, MemoryError> {
        self.run("reading turns", |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ?1 ORDER BY id"
            ))?;
            let rows = stmt.query_map([session.0], turn_from_row)?;
            rows.collect()
        })
    }

    /// The turn `turn`.
    pub fn turn(&self, turn: TurnId) -> Result<Turn, MemoryError> {
        self.run("reading a turn", |c| {
            c.prepare_cached(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ?1"))?
                .query_row([turn.0], turn_from_row)
                .optional()
        })?
        .ok_or(MemoryError::UnknownTurn(turn.0))
    }

    /// The steps of `turn`, in order.
    pub fn steps(&self, turn: TurnId) -> Result<Vec<Step>, MemoryError> {
        self.run("reading steps", |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {STEP_COLUMNS} FROM steps WHERE turn_id = ?1 ORDER BY id"
            ))?;
            let rows = stmt.query_map([turn.0], step_from_row)?;
            rows.collect()
        })
    }

    /// Short-term memory for a prompt: the steps of `current_turn` and the session's earlier
    /// finished turns, chosen newest first while their text (as [`MemoryItem::text`], measured
    /// by `count_tokens`) fits in `budget_tokens`, and returned oldest first. Earlier turns
    /// come in full (task and answer) while they fit; from the first that does not, each comes
    /// by its summary ([`MemoryStore::set_summary`]) while the summaries fit. The first item
    /// that does not fit (or a turn past the full ones with no summary yet) ends the
    /// selection, so what is returned is always the most recent stretch, and a step is never
    /// split. Summaries are shown only when at least [`SUMMARY_ROOM`] tokens are left for
    /// them. `current_turn` must belong to `session`: steps never cross sessions, and earlier
    /// turns contribute only their task and answer, or their summary.
    pub fn short_term(
        &self,
        session: SessionId,
        current_turn: TurnId,
        budget_tokens: usize,
        count_tokens: &dyn Fn(&str) -> usize,
    ) -> Result<Vec<MemoryItem>, MemoryError> {
        self.short_term_reserving(session, current_turn, budget_tokens, 0, count_tokens)
    }

    /// [`MemoryStore::short_term`] with `reserve` tokens of the budget kept from the earlier
    /// turns shown in full, for the summaries of older ones: without it the newest turns can
    /// take the whole budget and no summary is ever shown.
    pub fn short_term_reserving(
        &self,
        session: SessionId,
        current_turn: TurnId,
        budget_tokens: usize,
        reserve: usize,
        count_tokens: &dyn Fn(&str) -> usize,
    ) -> Result<Vec<MemoryItem>, MemoryError> {
        Ok(self
            .walk(session, current_turn, budget_tokens, reserve, count_tokens)?
            .0)
    }

    /// The earlier turns that [`MemoryStore::short_term_reserving`] would show by their
    /// summary if they had one, newest first, at most `max`: the turns to summarise before a
    /// prompt is made.
    pub fn turns_to_summarise(
        &self,
        session: SessionId,
        current_turn: TurnId,
        budget_tokens: usize,
        reserve: usize,
        count_tokens: &dyn Fn(&str) -> usize,
        max: usize,
    ) -> Result<Vec<Turn>, MemoryError> {
        let pending = self
            .walk(session, current_turn, budget_tokens, reserve, count_tokens)?
            .1;
        pending
            .into_iter()
            .take(max)
            .map(|t| self.turn(t))
            .collect()
    }

    /// Keeps `summary` as the summary of `turn` (replacing an earlier one).
    pub fn set_summary(&self, turn: TurnId, summary: &TurnSummary) -> Result<(), MemoryError> {
        let json = serde_json::to_string(summary).unwrap_or_default();
        let changed = self.write("keeping a turn's summary", |c| {
            c.execute(
                "UPDATE turns SET summary = ?1 WHERE id = ?2",
                params![json, turn.0],
            )
        })?;
        if changed == 0 {
            return Err(MemoryError::UnknownTurn(turn.0));
        }
        Ok(())
    }

    /// The summary of `turn`, if one was kept (a summary that no longer reads as one counts
    /// as none: it is written again).
    pub fn summary(&self, turn: TurnId) -> Result<Option<TurnSummary>, MemoryError> {
        let text: Option<String> = self.run("reading a turn's summary", |c| {
            c.query_row("SELECT summary FROM turns WHERE id = ?1", [turn.0], |r| {
                r.get(0)
            })
            .optional()
            .map(Option::flatten)
        })?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// [`MemoryStore::short_term`]'s selection, and the turns it stopped at for want of a
    /// summary (newest first: the one that ended the selection, then the older ones without
    /// one).
    fn walk(
        &self,
        session: SessionId,
        current_turn: TurnId,
        budget_tokens: usize,
        reserve: usize,
        count_tokens: &dyn Fn(&str) -> usize,
    ) -> Result<(Vec<MemoryItem>, Vec<TurnId>), MemoryError> {
        let turn = self.turn(current_turn)?;
        if turn.session != session {
            return Err(MemoryError::TurnNotInSession {
                turn: current_turn.0,
                session: session.0,
            });
        }
        let steps = self.steps(current_turn)?;
        type Past = (TurnId, usize, String, String, Option<String>);
        let past: Vec<Past> = self.run("reading recent turns", |c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, (SELECT COUNT(*) FROM turns AS e \
                             WHERE e.session_id = turns.session_id AND e.id <= turns.id), \
                        task, answer, summary FROM turns \
                 WHERE session_id = ?1 AND id < ?2 AND answer IS NOT NULL \
                 ORDER BY id DESC LIMIT ?3",
            )?;
            let rows = stmt.query_map(
                params![session.0, current_turn.0, PAST_TURNS_SCANNED],
                |r| {
                    Ok((
                        TurnId(r.get(0)?),
                        r.get::<_, i64>(1)?.max(1) as usize,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                    ))
                },
            )?;
            rows.collect()
        })?;
        let mut chosen = Vec::new();
        let mut used = 0usize;
        let fits = |item: &MemoryItem, used: &mut usize| {
            let cost = count_tokens(&item.text());
            if used.saturating_add(cost) > budget_tokens {
                return false;
            }
            *used += cost;
            true
        };
        for step in steps.into_iter().rev() {
            let item = MemoryItem::Step(step);
            if !fits(&item, &mut used) {
                chosen.reverse();
                return Ok((chosen, Vec::new()));
            }
            chosen.push(item);
        }
        let mut in_full = true;
        let mut pending = Vec::new();
        for (turn, number, task, answer, summary) in past {
            if in_full {
                let item = MemoryItem::PastTurn {
                    turn,
                    number,
                    task,
                    answer,
                };
                let cost = count_tokens(&item.text());
                if used.saturating_add(cost).saturating_add(reserve) <= budget_tokens {
                    used += cost;
                    chosen.push(item);
                    continue;
                }
                in_full = false;
                if budget_tokens.saturating_sub(used) < SUMMARY_ROOM {
                    // No room for even one summary: none is worth writing.
                    break;
                }
            }
            if !pending.is_empty() {
                // Older than a turn with no summary: shown only once that one has one.
                if summary.is_none() {
                    pending.push(turn);
                }
                continue;
            }
            match summary.and_then(|t| serde_json::from_str::<TurnSummary>(&t).ok()) {
                Some(summary) => {
                    let item = MemoryItem::TurnSummary {
                        turn,
                        number,
                        summary,
                    };
                    if !fits(&item, &mut used) {
                        break;
                    }
                    chosen.push(item);
                }
                None => pending.push(turn),
            }
        }
        chosen.reverse();
        Ok((chosen, pending))
    }

    /// Deletes a session with its turns, steps and facts, including global facts that were
    /// learned from its steps.
    pub fn forget_session(&self, session: SessionId) -> Result<Forgotten, MemoryError> {
        self.write("forgetting a session", |c| {
            let counts = c.query_row(
                "SELECT (SELECT COUNT(*) FROM turns WHERE session_id = ?1), \
                    (SELECT COUNT(*) FROM steps JOIN turns t ON t.id = steps.turn_id WHERE t.session_id = ?1), \
                    (SELECT COUNT(*) FROM facts WHERE session_id = ?1 OR source_step IN \
                        (SELECT steps.id FROM steps JOIN turns t ON t.id = steps.turn_id \
                         WHERE t.session_id = ?1))",
                [session.0],
                |r| {
                    Ok(Forgotten {
                        turns: r.get(0)?,
                        steps: r.get(1)?,
                        facts: r.get(2)?,
                    })
                },
            )?;
            // Global facts learned from this session's steps go too: forgetting a session
            // means forgetting what it taught.
            c.execute(
                "DELETE FROM facts WHERE source_step IN (SELECT steps.id FROM steps \
                 JOIN turns t ON t.id = steps.turn_id WHERE t.session_id = ?1)",
                [session.0],
            )?;
            c.execute("DELETE FROM sessions WHERE id = ?1", [session.0])?;
            Ok(counts)
        })
    }

    /// `PRAGMA integrity_check` plus FTS5's own check: `ok`, or what is wrong.
    pub fn integrity_check(&self) -> Result<String, MemoryError> {
        self.run("checking integrity", |c| {
            let mut stmt = c.prepare("PRAGMA integrity_check")?;
            let lines: Vec<String> = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()?;
            let verdict = lines.join("\n");
            if verdict != "ok" {
                return Ok(verdict);
            }
            match c.execute(
                "INSERT INTO facts_fts(facts_fts) VALUES ('integrity-check')",
                [],
            ) {
                Ok(_) => Ok(verdict),
                Err(e) if schema::is_busy(&e) => Err(e),
                Err(e) => Ok(format!("the facts index is damaged: {e}")),
            }
        })
    }
}

/// A foreign-key failure on insert means the parent row is missing: say which.
fn on_missing_parent(e: MemoryError, missing: MemoryError) -> MemoryError {
    match &e {
        MemoryError::Sqlite { source, .. }
            if source.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) =>
        {
            missing
        }
        _ => e,
    }
}

fn check_name(name: &str) -> Result<&str, MemoryError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(MemoryError::BadSessionName(name.to_string()));
    }
    Ok(trimmed)
}

const TURN_COLUMNS: &str = "id, session_id, task, started_at, finished_at, answer, stop_reason, \
     latency_ms, prompt_tokens, generated_tokens";

fn turn_from_row(r: &Row<'_>) -> rusqlite::Result<Turn> {
    let answer: Option<String> = r.get(5)?;
    let end = match answer {
        Some(answer) => Some(TurnEnd {
            answer,
            stop_reason: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
            latency_ms: r.get::<_, Option<i64>>(7)?.unwrap_or(0),
            prompt_tokens: r.get::<_, Option<i64>>(8)?.unwrap_or(0),
            generated_tokens: r.get::<_, Option<i64>>(9)?.unwrap_or(0),
        }),
        None => None,
    };
    Ok(Turn {
        id: TurnId(r.get(0)?),
        session: SessionId(r.get(1)?),
        task: r.get(2)?,
        started_at: r.get(3)?,
        finished_at: r.get(4)?,
        end,
    })
}

const STEP_COLUMNS: &str = "id, turn_id, created_at, round, thought, action, args_json, \
     observation, outcome, error_class, latency_ms, prompt_tokens, generated_tokens";

fn step_from_row(r: &Row<'_>) -> rusqlite::Result<Step> {
    Ok(Step {
        id: StepId(r.get(0)?),
        turn: TurnId(r.get(1)?),
        created_at: r.get(2)?,
        record: StepRecord {
            round: r.get(3)?,
            thought: r.get(4)?,
            action: r.get(5)?,
            args_json: r.get(6)?,
            observation: r.get(7)?,
            outcome: r.get(8)?,
            error_class: r.get(9)?,
            latency_ms: r.get(10)?,
            prompt_tokens: r.get(11)?,
            generated_tokens: r.get(12)?,
        },
    })
}
