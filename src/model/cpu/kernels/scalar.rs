//! The portable kernel: plain Rust on any CPU, and the reference the SIMD kernels are
//! tested against. Also the block unpacking that dequantization uses.

use super::{f16_to_f32, Format, KFormat, KPtrs, Q8KRow, Q8Row, XPtrs, QK, QK_K};

#[inline(always)]
fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(super) unsafe fn dot_scalar_raw<const T: usize>(
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
pub(super) fn unpack_scalar(format: Format, blk: &[u8]) -> ([i32; QK], f32, f32) {
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

/// One K-quant super-block in a common form: value `i` is
/// `d · scale[i / 16] · q[i] − dmin · min[i / 16]`, with `q` unsigned.
pub(super) struct UnpackedK {
    pub(super) q: [u8; QK_K],
    pub(super) scale: [i32; 16],
    pub(super) min: [i32; 16],
    pub(super) d: f32,
    pub(super) dmin: f32,
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K super-block (`q`: its 12 bytes).
#[inline(always)]
pub(super) fn scale_min_q4k(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Unpacks one super-block of `format` (GGUF layouts, see [`KFormat`]).
pub(super) fn unpack_k(format: KFormat, blk: &[u8]) -> UnpackedK {
    let mut u = UnpackedK {
        q: [0; QK_K],
        scale: [0; 16],
        min: [0; 16],
        d: 0.0,
        dmin: 0.0,
    };
    match format {
        KFormat::Q4K => {
            u.d = f16_to_f32(read_u16(blk, 0));
            u.dmin = f16_to_f32(read_u16(blk, 2));
            let (scales, qs) = (&blk[4..16], &blk[16..144]);
            for j in 0..8 {
                let (sc, m) = scale_min_q4k(j, scales);
                u.scale[2 * j..2 * j + 2].fill(sc as i32);
                u.min[2 * j..2 * j + 2].fill(m as i32);
                // Sub-blocks 2c and 2c + 1 share 32 bytes: low nibbles, then high nibbles.
                let chunk = &qs[32 * (j / 2)..32 * (j / 2) + 32];
                for (i, &b) in chunk.iter().enumerate() {
                    u.q[32 * j + i] = if j % 2 == 0 { b & 0x0F } else { b >> 4 };
                }
            }
        }
        KFormat::Q6K => {
            let (ql, qh, sc) = (&blk[0..128], &blk[128..192], &blk[192..208]);
            u.d = f16_to_f32(read_u16(blk, 208));
            u.dmin = u.d;
            for ((scale, min), &s) in u.scale.iter_mut().zip(&mut u.min).zip(sc) {
                *scale = s as i8 as i32;
                *min = 32 * *scale;
            }
            // Two halves of 128 values; in each, value l + 32k takes its low four bits from
            // `ql` (byte l or l + 32, low or high nibble) and its high two from bits 2k of `qh[l]`.
            for n in 0..2 {
                let (ql, qh) = (&ql[64 * n..], &qh[32 * n..]);
                for l in 0..32 {
                    let y = &mut u.q[128 * n..];
                    y[l] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
                    y[l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
                    y[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                    y[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                }
            }
        }
    }
    u
}

pub(super) unsafe fn dot_k_scalar_raw<const T: usize>(
    format: KFormat,
    row: *const u8,
    blocks: usize,
    x: &KPtrs<T>,
) -> [f32; T] {
    let row = std::slice::from_raw_parts(row, blocks * format.block_bytes());
    let rows: [Q8KRow; T] = std::array::from_fn(|t| Q8KRow {
        qs: std::slice::from_raw_parts(x.qs[t], blocks * QK_K),
        d: std::slice::from_raw_parts(x.d[t], blocks),
        bsums: std::slice::from_raw_parts(x.bsums[t], blocks * 16),
        bsums32: std::slice::from_raw_parts(x.bsums32[t], blocks * 8),
    });
    dot_k_scalar(format, row, &rows)
}

/// The portable K-quant kernel and the reference for the SIMD ones: per super-block, the
/// exact integer totals `Σ scale·Σ q·x` and `Σ min·bsum`, then the float step of
/// [`q4k_step`] or [`q6k_step`]. Every kernel computes the same integers (in any order: they
/// are exact) and the same float step, so every kernel's result is this one's to the last
/// bit, whatever the instruction set and however many tokens it takes at once.
pub fn dot_k_scalar<const T: usize>(format: KFormat, row: &[u8], x: &[Q8KRow; T]) -> [f32; T] {
    let mut acc = [0f32; T];
    for (b, blk) in row.chunks_exact(format.block_bytes()).enumerate() {
        let u = unpack_k(format, blk);
        for t in 0..T {
            let xs = &x[t].qs[b * QK_K..(b + 1) * QK_K];
            let bs = &x[t].bsums[b * 16..(b + 1) * 16];
            let (mut sum, mut mins) = (0i32, 0i32);
            for (g, &bsum) in bs.iter().enumerate() {
                let s: i32 = (16 * g..16 * g + 16)
                    .map(|i| u.q[i] as i32 * xs[i] as i32)
                    .sum();
                sum += u.scale[g] * s;
                mins += u.min[g] * bsum as i32;
            }
            let dx = x[t].d[b];
            acc[t] = match format {
                KFormat::Q4K => q4k_step(acc[t], u.d, u.dmin, dx, sum, mins),
                // Q6_K's minimum is 32·scale with the same `d`: one exact total.
                KFormat::Q6K => q6k_step(acc[t], u.d, dx, sum - mins),
            };
        }
    }
    acc
}

/// The float step of one Q4_K super-block and token, the same in every kernel: `acc +
/// (d·dx·sum − dmin·dx·mins)`, evaluated in this order with no fused multiply-add, from the
/// exact integer totals `sum` (Σ scale·Σ q·x) and `mins` (Σ min·Σ x).
#[inline(always)]
pub(super) fn q4k_step(acc: f32, d: f32, dmin: f32, dx: f32, sum: i32, mins: i32) -> f32 {
    acc + (d * dx * sum as f32 - dmin * dx * mins as f32)
}

/// The float step of one Q6_K super-block and token, the same in every kernel: `acc +
/// d·dx·total`, from the exact integer total Σ scale·Σ (q − 32)·x.
#[inline(always)]
pub(super) fn q6k_step(acc: f32, d: f32, dx: f32, total: i32) -> f32 {
    acc + d * dx * total as f32
}

/// Dequantizes one K-quant weight row into `out` (`out.len()` values).
pub fn dequantize_row_k(format: KFormat, row: &[u8], out: &mut [f32]) {
    for (blk, o) in row
        .chunks_exact(format.block_bytes())
        .zip(out.chunks_exact_mut(QK_K))
    {
        let u = unpack_k(format, blk);
        // In ggml's order of operations, so that the embedding rows are its own.
        for (i, v) in o.iter_mut().enumerate() {
            let (sc, q) = (u.scale[i / 16] as f32, u.q[i] as i32);
            *v = match format {
                KFormat::Q4K => u.d * sc * q as f32 - u.dmin * u.min[i / 16] as f32,
                KFormat::Q6K => u.d * sc * (q - 32) as f32,
            };
        }
    }
}
