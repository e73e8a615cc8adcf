//! `llama`: SmolLM2, Llama 3.x, Mistral and other models stored under the GGUF `llama` keys.
//!
//! No biases; RoPE on adjacent pairs (the GGUF converter permutes Q/K rows for it); an optional
//! `rope_freqs.weight` tensor (Llama 3.1+) divides the base frequencies.

use candle_core::Device;

use super::Arch;
use crate::model::error::{ModelError, Result};
use crate::model::gguf::GgufFile;
use crate::model::hparams::{HParams, RopeStyle, Variant};

/// The `llama` architecture.
pub const ARCH: Arch = Arch {
    name: "llama",
    variant: Variant {
        rope_style: RopeStyle::Interleaved,
        qkv_bias: false,
        default_rope_theta: 10_000.0,
    },
    extra: rope_freqs,
};

/// Reads the optional RoPE frequency factors.
fn rope_freqs(gguf: &mut GgufFile, hp: &mut HParams) -> Result<()> {
    if !gguf.has_tensor("rope_freqs.weight") {
        return Ok(());
    }
    let half = hp.head_dim / 2;
    let t = gguf.tensor("rope_freqs.weight", Some(&[half]), &Device::Cpu)?;
    let v = t.dequantize(&Device::Cpu)?.to_vec1::<f32>()?;
    if v.iter().any(|f| !f.is_finite() || *f <= 0.0) {
        return Err(ModelError::BadTensor {
            path: gguf.path.clone(),
            name: "rope_freqs.weight".into(),
            reason: "frequency factors must be positive and finite".into(),
        });
    }
    hp.rope_freqs = Some(v);
    Ok(())
}
