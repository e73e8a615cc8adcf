//! Quantized weight matrices and the multi-threaded matrix multiplication `y = x · Wᵀ`.
//!
//! [`QMatrix`] holds one GGUF weight tensor in a format with a kernel, as stored: the
//! 32-value block formats Q4_1, Q5_0 and Q8_0, and the 256-value K-quants Q4_K and Q6_K. Its
//! bytes are either owned or, when loaded from a file, the file's own pages mapped into
//! memory ([`Bytes`]), so loading copies and converts nothing. [`Acts`] holds a batch of
//! activation rows quantized once per matmul (not once per weight row), in the layouts the
//! matrices' kernels need. [`matmul`] runs any number of matrices that share the same input
//! as one parallel job (Q, K and V; gate and up), so the threads meet once per group instead
//! of once per matrix.
//!
//! Work is split by weight rows: each piece of work is a run of rows of one matrix for every
//! token. Inside it, tokens go four at a time, so each weight block is read from memory and
//! unpacked once per four tokens during prefill; for one token (decode) the loop streams the
//! rows once, which is what bounds decode speed.

use std::sync::Arc;

pub use super::kernels::Layout;
use super::kernels::{self, Format, Isa, KFormat, Q8KRow, Q8Row, AMX_TILE, KTILE, QK, QK_K};

/// The bytes of a matrix: owned, or a range of a memory-mapped file.
pub enum Bytes {
    /// Bytes in memory (converted tensors, tests).
    Owned(Vec<u8>),
    /// `len` bytes at `offset` of a mapped file, used in place.
    Mapped {
        /// The whole file's mapping, shared by every matrix read from it.
        map: Arc<memmap2::Mmap>,
        /// Where the tensor's data starts.
        offset: usize,
        /// Its length.
        len: usize,
    },
}

impl Bytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Mapped { map, offset, len } => &map[*offset..*offset + *len],
        }
    }
}

/// One weight matrix, `rows × cols`, row-major, in blocks of its [`Layout`].
pub struct QMatrix {
    rows: usize,
    cols: usize,
    layout: Layout,
    data: Bytes,
}

/// A GGUF quantization type a [`QMatrix`] can be made from: each has a kernel and is used
/// as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// See [`Format::Q4_1`].
    Q4_1,
    /// See [`Format::Q5_0`].
    Q5_0,
    /// See [`Format::Q8_0`].
    Q8_0,
    /// See [`KFormat::Q4K`].
    Q4K,
    /// See [`KFormat::Q6K`].
    Q6K,
}

impl Stored {
    /// The layout its rows are computed on.
    pub const fn layout(self) -> Layout {
        match self {
            Stored::Q4_1 => Layout::Blocks(Format::Q4_1),
            Stored::Q5_0 => Layout::Blocks(Format::Q5_0),
            Stored::Q8_0 => Layout::Blocks(Format::Q8_0),
            Stored::Q4K => Layout::K(KFormat::Q4K),
            Stored::Q6K => Layout::K(KFormat::Q6K),
        }
    }
}

impl QMatrix {
    /// A matrix from the raw bytes of a GGUF tensor of type `stored` (copied). Errors name
    /// what does not fit: a column count that is not whole blocks, or the wrong number of
    /// bytes.
    pub fn from_bytes(
        stored: Stored,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> std::result::Result<Self, String> {
        Self::check(stored, rows, cols, bytes.len())?;
        Ok(QMatrix {
            rows,
            cols,
            layout: stored.layout(),
            data: Bytes::Owned(bytes.to_vec()),
        })
    }

    /// A matrix on `len` bytes at `offset` of a mapped GGUF file, used in place; errors as
    /// [`QMatrix::from_bytes`], and when the range is not inside the mapping.
    pub fn mapped(
        stored: Stored,
        rows: usize,
        cols: usize,
        map: Arc<memmap2::Mmap>,
        offset: usize,
        len: usize,
    ) -> std::result::Result<Self, String> {
        Self::check(stored, rows, cols, len)?;
        if offset.checked_add(len).is_none_or(|end| end > map.len()) {
            return Err(format!(
                "its data ({len} bytes at {offset}) runs past the end of the file ({} bytes)",
                map.len()
            ));
        }
        Ok(QMatrix {
            rows,
            cols,
            layout: stored.layout(),
            data: Bytes::Mapped { map, offset, len },
        })
    }

    fn check(
        stored: Stored,
        rows: usize,
        cols: usize,
        len: usize,
    ) -> std::result::Result<(), String> {
        let layout = stored.layout();
        let (block_values, block_bytes) = (layout.block_values(), layout.block_bytes());
        if !cols.is_multiple_of(block_values) {
            return Err(format!(
                "{cols} columns are not whole blocks of {block_values} ({})",
                layout.name()
            ));
        }
        let expected = rows
            .checked_mul(cols / block_values)
            .and_then(|b| b.checked_mul(block_bytes));
        if expected != Some(len) {
            return Err(format!(
                "{len} bytes of {} data for {rows}×{cols}, expected {}",
                layout.name(),
                expected.map_or("more than memory holds".to_string(), |e| e.to_string())
            ));
        }
        Ok(())
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
        self.data.as_slice().len()
    }

    /// Whether the weights are the file's own mapped pages (not a copy).
    pub fn is_mapped(&self) -> bool {
        matches!(self.data, Bytes::Mapped { .. })
    }

    /// The layout the rows are held and computed in.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Bytes of one row.
    fn row_bytes(&self) -> usize {
        self.cols / self.layout.block_values() * self.layout.block_bytes()
    }

    /// Writes row `r` dequantized into `out` (`cols` values): the embedding lookup.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let rb = self.row_bytes();
        let row = &self.data.as_slice()[r * rb..(r + 1) * rb];
        match self.layout {
            Layout::Blocks(f) => kernels::dequantize_row(f, row, out),
            Layout::K(f) => kernels::dequantize_row_k(f, row, out),
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
        let rb = self.row_bytes();
        let base = self.data.as_slice().as_ptr();
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Amx && acts.amx && (r1 - r0).is_multiple_of(AMX_TILE) {
            return self.amx_rows(acts, r0, r1, out, stride);
        }
        let f = match self.layout {
            Layout::Blocks(f) => f,
            Layout::K(f) => return self.k_rows(isa, f, base, rb, acts, r0, r1, out, stride),
        };
        if isa >= Isa::Avx512Vnni && n >= PREPACK_FROM {
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
        let Layout::Blocks(format) = self.layout else {
            unreachable!("prepacked rows are for 32-value blocks")
        };
        let rb = blocks * format.block_bytes();
        let offset = format == Format::Q4_1;
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
                        format,
                        self.data.as_slice().as_ptr().add(r * rb),
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

    /// Prefill with AMX: rows are unpacked sixteen at a time into the tile layout (a few
    /// such tiles per group, kept in cache), and each group meets every token, sixteen at a
    /// time ([`kernels::amx`]).
    ///
    /// # Safety
    /// As for [`QMatrix::rows_into`]; AMX is available, the activations were quantized for
    /// it ([`Acts::amx`]) and `r1 - r0` is whole tiles.
    #[cfg(target_arch = "x86_64")]
    unsafe fn amx_rows(&self, acts: &Acts, r0: usize, r1: usize, out: *mut f32, stride: usize) {
        use kernels::amx;
        const TILE: usize = AMX_TILE;
        let form = amx::Form::of(self.layout);
        let (cols, rb) = (self.cols, self.row_bytes());
        let base = self.data.as_slice().as_ptr();
        let group = (GROUP_BYTES * 2 / (cols * TILE)).clamp(1, 8);
        amx::Config::new(form.bk).load();
        AMX_TILES.with(|tiles| {
            let mut tiles = tiles.borrow_mut();
            if tiles.len() < group {
                tiles.resize_with(group, Default::default);
            }
            let mut g0 = r0;
            while g0 < r1 {
                let g1 = (g0 + group * TILE).min(r1);
                let n_tiles = (g1 - g0) / TILE;
                for (i, tile) in tiles.iter_mut().take(n_tiles).enumerate() {
                    let rows = std::array::from_fn(|r| base.add((g0 + i * TILE + r) * rb));
                    tile.fill(self.layout, &rows, cols);
                }
                let mut t0 = 0;
                while t0 < acts.n {
                    let x = acts.xtile(self.layout, t0);
                    for (i, tile) in tiles.iter().take(n_tiles).enumerate() {
                        let y = match (form.bk, form.signed) {
                            (32, false) => amx::tile_dot::<32, false>(tile, &x, cols),
                            (32, true) => amx::tile_dot::<32, true>(tile, &x, cols),
                            (16, true) => amx::tile_dot::<16, true>(tile, &x, cols),
                            _ => unreachable!("no AMX form {form:?}"),
                        };
                        for (t, yt) in y.iter().enumerate().take(acts.n - t0) {
                            let dst = out.add((t0 + t) * stride + g0 + i * TILE);
                            std::ptr::copy_nonoverlapping(yt.as_ptr(), dst, TILE);
                        }
                    }
                    t0 += TILE;
                }
                g0 = g1;
            }
        });
        amx::release();
    }

    /// Rows `r0..r1` of a K-quant matrix for every token: eight tokens at a time with
    /// AVX-512, whose 32 registers hold eight tokens' sums (each row's unpacked nibbles and
    /// scales then serve twice as many tokens: the 1.5B preset's pp512 went from 73–75 to
    /// 77–78 tok/s on a 2-core AMD EPYC with AVX-512), read from the tile layout
    /// ([`kernels::KTilePtrs`]); four otherwise, and for the tokens past the last whole tile.
    /// Every kernel gives the scalar kernel's result to the last bit, so the results do not
    /// change with the tile.
    ///
    /// # Safety
    /// As for [`QMatrix::rows_into`]; the activations carry the K layout.
    #[allow(clippy::too_many_arguments)]
    unsafe fn k_rows(
        &self,
        isa: Isa,
        format: KFormat,
        base: *const u8,
        row_bytes: usize,
        acts: &Acts,
        r0: usize,
        r1: usize,
        out: *mut f32,
        stride: usize,
    ) {
        let blocks = self.cols / QK_K;
        let wide = isa >= Isa::Avx512Vnni;
        let mut t0 = 0;
        #[cfg(target_arch = "x86_64")]
        if wide {
            for tile in 0..acts.ktiles {
                let x = acts.ktile(tile);
                for r in r0..r1 {
                    let (row, dst) = (base.add(r * row_bytes), out.add(t0 * stride + r));
                    kernels::dot_k_tile_raw(isa, format, row, blocks, &x, dst, stride);
                }
                t0 += KTILE;
            }
        }
        while t0 < acts.n {
            // Tiles of eight where there are eight left (AVX-512), else of up to four.
            let tb = match acts.n - t0 {
                8.. if wide => 8,
                left => left.min(4),
            };
            macro_rules! tokens {
                ($t:literal) => {{
                    let x = acts.kptrs::<$t>(t0);
                    for r in r0..r1 {
                        let y =
                            kernels::dot_k_raw(isa, format, base.add(r * row_bytes), blocks, &x);
                        for (t, v) in y.into_iter().enumerate() {
                            *out.add((t0 + t) * stride + r) = v;
                        }
                    }
                }};
            }
            match tb {
                8 => tokens!(8),
                4 => tokens!(4),
                3 => tokens!(3),
                2 => tokens!(2),
                _ => tokens!(1),
            }
            t0 += tb;
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
    /// One row of [`Acts::quantize_for`]: the block layout when `qs` is not empty, its pair
    /// layout when `qp` is not empty, and the K layout when `kqs` is not empty (with the
    /// sums per 32 values also as floats in `kb32` when that is not empty, for AMX).
    fn quantize_token(
        x: &[f32],
        qs: &mut [i8],
        d: &mut [f32],
        s: &mut [f32],
        qp: &mut [u8],
        dp: &mut [f32],
        sp: &mut [f32],
        kqs: &mut [i8],
        kd: &mut [f32],
        kbs: &mut [i16],
        kbs32: &mut [i16],
        kb32: &mut [f32],
    ) {
        if !qs.is_empty() {
            kernels::quantize_row(x, qs, d, s);
            if !qp.is_empty() {
                kernels::pair_layout(&Q8Row { qs, d, s }, qp, dp, sp);
            }
        }
        if !kqs.is_empty() {
            kernels::quantize_row_k(x, kqs, kd, kbs, kbs32);
            for (o, &s) in kb32.iter_mut().zip(kbs32.iter()) {
                *o = s as f32;
            }
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
    kqs: *mut i8,
    kd: *mut f32,
    kbs: *mut i16,
    kbs32: *mut i16,
    kb32: *mut f32,
    tq: *mut i8,
    td: *mut f32,
    tbs: *mut i16,
    tbs32: *mut i16,
}
// SAFETY: rows are disjoint; see `Acts::quantize`.
unsafe impl Sync for RowOut {}

/// Which activation layouts a group of matrices needs (see [`Acts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// 32-value blocks ([`Q8Row`]), for the [`Layout::Blocks`] formats.
    pub blocks: bool,
    /// 256-value super-blocks ([`Q8KRow`]), for the [`Layout::K`] formats.
    pub k: bool,
}

impl Needs {
    /// Every layout (the K one only where the width is whole super-blocks).
    pub const ALL: Needs = Needs {
        blocks: true,
        k: true,
    };

    /// The layouts the kernels of `mats` read.
    pub fn of(mats: &[&QMatrix]) -> Needs {
        Needs {
            blocks: mats.iter().any(|m| matches!(m.layout, Layout::Blocks(_))),
            k: mats.iter().any(|m| matches!(m.layout, Layout::K(_))),
        }
    }
}

/// Tokens from which a matmul unpacks each row once for all of them (AVX-512 only).
const PREPACK_FROM: usize = 4;

/// Bytes of unpacked rows a thread keeps per group (in its L2 cache).
const GROUP_BYTES: usize = 1 << 18;

/// Tokens from which a matmul runs on AMX tiles (where the CPU has them): below, the tile's
/// sixteen rows would be mostly padding.
const AMX_FROM: usize = 16;

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// Per-thread weight tiles (see [`QMatrix::amx_rows`]).
    static AMX_TILES: std::cell::RefCell<Vec<kernels::amx::WTile>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

type Prepacked = (Vec<kernels::V512>, Vec<f32>, Vec<f32>);

thread_local! {
    /// Per-thread buffer of unpacked rows (see [`QMatrix::prepacked_rows`]).
    static PREPACKED: std::cell::RefCell<Prepacked> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new()))
    };
}

/// A batch of `n` activation rows, quantized for the kernels: in 32-value blocks (`qs`, `d`,
/// `s`) for the block formats, and in 256-value super-blocks (`kqs`, `kd`, `kbs`) for the
/// K-quants, each made only when a matrix of the matmul needs it ([`Needs`]). Reused
/// between calls so that decoding allocates nothing per token.
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
    kqs: Vec<i8>,
    kd: Vec<f32>,
    kbs: Vec<i16>,
    /// The K layout's sums per 32 values.
    kbs32: Vec<i16>,
    /// The K layout's sums per 32 values as floats (AMX only).
    kb32: Vec<f32>,
    /// The first `ktiles` whole tiles of eight tokens again in the tile layout
    /// ([`kernels::KTilePtrs`]), for the AVX-512 K-quant prefill kernels.
    tq: Vec<i8>,
    td: Vec<f32>,
    tbs: Vec<i16>,
    tbs32: Vec<i16>,
    ktiles: usize,
    made: Needs,
    pairs: bool,
    /// Quantized for AMX: every buffer holds the rows of `n` rounded up to whole tiles of
    /// 16 tokens (the rows past `n` are never read into a result), and `kb32` is made.
    amx: bool,
}

impl std::fmt::Debug for Acts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acts")
            .field("n", &self.n)
            .field("cols", &self.cols)
            .field("made", &self.made)
            .finish_non_exhaustive()
    }
}

impl Acts {
    /// Quantizes `x` (`n` rows of `cols` values, a multiple of 32) for the kernels of
    /// [`Isa::detect`] and the layouts `mats` need.
    pub fn quantize(&mut self, x: &[f32], n: usize, cols: usize, mats: &[&QMatrix]) {
        self.quantize_for(Isa::detect(), x, n, cols, Needs::of(mats))
    }

    /// [`Acts::quantize`] for the kernels of `isa` and the layouts `needs` asks for (tests
    /// and benches compare them); the K layout is made only when `cols` is whole
    /// super-blocks.
    pub fn quantize_for(&mut self, isa: Isa, x: &[f32], n: usize, cols: usize, needs: Needs) {
        assert_eq!(x.len(), n * cols, "quantize: input size");
        assert_eq!(cols % QK, 0, "quantize: width not whole blocks");
        self.n = n;
        self.cols = cols;
        self.made = Needs {
            blocks: needs.blocks,
            k: needs.k && cols.is_multiple_of(QK_K),
        };
        let (nb, nk) = (cols / QK, cols / QK_K);
        let bl = if self.made.blocks { 1 } else { 0 };
        self.pairs = isa >= Isa::Avx512Vnni && self.made.blocks;
        self.amx = isa == Isa::Amx && n >= AMX_FROM;
        // Rows held: whole tiles for AMX, whose tile loads read sixteen rows.
        let held = if self.amx {
            n.next_multiple_of(AMX_TILE)
        } else {
            n
        };
        let np = if self.pairs { kernels::pairs(nb) } else { 0 };
        let kl = if self.made.k { 1 } else { 0 };
        let k32 = if self.made.k && self.amx { 1 } else { 0 };
        self.qs.resize(bl * held * cols, 0);
        self.d.resize(bl * held * nb, 0.0);
        self.s.resize(bl * held * nb, 0.0);
        self.qp.resize(n * np * kernels::PAIR_BYTES, 0);
        self.dp.resize(n * np * 2, 0.0);
        self.sp.resize(n * np * 2, 0.0);
        self.kqs.resize(kl * held * cols, 0);
        self.kd.resize(kl * held * nk, 0.0);
        self.kbs.resize(kl * held * nk * 16, 0);
        self.kbs32.resize(kl * held * nk * 8, 0);
        self.kb32.resize(k32 * held * nk * 8, 0.0);
        // The tile layout where the AVX-512 K-quant kernels run it (AMX prefill reads the
        // rows as they are).
        self.ktiles = if self.made.k && isa >= Isa::Avx512Vnni && !self.amx {
            n / KTILE
        } else {
            0
        };
        let tn = self.ktiles * KTILE;
        self.tq.resize(tn * cols, 0);
        self.td.resize(tn * nk, 0.0);
        self.tbs.resize(tn * nk * 16, 0);
        self.tbs32.resize(tn * nk * 8, 0);
        let out = RowOut {
            qs: self.qs.as_mut_ptr(),
            d: self.d.as_mut_ptr(),
            s: self.s.as_mut_ptr(),
            qp: self.qp.as_mut_ptr(),
            dp: self.dp.as_mut_ptr(),
            sp: self.sp.as_mut_ptr(),
            kqs: self.kqs.as_mut_ptr(),
            kd: self.kd.as_mut_ptr(),
            kbs: self.kbs.as_mut_ptr(),
            kbs32: self.kbs32.as_mut_ptr(),
            kb32: self.kb32.as_mut_ptr(),
            tq: self.tq.as_mut_ptr(),
            td: self.td.as_mut_ptr(),
            tbs: self.tbs.as_mut_ptr(),
            tbs32: self.tbs32.as_mut_ptr(),
        };
        let out = &out; // captured whole (it is Sync), not field by field
        let (bc, bnb, kc, knk) = (bl * cols, bl * nb, kl * cols, kl * nk);
        let k8 = k32 * nk * 8;
        let one = |t: usize| {
            // SAFETY: row t's parts of every buffer, sized above (empty for a layout not
            // made); each row is written by one piece of work only.
            unsafe {
                quantize_token(
                    &x[t * cols..(t + 1) * cols],
                    std::slice::from_raw_parts_mut(out.qs.add(t * bc), bc),
                    std::slice::from_raw_parts_mut(out.d.add(t * bnb), bnb),
                    std::slice::from_raw_parts_mut(out.s.add(t * bnb), bnb),
                    std::slice::from_raw_parts_mut(
                        out.qp.add(t * np * kernels::PAIR_BYTES),
                        np * kernels::PAIR_BYTES,
                    ),
                    std::slice::from_raw_parts_mut(out.dp.add(t * np * 2), np * 2),
                    std::slice::from_raw_parts_mut(out.sp.add(t * np * 2), np * 2),
                    std::slice::from_raw_parts_mut(out.kqs.add(t * kc), kc),
                    std::slice::from_raw_parts_mut(out.kd.add(t * knk), knk),
                    std::slice::from_raw_parts_mut(out.kbs.add(t * knk * 16), knk * 16),
                    std::slice::from_raw_parts_mut(out.kbs32.add(t * knk * 8), knk * 8),
                    std::slice::from_raw_parts_mut(out.kb32.add(t * k8), k8),
                );
                if t < tn {
                    // The token's place in its tile: disjoint from every other token's.
                    let tile = t / KTILE;
                    kernels::put_k_tile(
                        &Q8KRow {
                            qs: std::slice::from_raw_parts(out.kqs.add(t * kc), kc),
                            d: std::slice::from_raw_parts(out.kd.add(t * knk), knk),
                            bsums: std::slice::from_raw_parts(out.kbs.add(t * knk * 16), knk * 16),
                            bsums32: std::slice::from_raw_parts(
                                out.kbs32.add(t * knk * 8),
                                knk * 8,
                            ),
                        },
                        nk,
                        t % KTILE,
                        out.tq.add(tile * KTILE * cols),
                        out.td.add(tile * KTILE * nk),
                        out.tbs.add(tile * KTILE * nk * 16),
                        out.tbs32.add(tile * KTILE * nk * 8),
                    );
                }
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

    /// Pointers to tokens `t0..t0 + T` in the K layout.
    fn kptrs<const T: usize>(&self, t0: usize) -> kernels::KPtrs<T> {
        let (c, nk) = (self.cols, self.cols / QK_K);
        kernels::KPtrs::new(&std::array::from_fn::<_, T, _>(|i| {
            let t = t0 + i;
            Q8KRow {
                qs: &self.kqs[t * c..(t + 1) * c],
                d: &self.kd[t * nk..(t + 1) * nk],
                bsums: &self.kbs[t * nk * 16..(t + 1) * nk * 16],
                bsums32: &self.kbs32[t * nk * 8..(t + 1) * nk * 8],
            }
        }))
    }

    /// Tile `tile` of the tile layout (see [`Acts::ktiles`]).
    #[cfg(target_arch = "x86_64")]
    fn ktile(&self, tile: usize) -> kernels::KTilePtrs {
        let (c, nk) = (self.cols, self.cols / QK_K);
        kernels::KTilePtrs {
            qs: self.tq[tile * KTILE * c..].as_ptr(),
            d: self.td[tile * KTILE * nk..].as_ptr(),
            bsums: self.tbs[tile * KTILE * nk * 16..].as_ptr(),
            bsums32: self.tbs32[tile * KTILE * nk * 8..].as_ptr(),
        }
    }

    /// Tokens `t0..t0 + 16` for the AMX kernels of `layout` (see [`Acts::amx`]).
    #[cfg(target_arch = "x86_64")]
    fn xtile(&self, layout: Layout, t0: usize) -> kernels::amx::XTile {
        use kernels::amx::XTile;
        let (c, nb, nk) = (self.cols, self.cols / QK, self.cols / QK_K);
        match layout {
            Layout::Blocks(_) => XTile {
                q: self.qs[t0 * c..].as_ptr(),
                stride: c,
                d: self.d[t0 * nb..].as_ptr(),
                d_stride: nb,
                d_span: QK,
                s: self.s[t0 * nb..].as_ptr(),
                s_stride: nb,
            },
            Layout::K(_) => XTile {
                q: self.kqs[t0 * c..].as_ptr(),
                stride: c,
                d: self.kd[t0 * nk..].as_ptr(),
                d_stride: nk,
                d_span: QK_K,
                s: self.kb32[t0 * nk * 8..].as_ptr(),
                s_stride: nk * 8,
            },
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
    let needs = Needs::of(mats);
    assert!(
        (acts.made.blocks || !needs.blocks) && (acts.made.k || !needs.k),
        "matmul: activations quantized without a layout a matrix needs"
    );
    assert!(
        acts.pairs || isa < Isa::Avx512Vnni || !needs.blocks,
        "matmul: no pair layout"
    );
    assert!(
        !acts.amx || isa == Isa::Amx,
        "matmul: activations quantized for AMX, kernels of {isa:?}"
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
    // Whole tiles of 16 rows for AMX (every preset's matrices are whole tiles; a matrix
    // that is not takes the AVX-512 kernels for its last piece).
    let chunk = (total_rows / (threads * per_thread))
        .max(16)
        .next_multiple_of(if acts.amx { AMX_TILE } else { 4 });
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

    /// Every instruction set, every stored format, one to thirteen tokens (so every tail of
    /// the token tiling runs, after tiles of four and of eight, and the prefill path from four
    /// tokens), against the dequantized
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
                .flat_map(|i| (1..=13).map(move |n| (i, n)))
            {
                let x = values(n * cols, 7 + n as u32);
                let mut acts = Acts::default();
                acts.quantize_for(isa, &x, n, cols, Needs::ALL);
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

    /// Q4_K and Q6_K rows are computed on as stored: the matrix holds the file's bytes, and
    /// its rows dequantize to candle's values exactly (the embedding lookup).
    #[test]
    fn k_quants_are_held_as_stored_and_dequantize_like_candle() {
        let (rows, cols) = (8, 512);
        let w = Tensor::from_vec(values(rows * cols, 5), (rows, cols), &Device::Cpu).unwrap();
        for (dtype, stored, name) in [
            (GgmlDType::Q4K, Stored::Q4K, "Q4_K"),
            (GgmlDType::Q6K, Stored::Q6K, "Q6_K"),
        ] {
            let q = QTensor::quantize(&w, dtype).unwrap();
            let want = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
            let want = want.to_vec1::<f32>().unwrap();
            let data = q.data().unwrap();
            let m = QMatrix::from_bytes(stored, rows, cols, &data).unwrap();
            assert_eq!(m.layout().name(), name);
            assert_eq!(m.bytes(), data.len(), "{name}: held as stored");
            let mut got = vec![0f32; cols];
            for r in 0..rows {
                m.dequantize_row(r, &mut got);
                assert_eq!(got, want[r * cols..(r + 1) * cols], "{name} row {r}");
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
        let e = QMatrix::from_bytes(Stored::Q6K, 2, 256, &[0; 400])
            .err()
            .unwrap();
        assert!(
            e.contains("400 bytes of Q6_K") && e.contains("expected 420"),
            "{e}"
        );
    }
}
