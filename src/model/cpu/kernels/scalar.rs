//! The portable kernel: plain Rust on any CPU, and the reference the SIMD kernels are
//! tested against. Also the block unpacking that dequantization uses.

use super::{f16_to_f32, Format, Q8Row, XPtrs, QK};

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
