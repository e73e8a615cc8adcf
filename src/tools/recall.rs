//! The `recall` tool: searches long-term memory facts in the memory file
//! ([`crate::memory::MemoryStore`]), ranked by BM25 relevance times a time decay.
//!
//! Bound to a session, it sees that session's facts and the global ones
//! ([`MemoryStore::recall`], which marks them used); unbound, it sees every fact
//! ([`MemoryStore::search_facts`]), as `cairn memory search` does.

use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{parse_args, schema_of, Observation, Tool, ToolError};
use crate::memory::{MemoryError, MemoryStore, SessionId};

/// How many facts `recall` returns.
pub const DEFAULT_K: usize = 5;

/// The arguments of `recall`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// Words describing what to remember.
    pub query: String,
}

/// The `recall` tool over one memory store.
#[derive(Debug)]
pub struct RecallTool {
    store: Mutex<MemoryStore>,
    session: Option<SessionId>,
    decay: f64,
    k: usize,
}

impl RecallTool {
    /// A recall tool over `store`, seeing `session`'s facts and the global ones (every fact
    /// when `None`), ranking with `decay` per hour of age and returning up to `k` facts.
    pub fn new(store: MemoryStore, session: Option<SessionId>, decay: f64, k: usize) -> Self {
        RecallTool {
            store: Mutex::new(store),
            session,
            decay,
            k: k.max(1),
        }
    }
}

fn to_tool_error(e: MemoryError) -> ToolError {
    match e {
        MemoryError::Busy { .. } => ToolError::transient(e.to_string()),
        MemoryError::BadDecay(_) => ToolError::fatal(e.to_string()),
        other => ToolError::fatal(other.to_string()),
    }
}

impl Tool for RecallTool {
    fn name(&self) -> &str {
        "recall"
    }

    fn description(&self) -> String {
        "Searches long-term memory: facts learned in earlier tasks and conversations with this \
         user. Use it when the task refers to something said or found before."
            .into()
    }

    fn args_schema(&self) -> Value {
        schema_of::<RecallArgs>()
    }

    fn run(&self, args: &Value) -> Result<Observation, ToolError> {
        let args: RecallArgs = parse_args(args)?;
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let found = match self.session {
            Some(s) => store.recall(s, &args.query, self.k, self.decay),
            None => store.search_facts(&args.query, self.k, self.decay),
        }
        .map_err(to_tool_error)?;
        if found.is_empty() {
            return Ok(Observation::new(format!(
                "no remembered facts match `{}`",
                args.query
            )));
        }
        let lines: Vec<String> = found
            .iter()
            .map(|f| format!("- {}", f.fact.text.replace('\n', " ")))
            .collect();
        Ok(Observation::new(lines.join("\n")))
    }
}
