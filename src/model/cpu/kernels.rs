//! Dot products of quantized weight rows with quantized activations: the inner loop of every
//! matrix multiplication on the CPU.
//!
//! Weights stay in the GGUF's own 32-value block formats (Q4_1, Q5_0, Q8_0). Activations are
//! quantized once per matmul to signed bytes with one `f32` scale per 32 values ([`Q8Row`]).
//! A block's dot product is then an integer sum of 32 byte products, scaled once.
//!
//! Each kernel takes one weight row and `T` activation rows (tokens), so that during prefill a
//! weight block is loaded and unpacked once for up to four tokens. There are three
//! implementations, chosen at run time ([`Isa::detect`]): AVX-512 VNNI (`vpdpbusd`), AVX2
//! (`vpmaddubsw` + `vpmaddwd`) and portable scalar code, which is also the reference the
//! tests compare the others with.

use std::sync::OnceLock;

/// Values per block of every format here.
pub const QK: usize = 32;

/// The instruction sets the kernels are written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Portable Rust, no SIMD intrinsics.
    Scalar,
    /// AVX2 with FMA and F16C (x86-64 since about 2013).
    Avx2,
    /// AVX-512 (F, BW, VL, DQ) with VNNI byte dot products (and BMI2).
    Avx512Vnni,
}

impl Isa {
    /// The best instruction set this CPU has, found once. `CAIRN_ISA=scalar|avx2|avx512`
    /// lowers it (for comparisons); asking for more than the CPU has keeps what it has.
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| {
            let best = Isa::best_supported();
            match std::env::var("CAIRN_ISA").ok().as_deref() {
                Some("scalar") => Isa::Scalar,
                Some("avx2") => best.min(Isa::Avx2),
                _ => best,
            }
        })
    }

    /// The best instruction set the CPU supports, ignoring `CAIRN_ISA`.
    pub fn best_supported() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni")
                && is_x86_feature_detected!("avx512dq")
                && is_x86_feature_detected!("bmi2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
            {
                return Isa::Avx512Vnni;
            }
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    /// Every instruction set this CPU can run, lowest first (for tests and benches).
    pub fn all_supported() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni]
            .into_iter()
            .filter(|&i| i <= Isa::best_supported())
            .collect()
    }

    /// A short name: `scalar`, `avx2`, `avx512vnni`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512Vnni => "avx512vnni",
        }
    }
}

/// The weight formats with kernels here (GGUF block layouts, 32 values per block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `d: f16, m: f16, qs: [u8; 16]`: value = d·q + m, q in 0..16.
    Q4_1,
    /// `d: f16, qh: [u8; 4], qs: [u8; 16]`: value = d·(q − 16), q in 0..32.
    Q5_0,
    /// `d: f16, qs: [i8; 32]`: value = d·q.
    Q8_0,
}

impl Format {
    /// Bytes of one block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Format::Q4_1 => 20,
            Format::Q5_0 => 22,
            Format::Q8_0 => 34,
        }
    }
}

/// One token's activations quantized for the kernels: for block `b`, values
/// `d[b] · qs[32b..32b + 32]`, and `s[b] = d[b] · Σ qs` (needed by Q4_1's offset).
#[derive(Debug, Clone, Copy)]
pub struct Q8Row<'a> {
    /// Quantized values, in `-127..=127`.
    pub qs: &'a [i8],
    /// One scale per block.
    pub d: &'a [f32],
    /// One scaled sum per block.
    pub s: &'a [f32],
}

/// Quantizes `x` (a multiple of 32 values) into `qs`, `d` and `s` (see [`Q8Row`]).
///
/// The scales are rounded to f16 as ggml's Q8_0/Q8_1 activation blocks store them, so that
/// the results are those of llama.cpp (and of candle) up to the order of float additions.
#[inline(always)]
pub fn quantize_row(x: &[f32], qs: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    debug_assert_eq!(x.len() % QK, 0);
    for (b, xb) in x.chunks_exact(QK).enumerate() {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = amax / 127.0;
        let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in qs[b * QK..(b + 1) * QK].iter_mut().zip(xb) {
            let r = round_half_away(v * inv) as i32;
            *q = r as i8;
            sum += r;
        }
        let scale = half::f16::from_f32(scale).to_f32();
        d[b] = scale;
        s[b] = half::f16::from_f32(scale * sum as f32).to_f32();
    }
}

/// `x.round()` (halves away from zero, as ggml's `roundf`), written with `trunc` so that it
/// compiles to vector instructions instead of a call to the C library's `roundf`.
#[inline(always)]
fn round_half_away(x: f32) -> f32 {
    let t = x.trunc();
    if (x - t).abs() >= 0.5 {
        t + 1f32.copysign(x)
    } else {
        t
    }
}

/// Bytes of one pair of blocks in the AVX-512 layout.
pub const PAIR_BYTES: usize = 64;

/// Pairs of blocks for a row of `blocks` blocks (the last pair padded when odd).
pub const fn pairs(blocks: usize) -> usize {
    blocks.div_ceil(2)
}

/// Rewrites one quantized activation row in the AVX-512 layout: blocks go in pairs, each
/// value offset by 128 to an unsigned byte, and the two blocks of a pair interleaved four
/// bytes at a time, so that one 512-bit `vpdpbusd` computes both blocks' sums (even lanes the
/// first block, odd lanes the second). `dp` and `sp` hold `d` and `s` with a zero pad.
#[inline(always)]
pub fn pair_layout(x: &Q8Row, qp: &mut [u8], dp: &mut [f32], sp: &mut [f32]) {
    let blocks = x.d.len();
    for p in 0..pairs(blocks) {
        for half in 0..2 {
            let b = 2 * p + half;
            for g in 0..8 {
                let dst = &mut qp[p * PAIR_BYTES + 8 * g + 4 * half..][..4];
                if b < blocks {
                    for (o, &v) in dst.iter_mut().zip(&x.qs[b * QK + 4 * g..][..4]) {
                        *o = (v as u8) ^ 0x80;
                    }
                } else {
                    dst.fill(0x80);
                }
            }
            dp[2 * p + half] = if b < blocks { x.d[b] } else { 0.0 };
            sp[2 * p + half] = if b < blocks { x.s[b] } else { 0.0 };
        }
    }
}

/// Converts IEEE half-precision bits to `f32` (portable; the SIMD kernels use F16C).
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

#[inline(always)]
fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// One weight row (`row.len()` = blocks × `format.block_bytes()`) against `T` activation
/// rows of the same length; returns the `T` dot products.
///
/// # Panics
/// If the row and the activations do not hold the same number of blocks.
#[inline]
pub fn dot<const T: usize>(isa: Isa, format: Format, row: &[u8], x: &[Q8Row; T]) -> [f32; T] {
    let blocks = row.len() / format.block_bytes();
    assert_eq!(row.len(), blocks * format.block_bytes(), "partial block");
    for r in x {
        assert!(r.qs.len() >= blocks * QK && r.d.len() >= blocks && r.s.len() >= blocks);
    }
    let mut p = XPtrs::new(x);
    let np = pairs(blocks);
    let mut qp = vec![0u8; T * np * PAIR_BYTES];
    let mut dp = vec![0f32; T * np * 2];
    let mut sp = vec![0f32; T * np * 2];
    if isa == Isa::Avx512Vnni {
        for t in 0..T {
            let xt = Q8Row {
                qs: &x[t].qs[..blocks * QK],
                d: &x[t].d[..blocks],
                s: &x[t].s[..blocks],
            };
            pair_layout(
                &xt,
                &mut qp[t * np * PAIR_BYTES..(t + 1) * np * PAIR_BYTES],
                &mut dp[t * np * 2..(t + 1) * np * 2],
                &mut sp[t * np * 2..(t + 1) * np * 2],
            );
            p.qp[t] = qp[t * np * PAIR_BYTES..].as_ptr();
            p.dp[t] = dp[t * np * 2..].as_ptr();
            p.sp[t] = sp[t * np * 2..].as_ptr();
        }
    }
    // SAFETY: the lengths were checked above; the pair layout was made for AVX-512.
    unsafe { dot_raw(isa, format, row.as_ptr(), blocks, &p) }
}

/// Raw pointers to the activations of `T` tokens, taken once per group of tokens so that the
/// per-row loop touches nothing else.
#[derive(Clone, Copy)]
pub struct XPtrs<const T: usize> {
    qs: [*const i8; T],
    d: [*const f32; T],
    s: [*const f32; T],
    /// The same rows in the AVX-512 pair layout ([`pair_layout`]); null unless set.
    pub qp: [*const u8; T],
    /// Pair-layout scales.
    pub dp: [*const f32; T],
    /// Pair-layout scaled sums.
    pub sp: [*const f32; T],
}

impl<const T: usize> XPtrs<T> {
    /// Pointers to the start of each row (the pair layout left unset).
    pub fn new(x: &[Q8Row; T]) -> Self {
        XPtrs {
            qs: std::array::from_fn(|t| x[t].qs.as_ptr()),
            d: std::array::from_fn(|t| x[t].d.as_ptr()),
            s: std::array::from_fn(|t| x[t].s.as_ptr()),
            qp: [std::ptr::null(); T],
            dp: [std::ptr::null(); T],
            sp: [std::ptr::null(); T],
        }
    }
}

/// [`dot`] without checks, for the matmul loop.
///
/// # Safety
/// `row` must point at `blocks` blocks of `format`, the activations must hold `blocks` blocks
/// (and, for AVX-512, the pair layout of them), and `isa` must be supported by the CPU (as
/// [`Isa::detect`] ensures).
#[inline]
pub unsafe fn dot_raw<const T: usize>(
    isa: Isa,
    format: Format,
    row: *const u8,
    blocks: usize,
    x: &XPtrs<T>,
) -> [f32; T] {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => x86::dot_pairs(format, row, blocks, x),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => x86::dot_avx2(format, row, blocks, x),
        _ => dot_scalar_raw(format, row, blocks, x),
    }
}

/// Vectors per pair of blocks in a prepacked row ([`prepack_row`]): the interleaved
/// weights and the −128·Σweights start of the sum.
pub const PREPACKED_VECTORS: usize = 2;

/// One 512-bit vector, the unit of a prepacked row.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct V512(pub [u8; 64]);

/// Unpacks one weight row for [`dot_prepacked`]: during prefill a row meets every token of
/// the batch, so its blocks are unpacked once into `w` (two [`V512`] per pair of blocks) and
/// `dw`/`mw` (two scales and two minimums per pair) instead of once per four tokens.
///
/// # Safety
/// AVX-512 VNNI must be present ([`Isa::Avx512Vnni`]); `row` must hold `blocks` blocks of
/// `format`; `w` must hold `2·pairs(blocks)` vectors and `dw`, `mw` `2·pairs(blocks)` values.
pub unsafe fn prepack_row(
    format: Format,
    row: *const u8,
    blocks: usize,
    w: &mut [V512],
    dw: &mut [f32],
    mw: &mut [f32],
) {
    debug_assert!(w.len() >= 2 * pairs(blocks) && dw.len() >= 2 * pairs(blocks));
    #[cfg(target_arch = "x86_64")]
    x86::prepack(
        format,
        row,
        blocks,
        w.as_mut_ptr(),
        dw.as_mut_ptr(),
        mw.as_mut_ptr(),
    );
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!(
        "prepacked rows exist only with AVX-512: {format:?} {row:?} {blocks} {w:p} {dw:p} {mw:p}"
    );
}

/// `R` prepacked rows ([`prepack_row`], given as `(w, dw, mw)`) against `T` tokens in the
/// pair layout; returns `[row][token]`.
///
/// # Safety
/// As for [`prepack_row`]; `x` must carry the pair layout of `pairs` pairs per token.
pub unsafe fn dot_prepacked<const R: usize, const T: usize>(
    rows: [(&[V512], &[f32], &[f32]); R],
    pairs: usize,
    offset: bool,
    x: &XPtrs<T>,
) -> [[f32; T]; R] {
    #[cfg(target_arch = "x86_64")]
    return x86::dot_prepacked::<R, T>(
        rows.map(|r| r.0.as_ptr()),
        rows.map(|r| r.1.as_ptr()),
        rows.map(|r| r.2.as_ptr()),
        pairs,
        offset,
        x,
    );
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!(
        "prepacked rows exist only with AVX-512: {pairs} {offset} {}",
        rows.len()
    );
}

unsafe fn dot_scalar_raw<const T: usize>(
    format: Format,
    row: *const u8,
    blocks: usize,
    x: &XPtrs<T>,
) -> [f32; T] {
    let row = std::slice::from_raw_parts(row, blocks * format.block_bytes());
    let rows: [Q8Row; T] = std::array::from_fn(|t| Q8Row {
        qs: std::slice::from_raw_parts(x.qs[t], blocks * QK),
        d: std::slice::from_raw_parts(x.d[t], blocks),
        s: std::slice::from_raw_parts(x.s[t], blocks),
    });
    dot_scalar(format, row, &rows)
}

/// Unpacks one block into 32 integer weights and `(scale, offset)`: value = scale·q + offset.
#[inline(always)]
fn unpack_scalar(format: Format, blk: &[u8]) -> ([i32; QK], f32, f32) {
    let mut q = [0i32; QK];
    match format {
        Format::Q4_1 => {
            for j in 0..16 {
                q[j] = (blk[4 + j] & 0x0F) as i32;
                q[j + 16] = (blk[4 + j] >> 4) as i32;
            }
            (
                q,
                f16_to_f32(read_u16(blk, 0)),
                f16_to_f32(read_u16(blk, 2)),
            )
        }
        Format::Q5_0 => {
            let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
            for j in 0..16 {
                let lo = blk[6 + j];
                q[j] = ((lo & 0x0F) as i32 | (((qh >> j) & 1) << 4) as i32) - 16;
                q[j + 16] = ((lo >> 4) as i32 | (((qh >> (j + 16)) & 1) << 4) as i32) - 16;
            }
            (q, f16_to_f32(read_u16(blk, 0)), 0.0)
        }
        Format::Q8_0 => {
            for j in 0..QK {
                q[j] = blk[2 + j] as i8 as i32;
            }
            (q, f16_to_f32(read_u16(blk, 0)), 0.0)
        }
    }
}

/// The portable kernel and the reference for the SIMD ones: per block, an exact integer sum,
/// then `acc += d_w·d_x·sum + m_w·s_x`.
pub fn dot_scalar<const T: usize>(format: Format, row: &[u8], x: &[Q8Row; T]) -> [f32; T] {
    let bb = format.block_bytes();
    let mut acc = [0f32; T];
    for (b, blk) in row.chunks_exact(bb).enumerate() {
        let (q, d, m) = unpack_scalar(format, blk);
        for t in 0..T {
            let xs = &x[t].qs[b * QK..(b + 1) * QK];
            let sum: i32 = q.iter().zip(xs).map(|(&w, &v)| w * v as i32).sum();
            acc[t] += d * x[t].d[b] * sum as f32 + m * x[t].s[b];
        }
    }
    acc
}

/// Dequantizes one weight row into `out` (`out.len()` values).
pub fn dequantize_row(format: Format, row: &[u8], out: &mut [f32]) {
    let bb = format.block_bytes();
    for (blk, o) in row.chunks_exact(bb).zip(out.chunks_exact_mut(QK)) {
        let (q, d, m) = unpack_scalar(format, blk);
        for (v, &qi) in o.iter_mut().zip(&q) {
            *v = d * qi as f32 + m;
        }
    }
}

/// Quantizes `x` (a multiple of 32 values) to Q8_0 blocks appended to `out`, the way ggml
/// does (scale = max |x| / 127, f16).
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    for xb in x.chunks_exact(QK) {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&half::f16::from_f32(d).to_bits().to_le_bytes());
        out.extend(xb.iter().map(|&v| ((v * inv).round() as i8) as u8));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The x86-64 kernels. Every function here needs the features its attribute names;
    //! callers check them with [`super::Isa::detect`].

    use super::{Format, XPtrs, QK, V512};
    use std::arch::x86_64::*;

    /// One block unpacked for a byte dot product: either unsigned weights (Q4_1, with an
    /// offset) or signed weights handled with the `abs`/`sign` trick.
    struct Unpacked {
        /// Weights as bytes: unsigned (`signed == false`) or signed.
        q: __m256i,
        d: f32,
        m: f32,
    }

    #[inline(always)]
    unsafe fn half(p: *const u8) -> f32 {
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
    unsafe fn unpack(format: Format, p: *const u8, vnni: bool) -> Unpacked {
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

    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// The AVX2 kernel: one block at a time in 256-bit registers; signed weights (Q5_0,
    /// Q8_0) go through the `abs`/`sign` trick, Q4_1's unsigned ones add their offset.
    #[allow(clippy::needless_range_loop)] // `t` indexes several per-token arrays at once
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_avx2<const T: usize>(
        format: Format,
        p: *const u8,
        blocks: usize,
        x: &XPtrs<T>,
    ) -> [f32; T] {
        let bb = format.block_bytes();
        let signed = format != Format::Q4_1;
        let mut acc = [_mm256_setzero_ps(); T];
        let mut offset = [0f32; T];
        for b in 0..blocks {
            let u = unpack(format, p.add(b * bb), false);
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
        let mut out = [0f32; T];
        for t in 0..T {
            out[t] = hsum(acc[t]) + offset[t];
        }
        out
    }

    /// Unsigned × signed bytes summed in groups of four into eight i32 lanes. The pairwise
    /// i16 sums cannot saturate: weights are at most 128 in magnitude and activations at most
    /// 127 (2 · 128 · 127 < 32767).
    #[inline(always)]
    unsafe fn dot_bytes_avx2(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }

    /// Two weight blocks as one 512-bit vector of signed bytes, interleaved four bytes at a
    /// time like the activations' pair layout, with `[d0, d1, ·, ·]` and `[m0, m1, ·, ·]`;
    /// the second block is zero past the row's end.
    #[inline(always)]
    unsafe fn pair_weights(
        format: Format,
        p: *const u8,
        second: bool,
    ) -> (__m512i, __m128, __m128) {
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
                    acc[r][t] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(sum),
                        _mm512_mul_ps(d[r], dx),
                        acc[r][t],
                    );
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift) so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn byte(&mut self) -> u8 {
            (self.next() >> 24) as u8
        }
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
    }

    /// Random blocks of `format`, with every byte pattern allowed (scales kept finite).
    fn random_row(format: Format, blocks: usize, rng: &mut Rng) -> Vec<u8> {
        let mut row = Vec::new();
        for _ in 0..blocks {
            let mut blk: Vec<u8> = (0..format.block_bytes()).map(|_| rng.byte()).collect();
            blk[..2].copy_from_slice(
                &half::f16::from_f32(rng.unit() * 0.1)
                    .to_bits()
                    .to_le_bytes(),
            );
            if format == Format::Q4_1 {
                let m = half::f16::from_f32(rng.unit() * 0.1)
                    .to_bits()
                    .to_le_bytes();
                blk[2..4].copy_from_slice(&m);
            }
            row.extend(blk);
        }
        row
    }

    struct Acts {
        qs: Vec<i8>,
        d: Vec<f32>,
        s: Vec<f32>,
    }

    fn random_acts(blocks: usize, rng: &mut Rng) -> Acts {
        let x: Vec<f32> = (0..blocks * QK).map(|_| rng.unit() * 3.0).collect();
        let mut a = Acts {
            qs: vec![0; blocks * QK],
            d: vec![0.0; blocks],
            s: vec![0.0; blocks],
        };
        quantize_row(&x, &mut a.qs, &mut a.d, &mut a.s);
        a
    }

    fn row(a: &Acts) -> Q8Row<'_> {
        Q8Row {
            qs: &a.qs,
            d: &a.d,
            s: &a.s,
        }
    }

    /// Exact integer sums per block, then the scaling in f64: the value every kernel
    /// approximates in f32.
    fn reference(format: Format, w: &[u8], a: &Acts) -> f64 {
        let mut total = 0f64;
        for (b, blk) in w.chunks_exact(format.block_bytes()).enumerate() {
            let (q, d, m) = unpack_scalar(format, blk);
            let sum: i64 = (0..QK).map(|j| q[j] as i64 * a.qs[b * QK + j] as i64).sum();
            total += d as f64 * a.d[b] as f64 * sum as f64 + m as f64 * a.s[b] as f64;
        }
        total
    }

    fn check<const T: usize>(isa: Isa, format: Format, blocks: usize, rng: &mut Rng) {
        let w = random_row(format, blocks, rng);
        let acts: Vec<Acts> = (0..T).map(|_| random_acts(blocks, rng)).collect();
        let x: [Q8Row; T] = std::array::from_fn(|t| row(&acts[t]));
        let got = dot(isa, format, &w, &x);
        for t in 0..T {
            let want = reference(format, &w, &acts[t]);
            // The sum of |terms| bounds the rounding error of the f32 accumulation.
            let magnitude: f64 = w
                .chunks_exact(format.block_bytes())
                .enumerate()
                .map(|(b, blk)| {
                    let (q, d, m) = unpack_scalar(format, blk);
                    let s: i64 = (0..QK)
                        .map(|j| (q[j] as i64 * acts[t].qs[b * QK + j] as i64).abs())
                        .sum();
                    (d as f64 * acts[t].d[b] as f64 * s as f64).abs()
                        + (m * acts[t].s[b]).abs() as f64
                })
                .sum();
            let err = (got[t] as f64 - want).abs();
            assert!(
                err <= 1e-5 * magnitude + 1e-6,
                "{isa:?} {format:?} T={T} blocks={blocks}: got {} want {want} (err {err}, scale {magnitude})",
                got[t]
            );
        }
    }

    #[test]
    fn every_kernel_matches_the_exact_block_sums_on_random_blocks() {
        let mut rng = Rng(0x9E3779B97F4A7C15);
        for isa in Isa::all_supported() {
            for format in [Format::Q4_1, Format::Q5_0, Format::Q8_0] {
                for blocks in [1, 2, 7, 18, 152] {
                    check::<1>(isa, format, blocks, &mut rng);
                    check::<2>(isa, format, blocks, &mut rng);
                    check::<3>(isa, format, blocks, &mut rng);
                    check::<4>(isa, format, blocks, &mut rng);
                }
            }
        }
    }

    #[test]
    fn integer_block_sums_are_exact_in_every_kernel() {
        // Unit scales and zero offsets make each result a sum of exact integers that f32
        // holds exactly, so every instruction set must agree to the last bit, including the
        // extremes: weights of -128 (Q8_0) or 15/31 (Q4_1/Q5_0) against activations of ±127.
        for format in [Format::Q4_1, Format::Q5_0, Format::Q8_0] {
            let mut rng = Rng(7);
            let blocks = 9;
            let mut w = random_row(format, blocks, &mut rng);
            for blk in w.chunks_exact_mut(format.block_bytes()) {
                blk[..2].copy_from_slice(&half::f16::from_f32(1.0).to_bits().to_le_bytes());
                if format == Format::Q4_1 {
                    blk[2..4].copy_from_slice(&0u16.to_le_bytes());
                }
            }
            if format == Format::Q8_0 {
                w[2] = 0x80; // -128
            }
            let qs: Vec<i8> = (0..blocks * QK)
                .map(|i| if i % 3 == 0 { -127 } else { 127 })
                .collect();
            let d = vec![1.0f32; blocks];
            let s = vec![0.0f32; blocks];
            let x = [Q8Row {
                qs: &qs,
                d: &d,
                s: &s,
            }];
            let want = dot_scalar(format, &w, &x)[0];
            for isa in Isa::all_supported() {
                assert_eq!(dot(isa, format, &w, &x)[0], want, "{isa:?} {format:?}");
            }
        }
    }

    #[test]
    fn rounding_matches_the_c_library_on_halves_and_near_halves() {
        for x in [
            0.0f32,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            0.49999997,
            -0.49999997,
            126.5,
            -127.49,
            3.0,
            -0.0,
            1e-9,
        ] {
            assert_eq!(round_half_away(x), x.round(), "{x}");
        }
        let mut rng = Rng(11);
        for _ in 0..100_000 {
            let x = rng.unit() * 130.0;
            assert_eq!(round_half_away(x), x.round(), "{x}");
        }
    }

    #[test]
    fn q5_0_dequantize_reads_the_high_bits_of_each_value() {
        // Every high bit set except bit 3: q = nibble | 16, and value 3 has q = nibble.
        let mut blk = vec![0u8; 22];
        blk[..2].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
        blk[2..6].copy_from_slice(&(!(1u32 << 3)).to_le_bytes());
        for j in 0..16 {
            blk[6 + j] = (j as u8) | ((15 - j as u8) << 4);
        }
        let mut out = [0f32; 32];
        dequantize_row(Format::Q5_0, &blk, &mut out);
        assert_eq!(out[0], 0.0); // (0 | 16) - 16
        assert_eq!(out[3], 0.5 * (3.0 - 16.0));
        assert_eq!(out[16], 0.5 * 15.0);
    }

    #[test]
    fn dequantized_rows_match_candle_for_every_format() {
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        let mut rng = Rng(3);
        let values: Vec<f32> = (0..4 * 64).map(|_| rng.unit()).collect();
        let t = Tensor::from_vec(values, (4, 64), &Device::Cpu).unwrap();
        for (dtype, format) in [
            (GgmlDType::Q4_1, Format::Q4_1),
            (GgmlDType::Q5_0, Format::Q5_0),
            (GgmlDType::Q8_0, Format::Q8_0),
        ] {
            let q = QTensor::quantize(&t, dtype).unwrap();
            let want = q
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let bytes = q.data().unwrap();
            let mut got = vec![0f32; 256];
            dequantize_row(format, &bytes, &mut got);
            assert_eq!(got, want, "{format:?}");
        }
    }
}
