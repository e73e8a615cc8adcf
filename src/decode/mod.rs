//! The decode layer, above the model and the constraint engine: what every caller that asks
//! the model for text uses.
//!
//! - [`Decoder`]: one model [`Session`] (its KV cache), the [`ConstraintCompiler`] and a cache
//!   of compiled constraints, the sampling settings with a seed that moves on each call, and
//!   whether the cache's prefix is reused. The agent's [`crate::agent::ModelPolicy`], function
//!   calling ([`crate::call::FunctionCaller`]) and the naive baseline decode through one.
//! - [`generate`]: the decode loop (mask, sample, fast-forward forced tokens, stream, stop).
//! - [`bench`]: the throughput measurements behind `cairn bench`.
//! - [`prompt_cache`]: the KV cache of a prompt's fixed beginning kept in a file, read by the
//!   next process instead of computed again.
//!
//! The model knows nothing of constraints; this layer joins the two.

pub mod bench;
pub mod generate;
pub mod prompt_cache;

use std::collections::HashMap;

use crate::constrain::{Constraint, ConstraintCompiler, ConstraintError};
use crate::model::sampling::SamplingParams;
use crate::model::{LoadedModel, Session};
use generate::{generate_constrained, GenerateError, GenerateOptions, Generation};

/// How many compiled constraints a [`Decoder`] keeps; past that the cache starts again (the
/// agent compiles one per set of allowed tools, so a task uses a handful).
pub const MAX_CACHED_CONSTRAINTS: usize = 64;

/// The run of tokens of which a [`Decoder`]'s output may not hold a third copy within one
/// generation ([`generate::GenerateOptions::no_repeat_ngram`]): long enough that no reply of
/// the calls suite changed with it (a step's answer may say "6.90 euros for orders below 100
/// euros" three times), short enough to turn a loop after a few words. Regression: the 1.5B model wrote `AND city = 'Amersfoort' AND created_at = …`
/// again and again in one query until the 512-token limit cut the step, and spent 60 s on it.
pub const NO_REPEAT_NGRAM: usize = 16;

/// One model session with its constraint compiler and compiled constraints: the one way the
/// agent, function calling and the baseline decode.
pub struct Decoder {
    lm: LoadedModel,
    session: Session,
    /// Built on the first constrained call when the decoder was made without one.
    compiler: Option<ConstraintCompiler>,
    /// Compiled constraints by key (the schema or grammar text); a clone serves each call.
    constraints: HashMap<String, Constraint>,
    sampling: SamplingParams,
    reuse: bool,
    /// Generations so far: the seed of each call is the user's seed plus this.
    calls: u64,
    /// [`Decoder::next_logits`] has just run a prompt: the next generation keeps it even
    /// with reuse off.
    primed: bool,
    /// Where the state after a prompt's fixed beginning is kept between processes.
    prompt_cache: Option<prompt_cache::PromptCache>,
}

impl Decoder {
    /// A decoder on `lm` sampling with `sampling`; builds the constraint engine's token trie
    /// (about half a second for a 150k vocabulary).
    pub fn new(lm: LoadedModel, sampling: SamplingParams) -> Result<Self, ConstraintError> {
        let compiler = ConstraintCompiler::new(&lm.tokenizer, lm.model.config.vocab)?;
        Ok(Self::with_compiler(lm, compiler, sampling))
    }

    /// A decoder on `lm` whose token trie is built only if a constraint is ever asked for (free
    /// generation does not pay for it).
    pub fn lazy(lm: LoadedModel, sampling: SamplingParams) -> Self {
        Self::with_compiler_opt(lm, None, sampling)
    }

    /// A decoder on `lm` sharing an already built compiler (batch jobs share one token trie).
    pub fn with_compiler(
        lm: LoadedModel,
        compiler: ConstraintCompiler,
        sampling: SamplingParams,
    ) -> Self {
        Self::with_compiler_opt(lm, Some(compiler), sampling)
    }

    fn with_compiler_opt(
        lm: LoadedModel,
        compiler: Option<ConstraintCompiler>,
        sampling: SamplingParams,
    ) -> Self {
        let session = lm.session();
        Decoder {
            lm,
            session,
            compiler,
            constraints: HashMap::new(),
            sampling,
            reuse: true,
            calls: 0,
            primed: false,
            prompt_cache: None,
        }
    }

    /// Keeps the state after a prompt's fixed beginning in `cache` ([`Decoder::warm_prefix`]).
    pub fn set_prompt_cache(&mut self, cache: prompt_cache::PromptCache) {
        self.prompt_cache = Some(cache);
    }

    /// Makes the KV cache hold `ids[..b]` for each of `bounds` in turn (the ends of the fixed
    /// parts of the prompts that follow: the system message, then the worked example), each
    /// part from the prompt cache when it has it (the first whole, each later one as the
    /// positions after the one before), else computed and written there for the next time.
    /// Nothing is done without a prompt cache, with reuse off, for a first part shorter than
    /// [`prompt_cache::MIN_TOKENS`] or a later one shorter than [`prompt_cache::MIN_PART`],
    /// or for a part the KV cache already holds. What was read or written, or each error as a
    /// message to report (the KV cache is then as it would be without the prompt cache).
    pub fn warm_prefix(
        &mut self,
        ids: &[u32],
        bounds: &[usize],
    ) -> Vec<Result<prompt_cache::CacheUse, String>> {
        let mut out = Vec::new();
        if !self.reuse || self.prompt_cache.is_none() {
            return out;
        }
        let mut prev = 0;
        for &b in bounds {
            let short = if prev == 0 {
                prompt_cache::MIN_TOKENS
            } else {
                prompt_cache::MIN_PART
            };
            if b > ids.len() || b < prev + short {
                continue;
            }
            let prefix = &ids[..b];
            let held = self.session.tokens();
            if held.len() >= b && held[..b] == *prefix {
                prev = b;
                continue;
            }
            let Some(cache) = self.prompt_cache.as_mut() else {
                break;
            };
            let start = std::time::Instant::now();
            let mut failed = None;
            match cache.read(&self.session, prefix, prev) {
                Ok(Some((snap, used))) => {
                    let restored = if prev == 0 {
                        self.session.restore(&snap)
                    } else {
                        self.session.restore_delta(&snap)
                    };
                    match restored {
                        Ok(()) => {
                            out.push(Ok(used));
                            prev = b;
                            continue;
                        }
                        Err(e) => failed = Some(format!("the prompt cache could not be used: {e}")),
                    }
                }
                Ok(None) => {}
                Err(e) => failed = Some(e),
            }
            if let Some(e) = failed {
                out.push(Err(e));
            }
            // Computed here as the prompt would compute it, then kept.
            let snap = match self.session.feed(prefix) {
                Err(e) => {
                    out.push(Err(format!(
                        "the prompt's beginning could not be computed: {e}"
                    )));
                    break;
                }
                Ok(_) if prev == 0 => self.session.snapshot(),
                Ok(_) => self.session.snapshot_from(prev),
            };
            let written = match snap {
                Err(e) => Err(format!("the prompt cache could not be written: {e}")),
                Ok(snap) => cache.write(&snap),
            };
            match written {
                Err(e) => out.push(Err(e)),
                Ok(None) => {}
                Ok(Some((file, bytes))) => out.push(Ok(prompt_cache::CacheUse {
                    written: true,
                    tokens: b - prev,
                    bytes,
                    ms: start.elapsed().as_secs_f64() * 1000.0,
                    file,
                })),
            }
            prev = b;
        }
        out
    }

    /// The loaded model.
    pub fn model(&self) -> &LoadedModel {
        &self.lm
    }

    /// A second decoder on the same model with the same sampling and a KV cache of its own
    /// (empty), for generations in another context that must not evict this one's cache.
    pub fn sibling(&self) -> Decoder {
        Decoder::lazy(self.lm.clone(), self.sampling)
    }

    /// The sampling settings of the following calls.
    pub fn sampling(&self) -> SamplingParams {
        self.sampling
    }

    /// Sets the sampling of the following calls (the seed still moves on with each call).
    pub fn set_sampling(&mut self, sampling: SamplingParams) {
        self.sampling = sampling;
    }

    /// Turns reuse of the KV cache's common prefix on or off for the following calls (off:
    /// every prompt is prefilled whole, to measure what reuse saves).
    pub fn set_prefix_reuse(&mut self, reuse: bool) {
        self.reuse = reuse;
    }

    /// Empties the KV cache: the next call prefills its whole prompt.
    pub fn clear_cache(&mut self) {
        self.session.clear();
    }

    /// The constraint cached under `key`, or the one `compile` makes with the compiler (then
    /// cached; the compiler is built first if this decoder has none yet). A fresh clone each
    /// time: a constraint holds one generation's parser state.
    pub fn constraint<E: From<ConstraintError>>(
        &mut self,
        key: &str,
        compile: impl FnOnce(&ConstraintCompiler) -> Result<Constraint, E>,
    ) -> Result<Constraint, E> {
        if let Some(c) = self.constraints.get(key) {
            return Ok(c.clone());
        }
        let compiler = match self.compiler.take() {
            Some(c) => c,
            None => ConstraintCompiler::new(&self.lm.tokenizer, self.lm.model.config.vocab)?,
        };
        let c = compile(&compiler);
        self.compiler = Some(compiler);
        let c = c?;
        if self.constraints.len() >= MAX_CACHED_CONSTRAINTS {
            self.constraints.clear();
        }
        self.constraints.insert(key.to_string(), c.clone());
        Ok(c)
    }

    /// Drops the constraint cached under `key`, so that its next use compiles it anew. After
    /// a constraint failed while decoding: its clones share the lexer, whose error stays.
    pub fn forget_constraint(&mut self, key: &str) {
        self.constraints.remove(key);
    }

    /// The logits of the token after the prompt `ids`, and how many of its tokens the KV
    /// cache already held: the prompt is run (reusing the cache's common prefix) and kept, so
    /// a [`Decoder::generate`] on the same ids that follows starts from it without running it
    /// again.
    pub fn next_logits(&mut self, ids: &[u32]) -> Result<(Vec<f32>, usize), GenerateError> {
        if !self.reuse {
            self.session.clear();
        }
        self.primed = true;
        let logits = self.session.feed(ids)?.to_vec();
        Ok((logits, self.session.last_feed().reused))
    }

    /// Generates at most `max_tokens` after the prompt `ids`, under `constraint` when given.
    /// The KV cache keeps what it shares with `ids` (unless reuse is off), and each call
    /// samples with its own seed, reproducible from the user's.
    pub fn generate(
        &mut self,
        ids: &[u32],
        max_tokens: usize,
        constraint: Option<&mut Constraint>,
    ) -> Result<Generation, GenerateError> {
        self.generate_streaming(ids, max_tokens, constraint, &mut |_| Ok(()))
    }

    /// Like [`Decoder::generate`], handing each piece of text to `on_text` as it is decoded.
    pub fn generate_streaming(
        &mut self,
        ids: &[u32],
        max_tokens: usize,
        constraint: Option<&mut Constraint>,
        on_text: &mut dyn FnMut(&str) -> std::io::Result<()>,
    ) -> Result<Generation, GenerateError> {
        self.generate_full(ids, max_tokens, constraint, on_text, None)
    }

    /// Free generation that stops ([`generate::StopReason::Until`]) as soon as `until`
    /// returns true for the text generated so far: the caller can then add tokens of its own
    /// (a checked result) and go on with a call whose prompt is `ids`, the output and those.
    pub fn generate_until(
        &mut self,
        ids: &[u32],
        max_tokens: usize,
        until: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Generation, GenerateError> {
        self.generate_full(ids, max_tokens, None, &mut |_| Ok(()), Some(until))
    }

    fn generate_full(
        &mut self,
        ids: &[u32],
        max_tokens: usize,
        constraint: Option<&mut Constraint>,
        on_text: &mut dyn FnMut(&str) -> std::io::Result<()>,
        until: Option<&mut dyn FnMut(&str) -> bool>,
    ) -> Result<Generation, GenerateError> {
        if !self.reuse && !self.primed {
            self.session.clear();
        }
        self.primed = false;
        let opts = GenerateOptions {
            max_tokens,
            sampling: SamplingParams {
                seed: self.sampling.seed.wrapping_add(self.calls),
                ..self.sampling
            },
            no_repeat_ngram: NO_REPEAT_NGRAM,
        };
        self.calls += 1;
        generate_constrained(
            &mut self.session,
            &self.lm.tokenizer,
            ids,
            &opts,
            constraint,
            on_text,
            until,
        )
    }
}
