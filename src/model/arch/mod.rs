//! The decoder-only transformer shared by the supported architectures, and [`Model`], the
//! loaded weights of one GGUF file.
//!
//! Each architecture has its own file ([`llama`], [`qwen2`]) that reads its metadata keys and
//! tensor names into a [`TransformerConfig`]; the forward pass here is written once:
//! RMSNorm → attention (RoPE, grouped-query, causal) → residual → RMSNorm → SwiGLU MLP →
//! residual, then the final norm and the output projection of the last position.
//!
//! Weights stay quantized. There are two implementations of the forward pass, picked by
//! [`LoadOptions::engine`]: cairn's own CPU code ([`Engine::Native`], in [`super::cpu`], the
//! default) and the earlier one on candle's tensors and quantized kernels ([`Engine::Candle`]),
//! kept as the reference the native pass is tested against and for comparisons in
//! `cairn bench`. In both, the token embedding table stays quantized and only the looked-up
//! rows are dequantized.

pub mod llama;
pub mod qwen2;

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use super::cpu::matmul::{QMatrix, Stored};
use super::cpu::{kernels, HostBlock, HostModel};
use super::gguf::{GgufFile, ModelError, Result};
use super::kv_cache::KvCache;

/// The architectures cairn implements, by `general.architecture`.
pub const SUPPORTED: &[&str] = &["llama", "qwen2"];

/// How rotary position embedding pairs up the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (0,1), (2,3)… — GGUF llama (the converter permutes Q/K for it).
    Interleaved,
    /// First half with second half — Qwen2 (GPT-NeoX style).
    Halves,
}

/// Hyper-parameters read from the GGUF metadata.
#[derive(Debug, Clone)]
pub struct TransformerConfig {
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
}

/// Which implementation of the forward pass runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// cairn's own CPU forward pass and kernels ([`super::cpu`]).
    #[default]
    Native,
    /// The forward pass on candle's tensors and quantized kernels.
    Candle,
}

impl Engine {
    /// `native` or `candle`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Candle => "candle",
        }
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "native" => Ok(Engine::Native),
            "candle" => Ok(Engine::Candle),
            _ => Err(format!(
                "unknown engine `{s}`: expected `native` or `candle`"
            )),
        }
    }
}

/// Options for loading weights.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Candle engine only: re-quantize Q4_1/Q5_0/Q5_1 tensors to Q8_0 (candle has no SIMD
    /// kernels for them). The native engine runs Q4_1, Q5_0, Q8_0, Q4_K and Q6_K as stored.
    pub requantize: bool,
    /// Where tensors live (the native engine runs on the CPU only).
    pub device: Device,
    /// Which forward pass to use.
    pub engine: Engine,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            requantize: true,
            device: Device::Cpu,
            engine: Engine::Native,
        }
    }
}

struct Attention {
    q: QMatMul,
    k: QMatMul,
    v: QMatMul,
    o: QMatMul,
    biases: Option<(Tensor, Tensor, Tensor)>,
}

struct Mlp {
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
}

struct Block {
    attn_norm: Tensor,
    attn: Attention,
    ffn_norm: Tensor,
    mlp: Mlp,
}

/// Counts of what loading did, for `-v` and `cairn model info`.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Tensors re-quantized to Q8_0 at load.
    pub requantized: usize,
    /// Bytes of quantized weights held.
    pub weight_bytes: usize,
    /// The forward pass in use.
    pub engine: Engine,
    /// The native engine's kernels (`avx512vnni`, `avx2` or `scalar`); empty for candle.
    pub kernels: &'static str,
}

/// The candle engine's weights.
struct CandleWeights {
    embedding: Arc<QTensor>,
    blocks: Vec<Block>,
    norm: Tensor,
    output: QMatMul,
    rope_cos: Tensor,
    rope_sin: Tensor,
}

enum Weights {
    Candle(CandleWeights),
    Native(HostModel),
}

/// The loaded weights of one model and its forward pass.
pub struct Model {
    /// Hyper-parameters.
    pub config: TransformerConfig,
    /// What loading did.
    pub report: LoadReport,
    weights: Weights,
    device: Device,
}

/// Tensor names of one architecture's GGUF layout.
pub(crate) struct Loader<'a> {
    gguf: &'a mut GgufFile,
    opts: &'a LoadOptions,
    report: LoadReport,
}

impl<'a> Loader<'a> {
    pub(crate) fn new(gguf: &'a mut GgufFile, opts: &'a LoadOptions) -> Self {
        Loader {
            gguf,
            opts,
            report: LoadReport::default(),
        }
    }

    fn qtensor(&mut self, name: &str, dims: &[usize]) -> Result<Arc<QTensor>> {
        let t = self.gguf.tensor(name, Some(dims), &self.opts.device)?;
        // candle has no SIMD kernels for these types; Q8_0 has them (see --keep-quant).
        let t = match t.dtype() {
            _ if !self.opts.requantize || dims.len() != 2 => t,
            GgmlDType::Q5_0 => {
                self.report.requantized += 1;
                q5_0_to_q8_0(&t, &self.opts.device)?
            }
            GgmlDType::Q4_1 | GgmlDType::Q5_1 => {
                self.report.requantized += 1;
                QTensor::quantize(&t.dequantize(&self.opts.device)?, GgmlDType::Q8_0)?
            }
            _ => t,
        };
        self.report.weight_bytes += t.storage_size_in_bytes();
        Ok(Arc::new(t))
    }

    /// A weight matrix for the native engine, in its stored format when a kernel exists for
    /// it, else re-quantized to Q8_0 (counted in the report).
    fn host_matrix(&mut self, name: &str, dims: &[usize]) -> Result<QMatrix> {
        let t = self.gguf.tensor(name, Some(dims), &Device::Cpu)?;
        let (rows, cols) = (dims[0], dims[1]);
        let stored = match t.dtype() {
            GgmlDType::Q4_1 => Some(Stored::Q4_1),
            GgmlDType::Q5_0 => Some(Stored::Q5_0),
            GgmlDType::Q8_0 => Some(Stored::Q8_0),
            GgmlDType::Q4K => Some(Stored::Q4K),
            GgmlDType::Q6K => Some(Stored::Q6K),
            _ => None,
        };
        let bad = |reason: String| ModelError::BadTensor {
            path: self.gguf.path.clone(),
            name: name.to_string(),
            reason,
        };
        let m = match stored {
            Some(stored) => {
                let bytes = t.data()?;
                QMatrix::from_bytes(stored, rows, cols, &bytes).map_err(bad)?
            }
            None => {
                if cols % kernels::QK != 0 {
                    return Err(bad(format!(
                        "{:?} with {cols} columns has no native kernel and cannot be \
                         re-quantized to Q8_0 (not a multiple of 32); use --engine candle",
                        t.dtype()
                    )));
                }
                self.report.requantized += 1;
                let values = t
                    .dequantize(&Device::Cpu)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                let mut bytes = Vec::with_capacity(values.len() / kernels::QK * 34);
                kernels::quantize_q8_0(&values, &mut bytes);
                QMatrix::from_bytes(Stored::Q8_0, rows, cols, &bytes).map_err(bad)?
            }
        };
        self.report.weight_bytes += m.bytes();
        Ok(m)
    }

    fn host_vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        Ok(self.vector(name, len)?.to_vec1::<f32>()?)
    }

    /// Loads every tensor for the native engine.
    fn load_native(
        mut self,
        config: TransformerConfig,
        rope_freqs: Option<Vec<f32>>,
    ) -> Result<Model> {
        let c = &config;
        let (e, hd) = (c.embedding, c.head_dim);
        let embedding = self.host_matrix("token_embd.weight", &[c.vocab, e])?;
        let output = if self.gguf.has_tensor("output.weight") {
            Some(self.host_matrix("output.weight", &[c.vocab, e])?)
        } else {
            None
        };
        let norm = self.host_vector("output_norm.weight", e)?;
        let mut blocks = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let p = format!("blk.{i}");
            let biases = if c.qkv_bias {
                Some((
                    self.host_vector(&format!("{p}.attn_q.bias"), c.heads * hd)?,
                    self.host_vector(&format!("{p}.attn_k.bias"), c.kv_heads * hd)?,
                    self.host_vector(&format!("{p}.attn_v.bias"), c.kv_heads * hd)?,
                ))
            } else {
                None
            };
            blocks.push(HostBlock {
                attn_norm: self.host_vector(&format!("{p}.attn_norm.weight"), e)?,
                q: self.host_matrix(&format!("{p}.attn_q.weight"), &[c.heads * hd, e])?,
                k: self.host_matrix(&format!("{p}.attn_k.weight"), &[c.kv_heads * hd, e])?,
                v: self.host_matrix(&format!("{p}.attn_v.weight"), &[c.kv_heads * hd, e])?,
                o: self.host_matrix(&format!("{p}.attn_output.weight"), &[e, c.heads * hd])?,
                biases,
                ffn_norm: self.host_vector(&format!("{p}.ffn_norm.weight"), e)?,
                gate: self.host_matrix(&format!("{p}.ffn_gate.weight"), &[c.feed_forward, e])?,
                up: self.host_matrix(&format!("{p}.ffn_up.weight"), &[c.feed_forward, e])?,
                down: self.host_matrix(&format!("{p}.ffn_down.weight"), &[e, c.feed_forward])?,
            });
        }
        let (rope_cos, rope_sin) = rope_values(c, rope_freqs.as_deref());
        self.report.engine = Engine::Native;
        self.report.kernels = kernels::Isa::detect().name();
        Ok(Model {
            config,
            report: self.report,
            weights: Weights::Native(HostModel {
                embedding,
                output,
                norm,
                blocks,
                rope_cos,
                rope_sin,
            }),
            device: Device::Cpu,
        })
    }

    fn matmul(&mut self, name: &str, dims: &[usize]) -> Result<QMatMul> {
        Ok(QMatMul::from_arc(self.qtensor(name, dims)?)?)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor> {
        let t = self.gguf.tensor(name, Some(&[len]), &self.opts.device)?;
        Ok(t.dequantize(&self.opts.device)?)
    }

    /// Loads every tensor of the standard GGUF decoder layout.
    pub(crate) fn load(
        mut self,
        config: TransformerConfig,
        rope_freqs: Option<Vec<f32>>,
    ) -> Result<Model> {
        if self.opts.engine == Engine::Native && self.opts.device.is_cpu() {
            return self.load_native(config, rope_freqs);
        }
        self.report.engine = Engine::Candle;
        let c = &config;
        let (e, hd) = (c.embedding, c.head_dim);
        let embedding = self.qtensor("token_embd.weight", &[c.vocab, e])?;
        let output = if self.gguf.has_tensor("output.weight") {
            self.matmul("output.weight", &[c.vocab, e])?
        } else {
            // Tied embeddings: the output projection is the embedding table itself.
            QMatMul::from_arc(embedding.clone())?
        };
        let norm = self.vector("output_norm.weight", e)?;
        let mut blocks = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let p = format!("blk.{i}");
            let biases = if c.qkv_bias {
                Some((
                    self.vector(&format!("{p}.attn_q.bias"), c.heads * hd)?,
                    self.vector(&format!("{p}.attn_k.bias"), c.kv_heads * hd)?,
                    self.vector(&format!("{p}.attn_v.bias"), c.kv_heads * hd)?,
                ))
            } else {
                None
            };
            blocks.push(Block {
                attn_norm: self.vector(&format!("{p}.attn_norm.weight"), e)?,
                attn: Attention {
                    q: self.matmul(&format!("{p}.attn_q.weight"), &[c.heads * hd, e])?,
                    k: self.matmul(&format!("{p}.attn_k.weight"), &[c.kv_heads * hd, e])?,
                    v: self.matmul(&format!("{p}.attn_v.weight"), &[c.kv_heads * hd, e])?,
                    o: self.matmul(&format!("{p}.attn_output.weight"), &[e, c.heads * hd])?,
                    biases,
                },
                ffn_norm: self.vector(&format!("{p}.ffn_norm.weight"), e)?,
                mlp: Mlp {
                    gate: self.matmul(&format!("{p}.ffn_gate.weight"), &[c.feed_forward, e])?,
                    up: self.matmul(&format!("{p}.ffn_up.weight"), &[c.feed_forward, e])?,
                    down: self.matmul(&format!("{p}.ffn_down.weight"), &[e, c.feed_forward])?,
                },
            });
        }
        let (rope_cos, rope_sin) = rope_tables(c, rope_freqs.as_deref(), &self.opts.device)?;
        Ok(Model {
            config,
            report: self.report,
            weights: Weights::Candle(CandleWeights {
                embedding,
                blocks,
                norm,
                output,
                rope_cos,
                rope_sin,
            }),
            device: self.opts.device.clone(),
        })
    }
}

/// Bytes of one Q5_0 block: f16 scale, 32 high bits, 16 bytes of low nibbles.
const Q5_0_BLOCK: usize = 22;
/// Bytes of one Q8_0 block: f16 scale, 32 signed bytes.
const Q8_0_BLOCK: usize = 34;

/// Re-encodes a Q5_0 tensor as Q8_0 without loss: both store `scale × q` per 32 values with the
/// same f16 scale, and Q5_0's `q` in -16..=15 fits an i8. Measured on the default preset this
/// took load from 3.8 s (dequantize, then quantize again with new rounding) to 1.5 s
/// (BENCHMARKS.md, "Load time").
fn q5_0_to_q8_0(t: &QTensor, device: &Device) -> Result<QTensor> {
    let src = t.data()?;
    if src.len() % Q5_0_BLOCK != 0 {
        return Err(ModelError::Candle(candle_core::Error::Msg(format!(
            "Q5_0 data of {} bytes is not whole blocks",
            src.len()
        ))));
    }
    let mut dst = Vec::with_capacity(src.len() / Q5_0_BLOCK * Q8_0_BLOCK);
    for block in src.chunks_exact(Q5_0_BLOCK) {
        let (scale, rest) = block.split_at(2);
        let (qh, qs) = rest.split_at(4);
        let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
        dst.extend_from_slice(scale);
        let mut q = [0u8; 32];
        for j in 0..16 {
            let hi0 = (((qh >> j) << 4) & 0x10) as u8;
            let hi1 = ((qh >> (j + 12)) & 0x10) as u8;
            q[j] = (((qs[j] & 0x0F) | hi0) as i8 - 16) as u8;
            q[j + 16] = (((qs[j] >> 4) | hi1) as i8 - 16) as u8;
        }
        dst.extend_from_slice(&q);
    }
    let storage = QStorage::from_data(std::borrow::Cow::Owned(dst), device, GgmlDType::Q8_0)?;
    Ok(QTensor::new(storage, t.shape().clone())?)
}

/// cos/sin tables for every position of the context, `(context, head_dim / 2)` each.
fn rope_tables(
    c: &TransformerConfig,
    freq_factors: Option<&[f32]>,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = c.head_dim / 2;
    let (cos, sin) = rope_values(c, freq_factors);
    Ok((
        Tensor::from_vec(cos, (c.context, half), device)?,
        Tensor::from_vec(sin, (c.context, half), device)?,
    ))
}

/// The values of [`rope_tables`], row-major.
fn rope_values(c: &TransformerConfig, freq_factors: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
    let half = c.head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let f = 1f32 / c.rope_theta.powf(2.0 * i as f32 / c.head_dim as f32);
            match freq_factors {
                Some(ff) => f / ff[i],
                None => f,
            }
        })
        .collect();
    let mut cos = Vec::with_capacity(c.context * half);
    let mut sin = Vec::with_capacity(c.context * half);
    for pos in 0..c.context {
        for f in &inv_freq {
            let a = pos as f32 * f;
            cos.push(a.cos());
            sin.push(a.sin());
        }
    }
    (cos, sin)
}

/// Loads a model of any supported architecture from an open GGUF file.
pub fn load(gguf: &mut GgufFile, opts: &LoadOptions) -> Result<Model> {
    let arch = gguf.architecture()?;
    match arch.as_str() {
        "llama" => llama::load(gguf, opts),
        "qwen2" => qwen2::load(gguf, opts),
        _ => Err(ModelError::UnsupportedArch {
            path: gguf.path.clone(),
            arch,
            supported: SUPPORTED.join(", "),
        }),
    }
}

/// Reads the hyper-parameters common to the llama-family layouts under `<arch>.*` keys.
pub(crate) fn read_config(
    gguf: &GgufFile,
    arch: &str,
    rope_style: RopeStyle,
    qkv_bias: bool,
) -> Result<TransformerConfig> {
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
    Ok(TransformerConfig {
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
        rope_theta: gguf.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0),
        rope_style,
        qkv_bias,
    })
}

impl Model {
    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// An empty KV cache sized for this model, of the kind its forward pass uses.
    pub fn new_cache(&self) -> KvCache {
        let c = &self.config;
        match self.weights {
            Weights::Native(_) => KvCache::new_host(c.layers, c.kv_heads, c.head_dim, c.context),
            Weights::Candle(_) => {
                KvCache::new(c.layers, c.kv_heads, c.head_dim, c.context, &self.device)
            }
        }
    }

    /// The forward pass in use.
    pub fn engine(&self) -> Engine {
        self.report.engine
    }

    /// Runs `tokens` at positions `cache.len()..`, appends their keys/values to the cache and
    /// returns the logits of the last token, shape `(vocab,)`.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        let c = &self.config;
        let n = tokens.len();
        if n == 0 {
            return Err(ModelError::Candle(candle_core::Error::Msg(
                "forward called with no tokens".into(),
            )));
        }
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(ModelError::BadToken { id, vocab: c.vocab });
        }
        let w = match &self.weights {
            Weights::Native(host) => {
                let logits = host.forward(c, tokens, cache)?;
                let vocab = logits.len();
                return Ok(Tensor::from_vec(logits, vocab, &self.device)?);
            }
            Weights::Candle(w) => w,
        };
        cache.reserve(c.layers, n)?;
        let pos = cache.len();
        let total = pos + n;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = w.embedding.embedding(&ids)?; // (n, e)
        let cos = w.rope_cos.narrow(0, pos, n)?;
        let sin = w.rope_sin.narrow(0, pos, n)?;
        let mask = if n > 1 {
            Some(causal_mask(n, pos, &self.device)?)
        } else {
            None
        };
        for (i, b) in w.blocks.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &b.attn_norm, c.rms_eps as f32)?;
            let a = self.attention(i, b, &h, &cos, &sin, mask.as_ref(), cache, total)?;
            x = (x + a)?;
            let h = candle_nn::ops::rms_norm(&x, &b.ffn_norm, c.rms_eps as f32)?;
            let gate = b.mlp.gate.forward(&h)?;
            let up = b.mlp.up.forward(&h)?;
            let m = b.mlp.down.forward(&(candle_nn::ops::silu(&gate)? * up)?)?;
            x = (x + m)?;
        }
        cache.advance(n);
        let last = x.narrow(0, n - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &w.norm, c.rms_eps as f32)?;
        Ok(w.output.forward(&last)?.squeeze(0)?)
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        layer: usize,
        b: &Block,
        h: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
        total: usize,
    ) -> Result<Tensor> {
        let c = &self.config;
        let n = h.dim(0)?;
        let (hd, nh, nkv) = (c.head_dim, c.heads, c.kv_heads);
        let mut q = b.attn.q.forward(h)?;
        let mut k = b.attn.k.forward(h)?;
        let mut v = b.attn.v.forward(h)?;
        if let Some((bq, bk, bv)) = &b.attn.biases {
            q = q.broadcast_add(bq)?;
            k = k.broadcast_add(bk)?;
            v = v.broadcast_add(bv)?;
        }
        // (n, heads * hd) -> (1, heads, n, hd), the layout the RoPE kernels take.
        let to_heads = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((1, n, heads, hd))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let rope = |t: &Tensor| -> Result<Tensor> {
            Ok(match c.rope_style {
                RopeStyle::Interleaved => candle_nn::rotary_emb::rope_i(t, cos, sin)?,
                RopeStyle::Halves => candle_nn::rotary_emb::rope(t, cos, sin)?,
            })
        };
        let q = rope(&to_heads(q, nh)?)?.squeeze(0)?; // (nh, n, hd)
        let k = rope(&to_heads(k, nkv)?)?.squeeze(0)?; // (nkv, n, hd)
        let v = to_heads(v, nkv)?.squeeze(0)?;
        cache.write(layer, &k, &v)?;
        let (k_all, v_all) = cache.view(layer, total)?; // (nkv, total, hd)

        // Grouped-query attention without copying the cache: the query heads that share a
        // key/value head are stacked along the row axis, (nkv, group * n, hd).
        let group = nh / nkv;
        let q = q.reshape((nkv, group * n, hd))?;
        let scale = 1.0 / (hd as f64).sqrt();
        let scores = (q.matmul(&k_all.t()?)? * scale)?; // (nkv, group * n, total)
        let scores = match mask {
            Some(m) => scores
                .reshape((nkv, group, n, total))?
                .broadcast_add(m)?
                .reshape((nkv, group * n, total))?,
            None => scores,
        };
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = probs.matmul(&v_all)?; // (nkv, group * n, hd) == (nh, n, hd)
        let out = out
            .reshape((nh, n, hd))?
            .transpose(0, 1)?
            .contiguous()?
            .reshape((n, nh * hd))?;
        Ok(b.attn.o.forward(&out)?)
    }
}

/// Additive causal mask `(n, pos + n)`: row i may see columns `0..=pos + i`.
fn causal_mask(n: usize, pos: usize, device: &Device) -> Result<Tensor> {
    let total = pos + n;
    let mask: Vec<f32> = (0..n)
        .flat_map(|i| (0..total).map(move |j| if j <= pos + i { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Ok(Tensor::from_vec(mask, (n, total), device)?.to_dtype(DType::F32)?)
}

/// Logits as a host vector (for sampling).
pub fn logits_to_vec(logits: &Tensor) -> Result<Vec<f32>> {
    Ok(logits
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1::<f32>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q5_0_to_q8_0_is_lossless() {
        let values: Vec<f32> = (0..4 * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let t = Tensor::from_vec(values, (4, 64), &Device::Cpu).unwrap();
        let q5 = QTensor::quantize(&t, GgmlDType::Q5_0).unwrap();
        let q8 = q5_0_to_q8_0(&q5, &Device::Cpu).unwrap();
        assert_eq!(q8.dtype(), GgmlDType::Q8_0);
        assert_eq!(q8.shape(), q5.shape());
        let values = |q: &QTensor| -> Vec<f32> {
            let t = q.dequantize(&Device::Cpu).unwrap();
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        };
        let (a, b) = (values(&q5), values(&q8));
        assert_eq!(a, b);
    }
}
