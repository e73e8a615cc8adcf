//! The AVX2 kernel (with FMA and F16C), and the 256-bit block unpacking that the AVX-512
//! kernel reuses for a lone last block. Every function here needs the features its
//! attribute names; callers check them with [`super::Isa::detect`].

use super::{Format, XPtrs, QK};
use std::arch::x86_64::*;

/// One block unpacked for a byte dot product: either unsigned weights (Q4_1, with an
/// offset) or signed weights handled with the `abs`/`sign` trick.
pub(super) struct Unpacked {
    /// Weights as bytes: unsigned (`signed == false`) or signed.
    pub(super) q: __m256i,
    pub(super) d: f32,
    pub(super) m: f32,
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
