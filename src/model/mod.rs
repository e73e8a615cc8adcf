//! The model runtime: everything between a GGUF file and logits.
//!
//! - [`gguf`]: opening a GGUF file, reading metadata by key with errors that name the key.
//! - [`error`]: [`ModelError`], the runtime's error type, one variant per kind of failure.
//! - [`tokenizer`]: the byte-level BPE tokenizer built from the GGUF's `tokenizer.ggml.*` keys.
//! - [`template`]: the GGUF's own Jinja chat template, rendered with minijinja.
//! - [`hparams`]: the hyper-parameters every architecture shares, and the RoPE tables.
//! - [`arch`]: the architectures (`llama`, `qwen2`), one file each: what differs between them.
//! - [`weights`]: the one table of tensor names, loaded by each engine its own way.
//! - [`forward`]: the [`forward::Forward`] trait, one implementation per device:
//!   - [`cpu`]: cairn's own CPU engine and quantized kernels (the default);
//!   - [`candle`]: the candle engine, for any candle device (`--engine candle` on the CPU).
//! - [`kv_cache`]: the bookkeeping of a KV cache; each engine keeps its own storage.
//! - [`device`]: [`DeviceSpec`], where the model runs (`--device`), opened at load.
//! - [`engine`]: [`Model`], a loaded model on its engine, and a session's engine state.
//! - [`session`]: a [`Session`] holds the tokens in the KV cache and feeds only what is new.
//! - [`sampling`]: greedy and temperature/top-k/top-p sampling.
//! - [`fetch`]: model presets, the cache, and fetching with checksum verification.
//!
//! Dependencies point one way: `error` ← `gguf` ← `hparams` ← `arch`, `weights`; `cpu` and
//! `candle` depend on those and on `forward`/`kv_cache`, never on each other; `engine` picks
//! one of them; `session` feeds it. Decoding (sampling under a constraint, streaming, the
//! benchmarks) is the layer above, in [`crate::decode`]: nothing here knows of constraints.

pub mod arch;
pub mod candle;
pub mod cpu;
pub mod device;
pub mod engine;
pub mod error;
pub mod fetch;
pub mod forward;
pub mod gguf;
pub mod hparams;
pub mod kv_cache;
pub mod sampling;
pub mod session;
pub mod template;
pub mod tokenizer;
pub mod weights;

pub use device::DeviceSpec;
pub use engine::{load, Engine, LoadOptions, LoadReport, Model};
pub use error::{ModelError, Result};
pub use session::Session;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use template::ChatTemplate;
use tokenizer::Tokenizer;

/// A model ready to run: weights, tokenizer and chat template from one GGUF file. Cheap to
/// clone: the weights and the tokenizer are shared (one clone per batch job).
#[derive(Clone)]
pub struct LoadedModel {
    /// The weights and forward pass, shared by every session.
    pub model: Arc<Model>,
    /// The tokenizer (from the GGUF, or `--tokenizer`).
    pub tokenizer: Tokenizer,
    /// The chat template (the GGUF's own, or a named fallback).
    pub template: ChatTemplate,
    /// The file it came from.
    pub path: PathBuf,
    /// How long loading took.
    pub load_time: Duration,
}

impl LoadedModel {
    /// The tokens of a prompt of its own for `messages`: BOS when the tokenizer asks for one,
    /// then the chat template's rendering, ending where the assistant's reply starts.
    pub fn prompt_ids(&self, messages: &[template::Message]) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        if self.tokenizer.add_bos() {
            ids.extend(self.tokenizer.bos_id());
        }
        ids.extend(
            self.tokenizer
                .encode(&self.template.render(messages, true)?)?,
        );
        Ok(ids)
    }

    /// Loads a GGUF file; `tokenizer_json` overrides the tokenizer stored in it.
    pub fn load(path: &Path, tokenizer_json: Option<&Path>, opts: &LoadOptions) -> Result<Self> {
        let start = Instant::now();
        let mut gguf = gguf::GgufFile::open(path)?;
        let tokenizer = match tokenizer_json {
            Some(p) => Tokenizer::from_file(p)?,
            None => Tokenizer::from_gguf(&gguf.content)?,
        };
        let template = ChatTemplate::from_gguf(&gguf.content, &tokenizer)?;
        let model = engine::load(&mut gguf, opts)?;
        Ok(LoadedModel {
            model: Arc::new(model),
            tokenizer,
            template,
            path: path.to_path_buf(),
            load_time: start.elapsed(),
        })
    }

    /// A new, empty session on this model.
    pub fn session(&self) -> Session {
        Session::new(self.model.clone())
    }
}
