//! The AVX-512 VNNI kernels: for the 32-value block formats, `vpdpbusd` over two blocks at a
//! time on the pair layout ([`super::pair_layout`]) and the prepacked rows used during
//! prefill; for the K-quants, 64 values per 512-bit register on the stored super-blocks.
//! Every function here needs the features its attribute names; callers check them with
//! [`super::Isa::detect`].

use super::avx2::{half, hsum, prefetch, q4k_mins, scales_mins_q4k, unpack};
use super::scalar::{q4k_step, q6k_step};
use super::{Format, KFormat, KPtrs, KTilePtrs, XPtrs, KTILE, QK, QK_K, V512};
use std::arch::x86_64::*;

/// Two weight blocks as one 512-bit vector of signed bytes, interleaved four bytes at a
/// time like the activations' pair layout, with `[d0, d1, ·, ·]` and `[m0, m1, ·, ·]`;
/// the second block is zero past the row's end.
#[inline(always)]
unsafe fn pair_weights(format: Format, p: *const u8, second: bool) -> (__m512i, __m128, __m128) {
    if !second {
        return pair_weights_tail(format, p);
    }
    let q = p.add(format.block_bytes());
    // Both blocks' f16 scales as [d0, d1] (Q5_0, Q8_0: the first two bytes of a block).
    let two_scales = |p: *const u8, q: *const u8| {
        let bits = _mm_insert_epi16(
            _mm_cvtsi32_si128((p as *const u16).read_unaligned() as i32),
            (q as *const u16).read_unaligned() as i32,
            1,
        );
        _mm_cvtph_ps(bits)
    };
    match format {
        Format::Q4_1 => {
            let w = nibble_pairs(
                _mm_loadu_si128(p.add(4) as *const __m128i),
                _mm_loadu_si128(q.add(4) as *const __m128i),
            );
            // [d0 m0 d1 m1] as f16, to [d0, d1, m0, m1].
            let bits = _mm_insert_epi32(
                _mm_cvtsi32_si128((p as *const i32).read_unaligned()),
                (q as *const i32).read_unaligned(),
                1,
            );
            let s = _mm_cvtph_ps(bits);
            let s = _mm_shuffle_ps(s, s, 0b11_01_10_00);
            (w, s, _mm_movehl_ps(s, s))
        }
        Format::Q5_0 => {
            let lo = nibble_pairs(
                _mm_loadu_si128(p.add(6) as *const __m128i),
                _mm_loadu_si128(q.add(6) as *const __m128i),
            );
            // High bits, nibble-interleaved like the bytes: mask nibble i is nibble i/2
            // of the high bits of block i%2. A clear bit makes the byte nibble − 16.
            let qh0 = (p.add(2) as *const u32).read_unaligned() as u64;
            let qh1 = (q.add(2) as *const u32).read_unaligned() as u64;
            let mask =
                _pdep_u64(qh0, 0x0F0F_0F0F_0F0F_0F0F) | _pdep_u64(qh1, 0xF0F0_F0F0_F0F0_F0F0);
            let hi = _mm512_maskz_mov_epi8(!mask, _mm512_set1_epi8(0xF0u8 as i8));
            (_mm512_or_si512(lo, hi), two_scales(p, q), _mm_setzero_ps())
        }
        Format::Q8_0 => {
            let a = _mm512_castsi256_si512(_mm256_loadu_si256(p.add(2) as *const __m256i));
            let b = _mm512_castsi256_si512(_mm256_loadu_si256(q.add(2) as *const __m256i));
            let w = _mm512_permutex2var_epi32(a, interleave_index(), b);
            (w, two_scales(p, q), _mm_setzero_ps())
        }
    }
}

/// Lane order of the pair layout: lane 2g from the first vector's lane g, lane 2g + 1
/// from the second's.
#[inline(always)]
unsafe fn interleave_index() -> __m512i {
    _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0)
}

/// Two blocks' 16 packed-nibble bytes to the pair layout: groups of four bytes
/// interleaved, low nibbles (values 0–15) in the low half, high nibbles in the high half.
#[inline(always)]
unsafe fn nibble_pairs(a: __m128i, b: __m128i) -> __m512i {
    let raw = _mm256_set_m128i(_mm_unpackhi_epi32(a, b), _mm_unpacklo_epi32(a, b));
    let both = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
    _mm512_and_si512(both, _mm512_set1_epi8(0x0F))
}

/// [`pair_weights`] for a lone last block (rows of an odd number of blocks).
#[inline(always)]
unsafe fn pair_weights_tail(format: Format, p: *const u8) -> (__m512i, __m128, __m128) {
    let a = unpack(format, p, true);
    let w = _mm512_permutex2var_epi32(
        _mm512_castsi256_si512(a.q),
        interleave_index(),
        _mm512_setzero_si512(),
    );
    (
        w,
        _mm_setr_ps(a.d, 0.0, 0.0, 0.0),
        _mm_setr_ps(a.m, 0.0, 0.0, 0.0),
    )
}

/// Pair `pair` of a row of `blocks` blocks ([`pair_weights`]) and the start of its sums,
/// −128·Σweights per lane, which cancels the +128 offset of the activations.
#[inline(always)]
unsafe fn weights_and_start(
    format: Format,
    p: *const u8,
    bb: usize,
    pair: usize,
    blocks: usize,
) -> (__m512i, __m512i, __m128, __m128) {
    let (w, d, m) = pair_weights(format, p.add(2 * pair * bb), 2 * pair + 1 < blocks);
    let plus128 = _mm512_set1_epi8(0x80u8 as i8);
    let init = _mm512_sub_epi32(
        _mm512_setzero_si512(),
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), plus128, w),
    );
    (w, init, d, m)
}

/// The AVX-512 kernel on the pair layout: per pair of blocks and token, one `vpdpbusd`
/// (activations + 128 as unsigned bytes times signed weights, started from
/// −128·Σweights so the sum is exact), one conversion and one fused multiply-add.
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_pairs<const T: usize>(
    format: Format,
    p: *const u8,
    blocks: usize,
    x: &XPtrs<T>,
) -> [f32; T] {
    let bb = format.block_bytes();
    let offset = format == Format::Q4_1;
    let mut acc = [_mm512_setzero_ps(); T];
    let mut off = [_mm512_setzero_ps(); T];
    for pair in 0..blocks.div_ceil(2) {
        let (w, init, d, m) = weights_and_start(format, p, bb, pair, blocks);
        let dw = _mm512_broadcast_f32x2(d);
        let mw = _mm512_broadcast_f32x2(m);
        for t in 0..T {
            let xu = _mm512_loadu_si512(x.qp[t].add(pair * 64) as *const _);
            let sum = _mm512_dpbusd_epi32(init, xu, w);
            let dx = _mm512_castpd_ps(_mm512_set1_pd(
                (x.dp[t].add(2 * pair) as *const f64).read_unaligned(),
            ));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, dx), acc[t]);
            if offset {
                let sx = _mm512_castpd_ps(_mm512_set1_pd(
                    (x.sp[t].add(2 * pair) as *const f64).read_unaligned(),
                ));
                off[t] = _mm512_fmadd_ps(mw, sx, off[t]);
            }
        }
    }
    let mut out = [0f32; T];
    for t in 0..T {
        // Each pair's offset term sits in all eight lane pairs: divide the sum by 8.
        out[t] = _mm512_reduce_add_ps(acc[t]) + _mm512_reduce_add_ps(off[t]) * 0.125;
    }
    out
}

/// See [`super::prepack_row`].
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn prepack(
    format: Format,
    p: *const u8,
    blocks: usize,
    w: *mut V512,
    dw: *mut f32,
    mw: *mut f32,
) {
    let bb = format.block_bytes();
    for pair in 0..blocks.div_ceil(2) {
        let (wv, init, d, m) = weights_and_start(format, p, bb, pair, blocks);
        _mm512_store_si512(w.add(2 * pair) as *mut _, wv);
        _mm512_store_si512(w.add(2 * pair + 1) as *mut _, init);
        (dw.add(2 * pair) as *mut f64).write_unaligned(_mm_cvtsd_f64(_mm_castps_pd(d)));
        // Divided by 8: the kernel adds the offset term once per lane pair.
        let m = _mm_mul_ps(m, _mm_set1_ps(0.125));
        (mw.add(2 * pair) as *mut f64).write_unaligned(_mm_cvtsd_f64(_mm_castps_pd(m)));
    }
}

/// See [`super::dot_prepacked`]: `R` rows against `T` tokens, sharing each token's
/// loads between the rows. The minimums were stored divided by 8 ([`prepack`]), so the
/// offset term, repeated in all eight lane pairs, goes into the same accumulator.
#[allow(clippy::needless_range_loop)] // `r`, `t` index several arrays at once
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_prepacked<const R: usize, const T: usize>(
    w: [*const V512; R],
    dw: [*const f32; R],
    mw: [*const f32; R],
    pairs: usize,
    offset: bool,
    x: &XPtrs<T>,
) -> [[f32; T]; R] {
    let mut acc = [[_mm512_setzero_ps(); T]; R];
    let pair2 = |p: *const f32, pair: usize| {
        _mm512_castpd_ps(_mm512_set1_pd(
            (p.add(2 * pair) as *const f64).read_unaligned(),
        ))
    };
    for pair in 0..pairs {
        let wv: [__m512i; R] =
            std::array::from_fn(|r| _mm512_load_si512(w[r].add(2 * pair) as *const _));
        let init: [__m512i; R] =
            std::array::from_fn(|r| _mm512_load_si512(w[r].add(2 * pair + 1) as *const _));
        let d: [__m512; R] = std::array::from_fn(|r| pair2(dw[r], pair));
        for t in 0..T {
            let xu = _mm512_loadu_si512(x.qp[t].add(pair * 64) as *const _);
            let dx = pair2(x.dp[t], pair);
            for r in 0..R {
                let sum = _mm512_dpbusd_epi32(init[r], xu, wv[r]);
                acc[r][t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d[r], dx), acc[r][t]);
            }
        }
        if offset {
            let m: [__m512; R] = std::array::from_fn(|r| pair2(mw[r], pair));
            for t in 0..T {
                let sx = pair2(x.sp[t], pair);
                for r in 0..R {
                    acc[r][t] = _mm512_fmadd_ps(m[r], sx, acc[r][t]);
                }
            }
        }
    }
    let mut out = [[0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            out[r][t] = _mm512_reduce_add_ps(acc[r][t]);
        }
    }
    out
}

/// Index vectors for `vpermw` that spread 16-bit scales over the 32 16-bit lanes of a
/// `vpmaddubsw` result: lane `i` of vector `v` takes scale `per·v + i / (32 / per)`, for
/// `per` scales per 64 values (2 for Q4_K's 32-value sub-blocks, 4 for Q6_K's 16-value ones).
/// Constants, so that a kernel call only loads them.
const fn scale_index(per: usize) -> [[i16; 32]; 4] {
    let mut out = [[0i16; 32]; 4];
    let mut v = 0;
    while v < 4 {
        let mut i = 0;
        while i < 32 {
            out[v][i] = (per * v + i / (32 / per)) as i16;
            i += 1;
        }
        v += 1;
    }
    out
}

/// [`scale_index`] for Q4_K (two 32-value sub-blocks per 64 values).
static Q4K_SCALE_INDEX: [[i16; 32]; 4] = scale_index(2);
/// [`scale_index`] for Q6_K (four 16-value sub-blocks per 64 values).
static Q6K_SCALE_INDEX: [[i16; 32]; 4] = scale_index(4);

/// The four index vectors of `table`.
#[inline(always)]
unsafe fn load_index(table: &[[i16; 32]; 4]) -> [__m512i; 4] {
    [
        _mm512_loadu_si512(table[0].as_ptr() as *const _),
        _mm512_loadu_si512(table[1].as_ptr() as *const _),
        _mm512_loadu_si512(table[2].as_ptr() as *const _),
        _mm512_loadu_si512(table[3].as_ptr() as *const _),
    ]
}

/// Q4_K weights against Q8_K activations for `T` tokens, as [`super::avx2`]'s kernel but 64
/// values per instruction: the 32 packed bytes of two sub-blocks become one register of
/// nibbles (low nibbles, the first sub-block, in the low half), multiplied with 64
/// activations (`vpmaddubsw`) and weighted by the two 6-bit scales while accumulating
/// (`vpdpwssd`): two instructions per 64 values and token.
#[allow(clippy::needless_range_loop)] // `t` indexes several per-token arrays at once
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_q4k<const T: usize>(
    p: *const u8,
    blocks: usize,
    x: &KPtrs<T>,
) -> [f32; T] {
    let mut acc = [0f32; T];
    let low4 = _mm512_set1_epi8(0x0F);
    let index = load_index(&Q4K_SCALE_INDEX);
    for b in 0..blocks {
        let blk = p.add(b * KFormat::Q4K.block_bytes());
        // Prefill (several tokens) reads rows that are in cache already (see the matmul's row
        // groups); asking for them again cost about 3%.
        if T == 1 {
            prefetch(blk, KFormat::Q4K.block_bytes());
        }
        let d = half(blk);
        let dmin = half(blk.add(2));
        let sm = scales_mins_q4k(blk.add(4));
        let sc8 = _mm_cvtsi64_si128(((sm[1] as u64) << 32 | sm[0] as u64) as i64);
        let sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sc8));
        let m8 = _mm_cvtsi64_si128(((sm[3] as u64) << 32 | sm[2] as u64) as i64);
        let mins = _mm_cvtepu8_epi16(m8);
        let mut sumi = [_mm512_setzero_si512(); T];
        for j in 0..4 {
            let raw = _mm256_loadu_si256(blk.add(16 + 32 * j) as *const __m256i);
            let both =
                _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
            let w = _mm512_and_si512(both, low4);
            let scale = _mm512_permutexvar_epi16(index[j], sc16);
            for t in 0..T {
                let xv = _mm512_loadu_si512(x.qs[t].add(b * QK_K + 64 * j) as *const _);
                sumi[t] = dpwssd(sumi[t], _mm512_maddubs_epi16(w, xv), scale);
            }
        }
        for t in 0..T {
            let m = q4k_mins(mins, x.bsums32[t].add(b * 8));
            let sum = _mm512_reduce_add_epi32(sumi[t]);
            acc[t] = q4k_step(acc[t], d, dmin, *x.d[t].add(b), sum, m);
        }
    }
    acc
}

/// Q6_K weights against Q8_K activations for `T` tokens, as [`super::avx2`]'s kernel but 64
/// values per instruction: per 128 values, the 64 bytes of low nibbles and the 32 of high bit
/// pairs (with a copy shifted by two in the high half) make two registers of 6-bit values,
/// each multiplied with 64 activations (`vpmaddubsw`) and weighted by its four 16-value
/// scales while accumulating (`vpdpwssd`). The −32 offset of the values is taken out once
/// per super-block with the activations' 16-value sums.
#[allow(clippy::needless_range_loop)] // `t` indexes several per-token arrays at once
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_q6k<const T: usize>(
    p: *const u8,
    blocks: usize,
    x: &KPtrs<T>,
) -> [f32; T] {
    let mut acc = [0f32; T];
    let low4 = _mm512_set1_epi8(0x0F);
    let bits = |m: i8| _mm512_set1_epi8(m);
    let index = load_index(&Q6K_SCALE_INDEX);
    for b in 0..blocks {
        let blk = p.add(b * KFormat::Q6K.block_bytes());
        if T == 1 {
            prefetch(blk, KFormat::Q6K.block_bytes());
        }
        let d = half(blk.add(208));
        let sc_raw = _mm_loadu_si128(blk.add(192) as *const __m128i);
        let sc16y = _mm256_cvtepi8_epi16(sc_raw);
        let sc16 = _mm512_castsi256_si512(sc16y);
        let mut sumi = [_mm512_setzero_si512(); T];
        for t in 0..T {
            let bs = _mm256_loadu_si256(x.bsums[t].add(b * 16) as *const __m256i);
            // −32 · Σ scale · bsum, in the low eight 32-bit lanes.
            let off = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16y), 5);
            sumi[t] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), off));
        }
        for n in 0..2 {
            let ql = _mm512_loadu_si512(blk.add(64 * n) as *const _);
            let qh = _mm256_loadu_si256(blk.add(128 + 32 * n) as *const __m256i);
            let qhh = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            // Values 0..64 of this half (low nibbles, high bits 0-1 and 2-3), then 64..128
            // (high nibbles, high bits 4-5 and 6-7).
            let runs = [
                _mm512_or_si512(
                    _mm512_and_si512(ql, low4),
                    _mm512_slli_epi16(_mm512_and_si512(qhh, bits(0x03)), 4),
                ),
                _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                    _mm512_and_si512(qhh, bits(0x30)),
                ),
            ];
            for (k, &q) in runs.iter().enumerate() {
                let scale = _mm512_permutexvar_epi16(index[2 * n + k], sc16);
                for t in 0..T {
                    let xv =
                        _mm512_loadu_si512(x.qs[t].add(b * QK_K + 128 * n + 64 * k) as *const _);
                    sumi[t] = dpwssd(sumi[t], _mm512_maddubs_epi16(q, xv), scale);
                }
            }
        }
        for t in 0..T {
            let total = _mm512_reduce_add_epi32(sumi[t]);
            acc[t] = q6k_step(acc[t], d, *x.d[t].add(b), total);
        }
    }
    acc
}

/// `vpdpwssd` as written. Through the intrinsic, LLVM's generic tuning splits it into
/// `vpmaddwd` + `vpaddd` wherever the accumulator is a loop-carried chain, one more 512-bit
/// instruction per 64 values and token: the 1.5B preset's pp512 went from 93–95 to 100–102
/// tok/s with this on a 2-core AMD EPYC (Zen 4) (alternating runs of `cairn bench -p 512`).
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn dpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    let mut acc = acc;
    std::arch::asm!(
        "vpdpwssd {acc}, {a}, {b}",
        acc = inout(zmm_reg) acc,
        a = in(zmm_reg) a,
        b = in(zmm_reg) b,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

/// Index vectors of the tile kernels' reduction ([`tile_totals`]): the even and the odd lanes
/// of two vectors (`vpermt2d`).
static EVEN_ODD: [[i32; 16]; 2] = {
    let mut out = [[0i32; 16]; 2];
    let mut l = 0;
    while l < 16 {
        out[0][l] = 2 * l as i32;
        out[1][l] = 2 * l as i32 + 1;
        l += 1;
    }
    out
};

/// Adjacent lanes of `a` then of `b` added: `[a0 + a1, a2 + a3, …, b0 + b1, …]`.
#[inline(always)]
unsafe fn pair_sums(a: __m512i, b: __m512i) -> __m512i {
    let even = _mm512_loadu_si512(EVEN_ODD[0].as_ptr() as *const _);
    let odd = _mm512_loadu_si512(EVEN_ODD[1].as_ptr() as *const _);
    _mm512_add_epi32(
        _mm512_permutex2var_epi32(a, even, b),
        _mm512_permutex2var_epi32(a, odd, b),
    )
}

/// Eight tokens' integer totals from four vectors of two tokens' eight lanes each
/// (`v[i]`: token `2i` in lanes 0–7, `2i + 1` in 8–15), token `t` in lane `t`.
#[inline(always)]
unsafe fn tile_totals(v: [__m512i; 4]) -> __m256i {
    let four = [pair_sums(v[0], v[1]), pair_sums(v[2], v[3])];
    quad_totals(four)
}

/// Eight tokens' integer totals from two vectors of four tokens' four lanes each.
#[inline(always)]
unsafe fn quad_totals(v: [__m512i; 2]) -> __m256i {
    let two = pair_sums(v[0], v[1]);
    let one = _mm512_add_epi32(two, _mm512_shuffle_epi32(two, _MM_PERM_CDAB));
    _mm512_cvtepi64_epi32(one)
}

/// The dword indices of the tile layout's `j`-th 64 values in a Q4_K super-block's 128
/// bytes of nibbles (two registers, `vpermt2d`): lane `l` takes the four values `16l + 4j..`,
/// of sub-block `l / 2`, from chunk `l / 4` (low nibbles for even sub-blocks, high for odd).
static Q4K_TILE_INDEX: [[i32; 16]; 4] = {
    let mut out = [[0i32; 16]; 4];
    let mut j = 0;
    while j < 4 {
        let mut l = 0;
        while l < 16 {
            out[j][l] = ((l / 4) * 8 + 4 * (l % 2) + j) as i32;
            l += 1;
        }
        j += 1;
    }
    out
};

/// [`Q4K_TILE_INDEX`]'s shift per lane: 4 for the high nibbles (odd sub-blocks).
static Q4K_TILE_SHIFT: [i32; 16] = {
    let mut out = [0i32; 16];
    let mut l = 0;
    while l < 16 {
        out[l] = 4 * ((l / 2) % 2) as i32;
        l += 1;
    }
    out
};

/// Q4_K for a tile of [`KTILE`] tokens in the tile layout ([`KTilePtrs`]), whose lane `l`
/// of every 64 values holds sub-block `l / 2`: one `vpdpbusd` per 64 values and token
/// (unsigned nibbles times signed activations) sums each sub-block over the super-block,
/// and the scales are applied once per super-block and pair of tokens. The integer totals
/// are exact, so the result is [`super::scalar::dot_k_scalar`]'s to the last bit.
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_q4k_tile(
    p: *const u8,
    blocks: usize,
    x: &KTilePtrs,
    out: *mut f32,
    stride: usize,
) {
    let mut acc = _mm256_setzero_ps();
    let low4 = _mm512_set1_epi8(0x0F);
    let shift = _mm512_loadu_si512(Q4K_TILE_SHIFT.as_ptr() as *const _);
    for b in 0..blocks {
        let blk = p.add(b * KFormat::Q4K.block_bytes());
        let sm = scales_mins_q4k(blk.add(4));
        // Scales as 32-bit lanes 0–7 and again 8–15; minimums as 16-bit, four times.
        let sc8 = _mm_cvtsi64_si128(((sm[1] as u64) << 32 | sm[0] as u64) as i64);
        let sc32 = _mm512_broadcast_i64x4(_mm256_cvtepu8_epi32(sc8));
        let m8 = _mm_cvtsi64_si128(((sm[3] as u64) << 32 | sm[2] as u64) as i64);
        let mins = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(m8));
        let q0 = _mm512_loadu_si512(blk.add(16) as *const _);
        let q1 = _mm512_loadu_si512(blk.add(80) as *const _);
        let xq = x.qs.add(b * QK_K * KTILE);
        let mut sums = [_mm512_setzero_si512(); KTILE];
        for (j, index) in Q4K_TILE_INDEX.iter().enumerate() {
            let idx = _mm512_loadu_si512(index.as_ptr() as *const _);
            let w = _mm512_and_si512(
                _mm512_srlv_epi32(_mm512_permutex2var_epi32(q0, idx, q1), shift),
                low4,
            );
            for (t, s) in sums.iter_mut().enumerate() {
                let xv = _mm512_loadu_si512(xq.add((j * KTILE + t) * 64) as *const _);
                *s = _mm512_dpbusd_epi32(*s, w, xv);
            }
        }
        let scaled: [__m512i; 4] = std::array::from_fn(|i| {
            _mm512_mullo_epi32(pair_sums(sums[2 * i], sums[2 * i + 1]), sc32)
        });
        let total = _mm256_cvtepi32_ps(tile_totals(scaled));
        let mprod: [__m512i; 2] = std::array::from_fn(|h| {
            let bs = _mm512_loadu_si512(x.bsums32.add((b * KTILE + 4 * h) * 8) as *const _);
            _mm512_madd_epi16(mins, bs)
        });
        let mtotal = _mm256_cvtepi32_ps(quad_totals(mprod));
        let dx = _mm256_loadu_ps(x.d.add(b * KTILE));
        let dd = _mm256_mul_ps(_mm256_set1_ps(half(blk)), dx);
        let dm = _mm256_mul_ps(_mm256_set1_ps(half(blk.add(2))), dx);
        acc = _mm256_add_ps(
            acc,
            _mm256_sub_ps(_mm256_mul_ps(dd, total), _mm256_mul_ps(dm, mtotal)),
        );
    }
    store_tile(acc, out, stride);
}

/// Writes a tile's eight results, token `t`'s at `out[t · stride]`, straight from the
/// register: returned as an array they went through memory, and the eight loads that
/// followed the one 32-byte store missed store-to-load forwarding (7% of the 1.5B
/// preset's prefill on a Zen 4).
#[inline(always)]
unsafe fn store_tile(v: __m256, out: *mut f32, stride: usize) {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let o = out as *mut i32;
    *o = _mm_extract_ps(lo, 0);
    *o.add(stride) = _mm_extract_ps(lo, 1);
    *o.add(2 * stride) = _mm_extract_ps(lo, 2);
    *o.add(3 * stride) = _mm_extract_ps(lo, 3);
    *o.add(4 * stride) = _mm_extract_ps(hi, 0);
    *o.add(5 * stride) = _mm_extract_ps(hi, 1);
    *o.add(6 * stride) = _mm_extract_ps(hi, 2);
    *o.add(7 * stride) = _mm_extract_ps(hi, 3);
}

/// The dword indices and shifts of the tile layout's `j`-th 64 values in a Q6_K super-block:
/// lane `l` takes the four values `16l + 4j..` (sub-block `l`), whose low four bits are in
/// `ql` (two registers) and high two in `qh` (one register). Per `j`: `[ql index, ql shift,
/// qh index, qh shift]` for each lane.
static Q6K_TILE_INDEX: [[[i32; 16]; 4]; 4] = {
    let mut out = [[[0i32; 16]; 4]; 4];
    let mut j = 0;
    while j < 4 {
        let mut l = 0;
        while l < 16 {
            let (n, g, h) = (l / 8, (l % 8) / 2, l % 2);
            out[j][0][l] = (16 * n + 8 * (g % 2) + 4 * h + j) as i32;
            out[j][1][l] = (4 * (g / 2)) as i32;
            out[j][2][l] = (8 * n + 4 * h + j) as i32;
            out[j][3][l] = (2 * g) as i32;
            l += 1;
        }
        j += 1;
    }
    out
};

/// Q6_K for a tile of [`KTILE`] tokens in the tile layout ([`KTilePtrs`]), as
/// [`dot_q4k_tile`]: lane `l` of every 64 values is sub-block `l`, so one `vpdpbusd` per 64
/// values and token (unsigned 6-bit values times signed activations) sums each sub-block over
/// the super-block; the scales are applied once per super-block and token, and the −32
/// offset once per pair of tokens (the activations' 16-value sums against the scales). The
/// integer totals are exact, so the result is [`super::scalar::dot_k_scalar`]'s to the bit.
#[allow(clippy::needless_range_loop)] // `j` indexes the weights' index tables and the tile
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_q6k_tile(
    p: *const u8,
    blocks: usize,
    x: &KTilePtrs,
    out: *mut f32,
    stride: usize,
) {
    let mut acc = _mm256_setzero_ps();
    let low4 = _mm512_set1_epi8(0x0F);
    let low2 = _mm512_set1_epi8(0x03);
    for b in 0..blocks {
        let blk = p.add(b * KFormat::Q6K.block_bytes());
        let sc8 = _mm_loadu_si128(blk.add(192) as *const __m128i);
        let sc32 = _mm512_cvtepi8_epi32(sc8);
        let sc16 = _mm512_broadcast_i64x4(_mm256_cvtepi8_epi16(sc8));
        let ql0 = _mm512_loadu_si512(blk as *const _);
        let ql1 = _mm512_loadu_si512(blk.add(64) as *const _);
        let qh = _mm512_loadu_si512(blk.add(128) as *const _);
        let xq = x.qs.add(b * QK_K * KTILE);
        let mut sums = [_mm512_setzero_si512(); KTILE];
        for j in 0..4 {
            let [li, ls, hi, hs] =
                Q6K_TILE_INDEX[j].map(|v| _mm512_loadu_si512(v.as_ptr() as *const _));
            let lo = _mm512_and_si512(
                _mm512_srlv_epi32(_mm512_permutex2var_epi32(ql0, li, ql1), ls),
                low4,
            );
            let high = _mm512_and_si512(
                _mm512_srlv_epi32(_mm512_permutexvar_epi32(hi, qh), hs),
                low2,
            );
            let w = _mm512_or_si512(lo, _mm512_slli_epi32(high, 4));
            for (t, s) in sums.iter_mut().enumerate() {
                let xv = _mm512_loadu_si512(xq.add((j * KTILE + t) * 64) as *const _);
                *s = _mm512_dpbusd_epi32(*s, w, xv);
            }
        }
        let scaled: [__m512i; 4] = std::array::from_fn(|i| {
            let pair = pair_sums(
                _mm512_mullo_epi32(sums[2 * i], sc32),
                _mm512_mullo_epi32(sums[2 * i + 1], sc32),
            );
            // 32 · Σ scale · bsum for tokens 2i and 2i + 1, in the same lanes.
            let bs = _mm512_loadu_si512(x.bsums.add((b * KTILE + 2 * i) * 16) as *const _);
            _mm512_sub_epi32(pair, _mm512_slli_epi32(_mm512_madd_epi16(bs, sc16), 5))
        });
        let total = _mm256_cvtepi32_ps(tile_totals(scaled));
        let dx = _mm256_loadu_ps(x.d.add(b * KTILE));
        let dd = _mm256_mul_ps(_mm256_set1_ps(half(blk.add(208))), dx);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(dd, total));
    }
    store_tile(acc, out, stride);
}

/// One token against one row of a 32-value block format (decode), two blocks per 512-bit
/// `vpdpbusd` on the activations as they lie (no pair layout). Q4_1's nibbles are unsigned and
/// the activations signed, the instruction's own form; the signed weights of Q5_0 and Q8_0 go
/// in as their magnitudes, with the activations negated where a weight is negative. Lanes
/// 0–7 hold the first block's sums, 8–15 the second's; each is scaled by its own `d_w · d_x`,
/// and Q4_1's offsets `m_w · s_x` are added beside. Two accumulators, so that one pair's fused
/// multiply-add does not wait for the previous one's. On a 2-core Xeon with AVX-512 and AMX,
/// smollm2 (Q4_1) decoded at 194–218 tok/s with this kernel against 149–169 with the AVX2 one
/// (`cairn bench --model smollm2-135m -p 64 -n 256 -r 5`, alternating builds), and
/// qwen2.5-coder-0.5b (Q5_0 and Q8_0 beside its K-quants) at 41.3–41.5 against 38.6
/// (`-n 128 -r 3`).
#[target_feature(enable = "avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")]
pub(super) unsafe fn dot_one(
    format: Format,
    p: *const u8,
    blocks: usize,
    xq: *const i8,
    xd: *const f32,
    xs: *const f32,
) -> f32 {
    match format {
        Format::Q4_1 => dot_one_of::<0>(p, blocks, xq, xd, xs),
        Format::Q5_0 => dot_one_of::<1>(p, blocks, xq, xd, xs),
        Format::Q8_0 => dot_one_of::<2>(p, blocks, xq, xd, xs),
    }
}

/// Two blocks' 16 bytes of packed nibbles at `a` and `b` (`b` read only when `two`, else
/// zero) to 64 bytes in value order: the first block's 32 values, then the second's. Each
/// block's bytes are broadcast to two 128-bit lanes straight from memory and the second lane
/// of each shifted right by 4, so the only shuffle is a blend: the first version (a 256-bit
/// insert, a shift, a 512-bit insert and a lane shuffle) ran Q5_0's one-token dot at 14.3
/// GiB/s on one core of the AVX-512 Xeon with AMX (`cargo bench --bench kernels -- dot/`).
#[inline(always)]
unsafe fn two_nibbles(a: *const u8, b: *const u8, two: bool) -> __m512i {
    let first = _mm512_broadcast_i32x4(_mm_loadu_si128(a as *const __m128i));
    let both = if two {
        let second = _mm512_broadcast_i32x4(_mm_loadu_si128(b as *const __m128i));
        _mm512_mask_blend_epi64(0xF0, first, second)
    } else {
        _mm512_maskz_mov_epi64(0x0F, first)
    };
    // Lanes 1 and 3 take the high nibbles: their 16-bit words shifted right by 4.
    const HIGH: i64 = 0x0004_0004_0004_0004;
    let shifts = _mm512_set_epi64(HIGH, HIGH, 0, 0, HIGH, HIGH, 0, 0);
    _mm512_and_si512(_mm512_srlv_epi16(both, shifts), _mm512_set1_epi8(0x0F))
}

/// Two floats at `p` (or one and a zero when not `two`) in the low lanes.
#[inline(always)]
unsafe fn two_floats(p: *const f32, two: bool) -> __m128 {
    if two {
        _mm_castpd_ps(_mm_load_sd(p as *const f64))
    } else {
        _mm_load_ss(p)
    }
}

/// Blocks `b` and `b + 1` of [`dot_one_of`] (the second absent when not `two`) into `acc`
/// and, for Q4_1, the offsets into `off`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn one_pair<const F: u8>(
    p: *const u8,
    b: usize,
    two: bool,
    xq: *const i8,
    xd: *const f32,
    xs: *const f32,
    acc: &mut __m512,
    off: &mut __m128,
) {
    let format = [Format::Q4_1, Format::Q5_0, Format::Q8_0][F as usize];
    let bb = format.block_bytes();
    let w = p.add(b * bb);
    let w1 = w.add(bb);
    let xv = if two {
        _mm512_loadu_si512(xq.add(b * QK) as *const _)
    } else {
        _mm512_maskz_loadu_epi8(0xFFFF_FFFF, xq.add(b * QK))
    };
    let sum = if F == 0 {
        _mm512_dpbusd_epi32(
            _mm512_setzero_si512(),
            two_nibbles(w.add(4), w1.add(4), two),
            xv,
        )
    } else {
        let q = if F == 1 {
            // A clear high bit makes the value its nibble − 16 (the top four bits set).
            let qh0 = (w.add(2) as *const u32).read_unaligned() as u64;
            let qh1 = if two {
                (w1.add(2) as *const u32).read_unaligned() as u64
            } else {
                0
            };
            let hi = _mm512_maskz_mov_epi8(!(qh0 | qh1 << 32), _mm512_set1_epi8(0xF0u8 as i8));
            _mm512_or_si512(two_nibbles(w.add(6), w1.add(6), two), hi)
        } else {
            let q0 = _mm256_loadu_si256(w.add(2) as *const __m256i);
            let q1 = if two {
                _mm256_loadu_si256(w1.add(2) as *const __m256i)
            } else {
                _mm256_setzero_si256()
            };
            _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1)
        };
        let negative = _mm512_movepi8_mask(q);
        let xs = _mm512_mask_sub_epi8(xv, negative, _mm512_setzero_si512(), xv);
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(q), xs)
    };
    // The two blocks' f16 headers: [d0, m0, d1, m1] (Q4_1) or [d0, ·, d1, ·].
    let h1 = if two {
        (w1 as *const i32).read_unaligned()
    } else {
        0
    };
    let dm = _mm_cvtph_ps(_mm_insert_epi32(
        _mm_cvtsi32_si128((w as *const i32).read_unaligned()),
        h1,
        1,
    ));
    let d = _mm_shuffle_ps(dm, dm, 0b10_00_10_00); // [d0, d1, d0, d1]
                                                   // Lane j of the scale vector takes pair scale j / 8.
    let spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    let dx = two_floats(xd.add(b), two);
    let scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(d, dx)));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, *acc);
    if F == 0 {
        let m = _mm_shuffle_ps(dm, dm, 0b11_01_11_01); // [m0, m1, m0, m1]
                                                       // Only the low two lanes of the sums are set: the offsets of the two blocks.
        *off = _mm_fmadd_ps(m, two_floats(xs.add(b), two), *off);
    }
}

/// [`dot_one`] for format `F` (0: Q4_1, 1: Q5_0, 2: Q8_0), compiled once per format.
#[inline(always)]
unsafe fn dot_one_of<const F: u8>(
    p: *const u8,
    blocks: usize,
    xq: *const i8,
    xd: *const f32,
    xs: *const f32,
) -> f32 {
    let bb = [Format::Q4_1, Format::Q5_0, Format::Q8_0][F as usize].block_bytes();
    let mut acc = [_mm512_setzero_ps(); 2];
    let mut off = _mm_setzero_ps();
    let mut b = 0;
    while b + 4 <= blocks {
        prefetch(p.add(b * bb), 4 * bb);
        one_pair::<F>(p, b, true, xq, xd, xs, &mut acc[0], &mut off);
        one_pair::<F>(p, b + 2, true, xq, xd, xs, &mut acc[1], &mut off);
        b += 4;
    }
    while b < blocks {
        let two = b + 2 <= blocks;
        one_pair::<F>(p, b, two, xq, xd, xs, &mut acc[0], &mut off);
        b += if two { 2 } else { 1 };
    }
    let v = _mm512_add_ps(acc[0], acc[1]);
    let v = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    hsum(v) + _mm_cvtss_f32(off) + _mm_cvtss_f32(_mm_movehdup_ps(off))
}
