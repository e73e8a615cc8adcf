//! The candle engine: the forward pass on candle's tensors and quantized kernels, written
//! once for any candle [`Device`]. It is the path by which accelerators (CUDA, Metal) run;
//! on the CPU it is `--engine candle`, the reference the CPU engine is tested against and a
//! comparison in `cairn bench`.
//!
//! - `load`: reading the weights onto the device (with `--keep-quant`'s re-quantization).
//! - `state`: a session's [`CandleState`], the KV cache as tensors and the logits.
//!
//! The token embedding table stays quantized and only the looked-up rows are dequantized.
//! The logits of the last token are copied to the state's host buffer once per forward pass;
//! on a GPU that copy is timed ([`CandleState::logits_copy_time`], reported by `cairn bench`).

mod load;
mod state;

pub use state::{CandleSnapshot, CandleState};

use std::sync::{Arc, Once};

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

use crate::model::error::Result;
use crate::model::forward::Forward;
use crate::model::gguf::GgufFile;
use crate::model::hparams::{HParams, RopeStyle};
use crate::model::kv_cache::KvPositions;
use crate::model::weights::{self, Block, LoadStats, Weights};

/// How to load a model onto the candle engine.
#[derive(Debug, Clone)]
pub struct CandleOptions {
    /// Where the weights and the KV cache live.
    pub device: Device,
    /// Re-quantize Q4_1/Q5_0/Q5_1 tensors to Q8_0 (candle has no SIMD kernels for them).
    pub requantize: bool,
    /// Threads of candle's CPU kernels and of rayon's global pool; 0 leaves candle's default.
    pub threads: usize,
}

/// The candle engine: a model's weights as candle tensors on one device.
pub struct CandleEngine {
    hp: HParams,
    /// `output` is `None` here; the projection in use is [`CandleEngine::output`].
    weights: Weights<Arc<QTensor>, QMatMul, Tensor>,
    /// The output projection (the embedding table when tied).
    output: QMatMul,
    /// `cos`, `sin` of every position, `(context, head_dim / 2)` each.
    rope_cos: Tensor,
    rope_sin: Tensor,
    device: Device,
}

impl CandleEngine {
    /// Loads every tensor of the model onto `opts.device`, after sizing candle's CPU threads.
    pub fn load(
        gguf: &mut GgufFile,
        hp: HParams,
        opts: &CandleOptions,
    ) -> Result<(Self, LoadStats)> {
        init_threads(opts.threads);
        let mut loader = load::CandleLoader {
            gguf,
            device: &opts.device,
            requantize: opts.requantize,
            stats: LoadStats::default(),
        };
        let mut weights = weights::load(&hp, &mut loader)?;
        let output = match weights.output.take() {
            Some(m) => m,
            // Tied embeddings: the output projection is the embedding table itself.
            None => QMatMul::from_arc(weights.embedding.clone())?,
        };
        let half = hp.head_dim / 2;
        let (cos, sin) = hp.rope_tables();
        let rope_cos = Tensor::from_vec(cos, (hp.context, half), &opts.device)?;
        let rope_sin = Tensor::from_vec(sin, (hp.context, half), &opts.device)?;
        let engine = CandleEngine {
            hp,
            weights,
            output,
            rope_cos,
            rope_sin,
            device: opts.device.clone(),
        };
        Ok((engine, loader.stats))
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

/// Sizes candle's CPU threads, once per process and before any tensor work: its quantized
/// matmuls run on its own worker pool, sized from `CANDLE_NUM_THREADS` when first used; its
/// other ops run on rayon's global pool. `0` leaves both at their defaults (every core).
pub fn init_threads(threads: usize) {
    static ONCE: Once = Once::new();
    if threads == 0 {
        return;
    }
    ONCE.call_once(|| {
        std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global();
    });
}

impl Forward for CandleEngine {
    type State = CandleState;

    fn new_state(&self) -> CandleState {
        let c = &self.hp;
        let kv = KvPositions::new(c.layers, c.kv_heads, c.head_dim, c.context, 4);
        CandleState::new(kv, &self.device)
    }

    fn forward(&self, tokens: &[u32], state: &mut CandleState) -> Result<()> {
        let c = &self.hp;
        let w = &self.weights;
        let n = tokens.len();
        state.reserve(n)?;
        let pos = state.kv.len();
        let total = pos + n;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = w.embedding.embedding(&ids)?; // (n, e)
        let cos = self.rope_cos.narrow(0, pos, n)?;
        let sin = self.rope_sin.narrow(0, pos, n)?;
        let mask = if n > 1 {
            Some(causal_mask(n, pos, &self.device)?)
        } else {
            None
        };
        for (i, b) in w.blocks.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &b.attn_norm, c.rms_eps as f32)?;
            let a = self.attention(i, b, &h, &cos, &sin, mask.as_ref(), state, total)?;
            x = (x + a)?;
            let h = candle_nn::ops::rms_norm(&x, &b.ffn_norm, c.rms_eps as f32)?;
            let gate = b.gate.forward(&h)?;
            let up = b.up.forward(&h)?;
            let m = b.down.forward(&(candle_nn::ops::silu(&gate)? * up)?)?;
            x = (x + m)?;
        }
        state.kv.advance(n);
        let last = x.narrow(0, n - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &w.norm, c.rms_eps as f32)?;
        let logits = self
            .output
            .forward(&last)?
            .squeeze(0)?
            .to_dtype(DType::F32)?;
        if self.device.is_cpu() {
            state.logits = logits.to_vec1::<f32>()?;
        } else {
            // The one copy of the logits, to host memory, timed on its own: a GPU runs the
            // pass asynchronously, so it is waited for first.
            self.device.synchronize()?;
            let start = std::time::Instant::now();
            state.logits = logits.to_vec1::<f32>()?;
            state.logits_copy = Some(start.elapsed());
        }
        Ok(())
    }
}

impl CandleEngine {
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        layer: usize,
        b: &Block<QMatMul, Tensor>,
        h: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: Option<&Tensor>,
        state: &mut CandleState,
        total: usize,
    ) -> Result<Tensor> {
        let c = &self.hp;
        let n = h.dim(0)?;
        let (hd, nh, nkv) = (c.head_dim, c.heads, c.kv_heads);
        let mut q = b.q.forward(h)?;
        let mut k = b.k.forward(h)?;
        let mut v = b.v.forward(h)?;
        if let Some((bq, bk, bv)) = &b.biases {
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
        state.write(layer, &k, &v)?;
        let (k_all, v_all) = state.view(layer, total)?; // (nkv, total, hd)

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
        Ok(b.o.forward(&out)?)
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
