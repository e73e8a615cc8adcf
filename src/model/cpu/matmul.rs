//! Quantized weight matrices and the multi-threaded matrix multiplication `y = x · Wᵀ`.
//!
//! [`QMatrix`] holds one GGUF weight tensor in a 32-value block format with a kernel: Q4_1,
//! Q5_0 and Q8_0 as stored; Q4_K is rewritten as Q4_1 (the same 4-bit values, each
//! 32-value sub-block's scale and minimum rounded to f16) and Q6_K as Q8_0 (6-bit values
//! re-quantized to 8 bits), so that one tiled kernel per format serves every preset. [`Acts`] holds a batch of
//! activation rows quantized once per matmul (not once per weight row). [`matmul`] runs any
//! number of matrices that share the same input as one parallel job (Q, K and V; gate and
//! up), so the threads meet once per group instead of once per matrix.
//!
//! Work is split by weight rows: each piece of work is a run of rows of one matrix for every
//! token. Inside it, tokens go four at a time, so each weight block is read from memory and
//! unpacked once per four tokens during prefill; for one token (decode) the loop streams the
//! rows once, which is what bounds decode speed.

use candle_core::quantized::k_quants::{BlockQ6K, GgmlType};

use super::kernels::{self, Format, Isa, Q8Row, QK};

/// Values per K-quant super-block.
pub const QK_K: usize = 256;

/// One weight matrix, `rows × cols`, row-major, in 32-value blocks of `format`.
pub struct QMatrix {
    rows: usize,
    cols: usize,
    format: Format,
    data: Vec<u8>,
}

/// A GGUF quantization type a [`QMatrix`] can be made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// See [`Format::Q4_1`].
    Q4_1,
    /// See [`Format::Q5_0`].
    Q5_0,
    /// See [`Format::Q8_0`].
    Q8_0,
    /// 4-bit K-quant (held as Q4_1).
    Q4K,
    /// 6-bit K-quant (held as Q8_0).
    Q6K,
}

/// Bytes of a Q4_K super-block: `d`, `dmin` (f16), 12 bytes of 6-bit scales and minimums,
/// 128 bytes of nibbles.
const Q4K_BYTES: usize = 144;
/// Bytes of a Q6_K super-block.
const Q6K_BYTES: usize = 210;

fn f16_at(b: &[u8], at: usize) -> f32 {
    kernels::f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// The 6-bit scale and minimum of sub-block `j` of a Q4_K super-block (ggml's
/// `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Rewrites Q4_K super-blocks as Q4_1 blocks: sub-block `j`'s values are
/// `d·sc_j·q − dmin·m_j` with the same 4-bit `q`, which is Q4_1's `d'·q + m'` with
/// `d' = d·sc_j` and `m' = −dmin·m_j`, each rounded to f16.
fn q4k_to_q4_1(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() / Q4K_BYTES * 8 * 20);
    for sb in bytes.chunks_exact(Q4K_BYTES) {
        let (d, dmin) = (f16_at(sb, 0), f16_at(sb, 2));
        let scales = &sb[4..16];
        let qs = &sb[16..];
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, scales);
            // Sub-blocks 2c and 2c + 1 share 32 bytes: low nibbles, then high nibbles.
            let chunk = &qs[32 * (j / 2)..32 * (j / 2) + 32];
            let nib = |i: usize| {
                if j % 2 == 0 {
                    chunk[i] & 0x0F
                } else {
                    chunk[i] >> 4
                }
            };
            out.extend_from_slice(&half::f16::from_f32(d * sc as f32).to_bits().to_le_bytes());
            out.extend_from_slice(
                &half::f16::from_f32(-dmin * m as f32)
                    .to_bits()
                    .to_le_bytes(),
            );
            out.extend((0..16).map(|i| nib(i) | (nib(i + 16) << 4)));
        }
    }
    out
}

/// Re-quantizes Q6_K super-blocks to Q8_0 blocks (one scale per 32 values instead of 16).
fn q6k_to_q8_0(bytes: &[u8]) -> Vec<u8> {
    let n = bytes.len() / Q6K_BYTES;
    let mut blocks: Vec<BlockQ6K> = Vec::with_capacity(n);
    // SAFETY: BlockQ6K is a `repr(C)` struct of byte arrays and an f16 (alignment 2, checked
    // below), valid for any bit pattern; exactly `n` blocks of bytes are copied.
    unsafe {
        assert_eq!(std::mem::size_of::<BlockQ6K>(), Q6K_BYTES);
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            blocks.as_mut_ptr() as *mut u8,
            n * Q6K_BYTES,
        );
        blocks.set_len(n);
    }
    let mut values = vec![0f32; QK_K];
    let mut out = Vec::with_capacity(n * 8 * Format::Q8_0.block_bytes());
    for b in blocks.chunks_exact(1) {
        BlockQ6K::to_float(b, &mut values);
        kernels::quantize_q8_0(&values, &mut out);
    }
    out
}

impl QMatrix {
    /// A matrix from the raw bytes of a GGUF tensor of type `stored`. Errors name what does
    /// not fit: a column count that is not whole blocks, or the wrong number of bytes.
    pub fn from_bytes(
        stored: Stored,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> std::result::Result<Self, String> {
        let (block_values, block_bytes) = match stored {
            Stored::Q4_1 => (QK, Format::Q4_1.block_bytes()),
            Stored::Q5_0 => (QK, Format::Q5_0.block_bytes()),
            Stored::Q8_0 => (QK, Format::Q8_0.block_bytes()),
            Stored::Q4K => (QK_K, Q4K_BYTES),
            Stored::Q6K => (QK_K, Q6K_BYTES),
        };
        if !cols.is_multiple_of(block_values) {
            return Err(format!(
                "{cols} columns are not whole blocks of {block_values} ({stored:?})"
            ));
        }
        let expected = rows * cols / block_values * block_bytes;
        if bytes.len() != expected {
            return Err(format!(
                "{} bytes of {stored:?} data for {rows}×{cols}, expected {expected}",
                bytes.len()
            ));
        }
        let (format, data) = match stored {
            Stored::Q4_1 => (Format::Q4_1, bytes.to_vec()),
            Stored::Q5_0 => (Format::Q5_0, bytes.to_vec()),
            Stored::Q8_0 => (Format::Q8_0, bytes.to_vec()),
            Stored::Q4K => (Format::Q4_1, q4k_to_q4_1(bytes)),
            Stored::Q6K => (Format::Q8_0, q6k_to_q8_0(bytes)),
        };
        Ok(QMatrix {
            rows,
            cols,
            format,
            data,
        })
    }

    /// Output size (rows).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input size (columns).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of weights held.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The block format the rows are held in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Writes row `r` dequantized into `out` (`cols` values): the embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let rb = self.cols / QK * self.format.block_bytes();
        kernels::dequantize_row(self.format, &self.data[r * rb..(r + 1) * rb], out)
    }

    /// Computes rows `r0..r1` of `y` for every token: `out(t, r) = x_t · W_r`, written at
    /// `out[t * stride + r]`.
    ///
    /// # Safety
    /// `out` must be valid for writes at every such index, and no other thread may write them.
    unsafe fn rows_into(
        &self,
        isa: Isa,
        acts: &Acts,
        r0: usize,
        r1: usize,
        out: *mut f32,
        stride: usize,
    ) {
        let n = acts.n;
        let f = self.format;
        let rb = self.cols / QK * f.block_bytes();
        let base = self.data.as_ptr();
        if isa == Isa::Avx512Vnni && n >= PREPACK_FROM {
            return self.prepacked_rows(acts, r0, r1, out, stride);
        }
        let mut t0 = 0;
        while t0 < n {
            let tb = (n - t0).min(4);
            match tb {
                4 => self.block_rows::<4>(isa, f, base, rb, acts, t0, r0, r1, out, stride),
                3 => self.block_rows::<3>(isa, f, base, rb, acts, t0, r0, r1, out, stride),
                2 => self.block_rows::<2>(isa, f, base, rb, acts, t0, r0, r1, out, stride),
                _ => self.block_rows::<1>(isa, f, base, rb, acts, t0, r0, r1, out, stride),
            }
            t0 += tb;
        }
    }

    /// Prefill with AVX-512: rows are unpacked a few at a time into a per-thread buffer that
    /// stays in cache, and each such group of rows meets every token, two rows by four tokens
    /// at a time.
    ///
    /// # Safety
    /// As for [`QMatrix::rows_into`]; the activations carry the pair layout.
    unsafe fn prepacked_rows(
        &self,
        acts: &Acts,
        r0: usize,
        r1: usize,
        out: *mut f32,
        stride: usize,
    ) {
        let blocks = self.cols / QK;
        let np = kernels::pairs(blocks);
        let rb = blocks * self.format.block_bytes();
        let offset = self.format == Format::Q4_1;
        let group = (GROUP_BYTES / (np * 128)).clamp(1, 64);
        PREPACKED.with(|buf| {
            let mut buf = buf.borrow_mut();
            let (w, dw, mw) = &mut *buf;
            w.resize(
                group * np * kernels::PREPACKED_VECTORS,
                kernels::V512([0; 64]),
            );
            dw.resize(group * np * 2, 0.0);
            mw.resize(group * np * 2, 0.0);
            let mut g0 = r0;
            while g0 < r1 {
                let g1 = (g0 + group).min(r1);
                for r in g0..g1 {
                    let i = r - g0;
                    kernels::prepack_row(
                        self.format,
                        self.data.as_ptr().add(r * rb),
                        blocks,
                        &mut w[i * np * 2..(i + 1) * np * 2],
                        &mut dw[i * np * 2..(i + 1) * np * 2],
                        &mut mw[i * np * 2..(i + 1) * np * 2],
                    );
                }
                let mut t0 = 0;
                while t0 < acts.n {
                    let tb = match acts.n - t0 {
                        4.. => 4,
                        2..=3 => 2,
                        _ => 1,
                    };
                    let row = |i: usize| {
                        (
                            &w[i * np * 2..(i + 1) * np * 2],
                            &dw[i * np * 2..(i + 1) * np * 2],
                            &mw[i * np * 2..(i + 1) * np * 2],
                        )
                    };
                    macro_rules! tokens {
                        ($t:literal) => {{
                            let x = acts.ptrs::<$t>(t0);
                            let mut r = g0;
                            // Two rows at a time share each token's loads.
                            while r + 2 <= g1 {
                                let y = kernels::dot_prepacked::<2, $t>(
                                    [row(r - g0), row(r + 1 - g0)],
                                    np,
                                    offset,
                                    &x,
                                );
                                for (i, yr) in y.iter().enumerate() {
                                    for (t, v) in yr.iter().enumerate() {
                                        *out.add((t0 + t) * stride + r + i) = *v;
                                    }
                                }
                                r += 2;
                            }
                            if r < g1 {
                                let y =
                                    kernels::dot_prepacked::<1, $t>([row(r - g0)], np, offset, &x);
                                for (t, v) in y[0].iter().enumerate() {
                                    *out.add((t0 + t) * stride + r) = *v;
                                }
                            }
                        }};
                    }
                    match tb {
                        4 => tokens!(4),
                        2 => tokens!(2),
                        _ => tokens!(1),
                    }
                    t0 += tb;
                }
                g0 = g1;
            }
        });
    }

    /// Rows `r0..r1` for tokens `t0..t0 + T` of a 32-value block format.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    unsafe fn block_rows<const T: usize>(
        &self,
        isa: Isa,
        format: Format,
        base: *const u8,
        row_bytes: usize,
        acts: &Acts,
        t0: usize,
        r0: usize,
        r1: usize,
        out: *mut f32,
        stride: usize,
    ) {
        let x = acts.ptrs::<T>(t0);
        let blocks = self.cols / QK;
        for r in r0..r1 {
            let y = kernels::dot_raw(isa, format, base.add(r * row_bytes), blocks, &x);
            for (t, v) in y.into_iter().enumerate() {
                *out.add((t0 + t) * stride + r) = v;
            }
        }
    }
}

super::multiversion! {
    /// One row of [`Acts::quantize_for`]: the plain layout, then the pair layout when `qp`
    /// is not empty.
    fn quantize_token(
        x: &[f32],
        qs: &mut [i8],
        d: &mut [f32],
        s: &mut [f32],
        qp: &mut [u8],
        dp: &mut [f32],
        sp: &mut [f32],
    ) {
        kernels::quantize_row(x, qs, d, s);
        if !qp.is_empty() {
            kernels::pair_layout(&Q8Row { qs, d, s }, qp, dp, sp);
        }
    }
}

/// Raw pointers to the buffers of [`Acts`], for filling rows in parallel.
struct RowOut {
    qs: *mut i8,
    d: *mut f32,
    s: *mut f32,
    qp: *mut u8,
    dp: *mut f32,
    sp: *mut f32,
}
// SAFETY: rows are disjoint; see `Acts::quantize`.
unsafe impl Sync for RowOut {}

/// Tokens from which a matmul unpacks each row once for all of them (AVX-512 only).
const PREPACK_FROM: usize = 4;

/// Bytes of unpacked rows a thread keeps per group (in its L2 cache).
const GROUP_BYTES: usize = 1 << 18;

type Prepacked = (Vec<kernels::V512>, Vec<f32>, Vec<f32>);

thread_local! {
    /// Per-thread buffer of unpacked rows (see [`QMatrix::prepacked_rows`]).
    static PREPACKED: std::cell::RefCell<Prepacked> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new()))
    };
}

/// A batch of `n` activation rows, quantized for the kernels in 32-value blocks (`qs`, `d`,
/// `s`). Reused between calls so that decoding allocates nothing per token.
#[derive(Default)]
pub struct Acts {
    n: usize,
    cols: usize,
    qs: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
    /// The AVX-512 pair layout of the same rows (see [`kernels::pair_layout`]), made only
    /// when that kernel runs.
    qp: Vec<u8>,
    dp: Vec<f32>,
    sp: Vec<f32>,
    pairs: bool,
}

impl std::fmt::Debug for Acts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acts")
            .field("n", &self.n)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl Acts {
    /// Quantizes `x` (`n` rows of `cols` values, a multiple of 32) for the kernels of
    /// [`Isa::detect`].
    pub fn quantize(&mut self, x: &[f32], n: usize, cols: usize) {
        self.quantize_for(Isa::detect(), x, n, cols)
    }

    /// [`Acts::quantize`] for the kernels of `isa` (tests and benches compare them).
    pub fn quantize_for(&mut self, isa: Isa, x: &[f32], n: usize, cols: usize) {
        assert_eq!(x.len(), n * cols, "quantize: input size");
        assert_eq!(cols % QK, 0, "quantize: width not whole blocks");
        self.n = n;
        self.cols = cols;
        let nb = cols / QK;
        self.pairs = isa == Isa::Avx512Vnni;
        let np = if self.pairs { kernels::pairs(nb) } else { 0 };
        self.qs.resize(n * cols, 0);
        self.d.resize(n * nb, 0.0);
        self.s.resize(n * nb, 0.0);
        self.qp.resize(n * np * kernels::PAIR_BYTES, 0);
        self.dp.resize(n * np * 2, 0.0);
        self.sp.resize(n * np * 2, 0.0);
        let out = RowOut {
            qs: self.qs.as_mut_ptr(),
            d: self.d.as_mut_ptr(),
            s: self.s.as_mut_ptr(),
            qp: self.qp.as_mut_ptr(),
            dp: self.dp.as_mut_ptr(),
            sp: self.sp.as_mut_ptr(),
        };
        let out = &out; // captured whole (it is Sync), not field by field
        let one = |t: usize| {
            // SAFETY: row t's parts of every buffer, sized above; each row is written by one
            // piece of work only.
            unsafe {
                quantize_token(
                    &x[t * cols..(t + 1) * cols],
                    std::slice::from_raw_parts_mut(out.qs.add(t * cols), cols),
                    std::slice::from_raw_parts_mut(out.d.add(t * nb), nb),
                    std::slice::from_raw_parts_mut(out.s.add(t * nb), nb),
                    std::slice::from_raw_parts_mut(
                        out.qp.add(t * np * kernels::PAIR_BYTES),
                        np * kernels::PAIR_BYTES,
                    ),
                    std::slice::from_raw_parts_mut(out.dp.add(t * np * 2), np * 2),
                    std::slice::from_raw_parts_mut(out.sp.add(t * np * 2), np * 2),
                )
            }
        };
        super::pool::for_rows(n, &one);
    }

    /// Pointers to tokens `t0..t0 + T`, the pair layout included when it was made.
    fn ptrs<const T: usize>(&self, t0: usize) -> kernels::XPtrs<T> {
        let mut x = kernels::XPtrs::new(&std::array::from_fn::<_, T, _>(|i| self.row(t0 + i)));
        if self.pairs {
            let np = kernels::pairs(self.cols / QK);
            for i in 0..T {
                let t = t0 + i;
                x.qp[i] = self.qp[t * np * kernels::PAIR_BYTES..].as_ptr();
                x.dp[i] = self.dp[t * np * 2..].as_ptr();
                x.sp[i] = self.sp[t * np * 2..].as_ptr();
            }
        }
        x
    }

    fn row(&self, t: usize) -> Q8Row<'_> {
        let (c, nb) = (self.cols, self.cols / QK);
        Q8Row {
            qs: &self.qs[t * c..(t + 1) * c],
            d: &self.d[t * nb..(t + 1) * nb],
            s: &self.s[t * nb..(t + 1) * nb],
        }
    }
}

/// The most matrices [`matmul`] runs as one job.
pub const MAX_GROUP: usize = 4;

struct OutPtr(*mut f32);
// SAFETY: each piece of work writes a disjoint set of indices (its own rows).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// `outs[i] = acts · mats[i]ᵀ` for every `i`, as one parallel step on [`super::pool`]. Each
/// `outs[i]` holds `acts.n × mats[i].rows()` values, token-major.
///
/// # Panics
/// If a matrix's column count differs from the activations' or an output is the wrong size.
pub fn matmul(mats: &[&QMatrix], acts: &Acts, outs: &mut [&mut [f32]]) {
    matmul_with(Isa::detect(), mats, acts, outs)
}

/// [`matmul`] with the kernels of `isa`, which the CPU must support (see
/// [`Isa::all_supported`]) and for which `acts` was quantized ([`Acts::quantize_for`]).
///
/// # Panics
/// As [`matmul`]; also if the CPU lacks `isa`.
pub fn matmul_with(isa: Isa, mats: &[&QMatrix], acts: &Acts, outs: &mut [&mut [f32]]) {
    assert!(
        isa <= Isa::best_supported(),
        "matmul: {isa:?} is not supported here"
    );
    assert_eq!(mats.len(), outs.len());
    assert!(
        mats.len() <= MAX_GROUP,
        "matmul: at most {MAX_GROUP} matrices at once"
    );
    for (m, o) in mats.iter().zip(outs.iter()) {
        assert_eq!(m.cols, acts.cols, "matmul: input width");
        assert_eq!(o.len(), acts.n * m.rows, "matmul: output size");
    }
    assert!(
        acts.pairs || isa != Isa::Avx512Vnni,
        "matmul: no pair layout"
    );
    let pool = super::pool::global();
    let threads = pool.threads();
    let total_rows: usize = mats.iter().map(|m| m.rows).sum();
    // Prefill: about eight pieces per thread, so that uneven rows (and a busy core) balance
    // out. Decode: two per thread; its steps are a few microseconds long, and each piece
    // taken is a round trip on a cache line both cores write (smollm2 preset, alternating
    // runs: four per thread decoded 6-17% faster than eight, two 0-26% faster than four).
    // At least 16 rows a piece.
    let per_thread = if acts.n == 1 { 2 } else { 8 };
    let chunk = (total_rows / (threads * per_thread))
        .max(16)
        .next_multiple_of(4);
    // Pieces are numbered across the matrices; nothing is allocated per call.
    let mut ptrs = [const { OutPtr(std::ptr::null_mut()) }; MAX_GROUP];
    let mut first = [0usize; MAX_GROUP + 1];
    for (i, (m, o)) in mats.iter().zip(outs.iter_mut()).enumerate() {
        ptrs[i] = OutPtr(o.as_mut_ptr());
        first[i + 1] = first[i] + m.rows.div_ceil(chunk);
    }
    let pieces = first[mats.len()];
    let run = |p: usize| {
        let i = (0..mats.len()).find(|&i| p < first[i + 1]).unwrap_or(0);
        let m = mats[i];
        let r0 = (p - first[i]) * chunk;
        let r1 = (r0 + chunk).min(m.rows);
        // SAFETY: the output was checked to hold n × rows values and pieces do not overlap.
        unsafe { m.rows_into(isa, acts, r0, r1, ptrs[i].0, m.rows) }
    };
    pool.run(pieces, &run);
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2654435761).rotate_left(13);
                (h % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Every instruction set, every stored format, one to nine tokens (so every tail of the
    /// token tiling runs, and the prefill path from four tokens), against the dequantized
    /// weights in f64: the only difference left is the 8-bit
    /// activations, a relative error well under 1%.
    #[test]
    fn matmul_matches_dequantized_weights_for_every_format_and_token_count() {
        let (rows, cols) = (42, 512); // pieces of 16, 16 and 10 rows
        let w = Tensor::from_vec(values(rows * cols, 1), (rows, cols), &Device::Cpu).unwrap();
        for (dtype, stored) in [
            (GgmlDType::Q4_1, Stored::Q4_1),
            (GgmlDType::Q5_0, Stored::Q5_0),
            (GgmlDType::Q8_0, Stored::Q8_0),
            (GgmlDType::Q4K, Stored::Q4K),
            (GgmlDType::Q6K, Stored::Q6K),
        ] {
            let q = QTensor::quantize(&w, dtype).unwrap();
            let deq = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
            let deq = deq.to_vec1::<f32>().unwrap();
            let m = QMatrix::from_bytes(stored, rows, cols, &q.data().unwrap()).unwrap();
            let candle = QMatMul::from_qtensor(q).unwrap();
            for (isa, n) in Isa::all_supported()
                .into_iter()
                .flat_map(|i| (1..=9).map(move |n| (i, n)))
            {
                let x = values(n * cols, 7 + n as u32);
                let mut acts = Acts::default();
                acts.quantize_for(isa, &x, n, cols);
                let mut y = vec![0f32; n * rows];
                matmul_with(isa, &[&m], &acts, &mut [&mut y]);
                let xt = Tensor::from_vec(x.clone(), (n, cols), &Device::Cpu).unwrap();
                let yc = candle.forward(&xt).unwrap().flatten_all().unwrap();
                let yc = yc.to_vec1::<f32>().unwrap();
                for t in 0..n {
                    for r in 0..rows {
                        let exact: f64 = (0..cols)
                            .map(|c| x[t * cols + c] as f64 * deq[r * cols + c] as f64)
                            .sum();
                        let norm: f64 = (0..cols)
                            .map(|c| (x[t * cols + c] as f64 * deq[r * cols + c] as f64).abs())
                            .sum();
                        let got = y[t * rows + r] as f64;
                        assert!(
                            (got - exact).abs() <= 0.01 * norm,
                            "{isa:?} {stored:?} n={n} ({t},{r}): {got} vs {exact} (candle {})",
                            yc[t * rows + r]
                        );
                    }
                }
            }
        }
    }

    /// Q4_K held as Q4_1 keeps the same 4-bit values; only each sub-block's scale and
    /// minimum are rounded to f16, so the weights move by far less than one quantization step.
    #[test]
    fn q4_k_rewritten_as_q4_1_keeps_its_values() {
        let (rows, cols) = (8, 512);
        let w = Tensor::from_vec(values(rows * cols, 5), (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q4K).unwrap();
        let want = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
        let want = want.to_vec1::<f32>().unwrap();
        let m = QMatrix::from_bytes(Stored::Q4K, rows, cols, &q.data().unwrap()).unwrap();
        assert_eq!(m.format(), Format::Q4_1);
        let mut got = vec![0f32; cols];
        for r in 0..rows {
            m.dequantize_row(r, &mut got);
            for c in 0..cols {
                let (a, b) = (got[c], want[r * cols + c]);
                // A 4-bit step here is about 2/15; f16 rounding moves a value by ~1e-3 of it.
                assert!((a - b).abs() <= 2e-3, "({r},{c}): {a} vs {b}");
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors_not_panics() {
        let e = QMatrix::from_bytes(Stored::Q4K, 2, 100, &[]).err().unwrap();
        assert!(e.contains("100 columns"), "{e}");
        let e = QMatrix::from_bytes(Stored::Q8_0, 2, 64, &[0; 10])
            .err()
            .unwrap();
        assert!(e.contains("expected 136"), "{e}");
    }
}
