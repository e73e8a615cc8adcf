//! `cairn run TASK`: one task, the answer on stdout.
//!
//! Until the agent loop lands this asks the model directly: the task becomes a user message
//! in the model's chat template and the reply is streamed to stdout.

use std::process::ExitCode;

use clap::Args;

use super::generate::{stream, SamplingArgs};
use crate::config::Config;
use crate::model::template::Message;

/// Flags of `cairn run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task, in plain words.
    pub task: String,
    /// Sampling.
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Runs `cairn run`.
pub fn run(config: &Config, args: &RunArgs) -> anyhow::Result<ExitCode> {
    if args.task.trim().is_empty() {
        anyhow::bail!(
            "the task is empty: say what cairn should do, e.g. cairn run \"What is 17 * 23?\""
        );
    }
    let opts = args.sampling.options()?;
    let lm = super::load_model(config, args.sampling.tokenizer.as_deref())?;
    let prompt = lm
        .template
        .render(&[Message::user(args.task.clone())], true)?;
    stream(config, &lm, &prompt, &opts, true)?;
    Ok(ExitCode::SUCCESS)
}
