//! The SIMD kernels against the scalar reference, and the quantizers against ggml's rules.

use super::scalar::unpack_scalar;
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
                (d as f64 * acts[t].d[b] as f64 * s as f64).abs() + (m * acts[t].s[b]).abs() as f64
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

/// Random super-blocks of `format`, every byte pattern allowed (the f16 scales kept finite).
fn random_k_row(format: KFormat, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let mut row = Vec::new();
    for _ in 0..blocks {
        let mut blk: Vec<u8> = (0..format.block_bytes()).map(|_| rng.byte()).collect();
        let mut scale = |at: usize, rng: &mut Rng| {
            let h = half::f16::from_f32(rng.unit() * 0.01);
            blk[at..at + 2].copy_from_slice(&h.to_bits().to_le_bytes());
        };
        match format {
            KFormat::Q4K => {
                scale(0, rng);
                scale(2, rng);
            }
            KFormat::Q6K => scale(208, rng),
        }
        row.extend(blk);
    }
    row
}

struct KActs {
    qs: Vec<i8>,
    d: Vec<f32>,
    bsums: Vec<i16>,
    bsums32: Vec<i16>,
}

fn random_k_acts(blocks: usize, rng: &mut Rng) -> KActs {
    let x: Vec<f32> = (0..blocks * QK_K).map(|_| rng.unit() * 3.0).collect();
    let mut a = KActs {
        qs: vec![0; blocks * QK_K],
        d: vec![0.0; blocks],
        bsums: vec![0; blocks * 16],
        bsums32: vec![0; blocks * 8],
    };
    quantize_row_k(&x, &mut a.qs, &mut a.d, &mut a.bsums, &mut a.bsums32);
    a
}

fn k_row(a: &KActs) -> Q8KRow<'_> {
    Q8KRow {
        qs: &a.qs,
        d: &a.d,
        bsums: &a.bsums,
        bsums32: &a.bsums32,
    }
}

/// The dot product of the dequantized weights with the dequantized activations, in f64,
/// and the sum of the terms' magnitudes (which bounds the f32 rounding of any order of sums).
fn k_reference(format: KFormat, w: &[u8], a: &KActs) -> (f64, f64) {
    let mut values = vec![0f32; w.len() / format.block_bytes() * QK_K];
    dequantize_row_k(format, w, &mut values);
    let (mut total, mut magnitude) = (0f64, 0f64);
    for (i, &v) in values.iter().enumerate() {
        let x = a.d[i / QK_K] as f64 * a.qs[i] as f64;
        total += v as f64 * x;
        magnitude += (v as f64 * x).abs();
    }
    (total, magnitude)
}

fn check_k<const T: usize>(isa: Isa, format: KFormat, blocks: usize, rng: &mut Rng) {
    let w = random_k_row(format, blocks, rng);
    let acts: Vec<KActs> = (0..T).map(|_| random_k_acts(blocks, rng)).collect();
    let x: [Q8KRow; T] = std::array::from_fn(|t| k_row(&acts[t]));
    let got = dot_k(isa, format, &w, &x);
    let reference = dot_k_scalar(format, &w, &x);
    for t in 0..T {
        let (want, magnitude) = k_reference(format, &w, &acts[t]);
        let err = (got[t] as f64 - want).abs();
        assert!(
            err <= 2e-5 * magnitude + 1e-6,
            "{isa:?} {format:?} T={T} blocks={blocks}: got {} want {want} (err {err}, scale {magnitude})",
            got[t]
        );
        let diff = (got[t] - reference[t]).abs() as f64;
        assert!(
            diff <= 2e-5 * magnitude + 1e-6,
            "{isa:?} {format:?} T={T} blocks={blocks}: {} vs the scalar kernel's {}",
            got[t],
            reference[t]
        );
    }
}

/// Q4_K and Q6_K: every kernel of this CPU against the dequantized f64 product and the
/// scalar kernel, for one to four tokens and rows of one to 35 super-blocks (the widths of
/// the presets: 1536 and 8960 values are 6 and 35).
#[test]
fn every_k_quant_kernel_matches_the_dequantized_product_on_random_blocks() {
    let mut rng = Rng(0xD1B54A32D192ED03);
    for isa in Isa::all_supported() {
        for format in [KFormat::Q4K, KFormat::Q6K] {
            for blocks in [1, 2, 3, 6, 19, 35] {
                check_k::<1>(isa, format, blocks, &mut rng);
                check_k::<2>(isa, format, blocks, &mut rng);
                check_k::<3>(isa, format, blocks, &mut rng);
                check_k::<4>(isa, format, blocks, &mut rng);
            }
        }
    }
}

/// With unit scales the K-quant sums are exact integers that f32 holds: every instruction set
/// must agree to the last bit, at the extremes (all-ones nibbles and 6-bit values, scales of
/// 63 and ±127, activations of ±127).
#[test]
fn k_quant_integer_sums_are_exact_in_every_kernel() {
    for format in [KFormat::Q4K, KFormat::Q6K] {
        let blocks = 3;
        let mut w = vec![0xFFu8; blocks * format.block_bytes()];
        for (b, blk) in w.chunks_exact_mut(format.block_bytes()).enumerate() {
            let one = half::f16::from_f32(1.0).to_bits().to_le_bytes();
            match format {
                KFormat::Q4K => {
                    blk[0..2].copy_from_slice(&one);
                    blk[2..4].copy_from_slice(&one);
                    if b == 1 {
                        blk[4..16].fill(0); // scales and minimums of 0
                    }
                }
                KFormat::Q6K => {
                    blk[208..210].copy_from_slice(&one);
                    for g in 0..16 {
                        blk[192 + g] = if (g + b) % 2 == 0 { 127 } else { 0x81 };
                        // ±127
                    }
                }
            }
        }
        // Mostly small values, so that every partial sum stays below 2^24.
        let qs: Vec<i8> = (0..blocks * QK_K)
            .map(|i| match i % 7 {
                0 => -127,
                3 => 127,
                _ => (i % 5) as i8 - 2,
            })
            .collect();
        let d = vec![1.0f32; blocks];
        let bsums: Vec<i16> = qs
            .chunks_exact(16)
            .map(|c| c.iter().map(|&q| q as i16).sum())
            .collect();
        let bsums32: Vec<i16> = bsums.chunks_exact(2).map(|p| p[0] + p[1]).collect();
        let x = [Q8KRow {
            qs: &qs,
            d: &d,
            bsums: &bsums,
            bsums32: &bsums32,
        }];
        let want = dot_k_scalar(format, &w, &x)[0];
        assert!(
            want != 0.0 && want.abs() < (1 << 24) as f32,
            "{format:?}: {want}"
        );
        for isa in Isa::all_supported() {
            assert_eq!(dot_k(isa, format, &w, &x)[0], want, "{isa:?} {format:?}");
        }
    }
}

#[test]
fn k_activations_keep_their_sums_per_16_and_per_32_values() {
    let mut rng = Rng(13);
    let a = random_k_acts(2, &mut rng);
    for (g, &s) in a.bsums.iter().enumerate() {
        let want: i32 = a.qs[16 * g..16 * g + 16].iter().map(|&q| q as i32).sum();
        assert_eq!(s as i32, want);
    }
    for (g, &s) in a.bsums32.iter().enumerate() {
        let want: i32 = a.qs[32 * g..32 * g + 32].iter().map(|&q| q as i32).sum();
        assert_eq!(s as i32, want);
    }
    // The value of largest magnitude in each super-block maps to −127.
    for b in 0..2 {
        assert_eq!(a.qs[b * QK_K..(b + 1) * QK_K].iter().min(), Some(&-127));
    }
}

/// Regression: the AVX-512 K-quant kernels summed in sixteen float lanes, and the 1.5B
/// preset's greedy text left a near-tie of the reference the other way than with AVX2. Now
/// every kernel takes exact integer totals per super-block and the scalar kernel's float
/// step, so all agree with the scalar kernel to the last bit: for one to four tokens, and
/// for the AVX-512 prefill tile of eight ([`KTilePtrs`]), on rows of 1 to 35 super-blocks.
#[test]
fn every_k_quant_kernel_and_tile_agrees_with_the_scalar_kernel_to_the_last_bit() {
    let mut rng = Rng(0x5eed_1234);
    for format in [KFormat::Q4K, KFormat::Q6K] {
        for blocks in [1, 2, 6, 35] {
            let w = random_k_row(format, blocks, &mut rng);
            let acts: Vec<KActs> = (0..KTILE)
                .map(|_| random_k_acts(blocks, &mut rng))
                .collect();
            let x: [Q8KRow; KTILE] = std::array::from_fn(|t| k_row(&acts[t]));
            let want = dot_k_scalar(format, &w, &x).map(f32::to_bits);
            for isa in Isa::all_supported() {
                let four: [Q8KRow; 4] = std::array::from_fn(|t| x[t]);
                let got = dot_k(isa, format, &w, &four).map(f32::to_bits);
                assert_eq!(got, want[..4], "{isa:?} {format:?} {blocks}");
                let one = dot_k(isa, format, &w, &[x[5]])[0].to_bits();
                assert_eq!(one, want[5], "{isa:?} {format:?} {blocks}");
            }
            if !Isa::all_supported().contains(&Isa::Avx512Vnni) {
                continue;
            }
            let mut qs = vec![0i8; blocks * QK_K * KTILE];
            let mut d = vec![0f32; blocks * KTILE];
            let mut bsums = vec![0i16; blocks * 16 * KTILE];
            let mut bsums32 = vec![0i16; blocks * 8 * KTILE];
            for (t, row) in x.iter().enumerate() {
                // SAFETY: each part holds a whole tile of `blocks` super-blocks.
                unsafe {
                    put_k_tile(
                        row,
                        blocks,
                        t,
                        qs.as_mut_ptr(),
                        d.as_mut_ptr(),
                        bsums.as_mut_ptr(),
                        bsums32.as_mut_ptr(),
                    )
                };
            }
            let tile = KTilePtrs {
                qs: qs.as_ptr(),
                d: d.as_ptr(),
                bsums: bsums.as_ptr(),
                bsums32: bsums32.as_ptr(),
            };
            // Results at a stride, as the matmul writes them (token-major).
            let stride = 3;
            let mut out = vec![f32::NAN; KTILE * stride];
            // SAFETY: the row and the tile hold `blocks` super-blocks; AVX-512 checked above;
            // `out` holds eight results `stride` apart.
            unsafe {
                dot_k_tile_raw(
                    Isa::Avx512Vnni,
                    format,
                    w.as_ptr(),
                    blocks,
                    &tile,
                    out.as_mut_ptr(),
                    stride,
                )
            };
            let got: Vec<u32> = (0..KTILE).map(|t| out[t * stride].to_bits()).collect();
            assert_eq!(got, want, "tile {format:?} {blocks}");
        }
    }
}

/// The AMX prefill path against the scalar kernel, through the matmul: every stored format
/// (every byte pattern of the blocks), rows of whole tiles and not (the last piece of a
/// 40-row matrix takes the AVX-512 kernels), widths of one to 35 super-blocks, and token
/// counts with and without a partial last tile. Skipped where the CPU has no AMX.
#[test]
fn amx_prefill_matches_the_scalar_kernel_on_random_blocks() {
    use crate::model::cpu::matmul::{matmul_with, Acts as Batch, Needs, QMatrix, Stored};
    if !Isa::all_supported().contains(&Isa::Amx) {
        eprintln!("skipped: this CPU has no AMX (or the kernel does not grant it)");
        return;
    }
    let mut rng = Rng(0x9E3779B97F4A7C15);
    let cases: [(Stored, &[usize]); 5] = [
        (Stored::Q4_1, &[32, 96, 1536]),
        (Stored::Q5_0, &[32, 96, 1536]),
        (Stored::Q8_0, &[32, 96, 1536]),
        (Stored::Q4K, &[256, 1536, 8960]),
        (Stored::Q6K, &[256, 1536, 8960]),
    ];
    for (stored, widths) in cases {
        for &cols in widths {
            for rows in [48, 40] {
                let mut bytes = Vec::new();
                for _ in 0..rows {
                    bytes.extend(match stored {
                        Stored::Q4_1 => random_row(Format::Q4_1, cols / QK, &mut rng),
                        Stored::Q5_0 => random_row(Format::Q5_0, cols / QK, &mut rng),
                        Stored::Q8_0 => random_row(Format::Q8_0, cols / QK, &mut rng),
                        Stored::Q4K => random_k_row(KFormat::Q4K, cols / QK_K, &mut rng),
                        Stored::Q6K => random_k_row(KFormat::Q6K, cols / QK_K, &mut rng),
                    });
                }
                let m = QMatrix::from_bytes(stored, rows, cols, &bytes).unwrap();
                let mut w = vec![0f32; rows * cols];
                for r in 0..rows {
                    m.dequantize_row(r, &mut w[r * cols..(r + 1) * cols]);
                }
                for n in [16, 17, 40] {
                    let x: Vec<f32> = (0..n * cols).map(|_| rng.unit() * 3.0).collect();
                    let run = |isa: Isa| {
                        let mut acts = Batch::default();
                        acts.quantize_for(isa, &x, n, cols, Needs::ALL);
                        let mut y = vec![0f32; n * rows];
                        matmul_with(isa, &[&m], &acts, &mut [&mut y]);
                        y
                    };
                    let (got, want) = (run(Isa::Amx), run(Isa::Scalar));
                    for t in 0..n {
                        for r in 0..rows {
                            let magnitude: f64 = (0..cols)
                                .map(|c| (w[r * cols + c] as f64 * x[t * cols + c] as f64).abs())
                                .sum();
                            let (g, e) = (got[t * rows + r], want[t * rows + r]);
                            assert!(
                                ((g - e) as f64).abs() <= 1e-5 * magnitude + 1e-6,
                                "{stored:?} {rows}×{cols} n={n} ({t},{r}): AMX {g}, scalar {e} \
                                 (scale {magnitude})"
                            );
                        }
                    }
                }
            }
        }
    }
}
