//! A [`Session`] is one conversation's view of the model: the tokens whose keys and values sit
//! in its KV cache.
//!
//! [`Session::feed`] takes the *whole* token sequence the caller wants the model to have seen,
//! finds the common prefix with what is cached, cuts the cache back to it and runs only the
//! rest, in chunks. This is what makes a multi-round agent task cheap: each round's prompt
//! repeats the previous one and adds an observation, and only the observation is computed.
//! The logits after the last token are a slice of the engine's own buffer in the session's
//! [`EngineState`], valid until the next call that changes the session.

use std::sync::Arc;

use super::engine::{EngineSnapshot, EngineState, Model};
use super::error::{ModelError, Result};
use super::kv_cache::KvPositions;

/// Tokens per forward pass during prefill; bounds the attention scratch memory.
pub const DEFAULT_CHUNK: usize = 512;

/// How much of the last `feed` came from the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedStats {
    /// Tokens whose keys/values were already cached.
    pub reused: usize,
    /// Tokens run through the model.
    pub computed: usize,
}

/// A KV cache plus the tokens it holds.
pub struct Session {
    model: Arc<Model>,
    state: EngineState,
    tokens: Vec<u32>,
    /// Whether the state's logits are those after the last of `tokens`.
    has_logits: bool,
    chunk: usize,
    last_feed: FeedStats,
}

/// A saved session state: tokens, cache contents and the logits after them.
#[derive(Debug, Clone)]
pub struct SessionSnapshot {
    tokens: Vec<u32>,
    state: EngineSnapshot,
    has_logits: bool,
}

impl SessionSnapshot {
    /// The tokens it holds.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The first position of the state it holds: 0, or for a delta
    /// ([`Session::snapshot_from`]) the tokens it follows.
    pub fn start(&self) -> usize {
        match &self.state {
            EngineSnapshot::Cpu(s) => s.start(),
            EngineSnapshot::Candle(_) => 0,
        }
    }

    /// Writes its cache and logits ([`super::cpu::CpuSnapshot::write_to`]); `Ok(false)`,
    /// writing nothing, for a snapshot of the candle engine, which has no such form.
    pub fn write_state(&self, w: &mut dyn std::io::Write) -> std::io::Result<bool> {
        match &self.state {
            EngineSnapshot::Cpu(s) => s.write_to(w).map(|()| true),
            EngineSnapshot::Candle(_) => Ok(false),
        }
    }
}

impl Session {
    /// A snapshot of this session's model holding `tokens`, read from what
    /// [`SessionSnapshot::write_state`] wrote for them; an error when the counts are not this
    /// model's (another model's file, or one cut short) or the session is not on the CPU
    /// engine.
    pub fn read_snapshot(
        &self,
        tokens: Vec<u32>,
        r: &mut dyn std::io::Read,
    ) -> std::io::Result<SessionSnapshot> {
        let EngineState::Cpu(_) = &self.state else {
            return Err(std::io::Error::other(
                "saved states are kept for the native engine only",
            ));
        };
        let kv = self.state.kv();
        let state = super::cpu::CpuSnapshot::read_from(
            r,
            kv.layers(),
            kv.width(),
            self.model.config.vocab,
        )?;
        if state.len() != tokens.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} positions for {} tokens", state.len(), tokens.len()),
            ));
        }
        Ok(SessionSnapshot {
            tokens,
            state: EngineSnapshot::Cpu(state),
            has_logits: true,
        })
    }

    /// An empty session on `model`.
    pub fn new(model: Arc<Model>) -> Self {
        let state = model.new_state();
        Session {
            model,
            state,
            tokens: Vec::new(),
            has_logits: false,
            chunk: DEFAULT_CHUNK,
            last_feed: FeedStats::default(),
        }
    }

    /// Sets the prefill chunk size (tokens per forward pass; at least 1).
    pub fn with_chunk(mut self, chunk: usize) -> Self {
        self.chunk = chunk.max(1);
        self
    }

    /// The model this session runs.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The tokens held in the cache.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The model's context length.
    pub fn context_len(&self) -> usize {
        self.model.config.context
    }

    /// The KV cache's positions (for inspection: length, capacity, bytes).
    pub fn cache(&self) -> &KvPositions {
        self.state.kv()
    }

    /// The logits after the last token held, `vocab` values (what the last `feed` or
    /// `append` returned); an error when they are not known (an empty session, or after a
    /// truncation or a failed call).
    pub fn logits(&self) -> Result<&[f32]> {
        if self.has_logits {
            Ok(self.state.logits())
        } else {
            Err(ModelError::NoLogits)
        }
    }

    /// How long the last forward pass's copy of the logits from a GPU took (`None` on the
    /// CPU; see [`EngineState::logits_copy_time`]).
    pub fn logits_copy_time(&self) -> Option<std::time::Duration> {
        self.state.logits_copy_time()
    }

    /// What the last `feed` reused and computed.
    pub fn last_feed(&self) -> FeedStats {
        self.last_feed
    }

    /// Makes the session hold exactly `tokens` and returns the logits after the last one,
    /// `vocab` values. Only the part after the common prefix with the cached tokens is run.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<&[f32]> {
        if tokens.is_empty() {
            return Err(ModelError::NoTokens { what: "feed" });
        }
        let context = self.context_len();
        if tokens.len() > context {
            return Err(ModelError::ContextOverflow {
                tokens: tokens.len(),
                context,
            });
        }
        let mut common = self
            .tokens
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        if common == tokens.len() && common == self.tokens.len() && self.has_logits {
            self.last_feed = FeedStats {
                reused: common,
                computed: 0,
            };
            return Ok(self.state.logits());
        }
        if common == tokens.len() {
            // Everything is cached but we need the logits after the last token: run it again.
            common -= 1;
        }
        self.truncate(common);
        self.run(&tokens[common..])?;
        self.last_feed = FeedStats {
            reused: common,
            computed: tokens.len() - common,
        };
        Ok(self.state.logits())
    }

    /// Appends `tokens` to what the session holds and returns the logits after the last one.
    pub fn append(&mut self, tokens: &[u32]) -> Result<&[f32]> {
        if tokens.is_empty() {
            return Err(ModelError::NoTokens { what: "append" });
        }
        let total = self.tokens.len() + tokens.len();
        if total > self.context_len() {
            return Err(ModelError::ContextOverflow {
                tokens: total,
                context: self.context_len(),
            });
        }
        let reused = self.tokens.len();
        self.run(tokens)?;
        self.last_feed = FeedStats {
            reused,
            computed: tokens.len(),
        };
        Ok(self.state.logits())
    }

    /// Runs `tokens` (at least one) in chunks; the logits after the last are in the state.
    fn run(&mut self, tokens: &[u32]) -> Result<()> {
        self.has_logits = false;
        for chunk in tokens.chunks(self.chunk) {
            if let Err(e) = self.model.forward(chunk, &mut self.state) {
                // Keep tokens and cache in step: drop whatever the failed chunk wrote.
                self.state.truncate(self.tokens.len());
                return Err(e);
            }
            self.tokens.extend_from_slice(chunk);
        }
        self.has_logits = true;
        Ok(())
    }

    /// Cuts the session back to its first `len` tokens.
    pub fn truncate(&mut self, len: usize) {
        if len < self.tokens.len() {
            self.tokens.truncate(len);
            self.state.truncate(len);
            self.has_logits = false;
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Saves the current state.
    pub fn snapshot(&self) -> Result<SessionSnapshot> {
        Ok(SessionSnapshot {
            tokens: self.tokens.clone(),
            state: self.state.snapshot()?,
            has_logits: self.has_logits,
        })
    }

    /// A snapshot of the positions `start..` only (the tokens and logits after them too): to
    /// be written after the first `start` tokens ([`Session::restore_delta`]). Native engine.
    pub fn snapshot_from(&self, start: usize) -> Result<SessionSnapshot> {
        Ok(SessionSnapshot {
            tokens: self.tokens.clone(),
            state: self.state.snapshot_from(start)?,
            has_logits: self.has_logits,
        })
    }

    /// Makes the session hold the tokens of the delta `snap`: it must hold its first
    /// `snap.start()` tokens (and may hold more, which are cut).
    pub fn restore_delta(&mut self, snap: &SessionSnapshot) -> Result<()> {
        let start = snap.start();
        if start == 0 || self.tokens.len() < start || self.tokens[..start] != snap.tokens[..start] {
            return Err(ModelError::Snapshot(format!(
                "the saved tokens {start}.. follow other tokens than the session holds"
            )));
        }
        self.truncate(start);
        self.state.restore_delta(&snap.state)?;
        self.tokens.clone_from(&snap.tokens);
        self.has_logits = snap.has_logits;
        Ok(())
    }

    /// Returns to a saved state.
    pub fn restore(&mut self, snap: &SessionSnapshot) -> Result<()> {
        self.state.restore(&snap.state)?;
        self.tokens.clone_from(&snap.tokens);
        self.has_logits = snap.has_logits;
        Ok(())
    }
}
