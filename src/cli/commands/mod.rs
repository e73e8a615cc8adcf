//! One file per subcommand. Each exposes its clap argument struct and
//! `run(&Config, &Printer, &Args) -> anyhow::Result<ExitCode>`; everything it shows goes
//! through the [`Printer`].

pub mod agents;
pub mod batch;
pub mod bench;
pub mod call;
pub mod chat;
pub mod generate;
pub mod index;
pub mod mcp;
pub mod memory;
pub mod model;
pub mod run;
pub mod search;
pub mod tools;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::printer::Printer;
use crate::cli::report::FetchLines;
use crate::config::{Config, Verbosity};
use crate::model::fetch::{resolve_model, FetchOptions, FetchProgress, HfOptions};
use crate::model::{LoadOptions, LoadedModel};

/// How model files are found and fetched: the models folder and offline mode from the
/// validated settings, progress and notes through `printer` (unless `-q`), and the Hugging
/// Face cache, endpoint and proxy from the environment (`HF_HUB_CACHE`, `HF_HOME`,
/// `HF_ENDPOINT`, `HTTPS_PROXY`...).
pub fn fetch_options(config: &Config, printer: &Printer) -> FetchOptions {
    FetchOptions {
        models_dir: config.models_dir(),
        offline: config.offline,
        progress: printer
            .shows(Verbosity::Normal)
            .then(|| Arc::new(FetchLines::new(printer.clone())) as Arc<dyn FetchProgress>),
        hf: HfOptions::from_vars(crate::config::env_nonempty, dirs::home_dir().as_deref()),
    }
}

/// Finds (fetching if allowed) and loads the configured model; details through `printer` at
/// `-v`, and a warning when the CPU engine cannot start all its threads.
pub fn load_model(
    config: &Config,
    printer: &Printer,
    tokenizer_json: Option<&Path>,
) -> anyhow::Result<LoadedModel> {
    let path = resolve_model(config.model.as_deref(), &fetch_options(config, printer))?;
    let load = LoadOptions {
        requantize: config.requantize,
        engine: config.engine,
        threads: config.threads,
        device: config.device.open()?,
    };
    let lm = LoadedModel::load(&path, tokenizer_json, &load).context("cannot load the model")?;
    if lm.model.report.engine.name() == "native" {
        // The CPU engine's pool starts now rather than at the first step, so that a shortfall
        // of threads is said up front.
        if let Some(w) = crate::model::cpu::pool::global().warning() {
            printer.warn(w);
        }
    }
    if printer.verbose() {
        let c = &lm.model.config;
        let stats = &lm.model.report.stats;
        printer.detail(&format!(
            "loaded {} ({}, {} layers, width {}, context {}, {} MB of weights, {} MB {}, {} tensors re-quantized to Q8_0{}, engine {}{}{}) in {:.2} s",
            path.display(),
            c.arch,
            c.layers,
            c.embedding,
            c.context,
            stats.weight_bytes / 1_000_000,
            stats.mapped_bytes / 1_000_000,
            if crate::model::gguf::huge_pages() {
                "read into 2 MB pages (--huge-pages)"
            } else {
                "used in place from the file"
            },
            stats.requantized,
            if stats.requantized == 0 {
                String::new()
            } else {
                format!(" ({})", stats.requantized_names().join(", "))
            },
            lm.model.report.engine.name(),
            if lm.model.report.kernels.is_empty() {
                String::new()
            } else {
                format!(" with {} kernels", lm.model.report.kernels)
            },
            if config.device.is_cpu() {
                String::new()
            } else {
                format!(" on {}", config.device)
            },
            lm.load_time.as_secs_f64()
        ));
    }
    Ok(lm)
}

/// A setting with a flag to turn it on and one to turn it off (clap keeps them apart): what
/// was asked, or `None` for the setting's own default.
pub fn on_off(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}
