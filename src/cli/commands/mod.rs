//! One file per subcommand. Each exposes its clap argument struct and
//! `run(&Config, &Args) -> anyhow::Result<ExitCode>`.

pub mod batch;
pub mod bench;
pub mod call;
pub mod chat;
pub mod generate;
pub mod index;
pub mod memory;
pub mod model;
pub mod run;
pub mod search;
pub mod tools;

use std::path::Path;

use anyhow::Context;

use crate::config::{Config, Verbosity};
use crate::model::arch::LoadOptions;
use crate::model::fetch::{resolve_model, FetchOptions};
use crate::model::LoadedModel;

/// Finds (fetching if allowed) and loads the configured model; notes on stderr at `-v`.
pub fn load_model(config: &Config, tokenizer_json: Option<&Path>) -> anyhow::Result<LoadedModel> {
    let path = resolve_model(config.model.as_deref(), &FetchOptions::from_config(config))?;
    let load = LoadOptions {
        requantize: config.requantize,
        engine: config.engine,
        ..LoadOptions::default()
    };
    let lm = LoadedModel::load(&path, tokenizer_json, &load).context("cannot load the model")?;
    if config.verbosity >= Verbosity::Verbose {
        let c = &lm.model.config;
        eprintln!(
            "loaded {} ({}, {} layers, width {}, context {}, {} MB of weights, {} tensors re-quantized to Q8_0, engine {}{}) in {:.2} s",
            path.display(),
            c.arch,
            c.layers,
            c.embedding,
            c.context,
            lm.model.report.weight_bytes / 1_000_000,
            lm.model.report.requantized,
            lm.model.report.engine.name(),
            if lm.model.report.kernels.is_empty() {
                String::new()
            } else {
                format!(" with {} kernels", lm.model.report.kernels)
            },
            lm.load_time.as_secs_f64()
        );
    }
    Ok(lm)
}
