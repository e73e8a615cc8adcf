//! The hyper-parameters every supported architecture shares ([`HParams`]), read from the GGUF
//! metadata under the architecture's key prefix, and the RoPE tables both engines build from
//! them. What an architecture fixes instead of reading (RoPE pairing, Q/K/V biases, the
//! default RoPE base) comes in as a [`Variant`] from its file in [`super::arch`].

use super::error::{ModelError, Result};
use super::gguf::GgufFile;

/// How rotary position embedding pairs up the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (0,1), (2,3)… — GGUF llama (the converter permutes Q/K for it).
    Interleaved,
    /// First half with second half — Qwen2 (GPT-NeoX style).
    Halves,
}

/// What an architecture fixes rather than reads from the metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variant {
    /// RoPE pairing.
    pub rope_style: RopeStyle,
    /// Whether the Q/K/V projections have biases.
    pub qkv_bias: bool,
    /// RoPE base frequency when `<arch>.rope.freq_base` is absent.
    pub default_rope_theta: f32,
}

/// Hyper-parameters read from the GGUF metadata.
#[derive(Debug, Clone)]
pub struct HParams {
    /// `general.architecture`.
    pub arch: String,
    /// Decoder blocks.
    pub layers: usize,
    /// Model width.
    pub embedding: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Dimensions per head.
    pub head_dim: usize,
    /// MLP width.
    pub feed_forward: usize,
    /// Vocabulary size (rows of the embedding table).
    pub vocab: usize,
    /// Context length from the metadata.
    pub context: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f64,
    /// RoPE base frequency.
    pub rope_theta: f32,
    /// RoPE pairing.
    pub rope_style: RopeStyle,
    /// Whether Q/K/V projections have biases.
    pub qkv_bias: bool,
    /// Per-frequency divisors of the RoPE base frequencies (`head_dim / 2` of them; the
    /// `rope_freqs.weight` tensor of Llama 3.1+), when the architecture has them.
    pub rope_freqs: Option<Vec<f32>>,
}

/// Reads the hyper-parameters common to the llama-family layouts under `<arch>.*` keys.
pub fn read(gguf: &GgufFile, arch: &str, variant: Variant) -> Result<HParams> {
    let key = |k: &str| format!("{arch}.{k}");
    let embedding = gguf.usize(&key("embedding_length"))?;
    let heads = gguf.usize(&key("attention.head_count"))?;
    let kv_heads = gguf
        .opt_usize(&key("attention.head_count_kv"))?
        .unwrap_or(heads);
    let head_dim = match gguf.opt_usize(&key("attention.key_length"))? {
        Some(d) => d,
        None => embedding / heads,
    };
    let bad = |k: &str, reason: String| ModelError::BadKey {
        path: gguf.path.clone(),
        key: key(k),
        reason,
    };
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(bad(
            "attention.head_count_kv",
            format!("{kv_heads} does not divide the {heads} query heads"),
        ));
    }
    if head_dim == 0 || head_dim % 2 != 0 {
        return Err(bad(
            "attention.key_length",
            format!("head size {head_dim} must be even and positive"),
        ));
    }
    let vocab = match gguf.tensor_dims("token_embd.weight")?.as_slice() {
        [v, _] => *v,
        other => {
            return Err(ModelError::BadTensor {
                path: gguf.path.clone(),
                name: "token_embd.weight".into(),
                reason: format!("expected 2 dimensions, found {other:?}"),
            })
        }
    };
    let context = gguf.usize(&key("context_length"))?;
    if context > 1 << 20 {
        return Err(bad(
            "context_length",
            format!("{context} positions is more than cairn supports (1048576)"),
        ));
    }
    Ok(HParams {
        arch: arch.to_string(),
        layers: gguf.usize(&key("block_count"))?,
        embedding,
        heads,
        kv_heads,
        head_dim,
        feed_forward: gguf.usize(&key("feed_forward_length"))?,
        vocab,
        context,
        rms_eps: gguf
            .opt_f32(&key("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-5) as f64,
        rope_theta: gguf
            .opt_f32(&key("rope.freq_base"))?
            .unwrap_or(variant.default_rope_theta),
        rope_style: variant.rope_style,
        qkv_bias: variant.qkv_bias,
        rope_freqs: None,
    })
}

impl HParams {
    /// The weights' parameter count, from the shapes (the embedding table counted once, as
    /// when it is tied to the output; norms and biases left out): about 0.49 billion for
    /// Qwen2.5 0.5B, 1.54 billion for Qwen2.5 1.5B.
    pub fn parameters(&self) -> u64 {
        let (e, q, kv) = (
            self.embedding as u64,
            (self.heads * self.head_dim) as u64,
            (self.kv_heads * self.head_dim) as u64,
        );
        let attention = e * q * 2 + e * kv * 2;
        let mlp = 3 * e * self.feed_forward as u64;
        self.layers as u64 * (attention + mlp) + self.vocab as u64 * e
    }

    /// RoPE `cos` and `sin` of every position of the context, row-major,
    /// `context × head_dim / 2` each.
    pub fn rope_tables(&self) -> (Vec<f32>, Vec<f32>) {
        let half = self.head_dim / 2;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| {
                let f = 1f32 / self.rope_theta.powf(2.0 * i as f32 / self.head_dim as f32);
                match &self.rope_freqs {
                    Some(ff) => f / ff[i],
                    None => f,
                }
            })
            .collect();
        let mut cos = Vec::with_capacity(self.context * half);
        let mut sin = Vec::with_capacity(self.context * half);
        for pos in 0..self.context {
            for f in &inv_freq {
                let a = pos as f32 * f;
                cos.push(a.cos());
                sin.push(a.sin());
            }
        }
        (cos, sin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen2(layers: usize, embedding: usize, heads: usize, head_dim: usize, ff: usize) -> HParams {
        HParams {
            arch: "qwen2".into(),
            layers,
            embedding,
            heads,
            kv_heads: 2,
            head_dim,
            feed_forward: ff,
            vocab: 151_936,
            context: 32_768,
            rms_eps: 1e-6,
            rope_theta: 1e6,
            rope_style: RopeStyle::Halves,
            qkv_bias: true,
            rope_freqs: None,
        }
    }

    #[test]
    fn parameters_match_the_published_sizes() {
        // Qwen2.5 0.5B: 0.49 billion; Qwen2.5 1.5B: 1.54 billion.
        let small = qwen2(24, 896, 14, 64, 4864).parameters();
        let large = qwen2(28, 1536, 12, 128, 8960).parameters();
        assert!((480_000_000..500_000_000).contains(&small), "{small}");
        assert!((1_500_000_000..1_560_000_000).contains(&large), "{large}");
    }
}
