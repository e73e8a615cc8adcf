//! `cairn call`: function-calling mode. `--functions FILE "question"` prints
//! `{"calls": [{"name", "arguments"}], "text": null}` (or no calls and the model's text);
//! `--json-lines IN.jsonl` answers many questions, one output line each, reusing the prompt
//! prefix where the functions are the same.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use super::generate::SamplingArgs;
use crate::call::score::{self, CallScores};
use crate::call::{functions, Call, CallError, CallOptions, CallOutcome, FunctionCaller};
use crate::cli::printer::Printer;
use crate::config::{Config, Verbosity};

/// Flags of `cairn call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The question (not with --json-lines).
    #[arg(required_unless_present = "json_lines", conflicts_with = "json_lines")]
    pub question: Option<String>,
    /// The function definitions: a JSON array in OpenAI's tools format (or bare
    /// {"name", "description", "parameters"} objects); `-` reads standard input.
    #[arg(long, value_name = "FILE", required_unless_present = "json_lines")]
    pub functions: Option<PathBuf>,
    /// Many questions: each line {"id", "question", "functions"}; each output line
    /// {"id", "calls", "text", "call_probability", "ms"} (or {"id", "error"}). A line with
    /// "expected": [{"name", "arguments"}] ([] where no function fits) is scored: its output
    /// says "correct" and "verdict", and the totals (exact-call accuracy, calls made when
    /// needed, text when none fits, cut replies, mean latency) end the run on stderr.
    #[arg(long, value_name = "IN.jsonl")]
    pub json_lines: Option<PathBuf>,
    /// Allow several calls in one reply.
    #[arg(long)]
    pub parallel: bool,
    /// The model must call a function (no plain-text reply).
    #[arg(long)]
    pub require_call: bool,
    /// Keep the arguments exactly as decoded: do not leave out optional arguments that equal
    /// their default or that the question does not contain, nor copy quoted strings exactly.
    #[arg(long)]
    pub raw_arguments: bool,
    /// Ask the model apart, with only the chosen function shown, whether calling it does what
    /// the question asks; a call it judges unfit becomes a text reply. By default this is done
    /// for models of 1 billion parameters or more (smaller ones judged little better than chance).
    #[arg(long, conflicts_with = "no_fit_check")]
    pub fit_check: bool,
    /// Never make the fit check (see --fit-check).
    #[arg(long)]
    pub no_fit_check: bool,
    /// Prefill every prompt whole instead of reusing the cached prefix (to measure reuse).
    #[arg(long)]
    pub no_prefix_reuse: bool,
    /// Sampling (`--max-tokens` bounds the reply; default 1024 tokens).
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

fn read_functions(
    path: &std::path::Path,
    printer: &Printer,
) -> anyhow::Result<Vec<functions::Function>> {
    let (text, origin) = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the function definitions from standard input")?;
        (s, "stdin".to_string())
    } else {
        (
            std::fs::read_to_string(path).with_context(|| {
                format!("cannot read the function definitions {}", path.display())
            })?,
            path.display().to_string(),
        )
    };
    let (fs, notes) = functions::parse_functions(&text, &origin)?;
    for n in notes {
        printer.detail(&format!("normalised: {n}"));
    }
    Ok(fs)
}

/// Runs `cairn call`.
pub fn run(config: &Config, printer: &Printer, args: &CallArgs) -> anyhow::Result<ExitCode> {
    let sampling = args.sampling.options()?;
    let opts = CallOptions {
        parallel: args.parallel,
        require_call: args.require_call,
        max_tokens: args
            .sampling
            .max_tokens
            .unwrap_or(crate::call::DEFAULT_MAX_TOKENS),
        raw_arguments: args.raw_arguments,
        fit_check: super::on_off(args.fit_check, args.no_fit_check),
    };
    // Read and check the input before the (slow) model load.
    let single = match (&args.question, &args.functions, &args.json_lines) {
        (Some(q), Some(f), None) => {
            if q.trim().is_empty() {
                anyhow::bail!("the question is empty; ask something the functions could answer");
            }
            Some((q.clone(), read_functions(f, printer)?))
        }
        _ => None,
    };
    let lines = match &args.json_lines {
        Some(p) => {
            let f =
                std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            Some(std::io::BufReader::new(f))
        }
        None => None,
    };
    let lm = super::load_model(config, printer, args.sampling.tokenizer.as_deref())?;
    let mut caller = FunctionCaller::new(lm, sampling.sampling)?;
    caller.set_prefix_reuse(!args.no_prefix_reuse);
    printer.detail(&format!(
        "functions shown {}; calls written {}",
        if caller.template_takes_tools() {
            "through the chat template's tools"
        } else {
            "as a listing in the system text"
        },
        match caller.marker() {
            Some(m) => format!("inside the template's {} marker", m.open),
            None => "as JSON".to_string(),
        }
    ));
    printer.detail(&format!(
        "the fit check is {} ({:.2} billion parameters{})",
        if caller.fit_check(&opts) { "on" } else { "off" },
        caller.parameters() as f64 / 1e9,
        match opts.fit_check {
            Some(_) => ", as asked",
            None => ", checked from 1 billion",
        }
    ));
    if let Some((question, fs)) = single {
        let r = caller.call(&question, &fs, &opts)?;
        printer.result(&serde_json::to_string(&r.output)?)?;
        for note in &r.tidied {
            printer.detail(&format!("argument {note}"));
        }
        printer.detail(&format!(
            "prompt {} tokens ({} reused), generated {}, {:.0} ms; the first token leaned {:.0}% towards a call",
            r.prompt_tokens, r.reused_tokens, r.generated_tokens, r.ms, r.call_probability * 100.0
        ));
        if let Some(p) = r.fit_probability {
            printer.detail(&format!(
                "the fit check rated the call {:.0}% likely to do what is asked{}",
                p * 100.0,
                if p < 0.5 { ": the reply is text" } else { "" }
            ));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(reader) = lines else {
        anyhow::bail!("give a question with --functions FILE, or --json-lines IN.jsonl");
    };
    let start = Instant::now();
    let (mut done, mut failed, mut prompt, mut reused) = (0usize, 0usize, 0usize, 0usize);
    let mut reader = reader;
    let mut n = 0usize;
    let mut scores = CallScores::default();
    loop {
        let Some(line) =
            crate::eval::next_line(&mut reader).context("cannot read the input lines")?
        else {
            break;
        };
        n += 1;
        // A line that is not UTF-8 or too long is that line's error, not the end of the run.
        let line = line.map_err(|why| format!("line {n}: {why}; the line is skipped"));
        if line.as_ref().is_ok_and(|l| l.trim().is_empty()) {
            continue;
        }
        let parsed: Result<Value, String> = line.and_then(|l| {
            serde_json::from_str(&l).map_err(|e| format!("line {n}: not valid JSON: {e}"))
        });
        // Always a string, as in batch output lines: the line's id (a number as its digits),
        // or `line-N` when it has none that can be read.
        let id = match parsed.as_ref().ok().and_then(|v| v.get("id")) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::Number(x)) => x.to_string(),
            _ => format!("line-{n}"),
        };
        let line_start = Instant::now();
        // The reply ran into the token limit (an error that counts as a cut reply).
        let mut cut_off = false;
        let expected: Option<Result<Vec<Call>, String>> = parsed.as_ref().ok().and_then(|v| {
            v.get("expected")
                .map(|e| score::read_expected(e).map_err(|why| format!("line {n}: {why}")))
        });
        let result: Result<(CallOutcome, Vec<functions::Function>), String> =
            parsed.and_then(|v| {
                let q = v
                    .get("question")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("line {n}: no \"question\" string"))?;
                let defs = v
                    .get("functions")
                    .ok_or_else(|| format!("line {n}: no \"functions\" array"))?;
                let (fs, notes) =
                    functions::from_value(defs, &format!("line {n}")).map_err(|e| e.to_string())?;
                for note in notes {
                    printer.detail(&format!("line {n}: normalised: {note}"));
                }
                let r = caller.call(q, &fs, &opts).map_err(|e| {
                    cut_off = matches!(e, CallError::Incomplete { .. });
                    format!("line {n}: {e}")
                })?;
                prompt += r.prompt_tokens;
                reused += r.reused_tokens;
                Ok((r, fs))
            });
        let row = match result {
            // {"id", "calls", "text", "truncated"?, "call_probability", "ms"}: the output
            // with its id in front, then its score when the line says what was expected.
            Ok((outcome, fs)) => {
                let mut row = json!({"id": id});
                if let (Some(m), Value::Object(o)) =
                    (row.as_object_mut(), serde_json::to_value(&outcome)?)
                {
                    m.extend(o);
                    for k in ["prompt_tokens", "reused_tokens", "generated_tokens"] {
                        m.remove(k);
                    }
                }
                match &expected {
                    Some(Ok(want)) => {
                        let verdict = score::judge(want, &outcome.output, &fs);
                        scores.add(want, Some(&verdict), outcome.output.truncated, outcome.ms);
                        row["correct"] = json!(verdict == score::Verdict::Correct);
                        row["verdict"] = serde_json::to_value(&verdict)?;
                    }
                    Some(Err(why)) => printer.error(why),
                    None => {}
                }
                row
            }
            Err(e) => {
                failed += 1;
                printer.error(&e);
                if let Some(Ok(want)) = &expected {
                    let ms = line_start.elapsed().as_secs_f64() * 1000.0;
                    scores.add(want, None, cut_off, ms);
                }
                json!({"id": id, "error": e})
            }
        };
        printer.result(&serde_json::to_string(&row)?)?;
        done += 1;
        if printer.shows(Verbosity::Normal) {
            let secs = start.elapsed().as_secs_f64();
            printer.progress(&format!(
                "call: {}, {failed} failed, {:.1} per minute",
                plural(done, "question"),
                done as f64 * 60.0 / secs.max(1e-9)
            ));
        }
    }
    if printer.shows(Verbosity::Normal) {
        let secs = start.elapsed().as_secs_f64();
        printer.info(&format!(
            "answered {} in {secs:.1} s ({:.1} per minute); {reused} of {prompt} prompt tokens reused from the cache",
            plural(done, "question"),
            done as f64 * 60.0 / secs.max(1e-9)
        ));
    }
    // The scores are what a scored run is for: shown even with -q.
    if scores.lines > 0 {
        printer.line(
            Verbosity::Quiet,
            &format!("scored {}:", plural(scores.lines, "line")),
        );
        for l in scores.summary().lines() {
            printer.line(Verbosity::Quiet, &format!("  {l}"));
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `1 question`, `2 questions`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
