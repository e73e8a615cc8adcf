//! Prefill on Intel AMX (Advanced Matrix Extensions, `AMX-INT8`): 16 tokens × 16 weight rows
//! per tile instruction.
//!
//! A tile product `tdpb**d` multiplies a 16 × K tile of signed activation bytes (the tokens'
//! quantized rows, read as they lie in memory) by a K × 16 tile of weight bytes and adds the
//! 16 × 16 integer sums to an accumulator tile. The weights' scales change every 16 or 32
//! values, so the sums of each block are stored and scaled with AVX-512 before the next
//! block: `out[t][r] += dx[t] · (a[r] · Σ x·q + b[r] · Σ x)`.
//!
//! The weights are unpacked once per prefill and 16 rows at a time into the tile layout the
//! instruction reads ([`WTile`]: four consecutive values of one row in one 32-bit lane, the
//! 16 rows side by side), with one float scale `a` and offset `b` per block, and then meet
//! every token of the batch. Nothing is repacked at load: the file's blocks stay as stored,
//! and decode (one token) never comes here.
//!
//! The instructions are written in inline assembly (Rust exposes the AMX intrinsics only on
//! its unstable channel). Linux hands out the tile registers only to a process that asks
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM)`), which [`available`] does once; each piece of work
//! loads its tile configuration ([`Config::load`]) and releases the tiles when done.

use super::{f16_to_f32, Format, KFormat, Layout, QK, QK_K};
use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::OnceLock;

/// Tokens (and weight rows) per tile.
pub const TILE: usize = super::AMX_TILE;

/// Whether this CPU has AMX-TILE and AMX-INT8 and the kernel lets this process use them
/// (asked once, process-wide).
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let leaf7 = __cpuid_count(7, 0);
        let (tile, int8) = (leaf7.edx & (1 << 24) != 0, leaf7.edx & (1 << 25) != 0);
        if !(tile && int8) {
            return false;
        }
        #[cfg(target_os = "linux")]
        {
            const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
            const XFEATURE_XTILEDATA: libc::c_long = 18;
            // SAFETY: a plain system call with integer arguments.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                )
            };
            r == 0
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    })
}

/// How a weight format goes into tiles: values per scaled block (`bk`, 32 or 16) and whether
/// its unpacked bytes are signed (then it has no offset term) or unsigned (0..=15, with one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// Values per block with one scale (the tile's K).
    pub bk: usize,
    /// Signed bytes (`tdpbssd`, no offset) or unsigned ones (`tdpbsud`, offset `b`).
    pub signed: bool,
}

impl Form {
    /// The form of a weight layout.
    pub const fn of(layout: Layout) -> Form {
        let (bk, signed) = match layout {
            Layout::Blocks(Format::Q4_1) | Layout::K(KFormat::Q4K) => (32, false),
            Layout::Blocks(Format::Q5_0 | Format::Q8_0) => (32, true),
            Layout::K(KFormat::Q6K) => (16, true),
        };
        Form { bk, signed }
    }
}

/// The tile configuration of one [`Form`]'s block size: tile 0 the activations (16 rows of
/// `bk` bytes), tile 1 the weights (`bk / 4` rows of 64 bytes), tiles 2 and 3 the sums.
#[repr(C, align(64))]
pub struct Config([u8; 64]);

impl Config {
    /// The configuration for blocks of `bk` values.
    pub fn new(bk: usize) -> Config {
        let mut c = [0u8; 64];
        c[0] = 1; // palette 1
        let tiles: [(u16, u8); 4] = [
            (bk as u16, TILE as u8),
            (64, (bk / 4) as u8),
            (64, TILE as u8),
            (64, TILE as u8),
        ];
        for (i, (colsb, rows)) in tiles.into_iter().enumerate() {
            c[16 + 2 * i..18 + 2 * i].copy_from_slice(&colsb.to_le_bytes());
            c[48 + i] = rows;
        }
        Config(c)
    }

    /// Loads the configuration into this thread's tile registers.
    ///
    /// # Safety
    /// [`available`] must have returned `true`; call [`release`] when done.
    pub unsafe fn load(&self) {
        asm!("ldtilecfg [{}]", in(reg) self.0.as_ptr(), options(nostack, readonly));
    }
}

/// Releases this thread's tile registers (so that its saved state is small again).
///
/// # Safety
/// [`available`] must have returned `true`.
pub unsafe fn release() {
    asm!("tilerelease", options(nostack, nomem));
}

/// Sixteen weight rows unpacked for the tiles (see the module doc), in buffers a thread keeps:
/// `q` holds `blocks · bk · 16` bytes (block `j`'s tile at `j · bk · 16`), `a` and `b` one
/// float per block and row (`[j · 16 + r]`).
#[derive(Default)]
pub struct WTile {
    /// The weights, four values of a row per 32-bit lane, the 16 rows side by side.
    pub q: Vec<u8>,
    /// Per block and row, the scale of the integer sum.
    pub a: Vec<f32>,
    /// Per block and row, the factor of the activations' sum (unsigned forms only).
    pub b: Vec<f32>,
    row: Vec<u8>,
}

impl WTile {
    /// Unpacks rows `rows[0..16]` (each `cols` values of `layout`) into the tile buffers.
    ///
    /// # Safety
    /// Each pointer must address one whole row of the layout; AVX-512 BW must be present.
    pub unsafe fn fill(&mut self, layout: Layout, rows: &[*const u8; TILE], cols: usize) {
        let bk = Form::of(layout).bk;
        let nblk = cols / bk;
        self.q.resize(cols * TILE, 0);
        self.a.resize(nblk * TILE, 0.0);
        self.b.resize(nblk * TILE, 0.0);
        self.row.resize(cols, 0);
        let q = self.q.as_mut_ptr() as *mut u32;
        for (r, &p) in rows.iter().enumerate() {
            unpack_row(layout, p, cols, &mut self.row, &mut self.a, &mut self.b, r);
            let src = self.row.as_ptr() as *const u32;
            for g in 0..cols / 4 {
                *q.add(g * TILE + r) = src.add(g).read_unaligned();
            }
        }
    }
}

/// Unpacks one row (`cols` values at `p`) into bytes `out` and per-block `a[j·16 + r]`,
/// `b[j·16 + r]`: the row's value `i` in block `j` is `a·q[i] + b` (unsigned forms) or
/// `a·q[i]` (signed ones, `q` read as `i8`).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn unpack_row(
    layout: Layout,
    p: *const u8,
    cols: usize,
    out: &mut [u8],
    a: &mut [f32],
    b: &mut [f32],
    r: usize,
) {
    let half = |at: *const u8| f16_to_f32((at as *const u16).read_unaligned());
    match layout {
        Layout::Blocks(f) => {
            let bb = f.block_bytes();
            for j in 0..cols / QK {
                let blk = std::slice::from_raw_parts(p.add(j * bb), bb);
                let o = &mut out[j * QK..(j + 1) * QK];
                let d = half(blk.as_ptr());
                a[j * TILE + r] = d;
                match f {
                    Format::Q4_1 => {
                        for i in 0..16 {
                            o[i] = blk[4 + i] & 0x0F;
                            o[i + 16] = blk[4 + i] >> 4;
                        }
                        b[j * TILE + r] = half(blk.as_ptr().add(2));
                    }
                    Format::Q5_0 => {
                        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
                        for i in 0..16 {
                            let lo = blk[6 + i];
                            let h0 = (((qh >> i) & 1) << 4) as u8;
                            let h1 = (((qh >> (i + 16)) & 1) << 4) as u8;
                            o[i] = ((lo & 0x0F) | h0).wrapping_sub(16);
                            o[i + 16] = ((lo >> 4) | h1).wrapping_sub(16);
                        }
                    }
                    Format::Q8_0 => o.copy_from_slice(&blk[2..2 + QK]),
                }
            }
        }
        Layout::K(KFormat::Q4K) => {
            for s in 0..cols / QK_K {
                let blk = std::slice::from_raw_parts(p.add(s * 144), 144);
                let (d, dmin) = (half(blk.as_ptr()), half(blk.as_ptr().add(2)));
                let (scales, qs) = (&blk[4..16], &blk[16..144]);
                let o = &mut out[s * QK_K..(s + 1) * QK_K];
                for c in 0..4 {
                    for i in 0..32 {
                        o[64 * c + i] = qs[32 * c + i] & 0x0F;
                        o[64 * c + 32 + i] = qs[32 * c + i] >> 4;
                    }
                }
                for j in 0..8 {
                    let (sc, m) = super::scalar::scale_min_q4k(j, scales);
                    a[(8 * s + j) * TILE + r] = d * sc as f32;
                    b[(8 * s + j) * TILE + r] = -dmin * m as f32;
                }
            }
        }
        Layout::K(KFormat::Q6K) => {
            for s in 0..cols / QK_K {
                let blk = std::slice::from_raw_parts(p.add(s * 210), 210);
                let (ql, qh, sc) = (&blk[0..128], &blk[128..192], &blk[192..208]);
                let d = half(blk.as_ptr().add(208));
                let o = &mut out[s * QK_K..(s + 1) * QK_K];
                for n in 0..2 {
                    let (ql, qh, y) = (&ql[64 * n..], &qh[32 * n..], &mut o[128 * n..]);
                    for l in 0..32 {
                        y[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)).wrapping_sub(32);
                        y[l + 32] =
                            ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)).wrapping_sub(32);
                        y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)).wrapping_sub(32);
                        y[l + 96] =
                            ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)).wrapping_sub(32);
                    }
                }
                for (h, &v) in sc.iter().enumerate() {
                    a[(16 * s + h) * TILE + r] = d * v as i8 as f32;
                }
            }
        }
    }
}

/// The activations of 16 tokens for [`tile_dot`]: row `t`'s quantized values at
/// `q + t · stride` (rows past the batch may hold anything: their results are not used),
/// and per token its scales.
#[derive(Clone, Copy)]
pub struct XTile {
    /// Token 0's first quantized value.
    pub q: *const i8,
    /// Bytes from one token's values to the next's.
    pub stride: usize,
    /// Token `t`'s scale for the values of block `j` (of the weights' `bk`) is
    /// `d[t · d_stride + j · bk / d_span]`.
    pub d: *const f32,
    /// Floats from one token's scales to the next's.
    pub d_stride: usize,
    /// Values per activation scale: 32 (block formats) or 256 (K-quants).
    pub d_span: usize,
    /// For unsigned forms, token `t`'s sum of block `j`: `s[t · s_stride + j]`, already
    /// multiplied by the scale when `d_span` is 32 (the blocks' `s`), not when it is 256.
    pub s: *const f32,
    /// Floats from one token's sums to the next's.
    pub s_stride: usize,
}

/// One tile product of block `j`: the sums of 16 tokens × 16 rows, stored to `c` (16 rows
/// of 16 `i32`), with tile register `tmm2`.
#[inline(always)]
unsafe fn product<const SIGNED: bool>(x: *const i8, xs: usize, w: *const u8, c: *mut i32) {
    if SIGNED {
        asm!(
            "tileloadd tmm0, [{x} + {xs}*1]",
            "tileloadd tmm1, [{w} + {ws}*1]",
            "tilezero tmm2",
            "tdpbssd tmm2, tmm0, tmm1",
            "tilestored [{c} + {ws}*1], tmm2",
            x = in(reg) x, xs = in(reg) xs, w = in(reg) w, ws = in(reg) 64usize, c = in(reg) c,
            options(nostack),
        );
    } else {
        asm!(
            "tileloadd tmm0, [{x} + {xs}*1]",
            "tileloadd tmm1, [{w} + {ws}*1]",
            "tilezero tmm2",
            "tdpbsud tmm2, tmm0, tmm1",
            "tilestored [{c} + {ws}*1], tmm2",
            x = in(reg) x, xs = in(reg) xs, w = in(reg) w, ws = in(reg) 64usize, c = in(reg) c,
            options(nostack),
        );
    }
}

/// Sixteen tokens against sixteen unpacked weight rows over all `cols` values; returns
/// `out[t][r]`.
///
/// Scales per 32 values (`x.d_span` 32) are applied block by block; per 256 (K-quants) the
/// blocks' sums are gathered in float first and scaled once per super-block.
///
/// # Safety
/// [`available`]; the tile configuration of `BK` loaded ([`Config::load`]); `w` filled with
/// `cols` values of a format of this [`Form`]; `x` valid for 16 rows of `cols` values.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")]
pub unsafe fn tile_dot<const BK: usize, const SIGNED: bool>(
    w: &WTile,
    x: &XTile,
    cols: usize,
) -> [[f32; TILE]; TILE] {
    #[repr(C, align(64))]
    struct Sums([i32; TILE * TILE]);
    let mut c = Sums([0; TILE * TILE]);
    let cp = c.0.as_mut_ptr();
    let nblk = cols / BK;
    let (wq, wa, wb) = (w.q.as_ptr(), w.a.as_ptr(), w.b.as_ptr());
    let mut acc = [_mm512_setzero_ps(); TILE];
    if x.d_span == QK_K {
        let per = QK_K / BK;
        for sb in 0..cols / QK_K {
            let mut part = [_mm512_setzero_ps(); TILE];
            for j in sb * per..(sb + 1) * per {
                product::<SIGNED>(x.q.add(j * BK), x.stride, wq.add(j * BK * TILE), cp);
                let av = _mm512_loadu_ps(wa.add(j * TILE));
                let bv = _mm512_loadu_ps(wb.add(j * TILE));
                for (t, p) in part.iter_mut().enumerate() {
                    let v = _mm512_cvtepi32_ps(_mm512_load_si512(cp.add(t * TILE) as *const _));
                    *p = _mm512_fmadd_ps(v, av, *p);
                    if !SIGNED {
                        let s = _mm512_set1_ps(*x.s.add(t * x.s_stride + j));
                        *p = _mm512_fmadd_ps(bv, s, *p);
                    }
                }
            }
            for (t, (a, p)) in acc.iter_mut().zip(part).enumerate() {
                *a = _mm512_fmadd_ps(p, _mm512_set1_ps(*x.d.add(t * x.d_stride + sb)), *a);
            }
        }
    } else {
        for j in 0..nblk {
            product::<SIGNED>(x.q.add(j * BK), x.stride, wq.add(j * BK * TILE), cp);
            let av = _mm512_loadu_ps(wa.add(j * TILE));
            let bv = _mm512_loadu_ps(wb.add(j * TILE));
            for (t, a) in acc.iter_mut().enumerate() {
                let v = _mm512_cvtepi32_ps(_mm512_load_si512(cp.add(t * TILE) as *const _));
                let dx = _mm512_set1_ps(*x.d.add(t * x.d_stride + j * BK / QK));
                *a = _mm512_fmadd_ps(_mm512_mul_ps(v, av), dx, *a);
                if !SIGNED {
                    let s = _mm512_set1_ps(*x.s.add(t * x.s_stride + j));
                    *a = _mm512_fmadd_ps(bv, s, *a);
                }
            }
        }
    }
    let mut out = [[0f32; TILE]; TILE];
    for (o, a) in out.iter_mut().zip(acc) {
        _mm512_storeu_ps(o.as_mut_ptr(), a);
    }
    out
}
