//! Long-term facts: storing them with a scope, ranking them for a task by FTS5 BM25 times a
//! time decay, turning free text into a safe FTS5 query, and picking the sentences or table
//! rows of an answer or observation that are worth keeping ([`extract_facts`]).

use std::collections::HashSet;
use std::time::SystemTime;

use rusqlite::{params, OptionalExtension, Row};

use super::store::MemoryStore;
use super::time::{now, unix};
use super::{Fact, FactId, FactScope, MemoryError, NewFact, ScoredFact, SessionId, StepId};

/// At most this many query terms reach FTS5; a longer task keeps its first distinct words.
const MAX_QUERY_TERMS: usize = 24;
/// A kept sentence or row is cut to this many characters.
const MAX_FACT_CHARS: usize = 400;
/// [`extract_facts`] keeps at most this many units.
const MAX_EXTRACTED: usize = 3;

/// Which facts a ranking looks at.
#[derive(Clone, Copy)]
enum Visible {
    /// A session's own facts and the global ones.
    To(SessionId),
    /// Every fact (inspection with `cairn memory search`).
    All,
}

impl MemoryStore {
    /// Stores one fact and returns its id. The same text in the same scope is stored once:
    /// adding it again returns the existing id.
    pub fn add_fact(
        &self,
        text: &str,
        scope: FactScope,
        source_step: Option<StepId>,
    ) -> Result<FactId, MemoryError> {
        let fact = NewFact {
            text: text.to_string(),
            scope,
            source_step,
            created_at: None,
        };
        let ids = self.add_facts(std::slice::from_ref(&fact))?;
        ids.into_iter().next().ok_or(MemoryError::EmptyFact)
    }

    /// Stores many facts in one transaction (empty texts are skipped) and returns their ids in
    /// order; a text already stored in the same scope returns the existing id.
    pub fn add_facts(&self, facts: &[NewFact]) -> Result<Vec<FactId>, MemoryError> {
        let t_now = now();
        self.write("storing facts", |c| {
            let mut find = c.prepare_cached(
                "SELECT id FROM facts WHERE session_id IS ?1 AND text = ?2 LIMIT 1",
            )?;
            let mut insert = c.prepare_cached(
                "INSERT INTO facts(text, session_id, source_step, created_at) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?;
            let mut ids = Vec::with_capacity(facts.len());
            for f in facts {
                let text = f.text.trim();
                if text.is_empty() {
                    continue;
                }
                let session = scope_column(f.scope);
                let existing: Option<i64> = find
                    .query_row(params![session, text], |r| r.get(0))
                    .optional()?;
                let id = match existing {
                    Some(id) => id,
                    None => insert.insert(params![
                        text,
                        session,
                        f.source_step.map(|s| s.0),
                        f.created_at.map_or(t_now, unix)
                    ])?,
                };
                ids.push(FactId(id));
            }
            Ok(ids)
        })
    }

    /// Sets when a fact was learned (to import old facts, or to test the decay).
    pub fn set_fact_created(&self, fact: FactId, created: SystemTime) -> Result<(), MemoryError> {
        let n = self.run("dating a fact", |c| {
            c.execute(
                "UPDATE facts SET created_at = ?2 WHERE id = ?1",
                params![fact.0, unix(created)],
            )
        })?;
        if n == 0 {
            return Err(MemoryError::UnknownFact(fact.0));
        }
        Ok(())
    }

    /// The fact `fact`.
    pub fn fact(&self, fact: FactId) -> Result<Fact, MemoryError> {
        self.run("reading a fact", |c| {
            c.prepare_cached(&format!("SELECT {FACT_COLUMNS} FROM facts WHERE id = ?1"))?
                .query_row([fact.0], fact_from_row)
                .optional()
        })?
        .ok_or(MemoryError::UnknownFact(fact.0))
    }

    /// The facts scoped to `session` (not the global ones), oldest first.
    pub fn session_facts(&self, session: SessionId) -> Result<Vec<Fact>, MemoryError> {
        self.run("reading facts", |c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {FACT_COLUMNS} FROM facts WHERE session_id = ?1 ORDER BY id"
            ))?;
            let rows = stmt.query_map([session.0], fact_from_row)?;
            rows.collect()
        })
    }

    /// Long-term memory for a task: the `k` facts visible to `session` (its own and the global
    /// ones) that rank highest by BM25 relevance to `query` times `decay^(age_hours)`. Any text
    /// is a valid query (see [`fts_query`]); one with no searchable word returns nothing. The
    /// returned facts are marked used (last used time, hit count).
    pub fn recall(
        &self,
        session: SessionId,
        query: &str,
        k: usize,
        decay: f64,
    ) -> Result<Vec<ScoredFact>, MemoryError> {
        let found = self.rank(Visible::To(session), query, k, decay)?;
        if !found.is_empty() {
            let t_now = now();
            self.write("marking facts used", |c| {
                let mut stmt = c.prepare_cached(
                    "UPDATE facts SET last_used_at = ?2, hits = hits + 1 WHERE id = ?1",
                )?;
                for f in &found {
                    stmt.execute(params![f.fact.id.0, t_now])?;
                }
                Ok(())
            })?;
        }
        Ok(found)
    }

    /// Like [`MemoryStore::recall`] but over every session's facts, and without marking them
    /// used: what `cairn memory search` shows.
    pub fn search_facts(
        &self,
        query: &str,
        k: usize,
        decay: f64,
    ) -> Result<Vec<ScoredFact>, MemoryError> {
        self.rank(Visible::All, query, k, decay)
    }

    /// Deletes one fact.
    pub fn forget_fact(&self, fact: FactId) -> Result<(), MemoryError> {
        let n = self.write("forgetting a fact", |c| {
            c.execute("DELETE FROM facts WHERE id = ?1", [fact.0])
        })?;
        if n == 0 {
            return Err(MemoryError::UnknownFact(fact.0));
        }
        Ok(())
    }

    fn rank(
        &self,
        visible: Visible,
        query: &str,
        k: usize,
        decay: f64,
    ) -> Result<Vec<ScoredFact>, MemoryError> {
        if !(decay > 0.0 && decay <= 1.0) {
            return Err(MemoryError::BadDecay(decay));
        }
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        if k == 0 {
            return Ok(Vec::new());
        }
        let t_now = now();
        let ln_decay = decay.ln();
        let score = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, f64, f64)> {
            let relevance: f64 = r.get(1)?;
            let created: f64 = r.get(2)?;
            let age_hours = ((t_now - created) / 3600.0).max(0.0);
            // Ranked in log space: decay^age underflows to 0 for facts a few months old,
            // which would make every old fact tie.
            let log_score = relevance.max(1e-12).ln() + age_hours * ln_decay;
            Ok((r.get(0)?, relevance, log_score))
        };
        // Only ids, BM25 and age for every match; the full rows for the winners only.
        const MATCHES: &str = "SELECT f.id, -bm25(facts_fts), f.created_at \
             FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid WHERE facts_fts MATCH ?1";
        let mut candidates: Vec<(i64, f64, f64)> =
            self.run("searching facts", |c| match visible {
                Visible::To(s) => c
                    .prepare_cached(&format!(
                        "{MATCHES} AND (f.session_id IS NULL OR f.session_id = ?2)"
                    ))?
                    .query_map(params![fts, s.0], score)?
                    .collect(),
                Visible::All => c
                    .prepare_cached(MATCHES)?
                    .query_map(params![fts], score)?
                    .collect(),
            })?;
        candidates.sort_by(|a, b| b.2.total_cmp(&a.2).then(b.0.cmp(&a.0)));
        candidates.truncate(k);
        let mut out = Vec::with_capacity(candidates.len());
        for (id, relevance, log_score) in candidates {
            out.push(ScoredFact {
                fact: self.fact(FactId(id))?,
                relevance,
                score: log_score.exp(),
            });
        }
        Ok(out)
    }
}

fn scope_column(scope: FactScope) -> Option<i64> {
    match scope {
        FactScope::Session(s) => Some(s.0),
        FactScope::Global => None,
    }
}

const FACT_COLUMNS: &str = "id, text, session_id, source_step, created_at, last_used_at, hits";

fn fact_from_row(r: &Row<'_>) -> rusqlite::Result<Fact> {
    let session: Option<i64> = r.get(2)?;
    Ok(Fact {
        id: FactId(r.get(0)?),
        text: r.get(1)?,
        scope: session.map_or(FactScope::Global, |s| FactScope::Session(SessionId(s))),
        source_step: r.get::<_, Option<i64>>(3)?.map(StepId),
        created_at: r.get(4)?,
        last_used_at: r.get(5)?,
        hits: r.get(6)?,
    })
}

/// The lower-cased words of `text` (letters and digits, as FTS5's `unicode61` splits them).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
}

/// Turns free text into an FTS5 query that can never be a syntax error: each distinct word
/// is quoted (so `AND`, `NEAR`, `*`, `"`, `:`, `-` and parentheses are just text) and the
/// words are joined with `OR`, letting BM25 favour facts that share more of them. Common
/// words are dropped unless nothing else is left. `None` when the text has no word at all.
pub fn fts_query(text: &str) -> Option<String> {
    let mut seen = HashSet::new();
    let all: Vec<String> = words(text).filter(|w| seen.insert(w.clone())).collect();
    let content: Vec<&String> = all
        .iter()
        .filter(|w| !crate::index::STOPWORDS.contains(&w.as_str()))
        .collect();
    let chosen: Vec<&String> = if content.is_empty() {
        all.iter().collect()
    } else {
        content
    };
    if chosen.is_empty() {
        return None;
    }
    Some(
        chosen
            .into_iter()
            .take(MAX_QUERY_TERMS)
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// Picks what is worth remembering from `text` (a final answer or a successful observation)
/// for `task`: the sentences or table rows that share the most words with the task, at most
/// three, in their original order. A table row is written with its column names
/// (`year: 2023, revenue: 1200`). A short text with a single sentence or row is kept whole,
/// and so is a result of at most three rows, since that is what answered. A unit that does not
/// mention most of the task's words is prefixed with the task (`task → unit`), so the fact
/// makes sense, and is found, on its own later. Returns nothing when nothing fits.
pub fn extract_facts(task: &str, text: &str) -> Vec<String> {
    let task_terms: HashSet<String> = words(task)
        .filter(|w| !crate::index::STOPWORDS.contains(&w.as_str()))
        .collect();
    let units = units(text);
    if units.is_empty() {
        return Vec::new();
    }
    let scored: Vec<(usize, usize)> = units
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let shared = words(u)
                .collect::<HashSet<_>>()
                .intersection(&task_terms)
                .count();
            (i, shared)
        })
        .collect();
    let best = scored.iter().map(|s| s.1).max().unwrap_or(0);
    let mut keep: Vec<usize> = if best > 0 {
        let mut by_score = scored.clone();
        by_score.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        by_score
            .into_iter()
            .filter(|s| s.1 > 0)
            .take(MAX_EXTRACTED)
            .map(|s| s.0)
            .collect()
    } else if units.len() <= MAX_EXTRACTED {
        (0..units.len()).collect()
    } else {
        Vec::new()
    };
    keep.sort_unstable();
    keep.into_iter()
        .map(|i| {
            let unit = cut(&units[i]);
            let shared = scored[i].1;
            if task_terms.is_empty() || shared * 2 >= task_terms.len() {
                unit
            } else {
                format!("{} → {unit}", cut(task.trim()))
            }
        })
        .collect()
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_FACT_CHARS {
        return s.to_string();
    }
    let mut t: String = s.chars().take(MAX_FACT_CHARS).collect();
    t.push('…');
    t
}

/// Splits text into sentences and table rows; table rows carry their column names.
fn units(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_rule(l))
        .collect();
    let table: Vec<&str> = lines.iter().copied().filter(|l| is_row(l)).collect();
    let header: Option<Vec<String>> = if table.len() >= 2 {
        Some(cells(table[0]))
    } else {
        None
    };
    let mut out = Vec::new();
    let mut header_seen = false;
    for line in lines {
        if is_row(line) {
            let row = cells(line);
            match &header {
                Some(_) if !header_seen => header_seen = true,
                Some(h) if h.len() == row.len() => out.push(
                    h.iter()
                        .zip(&row)
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                _ => out.push(row.join(", ")),
            }
        } else {
            out.extend(sentences(line));
        }
    }
    out
}

fn is_rule(line: &str) -> bool {
    line.chars()
        .all(|c| matches!(c, '-' | '+' | '|' | '=' | ':' | ' '))
}

fn is_row(line: &str) -> bool {
    line.contains('|') || line.contains('\t')
}

fn cells(line: &str) -> Vec<String> {
    let sep = if line.contains('|') { '|' } else { '\t' };
    line.trim_matches('|')
        .split(sep)
        .map(|c| c.trim().to_string())
        .collect()
}

fn sentences(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (i, &(at, c)) in chars.iter().enumerate() {
        let next_is_space = chars.get(i + 1).is_none_or(|&(_, n)| n.is_whitespace());
        // "3.14" and "e.g." mid-word are not ends: only a mark followed by a space or the end.
        if matches!(c, '.' | '!' | '?') && next_is_space {
            let end = at + c.len_utf8();
            let s = line[start..end].trim();
            if !s.is_empty() {
                out.push(s.to_string());
            }
            start = end;
        }
    }
    let rest = line[start..].trim();
    if !rest.is_empty() {
        out.push(rest.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_quote_every_word_and_drop_common_ones() {
        assert_eq!(
            fts_query("What is the \"total\" AND NEAR(x* -y)?").as_deref(),
            Some("\"total\" OR \"near\" OR \"x\" OR \"y\"")
        );
        assert_eq!(fts_query("the of").as_deref(), Some("\"the\" OR \"of\""));
        assert_eq!(fts_query("  ()*:^ \" "), None);
    }

    #[test]
    fn extracts_the_sentence_that_answered() {
        let f = extract_facts(
            "What was the revenue in 2023?",
            "I looked at the sales table. The revenue in 2023 was 1.2 million. Done.",
        );
        assert_eq!(f, vec!["The revenue in 2023 was 1.2 million."]);
    }

    #[test]
    fn extracts_table_rows_with_their_column_names() {
        let f = extract_facts(
            "revenue by region",
            "region | revenue\n---|---\nnorth | 10\nsouth | 20\n",
        );
        assert_eq!(
            f,
            vec!["region: north, revenue: 10", "region: south, revenue: 20"]
        );
    }

    #[test]
    fn a_bare_answer_is_kept_with_its_task() {
        assert_eq!(
            extract_facts("How many employees are there?", "42"),
            vec!["How many employees are there? → 42"]
        );
        assert!(extract_facts("x", "").is_empty());
    }
}
