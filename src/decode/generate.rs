//! The decode loop: feed the prompt, then mask, sample, stream and feed tokens until an
//! end-of-generation token, `max_tokens`, or the end of the context.
//!
//! Under a [`Constraint`] each step is: mask the logits to the tokens the grammar allows,
//! sample one, let the grammar consume it, then take the tokens the grammar now forces
//! (fast-forward) and feed the sampled token and the forced ones to the model in one batched
//! forward. A sampled token that, with the tokens it forces, would complete one of the
//! constraint's forbidden texts is taken back, refused and another sampled. [`Generation`]
//! counts sampled and forced tokens and says when the limit cut a constrained value short
//! (`incomplete`).

use std::time::{Duration, Instant};

use crate::constrain::{Constraint, ConstraintError};
use crate::model::error::{ModelError, Result};
use crate::model::sampling::{Sampler, SamplingParams};
use crate::model::session::Session;
use crate::model::tokenizer::{StreamDecoder, Tokenizer};

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The most tokens to generate.
    pub max_tokens: usize,
    /// How to pick tokens.
    pub sampling: SamplingParams,
    /// When above 0: no sampled token may complete a third copy of a run of this many tokens
    /// in the output ([`repeat_bans`]), so that a model caught in a loop (a query's
    /// `AND city = 'Amersfoort' AND …` written again and again to the token limit) is turned
    /// out of it. Tokens the constraint forces are never refused.
    pub no_repeat_ngram: usize,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            sampling: SamplingParams::default(),
            no_repeat_ngram: 0,
        }
    }
}

/// The tokens that would complete, after `tokens`, a third copy of a run of `n` tokens: for
/// each earlier place where the last `n - 1` tokens occur, the token that followed them, when
/// it followed them twice or more. One copy is allowed: a final answer often repeats its
/// thought word for word, a loop repeats itself many times.
pub fn repeat_bans(tokens: &[u32], n: usize) -> Vec<u32> {
    if n < 2 || tokens.len() < n {
        return Vec::new();
    }
    let tail = &tokens[tokens.len() + 1 - n..];
    let mut next: Vec<u32> = (0..tokens.len() + 1 - n)
        .filter(|&i| tokens[i..i + n - 1] == *tail)
        .map(|i| tokens[i + n - 1])
        .collect();
    next.sort_unstable();
    let mut bans: Vec<u32> = next
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    bans.dedup();
    bans
}

/// Sets the logits of `bans` to minus infinity, unless that would leave no token allowed (a
/// constraint that permits only a banned token wins over the ban).
fn refuse(logits: &mut [f32], bans: &[u32]) {
    let allowed = logits
        .iter()
        .enumerate()
        .any(|(i, l)| l.is_finite() && bans.binary_search(&(i as u32)).is_err());
    if !allowed {
        return;
    }
    for &b in bans {
        if let Some(l) = logits.get_mut(b as usize) {
            *l = f32::NEG_INFINITY;
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
    /// The constraint's grammar is complete and allows nothing but the end of the turn.
    Complete,
    /// The caller's `until` check said the text so far is where to stop.
    Until,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Eos => "eos",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Context => "context",
            StopReason::Complete => "complete",
            StopReason::Until => "until",
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
    /// Tokens chosen by the sampler.
    pub sampled_tokens: usize,
    /// Tokens forced by the constraint and fed without sampling (0 when unconstrained).
    pub forced_tokens: usize,
    /// Of those, the ones forced before the first sampled token and fed with the prompt.
    pub lead_tokens: usize,
    /// Whether a constraint was in force.
    pub constrained: bool,
    /// A constraint was in force and the output is not a complete sentence of its grammar:
    /// `max_tokens` or the context cut it short, so it is not valid output of the schema.
    pub incomplete: bool,
}

impl Generation {
    /// Generated tokens per second after the first token.
    pub fn decode_tokens_per_second(&self) -> f64 {
        let n = self.tokens.len().saturating_sub(self.lead_tokens + 1);
        if n == 0 || self.decode_time.is_zero() {
            0.0
        } else {
            n as f64 / self.decode_time.as_secs_f64()
        }
    }
}

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The model runtime failed (context overflow, a tensor error, a closed stdout).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The constraint failed while decoding.
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
}

impl From<crate::model::tokenizer::TokenizerError> for GenerateError {
    fn from(e: crate::model::tokenizer::TokenizerError) -> Self {
        GenerateError::Model(e.into())
    }
}

impl From<crate::model::template::TemplateError> for GenerateError {
    fn from(e: crate::model::template::TemplateError) -> Self {
        GenerateError::Model(e.into())
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
    generate_constrained(session, tokenizer, prompt, opts, None, on_text, None).map_err(|e| match e
    {
        GenerateError::Model(e) => e,
        // Without a constraint there is nothing that could raise one.
        GenerateError::Constraint(e) => ModelError::Constraint(e.to_string()),
    })
}

/// Like [`generate`], with every token allowed by `constraint` when one is given, and
/// stopping ([`StopReason::Until`]) as soon as `until`, when given, returns true for the text
/// generated so far (checked after each token and the tokens forced with it). The last token
/// is then in the output but not yet run through the model: a following call whose prompt
/// extends this one's prompt and output runs it then, with what the caller added.
pub fn generate_constrained(
    session: &mut Session,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    mut constraint: Option<&mut Constraint>,
    on_text: &mut dyn FnMut(&str) -> std::io::Result<()>,
    mut until: Option<&mut dyn FnMut(&str) -> bool>,
) -> std::result::Result<Generation, GenerateError> {
    let start = Instant::now();
    let context = session.context_len();
    if prompt.len() > context {
        return Err(ModelError::ContextOverflow {
            tokens: prompt.len(),
            context,
        }
        .into());
    }
    let mut sampler = Sampler::new(&opts.sampling);
    let eos = tokenizer.eos_ids();
    let mut out = Output {
        tokens: Vec::new(),
        text: String::new(),
        decoder: tokenizer.stream_decoder(),
    };
    // What the grammar forces before the first sampled token (`{"thought":"`) rides along
    // with the prompt.
    let budget = opts.max_tokens.min(context - prompt.len());
    let lead = match constraint.as_deref_mut() {
        Some(c) => c.forced_tokens(budget)?,
        None => Vec::new(),
    };
    session.feed(&[prompt, &lead[..]].concat())?;
    // The masked copy of the logits under a constraint, reused every step.
    let mut masked: Vec<f32> = Vec::new();
    let reused = session.last_feed().reused;
    out.push(&lead, on_text)?;
    let mut forced = lead.len();
    let mut sampled = 0;
    // Tokens generated but not yet run through the model: run them only if we go on.
    let mut pending: Vec<u32> = Vec::new();
    let mut ttft = None;
    let mut decode_start = Instant::now();
    let stop = loop {
        if constraint.as_deref().is_some_and(Constraint::is_finished) {
            break StopReason::Complete;
        }
        if out.tokens.len() >= opts.max_tokens {
            break StopReason::MaxTokens;
        }
        if session.tokens().len() + pending.len() > context {
            break StopReason::Context;
        }
        if !pending.is_empty() {
            session.append(&pending)?;
        }
        let logits = session.logits()?;
        let bans = repeat_bans(&out.tokens, opts.no_repeat_ngram);
        // Room for the tokens a sampled one forces.
        let room = (opts.max_tokens - out.tokens.len() - 1)
            .min(context.saturating_sub(session.tokens().len() + 1));
        let (token, tail) = match constraint.as_deref_mut() {
            Some(c) => {
                masked.clear();
                masked.extend_from_slice(logits);
                c.mask_logits(&mut masked)?;
                refuse(&mut masked, &bans);
                let pick = Pick {
                    eos,
                    room,
                    tokenizer,
                    before: &out.text,
                };
                pick.sample(c, &mut sampler, &mut masked)?
            }
            None if !bans.is_empty() => {
                masked.clear();
                masked.extend_from_slice(logits);
                refuse(&mut masked, &bans);
                (sampler.sample(&masked), Vec::new())
            }
            None => (sampler.sample(logits), Vec::new()),
        };
        if ttft.is_none() {
            ttft = Some(start.elapsed());
            decode_start = Instant::now();
        }
        if eos.contains(&token) {
            break StopReason::Eos;
        }
        sampled += 1;
        pending = vec![token];
        pending.extend(tail);
        forced += pending.len() - 1;
        out.push(&pending, on_text)?;
        if until.as_deref_mut().is_some_and(|u| u(&out.text)) {
            break StopReason::Until;
        }
    };
    // Bytes of a character cut off by the stop still belong to the text.
    if let Some(rest) = out.decoder.finish() {
        out.text.push_str(&rest);
        on_text(&rest).map_err(ModelError::Output)?;
    }
    let constrained = constraint.is_some();
    let incomplete = match constraint {
        Some(c) => stop != StopReason::Eos && !c.is_accepting(),
        None => false,
    };
    Ok(Generation {
        text: out.text,
        tokens: out.tokens,
        stop,
        prompt_tokens: prompt.len(),
        reused_tokens: reused,
        time_to_first_token: ttft.unwrap_or_else(|| start.elapsed()),
        decode_time: decode_start.elapsed(),
        sampled_tokens: sampled,
        forced_tokens: forced,
        lead_tokens: lead.len(),
        constrained,
        incomplete,
    })
}

/// What choosing a token under a constraint needs besides the constraint and the logits.
struct Pick<'a> {
    /// The tokens that end generation (sampled, never consumed by the grammar).
    eos: &'a [u32],
    /// The most tokens the grammar may force after the sampled one.
    room: usize,
    tokenizer: &'a Tokenizer,
    /// The text generated so far.
    before: &'a str,
}

impl Pick<'_> {
    /// Samples a token from the `masked` logits and lets the constraint consume it and the
    /// tokens it then forces, which are returned with it (an end-of-generation token is
    /// returned alone, not consumed). A token whose text, with what it forces, completes one
    /// of the constraint's forbidden texts is taken back and refused, and another sampled,
    /// unless no other token is allowed: then the grammar wins, as over the repeat bans.
    fn sample(
        &self,
        c: &mut Constraint,
        sampler: &mut Sampler,
        masked: &mut [f32],
    ) -> std::result::Result<(u32, Vec<u32>), GenerateError> {
        loop {
            let token = sampler.sample(masked);
            if self.eos.contains(&token) {
                return Ok((token, Vec::new()));
            }
            c.consume(token)?;
            let tail = c.forced_tokens(self.room)?;
            if c.forbidden().is_empty() {
                return Ok((token, tail));
            }
            let ids: Vec<u32> = std::iter::once(token).chain(tail.iter().copied()).collect();
            let new = self.tokenizer.decode(&ids).map_err(ModelError::from)?;
            if !c.completes_forbidden(self.before, &new) {
                return Ok((token, tail));
            }
            if let Some(l) = masked.get_mut(token as usize) {
                *l = f32::NEG_INFINITY;
            }
            if !masked.iter().any(|l| l.is_finite()) {
                return Ok((token, tail));
            }
            c.rollback(ids.len())?;
        }
    }
}

/// The generated tokens and text, streamed as they come.
struct Output {
    tokens: Vec<u32>,
    text: String,
    decoder: StreamDecoder,
}

impl Output {
    fn push(
        &mut self,
        tokens: &[u32],
        on_text: &mut dyn FnMut(&str) -> std::io::Result<()>,
    ) -> Result<()> {
        for &token in tokens {
            self.tokens.push(token);
            if let Some(piece) = self.decoder.push(token)? {
                self.text.push_str(&piece);
                on_text(&piece).map_err(ModelError::Output)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the 1.5B model wrote `AND city = 'Amersfoort' AND created_at = …` again
    /// and again in one query until the 512-token limit cut the step.
    #[test]
    fn a_third_copy_of_a_run_is_refused_and_a_second_is_not() {
        let run = [7, 8, 9, 10];
        // One copy so far, then the start of a second: nothing is refused.
        let mut t: Vec<u32> = run.to_vec();
        t.extend([7, 8, 9]);
        assert!(repeat_bans(&t, 4).is_empty());
        // Two copies, then the start of a third: its last token is refused.
        let mut t: Vec<u32> = [run, run].concat();
        t.extend([7, 8, 9]);
        assert_eq!(repeat_bans(&t, 4), [10]);
        // Shorter than the run, or off: nothing.
        assert!(repeat_bans(&[1, 1, 1], 4).is_empty());
        assert!(repeat_bans(&[1; 40], 0).is_empty());
        // A token repeated alone is a run of its own.
        assert_eq!(repeat_bans(&[5; 10], 4), [5]);
    }

    #[test]
    fn a_refused_token_is_masked_unless_it_is_the_only_one_allowed() {
        let mut l = vec![1.0, 2.0, f32::NEG_INFINITY, 0.5];
        refuse(&mut l, &[1]);
        assert_eq!(l[1], f32::NEG_INFINITY);
        assert_eq!(l[0], 1.0);
        // A constraint that allows only the refused token wins.
        let mut l = vec![f32::NEG_INFINITY, 2.0, f32::NEG_INFINITY];
        refuse(&mut l, &[1]);
        assert_eq!(l[1], 2.0);
    }
}
