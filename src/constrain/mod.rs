//! Constrained decoding: every generated token is allowed by a grammar, so output made under a
//! JSON Schema is valid JSON of that schema by construction, never repaired afterwards.
//!
//! - [`ConstraintCompiler`] is built once per model: it owns the token trie (see [`trie`],
//!   built from cairn's own tokenizer with the end-of-turn token as EOS) and llguidance's
//!   parser factory. It turns a [`ConstraintSpec`] — a JSON Schema or a grammar in llguidance's
//!   Lark syntax — into a [`Constraint`], and reports a bad schema or grammar *before* any
//!   decoding, naming the offending keyword or line. There is no fallback to free decoding.
//! - [`Constraint`] is one generation's parser state. The decode loop in
//!   [`crate::decode::generate`] asks it to mask the logits ([`Constraint::mask_logits`]),
//!   samples, [`Constraint::consume`]s the token, then takes the tokens the grammar forces
//!   ([`Constraint::forced_tokens`]) and feeds them to the model in one batched forward. It
//!   can also carry texts the output may not contain ([`Constraint::forbid`]: the agent's
//!   failed calls), which the decode loop enforces by taking a token back.

pub mod bounds;
pub mod keywords;
pub mod trie;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use crate::model::tokenizer::Tokenizer;

/// What went wrong making or applying a constraint.
#[derive(Debug, thiserror::Error)]
pub enum ConstraintError {
    /// A schema or grammar file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A schema file is not JSON.
    #[error("{origin}: not valid JSON at line {line}, column {column}: {message}")]
    SchemaJson {
        /// Where the schema came from.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// llguidance rejected a JSON Schema (an unsupported keyword, an unsatisfiable schema).
    #[error("{origin}: unsupported or invalid JSON Schema: {message}")]
    Schema {
        /// Where the schema came from.
        origin: String,
        /// llguidance's message, naming the keyword.
        message: String,
    },
    /// llguidance rejected a Lark grammar.
    #[error("{origin}: invalid grammar: {message}")]
    Grammar {
        /// Where the grammar came from.
        origin: String,
        /// llguidance's message, naming the line.
        message: String,
    },
    /// The token trie could not be built from the model's vocabulary.
    #[error("cannot build the token trie: {0}")]
    Vocab(String),
    /// The parser failed during decoding (a rejected token, a grammar too ambiguous to follow
    /// within llguidance's limits).
    #[error("constraint failed while decoding: {0}")]
    Decode(String),
}

/// Where a constraint comes from.
#[derive(Debug, Clone)]
pub enum ConstraintSpec {
    /// A JSON Schema; output is compact JSON (no free whitespace) unless the schema's own
    /// `x-guidance` options say otherwise.
    JsonSchema(Value),
    /// A grammar in llguidance's Lark syntax.
    Lark(String),
}

impl ConstraintSpec {
    /// Reads a JSON Schema file.
    pub fn schema_file(path: &Path) -> Result<Self, ConstraintError> {
        let text = read(path)?;
        Self::schema_str(&text, &path.display().to_string())
    }

    /// Parses a JSON Schema from text; `origin` names it in errors.
    pub fn schema_str(text: &str, origin: &str) -> Result<Self, ConstraintError> {
        let value = serde_json::from_str(text).map_err(|e| ConstraintError::SchemaJson {
            origin: origin.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        Ok(ConstraintSpec::JsonSchema(value))
    }

    /// Reads a Lark grammar file.
    pub fn grammar_file(path: &Path) -> Result<Self, ConstraintError> {
        Ok(ConstraintSpec::Lark(read(path)?))
    }
}

fn read(path: &Path) -> Result<String, ConstraintError> {
    std::fs::read_to_string(path).map_err(|source| ConstraintError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The lexer fuel of one token's mask (llguidance's `step_lexer_fuel`; its default is
/// 200 000).
pub const STEP_LEXER_FUEL: u64 = 2_000_000;

/// Compiles schemas and grammars into [`Constraint`]s for one model. Build it once per model:
/// the trie and llguidance's token-class tables take a moment for a 150k vocabulary.
#[derive(Clone)]
pub struct ConstraintCompiler {
    factory: Arc<ParserFactory>,
    vocab: usize,
}

impl std::fmt::Debug for ConstraintCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstraintCompiler")
            .field("vocab", &self.vocab)
            .finish_non_exhaustive()
    }
}

impl ConstraintCompiler {
    /// A compiler for a model with `vocab` embedding rows and this tokenizer. Ids past the
    /// tokenizer's vocabulary are never allowed.
    pub fn new(tokenizer: &Tokenizer, vocab: usize) -> Result<Self, ConstraintError> {
        let env = trie::build_tok_env(tokenizer, vocab)?;
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| ConstraintError::Vocab(e.to_string()))?;
        // Problems come back as errors; llguidance should not print to our stderr.
        factory.quiet();
        // The lexer work one token's mask may take. At llguidance's default (200 000; about
        // 15 ms by its own figure of 14 000 a millisecond, not measured here) the query pattern
        // of a database with names of several words (admitted bare: `Order ID` is also `Order`
        // then `ID`) ran out in the middle of a task, and every later step failed with "too
        // many expressions constructed". Ten times that is still a bound (about 0.15 s by the
        // same figure); it costs time only where a mask needs the work.
        factory.limits_mut().step_lexer_fuel = STEP_LEXER_FUEL;
        Ok(ConstraintCompiler {
            factory: Arc::new(factory),
            vocab,
        })
    }

    /// The number of ids masks cover (the model's embedding rows).
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Compiles `spec`; `origin` (a file name, "agent step schema") names it in errors.
    pub fn compile(
        &self,
        spec: &ConstraintSpec,
        origin: &str,
    ) -> Result<Constraint, ConstraintError> {
        let (grammar, is_schema) = match spec {
            ConstraintSpec::JsonSchema(schema) => {
                if let Some((keyword, at)) = keywords::first_unknown(schema) {
                    return Err(ConstraintError::Schema {
                        origin: origin.to_string(),
                        message: format!(
                            "unknown keyword `{keyword}` at `{}` (a typo? extensions are spelled `x-...`)",
                            if at.is_empty() { "/" } else { &at }
                        ),
                    });
                }
                let mut schema = schema.clone();
                if let Some(obj) = schema.as_object_mut() {
                    // Free whitespace lets a sampled model wander through newlines and spaces
                    // until --max-tokens; compact JSON is also fewer tokens per step.
                    obj.entry("x-guidance")
                        .or_insert_with(|| serde_json::json!({"whitespace_flexible": false}));
                }
                (TopLevelGrammar::from_json_schema(schema), true)
            }
            ConstraintSpec::Lark(text) => (TopLevelGrammar::from_lark(text.clone()), false),
        };
        let error = |message: String| {
            let origin = origin.to_string();
            if is_schema {
                ConstraintError::Schema { origin, message }
            } else {
                ConstraintError::Grammar { origin, message }
            }
        };
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| error(e.to_string()))?;
        let mut matcher = Matcher::new(Ok(parser));
        // A grammar that compiles but admits no token at all is as bad as one that fails.
        let first = matcher
            .compute_mask()
            .map_err(|e| error(readable_parser_error(&e.to_string())))?;
        if first.is_zero() {
            return Err(error("the grammar allows no output at all".into()));
        }
        Ok(Constraint {
            matcher,
            mask_times: Vec::new(),
            forced_times: Vec::new(),
            forbidden: Vec::new(),
        })
    }
}

/// llguidance's error for a grammar that fails on its first token, without the parser's
/// internal state it appends (`<state>…</state>`), and in words for the case of a grammar
/// that can never finish (a rule that refers only to itself, such as `a: a`).
fn readable_parser_error(raw: &str) -> String {
    let head = raw.split("\n<state>").next().unwrap_or(raw).trim();
    if head.contains("NoExtensionBias") {
        return "the grammar allows no output at all: no rule can finish (a rule that refers \
                only to itself, like `a: a`, needs an alternative without itself)"
            .into();
    }
    head.to_string()
}

/// One generation's grammar state: which tokens may come next, and which are forced; and the
/// texts the output may not contain ([`Constraint::forbid`]).
#[derive(Clone)]
pub struct Constraint {
    matcher: Matcher,
    mask_times: Vec<Duration>,
    forced_times: Vec<Duration>,
    forbidden: Vec<String>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("masks", &self.mask_times.len())
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl Constraint {
    /// Sets the logit of every token the grammar does not allow next to `-inf`. Ids past
    /// `logits.len()` are ignored; ids past the mask (none, for a matching model) are masked.
    pub fn mask_logits(&mut self, logits: &mut [f32]) -> Result<(), ConstraintError> {
        let start = Instant::now();
        let mask = self
            .matcher
            .compute_mask()
            .map_err(|e| self.decode_error(e))?;
        if mask.is_zero() {
            return Err(ConstraintError::Decode(
                "the grammar allows no next token".into(),
            ));
        }
        for (word_index, &word) in mask.as_slice().iter().enumerate() {
            if word == u32::MAX {
                continue;
            }
            let base = word_index * 32;
            for bit in 0..32 {
                if word & (1 << bit) == 0 {
                    if let Some(l) = logits.get_mut(base + bit) {
                        *l = f32::NEG_INFINITY;
                    }
                }
            }
        }
        let covered = mask.as_slice().len() * 32;
        if logits.len() > covered {
            logits[covered..].fill(f32::NEG_INFINITY);
        }
        self.mask_times.push(start.elapsed());
        Ok(())
    }

    /// Advances the grammar past a sampled token (one the mask allowed).
    pub fn consume(&mut self, token: u32) -> Result<(), ConstraintError> {
        self.matcher
            .consume_token(token)
            .map_err(|e| self.decode_error(e))
    }

    /// The tokens the grammar now forces, at most `limit` of them, already consumed: the
    /// caller appends them to the output and feeds them to the model without sampling.
    pub fn forced_tokens(&mut self, limit: usize) -> Result<Vec<u32>, ConstraintError> {
        if limit == 0 || self.matcher.is_stopped() {
            return Ok(Vec::new());
        }
        let start = Instant::now();
        let mut forced = self.matcher.compute_ff_tokens();
        forced.truncate(limit);
        if !forced.is_empty() {
            self.matcher
                .consume_tokens(&forced)
                .map_err(|e| self.decode_error(e))?;
        }
        if let Some(e) = self.matcher.get_error() {
            return Err(ConstraintError::Decode(e));
        }
        self.forced_times.push(start.elapsed());
        Ok(forced)
    }

    /// Forbids the output to contain any of `texts` (the agent's failed calls, written out as
    /// the step wrote them): the decode loop refuses a sampled token whose text, with the
    /// tokens the grammar then forces, would complete one, unless the grammar allows nothing
    /// else. A grammar cannot say "any query but this one"; this is that exclusion, applied
    /// with the grammar's mask. Empty texts are ignored.
    pub fn forbid(&mut self, texts: impl IntoIterator<Item = String>) {
        self.forbidden
            .extend(texts.into_iter().filter(|t| !t.is_empty()));
    }

    /// The texts the output may not contain.
    pub fn forbidden(&self) -> &[String] {
        &self.forbidden
    }

    /// Whether `new`, written after `before`, completes a forbidden text: one that ends
    /// inside `new`.
    pub fn completes_forbidden(&self, before: &str, new: &str) -> bool {
        let (before, new) = (before.as_bytes(), new.as_bytes());
        self.forbidden.iter().any(|f| {
            let f = f.as_bytes();
            let start = before.len().saturating_sub(f.len() - 1);
            let window = [&before[start..], new].concat();
            window.windows(f.len()).any(|w| w == f)
        })
    }

    /// Takes back the last `n` tokens consumed (sampled or forced), as if they had not been.
    pub fn rollback(&mut self, n: usize) -> Result<(), ConstraintError> {
        self.matcher.rollback(n).map_err(|e| self.decode_error(e))
    }

    /// Whether the grammar is complete and allows nothing more than end of turn.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped() && !self.matcher.is_error()
    }

    /// Whether the output so far is a complete sentence of the grammar (it may go on).
    pub fn is_accepting(&mut self) -> bool {
        self.is_finished() || self.matcher.is_accepting().unwrap_or(false)
    }

    /// How long each mask took, one entry per sampled token.
    pub fn mask_times(&self) -> &[Duration] {
        &self.mask_times
    }

    /// How long each forced-token computation took, one entry per sampled token (and one more
    /// for each token taken back because it completed a forbidden text).
    pub fn forced_times(&self) -> &[Duration] {
        &self.forced_times
    }

    fn decode_error(&self, e: anyhow::Error) -> ConstraintError {
        ConstraintError::Decode(self.matcher.get_error().unwrap_or_else(|| e.to_string()))
    }
}
