//! The AVX2 kernel (with FMA and F16C), and the 256-bit block unpacking that the AVX-512
//! kernel reuses for a lone last block. Every function here needs the features its
//! attribute names; callers check them with [`super::Isa::detect`].

use super::scalar::{q4k_step, q6k_step};
use super::{Format, KFormat, KPtrs, XPtrs, QK, QK_K};
use std::arch::x86_64::*;

/// One block unpacked for a byte dot product: either unsigned weights (Q4_1, with an
/// offset) or signed weights handled with the `abs`/`sign` trick.
pub(super) struct Unpacked {
    /// Weights as bytes: unsigned (`signed == false`) or signed.
    pub(super) q: __m256i,
    pub(super) d: f32,
    pub(super) m: f32,
}

/// The f16 at `p` as `f32`.
#[inline(always)]
pub(super) unsafe fn half(p: *const u8) -> f32 {
    let bits = (p as *const u16).read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
}

/// 16 packed nibbles to 32 bytes: low nibbles first, then high nibbles (GGUF order).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let raw = _mm_loadu_si128(p as *const __m128i);
    let both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// 32 bits to 32 bytes, 0xFF where the bit is set (AVX2 form of a mask move).
#[inline(always)]
unsafe fn bytes_from_bits(bits: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(
        0x0303030303030303,
        0x0202020202020202,
        0x0101010101010101,
        0x0000000000000000,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

#[inline(always)]
pub(super) unsafe fn unpack(format: Format, p: *const u8, vnni: bool) -> Unpacked {
    match format {
        Format::Q4_1 => Unpacked {
            q: nibbles(p.add(4)),
            d: half(p),
            m: half(p.add(2)),
        },
        Format::Q5_0 => {
            let qh = (p.add(2) as *const u32).read_unaligned();
            let lo = nibbles(p.add(6));
            // q − 16 as a signed byte: the nibble when the high bit is set, else the
            // nibble with the top four bits set (nibble − 16).
            let hi = if vnni {
                _mm256_maskz_mov_epi8(!qh, _mm256_set1_epi8(0xF0u8 as i8))
            } else {
                _mm256_andnot_si256(bytes_from_bits(qh), _mm256_set1_epi8(0xF0u8 as i8))
            };
            Unpacked {
                q: _mm256_or_si256(lo, hi),
                d: half(p),
                m: 0.0,
            }
        }
        Format::Q8_0 => Unpacked {
            q: _mm256_loadu_si256(p.add(2) as *const __m256i),
            d: half(p),
            m: 0.0,
        },
    }
}

/// The sum of the eight lanes of `v`.
#[inline(always)]
pub(super) unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The AVX2 kernel: one block at a time in 256-bit registers; signed weights (Q5_0,
/// Q8_0) go through the `abs`/`sign` trick, Q4_1's unsigned ones add their offset. With one
/// token, even and odd blocks go to separate accumulators, so that one block's fused
/// multiply-add does not wait for the previous one's (that chain of additions bounded
/// decode).
///
/// The format is made a constant here, once per row, so that the block loop is compiled once
/// per format with no branch on it inside.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_avx2<const T: usize>(
    format: Format,
    p: *const u8,
    blocks: usize,
    x: &XPtrs<T>,
) -> [f32; T] {
    match format {
        Format::Q4_1 => dot_avx2_of::<T, Q4_1>(p, blocks, x),
        Format::Q5_0 => dot_avx2_of::<T, Q5_0>(p, blocks, x),
        Format::Q8_0 => dot_avx2_of::<T, Q8_0>(p, blocks, x),
    }
}

/// [`Format`]s as numbers, for the const parameter of [`dot_avx2_of`].
const Q4_1: u8 = 0;
const Q5_0: u8 = 1;
const Q8_0: u8 = 2;

/// [`dot_avx2`] for the format numbered `F`.
#[allow(clippy::needless_range_loop)] // `t` indexes several per-token arrays at once
#[inline(always)]
unsafe fn dot_avx2_of<const T: usize, const F: u8>(
    p: *const u8,
    blocks: usize,
    x: &XPtrs<T>,
) -> [f32; T] {
    let format = match F {
        Q4_1 => Format::Q4_1,
        Q5_0 => Format::Q5_0,
        _ => Format::Q8_0,
    };
    let bb = format.block_bytes();
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    let mut offset = [[0f32; T]; 2];
    if T > 1 {
        // Several tokens: their accumulators are already independent chains (and a second
        // set would not fit in the registers); the rows stream slowly enough for the
        // hardware's own prefetching.
        for b in 0..blocks {
            block_avx2(format, p.add(b * bb), b, x, &mut acc[0], &mut offset[0]);
        }
    } else {
        let mut b = 0;
        while b + 2 <= blocks {
            prefetch(p.add(b * bb), 2 * bb);
            block_avx2(format, p.add(b * bb), b, x, &mut acc[0], &mut offset[0]);
            block_avx2(
                format,
                p.add((b + 1) * bb),
                b + 1,
                x,
                &mut acc[1],
                &mut offset[1],
            );
            b += 2;
        }
        if b < blocks {
            block_avx2(format, p.add(b * bb), b, x, &mut acc[0], &mut offset[0]);
        }
    }
    let mut out = [0f32; T];
    for t in 0..T {
        out[t] = hsum(_mm256_add_ps(acc[0][t], acc[1][t])) + offset[0][t] + offset[1][t];
    }
    out
}

/// Block `b` (at `blk`) of [`dot_avx2`] into one set of accumulators.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn block_avx2<const T: usize>(
    format: Format,
    blk: *const u8,
    b: usize,
    x: &XPtrs<T>,
    acc: &mut [__m256; T],
    offset: &mut [f32; T],
) {
    let signed = format != Format::Q4_1;
    let u = unpack(format, blk, false);
    let aw = if signed {
        _mm256_sign_epi8(u.q, u.q)
    } else {
        u.q
    };
    for t in 0..T {
        let v = _mm256_loadu_si256(x.qs[t].add(b * QK) as *const __m256i);
        let v = if signed { _mm256_sign_epi8(v, u.q) } else { v };
        let sum = dot_bytes_avx2(aw, v);
        let scale = _mm256_set1_ps(u.d * *x.d[t].add(b));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[t]);
        if !signed {
            offset[t] += u.m * *x.s[t].add(b);
        }
    }
}

/// Unsigned × signed bytes summed in groups of four into eight i32 lanes. The pairwise
/// i16 sums cannot saturate: weights are at most 128 in magnitude and activations at most
/// 127 (2 · 128 · 127 < 32767).
#[inline(always)]
unsafe fn dot_bytes_avx2(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// How far ahead of the block being read the weight kernels ask for memory, in bytes. Rows
/// are contiguous, so this reaches into the next rows of the same piece of work. Decode reads
/// every weight once per token and is bound by memory latency as much as bandwidth: on a
/// 2-core AMD EPYC (AVX2), Qwen2.5-Coder-1.5B Q4_K_M decoded at 10.8–11.5 tok/s without
/// prefetching, 13.0–13.3 with 512–1024 bytes, and 13.8–15.8 with 2048–8192 (alternating
/// runs of `cairn bench -p 0 -n 64 -r 3`).
const PREFETCH_BYTES: usize = 3072;

/// Asks for the cache lines of the `len` bytes [`PREFETCH_BYTES`] past `p` (a hint: the
/// address may lie past the end of the data; it is never read).
#[inline(always)]
pub(super) unsafe fn prefetch(p: *const u8, len: usize) {
    let ahead = p.wrapping_add(PREFETCH_BYTES) as *const i8;
    let mut at = 0;
    while at < len {
        _mm_prefetch(ahead.wrapping_add(at), _MM_HINT_T0);
        at += 64;
    }
}

/// The eight 6-bit scales and eight 6-bit minimums of a Q4_K super-block (its 12 bytes at
/// `p`) as `[sc0..sc7, m0..m7]`, one byte each: the unpacking of
/// [`super::scalar::scale_min_q4k`] done four bytes at a time.
#[inline(always)]
pub(super) unsafe fn scales_mins_q4k(p: *const u8) -> [u32; 4] {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let w: [u32; 3] = std::array::from_fn(|i| (p.add(4 * i) as *const u32).read_unaligned());
    [
        w[0] & LOW6,
        (w[2] & LOW4) | (((w[0] >> 6) & LOW2) << 4),
        w[1] & LOW6,
        ((w[2] >> 4) & LOW4) | (((w[1] >> 6) & LOW2) << 4),
    ]
}

/// A byte shuffle that repeats the 16-bit value at byte `i` of each 128-bit lane in every
/// 16-bit slot.
#[inline(always)]
unsafe fn pick16(i: i32) -> __m256i {
    _mm256_set1_epi16((((i + 1) << 8) | i) as i16)
}

/// Q4_K's exact minimum total of one super-block and token: the activations' eight sums of
/// 32 values at `bsums32` against the eight 6-bit minimums.
#[inline(always)]
pub(super) unsafe fn q4k_mins(mins: __m128i, bsums32: *const i16) -> i32 {
    // Summed once per token at quantization (pairs of the 16-value sums, added here per row
    // and token before: 1.5B prefill +6-10% on a Zen 4).
    let sums = _mm_loadu_si128(bsums32 as *const __m128i);
    hsum_i32x4(_mm_madd_epi16(mins, sums))
}

/// The sum of the four 32-bit lanes of `v` (exact, wrapping).
#[inline(always)]
pub(super) unsafe fn hsum_i32x4(v: __m128i) -> i32 {
    let v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    let v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0b01));
    _mm_cvtsi128_si32(v)
}

/// The sum of the eight 32-bit lanes of `v` (exact, wrapping).
#[inline(always)]
pub(super) unsafe fn hsum_i32(v: __m256i) -> i32 {
    hsum_i32x4(_mm_add_epi32(
        _mm256_castsi256_si128(v),
        _mm256_extracti128_si256(v, 1),
    ))
}

/// Q4_K weights against Q8_K activations for `T` tokens: per 64 values one load of packed
/// nibbles, split into two sub-blocks, each multiplied with the activations
/// (`vpmaddubsw`) and weighted by its 6-bit scale (`vpmaddwd`) into 32-bit sums. Per
/// super-block, the sums' exact total and the minimums' (against the activations' sums of 32
/// values) take the scalar kernel's float step, so the result is its own to the last bit.
#[allow(clippy::needless_range_loop)] // `t` indexes several per-token arrays at once
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q4k<const T: usize>(
    p: *const u8,
    blocks: usize,
    x: &KPtrs<T>,
) -> [f32; T] {
    let mut acc = [0f32; T];
    let low4 = _mm256_set1_epi8(0x0F);
    for b in 0..blocks {
        let blk = p.add(b * KFormat::Q4K.block_bytes());
        prefetch(blk, KFormat::Q4K.block_bytes());
        let d = half(blk);
        let dmin = half(blk.add(2));
        let sm = scales_mins_q4k(blk.add(4));
        // Scales as 16-bit values in both lanes; minimums as eight 16-bit values.
        let sc8 = _mm_cvtsi64_si128(((sm[1] as u64) << 32 | sm[0] as u64) as i64);
        let sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
        let m8 = _mm_cvtsi64_si128(((sm[3] as u64) << 32 | sm[2] as u64) as i64);
        let mins = _mm_cvtepu8_epi16(m8);
        let mut sumi = [_mm256_setzero_si256(); T];
        for j in 0..4 {
            let raw = _mm256_loadu_si256(blk.add(16 + 32 * j) as *const __m256i);
            let lo = _mm256_and_si256(raw, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
            let s_lo = _mm256_shuffle_epi8(sc16, pick16(4 * j as i32));
            let s_hi = _mm256_shuffle_epi8(sc16, pick16(4 * j as i32 + 2));
            for t in 0..T {
                let xs = x.qs[t].add(b * QK_K + 64 * j);
                let x0 = _mm256_loadu_si256(xs as *const __m256i);
                let x1 = _mm256_loadu_si256(xs.add(32) as *const __m256i);
                let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), s_lo);
                let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), s_hi);
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p0, p1));
            }
        }
        for t in 0..T {
            let m = q4k_mins(mins, x.bsums32[t].add(b * 8));
            acc[t] = q4k_step(acc[t], d, dmin, *x.d[t].add(b), hsum_i32(sumi[t]), m);
        }
    }
    acc
}

/// Q6_K weights against Q8_K activations for `T` tokens: per 128 values, 64 bytes of low
/// nibbles and 32 of high bit pairs make four runs of 32 unsigned 6-bit values; each is
/// multiplied with the activations (`vpmaddubsw`) and weighted by its two 16-value scales
/// (`vpmaddwd`). The −32 offset of the values is taken out once per super-block with the
/// activations' 16-value sums; the exact total takes the scalar kernel's float step.
#[allow(clippy::needless_range_loop)] // `t` indexes several per-token arrays at once
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_q6k<const T: usize>(
    p: *const u8,
    blocks: usize,
    x: &KPtrs<T>,
) -> [f32; T] {
    let mut acc = [0f32; T];
    let low4 = _mm256_set1_epi8(0x0F);
    let bits = |m: i8| _mm256_set1_epi8(m);
    for b in 0..blocks {
        let blk = p.add(b * KFormat::Q6K.block_bytes());
        prefetch(blk, KFormat::Q6K.block_bytes());
        let d = half(blk.add(208));
        let sc_raw = _mm_loadu_si128(blk.add(192) as *const __m128i);
        // Scales as bytes in both lanes (picked and sign-extended per run below), and as
        // sixteen 16-bit values for the offset.
        let sc_bytes = _mm256_broadcastsi128_si256(sc_raw);
        let sc16 = _mm256_cvtepi8_epi16(sc_raw);
        let mut sumi = [_mm256_setzero_si256(); T];
        for t in 0..T {
            let bs = _mm256_loadu_si256(x.bsums[t].add(b * 16) as *const __m256i);
            // −32 · Σ scale · bsum, in eight 32-bit lanes.
            sumi[t] = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16), 5);
            sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), sumi[t]);
        }
        for n in 0..2 {
            let ql0 = _mm256_loadu_si256(blk.add(64 * n) as *const __m256i);
            let ql1 = _mm256_loadu_si256(blk.add(64 * n + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(blk.add(128 + 32 * n) as *const __m256i);
            let runs = [
                _mm256_or_si256(
                    _mm256_and_si256(ql0, low4),
                    _mm256_slli_epi16(_mm256_and_si256(qh, bits(0x03)), 4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(ql1, low4),
                    _mm256_slli_epi16(_mm256_and_si256(qh, bits(0x0C)), 2),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                    _mm256_and_si256(qh, bits(0x30)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                    _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits(0x30)),
                ),
            ];
            for (k, &q) in runs.iter().enumerate() {
                // Run k of half n covers scales 8n + 2k (low lane) and 8n + 2k + 1 (high).
                let s = (8 * n + 2 * k) as i8;
                let pick = _mm256_setr_epi8(
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s,
                    s, //
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1, //
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                    s + 1,
                );
                let scale = _mm256_srai_epi16(_mm256_shuffle_epi8(sc_bytes, pick), 8);
                for t in 0..T {
                    let xv = _mm256_loadu_si256(
                        x.qs[t].add(b * QK_K + 128 * n + 32 * k) as *const __m256i
                    );
                    let prod = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), scale);
                    sumi[t] = _mm256_add_epi32(sumi[t], prod);
                }
            }
        }
        for t in 0..T {
            acc[t] = q6k_step(acc[t], d, *x.d[t].add(b), hsum_i32(sumi[t]));
        }
    }
    acc
}
