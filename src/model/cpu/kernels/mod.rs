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
//! tests compare the others with. On AVX-512 machines one token of a 32-value block format
//! (decode) takes its own kernel, two blocks per `vpdpbusd` on the activations as they lie;
//! several tokens take the pair layout ([`pair_layout`], see [`dot_raw`]).
//!
//! The K-quants (Q4_K, Q6_K) are computed on their stored 256-value super-blocks against
//! activations quantized as ggml's Q8_K ([`Q8KRow`]), with AVX-512 (64 values per
//! instruction, `vpmaddubsw` + `vpdpwssd`), AVX2 and scalar kernels. AVX-512 prefill reads
//! eight tokens at a time from a tile layout of the activations ([`KTilePtrs`]), one
//! `vpdpbusd` per 64 values and token. Every K-quant kernel computes exact integer totals per
//! super-block and then the scalar kernel's float step, so all give the same result to the
//! last bit: greedy text does not depend on the instruction set or on how many tokens a
//! kernel took at once.
//!
//! On CPUs with Intel AMX, prefill (16 tokens or more) runs on AMX-INT8 tiles instead
//! ([`amx`]): 16 tokens by 16 weight rows per instruction, for every format here.
//!
//! One file per instruction set: `scalar` (portable, and the reference), `avx2`, `avx512`
//! and `amx` (x86-64 only). This file holds what they share: the instruction-set detection,
//! the formats, the activation quantizers and layouts, and the entry points that dispatch
//! on an [`Isa`].

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
pub mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;
#[cfg(test)]
mod tests;

pub use scalar::{dequantize_row, dequantize_row_k, dot_k_scalar, dot_scalar};

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
    /// [`Isa::Avx512Vnni`], with Intel AMX-INT8 tiles for prefill ([`amx`]).
    Amx,
}

/// The cap set by [`Isa::limit_to`].
static LIMIT: OnceLock<Isa> = OnceLock::new();

impl Isa {
    /// The instruction set the kernels use, found once: the best this CPU has, lowered to the
    /// limit set by [`Isa::limit_to`] (the CLI's `CAIRN_ISA`, for comparisons) or, when none
    /// was set, by a valid `CAIRN_ISA` in the environment (so that a program or test using the
    /// library directly runs the kernels the CLI would; the CLI refuses an invalid value before
    /// any kernel runs); a limit above what the CPU has keeps what it has.
    pub fn detect() -> Isa {
        static ISA: OnceLock<Isa> = OnceLock::new();
        *ISA.get_or_init(|| {
            let best = Isa::best_supported();
            let env = || {
                std::env::var("CAIRN_ISA")
                    .ok()
                    .and_then(|v| Isa::parse(v.trim()))
            };
            LIMIT
                .get()
                .copied()
                .or_else(env)
                .map_or(best, |limit| best.min(limit))
        })
    }

    /// Caps the instruction set [`Isa::detect`] picks. Takes effect only before the kernels'
    /// first use; returns `false` when it came too late (or a limit was already set).
    pub fn limit_to(limit: Isa) -> bool {
        LIMIT.set(limit).is_ok()
    }

    /// The set named `name` (`scalar`, `avx2`, `avx512`, `amx`, or a [`Isa::name`]).
    pub fn parse(name: &str) -> Option<Isa> {
        match name {
            "scalar" => Some(Isa::Scalar),
            "avx2" => Some(Isa::Avx2),
            "avx512" | "avx512vnni" => Some(Isa::Avx512Vnni),
            "amx" => Some(Isa::Amx),
            _ => None,
        }
    }

    /// The best instruction set the CPU supports, ignoring any limit.
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
                return if amx::available() {
                    Isa::Amx
                } else {
                    Isa::Avx512Vnni
                };
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
        [Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Amx]
            .into_iter()
            .filter(|&i| i <= Isa::best_supported())
            .collect()
    }

    /// A short name: `scalar`, `avx2`, `avx512vnni`, `amx`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512Vnni => "avx512vnni",
            Isa::Amx => "amx",
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
    if isa >= Isa::Avx512Vnni {
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
        Isa::Avx512Vnni | Isa::Amx if T > 1 => avx512::dot_pairs(format, row, blocks, x),
        // One token (decode): two blocks per `vpdpbusd` on the activations as they lie (the
        // pair layout's extra `vpdpbusd` per pair for its +128 offset made it slower for one
        // token than the AVX2 kernel; this one has none).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni | Isa::Amx => {
            [avx512::dot_one(format, row, blocks, x.qs[0], x.d[0], x.s[0]); T]
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::dot_avx2(format, row, blocks, x),
        _ => scalar::dot_scalar_raw(format, row, blocks, x),
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
    avx512::prepack(
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
    return avx512::dot_prepacked::<R, T>(
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

/// Rows (and tokens) per AMX tile ([`amx`]).
pub const AMX_TILE: usize = 16;

/// Values per K-quant super-block.
pub const QK_K: usize = 256;

/// The K-quant weight formats with kernels here: 256-value super-blocks, computed on as
/// stored (no conversion at load) against activations in [`Q8KRow`] form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KFormat {
    /// `d, dmin: f16, scales: [u8; 12], qs: [u8; 128]`: eight 32-value sub-blocks, each with
    /// a 6-bit scale `sc` and minimum `m`: value = d·sc·q − dmin·m, q in 0..16.
    Q4K,
    /// `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`: sixteen 16-value sub-blocks
    /// with signed 8-bit scales: value = d·sc·(q − 32), q in 0..64.
    Q6K,
}

impl KFormat {
    /// Bytes of one super-block.
    pub const fn block_bytes(self) -> usize {
        match self {
            KFormat::Q4K => 144,
            KFormat::Q6K => 210,
        }
    }
}

/// One token's activations quantized for the K-quant kernels (ggml's Q8_K): per 256-value
/// super-block `b`, values `d[b] · qs[256b..256b + 256]`, and the sum of each 16 values in
/// `bsums` (16 per super-block), which the minimums and offsets of the weights need.
#[derive(Debug, Clone, Copy)]
pub struct Q8KRow<'a> {
    /// Quantized values, in `-128..=127`.
    pub qs: &'a [i8],
    /// One scale per super-block.
    pub d: &'a [f32],
    /// The sum of each 16 quantized values.
    pub bsums: &'a [i16],
    /// The sum of each 32 quantized values (pairs of `bsums`, which fit in 16 bits): Q4_K's
    /// minimums meet them once per row, super-block and token, so they are added once per
    /// token here rather than there.
    pub bsums32: &'a [i16],
}

/// Quantizes `x` (a multiple of 256 values) into `qs`, `d`, `bsums` and `bsums32` (see
/// [`Q8KRow`]), exactly as ggml's `quantize_row_q8_K` does, so that K-quant results are
/// llama.cpp's up to the order of additions: the value of largest magnitude maps to −127 (so `d` takes the
/// opposite sign), `d = 1 / (−127 / max)`, and values round half to even.
#[inline(always)]
pub fn quantize_row_k(
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    bsums: &mut [i16],
    bsums32: &mut [i16],
) {
    debug_assert_eq!(x.len() % QK_K, 0);
    for (b, xb) in x.chunks_exact(QK_K).enumerate() {
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let q = &mut qs[b * QK_K..(b + 1) * QK_K];
        if amax == 0.0 {
            q.fill(0);
            bsums[b * 16..(b + 1) * 16].fill(0);
            bsums32[b * 8..(b + 1) * 8].fill(0);
            d[b] = 0.0;
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in q.iter_mut().zip(xb) {
            *q = (iscale * v).round_ties_even().min(127.0) as i8;
        }
        for (g, s) in bsums[b * 16..(b + 1) * 16].iter_mut().enumerate() {
            *s = q[16 * g..16 * g + 16].iter().map(|&v| v as i16).sum();
        }
        for (g, s) in bsums32[b * 8..(b + 1) * 8].iter_mut().enumerate() {
            *s = bsums[b * 16 + 2 * g] + bsums[b * 16 + 2 * g + 1];
        }
        d[b] = 1.0 / iscale;
    }
}

/// Raw pointers to the [`Q8KRow`] activations of `T` tokens (see [`XPtrs`]).
#[derive(Clone, Copy)]
pub struct KPtrs<const T: usize> {
    qs: [*const i8; T],
    d: [*const f32; T],
    bsums: [*const i16; T],
    bsums32: [*const i16; T],
}

impl<const T: usize> KPtrs<T> {
    /// Pointers to the start of each row.
    pub fn new(x: &[Q8KRow; T]) -> Self {
        KPtrs {
            qs: std::array::from_fn(|t| x[t].qs.as_ptr()),
            d: std::array::from_fn(|t| x[t].d.as_ptr()),
            bsums: std::array::from_fn(|t| x[t].bsums.as_ptr()),
            bsums32: std::array::from_fn(|t| x[t].bsums32.as_ptr()),
        }
    }
}

/// Tokens per tile of the K activations' tile layout ([`put_k_tile`]), which the AVX-512
/// prefill kernels read.
pub const KTILE: usize = 8;

/// [`KTILE`] tokens' [`Q8KRow`] activations laid out for the AVX-512 prefill kernels: per
/// super-block `b`, the quantized values as `qs[b][j][t][64]`, whose 32-bit lane `l` holds
/// token `t`'s four values `16l + 4j .. 16l + 4j + 4` (so that lane `l` of every 64 values
/// belongs to the 16-value group `l`, and one `vpdpbusd` per 64 values and token sums each
/// group over the super-block); then `d[b][t]`, `bsums[b][t][16]` and `bsums32[b][t][8]`.
/// One base pointer per part, constant offsets, and a part of all eight tokens in one load:
/// with one pointer per token and part the kernel spilled them, and its per-token epilogue
/// was as long as its multiplies.
#[derive(Clone, Copy)]
pub struct KTilePtrs {
    /// `blocks · KTILE · 256` quantized values.
    pub qs: *const i8,
    /// `blocks · KTILE` scales.
    pub d: *const f32,
    /// `blocks · KTILE · 16` sums of 16 values.
    pub bsums: *const i16,
    /// `blocks · KTILE · 8` sums of 32 values.
    pub bsums32: *const i16,
}

/// Writes token `t` (of a tile, `t < KTILE`) of `x` into a tile of `blocks` super-blocks
/// whose parts start at `qs`, `d`, `bsums` and `bsums32` (see [`KTilePtrs`]).
///
/// # Safety
/// `x` must hold `blocks` super-blocks, and each part must be valid for writes of a whole
/// tile of `blocks` super-blocks; tokens of one tile may be written from several threads, as
/// their places do not overlap.
pub unsafe fn put_k_tile(
    x: &Q8KRow,
    blocks: usize,
    t: usize,
    qs: *mut i8,
    d: *mut f32,
    bsums: *mut i16,
    bsums32: *mut i16,
) {
    debug_assert!(t < KTILE);
    for b in 0..blocks {
        let src = x.qs.as_ptr().add(b * QK_K) as *const [i8; 4];
        for j in 0..QK_K / 64 {
            let dst = qs.add(((b * 4 + j) * KTILE + t) * 64) as *mut [i8; 4];
            for l in 0..16 {
                *dst.add(l) = *src.add(4 * l + j);
            }
        }
        *d.add(b * KTILE + t) = x.d[b];
        std::ptr::copy_nonoverlapping(
            x.bsums.as_ptr().add(b * 16),
            bsums.add((b * KTILE + t) * 16),
            16,
        );
        std::ptr::copy_nonoverlapping(
            x.bsums32.as_ptr().add(b * 8),
            bsums32.add((b * KTILE + t) * 8),
            8,
        );
    }
}

/// One K-quant weight row against a tile of [`KTILE`] tokens in the tile layout
/// ([`KTilePtrs`]): the same results, to the last bit, as [`dot_k_raw`] on the same tokens.
///
/// # Safety
/// As for [`dot_k_raw`], with the tile holding `blocks` super-blocks; `isa` must be AVX-512
/// VNNI or above (the only kernels that read this layout).
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn dot_k_tile_raw(
    isa: Isa,
    format: KFormat,
    row: *const u8,
    blocks: usize,
    x: &KTilePtrs,
    out: *mut f32,
    stride: usize,
) {
    debug_assert!(isa >= Isa::Avx512Vnni);
    match format {
        KFormat::Q4K => avx512::dot_q4k_tile(row, blocks, x, out, stride),
        KFormat::Q6K => avx512::dot_q6k_tile(row, blocks, x, out, stride),
    }
}

/// One K-quant weight row (`row.len()` = super-blocks × `format.block_bytes()`) against `T`
/// activation rows of the same length; returns the `T` dot products.
///
/// # Panics
/// If the row and the activations do not hold the same number of super-blocks.
#[inline]
pub fn dot_k<const T: usize>(isa: Isa, format: KFormat, row: &[u8], x: &[Q8KRow; T]) -> [f32; T] {
    let blocks = row.len() / format.block_bytes();
    assert_eq!(
        row.len(),
        blocks * format.block_bytes(),
        "partial super-block"
    );
    for r in x {
        assert!(
            r.qs.len() >= blocks * QK_K
                && r.d.len() >= blocks
                && r.bsums.len() >= blocks * 16
                && r.bsums32.len() >= blocks * 8
        );
    }
    // SAFETY: the lengths were checked above.
    unsafe { dot_k_raw(isa, format, row.as_ptr(), blocks, &KPtrs::new(x)) }
}

/// [`dot_k`] without checks, for the matmul loop.
///
/// # Safety
/// `row` must point at `blocks` super-blocks of `format`, the activations must hold `blocks`
/// super-blocks, and `isa` must be supported by the CPU (as [`Isa::detect`] ensures).
#[inline]
pub unsafe fn dot_k_raw<const T: usize>(
    isa: Isa,
    format: KFormat,
    row: *const u8,
    blocks: usize,
    x: &KPtrs<T>,
) -> [f32; T] {
    match (isa, format) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512Vnni | Isa::Amx, KFormat::Q4K) => avx512::dot_q4k(row, blocks, x),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512Vnni | Isa::Amx, KFormat::Q6K) => avx512::dot_q6k(row, blocks, x),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, KFormat::Q4K) => avx2::dot_q4k(row, blocks, x),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, KFormat::Q6K) => avx2::dot_q6k(row, blocks, x),
        _ => scalar::dot_k_scalar_raw(format, row, blocks, x),
    }
}

/// How a weight matrix's rows are laid out, which picks its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// 32-value blocks, against [`Q8Row`] activations.
    Blocks(Format),
    /// 256-value super-blocks, against [`Q8KRow`] activations.
    K(KFormat),
}

impl Layout {
    /// Values per block.
    pub const fn block_values(self) -> usize {
        match self {
            Layout::Blocks(_) => QK,
            Layout::K(_) => QK_K,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Layout::Blocks(f) => f.block_bytes(),
            Layout::K(f) => f.block_bytes(),
        }
    }

    /// The GGUF type name (`Q4_K`, `Q8_0`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Layout::Blocks(Format::Q4_1) => "Q4_1",
            Layout::Blocks(Format::Q5_0) => "Q5_0",
            Layout::Blocks(Format::Q8_0) => "Q8_0",
            Layout::K(KFormat::Q4K) => "Q4_K",
            Layout::K(KFormat::Q6K) => "Q6_K",
        }
    }
}
