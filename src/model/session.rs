//! A [`Session`] is one conversation's view of the model: the tokens whose keys and values sit
//! in its KV cache.
//!
//! [`Session::feed`] takes the *whole* token sequence the caller wants the model to have seen,
//! finds the common prefix with what is cached, cuts the cache back to it and runs only the
//! rest, in chunks. This is what makes a multi-round agent task cheap: each round's prompt
//! repeats the previous one and adds an observation, and only the observation is computed.

use std::sync::Arc;

use candle_core::Tensor;

use super::arch::Model;
use super::gguf::{ModelError, Result};
use super::kv_cache::{KvCache, KvSnapshot};

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
    cache: KvCache,
    tokens: Vec<u32>,
    last_logits: Option<Tensor>,
    chunk: usize,
    last_feed: FeedStats,
}

/// A saved session state: tokens, cache contents and the logits after them.
#[derive(Debug, Clone)]
pub struct SessionSnapshot {
    tokens: Vec<u32>,
    cache: KvSnapshot,
    last_logits: Option<Tensor>,
}

impl Session {
    /// An empty session on `model`.
    pub fn new(model: Arc<Model>) -> Self {
        let cache = model.new_cache();
        Session {
            model,
            cache,
            tokens: Vec::new(),
            last_logits: None,
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

    /// The KV cache (for inspection: length, capacity, bytes).
    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// What the last `feed` reused and computed.
    pub fn last_feed(&self) -> FeedStats {
        self.last_feed
    }

    /// Makes the session hold exactly `tokens` and returns the logits after the last one,
    /// shape `(vocab,)`. Only the part after the common prefix with the cached tokens is run.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(ModelError::Candle(candle_core::Error::Msg(
                "feed needs at least one token".into(),
            )));
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
        if common == tokens.len() && common == self.tokens.len() {
            if let Some(l) = &self.last_logits {
                self.last_feed = FeedStats {
                    reused: common,
                    computed: 0,
                };
                return Ok(l.clone());
            }
        }
        if common == tokens.len() {
            // Everything is cached but we need the logits after the last token: run it again.
            common -= 1;
        }
        self.truncate(common);
        let logits = self.run(&tokens[common..])?;
        self.last_feed = FeedStats {
            reused: common,
            computed: tokens.len() - common,
        };
        Ok(logits)
    }

    /// Appends `tokens` to what the session holds and returns the logits after the last one.
    pub fn append(&mut self, tokens: &[u32]) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(ModelError::Candle(candle_core::Error::Msg(
                "append needs at least one token".into(),
            )));
        }
        let total = self.tokens.len() + tokens.len();
        if total > self.context_len() {
            return Err(ModelError::ContextOverflow {
                tokens: total,
                context: self.context_len(),
            });
        }
        let reused = self.tokens.len();
        let logits = self.run(tokens)?;
        self.last_feed = FeedStats {
            reused,
            computed: tokens.len(),
        };
        Ok(logits)
    }

    fn run(&mut self, tokens: &[u32]) -> Result<Tensor> {
        let mut logits = None;
        for chunk in tokens.chunks(self.chunk) {
            match self.model.forward(chunk, &mut self.cache) {
                Ok(l) => {
                    self.tokens.extend_from_slice(chunk);
                    logits = Some(l);
                }
                Err(e) => {
                    // Keep tokens and cache in step: drop whatever the failed chunk wrote.
                    self.cache.truncate(self.tokens.len());
                    self.last_logits = None;
                    return Err(e);
                }
            }
        }
        self.last_logits = logits.clone();
        logits.ok_or_else(|| ModelError::Candle(candle_core::Error::Msg("nothing to run".into())))
    }

    /// Cuts the session back to its first `len` tokens.
    pub fn truncate(&mut self, len: usize) {
        if len < self.tokens.len() {
            self.tokens.truncate(len);
            self.cache.truncate(len);
            self.last_logits = None;
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
            cache: self.cache.snapshot()?,
            last_logits: self.last_logits.clone(),
        })
    }

    /// Returns to a saved state.
    pub fn restore(&mut self, snap: &SessionSnapshot) -> Result<()> {
        self.cache.restore(&snap.cache)?;
        self.tokens = snap.tokens.clone();
        self.last_logits = snap.last_logits.clone();
        Ok(())
    }
}
