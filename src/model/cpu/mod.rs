//! cairn's own CPU engine: the decoder on plain `f32` buffers, quantized weights and an f16
//! KV cache, without a tensor library in the hot path (the default engine).
//!
//! - [`kernels`]: quantized dot products (AMX tiles for prefill, AVX-512 VNNI, AVX2, scalar),
//!   chosen at run time.
//! - [`matmul`]: weight matrices in their GGUF formats and the threaded matmul.
//! - [`pool`]: the threads, shared by every session of the process.
//! - `attention`: causal grouped-query attention over the KV cache (per token and tiled).
//! - `load`: reading the weights from the GGUF file; `state`: a session's [`CpuState`].
//!
//! The forward pass ([`CpuEngine`], a [`Forward`]) is the same computation as the candle
//! engine's ([`crate::model::candle`], which the tests compare it with): RMSNorm → Q/K/V
//! (+ biases) → RoPE → causal grouped-query attention over the KV cache → output projection →
//! residual → RMSNorm → SwiGLU MLP → residual; then the final norm and the output projection
//! of the last token, written into the state's logits buffer. Every intermediate buffer lives
//! in the session's [`CpuState`] and is reused, so decoding a token allocates nothing.

pub mod kernels;
/// Defines a function whose body is compiled three times: for AVX-512, for AVX2 with FMA,
/// and for the build's baseline, the copy picked at run time from [`kernels::Isa::detect`].
/// The plain-Rust loops of the forward pass (attention, norms, quantizing activations)
/// vectorize to whatever they are compiled for, and one binary must run on any x86-64 CPU.
/// The body is an `#[inline(always)]` function, so it is compiled inside each copy; what it
/// calls should be inlined too (closures, iterators) or have its own dispatch (the kernels).
macro_rules! multiversion {
    ($(#[$attr:meta])* $vis:vis fn $name:ident $(<const $c:ident: usize>)?
        ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn inner $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v512 $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? {
                    inner $(::<$c>)? ($($arg),*)
                }
                #[target_feature(enable = "avx2,fma,f16c")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v2 $(<const $c: usize>)? ($($arg: $ty),*) $(-> $ret)? {
                    inner $(::<$c>)? ($($arg),*)
                }
                match $crate::model::cpu::kernels::Isa::detect() {
                    // SAFETY: `Isa::detect` found these features on this CPU.
                    $crate::model::cpu::kernels::Isa::Avx512Vnni
                    | $crate::model::cpu::kernels::Isa::Amx => {
                        return unsafe { v512 $(::<$c>)? ($($arg),*) }
                    }
                    $crate::model::cpu::kernels::Isa::Avx2 => {
                        return unsafe { v2 $(::<$c>)? ($($arg),*) }
                    }
                    $crate::model::cpu::kernels::Isa::Scalar => {}
                }
            }
            inner $(::<$c>)? ($($arg),*)
        }
    };
}
pub(crate) use multiversion;

mod attention;
pub mod bandwidth;
mod load;
pub mod matmul;
pub mod pool;
mod state;

pub use state::{CpuSnapshot, CpuState};

use crate::model::error::Result;
use crate::model::forward::Forward;
use crate::model::gguf::GgufFile;
use crate::model::hparams::{HParams, RopeStyle};
use crate::model::kv_cache::KvPositions;
use crate::model::weights::{self, LoadStats, Weights};
use attention::attention;
use matmul::QMatrix;
use pool::SendPtr;
use state::Scratch;

/// The CPU engine: a model's weights as [`QMatrix`] and `f32` vectors, and its RoPE tables.
pub struct CpuEngine {
    hp: HParams,
    /// The output projection is the embedding table when `output` is `None` (tied weights).
    weights: Weights<QMatrix, QMatrix, Vec<f32>>,
    /// `cos`, `sin` of every position: `context × head_dim / 2` each.
    rope_cos: Vec<f32>,
    rope_sin: Vec<f32>,
}

impl CpuEngine {
    /// Loads every tensor of the model for the CPU engine.
    pub fn load(gguf: &mut GgufFile, hp: HParams) -> Result<(Self, LoadStats)> {
        let mut loader = load::HostLoader {
            gguf,
            stats: LoadStats::default(),
        };
        let weights = weights::load(&hp, &mut loader)?;
        // Every matrix is read once per decoded token; of the embedding table, one row
        // (unless it is also the output projection).
        let output = weights.output.as_ref().unwrap_or(&weights.embedding);
        loader.stats.decode_bytes = output.bytes()
            + weights
                .blocks
                .iter()
                .map(|b| {
                    [&b.q, &b.k, &b.v, &b.o, &b.gate, &b.up, &b.down]
                        .iter()
                        .map(|m| m.bytes())
                        .sum::<usize>()
                })
                .sum::<usize>();
        let (rope_cos, rope_sin) = hp.rope_tables();
        let engine = CpuEngine {
            hp,
            weights,
            rope_cos,
            rope_sin,
        };
        Ok((engine, loader.stats))
    }

    /// The kernels in use on this CPU (`avx512vnni`, `avx2` or `scalar`).
    pub fn kernels() -> &'static str {
        kernels::Isa::detect().name()
    }
}

impl Forward for CpuEngine {
    type State = CpuState;

    fn new_state(&self) -> CpuState {
        let c = &self.hp;
        // Keys and values are held as f16 (see `attention`).
        CpuState::new(KvPositions::new(
            c.layers, c.kv_heads, c.head_dim, c.context, 2,
        ))
    }

    fn forward(&self, tokens: &[u32], state: &mut CpuState) -> Result<()> {
        let c = &self.hp;
        let w = &self.weights;
        let n = tokens.len();
        let (e, hd) = (c.embedding, c.head_dim);
        let (qw, kvw) = (c.heads * hd, c.kv_heads * hd);
        let eps = c.rms_eps as f32;
        state.reserve(n)?;
        let pos = state.kv.len();
        let Scratch {
            x,
            h,
            q,
            k,
            v,
            att,
            gate,
            up,
            acts,
        } = &mut state.scratch;
        let x = sized(x, n * e);
        for (t, row) in tokens.iter().zip(x.chunks_exact_mut(e)) {
            w.embedding.dequantize_row(*t as usize, row);
        }
        let h = sized(h, n * e);
        let q = sized(q, n * qw);
        let k = sized(k, n * kvw);
        let v = sized(v, n * kvw);
        let att = sized(att, n * qw);
        let gate = sized(gate, n * c.feed_forward);
        let up = sized(up, n * c.feed_forward);
        for (layer, b) in w.blocks.iter().enumerate() {
            rms_norm(x, &b.attn_norm, eps, h);
            acts.quantize(h, n, e, &[&b.q, &b.k, &b.v]);
            matmul::matmul(&[&b.q, &b.k, &b.v], acts, &mut [&mut *q, &mut *k, &mut *v]);
            if let Some((bq, bk, bv)) = &b.biases {
                add_rows(q, bq);
                add_rows(k, bk);
                add_rows(v, bv);
            }
            rotate(q, n, hd, pos, c.rope_style, &self.rope_cos, &self.rope_sin);
            rotate(k, n, hd, pos, c.rope_style, &self.rope_cos, &self.rope_sin);
            let (keys, values) = (&mut state.keys[layer], &mut state.values[layer]);
            attention::store_keys(keys, k, pos, c.kv_heads, hd);
            attention::store_values(values, v, pos, kvw);
            attention(
                q,
                &keys[..attention::key_slots(pos + n, kvw)],
                &values[..(pos + n) * kvw],
                n,
                pos,
                c,
                att,
            );
            acts.quantize(att, n, qw, &[&b.o]);
            matmul::matmul(&[&b.o], acts, &mut [&mut *h]);
            add_into(x, h);

            rms_norm(x, &b.ffn_norm, eps, h);
            acts.quantize(h, n, e, &[&b.gate, &b.up]);
            matmul::matmul(&[&b.gate, &b.up], acts, &mut [&mut *gate, &mut *up]);
            swiglu(gate, up, n);
            acts.quantize(gate, n, c.feed_forward, &[&b.down]);
            matmul::matmul(&[&b.down], acts, &mut [&mut *h]);
            add_into(x, h);
        }
        let last = &x[(n - 1) * e..n * e];
        let hl = &mut h[..e];
        rms_norm(last, &w.norm, eps, hl);
        // The loader checked its shape: `vocab` rows.
        let output = w.output.as_ref().unwrap_or(&w.embedding);
        acts.quantize(hl, 1, e, &[output]);
        let logits = sized(&mut state.logits, c.vocab);
        matmul::matmul(&[output], acts, &mut [logits]);
        state.kv.advance(n);
        Ok(())
    }
}

fn sized(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
    v.resize(len, 0.0);
    &mut v[..len]
}

/// `out = x / rms(x) · w`, row by row (rows in parallel during prefill).
fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let e = w.len();
    let o = SendPtr(out.as_mut_ptr());
    pool::for_rows(x.len() / e, &|t| {
        // SAFETY: row t of `out` is written by this piece only.
        let or = unsafe { std::slice::from_raw_parts_mut(o.at(t * e), e) };
        norm_row(&x[t * e..(t + 1) * e], w, eps, or);
    });
}

multiversion! {
    /// One row of [`rms_norm`].
    fn norm_row(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        let ss: f32 = x.iter().map(|v| v * v).sum();
        let scale = 1.0 / (ss / w.len() as f32 + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
            *o = v * scale * g;
        }
    }
}

/// `gate = silu(gate) · up`, row by row (rows in parallel during prefill).
fn swiglu(gate: &mut [f32], up: &[f32], n: usize) {
    let width = gate.len() / n;
    let g = SendPtr(gate.as_mut_ptr());
    pool::for_rows(n, &|t| {
        // SAFETY: row t of `gate` is written by this piece only.
        let gr = unsafe { std::slice::from_raw_parts_mut(g.at(t * width), width) };
        swiglu_row(gr, &up[t * width..(t + 1) * width]);
    });
}

multiversion! {
    /// One row of [`swiglu`].
    fn swiglu_row(gate: &mut [f32], up: &[f32]) {
        for (g, &u) in gate.iter_mut().zip(up) {
            *g = *g / (1.0 + (-*g).exp()) * u;
        }
    }
}

/// Adds `bias` to every row of `x`.
fn add_rows(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        for (a, &b) in row.iter_mut().zip(bias) {
            *a += b;
        }
    }
}

fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Rotates every head of every row of `x` (`n` rows of heads × `hd`) by its position
/// `pos + row` (RoPE), pairing dimensions as `style` says.
fn rotate(
    x: &mut [f32],
    n: usize,
    hd: usize,
    pos: usize,
    style: RopeStyle,
    cos: &[f32],
    sin: &[f32],
) {
    let half = hd / 2;
    let width = x.len() / n;
    for (i, row) in x.chunks_exact_mut(width).enumerate() {
        let cs = &cos[(pos + i) * half..][..half];
        let sn = &sin[(pos + i) * half..][..half];
        for head in row.chunks_exact_mut(hd) {
            match style {
                RopeStyle::Interleaved => {
                    for (j, pair) in head.chunks_exact_mut(2).enumerate() {
                        let (a, b) = (pair[0], pair[1]);
                        pair[0] = a * cs[j] - b * sn[j];
                        pair[1] = a * sn[j] + b * cs[j];
                    }
                }
                RopeStyle::Halves => {
                    let (lo, hi) = head.split_at_mut(half);
                    for j in 0..half {
                        let (a, b) = (lo[j], hi[j]);
                        lo[j] = a * cs[j] - b * sn[j];
                        hi[j] = a * sn[j] + b * cs[j];
                    }
                }
            }
        }
    }
}
