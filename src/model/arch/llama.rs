//! `llama`: SmolLM2, Llama 3.x, Mistral and other models stored under the GGUF `llama` keys.
//!
//! No biases; RoPE on adjacent pairs (the GGUF converter permutes Q/K rows for it); an optional
//! `rope_freqs.weight` tensor (Llama 3.1+) divides the base frequencies.

use super::{read_config, LoadOptions, Loader, Model, RopeStyle};
use crate::model::gguf::{GgufFile, ModelError, Result};

/// Loads a `llama` model.
pub fn load(gguf: &mut GgufFile, opts: &LoadOptions) -> Result<Model> {
    let config = read_config(gguf, "llama", RopeStyle::Interleaved, false)?;
    let rope_freqs = if gguf.has_tensor("rope_freqs.weight") {
        let half = config.head_dim / 2;
        let t = gguf.tensor("rope_freqs.weight", Some(&[half]), &opts.device)?;
        let v = t
            .dequantize(&opts.device)?
            .to_vec1::<f32>()
            .map_err(ModelError::from)?;
        if v.iter().any(|f| !f.is_finite() || *f <= 0.0) {
            return Err(ModelError::BadTensor {
                path: gguf.path.clone(),
                name: "rope_freqs.weight".into(),
                reason: "frequency factors must be positive and finite".into(),
            });
        }
        Some(v)
    } else {
        None
    };
    Loader::new(gguf, opts).load(config, rope_freqs)
}
