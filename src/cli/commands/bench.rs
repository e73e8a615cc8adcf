//! `cairn bench`: prefill and decode tokens/s and time-to-first-token, like llama-bench, and
//! decoding under the agent-step schema against free decoding.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use crate::cli::printer::Printer;
use crate::config::Config;
use crate::decode::bench::{self, BenchOptions};

/// Flags of `cairn bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Prompt tokens for the prefill measurement (like llama-bench -p).
    #[arg(short = 'p', long, default_value_t = 512, value_name = "N")]
    pub prompt_tokens: usize,
    /// Generated tokens for the decode measurement (like llama-bench -n).
    #[arg(short = 'n', long, default_value_t = 128, value_name = "N")]
    pub gen_tokens: usize,
    /// Tokens already in the KV cache when each prefill and decode measurement starts (like
    /// llama-bench -d): what an agent's later rounds run at.
    #[arg(short = 'd', long, default_value_t = 0, value_name = "N")]
    pub depth: usize,
    /// Timed repetitions of each measurement (after one warm-up).
    #[arg(short = 'r', long, default_value_t = 3, value_name = "R")]
    pub repetitions: usize,
    /// Skip the constrained-decoding measurement (agent-step schema vs free decoding).
    #[arg(long)]
    pub no_constrained: bool,
    /// Measure agent rounds instead: a fixed 6-round conversation decoded with the KV cache
    /// carried from round to round, and with each prompt prefilled from scratch.
    #[arg(long)]
    pub agent: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Also run llama.cpp's llama-bench binary at PATH on the same file, threads, -p and -n,
    /// one run after each of cairn's repetitions, and print the ratios.
    #[arg(long, value_name = "PATH")]
    pub vs_llama_bench: Option<std::path::PathBuf>,
}

/// `cairn bench --agent`: round latency with and without prefix reuse.
fn run_agent(config: &Config, printer: &Printer, args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let lm = super::load_model(config, printer, None)?;
    let mut policy = crate::agent::ModelPolicy::new(lm, Default::default())?;
    let r = crate::agent::bench::prefix_reuse(&mut policy, &mut |what| {
        printer.info(&format!("bench: {what}"));
    })?;
    let mut out = printer.out();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "model    {}   threads {}",
        policy.model().path.display(),
        config.threads
    )?;
    writeln!(
        out,
        "round  prompt  computed (reuse / none)  generated  ms with reuse  ms without"
    )?;
    for (w, o) in r.with_reuse.iter().zip(&r.without_reuse) {
        writeln!(
            out,
            "{:>5}  {:>6}  {:>8} / {:<12}  {:>9}  {:>13.0}  {:>10.0}",
            w.round,
            w.prompt_tokens,
            w.computed_tokens,
            o.computed_tokens,
            w.generated_tokens,
            w.ms,
            o.ms
        )?;
    }
    writeln!(
        out,
        "mean round latency: {:.0} ms with reuse, {:.0} ms without: {:.2}x",
        r.mean_ms_with_reuse, r.mean_ms_without_reuse, r.speedup
    )?;
    let n = &r.next_task_first_round;
    writeln!(
        out,
        "next task, round 1: {} of {} prompt tokens computed (system text and tools cached), {:.0} ms",
        n.computed_tokens, n.prompt_tokens, n.ms
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `cairn bench`.
pub fn run(config: &Config, printer: &Printer, args: &BenchArgs) -> anyhow::Result<ExitCode> {
    if args.repetitions == 0 || args.repetitions > 1000 {
        anyhow::bail!("--repetitions is {}: give 1 to 1000", args.repetitions);
    }
    if args.agent {
        return run_agent(config, printer, args);
    }
    if let Some(p) = &args.vs_llama_bench {
        if !p.is_file() {
            anyhow::bail!(
                "--vs-llama-bench {}: no such file; give the path of llama.cpp's llama-bench binary",
                p.display()
            );
        }
    }
    let lm = super::load_model(config, printer, None)?;
    let opts = BenchOptions {
        prompt_tokens: args.prompt_tokens,
        gen_tokens: args.gen_tokens,
        depth: args.depth,
        repetitions: args.repetitions,
        step_schema: (!args.no_constrained).then(crate::agent::step::builtin_step_schema),
        llama_bench: args.vs_llama_bench.clone(),
    };
    let total = opts.depth + (opts.prompt_tokens + 1).max(opts.gen_tokens);
    if total > lm.model.config.context {
        anyhow::bail!(
            "-d {} with -p {} / -n {} does not fit the model's context of {} tokens; give smaller numbers",
            opts.depth,
            opts.prompt_tokens,
            opts.gen_tokens,
            lm.model.config.context
        );
    }
    let report = bench::run(&lm, config.threads, &opts, &mut |what| {
        printer.info(&format!("bench: {what}"));
    })?;
    let mut out = printer.out();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        let s = |x: &bench::Stat| format!("{:>8.1}  ({:.1}–{:.1})", x.median, x.min, x.max);
        writeln!(out, "model    {} ({})", report.model, report.arch)?;
        writeln!(
            out,
            "threads  {}   repetitions {}   engine {}{}   device {}",
            report.threads,
            report.repetitions,
            report.engine,
            if report.kernels.is_empty() {
                String::new()
            } else {
                format!(" ({})", report.kernels)
            },
            report.device
        )?;
        // llama-bench's names: `pp512`, or `pp512 @ d2048` after 2048 cached tokens.
        let at = if report.depth > 0 {
            format!(" @ d{}", report.depth)
        } else {
            String::new()
        };
        writeln!(
            out,
            "pp{:<5}  {} tok/s{at}",
            report.prompt_tokens,
            s(&report.prefill_tok_s)
        )?;
        writeln!(
            out,
            "tg{:<5}  {} tok/s{at}",
            report.gen_tokens,
            s(&report.decode_tok_s)
        )?;
        writeln!(
            out,
            "load     {:.0} ms   {} MB file, {} MB of weights {}, {} re-quantized{}",
            report.load_ms,
            report.file_bytes / 1_000_000,
            report.mapped_bytes / 1_000_000,
            if crate::model::gguf::huge_pages() {
                "read into 2 MB pages (--huge-pages)"
            } else {
                "used in place"
            },
            report.requantized_tensors,
            if report.requantized_types.is_empty() {
                String::new()
            } else {
                format!(" ({})", report.requantized_types.join(", "))
            }
        )?;
        if report.bandwidth_gb_s > 0.0 {
            writeln!(
                out,
                "memory   {:.1} GB/s read; decode reads {} MB/token: {:.0}% of the bandwidth bound",
                report.bandwidth_gb_s,
                report.decode_bytes_per_token / 1_000_000,
                report.decode_bandwidth_share * 100.0
            )?;
        }
        if let (Some(c), Some(share)) = (&report.logits_copy_us, report.logits_copy_share) {
            writeln!(
                out,
                "logits   {} µs per token copied to the host ({:.1}% of a decode step)",
                s(c),
                share * 100.0
            )?;
        }
        if let Some(used) = report.gpu_memory_bytes {
            writeln!(
                out,
                "gpu mem  {} MB in use on {} at the end (every process's)",
                used / 1_000_000,
                report.device
            )?;
        }
        if let Some(rss) = report.rss_peak_bytes {
            writeln!(
                out,
                "rss      {} MB peak ({:.2}× the file plus {} MB of KV cache)",
                rss / 1_000_000,
                rss as f64 / (report.file_bytes as f64 + report.kv_cache_bytes as f64).max(1.0),
                report.kv_cache_bytes / 1_000_000
            )?;
        }
        if let Some(l) = &report.vs_llama_bench {
            writeln!(
                out,
                "llama.cpp pp{:<5} {} tok/s   cairn/llama.cpp {:.2}x",
                report.prompt_tokens,
                s(&l.prefill_tok_s),
                l.prefill_ratio
            )?;
            writeln!(
                out,
                "llama.cpp tg{:<5} {} tok/s   cairn/llama.cpp {:.2}x",
                report.gen_tokens,
                s(&l.decode_tok_s),
                l.decode_ratio
            )?;
            writeln!(out, "llama.cpp build {} ({})", l.build, l.path)?;
        }
        writeln!(
            out,
            "ttft     {} ms   ({} prompt tokens)",
            s(&report.ttft_ms),
            report.ttft_prompt_tokens
        )?;
        if let Some(c) = &report.constrained {
            writeln!(
                out,
                "free     {} tok/s   (chat prompt, {} tokens)",
                s(&c.free_tok_s),
                c.prompt_tokens
            )?;
            writeln!(
                out,
                "schema   {} tok/s   ({}, {:.0} tokens, {:.0}% forced)",
                s(&c.constrained_tok_s),
                c.schema,
                c.constrained_tokens,
                c.forced_share * 100.0
            )?;
            writeln!(
                out,
                "mask     {:>8.1} µs mean, {:.1} µs p99; fast-forward {:.1} µs; {:.2}% of a decode step; trie {:.0} ms",
                c.mask_us_mean,
                c.mask_us_p99,
                c.forced_us_mean,
                c.overhead_share * 100.0,
                c.trie_ms
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
