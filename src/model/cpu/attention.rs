//! Causal grouped-query attention of the CPU engine over its position-major KV cache: one
//! (token, head) at a time for decode ([`attention_rows`]), in tiles for prefill
//! ([`attention_tiled`]).

use super::pool::{self, SendPtr};
use crate::model::hparams::HParams;

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

thread_local! {
    static SCORES: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Causal grouped-query attention of `n` new tokens at positions `pos..pos + n` over the
/// cached keys and values of positions `0..pos + n` (position-major, `kv_heads × hd` each).
pub(super) fn attention(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    n: usize,
    pos: usize,
    c: &HParams,
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
    c: &HParams,
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

super::multiversion! {
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

super::multiversion! {
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
    c: &HParams,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hparams::RopeStyle;

    fn config(heads: usize, kv_heads: usize, head_dim: usize) -> HParams {
        HParams {
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
            rope_freqs: None,
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
