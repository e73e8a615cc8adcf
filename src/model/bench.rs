//! Throughput measurements behind `cairn bench`, made the way llama-bench makes them:
//! prefill tokens/s for a P-token prompt from an empty cache, decode tokens/s for N tokens
//! generated one at a time from an empty cache, after a warm-up run, repeated R times and
//! reported as median and min–max. Also time-to-first-token for a short chat prompt.

use std::time::Instant;

use serde::Serialize;

use super::arch::logits_to_vec;
use super::gguf::Result;
use super::sampling::{argmax, Rng};
use super::template::Message;
use super::LoadedModel;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Prompt length for the prefill measurement.
    pub prompt_tokens: usize,
    /// Tokens generated for the decode measurement.
    pub gen_tokens: usize,
    /// Timed repetitions of each measurement.
    pub repetitions: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            prompt_tokens: 512,
            gen_tokens: 128,
            repetitions: 3,
        }
    }
}

/// Median and spread of repeated measurements.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stat {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Stat {
    /// Summarises samples (at least one).
    pub fn of(samples: &[f64]) -> Stat {
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Stat {
            median,
            min: s.first().copied().unwrap_or(0.0),
            max: s.last().copied().unwrap_or(0.0),
        }
    }
}

/// The results of one `cairn bench` run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The model file.
    pub model: String,
    /// Its architecture.
    pub arch: String,
    /// Threads used.
    pub threads: usize,
    /// Prompt length measured.
    pub prompt_tokens: usize,
    /// Tokens generated per decode run.
    pub gen_tokens: usize,
    /// Timed repetitions.
    pub repetitions: usize,
    /// Prefill throughput, tokens/s.
    pub prefill_tok_s: Stat,
    /// Decode throughput, tokens/s.
    pub decode_tok_s: Stat,
    /// Time to first token of a short chat prompt, milliseconds.
    pub ttft_ms: Stat,
    /// Tokens in that chat prompt.
    pub ttft_prompt_tokens: usize,
    /// Load time, milliseconds.
    pub load_ms: f64,
    /// Bytes of weights held.
    pub weight_bytes: usize,
    /// Tensors re-quantized to Q8_0 at load.
    pub requantized_tensors: usize,
}

/// Runs the measurements.
pub fn run(
    lm: &LoadedModel,
    threads: usize,
    opts: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchReport> {
    let cfg = &lm.model.config;
    let vocab = cfg.vocab.min(lm.tokenizer.vocab_size()).max(1);
    let mut rng = Rng::new(1234);
    let prompt: Vec<u32> = (0..opts.prompt_tokens)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect();
    let mut session = lm.session();
    let reps = opts.repetitions.max(1);

    progress("warm-up");
    let warm: Vec<u32> = (0..32u32).map(|i| (i * 31 + 7) % vocab as u32).collect();
    session.feed(&warm)?;
    for &t in &warm[..4] {
        session.append(&[t])?;
    }

    let mut prefill = Vec::new();
    if !prompt.is_empty() {
        for r in 0..reps {
            progress(&format!(
                "prefill {} tokens ({}/{reps})",
                prompt.len(),
                r + 1
            ));
            session.clear();
            let t = Instant::now();
            session.feed(&prompt)?;
            prefill.push(prompt.len() as f64 / t.elapsed().as_secs_f64());
        }
    }

    let mut decode = Vec::new();
    if opts.gen_tokens > 0 {
        for r in 0..reps {
            progress(&format!(
                "decode {} tokens ({}/{reps})",
                opts.gen_tokens,
                r + 1
            ));
            session.clear();
            let mut token = prompt.first().copied().unwrap_or(0);
            let t = Instant::now();
            for _ in 0..opts.gen_tokens {
                let logits = session.append(&[token])?;
                token = argmax(&logits_to_vec(&logits)?);
            }
            decode.push(opts.gen_tokens as f64 / t.elapsed().as_secs_f64());
        }
    }

    let chat = lm
        .template
        .render(&[Message::user("What is the capital of France?")], true)?;
    let chat_ids = lm.tokenizer.encode(&chat)?;
    let mut ttft = Vec::new();
    for r in 0..reps {
        progress(&format!("time to first token ({}/{reps})", r + 1));
        session.clear();
        let t = Instant::now();
        let logits = session.feed(&chat_ids)?;
        let _first = argmax(&logits_to_vec(&logits)?);
        ttft.push(t.elapsed().as_secs_f64() * 1000.0);
    }

    Ok(BenchReport {
        model: lm.path.display().to_string(),
        arch: cfg.arch.clone(),
        threads,
        prompt_tokens: opts.prompt_tokens,
        gen_tokens: opts.gen_tokens,
        repetitions: reps,
        prefill_tok_s: Stat::of(&prefill),
        decode_tok_s: Stat::of(&decode),
        ttft_ms: Stat::of(&ttft),
        ttft_prompt_tokens: chat_ids.len(),
        load_ms: lm.load_time.as_secs_f64() * 1000.0,
        weight_bytes: lm.model.report.weight_bytes,
        requantized_tensors: lm.model.report.requantized,
    })
}
