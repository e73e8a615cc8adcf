//! The `search` tool: BM25 full-text search over the user's documents, as indexed by
//! `cairn index DIR...` (see [`crate::index`]). Results are snippets headed by `path:line`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{parse_args, schema_of, Observation, Tool, ToolError};
use crate::index::{Index, IndexError};

/// The tool's name.
pub const NAME: &str = "search";

/// How the passages shown before a task's first round are headed.
pub const CONTEXT_HEADING: &str =
    "Passages of the user's documents that share words with this task";

/// How the note after a search's passages begins when no passage holds a name the query
/// writes; the names follow, quoted.
pub const NO_PASSAGE_HOLDS: &str = "no passage shown holds";

/// How many results `search` returns when `top_k` is not given.
pub const DEFAULT_TOP_K: usize = 5;

/// How many file names the description of `search` lists.
pub const MAX_LISTED_FILES: usize = 20;

/// How many passages [`Tool::context_for`] shows before a task's first round.
pub const CONTEXT_PASSAGES: usize = 2;

/// The most characters of the passages shown before a task's first round.
pub const CONTEXT_MAX_CHARS: usize = 800;

/// The arguments of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words to look for in the user's documents.
    pub query: String,
    /// How many results to return.
    #[schemars(range(min = 1, max = 20))]
    #[serde(default = "default_top_k")]
    pub top_k: u32,
}

fn default_top_k() -> u32 {
    DEFAULT_TOP_K as u32
}

/// The `search` tool over one index file, opened on first use.
#[derive(Debug)]
pub struct SearchTool {
    path: PathBuf,
    index: Mutex<Option<Index>>,
}

impl SearchTool {
    /// A search tool over the index at `path` (opened read-only on the first call).
    pub fn new(path: &Path) -> Self {
        SearchTool {
            path: path.to_path_buf(),
            index: Mutex::new(None),
        }
    }

    /// The names of the indexed files (without their folders), at most
    /// [`MAX_LISTED_FILES`], then how many more there are.
    pub fn file_names(&self) -> Result<Vec<String>, ToolError> {
        let mut guard = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(Index::open_read_only(&self.path).map_err(to_tool_error)?);
        }
        let Some(index) = guard.as_ref() else {
            return Err(ToolError::fatal("the index could not be opened"));
        };
        let (paths, total) = index.file_paths(MAX_LISTED_FILES).map_err(to_tool_error)?;
        let mut names: Vec<String> = paths
            .iter()
            .map(|p| {
                Path::new(p)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| p.clone())
            })
            .collect();
        if total > paths.len() {
            names.push(format!("and {} more files", total - paths.len()));
        }
        Ok(names)
    }

    /// Runs one search and renders the hits.
    pub fn search(&self, query: &str, top_k: usize) -> Result<String, ToolError> {
        if let Some(marker) = sql_marker(query) {
            return Err(ToolError::invalid(format!(
                "the search query `{query}` is written like SQL ({marker}); search finds \
                 passages of the documents by their words"
            ))
            .with_hint(
                "search with a few plain words the documents would contain; questions about \
                 the database's tables go to the sql tool",
            ));
        }
        let mut guard = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(Index::open_read_only(&self.path).map_err(to_tool_error)?);
        }
        let Some(index) = guard.as_ref() else {
            return Err(ToolError::fatal("the index could not be opened"));
        };
        let hits = index.search(query, top_k).map_err(to_tool_error)?;
        if hits.is_empty() {
            let (files, _) = index.counts().map_err(to_tool_error)?;
            if files == 0 {
                return Ok(format!(
                    "no results: the index {} holds no documents (build it with `cairn index DIR...`)",
                    self.path.display()
                ));
            }
            return Ok(format!(
                "no results for `{query}` in {files} indexed files; try other or fewer words"
            ));
        }
        let mut out = hits
            .iter()
            .map(|h| h.render())
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_string();
        // The names the query writes that no passage shown holds. Regression: "Hugo Lambert
        // email" found the library's own address by "email", and the model gave it as Hugo
        // Lambert's; his row, with his email, was in the database.
        let snippets: Vec<String> = hits.iter().map(|h| h.snippet.to_lowercase()).collect();
        let mut missing: Vec<String> = Vec::new();
        for name in crate::tools::sql::name_terms(query) {
            for part in unheld(&name, &snippets) {
                let part = format!("\"{part}\"");
                if !missing.contains(&part) {
                    missing.push(part);
                }
            }
        }
        if !missing.is_empty() {
            out.push_str(&format!(
                "\n({NO_PASSAGE_HOLDS} {}: these match the query's other words)",
                missing.join(" or ")
            ));
        }
        Ok(out)
    }
}

/// What of `name` no passage of `snippets` (lowercased) holds: nothing when one holds it
/// whole; else the words of it that none holds, as one name when they are all of it
/// ("Hugo Lambert"), each alone when some are held. Regression: a search for "Corolla Corolla
/// MOT test" found the passage on the MOT test's price, was told no passage held "Corolla
/// Corolla MOT", and the model answered that the search found nothing; the note now names
/// "Corolla" only. Words are matched whole: "MOT" is not held by a passage on the motor.
fn unheld(name: &str, snippets: &[String]) -> Vec<String> {
    let holds = |s: &str| snippets.iter().any(|t| super::holds_word(t, s));
    if holds(name) {
        return Vec::new();
    }
    let words: Vec<&str> = name.split_whitespace().collect();
    let lacking: Vec<&str> = words.iter().copied().filter(|w| !holds(w)).collect();
    if lacking.len() == words.len() {
        return vec![name.to_string()];
    }
    lacking
        .into_iter()
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_string)
        .collect()
}

/// What makes `query` SQL rather than words, when it is: an upper-case SQL word that a
/// sentence does not use in capitals (`SELECT`, `WHERE`, `NULL`, …) with a second sign of SQL
/// (another such word, a `snake_case` name, a comparison). The 1.5B model searched the
/// documents for `science AND author_name IS NULL`, got a passage about printing, and
/// answered that no such book exists; the books were in the database.
fn sql_marker(query: &str) -> Option<String> {
    const WORDS: [&str; 9] = [
        "SELECT", "FROM", "WHERE", "NULL", "JOIN", "LIKE", "GROUP", "ORDER", "COUNT",
    ];
    let tokens: Vec<&str> = query
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '=' || c == '<' || c == '>'))
        .filter(|t| !t.is_empty())
        .collect();
    let keywords: Vec<&str> = tokens
        .iter()
        .copied()
        .filter(|t| WORDS.contains(t))
        .collect();
    let first = keywords.first()?;
    let second = keywords.len() > 1
        || tokens.iter().any(|t| {
            t.contains('_') && t.chars().any(|c| c.is_ascii_lowercase())
                || t.contains(['=', '<', '>'])
        });
    second.then(|| first.to_string())
}

fn to_tool_error(e: IndexError) -> ToolError {
    match e {
        IndexError::EmptyQuery(_) => ToolError::invalid(e.to_string())
            .with_hint("search with a few words that the documents would contain"),
        IndexError::Sqlite { ref source, .. }
            if matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ) =>
        {
            ToolError::transient(e.to_string())
        }
        other => ToolError::fatal(other.to_string()),
    }
}

impl Tool for SearchTool {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> String {
        let files = match self.file_names() {
            Ok(names) if !names.is_empty() => format!(" ({})", names.join(", ")),
            _ => String::new(),
        };
        format!(
            "The user's own documents{files}. Use it for what these documents say: \
             policies, rules, notes, descriptions. Full-text search; returns the best-matching \
             passages, each headed by file:line."
        )
    }

    /// The best passages for the task's own words (without the words too common to rank
    /// by), so that a question about the documents starts with what they say: the small
    /// models often do not choose `search` for such a question.
    fn context_for(&self, task: &str, _earlier: Option<&str>) -> Option<String> {
        let words: Vec<String> = crate::index::query_words(task)
            .into_iter()
            .filter(|w| w.chars().count() >= 3 && !crate::index::STOPWORDS.contains(&w.as_str()))
            .collect();
        if words.is_empty() {
            return None;
        }
        let mut guard = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Index::open_read_only(&self.path).ok();
        }
        let hits = guard
            .as_ref()?
            .search(&words.join(" "), CONTEXT_PASSAGES)
            .ok()?;
        let mut body = String::new();
        for h in hits {
            let r = h.render();
            if body.len() + r.len() > CONTEXT_MAX_CHARS {
                break;
            }
            body.push_str(&r);
        }
        if body.is_empty() {
            return None;
        }
        Some(format!(
            "{CONTEXT_HEADING} (found by searching them before the first step; call search \
             for more):\n{}",
            body.trim_end()
        ))
    }

    fn args_schema(&self) -> Value {
        schema_of::<SearchArgs>()
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let args: SearchArgs = parse_args(args)?;
        self.search(&args.query, (args.top_k as usize).clamp(1, 50))
            .map(Observation::new)
    }
}

#[cfg(test)]
mod tests {
    use super::sql_marker;

    #[test]
    fn sql_in_a_search_query_is_told_apart_from_words() {
        assert_eq!(
            sql_marker("science AND author_name IS NULL").as_deref(),
            Some("NULL")
        );
        assert_eq!(
            sql_marker("SELECT title FROM books").as_deref(),
            Some("SELECT")
        );
        assert!(sql_marker("price = 5 WHERE id").is_some());
        for words in [
            "overdue fine per day",
            "what to do with a NULL pointer",
            "ORDER of the day",
            "select a branch from the list",
            "late_fee policy",
        ] {
            assert_eq!(sql_marker(words), None, "{words}");
        }
    }
}
