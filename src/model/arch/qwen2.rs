//! `qwen2`: Qwen2 and Qwen2.5 (the default preset is Qwen2.5-Coder-0.5B-Instruct).
//!
//! Biases on the Q/K/V projections; RoPE on the first and second half of each head
//! (GPT-NeoX style); tied embeddings in the small sizes.

use super::{read_config, LoadOptions, Loader, Model, RopeStyle};
use crate::model::gguf::{GgufFile, Result};

/// Loads a `qwen2` model.
pub fn load(gguf: &mut GgufFile, opts: &LoadOptions) -> Result<Model> {
    let mut config = read_config(gguf, "qwen2", RopeStyle::Halves, true)?;
    if gguf.opt_f32("qwen2.rope.freq_base")?.is_none() {
        config.rope_theta = 1_000_000.0;
    }
    Loader::new(gguf, opts).load(config, None)
}
