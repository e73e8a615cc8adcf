//! The decode loop: feed the prompt, then sample, stream and feed one token at a time until
//! an end-of-generation token, `max_tokens`, or the end of the context.

use std::time::{Duration, Instant};

use super::arch::logits_to_vec;
use super::gguf::{ModelError, Result};
use super::sampling::{Sampler, SamplingParams};
use super::session::Session;
use super::tokenizer::Tokenizer;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The most tokens to generate.
    pub max_tokens: usize,
    /// How to pick tokens.
    pub sampling: SamplingParams,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            sampling: SamplingParams::default(),
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model produced an end-of-generation token.
    Eos,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The context window is full.
    Context,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Eos => "eos",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Context => "context",
        })
    }
}

/// The outcome of one generation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Generation {
    /// The generated text (the end-of-generation token excluded).
    pub text: String,
    /// The generated token ids (the end-of-generation token excluded).
    pub tokens: Vec<u32>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens found in the KV cache and not recomputed.
    pub reused_tokens: usize,
    /// Time to process the prompt and pick the first token.
    pub time_to_first_token: Duration,
    /// Time spent generating after the first token.
    pub decode_time: Duration,
}

impl Generation {
    /// Generated tokens per second after the first token.
    pub fn decode_tokens_per_second(&self) -> f64 {
        let n = self.tokens.len().saturating_sub(1);
        if n == 0 || self.decode_time.is_zero() {
            0.0
        } else {
            n as f64 / self.decode_time.as_secs_f64()
        }
    }
}

/// Generates from `prompt` (token ids) in `session`, calling `on_text` with each newly
/// completed piece of text. An error from `on_text` (a closed stdout) stops generation.
pub fn generate(
    session: &mut Session,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    on_text: &mut dyn FnMut(&str) -> std::io::Result<()>,
) -> Result<Generation> {
    let start = Instant::now();
    let context = session.context_len();
    if prompt.len() > context {
        return Err(ModelError::ContextOverflow {
            tokens: prompt.len(),
            context,
        });
    }
    let mut sampler = Sampler::new(&opts.sampling);
    let eos = tokenizer.eos_ids();
    let mut decoder = tokenizer.stream_decoder();
    let mut logits = session.feed(prompt)?;
    let reused = session.last_feed().reused;
    let mut out = Vec::new();
    let mut text = String::new();
    let mut ttft = None;
    let mut decode_start = Instant::now();
    let stop = loop {
        if out.len() >= opts.max_tokens {
            break StopReason::MaxTokens;
        }
        let token = sampler.sample(&logits_to_vec(&logits)?);
        if ttft.is_none() {
            ttft = Some(start.elapsed());
            decode_start = Instant::now();
        }
        if eos.contains(&token) {
            break StopReason::Eos;
        }
        out.push(token);
        if let Some(piece) = decoder.push(token)? {
            text.push_str(&piece);
            on_text(&piece).map_err(ModelError::Output)?;
        }
        if out.len() >= opts.max_tokens {
            break StopReason::MaxTokens;
        }
        if session.tokens().len() >= context {
            break StopReason::Context;
        }
        logits = session.append(&[token])?;
    };
    // Bytes of a character cut off by the stop still belong to the text.
    if let Some(rest) = decoder.finish() {
        text.push_str(&rest);
        on_text(&rest).map_err(ModelError::Output)?;
    }
    Ok(Generation {
        text,
        tokens: out,
        stop,
        prompt_tokens: prompt.len(),
        reused_tokens: reused,
        time_to_first_token: ttft.unwrap_or_else(|| start.elapsed()),
        decode_time: decode_start.elapsed(),
    })
}
