//! `cairn generate PROMPT`: raw generation streamed to stdout, optionally wrapped in the
//! model's chat template (`--chat`), optionally constrained by a JSON Schema (`--schema`) or a
//! Lark grammar (`--grammar`). A bad schema or grammar exits 2 before decoding; constrained
//! output cut short by `--max-tokens` exits 1 and says so.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::printer::Printer;
use crate::config::Config;
use crate::constrain::{Constraint, ConstraintError, ConstraintSpec};
use crate::decode::generate::{GenerateOptions, Generation, StopReason};
use crate::decode::Decoder;
use crate::model::sampling::SamplingParams;
use crate::model::template::Message;

/// `--max-tokens` when not given (generate; `call` has its own, a text reply being longer).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// Sampling flags shared by `generate` and `run`.
#[derive(Debug, Clone, Args)]
pub struct SamplingArgs {
    /// The most tokens to generate (default 256; for `call`, 1024; for the agent's steps, 512 per step).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0, value_name = "T")]
    pub temperature: f32,
    /// Sample from the K most likely tokens (0 = all).
    #[arg(long, default_value_t = 40, value_name = "K")]
    pub top_k: usize,
    /// Sample from the smallest set of tokens whose probability reaches P.
    #[arg(long, default_value_t = 0.95, value_name = "P")]
    pub top_p: f32,
    /// Random seed for sampling.
    #[arg(long, default_value_t = 42, value_name = "N")]
    pub seed: u64,
    /// A tokenizer.json to use instead of the tokenizer stored in the GGUF.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
}

impl SamplingArgs {
    /// The validated generation options.
    pub fn options(&self) -> anyhow::Result<GenerateOptions> {
        let sampling = SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
        };
        sampling.validate().map_err(anyhow::Error::msg)?;
        let max_tokens = self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        if max_tokens == 0 {
            anyhow::bail!("--max-tokens must be at least 1");
        }
        // Raw generation decodes what the model gives, loops included.
        Ok(GenerateOptions {
            max_tokens,
            sampling,
            no_repeat_ngram: 0,
        })
    }
}

/// Flags of `cairn generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The prompt (raw text, unless --chat).
    pub prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
    #[arg(long)]
    pub chat: bool,
    /// A system message (implies --chat).
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Print a JSON object (text, tokens, stop reason, timings) instead of streaming text.
    #[arg(long)]
    pub json: bool,
    /// Decode under this JSON Schema: the output is JSON valid against it.
    #[arg(long, value_name = "FILE", conflicts_with = "grammar")]
    pub schema: Option<PathBuf>,
    /// Decode under this grammar in llguidance's Lark syntax (see grammars/).
    #[arg(long, value_name = "FILE")]
    pub grammar: Option<PathBuf>,
    /// Sampling.
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Runs `cairn generate`.
pub fn run(config: &Config, printer: &Printer, args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    let opts = args.sampling.options()?;
    // Read and parse the file before the (slow) model load, so a typo fails fast.
    let spec = match (&args.schema, &args.grammar) {
        (Some(p), _) => Some((ConstraintSpec::schema_file(p)?, p)),
        (None, Some(p)) => Some((ConstraintSpec::grammar_file(p)?, p)),
        (None, None) => None,
    };
    let lm = super::load_model(config, printer, args.sampling.tokenizer.as_deref())?;
    // The token trie is built only when a schema or grammar asks for it.
    let mut decoder = Decoder::lazy(lm.clone(), opts.sampling);
    let mut constraint = match &spec {
        Some((spec, path)) => {
            let origin = path.display().to_string();
            Some(decoder.constraint::<ConstraintError>(&origin, |c| c.compile(spec, &origin))?)
        }
        None => None,
    };
    let prompt = if args.chat || args.system.is_some() {
        let mut messages = Vec::new();
        if let Some(s) = &args.system {
            messages.push(Message::system(s.clone()));
        }
        messages.push(Message::user(args.prompt.clone()));
        lm.template.render(&messages, true)?
    } else {
        args.prompt.clone()
    };
    let g = stream_constrained(
        printer,
        &mut decoder,
        &prompt,
        opts.max_tokens,
        constraint.as_mut(),
        !args.json,
    )?;
    if args.json {
        printer.result(&serde_json::to_string(&g)?)?;
    }
    if g.incomplete {
        printer.error(&format!(
            "stopped ({}) inside the constrained output after {} tokens: it is incomplete and not valid; raise --max-tokens",
            g.stop,
            g.tokens.len()
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Tokenizes `prompt`, generates with `decoder` (every token allowed by `constraint` when one
/// is given), streams text to stdout when `echo`, and reports timings through `printer` at
/// `-v`.
pub fn stream_constrained(
    printer: &Printer,
    decoder: &mut Decoder,
    prompt: &str,
    max_tokens: usize,
    constraint: Option<&mut Constraint>,
    echo: bool,
) -> anyhow::Result<Generation> {
    let ids = decoder.model().tokenizer.encode(prompt)?;
    if ids.is_empty() {
        anyhow::bail!("the prompt is empty: give some text to continue");
    }
    let mut out = printer.out();
    let g = decoder.generate_streaming(&ids, max_tokens, constraint, &mut |piece| {
        if echo {
            out.write_all(piece.as_bytes())?;
            out.flush()?;
        }
        Ok(())
    })?;
    if echo {
        writeln!(out)?;
    }
    drop(out);
    if printer.verbose() {
        printer.detail(&format!(
            "prompt {} tokens, generated {} ({} sampled, {} forced; {}), first token {:.0} ms, decode {:.1} tok/s",
            g.prompt_tokens,
            g.tokens.len(),
            g.sampled_tokens,
            g.forced_tokens,
            g.stop,
            g.time_to_first_token.as_secs_f64() * 1000.0,
            g.decode_tokens_per_second()
        ));
    } else if g.stop == StopReason::MaxTokens && !g.incomplete && echo {
        printer.info(&format!(
            "note: stopped at --max-tokens {} before the model finished",
            max_tokens
        ));
    }
    Ok(g)
}
