//! cairn's own CPU forward pass: the decoder of [`super::arch`] on plain `f32` buffers and
//! quantized weights, without a tensor library in the hot path.
//!
//! - [`kernels`]: quantized dot products (AVX-512 VNNI, AVX2, scalar), chosen at run time.
//! - [`matmul`]: weight matrices in their GGUF formats and the threaded matmul.
//! - [`pool`]: the threads, shared by every session of the process.
//!
//! The forward pass here is the same computation as the candle path in [`super::arch`]
//! (which the tests compare it with): RMSNorm → Q/K/V (+ biases) → RoPE → causal
//! grouped-query attention over the KV cache → output projection → residual → RMSNorm →
//! SwiGLU MLP → residual; then the final norm and the output projection of the last token.
//! Every intermediate buffer lives in a [`Scratch`] owned by the session's KV cache and is
//! reused, so decoding a token allocates only the returned logits.

pub mod kernels;

use super::arch::{RopeStyle, TransformerConfig};
use super::gguf::{ModelError, Result};
use super::kv_cache::KvCache;
use matmul::{Acts, QMatrix};

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
                    $crate::model::cpu::kernels::Isa::Avx512Vnni => {
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

pub mod matmul;
pub mod pool;

/// One decoder block's weights.
pub(crate) struct HostBlock {
    pub attn_norm: Vec<f32>,
    pub q: QMatrix,
    pub k: QMatrix,
    pub v: QMatrix,
    pub o: QMatrix,
    pub biases: Option<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    pub ffn_norm: Vec<f32>,
    pub gate: QMatrix,
    pub up: QMatrix,
    pub down: QMatrix,
}

/// The weights of a model for the CPU forward pass.
pub(crate) struct HostModel {
    pub embedding: QMatrix,
    /// `None` when the output projection is the embedding table (tied weights).
    pub output: Option<QMatrix>,
    pub norm: Vec<f32>,
    pub blocks: Vec<HostBlock>,
    /// `cos`, `sin` of every position: `context × head_dim / 2` each.
    pub rope_cos: Vec<f32>,
    pub rope_sin: Vec<f32>,
}

/// Working buffers of the CPU forward pass, kept between calls (one per KV cache).
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    acts: Acts,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("tokens", &(self.x.len()))
            .finish_non_exhaustive()
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

/// The dot product of two equal-length slices, in sixteen lanes so that it vectorizes.
#[inline(always)]
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

struct SendPtr(*mut f32);
// SAFETY: each piece of work writes its own (token, head) slice of the output.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    fn at(&self, i: usize) -> *mut f32 {
        // SAFETY: callers stay inside the buffer the pointer came from.
        unsafe { self.0.add(i) }
    }
}

thread_local! {
    static SCORES: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Causal grouped-query attention of `n` new tokens at positions `pos..pos + n` over the
/// cached keys and values of positions `0..pos + n` (position-major, `kv_heads × hd` each).
fn attention(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    n: usize,
    pos: usize,
    c: &TransformerConfig,
    out: &mut [f32],
) {
    if n >= TILED_FROM {
        match c.head_dim {
            64 => return attention_tiled::<64>(q, keys, values, n, pos, c, out),
            128 => return attention_tiled::<128>(q, keys, values, n, pos, c, out),
            _ => {}
        }
    }
    attention_rows(q, keys, values, n, pos, c, out)
}

/// [`attention`] one (token, head) at a time: decode, and any head size.
fn attention_rows(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    n: usize,
    pos: usize,
    c: &TransformerConfig,
    out: &mut [f32],
) {
    let (nh, nkv, hd) = (c.heads, c.kv_heads, c.head_dim);
    let group = nh / nkv;
    let stride = nkv * hd;
    let scale = 1.0 / (hd as f32).sqrt();
    let optr = SendPtr(out.as_mut_ptr());
    let one = |item: usize| {
        let (i, h) = (item / nh, item % nh);
        let kvh = h / group;
        let len = pos + i + 1;
        let qv = &q[i * nh * hd + h * hd..][..hd];
        // SAFETY: item (i, h) alone writes out[i·nh·hd + h·hd ..][..hd].
        let o = unsafe { std::slice::from_raw_parts_mut(optr.at(i * nh * hd + h * hd), hd) };
        let mut scores = SCORES.take();
        scores.resize(len, 0.0);
        attend_row(
            qv,
            keys,
            values,
            stride,
            kvh * hd,
            scale,
            &mut scores[..len],
            o,
        );
        SCORES.set(scores);
    };
    pool::global().run(n * nh, &one);
}

multiversion! {
    /// One query of one head: scores over `scores.len()` cached keys, softmax, and the
    /// weighted sum of values into `out`.
    fn attend_row(
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        stride: usize,
        at: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let hd = q.len();
        let mut max = f32::NEG_INFINITY;
        for (j, sc) in scores.iter_mut().enumerate() {
            *sc = dot_f32(q, &keys[j * stride + at..][..hd]) * scale;
            max = max.max(*sc);
        }
        let mut sum = 0f32;
        for sc in scores.iter_mut() {
            *sc = (*sc - max).exp();
            sum += *sc;
        }
        let inv = 1.0 / sum;
        out.fill(0.0);
        for (j, &p) in scores.iter().enumerate() {
            let w = p * inv;
            for (a, &b) in out.iter_mut().zip(&values[j * stride + at..][..hd]) {
                *a += w * b;
            }
        }
    }
}

/// New tokens from which prefill attention runs in tiles ([`attention_tiled`]).
const TILED_FROM: usize = 8;
/// Query tokens per piece of work in tiled attention (they share one transposed key copy).
const QUERY_TILE: usize = 64;
/// Query tokens whose outputs are accumulated together (kept in registers).
const QUERY_GROUP: usize = 4;
/// Keys per lane group of the transposed key copy.
const KEY_LANES: usize = 16;

thread_local! {
    /// Per-thread transposed keys and scores of tiled attention (taken out while in use).
    static TILE: std::cell::Cell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

multiversion! {
    /// One piece of [`attention_tiled`]: head `h` (key/value head `kvh`) for queries
    /// `i0..i1`, with the per-thread buffers `kt` (transposed keys) and `scores`.
    fn attend_tile<const HD: usize>(
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        pos: usize,
        nh: usize,
        h: usize,
        kvh: usize,
        stride: usize,
        scale: f32,
        i0: usize,
        i1: usize,
        kt: &mut Vec<f32>,
        scores: &mut Vec<f32>,
        optr: &SendPtr,
    ) {
        let len = pos + i1; // keys the last query of the tile sees
        let blocks = len.div_ceil(KEY_LANES);
            kt.resize(blocks * HD * KEY_LANES, 0.0);
            scores.resize(QUERY_TILE * blocks * KEY_LANES, 0.0);
            // Keys transposed: block b holds, for each dimension d, keys 16b..16b+16.
            for b in 0..blocks {
                let dst = &mut kt[b * HD * KEY_LANES..(b + 1) * HD * KEY_LANES];
                for l in 0..KEY_LANES {
                    let j = b * KEY_LANES + l;
                    if j < len {
                        let k = &keys[j * stride + kvh * HD..][..HD];
                        for d in 0..HD {
                            dst[d * KEY_LANES + l] = k[d];
                        }
                    } else {
                        for d in 0..HD {
                            dst[d * KEY_LANES + l] = 0.0;
                        }
                    }
                }
            }
            let width = blocks * KEY_LANES;
            for i in i0..i1 {
                let qv: &[f32; HD] = q[i * nh * HD + h * HD..][..HD].try_into().unwrap();
                let row = &mut scores[(i - i0) * width..(i - i0 + 1) * width];
                let seen = pos + i + 1;
                for b in 0..seen.div_ceil(KEY_LANES) {
                    let kb = &kt[b * HD * KEY_LANES..(b + 1) * HD * KEY_LANES];
                    let mut acc = [0f32; KEY_LANES];
                    for d in 0..HD {
                        let kd: &[f32; KEY_LANES] =
                            kb[d * KEY_LANES..(d + 1) * KEY_LANES].try_into().unwrap();
                        for l in 0..KEY_LANES {
                            acc[l] += qv[d] * kd[l];
                        }
                    }
                    row[b * KEY_LANES..(b + 1) * KEY_LANES].copy_from_slice(&acc);
                }
                // Softmax over the keys this query sees; the rest get weight zero.
                let mut max = f32::NEG_INFINITY;
                for s in &mut row[..seen] {
                    *s *= scale;
                    max = max.max(*s);
                }
                let mut sum = 0f32;
                for s in &mut row[..seen] {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                let inv = 1.0 / sum;
                for s in &mut row[..seen] {
                    *s *= inv;
                }
                row[seen..].fill(0.0);
            }
            // Weighted sums of values, four queries at a time.
            let mut g0 = i0;
            while g0 < i1 {
                let g1 = (g0 + QUERY_GROUP).min(i1);
                let mut acc = [[0f32; HD]; QUERY_GROUP];
                let last = pos + g1; // keys the group's last query sees
                for j in 0..last {
                    let v: &[f32; HD] =
                        values[j * stride + kvh * HD..][..HD].try_into().unwrap();
                    for (gi, a) in acc.iter_mut().enumerate().take(g1 - g0) {
                        let p = scores[(g0 + gi - i0) * width + j];
                        for d in 0..HD {
                            a[d] += p * v[d];
                        }
                    }
                }
                for (gi, a) in acc.iter().enumerate().take(g1 - g0) {
                    let i = g0 + gi;
                    // SAFETY: piece (h, tile) alone writes the head-h slices of its tokens.
                    let o = unsafe {
                        std::slice::from_raw_parts_mut(optr.at(i * nh * HD + h * HD), HD)
                    };
                    o.copy_from_slice(a);
                }
                g0 = g1;
            }
    }
}

/// Prefill attention in tiles: a piece of work is one head and up to [`QUERY_TILE`] query
/// tokens. Its keys are copied once, transposed in groups of sixteen, so that the scores of
/// sixteen keys come out of one vector multiply-add per dimension; the weighted sum of values
/// then runs four queries at a time over each value row. The same numbers as the one-token
/// path up to the order of additions.
fn attention_tiled<const HD: usize>(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    n: usize,
    pos: usize,
    c: &TransformerConfig,
    out: &mut [f32],
) {
    let (nh, nkv) = (c.heads, c.kv_heads);
    let group = nh / nkv;
    let stride = nkv * HD;
    let scale = 1.0 / (HD as f32).sqrt();
    let tiles = n.div_ceil(QUERY_TILE);
    let optr = SendPtr(out.as_mut_ptr());
    let piece = |item: usize| {
        let (h, tile) = (item % nh, item / nh);
        let i0 = tile * QUERY_TILE;
        let i1 = (i0 + QUERY_TILE).min(n);
        let (mut kt, mut scores) = TILE.take();
        attend_tile::<HD>(
            q,
            keys,
            values,
            pos,
            nh,
            h,
            h / group,
            stride,
            scale,
            i0,
            i1,
            &mut kt,
            &mut scores,
            &optr,
        );
        TILE.set((kt, scores));
    };
    pool::global().run(nh * tiles, &piece);
}

impl HostModel {
    /// Runs `tokens` at positions `cache.len()..`, appends their keys and values to the cache
    /// and returns the logits of the last token.
    pub fn forward(
        &self,
        c: &TransformerConfig,
        tokens: &[u32],
        cache: &mut KvCache,
    ) -> Result<Vec<f32>> {
        let n = tokens.len();
        let (e, hd) = (c.embedding, c.head_dim);
        let (qw, kvw) = (c.heads * hd, c.kv_heads * hd);
        let eps = c.rms_eps as f32;
        cache.reserve(c.layers, n)?;
        let pos = cache.len();
        let (scratch, mut kv) = cache.host_parts()?;
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
        } = scratch;
        let x = sized(x, n * e);
        for (t, row) in tokens.iter().zip(x.chunks_exact_mut(e)) {
            self.embedding.dequantize_row(*t as usize, row);
        }
        let h = sized(h, n * e);
        let q = sized(q, n * qw);
        let k = sized(k, n * kvw);
        let v = sized(v, n * kvw);
        let att = sized(att, n * qw);
        let gate = sized(gate, n * c.feed_forward);
        let up = sized(up, n * c.feed_forward);
        for (layer, b) in self.blocks.iter().enumerate() {
            rms_norm(x, &b.attn_norm, eps, h);
            acts.quantize(h, n, e);
            matmul::matmul(&[&b.q, &b.k, &b.v], acts, &mut [&mut *q, &mut *k, &mut *v]);
            if let Some((bq, bk, bv)) = &b.biases {
                add_rows(q, bq);
                add_rows(k, bk);
                add_rows(v, bv);
            }
            rotate(q, n, hd, pos, c.rope_style, &self.rope_cos, &self.rope_sin);
            rotate(k, n, hd, pos, c.rope_style, &self.rope_cos, &self.rope_sin);
            let (keys, values) = kv.layer(layer);
            keys[pos * kvw..(pos + n) * kvw].copy_from_slice(k);
            values[pos * kvw..(pos + n) * kvw].copy_from_slice(v);
            attention(
                q,
                &keys[..(pos + n) * kvw],
                &values[..(pos + n) * kvw],
                n,
                pos,
                c,
                att,
            );
            acts.quantize(att, n, qw);
            matmul::matmul(&[&b.o], acts, &mut [&mut *h]);
            add_into(x, h);

            rms_norm(x, &b.ffn_norm, eps, h);
            acts.quantize(h, n, e);
            matmul::matmul(&[&b.gate, &b.up], acts, &mut [&mut *gate, &mut *up]);
            swiglu(gate, up, n);
            acts.quantize(gate, n, c.feed_forward);
            matmul::matmul(&[&b.down], acts, &mut [&mut *h]);
            add_into(x, h);
        }
        let last = &x[(n - 1) * e..n * e];
        let hl = &mut h[..e];
        rms_norm(last, &self.norm, eps, hl);
        let output = self.output.as_ref().unwrap_or(&self.embedding);
        acts.quantize(hl, 1, e);
        let mut logits = vec![0f32; output.rows()];
        matmul::matmul(&[output], acts, &mut [&mut logits]);
        cache.advance(n);
        if logits.len() != c.vocab {
            return Err(ModelError::Candle(candle_core::Error::Msg(format!(
                "output projection has {} rows for a vocabulary of {}",
                logits.len(),
                c.vocab
            ))));
        }
        Ok(logits)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(heads: usize, kv_heads: usize, head_dim: usize) -> TransformerConfig {
        TransformerConfig {
            arch: "llama".into(),
            layers: 1,
            embedding: heads * head_dim,
            heads,
            kv_heads,
            head_dim,
            feed_forward: 1,
            vocab: 1,
            context: 4096,
            rms_eps: 1e-5,
            rope_theta: 10000.0,
            rope_style: RopeStyle::Halves,
            qkv_bias: false,
        }
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2654435761).rotate_left(11);
                (h % 2001) as f32 / 500.0 - 2.0
            })
            .collect()
    }

    /// The tiled prefill attention against the one-query-at-a-time path, for both head sizes
    /// it is built for, with earlier cached positions, several tiles and a partial last tile.
    #[test]
    fn tiled_attention_matches_the_per_token_path() {
        for (heads, kv_heads, hd, n, pos) in
            [(9, 3, 64, 70, 0), (14, 2, 64, 131, 37), (4, 4, 128, 9, 200)]
        {
            let c = config(heads, kv_heads, hd);
            let total = pos + n;
            let q = values(n * heads * hd, 1);
            let k = values(total * kv_heads * hd, 2);
            let v = values(total * kv_heads * hd, 3);
            let mut tiled = vec![0f32; n * heads * hd];
            let mut rows = vec![0f32; n * heads * hd];
            attention(&q, &k, &v, n, pos, &c, &mut tiled);
            attention_rows(&q, &k, &v, n, pos, &c, &mut rows);
            for (i, (a, b)) in tiled.iter().zip(&rows).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                    "{heads}/{hd} n={n} at {i}: {a} vs {b}"
                );
            }
        }
    }
}
