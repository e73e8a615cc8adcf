//! The full-text index of the user's documents, built by `cairn index DIR...` and read by the
//! `search` tool and `cairn search`.
//!
//! The index is one SQLite file: a `files` table (path, modification time, size), a `chunks`
//! table (file, first and last line) and an FTS5 table `chunks_fts` holding each chunk's text
//! under the same rowid, ranked with BM25 and the Porter stemmer. Text files are cut into
//! chunks of about [`CHUNK_CHARS`] characters at line boundaries (preferring blank lines), so a
//! hit can be reported as `path:line`.
//!
//! [`Index::update`] is incremental: files whose modification time and size are unchanged are
//! skipped, changed files are re-chunked, and indexed files that are gone are removed. Binary
//! files (a NUL byte in the first 8 KiB, or not UTF-8) and hidden files and folders are skipped.
//! [`Index::search`] turns any query into a safe FTS5 expression (each word quoted, joined with
//! OR), so quotes, operators and brackets from the model are never a syntax error.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::Serialize;

/// A chunk is closed once it holds about this many characters.
pub const CHUNK_CHARS: usize = 1200;
/// A chunk is closed after this many lines whatever its size.
pub const CHUNK_LINES: usize = 40;
/// Files larger than this are skipped.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// What can go wrong building or reading the index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A folder to index does not exist.
    #[error("the folder {0} does not exist")]
    MissingDir(PathBuf),
    /// A path to index is not a folder or file.
    #[error("{0} is neither a folder nor a file")]
    NotADir(PathBuf),
    /// The index file exists but is not an index (another SQLite database, or not SQLite).
    #[error("{path} is not a cairn index: {why}; it was left untouched. Pass another file with --index FILE or CAIRN_INDEX")]
    NotIndex {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// The index file is absent (search before `cairn index`).
    #[error("there is no index at {0}; build one with `cairn index DIR...`")]
    NoIndex(PathBuf),
    /// The query has nothing to search for.
    #[error("the query `{0}` has no words to search for")]
    EmptyQuery(String),
    /// SQLite failed.
    #[error("index {path}: {source}")]
    Sqlite {
        /// The index file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// Reading a folder or file failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// What was read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What one [`Index::update`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateReport {
    /// Files indexed for the first time.
    pub added: usize,
    /// Files re-indexed because they changed.
    pub changed: usize,
    /// Files skipped because they did not change.
    pub unchanged: usize,
    /// Indexed files that were gone and were removed.
    pub removed: usize,
    /// Files skipped as binary, not UTF-8, too large, unreadable, links or not regular files.
    pub skipped: usize,
    /// Each skipped file (or folder) with why, in walk order.
    pub skipped_files: Vec<Skipped>,
    /// Chunks in the index after the update.
    pub chunks: usize,
    /// Files in the index after the update.
    pub files: usize,
}

/// A file or folder [`Index::update`] left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The path.
    pub path: PathBuf,
    /// Why it was left out.
    pub why: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The file.
    pub path: String,
    /// The 1-based line of the first match in the chunk (the chunk's first line if none).
    pub line: usize,
    /// The chunk's first line.
    pub start_line: usize,
    /// The chunk's last line.
    pub end_line: usize,
    /// A few lines from the matching line on.
    pub snippet: String,
    /// BM25 score (lower is better, as FTS5 reports it).
    pub score: f64,
}

impl Hit {
    /// `path:line` followed by the snippet, indented.
    pub fn render(&self) -> String {
        let mut s = format!("{}:{}\n", self.path, self.line);
        for l in self.snippet.lines() {
            s.push_str("  ");
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}

/// An open index file.
pub struct Index {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id),
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, tokenize = 'porter unicode61');
";

impl Index {
    /// Opens (creating if needed) the index at `path` for writing.
    pub fn open_or_create(path: &Path) -> Result<Index, IndexError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| IndexError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let sq = |source| IndexError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        check_is_index(path)?;
        let conn = Connection::open(path).map_err(sq)?;
        check_tables(&conn, path)?;
        conn.execute_batch(SCHEMA).map_err(sq)?;
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing index read-only.
    pub fn open_read_only(path: &Path) -> Result<Index, IndexError> {
        if !path.is_file() {
            return Err(IndexError::NoIndex(path.to_path_buf()));
        }
        check_is_index(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| IndexError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
        check_tables(&conn, path)?;
        Ok(Index {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn sq(&self) -> impl Fn(rusqlite::Error) -> IndexError + '_ {
        move |source| IndexError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Indexes the text files under each of `roots` (folders or single files): new and changed
    /// files are (re)chunked, unchanged ones skipped, indexed files under a root that are gone
    /// (and indexed files anywhere that no longer exist) removed. All in one transaction.
    pub fn update(&mut self, roots: &[PathBuf]) -> Result<UpdateReport, IndexError> {
        let mut canon_roots = Vec::new();
        for r in roots {
            if !r.exists() {
                return Err(IndexError::MissingDir(r.clone()));
            }
            let c = r.canonicalize().map_err(|source| IndexError::Io {
                path: r.clone(),
                source,
            })?;
            if !c.is_dir() && !c.is_file() {
                return Err(IndexError::NotADir(r.clone()));
            }
            canon_roots.push(c);
        }
        let mut files = Vec::new();
        let mut report = UpdateReport::default();
        for r in &canon_roots {
            walk(r, &mut files, &mut report.skipped_files)?;
        }
        let path = self.path.clone();
        let sq = |source| IndexError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sq)?;
        let mut seen: HashSet<String> = HashSet::new();
        for f in &files {
            let Ok(meta) = std::fs::metadata(f) else {
                continue;
            };
            let Some(key) = f.to_str().map(str::to_string) else {
                report.skipped_files.push(Skipped {
                    path: f.clone(),
                    why: "its name is not UTF-8".into(),
                });
                continue;
            };
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0);
            let size = meta.len() as i64;
            let existing: Option<(i64, i64, i64)> = tx
                .query_row(
                    "SELECT id, mtime_ns, size FROM files WHERE path = ?1",
                    [&key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(sq)?;
            if let Some((_, m, s)) = existing {
                if m == mtime && s == size {
                    seen.insert(key);
                    report.unchanged += 1;
                    continue;
                }
            }
            let text = if meta.len() > MAX_FILE_BYTES {
                Err(format!(
                    "{} bytes, over the {} MiB limit for a document",
                    meta.len(),
                    MAX_FILE_BYTES >> 20
                ))
            } else {
                read_text(f)
            };
            if let Some((id, _, _)) = existing {
                delete_file(&tx, id).map_err(sq)?;
            }
            let text = match text {
                Ok(t) => t,
                Err(why) => {
                    report.skipped_files.push(Skipped {
                        path: f.clone(),
                        why,
                    });
                    continue;
                }
            };
            seen.insert(key.clone());
            tx.execute(
                "INSERT INTO files(path, mtime_ns, size) VALUES (?1, ?2, ?3)",
                params![key, mtime, size],
            )
            .map_err(sq)?;
            let file_id = tx.last_insert_rowid();
            for c in chunk_lines(&text) {
                tx.execute(
                    "INSERT INTO chunks(file_id, start_line, end_line) VALUES (?1, ?2, ?3)",
                    params![file_id, c.start_line as i64, c.end_line as i64],
                )
                .map_err(sq)?;
                let cid = tx.last_insert_rowid();
                tx.execute(
                    "INSERT INTO chunks_fts(rowid, text) VALUES (?1, ?2)",
                    params![cid, c.text],
                )
                .map_err(sq)?;
            }
            if existing.is_some() {
                report.changed += 1;
            } else {
                report.added += 1;
            }
        }
        // Remove what is gone: files under a root that were not seen, and files that no longer
        // exist anywhere.
        let indexed: Vec<(i64, String)> = {
            let mut stmt = tx.prepare("SELECT id, path FROM files").map_err(sq)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(sq)?;
            rows.collect::<Result<_, _>>().map_err(sq)?
        };
        for (id, p) in indexed {
            if seen.contains(&p) {
                continue;
            }
            let pb = PathBuf::from(&p);
            let under_root = canon_roots.iter().any(|r| pb.starts_with(r));
            if under_root || !pb.exists() {
                delete_file(&tx, id).map_err(sq)?;
                report.removed += 1;
            }
        }
        report.files = tx
            .query_row("SELECT count(*) FROM files", [], |r| r.get::<_, i64>(0))
            .map_err(sq)? as usize;
        report.chunks = tx
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get::<_, i64>(0))
            .map_err(sq)? as usize;
        tx.commit().map_err(sq)?;
        report.skipped = report.skipped_files.len();
        Ok(report)
    }

    /// The paths of up to `limit` indexed files, sorted, and how many files there are.
    pub fn file_paths(&self, limit: usize) -> Result<(Vec<String>, usize), IndexError> {
        let mut stmt = self
            .conn
            .prepare("SELECT path FROM files ORDER BY path LIMIT ?1")
            .map_err(self.sq())?;
        let paths = stmt
            .query_map([limit as i64], |r| r.get::<_, String>(0))
            .map_err(self.sq())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.sq())?;
        let (files, _) = self.counts()?;
        Ok((paths, files))
    }

    /// How many files and chunks the index holds.
    pub fn counts(&self) -> Result<(usize, usize), IndexError> {
        let f: i64 = self
            .conn
            .query_row("SELECT count(*) FROM files", [], |r| r.get(0))
            .map_err(self.sq())?;
        let c: i64 = self
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
            .map_err(self.sq())?;
        Ok((f as usize, c as usize))
    }

    /// The `top_k` best chunks for `query`, best first. Any text is a valid query: it is cut
    /// into words, each quoted for FTS5, joined with OR; one with no words is an error. The
    /// [`STOPWORDS`] are left out when another word remains: a passage that shares only "of"
    /// with the query is no match. (Regression: "opposite of hot" found a line about
    /// back-ordered stock by its "of", and the model answered that the opposite of hot was
    /// "back-ordered".)
    pub fn search(&self, query: &str, top_k: usize) -> Result<Vec<Hit>, IndexError> {
        let mut words = query_words(query);
        if words.is_empty() {
            return Err(IndexError::EmptyQuery(query.to_string()));
        }
        if words.iter().any(|w| !STOPWORDS.contains(&w.as_str())) {
            words.retain(|w| !STOPWORDS.contains(&w.as_str()));
        }
        let fts = words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT f.path, c.start_line, c.end_line, chunks_fts.text, bm25(chunks_fts) AS s \
                 FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid \
                 JOIN files f ON f.id = c.file_id \
                 WHERE chunks_fts MATCH ?1 ORDER BY s LIMIT ?2",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map(params![fts, top_k as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, f64>(4)?,
                ))
            })
            .map_err(self.sq())?;
        let rows = rows.collect::<Result<Vec<_>, _>>().map_err(self.sq())?;
        let weights = self.word_weights(&words)?;
        let mut hits = Vec::new();
        for (path, start, end, text, score) in rows {
            let (offset, snippet) = snippet(&text, &words, &weights);
            hits.push(Hit {
                path,
                line: start as usize + offset,
                start_line: start as usize,
                end_line: end as usize,
                snippet,
                score,
            });
        }
        Ok(hits)
    }
}

impl Index {
    /// How much each of `words` tells a passage apart: its inverse document frequency over
    /// the chunks (BM25's, as FTS5 ranks by), so that a snippet is placed on the lines
    /// holding the rare words of a query, not the common ones.
    fn word_weights(&self, words: &[String]) -> Result<Vec<f64>, IndexError> {
        let total: i64 = self
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))
            .map_err(self.sq())?;
        let n = total as f64;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?1")
            .map_err(self.sq())?;
        words
            .iter()
            .map(|w| {
                let df: i64 = stmt
                    .query_row([format!("\"{w}\"")], |r| r.get(0))
                    .map_err(self.sq())?;
                let df = df as f64;
                Ok(((n - df + 0.5) / (df + 0.5) + 1.0).ln())
            })
            .collect()
    }
}

fn delete_file(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE file_id = ?1)",
        [id],
    )?;
    conn.execute("DELETE FROM chunks WHERE file_id = ?1", [id])?;
    conn.execute("DELETE FROM files WHERE id = ?1", [id])?;
    Ok(())
}

/// Words too common to rank by (memory recall and the search passages shown before a task's
/// first round). Without them, an OR query over 100 000 facts would match nearly all of them
/// and recall would slow to a full scan.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can",
    "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please", "show", "so", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "us", "was",
    "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would",
    "you", "your",
];

/// The words of a query, lowercased: runs of letters, digits and `_`. Everything else (quotes,
/// `*`, `:`, `^`, brackets, AND/OR/NOT written as operators) only separates words.
pub fn query_words(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in query.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if w.is_empty() {
            continue;
        }
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
        if out.len() >= 32 {
            break;
        }
    }
    out
}

/// How many non-empty lines a snippet shows, before the lines that continue it.
const SNIPPET_LINES: usize = 3;

/// The most lines a snippet shows beyond [`SNIPPET_LINES`] because they continue it.
const MAX_CONTINUED: usize = 2;

/// The most single lines a snippet adds for query words its windows left out.
const MAX_EXTRA_LINES: usize = 2;

/// Words that open a sentence about what the sentence before it named.
const CONTINUING_WORDS: &[&str] = &[
    "it", "its", "they", "their", "them", "this", "these", "those", "he", "she", "his", "her",
];

/// Whether `line` goes on about the line before it: it opens with a pronoun ("It is served
/// …", "They close …", "This applies …").
fn continues(line: &str) -> bool {
    let first = line
        .trim_start()
        .split(|c: char| !c.is_alphabetic())
        .next()
        .unwrap_or("");
    CONTINUING_WORDS.contains(&first.to_lowercase().as_str())
}

/// Words that, opening a line, make it the other half of a rule begun on the line before:
/// "For shorter jobs a courtesy car costs 30 euros per day." (after "A courtesy car is free
/// for any job with more than 4 hours of labour."), "Otherwise …", "Other pets …".
const BACK_WORDS: &[&str] = &["otherwise", "else", "however", "but", "other", "others"];

/// Words that, after an opening "For", "All" or "Any", point back to the line before: a
/// comparison ("For shorter jobs", "For larger groups") or "other" ("All other items").
#[rustfmt::skip]
const BACK_AFTER_FOR: &[&str] = &[
    "other", "others", "shorter", "longer", "smaller", "larger", "bigger", "older", "younger",
    "higher", "lower", "fewer", "more", "less", "later", "earlier", "heavier", "lighter", "cheaper",
    "dearer", "remaining", "such", "these", "those",
];

/// Whether `line` opens as the other half of a rule begun on the line before it ([`BACK_WORDS`],
/// "For shorter …", "All other …"): shown alone, it says the opposite of the rule.
fn goes_back(line: &str) -> bool {
    let words: Vec<String> = line
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .take(2)
        .map(str::to_lowercase)
        .collect();
    match words.as_slice() {
        [first, ..] if BACK_WORDS.contains(&first.as_str()) => true,
        [first, second] if matches!(first.as_str(), "for" | "all" | "any") => {
            BACK_AFTER_FOR.contains(&second.as_str())
        }
        _ => false,
    }
}

/// The stem a query word is matched by in a passage's lines: the word without a plural or
/// tense ending, as the index's Porter stemmer matched it ("emergencies" finds "emergency",
/// "closed" finds "closes").
fn stem(word: &str) -> &str {
    if word.chars().count() <= 4 || !word.is_ascii() {
        return word;
    }
    for end in ["ies", "es", "ed", "ing", "s", "e", "y"] {
        if let Some(s) = word.strip_suffix(end) {
            if s.len() >= 3 {
                return s;
            }
        }
    }
    word
}

/// Whether line `low` (lowercased) holds a word starting with `stem`: "deploy" matches
/// "deployed" but not "redeploy".
fn holds(low: &str, stem: &str) -> bool {
    low.match_indices(stem).any(|(p, _)| {
        !low[..p]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The lines of a chunk shown for a hit, and the offset of the first in it: the
/// [`SNIPPET_LINES`] non-empty lines, starting at a line that holds a query word, whose
/// distinct query words weigh the most together (`weights`, one per word: rare words weigh
/// more). Ties go to the window whose first line weighs more, then to the first. A second
/// such window joins it when the query words the first lacks weigh at least half as much
/// (`…` marks lines left out between them), then single lines for the query words still
/// left out while each weighs at least a quarter of the first window's (at most
/// [`MAX_EXTRA_LINES`]; no heading), lines that go on about the last one follow
/// ([`continues`]), and a first line that is the other half of a rule comes with the line
/// before it ([`goes_back`]). Before, the snippet started at
/// the line holding the most query words, each counted alike, and a line of two words common
/// in the documents ("clinic", "closed") won over one of two rare ones; a plural in the query
/// ("emergencies") did not find its singular in a line.
fn snippet(text: &str, words: &[String], weights: &[f64]) -> (usize, String) {
    let lines: Vec<&str> = text.lines().collect();
    let stems: Vec<&str> = words.iter().map(|w| stem(w)).collect();
    let found: Vec<Vec<bool>> = lines
        .iter()
        .map(|l| {
            let low = l.to_lowercase();
            stems.iter().map(|s| holds(&low, s)).collect()
        })
        .collect();
    let weight = |has: &[bool]| -> f64 {
        has.iter()
            .zip(weights)
            .filter(|(h, _)| **h)
            .map(|(_, w)| w.max(0.01))
            .sum()
    };
    let window = |at: usize| -> Vec<usize> {
        (at..lines.len())
            .filter(|&i| !lines[i].trim().is_empty())
            .take(SNIPPET_LINES)
            .collect()
    };
    // Which query words the lines `shown` hold between them.
    let held = |shown: &[usize]| -> Vec<bool> {
        let mut any = vec![false; stems.len()];
        for &j in shown {
            for (a, f) in any.iter_mut().zip(&found[j]) {
                *a |= *f;
            }
        }
        any
    };
    let covered = |at: usize| -> Vec<bool> { held(&window(at)) };
    // The best window among those that start at a line holding a word of `new` (every word,
    // then the words the first window lacks), scored by the weight of the words of `new` it
    // holds, then of those its first line holds.
    let best_window = |new: &[bool]| -> Option<(usize, f64)> {
        let only =
            |has: &[bool]| -> Vec<bool> { has.iter().zip(new).map(|(h, n)| *h && *n).collect() };
        let mut best: Option<(usize, (f64, f64))> = None;
        for (i, has) in found.iter().enumerate() {
            let first = weight(&only(has));
            if first == 0.0 {
                continue;
            }
            let score = (weight(&only(&covered(i))), first);
            let better = best.is_none_or(|(_, b)| {
                score.0 > b.0 + 1e-9 || ((score.0 - b.0).abs() <= 1e-9 && score.1 > b.1 + 1e-9)
            });
            if better {
                best = Some((i, score));
            }
        }
        best.map(|(i, (w, _))| (i, w))
    };
    let all = vec![true; stems.len()];
    let (at, first_weight) = best_window(&all).unwrap_or((0, 0.0));
    let mut shown = window(at);
    // A second window for the query's words the first lacks, when they weigh at least half
    // as much as the first's: "Which number should I call for an emergency when the clinic is
    // closed?" placed the window on "The clinic is closed on Sundays…" and its two lines
    // after, and left out "Outside opening hours, call the emergency line 030-555-0199."
    let lacking: Vec<bool> = covered(at).iter().map(|c| !c).collect();
    if let Some((j, w)) = best_window(&lacking) {
        if w >= first_weight / 2.0 {
            shown.extend(window(j));
            shown.sort_unstable();
            shown.dedup();
        }
    }
    // Then single lines for query words still left out, while each weighs at least a
    // quarter of the first window's: the line with the rule a task needs besides the one the
    // window found. Regression: "Nora Lindqvist's Corolla comes in for an MOT test. What does
    // she pay, VAT included?" showed the MOT price and the two lines after it, and not "VAT of
    // 21% is added to every invoice." three lines further down the same chunk; the model
    // answered with the price before VAT.
    // A heading is no such line: it names the subject, as the file's name does, and states
    // no rule. Regression: "How many days of annual leave is Anouk Smits entitled to …, not
    // counting days carried over?" showed the carry-over rule and, for "annual leave", the
    // heading "# Annual leave" (the first of two lines holding it) rather than "A full-time
    // employee gets 25 days of annual leave per calendar year."
    for _ in 0..MAX_EXTRA_LINES {
        let lacking: Vec<bool> = held(&shown).iter().map(|h| !h).collect();
        let best = found
            .iter()
            .enumerate()
            .filter(|(i, _)| !lines[*i].trim_start().starts_with('#'))
            .map(|(i, has)| {
                let only: Vec<bool> = has.iter().zip(&lacking).map(|(h, l)| *h && *l).collect();
                (i, weight(&only))
            })
            .fold(None::<(usize, f64)>, |best, (i, w)| match best {
                Some((_, b)) if b + 1e-9 >= w => best,
                _ => Some((i, w)),
            });
        match best {
            Some((i, w)) if w > 0.0 && w >= first_weight / 4.0 => {
                shown.push(i);
                shown.sort_unstable();
            }
            _ => break,
        }
    }
    // A line right after the window that goes on about its last line's subject ("It is
    // served from 07:00 to 10:30, on Sundays until 11:30." after "Breakfast costs …") is
    // part of what the window says. Regression: a search for "breakfast" showed the price of
    // breakfast and cut off the line with its hours, and the model answered that breakfast
    // is not served on Sundays.
    let limit = shown.len() + MAX_CONTINUED;
    while shown.len() < limit {
        let next = shown.last().map_or(lines.len(), |&l| l + 1);
        match lines.get(next) {
            Some(l) if continues(l) => shown.push(next),
            _ => break,
        }
    }
    // A window that opens with the other half of a rule ("For shorter jobs a courtesy car
    // costs 30 euros per day.") is shown with the line before it in the same paragraph, the
    // rule's first half. Regression: asked what a courtesy car costs for a job of 5 hours of
    // labour, the model saw only "For shorter jobs … 30 euros per day", not "A courtesy car
    // is free for any job with more than 4 hours of labour.", and answered 90 euros.
    if let Some(&first) = shown.first() {
        let before = first.checked_sub(1).filter(|&b| {
            let l = lines[b].trim();
            !l.is_empty() && !l.starts_with('#')
        });
        if let (Some(b), true) = (before, goes_back(lines[first])) {
            shown.insert(0, b);
        }
    }
    let at = shown.first().copied().unwrap_or(0);
    // Lines left out between two shown ones are marked.
    let mut picked: Vec<String> = Vec::new();
    for (k, &i) in shown.iter().enumerate() {
        if k > 0
            && lines[shown[k - 1] + 1..i]
                .iter()
                .any(|l| !l.trim().is_empty())
        {
            picked.push("…".to_string());
        }
        let t = lines[i].trim_end();
        picked.push(if t.chars().count() > 160 {
            let cut: String = t.chars().take(160).collect();
            format!("{cut}…")
        } else {
            t.to_string()
        });
    }
    (at, picked.join("\n"))
}

/// A piece of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based first line.
    pub start_line: usize,
    /// 1-based last line.
    pub end_line: usize,
    /// The lines' text.
    pub text: String,
}

/// Cuts `text` into chunks at line boundaries: a chunk closes at a blank line once it holds
/// half of [`CHUNK_CHARS`], or at any line once it holds [`CHUNK_CHARS`] or [`CHUNK_LINES`].
pub fn chunk_lines(text: &str) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    let mut n_lines = 0;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        if n_lines == 0 {
            start = lineno;
        }
        cur.push_str(line);
        cur.push('\n');
        n_lines += 1;
        let blank = line.trim().is_empty();
        let full = cur.len() >= CHUNK_CHARS || n_lines >= CHUNK_LINES;
        if full || (blank && cur.len() >= CHUNK_CHARS / 2) {
            if !cur.trim().is_empty() {
                out.push(Chunk {
                    start_line: start,
                    end_line: lineno,
                    text: std::mem::take(&mut cur),
                });
            }
            cur.clear();
            n_lines = 0;
        }
    }
    if n_lines > 0 && !cur.trim().is_empty() {
        out.push(Chunk {
            start_line: start,
            end_line: start + n_lines - 1,
            text: cur,
        });
    }
    out
}

/// The file's text, or why it is not indexed (unreadable, binary, not UTF-8, over the size
/// limit). At most [`MAX_FILE_BYTES`] + 1 bytes are read whatever size the file reports: files
/// under /proc report 0 and can hold gigabytes (`/proc/self/pagemap`).
fn read_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot be read: {e}"))?;
    let mut bytes = Vec::new();
    // Whole 64 KiB reads: some kernel files refuse reads of odd sizes (pagemap wants 8-byte
    // multiples), so no `take` that would end on a 1-byte read.
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot be read: {e}")),
        };
        bytes.extend_from_slice(&chunk[..n]);
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "more than {} bytes read although it reports {}, over the {} MiB limit for a document",
                MAX_FILE_BYTES,
                std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
                MAX_FILE_BYTES >> 20
            ));
        }
    }
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return Err("binary (a NUL byte in its first 8 KiB)".into());
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (bad byte at offset {}); binary, or text in another encoding",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Refuses a file that exists, is not empty and does not start like an SQLite database.
fn check_is_index(path: &Path) -> Result<(), IndexError> {
    use std::io::Read;
    if !path.is_file() {
        if path.exists() {
            return Err(IndexError::NotIndex {
                path: path.to_path_buf(),
                why: "it is not a file".into(),
            });
        }
        return Ok(());
    }
    let mut head = [0u8; 16];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if n > 0 && (n < 16 || head != *b"SQLite format 3\0") {
        return Err(IndexError::NotIndex {
            path: path.to_path_buf(),
            why: "it is not an SQLite database (its first bytes are not `SQLite format 3`)".into(),
        });
    }
    Ok(())
}

/// Refuses an SQLite database that holds tables but not the index's: it is someone else's.
fn check_tables(conn: &Connection, path: &Path) -> Result<(), IndexError> {
    let sq = |source| IndexError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .map_err(sq)?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .map_err(sq)?
        .collect::<Result<_, _>>()
        .map_err(sq)?;
    if !tables.is_empty() && !tables.iter().any(|t| t == "chunks_fts") {
        let mut list = tables
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if tables.len() > 5 {
            list.push_str(", …");
        }
        return Err(IndexError::NotIndex {
            path: path.to_path_buf(),
            why: format!("it is an SQLite database with other tables ({list})"),
        });
    }
    Ok(())
}

/// Every regular file under `root` (or `root` itself when it is a file), in a stable order.
/// Hidden files and folders are passed over silently; symbolic links (not followed, so a
/// link loop cannot trap the walk), special files such as pipes, and folders that cannot be
/// read go to `skipped` with why.
fn walk(root: &Path, out: &mut Vec<PathBuf>, skipped: &mut Vec<Skipped>) -> Result<(), IndexError> {
    if root.is_file() {
        out.push(root.to_path_buf());
        return Ok(());
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(source) if dir.as_path() == root => {
                return Err(IndexError::Io { path: dir, source })
            }
            Err(e) => {
                skipped.push(Skipped {
                    path: dir,
                    why: format!("the folder cannot be read: {e}"),
                });
                continue;
            }
        };
        let mut names: Vec<_> = entries.flatten().collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                out.push(e.path());
            } else if ft.is_symlink() {
                skipped.push(Skipped {
                    path: e.path(),
                    why: "a symbolic link (links are not followed; index its target directly)"
                        .into(),
                });
            } else {
                skipped.push(Skipped {
                    path: e.path(),
                    why: "not a regular file (a pipe, socket or device)".into(),
                });
            }
        }
    }
    Ok(())
}
