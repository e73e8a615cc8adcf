//! The model runtime: everything between a GGUF file and logits.
//!
//! - [`gguf`]: opening a GGUF file, reading metadata by key with errors that name the key.
//! - [`tokenizer`]: the byte-level BPE tokenizer built from the GGUF's `tokenizer.ggml.*` keys.
//! - [`template`]: the GGUF's own Jinja chat template, rendered with minijinja.
//! - [`cpu`]: cairn's own CPU forward pass and quantized kernels (the default engine).
//! - [`arch`]: the architectures (`llama`, `qwen2`), one file each, over [`kv_cache::KvCache`].
//! - [`session`]: a [`Session`] holds the tokens in the KV cache and feeds only what is new.
//! - [`sampling`]: greedy and temperature/top-k/top-p sampling.
//! - [`generate`]: the decode loop with streaming output and stop conditions.
//! - [`bench`]: prefill/decode throughput measurements behind `cairn bench`.
//! - [`fetch`]: model presets, the cache, and fetching with checksum verification.

pub mod arch;
pub mod bench;
pub mod cpu;
pub mod fetch;
pub mod generate;
pub mod gguf;
pub mod kv_cache;
pub mod sampling;
pub mod session;
pub mod template;
pub mod tokenizer;

pub use arch::Model;
pub use gguf::{ModelError, Result};
pub use session::Session;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arch::LoadOptions;
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
    /// Loads a GGUF file; `tokenizer_json` overrides the tokenizer stored in it.
    pub fn load(path: &Path, tokenizer_json: Option<&Path>, opts: &LoadOptions) -> Result<Self> {
        let start = Instant::now();
        let mut gguf = gguf::GgufFile::open(path)?;
        let tokenizer = match tokenizer_json {
            Some(p) => Tokenizer::from_file(p)?,
            None => Tokenizer::from_gguf(&gguf.content)?,
        };
        let template = ChatTemplate::from_gguf(&gguf.content, &tokenizer)?;
        let model = arch::load(&mut gguf, opts)?;
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
