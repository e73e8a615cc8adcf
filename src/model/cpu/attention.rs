//! Causal grouped-query attention of the CPU engine over its KV cache: a few tokens at a
//! time for decode ([`attention_rows`]: one key/value head with every query head that shares
//! it per piece, its keys split into runs whose softmaxes are combined), in tiles of query
//! tokens for prefill ([`attention_tiled`]: each key block meets every query of the tile that
//! sees it while it is in the level-1 cache, the values in chunks that stay in level 2).
//!
//! Keys and values are stored as f16 (their bits, `u16`), as llama.cpp keeps its cache by
//! default: half the memory and half the bytes each decoded token reads of an f32 cache, and
//! the same rounding as the reference implementation's. They are widened to f32 a key block
//! or a run of value rows at a time (F16C's conversion where the CPU has it) into a
//! per-thread buffer that stays in cache, and the arithmetic is in f32.
//!
//! Values are stored position-major (`kv_heads × head_dim` per position). Keys are stored in
//! blocks of [`KEY_LANES`] positions, and within a block per key/value head dimension-major
//! (`head_dim × 16`): the scores of sixteen keys then come out of one vector multiply-add per
//! dimension, with no sum across lanes, and nothing is transposed at run time. Blocks are
//! outermost, so growing the cache leaves the stored positions where they are.

use super::kernels::Isa;
use super::pool::{self, SendPtr};
use crate::model::hparams::HParams;

/// Positions per block of the key cache (one vector of f32 with AVX-512, two with AVX2).
pub(super) const KEY_LANES: usize = 16;

/// Values the key cache of one layer needs for `positions` positions of `width`
/// (`kv_heads × head_dim`) values: whole blocks.
pub(super) fn key_slots(positions: usize, width: usize) -> usize {
    positions.div_ceil(KEY_LANES) * KEY_LANES * width
}

/// The block of the key cache holding positions `16b..16b + 16` of key/value head `kvh`:
/// `hd × 16` values, dimension-major.
#[inline(always)]
fn key_block(keys: &[u16], b: usize, stride: usize, kvh: usize, hd: usize) -> &[u16] {
    &keys[b * KEY_LANES * stride + kvh * hd * KEY_LANES..][..hd * KEY_LANES]
}

/// `x` rounded to the nearest f16 (ties to even), as its bits; past f16's range (±65 504)
/// it saturates there, so that an outlying key or value of some model gives large scores,
/// not the infinities and NaN that would spoil every later token's attention.
#[inline(always)]
fn to_f16(x: f32) -> u16 {
    half::f16::from_f32(x.clamp(-65504.0, 65504.0)).to_bits()
}

/// Writes the f16 values `src` (their bits) into `dst` as f32: eight at a time with F16C's
/// conversion where the CPU has it.
#[inline(always)]
fn widen(src: &[u16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len());
    #[cfg(target_arch = "x86_64")]
    if Isa::detect() >= Isa::Avx2 {
        // SAFETY: `Isa::detect` found AVX2 and F16C on this CPU; the lengths are equal.
        return unsafe { widen_f16c(src, dst) };
    }
    widen_scalar(src, dst);
}

/// [`widen`] with F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn widen_f16c(src: &[u16], dst: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    let whole = src.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: i + 8 ≤ the length of both slices.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
    }
    widen_scalar(&src[whole..], &mut dst[whole..]);
}

/// [`widen`] without F16C.
#[inline(always)]
fn widen_scalar(src: &[u16], dst: &mut [f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = super::kernels::f16_to_f32(s);
    }
}

/// Writes the values `v` of new tokens (position-major, `width` each) at positions `pos..` of
/// the value cache `values`, rounded to f16.
pub(super) fn store_values(values: &mut [u16], v: &[f32], pos: usize, width: usize) {
    for (d, &x) in values[pos * width..][..v.len()].iter_mut().zip(v) {
        *d = to_f16(x);
    }
}

/// Writes the keys `k` of new tokens (position-major, `kv_heads × hd` each) at positions
/// `pos..` of the blocked key cache `keys`, rounded to f16.
pub(super) fn store_keys(keys: &mut [u16], k: &[f32], pos: usize, kv_heads: usize, hd: usize) {
    scatter_keys(keys, k, pos, kv_heads * hd, to_f16);
}

/// Writes f16 keys `k` (their bits, position-major) at positions `pos..` of the blocked key
/// cache `keys`: what [`load_keys`] read, put back.
pub(super) fn put_keys(keys: &mut [u16], k: &[u16], pos: usize, kv_heads: usize, hd: usize) {
    scatter_keys(keys, k, pos, kv_heads * hd, |x| x);
}

/// Writes `f` of the position-major keys `k` (`width` per position) at positions `pos..` of
/// the blocked key cache `keys`.
#[inline(always)]
fn scatter_keys<T: Copy>(
    keys: &mut [u16],
    k: &[T],
    pos: usize,
    width: usize,
    f: impl Fn(T) -> u16,
) {
    for (t, row) in k.chunks_exact(width).enumerate() {
        let j = pos + t;
        // Block j / 16 holds each head's `hd × 16` values in turn (see [`key_block`]): value d
        // of the row (head d / hd, dimension d % hd) goes to d·16 + lane.
        let block = &mut keys[(j / KEY_LANES) * KEY_LANES * width..][..KEY_LANES * width];
        let lane = j % KEY_LANES;
        for (d, &x) in row.iter().enumerate() {
            block[d * KEY_LANES + lane] = f(x);
        }
    }
}

/// The keys of positions `from..to` of the blocked key cache `keys`, position-major
/// (`kv_heads × hd` each): what [`store_keys`] wrote.
pub(super) fn load_keys(
    keys: &[u16],
    from: usize,
    to: usize,
    kv_heads: usize,
    hd: usize,
) -> Vec<u16> {
    let width = kv_heads * hd;
    let mut out = Vec::with_capacity((to - from) * width);
    for j in from..to {
        let block = &keys[(j / KEY_LANES) * KEY_LANES * width..][..KEY_LANES * width];
        let lane = j % KEY_LANES;
        out.extend((0..width).map(|d| block[d * KEY_LANES + lane]));
    }
    out
}

/// `e^x` for `x` in `[-87, 88]` (clamped there), within 2 ulp of `f32::exp`, from arithmetic
/// and bit operations only, so that a loop over a slice of it vectorizes (a call to the
/// library's `expf` per element does not). Cephes' `expf`: `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`,
/// a degree-6 polynomial for `e^r`, and `2^n` written into the exponent bits.
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 1.5 · 2^23: adding it rounds to an integer held in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * r * r + r + 1.0;
    // n + 127 in the exponent field: t's low bits hold n (two's complement, |n| ≤ 127).
    let bits = (t.to_bits().wrapping_sub(ROUND.to_bits()).wrapping_add(127)) << 23;
    y * f32::from_bits(bits)
}

/// The maximum of `xs` (−∞ when empty), in sixteen lanes so that it vectorizes.
#[inline(always)]
fn max_f32(xs: &[f32]) -> f32 {
    let mut m = [f32::NEG_INFINITY; 16];
    let chunks = xs.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..16 {
            m[l] = m[l].max(c[l]);
        }
    }
    rest.iter()
        .chain(&m)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max)
}

/// Replaces each `x` of `xs` by `e^(x − max)` and returns their sum (a softmax's
/// numerators and denominator), vectorized.
#[inline(always)]
fn exp_sum(xs: &mut [f32], max: f32) -> f32 {
    for x in xs.iter_mut() {
        *x = exp_f32(*x - max);
    }
    let mut acc = [0f32; 16];
    let chunks = xs.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..16 {
            acc[l] += c[l];
        }
    }
    rest.iter().chain(&acc).sum()
}

/// The scores of the query `q` (`hd` values) against the sixteen keys of one key block
/// `kb` (`hd × 16`, dimension-major), times `scale`.
#[inline(always)]
fn block_scores(q: &[f32], kb: &[f32], scale: f32) -> [f32; KEY_LANES] {
    // Four accumulators so that the multiply-adds of consecutive dimensions overlap. They
    // are four named arrays, not one array indexed in a loop: LLVM would vectorize such a
    // loop across the four, with gathers.
    let (mut a0, mut a1, mut a2, mut a3) = (
        [0f32; KEY_LANES],
        [0f32; KEY_LANES],
        [0f32; KEY_LANES],
        [0f32; KEY_LANES],
    );
    let lane = |d: usize| -> &[f32; KEY_LANES] {
        kb[d * KEY_LANES..(d + 1) * KEY_LANES].try_into().unwrap()
    };
    let whole = q.len() / 4 * 4;
    for d in (0..whole).step_by(4) {
        let (k0, k1, k2, k3) = (lane(d), lane(d + 1), lane(d + 2), lane(d + 3));
        let (q0, q1, q2, q3) = (q[d], q[d + 1], q[d + 2], q[d + 3]);
        for l in 0..KEY_LANES {
            a0[l] += q0 * k0[l];
        }
        for l in 0..KEY_LANES {
            a1[l] += q1 * k1[l];
        }
        for l in 0..KEY_LANES {
            a2[l] += q2 * k2[l];
        }
        for l in 0..KEY_LANES {
            a3[l] += q3 * k3[l];
        }
    }
    for (d, &qd) in q.iter().enumerate().skip(whole) {
        let k = lane(d);
        for l in 0..KEY_LANES {
            a0[l] += qd * k[l];
        }
    }
    let mut s = [0f32; KEY_LANES];
    for l in 0..KEY_LANES {
        s[l] = ((a0[l] + a1[l]) + (a2[l] + a3[l])) * scale;
    }
    s
}

/// Keys a piece of decode attention takes at least: one head's keys are split into runs of
/// this many or more (whole key blocks) so that every thread has work (two or three
/// key/value heads at one token are fewer pieces than threads), and the runs' softmaxes are
/// combined after.
const SPLIT_MIN: usize = 256;

thread_local! {
    /// Per-thread scores of a piece of decode or prefill attention (taken out while in use).
    static SCORES: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    /// Per-thread keys and values widened to f32 for a piece of attention ([`widen`]).
    static WIDE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    /// The calling thread's per-run results of decode attention, kept between calls (one
    /// call per layer and token).
    static PARTIAL: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Causal grouped-query attention of `n` new tokens at positions `pos..pos + n` over the
/// cached keys (blocked, see the module doc) and values (position-major) of positions
/// `0..pos + n`.
pub(super) fn attention(
    q: &[f32],
    keys: &[u16],
    values: &[u16],
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
    let splits = decode_splits(n, pos, c.kv_heads);
    attention_rows(q, keys, values, n, pos, c, splits, out)
}

/// Runs per key/value head for decode attention of `n` tokens at `pos`: enough that every
/// thread has pieces, none shorter than [`SPLIT_MIN`] keys.
fn decode_splits(n: usize, pos: usize, kv_heads: usize) -> usize {
    (2 * pool::global().threads())
        .div_ceil(n * kv_heads)
        .min((pos + n).div_ceil(SPLIT_MIN))
        .max(1)
}

/// [`attention`] a few tokens at a time: decode, and any head size. A piece of work is one
/// token, one key/value head with all the query heads that share it (so each key and value
/// is read once for the group, not once per query head), and one of `splits` runs of its keys
/// (whole key blocks); each piece leaves, per query head, its scores' maximum, the sum of
/// their exponentials and the unnormalised weighted sum of values, and the runs are then
/// combined (as split-K "flash decoding" does).
#[allow(clippy::too_many_arguments)]
fn attention_rows(
    q: &[f32],
    keys: &[u16],
    values: &[u16],
    n: usize,
    pos: usize,
    c: &HParams,
    splits: usize,
    out: &mut [f32],
) {
    let (nh, nkv, hd) = (c.heads, c.kv_heads, c.head_dim);
    let group = nh / nkv;
    let stride = nkv * hd;
    let scale = 1.0 / (hd as f32).sqrt();
    let longest = pos + n;
    let span = longest.div_ceil(splits).div_ceil(KEY_LANES) * KEY_LANES;
    // Per piece and query head: maximum, sum, then `hd` weighted sums.
    let part = hd + 2;
    let mut partial = PARTIAL.take();
    // Every value is written by its piece before the combine reads it.
    partial.resize(n * nkv * splits * group * part, 0.0);
    let pptr = SendPtr(partial.as_mut_ptr());
    let piece = |item: usize| {
        let split = item % splits;
        let kvh = (item / splits) % nkv;
        let i = item / (splits * nkv);
        let len = pos + i + 1;
        let (j0, j1) = ((split * span).min(len), ((split + 1) * span).min(len));
        // Query heads kvh·group .. (kvh + 1)·group share key/value head kvh.
        let qs = &q[i * nh * hd + kvh * group * hd..][..group * hd];
        // SAFETY: piece `item` alone writes its own `group × part` values.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(pptr.at(item * group * part), group * part) };
        let mut scores = SCORES.take();
        let mut wide = WIDE.take();
        let attend = match hd {
            64 => attend_group::<64>,
            128 => attend_group::<128>,
            _ => attend_group::<0>,
        };
        attend(
            qs,
            keys,
            values,
            hd,
            stride,
            kvh,
            (j0, j1),
            scale,
            &mut scores,
            &mut wide,
            dst,
        );
        SCORES.set(scores);
        WIDE.set(wide);
    };
    pool::global().run(n * nkv * splits, &piece);
    // Combine the runs of each (token, query head).
    for i in 0..n {
        for h in 0..nh {
            let (kvh, g) = (h / group, h % group);
            let at = |split: usize| ((((i * nkv + kvh) * splits + split) * group) + g) * part;
            let max = (0..splits)
                .map(|s| partial[at(s)])
                .fold(f32::NEG_INFINITY, f32::max);
            let o = &mut out[i * nh * hd + h * hd..][..hd];
            o.fill(0.0);
            let mut total = 0f32;
            for s in 0..splits {
                let p = &partial[at(s)..at(s) + part];
                if p[1] == 0.0 {
                    continue; // a run past this token's last key
                }
                let w = (p[0] - max).exp();
                total += w * p[1];
                for (a, &b) in o.iter_mut().zip(&p[2..]) {
                    *a += w * b;
                }
            }
            let inv = 1.0 / total;
            for a in o.iter_mut() {
                *a *= inv;
            }
        }
    }
    PARTIAL.set(partial);
}

super::multiversion! {
    /// One piece of [`attention_rows`] for heads of `HD` dimensions (0: any, `hd`, at some
    /// cost): the query heads `q` (`group × hd`) over keys
    /// `keys_run` (`j0..j1`, `j0` the start of a key block) of key/value head `kvh`, with the
    /// per-thread buffers `scores` and `wide` (a key block's or a block's value rows widened
    /// to f32). Writes to `dst`, per query head, the scores' maximum, the sum of
    /// `e^(score − maximum)` and the values weighted by those (not yet divided by the sum); an
    /// empty run leaves −∞, 0 and zeros.
    fn attend_group<const HD: usize>(
        q: &[f32],
        keys: &[u16],
        values: &[u16],
        hd: usize,
        stride: usize,
        kvh: usize,
        keys_run: (usize, usize),
        scale: f32,
        scores: &mut Vec<f32>,
        wide: &mut Vec<f32>,
        dst: &mut [f32],
    ) {
        let (j0, j1) = keys_run;
        let group = q.len() / hd;
        let part = hd + 2;
        let (b0, b1) = (j0 / KEY_LANES, j1.div_ceil(KEY_LANES));
        let width = (b1 - b0) * KEY_LANES;
        let m = j1 - j0;
        scores.resize(group * width, 0.0);
        wide.resize(hd * KEY_LANES, 0.0);
        for b in b0..b1 {
            let kb = &mut wide[..hd * KEY_LANES];
            widen(key_block(keys, b, stride, kvh, hd), kb);
            for g in 0..group {
                let s = block_scores(&q[g * hd..(g + 1) * hd], kb, scale);
                let at = g * width + (b - b0) * KEY_LANES;
                scores[at..at + KEY_LANES].copy_from_slice(&s);
            }
        }
        for g in 0..group {
            let row = &mut scores[g * width..g * width + m];
            let max = max_f32(row);
            let sum = if m == 0 { 0.0 } else { exp_sum(row, max) };
            dst[g * part] = max;
            dst[g * part + 1] = sum;
            dst[g * part + 2..(g + 1) * part].fill(0.0);
        }
        // Weighted sums of values over the keys of one block, per query head (the block's
        // values stay in L1 for the group's other heads).
        for b in b0..b1 {
            let (k0, k1) = ((b * KEY_LANES).max(j0), ((b + 1) * KEY_LANES).min(j1));
            // The block's value rows of this head, widened: `hd` per position from k0.
            let vb = &mut wide[..(k1 - k0) * hd];
            for (j, row) in (k0..k1).zip(vb.chunks_exact_mut(hd)) {
                widen(&values[j * stride + kvh * hd..][..hd], row);
            }
            let vb = &*vb;
            for g in 0..group {
                let p = &scores[g * width + k0 - j0..g * width + k1 - j0];
                let o = &mut dst[g * part + 2..(g + 1) * part];
                if HD > 0 {
                    // A head size known when compiled: the sums stay in registers while the
                    // value rows stream in order.
                    let mut acc = [0f32; HD];
                    for (jj, &w) in p.iter().enumerate() {
                        let v: &[f32; HD] = vb[jj * HD..][..HD].try_into().unwrap();
                        for d in 0..HD {
                            acc[d] += w * v[d];
                        }
                    }
                    let o: &mut [f32; HD] = o.try_into().unwrap();
                    for d in 0..HD {
                        o[d] += acc[d];
                    }
                } else {
                    for (&w, v) in p.iter().zip(vb.chunks_exact(hd)) {
                        for (a, &x) in o.iter_mut().zip(v) {
                            *a += w * x;
                        }
                    }
                }
            }
        }
    }
}

/// New tokens from which prefill attention runs in tiles ([`attention_tiled`]).
const TILED_FROM: usize = 8;
/// Query tokens per piece of work in tiled attention.
const QUERY_TILE: usize = 64;
/// Query tokens whose weighted sums of values are computed together, so that each value
/// row read serves all of them.
const QUERY_GROUP: usize = 4;
/// Positions whose values the weighted sums take at a time: each chunk meets every query of
/// the tile while it is in the level-2 cache (the sums are kept in the output between
/// chunks), where a group at a time over all the positions read them from the level-3 cache
/// once per group.
const VALUE_CHUNK: usize = 512;

/// What one piece of tiled attention reads and where it writes: head `h` (key/value head
/// `kvh`) for queries `i0..i1`, after `pos` cached positions.
struct TilePiece<'a, const HD: usize> {
    q: &'a [f32],
    keys: &'a [u16],
    values: &'a [u16],
    pos: usize,
    nh: usize,
    h: usize,
    kvh: usize,
    stride: usize,
    i0: usize,
    i1: usize,
    /// Scores per query of the tile: whole key blocks up to the last query's keys.
    width: usize,
}

impl<const HD: usize> TilePiece<'_, HD> {
    /// The query `i`.
    #[inline(always)]
    fn query(&self, i: usize) -> &[f32] {
        &self.q[i * self.nh * HD + self.h * HD..][..HD]
    }

    /// The scaled scores of every query of the tile against the keys it sees (and the rest
    /// of their last block), into `scores` (`width` per query): key block by key block, each
    /// meeting every query of the tile that sees it while it is in the level-1 cache (a query
    /// at a time over all its keys read them from the level-3 cache once per query). `kb`
    /// holds a key block widened to f32 (`HD × 16`).
    #[inline(always)]
    fn scores(&self, scale: f32, scores: &mut [f32], kb: &mut [f32]) {
        for b in 0..self.width / KEY_LANES {
            widen(key_block(self.keys, b, self.stride, self.kvh, HD), kb);
            let kb = &*kb;
            // Query i sees block b when its first key is among its pos + i + 1.
            let first = (b * KEY_LANES).saturating_sub(self.pos).max(self.i0);
            for i in first..self.i1 {
                let s = block_scores(self.query(i), kb, scale);
                let at = (i - self.i0) * self.width + b * KEY_LANES;
                scores[at..at + KEY_LANES].copy_from_slice(&s);
            }
        }
    }

    /// The values weighted by `weights` (`width` per query), into the output of each query:
    /// `G` queries and `C` dimensions at a time, positions in chunks of [`VALUE_CHUNK`].
    /// Each sum adds its terms in the order of the positions, so the chunks and groups do
    /// not change the result. `wide` holds a chunk's value rows of this head widened to f32
    /// (`VALUE_CHUNK × HD`), converted once for every query of the tile.
    #[inline(always)]
    fn weighted_values<const G: usize, const C: usize>(
        &self,
        weights: &[f32],
        wide: &mut [f32],
        optr: &SendPtr,
    ) {
        for j0 in (0..self.pos + self.i1).step_by(VALUE_CHUNK) {
            let end = (j0 + VALUE_CHUNK).min(self.pos + self.i1);
            for (j, row) in (j0..end).zip(wide.chunks_exact_mut(HD)) {
                widen(&self.values[j * self.stride + self.kvh * HD..][..HD], row);
            }
            let vals = &*wide;
            for g0 in (self.i0..self.i1).step_by(G) {
                let g1 = (g0 + G).min(self.i1);
                // Keys the group's last query sees (the others' weights there are zero).
                let last = self.pos + g1;
                let j1 = (j0 + VALUE_CHUNK).min(last);
                if j1 <= j0 {
                    continue;
                }
                // Each query's weights of the chunk's positions.
                let rows: [&[f32]; G] = std::array::from_fn(|g| {
                    let i = (g0 + g).min(g1 - 1);
                    &weights[(i - self.i0) * self.width..][j0..j1]
                });
                for c in (0..HD).step_by(C) {
                    // SAFETY: piece (h, tile) alone writes the head-h slices of its tokens.
                    let out = |g: usize| unsafe {
                        std::slice::from_raw_parts_mut(
                            optr.at((g0 + g) * self.nh * HD + self.h * HD + c),
                            C,
                        )
                    };
                    let mut acc = [[0f32; C]; G];
                    if j0 > 0 {
                        for (g, a) in acc.iter_mut().enumerate().take(g1 - g0) {
                            a.copy_from_slice(out(g));
                        }
                    }
                    for j in j0..j1 {
                        let v: &[f32; C] = vals[(j - j0) * HD + c..][..C].try_into().unwrap();
                        for g in 0..G {
                            let p = rows[g][j - j0];
                            for d in 0..C {
                                acc[g][d] += p * v[d];
                            }
                        }
                    }
                    for (g, a) in acc.iter().enumerate().take(g1 - g0) {
                        out(g).copy_from_slice(a);
                    }
                }
            }
        }
    }
}

super::multiversion! {
    /// One piece of [`attention_tiled`]: head `h` (key/value head `kvh`) for queries
    /// `i0..i1`, with the per-thread buffers `scores` and `widened` (keys and values widened
    /// to f32); `wide` where the CPU has AVX-512's 32 vector registers (the weighted sums
    /// then take 64 dimensions at a time, not 16).
    fn attend_tile<const HD: usize>(
        q: &[f32],
        keys: &[u16],
        values: &[u16],
        pos: usize,
        nh: usize,
        h: usize,
        kvh: usize,
        stride: usize,
        scale: f32,
        i0: usize,
        i1: usize,
        wide: bool,
        scores: &mut Vec<f32>,
        widened: &mut Vec<f32>,
        optr: &SendPtr,
    ) {
        let width = (pos + i1).div_ceil(KEY_LANES) * KEY_LANES;
        scores.resize(QUERY_TILE * width, 0.0);
        widened.resize(VALUE_CHUNK * HD, 0.0);
        let piece = TilePiece::<HD> { q, keys, values, pos, nh, h, kvh, stride, i0, i1, width };
        piece.scores(scale, scores, &mut widened[..KEY_LANES * HD]);
        for i in i0..i1 {
            let row = &mut scores[(i - i0) * width..(i - i0 + 1) * width];
            let seen = pos + i + 1;
            // Softmax over the keys this query sees (a block's lanes past them are not
            // keys of this query); the rest get weight zero.
            let max = max_f32(&row[..seen]);
            let inv = 1.0 / exp_sum(&mut row[..seen], max);
            for s in &mut row[..seen] {
                *s *= inv;
            }
            row[seen..].fill(0.0);
        }
        // Four queries' sums of 64 dimensions fill 16 of AVX-512's registers; of 16
        // dimensions, 8 of AVX2's.
        if wide {
            piece.weighted_values::<QUERY_GROUP, 64>(scores, widened, optr);
        } else {
            piece.weighted_values::<QUERY_GROUP, 16>(scores, widened, optr);
        }
    }
}

/// Prefill attention in tiles: a piece of work is one head and up to [`QUERY_TILE`] query
/// tokens. The scores of sixteen keys come out of one vector multiply-add per dimension from
/// the blocked key cache; the weighted sum of values then runs four queries at a time over
/// each value row. The same numbers as the decode path up to the order of additions.
fn attention_tiled<const HD: usize>(
    q: &[f32],
    keys: &[u16],
    values: &[u16],
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
    let wide = Isa::detect() >= Isa::Avx512Vnni;
    let piece = |item: usize| {
        let (h, tile) = (item % nh, item / nh);
        let i0 = tile * QUERY_TILE;
        let i1 = (i0 + QUERY_TILE).min(n);
        let mut scores = SCORES.take();
        let mut widened = WIDE.take();
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
            wide,
            &mut scores,
            &mut widened,
            &optr,
        );
        SCORES.set(scores);
        WIDE.set(widened);
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

    /// Position-major keys `k` laid out as the key cache holds them, with the lanes of the
    /// last block past the keys filled with garbage (a truncated cache leaves old keys there).
    fn blocked(k: &[f32], kv_heads: usize, hd: usize) -> Vec<u16> {
        let width = kv_heads * hd;
        let positions = k.len() / width;
        let mut out = halves(&values(key_slots(positions, width), 99));
        store_keys(&mut out, k, 0, kv_heads, hd);
        out
    }

    /// `xs` as the cache holds them: f16 bits.
    fn halves(xs: &[f32]) -> Vec<u16> {
        xs.iter().map(|&x| to_f16(x)).collect()
    }

    /// [`values`] rounded to f16, so that the cache holds them exactly and the plain
    /// computation sees the same numbers.
    fn f16_values(n: usize, seed: u32) -> Vec<f32> {
        values(n, seed)
            .into_iter()
            .map(|x| half::f16::from_f32(x).to_f32())
            .collect()
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2654435761).rotate_left(11);
                (h % 2001) as f32 / 500.0 - 2.0
            })
            .collect()
    }

    /// Attention computed the plain way, in f64: one query head at a time over its keys.
    fn reference(q: &[f32], k: &[f32], v: &[f32], n: usize, pos: usize, c: &HParams) -> Vec<f32> {
        let (nh, nkv, hd) = (c.heads, c.kv_heads, c.head_dim);
        let stride = nkv * hd;
        let mut out = vec![0f32; n * nh * hd];
        for i in 0..n {
            for h in 0..nh {
                let at = (h / (nh / nkv)) * hd;
                let qv = &q[i * nh * hd + h * hd..][..hd];
                let scores: Vec<f64> = (0..pos + i + 1)
                    .map(|j| {
                        let kv = &k[j * stride + at..][..hd];
                        let d: f64 = qv.iter().zip(kv).map(|(a, b)| *a as f64 * *b as f64).sum();
                        d / (hd as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = w.iter().sum();
                for d in 0..hd {
                    let x: f64 = (0..w.len())
                        .map(|j| w[j] * v[j * stride + at + d] as f64)
                        .sum();
                    out[i * nh * hd + h * hd + d] = (x / sum) as f32;
                }
            }
        }
        out
    }

    /// Decode attention (a few tokens, keys split into runs per key/value head and the
    /// runs' softmaxes combined) against the plain computation: one token over a long cache
    /// (several runs), a few tokens whose last run is empty for the first of them, and
    /// shapes of the presets (14/2 heads of 64, 12/2 of 128, 9/3 of 64).
    #[test]
    fn decode_attention_in_runs_matches_the_plain_computation() {
        for (heads, kv_heads, hd, n, pos) in [
            (14, 2, 64, 1, 1500),
            (12, 2, 128, 1, 2047),
            (9, 3, 64, 3, 700),
            (4, 1, 32, 5, 1020),
            (2, 2, 16, 1, 0),
            (2, 1, 16, 4, 1),
        ] {
            let c = config(heads, kv_heads, hd);
            let total = pos + n;
            let q = values(n * heads * hd, 4);
            let k = f16_values(total * kv_heads * hd, 5);
            let v = f16_values(total * kv_heads * hd, 6);
            let want = reference(&q, &k, &v, n, pos, &c);
            let (kb, v) = (blocked(&k, kv_heads, hd), halves(&v));
            // Fixed counts, and the one this machine's thread count picks.
            for splits in [1, 2, 3, 7, decode_splits(n, pos, kv_heads)] {
                let mut got = vec![0f32; n * heads * hd];
                attention_rows(&q, &kb, &v, n, pos, &c, splits, &mut got);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                        "{heads}/{kv_heads}/{hd} n={n} pos={pos} splits={splits} at {i}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// Widening the cache's f16 to f32 (F16C eight at a time and a scalar tail on x86-64)
    /// against the exact conversion, for every one of the 65 536 bit patterns, at lengths
    /// with and without a tail.
    #[test]
    fn widen_is_exact_for_every_f16() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        for len in [all.len(), all.len() - 3, 7] {
            let mut got = vec![0f32; len];
            widen(&all[..len], &mut got);
            for (&h, &g) in all.iter().zip(&got) {
                let want = half::f16::from_bits(h).to_f32();
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{h:#06x}: {g} vs {want}"
                );
            }
        }
        // Rounding on the way in: to the nearest, ties to even, and past f16's range to its
        // largest value, not ∞.
        assert_eq!(to_f16(1.0 + 1.0 / 4096.0), to_f16(1.0));
        assert_eq!(half::f16::from_bits(to_f16(1e6)).to_f32(), 65504.0);
        assert_eq!(half::f16::from_bits(to_f16(-1e9)).to_f32(), -65504.0);
        assert!(half::f16::from_bits(to_f16(f32::NAN)).is_nan());
    }

    /// The vectorizable exponential against the library's, over the range softmax uses
    /// (and past it, where it clamps).
    #[test]
    fn exp_f32_is_within_two_ulp_of_the_library_exp() {
        let mut x = -87.0f32;
        while x <= 88.0 {
            let (a, b) = (exp_f32(x), x.exp());
            let ulp = (a.to_bits() as i64 - b.to_bits() as i64).abs();
            assert!(ulp <= 2, "exp({x}): {a} vs {b}, {ulp} ulp");
            x += 0.0137;
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(-1000.0) > 0.0 && exp_f32(-1000.0) < 1e-37);
        assert!(exp_f32(f32::NEG_INFINITY) < 1e-37);
    }

    /// The tiled prefill attention against the one-query-at-a-time path, for both head sizes
    /// it is built for, with earlier cached positions, several tiles and a partial last tile.
    #[test]
    fn tiled_attention_matches_the_per_token_path() {
        for (heads, kv_heads, hd, n, pos) in [
            (9, 3, 64, 70, 0),
            (14, 2, 64, 131, 37),
            (4, 4, 128, 9, 200),
            (12, 2, 128, 70, 1100),
        ] {
            let c = config(heads, kv_heads, hd);
            let total = pos + n;
            let q = values(n * heads * hd, 1);
            let k = values(total * kv_heads * hd, 2);
            let v = halves(&values(total * kv_heads * hd, 3));
            let mut tiled = vec![0f32; n * heads * hd];
            let mut rows = vec![0f32; n * heads * hd];
            let kb = blocked(&k, kv_heads, hd);
            attention(&q, &kb, &v, n, pos, &c, &mut tiled);
            let splits = decode_splits(n, pos, kv_heads);
            attention_rows(&q, &kb, &v, n, pos, &c, splits, &mut rows);
            for (i, (a, b)) in tiled.iter().zip(&rows).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                    "{heads}/{hd} n={n} at {i}: {a} vs {b}"
                );
            }
        }
    }
}
