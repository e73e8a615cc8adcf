//! Throughput measurements behind `cairn bench`, made the way llama-bench makes them:
//! prefill tokens/s for a P-token prompt from an empty cache, decode tokens/s for N tokens
//! generated one at a time from an empty cache, after a warm-up run, repeated R times and
//! reported as median and min–max. Also time-to-first-token for a short chat prompt, and
//! constrained decoding: decode tokens/s free and under the agent-step schema on the same
//! chat prompt, the time llguidance takes per mask (mean, p99), and the share of tokens the
//! grammar forced (fed without sampling).
//!
//! Given a llama.cpp `llama-bench` binary ([`BenchOptions::llama_bench`]), it also measures
//! llama.cpp on the same file with the same threads and prompt/generation lengths, one
//! llama-bench run after each of cairn's own repetitions, so that both see the same machine
//! load, and reports the ratios ([`LlamaBenchReport`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use super::generate::GenerateError;
use super::Decoder;
use crate::constrain::ConstraintSpec;
use crate::model::sampling::SamplingParams;
use crate::model::sampling::{argmax, Rng};
use crate::model::template::Message;
use crate::model::LoadedModel;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Prompt length for the prefill measurement.
    pub prompt_tokens: usize,
    /// Tokens generated for the decode measurement.
    pub gen_tokens: usize,
    /// Tokens already in the KV cache when each prefill and decode measurement starts (like
    /// llama-bench -d): an agent's later rounds prefill and decode after thousands of tokens,
    /// where attention costs what it does not at an empty cache.
    pub depth: usize,
    /// Timed repetitions of each measurement.
    pub repetitions: usize,
    /// Also measure constrained decoding under this schema: the agent's step schema for its
    /// built-in tools, given by the caller (`agent::step::builtin_step_schema`), so what is
    /// measured is what the agent decodes under.
    pub step_schema: Option<serde_json::Value>,
    /// A llama-bench binary to measure beside cairn, interleaved run by run.
    pub llama_bench: Option<PathBuf>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            prompt_tokens: 512,
            gen_tokens: 128,
            depth: 0,
            repetitions: 3,
            step_schema: None,
            llama_bench: None,
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
    /// Tokens in the KV cache before each prefill and decode run (`-d`).
    pub depth: usize,
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
    /// Their stored types and counts (`Q5_1 ×24`); empty when every tensor has a kernel.
    pub requantized_types: Vec<String>,
    /// Bytes of the model file.
    pub file_bytes: u64,
    /// Bytes of weights used in place from the mapped file (not copied at load).
    pub mapped_bytes: usize,
    /// Bytes of weights read per decoded token (0 when the engine does not count them).
    pub decode_bytes_per_token: usize,
    /// Memory read bandwidth measured with the engine's threads, GB/s (0 when not measured).
    pub bandwidth_gb_s: f64,
    /// Median decode speed as a share of the bandwidth bound (bandwidth ÷ bytes per token).
    pub decode_bandwidth_share: f64,
    /// The process's peak resident memory at the end of the run, bytes (Linux), and the
    /// KV cache's share of it.
    pub rss_peak_bytes: Option<u64>,
    /// Bytes of KV cache for the longest sequence measured.
    pub kv_cache_bytes: usize,
    /// Constrained vs free decoding, when measured.
    pub constrained: Option<ConstrainedReport>,
    /// The forward pass measured (`native` or `candle`).
    pub engine: String,
    /// The native engine's kernels (`avx512vnni`, `avx2`, `scalar`); empty for candle.
    pub kernels: String,
    /// Where the model ran: `cpu`, `cuda:0`, `metal:0`.
    pub device: String,
    /// On a GPU: the copy of each decoded token's logits to host memory (for the constraint
    /// mask and sampling), microseconds; `None` on the CPU, where there is no copy.
    pub logits_copy_us: Option<Stat>,
    /// On a GPU: that copy's share of a decode step (median copy ÷ median step).
    pub logits_copy_share: Option<f64>,
    /// On a CUDA GPU: bytes of its memory in use at the end of the run (every process's).
    pub gpu_memory_bytes: Option<u64>,
    /// llama.cpp on the same file, when a llama-bench binary was given.
    pub vs_llama_bench: Option<LlamaBenchReport>,
}

/// llama.cpp's figures from its own `llama-bench`, measured in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct LlamaBenchReport {
    /// The binary.
    pub path: String,
    /// Its build (commit) as it reports it.
    pub build: String,
    /// Prefill throughput, tokens/s.
    pub prefill_tok_s: Stat,
    /// Decode throughput, tokens/s.
    pub decode_tok_s: Stat,
    /// cairn's median prefill over llama.cpp's.
    pub prefill_ratio: f64,
    /// cairn's median decode over llama.cpp's.
    pub decode_ratio: f64,
}

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// cairn's own measurement failed.
    #[error(transparent)]
    Generate(#[from] GenerateError),
    /// The llama-bench binary could not be run or its output not read.
    #[error("llama-bench ({path}): {reason}")]
    LlamaBench {
        /// The binary.
        path: PathBuf,
        /// What went wrong, and what to check.
        reason: String,
    },
}

impl From<crate::model::error::ModelError> for BenchError {
    fn from(e: crate::model::error::ModelError) -> Self {
        BenchError::Generate(e.into())
    }
}

impl From<crate::model::tokenizer::TokenizerError> for BenchError {
    fn from(e: crate::model::tokenizer::TokenizerError) -> Self {
        BenchError::Generate(e.into())
    }
}

impl From<crate::model::template::TemplateError> for BenchError {
    fn from(e: crate::model::template::TemplateError) -> Self {
        BenchError::Generate(e.into())
    }
}

/// One llama-bench run of a single test: `-p prompt -n 0` or `-p 0 -n gen`, after `-d depth`
/// tokens already in the cache (no `-d` when `depth` is 0), one repetition,
/// with every layer on the GPU when `gpu` (`-ngl 99`, for a CUDA build of llama-bench) and
/// none otherwise (`-ngl 0`, so a GPU build measures its CPU path as cairn's CPU run does).
/// Returns its tokens/s and the build it reports.
pub fn llama_bench_once(
    exe: &Path,
    model: &Path,
    threads: usize,
    (prompt, gen, depth): (usize, usize, usize),
    gpu: bool,
) -> Result<(f64, String), BenchError> {
    let fail = |reason: String| BenchError::LlamaBench {
        path: exe.to_path_buf(),
        reason,
    };
    let mut cmd = Command::new(exe);
    cmd.arg("-m")
        .arg(model)
        .args(["-t", &threads.to_string()])
        .args(["-p", &prompt.to_string(), "-n", &gen.to_string()]);
    if depth > 0 {
        // Only when asked: llama-bench builds older than the flag refuse it.
        cmd.args(["-d", &depth.to_string()]);
    }
    let out = cmd
        .args(["-ngl", if gpu { "99" } else { "0" }])
        .args(["-r", "1", "-o", "json"])
        .output()
        .map_err(|e| {
            fail(format!(
                "cannot run it: {e}; give the path of llama.cpp's llama-bench binary"
            ))
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(fail(format!("exited with {}: {last}", out.status)));
    }
    parse_llama_bench(&out.stdout, prompt, gen).map_err(fail)
}

/// Reads llama-bench's `-o json` output: the tokens/s of the test with `n_prompt == prompt`
/// and `n_gen == gen`, and the build commit.
pub fn parse_llama_bench(
    stdout: &[u8],
    prompt: usize,
    gen: usize,
) -> Result<(f64, String), String> {
    let v: serde_json::Value = serde_json::from_slice(stdout)
        .map_err(|e| format!("its output is not llama-bench's JSON ({e}); is it llama-bench?"))?;
    let tests = v
        .as_array()
        .ok_or("its JSON output is not a list of tests; is it llama-bench?")?;
    let num = |t: &serde_json::Value, k: &str| t.get(k).and_then(|x| x.as_f64());
    let test = tests
        .iter()
        .find(|t| num(t, "n_prompt") == Some(prompt as f64) && num(t, "n_gen") == Some(gen as f64))
        .ok_or_else(|| format!("its output has no test with -p {prompt} -n {gen}"))?;
    let ts = num(test, "avg_ts").ok_or("a test without `avg_ts` (tokens/s)")?;
    let build = test
        .get("build_commit")
        .and_then(|b| b.as_str())
        .unwrap_or("unknown")
        .to_string();
    Ok((ts, build))
}

/// Free vs constrained decoding of the same chat prompt (greedy, up to `gen_tokens`).
#[derive(Debug, Clone, Serialize)]
pub struct ConstrainedReport {
    /// What constrained it.
    pub schema: String,
    /// Prompt tokens (system message with the tools, one user question).
    pub prompt_tokens: usize,
    /// Free decode throughput, tokens/s.
    pub free_tok_s: Stat,
    /// Constrained decode throughput, tokens/s (sampled and forced tokens alike).
    pub constrained_tok_s: Stat,
    /// Tokens per constrained run (median).
    pub constrained_tokens: f64,
    /// Share of constrained tokens forced by the grammar.
    pub forced_share: f64,
    /// Mask computation per sampled token, microseconds: mean.
    pub mask_us_mean: f64,
    /// Mask computation per sampled token, microseconds: 99th percentile.
    pub mask_us_p99: f64,
    /// Forced-token computation per sampled token, microseconds: mean.
    pub forced_us_mean: f64,
    /// (mask + forced-token time) / (time of one free decode step), mean per sampled token.
    pub overhead_share: f64,
    /// Building the token trie and llguidance's tables for this vocabulary, milliseconds.
    pub trie_ms: f64,
}

/// The agent-step prompt measured: the built-in tools described, one question.
const STEP_SYSTEM: &str = "You are an agent. Reply with one JSON step: a short thought, the \
action and its args. Actions: sql runs one read-only SQLite SELECT on the user's database; \
calculator evaluates an arithmetic expression; search finds passages in the user's own \
documents; final_answer gives the answer to the user.";

fn constrained_vs_free(
    lm: &LoadedModel,
    schema: &serde_json::Value,
    opts: &BenchOptions,
    reps: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<ConstrainedReport, GenerateError> {
    let t = Instant::now();
    // Greedy, as the agent decodes by default.
    let mut decoder = Decoder::new(lm.clone(), SamplingParams::default())?;
    let trie_ms = t.elapsed().as_secs_f64() * 1000.0;
    let spec = ConstraintSpec::JsonSchema(schema.clone());
    let key = schema.to_string();
    let chat = lm.template.render(
        &[
            Message::system(STEP_SYSTEM),
            Message::user("What is 17 * 23?"),
        ],
        true,
    )?;
    let ids = lm.tokenizer.encode(&chat)?;
    let max_tokens = opts.gen_tokens.max(1);
    let (mut free, mut constrained, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
    let (mut masks, mut forced_times) = (Vec::new(), Vec::new());
    let (mut forced, mut total) = (0, 0);
    // One untimed run of each warms the caches.
    for r in 0..=reps {
        progress(&format!("free vs constrained decode ({r}/{reps})"));
        decoder.clear_cache();
        let g = decoder.generate(&ids, max_tokens, None)?;
        let mut constraint =
            decoder.constraint(&key, |c| c.compile(&spec, "the agent's step schema"))?;
        decoder.clear_cache();
        let c = decoder.generate(&ids, max_tokens, Some(&mut constraint))?;
        if r == 0 {
            continue;
        }
        free.push(g.decode_tokens_per_second());
        constrained.push(c.decode_tokens_per_second());
        lengths.push(c.tokens.len() as f64);
        forced += c.forced_tokens;
        total += c.tokens.len();
        masks.extend(
            constraint
                .mask_times()
                .iter()
                .map(|d| d.as_secs_f64() * 1e6),
        );
        forced_times.extend(
            constraint
                .forced_times()
                .iter()
                .map(|d| d.as_secs_f64() * 1e6),
        );
    }
    let free_tok_s = Stat::of(&free);
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let step_us = if free_tok_s.median > 0.0 {
        1e6 / free_tok_s.median
    } else {
        0.0
    };
    Ok(ConstrainedReport {
        schema: "the agent's step schema for its built-in tools (grammars/agent_step.schema.json)"
            .into(),
        prompt_tokens: ids.len(),
        free_tok_s,
        constrained_tok_s: Stat::of(&constrained),
        constrained_tokens: Stat::of(&lengths).median,
        forced_share: if total == 0 {
            0.0
        } else {
            forced as f64 / total as f64
        },
        mask_us_mean: mean(&masks),
        mask_us_p99: percentile(&masks, 0.99),
        forced_us_mean: mean(&forced_times),
        overhead_share: if step_us > 0.0 {
            (mean(&masks) + mean(&forced_times)) / step_us
        } else {
            0.0
        },
        trie_ms,
    })
}

/// The value below which a share `q` of the samples fall (nearest rank).
fn percentile(samples: &[f64], q: f64) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => 0.0,
        n => s[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}

/// Makes `session` hold exactly `depth` (cut back to it when it already starts with it).
fn at_depth(
    session: &mut crate::model::Session,
    depth: &[u32],
    progress: &mut dyn FnMut(&str),
) -> Result<(), BenchError> {
    if session.tokens().starts_with(depth) {
        session.truncate(depth.len());
    } else {
        // Not empty: every session starts with the empty prefix.
        session.clear();
        progress(&format!("fill the cache with {} tokens", depth.len()));
        session.feed(depth)?;
    }
    Ok(())
}

/// Runs the measurements.
pub fn run(
    lm: &LoadedModel,
    threads: usize,
    opts: &BenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchReport, BenchError> {
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

    // The tokens each measurement starts after: fed once, then cut back to between runs.
    let depth: Vec<u32> = (0..opts.depth)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect();
    let llama = opts.llama_bench.as_deref();
    let gpu = !lm.model.device().is_cpu();
    let mut copies = Vec::new();
    let (mut llama_pp, mut llama_tg, mut llama_build) = (Vec::new(), Vec::new(), String::new());
    let mut prefill = Vec::new();
    if !prompt.is_empty() {
        for r in 0..reps {
            progress(&format!(
                "prefill {} tokens ({}/{reps})",
                prompt.len(),
                r + 1
            ));
            at_depth(&mut session, &depth, progress)?;
            let t = Instant::now();
            session.append(&prompt)?;
            prefill.push(prompt.len() as f64 / t.elapsed().as_secs_f64());
            if let Some(exe) = llama {
                progress(&format!(
                    "llama-bench -p {} ({}/{reps})",
                    prompt.len(),
                    r + 1
                ));
                let (ts, build) =
                    llama_bench_once(exe, &lm.path, threads, (prompt.len(), 0, opts.depth), gpu)?;
                llama_pp.push(ts);
                llama_build = build;
            }
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
            at_depth(&mut session, &depth, progress)?;
            let mut token = prompt.first().copied().unwrap_or(0);
            let t = Instant::now();
            for _ in 0..opts.gen_tokens {
                token = argmax(session.append(&[token])?);
                if let Some(copy) = session.logits_copy_time() {
                    copies.push(copy.as_secs_f64() * 1e6);
                }
            }
            decode.push(opts.gen_tokens as f64 / t.elapsed().as_secs_f64());
            if let Some(exe) = llama {
                progress(&format!(
                    "llama-bench -n {} ({}/{reps})",
                    opts.gen_tokens,
                    r + 1
                ));
                let (ts, build) = llama_bench_once(
                    exe,
                    &lm.path,
                    threads,
                    (0, opts.gen_tokens, opts.depth),
                    gpu,
                )?;
                llama_tg.push(ts);
                llama_build = build;
            }
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
        let _first = argmax(session.feed(&chat_ids)?);
        ttft.push(t.elapsed().as_secs_f64() * 1000.0);
    }

    let constrained = match &opts.step_schema {
        Some(schema) => Some(constrained_vs_free(lm, schema, opts, reps, progress)?),
        None => None,
    };

    let prefill_tok_s = Stat::of(&prefill);
    let decode_tok_s = Stat::of(&decode);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let vs_llama_bench = llama.map(|exe| {
        let (pp, tg) = (Stat::of(&llama_pp), Stat::of(&llama_tg));
        LlamaBenchReport {
            path: exe.display().to_string(),
            build: llama_build,
            prefill_ratio: ratio(prefill_tok_s.median, pp.median),
            decode_ratio: ratio(decode_tok_s.median, tg.median),
            prefill_tok_s: pp,
            decode_tok_s: tg,
        }
    });
    let logits_copy_us = (!copies.is_empty()).then(|| Stat::of(&copies));
    let logits_copy_share = logits_copy_us
        .filter(|_| decode_tok_s.median > 0.0)
        .map(|c| c.median * 1e-6 * decode_tok_s.median);
    let gpu_memory_bytes = crate::model::device::gpu_memory_used(&lm.model.device());
    let report = &lm.model.report.stats;
    // Before the bandwidth measurement's own buffer.
    let rss_peak_bytes = peak_rss();
    let bandwidth = if report.decode_bytes > 0 {
        progress("memory bandwidth");
        crate::model::cpu::bandwidth::measure(reps.min(5))
    } else {
        0.0
    };
    let share = if bandwidth > 0.0 {
        decode_tok_s.median * report.decode_bytes as f64 / bandwidth
    } else {
        0.0
    };
    // Keys and values, f32, of every layer, for the longest sequence run.
    let longest = (opts.depth + opts.prompt_tokens.max(opts.gen_tokens + 1)).max(chat_ids.len());
    let kv_cache_bytes = 2 * cfg.layers * cfg.kv_heads * cfg.head_dim * 4 * longest;
    Ok(BenchReport {
        requantized_types: report.requantized_names(),
        file_bytes: std::fs::metadata(&lm.path).map_or(0, |m| m.len()),
        mapped_bytes: report.mapped_bytes,
        decode_bytes_per_token: report.decode_bytes,
        bandwidth_gb_s: bandwidth / 1e9,
        decode_bandwidth_share: share,
        rss_peak_bytes,
        kv_cache_bytes,
        model: lm.path.display().to_string(),
        arch: cfg.arch.clone(),
        threads,
        prompt_tokens: opts.prompt_tokens,
        gen_tokens: opts.gen_tokens,
        depth: opts.depth,
        repetitions: reps,
        prefill_tok_s,
        decode_tok_s,
        ttft_ms: Stat::of(&ttft),
        ttft_prompt_tokens: chat_ids.len(),
        load_ms: lm.load_time.as_secs_f64() * 1000.0,
        weight_bytes: report.weight_bytes,
        requantized_tensors: report.requantized,
        constrained,
        engine: lm.model.report.engine.name().to_string(),
        kernels: lm.model.report.kernels.to_string(),
        device: lm.model.report.device.clone(),
        logits_copy_us,
        logits_copy_share,
        gpu_memory_bytes,
        vs_llama_bench,
    })
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`), where Linux reports it.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
