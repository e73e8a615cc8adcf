//! Quantized weight matrices and the multi-threaded matrix multiplication `y = x · Wᵀ`.
//!
//! [`QMatrix`] holds one GGUF weight tensor in its stored format. [`Acts`] holds a batch of
//! activation rows quantized once per matmul (not once per weight row). [`matmul`] runs any
//! number of matrices that share the same input as one parallel job (Q, K and V; gate and
//! up), so the threads meet once per group instead of once per matrix.
//!
//! Work is split by weight rows: each piece of work is a run of rows of one matrix for every
//! token. Inside it, tokens go four at a time, so each weight block is read from memory and
//! unpacked once per four tokens during prefill; for one token (decode) the loop streams the
//! rows once, which is what bounds decode speed.

use candle_core::quantized::k_quants::{BlockQ4K, BlockQ6K, BlockQ8K, GgmlType};

use super::kernels::{self, Format, Isa, Q8Row, QK};

/// Values per K-quant super-block.
pub const QK_K: usize = 256;

/// How a matrix's rows are stored.
enum Data {
    /// 32-value blocks with a kernel in [`kernels`].
    Blocks(Format, Vec<u8>),
    /// Q4_K super-blocks (dot products by candle's K-quant kernels).
    Q4K(Vec<BlockQ4K>),
    /// Q6_K super-blocks.
    Q6K(Vec<BlockQ6K>),
}

/// One weight matrix, `rows × cols`, row-major, quantized as stored in the GGUF file.
pub struct QMatrix {
    rows: usize,
    cols: usize,
    data: Data,
}

/// A GGUF quantization type a [`QMatrix`] can hold as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// See [`Format::Q4_1`].
    Q4_1,
    /// See [`Format::Q5_0`].
    Q5_0,
    /// See [`Format::Q8_0`].
    Q8_0,
    /// 4-bit K-quant.
    Q4K,
    /// 6-bit K-quant.
    Q6K,
}

/// Copies raw bytes into a vector of `#[repr(C)]` plain-data blocks.
fn blocks_from_bytes<B>(bytes: &[u8]) -> Vec<B> {
    let size = std::mem::size_of::<B>();
    let n = bytes.len() / size;
    let mut v: Vec<B> = Vec::with_capacity(n);
    // SAFETY: the block types are `repr(C)` structs of integers and f16 values, valid for any
    // bit pattern; exactly `n * size` bytes are copied into the reserved space.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, n * size);
        v.set_len(n);
    }
    v
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
            Stored::Q4K => (QK_K, std::mem::size_of::<BlockQ4K>()),
            Stored::Q6K => (QK_K, std::mem::size_of::<BlockQ6K>()),
        };
        if cols % block_values != 0 {
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
        let data = match stored {
            Stored::Q4_1 => Data::Blocks(Format::Q4_1, bytes.to_vec()),
            Stored::Q5_0 => Data::Blocks(Format::Q5_0, bytes.to_vec()),
            Stored::Q8_0 => Data::Blocks(Format::Q8_0, bytes.to_vec()),
            Stored::Q4K => Data::Q4K(blocks_from_bytes(bytes)),
            Stored::Q6K => Data::Q6K(blocks_from_bytes(bytes)),
        };
        Ok(QMatrix { rows, cols, data })
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
        match &self.data {
            Data::Blocks(_, b) => b.len(),
            Data::Q4K(b) => b.len() * std::mem::size_of::<BlockQ4K>(),
            Data::Q6K(b) => b.len() * std::mem::size_of::<BlockQ6K>(),
        }
    }

    /// Whether the activations must be quantized in 256-value K blocks for this matrix.
    fn needs_k(&self) -> bool {
        !matches!(self.data, Data::Blocks(..))
    }

    /// Writes row `r` dequantized into `out` (`cols` values): the embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let c = self.cols;
        match &self.data {
            Data::Blocks(f, b) => {
                let rb = c / QK * f.block_bytes();
                kernels::dequantize_row(*f, &b[r * rb..(r + 1) * rb], out)
            }
            Data::Q4K(b) => {
                let n = c / QK_K;
                BlockQ4K::to_float(&b[r * n..(r + 1) * n], out)
            }
            Data::Q6K(b) => {
                let n = c / QK_K;
                BlockQ6K::to_float(&b[r * n..(r + 1) * n], out)
            }
        }
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
        match &self.data {
            Data::Blocks(f, data) => {
                let blocks = self.cols / QK;
                let rb = blocks * f.block_bytes();
                let base = data.as_ptr();
                let mut t0 = 0;
                while t0 < n {
                    let tb = (n - t0).min(4);
                    match tb {
                        4 => self.block_rows::<4>(isa, *f, base, rb, acts, t0, r0, r1, out, stride),
                        3 => self.block_rows::<3>(isa, *f, base, rb, acts, t0, r0, r1, out, stride),
                        2 => self.block_rows::<2>(isa, *f, base, rb, acts, t0, r0, r1, out, stride),
                        _ => self.block_rows::<1>(isa, *f, base, rb, acts, t0, r0, r1, out, stride),
                    }
                    t0 += tb;
                }
            }
            Data::Q4K(b) => self.k_rows(b, acts, r0, r1, out, stride),
            Data::Q6K(b) => self.k_rows(b, acts, r0, r1, out, stride),
        }
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
        let x = kernels::XPtrs::new(&std::array::from_fn::<_, T, _>(|i| acts.row(t0 + i)));
        let blocks = self.cols / QK;
        for r in r0..r1 {
            let y = kernels::dot_raw(isa, format, base.add(r * row_bytes), blocks, &x);
            for (t, v) in y.into_iter().enumerate() {
                *out.add((t0 + t) * stride + r) = v;
            }
        }
    }

    unsafe fn k_rows<B: GgmlType<VecDotType = BlockQ8K>>(
        &self,
        blocks: &[B],
        acts: &Acts,
        r0: usize,
        r1: usize,
        out: *mut f32,
        stride: usize,
    ) {
        let nb = self.cols / QK_K;
        for t in 0..acts.n {
            let x = &acts.k[t * nb..(t + 1) * nb];
            for r in r0..r1 {
                let v = B::vec_dot(self.cols, &blocks[r * nb..(r + 1) * nb], x);
                *out.add(t * stride + r) = v;
            }
        }
    }
}

/// A batch of `n` activation rows of `k` values, quantized for the kernels: 32-value blocks
/// (`qs`, `d`, `s`) and, when a K-quant matrix needs them, 256-value Q8_K blocks. Reused
/// between calls so that decoding allocates nothing per token.
#[derive(Default)]
pub struct Acts {
    n: usize,
    cols: usize,
    qs: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
    k: Vec<BlockQ8K>,
}

impl Acts {
    /// Quantizes `x` (`n` rows of `cols` values); `k_blocks` also makes the Q8_K form.
    pub fn quantize(&mut self, x: &[f32], n: usize, cols: usize, k_blocks: bool) {
        debug_assert_eq!(x.len(), n * cols);
        self.n = n;
        self.cols = cols;
        let nb = cols / QK;
        self.qs.resize(n * cols, 0);
        self.d.resize(n * nb, 0.0);
        self.s.resize(n * nb, 0.0);
        for t in 0..n {
            kernels::quantize_row(
                &x[t * cols..(t + 1) * cols],
                &mut self.qs[t * cols..(t + 1) * cols],
                &mut self.d[t * nb..(t + 1) * nb],
                &mut self.s[t * nb..(t + 1) * nb],
            );
        }
        if k_blocks && cols % QK_K == 0 {
            let kb = cols / QK_K;
            if self.k.len() < n * kb {
                // SAFETY: BlockQ8K is plain data (f32, i8 and i16 arrays); all zeros is valid.
                self.k
                    .resize_with(n * kb, || unsafe { std::mem::zeroed::<BlockQ8K>() });
            }
            for t in 0..n {
                BlockQ8K::from_float(
                    &x[t * cols..(t + 1) * cols],
                    &mut self.k[t * kb..(t + 1) * kb],
                );
            }
        }
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

/// Whether any of `mats` needs Q8_K activations (see [`Acts::quantize`]).
pub fn needs_k(mats: &[&QMatrix]) -> bool {
    mats.iter().any(|m| m.needs_k())
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
    assert_eq!(mats.len(), outs.len());
    assert!(
        mats.len() <= MAX_GROUP,
        "matmul: at most {MAX_GROUP} matrices at once"
    );
    for (m, o) in mats.iter().zip(outs.iter()) {
        assert_eq!(m.cols, acts.cols, "matmul: input width");
        assert_eq!(o.len(), acts.n * m.rows, "matmul: output size");
        if m.needs_k() {
            assert!(
                acts.k.len() >= acts.n * m.cols / QK_K,
                "matmul: no Q8_K input"
            );
        }
    }
    let isa = Isa::detect();
    let pool = super::pool::global();
    let threads = pool.threads();
    let total_rows: usize = mats.iter().map(|m| m.rows).sum();
    // About eight pieces per thread so that uneven rows (and a busy core) balance out; at
    // least 16 rows per piece so that the hand-off costs little next to the work.
    let chunk = (total_rows / (threads * 8))
        .clamp(16, 512)
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

    /// Every stored format, one to nine tokens (so every tail of the four-token tiling
    /// runs), against the dequantized weights in f64: the only difference left is the 8-bit
    /// activations, a relative error well under 1%.
    #[test]
    fn matmul_matches_dequantized_weights_for_every_format_and_token_count() {
        let (rows, cols) = (40, 512);
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
            for n in 1..=9 {
                let x = values(n * cols, 7 + n as u32);
                let mut acts = Acts::default();
                acts.quantize(&x, n, cols, needs_k(&[&m]));
                let mut y = vec![0f32; n * rows];
                matmul(&[&m], &acts, &mut [&mut y]);
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
                            "{stored:?} n={n} ({t},{r}): {got} vs {exact} (candle {})",
                            yc[t * rows + r]
                        );
                    }
                }
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
